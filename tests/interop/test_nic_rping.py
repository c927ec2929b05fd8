"""Linux siw's rping against the simulated NIC's RDMA, all of it in gateware after MPA setup:
``rnic nic-sim`` on the siw VM's virtual cable, ``rnic rping -s --device tcp:`` of it (the NIC
listens, the host negotiates MPA through its stream port and commits the connection to
FPDUs; from then on its TCP engine and core move every octet: rping's Sends, the server's
RDMA Reads of the client's buffer and its RDMA Writes back), and ``rping -c`` in the guest
over its ``eth1``/``siw1``; and the NIC as the client of the guest's ``rping -s``. Cases: CRC
on and off, rping's largest size (65535: multi-FPDU Read Responses and Writes), and the NIC
as an RFC 6581 peer-to-peer initiator with the Write or the Read RTR. The ping data is
checked on both sides. Skips, with the reason, when the siw VM is not prepared
(tests/interop/conftest.py).
"""

from __future__ import annotations

import json
import signal

import pytest

from rnic.host.driver.regs import Registers
from rnic.host.driver.transport import SocketTransport
from tests.interop.test_rping_siw import expected, guest_lines
from tests.interop.test_tcp_echo import READY_TIMEOUT

pytestmark = pytest.mark.slow

RPING_PORT = 7174
COUNT, SIZE = 3, 64


def start_nic(siw_vm, rnic, free_port, free_udp_port):
    """``rnic nic-sim`` on a virtual cable: ``(process, control port, its --device, the
    guest's --wire)``."""
    siw_vm.require("default")               # (before the NIC's build: skip early)
    nic_port, qemu_port, control = free_udp_port(), free_udp_port(), free_port()
    nic = rnic.start(["nic-sim", "--wire", f"{nic_port}:{qemu_port}", "--control", control,
                      "--json"])
    ready = rnic.first_json_line(nic, timeout=READY_TIMEOUT)
    assert ready["event"] == "ready", ready
    return nic, control, f"tcp:127.0.0.1:{control}", (qemu_port, nic_port)


def check_nic(nic, control, count=COUNT):
    """The core framed and deframed FPDUs, none with an error; ``rnic nic-sim`` stops."""
    regs = Registers(SocketTransport("127.0.0.1", control))
    counters = regs.counters()
    assert counters["rx_fpdus"] >= 2 * count and counters["tx_fpdus"] >= 2 * count, counters
    assert counters["rx_crc_errors"] == counters["rx_marker_errors"] == 0, counters
    nic.send_signal(signal.SIGTERM)
    _, stderr = nic.communicate(timeout=30)
    assert nic.returncode == 0, stderr


def test_linux_rping_client_to_the_nic(siw_vm, rnic, free_port, free_udp_port):
    result = siw_client_to_nic(siw_vm, rnic, free_port, free_udp_port)
    neg = result["negotiated"]
    assert neg["crc"] and neg["rev"] == 2 and not neg["p2p"]


@pytest.mark.parametrize("our_args,count,size", [
    (["--no-crc"], 2, 4000),                # CRC off; Read Responses and Writes of 3 FPDUs
    ([], 1, 65535),                         # rping's largest size
], ids=["no-crc-4000", "65535"])
def test_linux_rping_client_to_the_nic_variants(siw_vm, rnic, free_port, free_udp_port,
                                                our_args, count, size):
    result = siw_client_to_nic(siw_vm, rnic, free_port, free_udp_port, our_args=our_args,
                               count=count, size=size)
    assert result["negotiated"]["crc"] is not our_args


def siw_client_to_nic(siw_vm, rnic, free_port, free_udp_port, *, variant="default",
                      our_args=(), count=COUNT, size=SIZE):
    """siw's ``rping -c`` in the guest (``variant``) to ``rnic rping -s`` on the NIC; the
    ping data checked on both sides; our JSON result."""
    nic, control, device, wire = start_nic(siw_vm, rnic, free_port, free_udp_port)
    server = rnic.start(["rping", "-s", "-p", RPING_PORT, "-S", size, "-v", "-V", *our_args,
                         "--timeout", "60", "--json", "--device", device])
    listening = rnic.first_json_line(server, timeout=60)
    assert listening["event"] == "listening" and listening["port"] == RPING_PORT

    vm = siw_vm.start(variant, f"rping -c -a 169.254.7.2 -p {RPING_PORT} -C {count} "
                               f"-S {size} -v -V; echo RPING_EXIT $?",
                      wire=wire)
    vm_rc, vm_out = vm.wait()
    try:
        out, err = server.communicate(timeout=60)
    except Exception:
        server.kill()
        out, err = server.communicate()
    result = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    want = expected(count, size)
    assert guest_lines(vm_out, "") == want, f"guest:\n{vm_out}\nrnic rping -s: {out}\n{err}"
    assert "RPING_EXIT 0" in vm_out, vm_out
    assert server.returncode == 0, f"rnic rping -s failed: {err}\nguest:\n{vm_out}"
    assert result["ok"] and result["pings"] == want, result
    check_nic(nic, control, count)
    return result


@pytest.mark.parametrize("our_args,count,size", [
    ([], COUNT, SIZE),
    (["--p2p", "--rtr", "write"], 2, 64),   # RFC 6581 peer-to-peer, the Write RTR first
    (["--p2p", "--rtr", "read"], 2, 64),    # the Read RTR
    (["--no-crc"], 2, 1000),
], ids=["default", "p2p-write", "p2p-read", "no-crc-1000"])
def test_the_nic_rping_client_to_linux(siw_vm, rnic, free_port, free_udp_port, our_args,
                                       count, size):
    """The NIC opens the connection (its first SYN waits for ARP) to rping -s in the guest."""
    nic, control, device, wire = start_nic(siw_vm, rnic, free_port, free_udp_port)
    vm = siw_vm.start("default", f"rping -s -a 169.254.7.1 -p {RPING_PORT} -S {size} -v & "
                                 "sleep 0.3; echo LISTENING; wait $!; echo RPING_EXIT $?",
                      wire=wire)
    vm.wait_for("LISTENING")
    rc, out, err = rnic.run(["rping", "-c", "-a", "169.254.7.1", "-p", RPING_PORT, "-C", count,
                             "-S", size, "-v", "-V", *our_args, "--timeout", "60", "--json",
                             "--device", device])
    vm_rc, vm_out = vm.wait()
    want = expected(count, size)
    assert rc == 0, f"rnic rping -c failed: {out}\n{err}\nguest:\n{vm_out}"
    result = json.loads(out)
    assert result["ok"] and result["pings"] == want, result
    assert guest_lines(vm_out, "server ") == want, vm_out
    assert "RPING_EXIT 0" in vm_out, vm_out
    neg = result["negotiated"]
    assert neg["crc"] is ("--no-crc" not in our_args)
    if "--p2p" in our_args:
        assert neg["p2p"] and neg["rtr"] == our_args[-1]
    check_nic(nic, control, count)
