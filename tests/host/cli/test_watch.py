"""``rnic status --watch`` (host/cli/watch.py) and the network part of ``rnic status``: the
counters with their rates per refresh, a live table on a terminal, a line (or JSON object)
per refresh when piped; a NIC's addresses and frame counters."""

import io
import json
import subprocess
import sys

from rnic.host.cli.watch import flat_counters, snapshot, watch
from rnic.host.driver.device import Device
from rnic.host.driver.model import ModelTransport
from rnic.host.spec.net import RxDrop


class _Clock:
    """A clock that a sleep moves on, and a counter the NIC's traffic moves."""

    def __init__(self, transport):
        self.t, self.transport, self.fpdus = 100.0, transport, 0

    def __call__(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds
        self.fpdus += 50                                  # 100 FPDUs a second
        self.transport.core.set_counters(rx_fpdus=self.fpdus)


def _device():
    transport = ModelTransport(width=4, connections=4, network=1, arp_entries=4)
    return Device(transport), transport


def test_rates_follow_the_counters():
    dev, transport = _device()
    clock = _Clock(transport)
    out = io.StringIO()
    watch(dev, interval=0.5, count=3, as_json=True, out=out, sleep=clock.sleep, clock=clock)
    snaps = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(snaps) == 3 and snaps[0]["rates"] == {}
    assert [s["counters"]["rnic rx fpdus"] for s in snaps] == [0, 50, 100]
    assert [s["rates"]["rnic rx fpdus"] for s in snaps[1:]] == [100.0, 100.0]
    assert [s["elapsed_s"] for s in snaps] == [0.0, 0.5, 1.0]
    assert snaps[2]["counters"]["net frames in"] == 0 and "tcp segments out" not in snaps[2]["counters"]


def test_live_table_and_piped_lines():
    dev, transport = _device()
    clock = _Clock(transport)
    out = io.StringIO()
    watch(dev, interval=1, count=2, out=out, live=True, sleep=clock.sleep, clock=clock)
    text = out.getvalue()
    assert "169.254.7.2/24  mac 02:00:0a:07:00:02  gateway none" in text
    assert "no open connection" in text
    assert "counters (every 1 s" in text and "rnic rx fpdus" in text and "50.0" in text
    out = io.StringIO()
    watch(dev, interval=1, count=2, out=out, sleep=clock.sleep, clock=clock)
    first, second = out.getvalue().splitlines()
    assert first.startswith("0.0 s: rnic rx fpdus 50,") and "/s" not in first
    assert second.startswith("1.0 s: rnic rx fpdus 100 (+50.0/s)")


def test_network_status():
    dev, transport = _device()
    dev.regs.set_ip("10.1.2.3", 16)
    transport.bank.set_input("NET_RX_GOOD", "COUNT", 7)
    transport.bank.set_input("NET_RX_FCS", "COUNT", 2)
    net = dev.status()["network"]
    assert (net["ip"], net["prefix"], net["gateway"]) == ("10.1.2.3", 16, None)
    assert net["rx_good"] == 7 and net["rx_drops"] == {RxDrop.FCS.name: 2}
    assert flat_counters(dev.status())["net frames dropped in"] == 2
    assert Device(ModelTransport()).status()["network"] is None
    assert snapshot(dev.status(), None, 0)["rates"] == {}


def test_cli_watch():
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", "status", "--watch", "0.05",
                           "--count", "2", "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(lines) == 2 and lines[1]["rates"]["rnic tx fpdus"] == 0
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", "status", "--count", "2"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
