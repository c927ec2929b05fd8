"""Linux's TCP against the NIC's TCP engine: ``rnic nic-sim --echo 7`` on the siw VM's
virtual cable, the guest's ``nc`` sends 1 MiB to the echo service (RFC 862, answered in
gateware) and reads it back; the SHA-256 of what came back must equal what was sent. Once
over a clean cable, once through a relay (tests/interop/conftest.py ``relay``) that drops,
duplicates and reorders 2 % of the frames each way. Then the NIC's register view: the
connection was accepted and is gone, nothing the guest sent was malformed. And the NIC's
active open: Linux listens, the NIC connects as the echo service. Skips, with the reason,
when the siw VM is not prepared (tests/interop/conftest.py).
"""

from __future__ import annotations

import json
import re
import signal
import time

import pytest

from rnic.host.driver.regs import Registers
from rnic.host.driver.transport import SocketTransport
from rnic.host.spec.tcp_engine import TcpDrop, TcpEventKind

pytestmark = pytest.mark.slow

OCTETS = 1 << 20
#: The guest sends the file through nc and reads the echo from a FIFO until all of it came
#: back (nc need not half-close), then stops nc: its socket's close ends the connection.
GUEST = (f"head -c {OCTETS} /dev/urandom > /tmp/sent; mkfifo /tmp/back.fifo; "
         "nc 169.254.7.2 7 < /tmp/sent > /tmp/back.fifo & NC=$!; "
         f"timeout 600 head -c {OCTETS} /tmp/back.fifo > /tmp/back; kill $NC; sleep 1; "
         "sha256sum /tmp/sent /tmp/back; echo BACK $(wc -c < /tmp/back); echo ECHO_DONE")
READY_TIMEOUT = 900
GUEST_TIMEOUT = 900


def check_echoed(out):
    """The guest's output says that all it sent came back, its SHA-256 the same."""
    assert "ECHO_DONE" in out, out
    hashes = re.findall(r"^([0-9a-f]{64})\s+/tmp/(sent|back)\s*$", out, re.M)
    assert [name for _, name in hashes] == ["sent", "back"], out
    assert hashes[0][0] == hashes[1][0], out
    assert f"BACK {OCTETS}" in out, out


def stop(nic, control):
    """The NIC's queued events (kinds) and TCP counters, then ``rnic nic-sim`` stopped."""
    regs = Registers(SocketTransport("127.0.0.1", control))
    events = [e.kind for e in regs.tcp_events()]
    counters = regs.tcp_counters()
    nic.send_signal(signal.SIGTERM)
    _, stderr = nic.communicate(timeout=30)
    assert nic.returncode == 0, stderr
    return events, counters


@pytest.mark.parametrize("rate", [0.0, 0.02], ids=["clean", "relay"])
def test_linux_nc_through_the_echo_service(siw_vm, rnic, free_port, free_udp_port, relay,
                                           rate):
    siw_vm.require("default")               # (before the NIC's build: skip early)
    nic_port, qemu_port, control = free_udp_port(), free_udp_port(), free_port()
    to_nic, to_qemu = nic_port, qemu_port
    middle = None
    if rate:
        middle = relay(to_a=nic_port, to_b=qemu_port, rate=rate, seed=5)
        to_nic, to_qemu = middle.a_port, middle.b_port
    nic = rnic.start(["nic-sim", "--wire", f"{nic_port}:{to_qemu}", "--control", control,
                      "--echo", 7, "--json"])
    ready = rnic.first_json_line(nic, timeout=READY_TIMEOUT)
    assert ready["event"] == "ready" and ready["echo"] == [7]

    t0 = time.monotonic()
    vm = siw_vm.start("default", GUEST, wire=(qemu_port, to_nic), timeout=GUEST_TIMEOUT)
    rc, out = vm.wait(timeout=GUEST_TIMEOUT + 30)
    elapsed = time.monotonic() - t0
    check_echoed(out)
    events, counters = stop(nic, control)
    assert events[0] is TcpEventKind.ACCEPTED, events
    assert counters["drops"][TcpDrop.BAD_OPTIONS] == 0, counters
    print(f"\necho of {OCTETS} octets through Linux nc, cable loss {rate:.0%}: "
          f"{elapsed:.1f} s with the VM's boot, {2 * OCTETS / elapsed / 1e3:.1f} kB/s both "
          f"ways; NIC segments sent {counters['tx_segments']}, drops "
          f"{ {k.name: v for k, v in counters['drops'].items() if v} }"
          + (f"; relay {middle.counts}" if middle else ""))


#: The guest listens with nc, sends the file to whoever connects and reads the echo back
#: from a FIFO, as above.
GUEST_LISTEN = (f"head -c {OCTETS} /dev/urandom > /tmp/sent; mkfifo /tmp/back.fifo; "
                "nc -l -p 5001 < /tmp/sent > /tmp/back.fifo & NC=$!; sleep 1; "
                "echo LISTENING; "
                f"timeout 600 head -c {OCTETS} /tmp/back.fifo > /tmp/back; kill $NC; sleep 1; "
                "sha256sum /tmp/sent /tmp/back; echo BACK $(wc -c < /tmp/back); echo ECHO_DONE")


def test_the_nic_connects_to_linux_nc(siw_vm, rnic, free_port, free_udp_port):
    """The other way round: Linux listens (``nc -l``), the NIC opens the connection
    (``rnic tcp connect --echo``: an active open in gateware, the first SYN waiting for
    ARP) as an echo connection, and the guest's 1 MiB comes back whole."""
    siw_vm.require("default")
    nic_port, qemu_port, control = free_udp_port(), free_udp_port(), free_port()
    nic = rnic.start(["nic-sim", "--wire", f"{nic_port}:{qemu_port}", "--control", control,
                      "--json"])
    ready = rnic.first_json_line(nic, timeout=READY_TIMEOUT)
    assert ready["event"] == "ready"
    t0 = time.monotonic()
    vm = siw_vm.start("default", GUEST_LISTEN, wire=(qemu_port, nic_port),
                      timeout=GUEST_TIMEOUT)
    vm.wait_for("LISTENING", timeout=120)
    rc, out, err = rnic.run(["tcp", "connect", "169.254.7.1", 5001, "--local-port", 40000,
                             "--echo", "--wait", 60, "--json",
                             "--device", f"tcp:127.0.0.1:{control}"], timeout=120)
    assert rc == 0, (out, err)
    assert json.loads(out)["state"] == "ESTABLISHED", out
    rc, out = vm.wait(timeout=GUEST_TIMEOUT + 30)
    elapsed = time.monotonic() - t0
    check_echoed(out)
    events, counters = stop(nic, control)
    assert events[0] is TcpEventKind.CONNECTED, events
    print(f"\nthe NIC connected to Linux nc -l and echoed {OCTETS} octets: {elapsed:.1f} s "
          f"with the VM's boot; NIC segments sent {counters['tx_segments']} "
          f"({counters['retransmits']} again)")
