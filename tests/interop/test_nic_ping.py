"""Linux pings the simulated NIC: ``rnic nic-sim`` on the siw VM's virtual cable.

``rnic nic-sim --wire A:B`` (the NIC takes frames on UDP A, sends to B) and
``siw-vm run --wire B:A -- 'ping ...'`` (qemu's dgram netdev on the guest's eth1,
169.254.7.1/24): the guest's kernel resolves 169.254.7.2 with ARP and pings it with 0, 56
and 1472 octets of data, three each; every ping must come back (0 % loss), and the NIC's
counters (read through its register server, --device tcp:...) must agree with what crossed
the cable. Skips, with the reason, when the siw VM is not prepared (tests/interop/conftest.py).
"""

from __future__ import annotations

import json
import re
import signal

import pytest

from rnic.host.driver.regs import Registers
from rnic.host.driver.transport import SocketTransport
from rnic.host.spec.net import RxDrop

pytestmark = pytest.mark.slow

GUEST = ("ping -c 3 -s 0 169.254.7.2; ping -c 3 169.254.7.2; ping -c 3 -s 1472 169.254.7.2; "
         "echo PINGS_DONE")
#: A first run of nic-sim builds the simulation (about a minute).
READY_TIMEOUT = 900


def test_linux_pings_the_simulated_nic(siw_vm, rnic, free_port, free_udp_port):
    siw_vm.require("default")               # (before the NIC's build: skip early)
    nic_port, qemu_port, control = free_udp_port(), free_udp_port(), free_port()
    nic = rnic.start(["nic-sim", "--wire", f"{nic_port}:{qemu_port}", "--control", control,
                      "--json"])
    ready = rnic.first_json_line(nic, timeout=READY_TIMEOUT)
    assert ready["event"] == "ready" and ready["ip"] == "169.254.7.2"

    vm = siw_vm.start("default", GUEST, wire=(qemu_port, nic_port))
    rc, out = vm.wait()
    assert rc == 0 and "PINGS_DONE" in out, out
    runs = re.findall(r"(\d+) packets transmitted, (\d+) (?:packets )?received", out)
    assert runs == [("3", "3")] * 3, out
    assert len(re.findall(r"\b0% packet loss", out)) == 3, out

    regs = Registers(SocketTransport("127.0.0.1", control))
    counters = regs.net_counters()
    nic.send_signal(signal.SIGTERM)
    stdout, stderr = nic.communicate(timeout=30)
    assert nic.returncode == 0, stderr
    stopped = json.loads(stdout.splitlines()[-1])

    rx = counters["rx"]
    # Every frame the guest sent was well formed: the MAC took each one but its IPv6
    # multicast (neighbour discovery, MLD), which a NIC without multicast filters drops as
    # OTHER_MAC; the good ones hold at least the 9 echo requests and an ARP request.
    assert rx[RxDrop.NONE] + rx[RxDrop.OTHER_MAC] == stopped["frames_in"], (rx, stopped)
    assert rx[RxDrop.NONE] >= 9 + 1, rx
    for reason in (RxDrop.FCS, RxDrop.RUNT, RxDrop.GIANT, RxDrop.OVERFLOW,
                   RxDrop.IP_HEADER, RxDrop.IP_CHECKSUM, RxDrop.IP_FRAGMENT,
                   RxDrop.ICMP_OTHER, RxDrop.TCP_HEADER, RxDrop.TCP_CHECKSUM):
        assert rx[reason] == 0, (reason, rx)
    # what the NIC sent: the 9 echo replies and its ARP replies, all of them on the cable
    assert counters["tx_frames"] == stopped["frames_out"] >= 9 + 1, (counters, stopped)
    assert counters["tx_dropped"] == 0 and stopped["bad_out"] == 0
