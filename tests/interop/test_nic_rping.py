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
import re
import signal

import pytest

from rnic.host.driver.regs import Registers
from rnic.host.driver.transport import SocketTransport
from tests.interop.test_rping_siw import expected, guest_lines
from tests.interop.test_tcp_echo import READY_TIMEOUT

pytestmark = pytest.mark.slow

RPING_PORT = 7174
COUNT, SIZE = 3, 64


def start_nic(siw_vm, rnic, free_port, free_udp_port, relay=None, rate=0.0):
    """``rnic nic-sim`` on a virtual cable (through ``relay``, losing, duplicating and
    reordering frames at ``rate``, when given): ``(process, control port, its --device, the
    guest's --wire)``."""
    siw_vm.require("default")               # (before the NIC's build: skip early)
    nic_port, qemu_port, control = free_udp_port(), free_udp_port(), free_port()
    to_nic, to_qemu = nic_port, qemu_port
    if relay is not None:
        middle = relay(to_a=nic_port, to_b=qemu_port, rate=rate, seed=7)
        to_nic, to_qemu = middle.a_port, middle.b_port
    nic = rnic.start(["nic-sim", "--wire", f"{nic_port}:{to_qemu}", "--control", control,
                      "--json"])
    ready = rnic.first_json_line(nic, timeout=READY_TIMEOUT)
    assert ready["event"] == "ready", ready
    return nic, control, f"tcp:127.0.0.1:{control}", (qemu_port, to_nic)


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


def test_linux_rping_client_to_the_nic_through_a_lossy_cable(siw_vm, rnic, free_port,
                                                            free_udp_port, relay):
    """The cable loses, duplicates and reorders 2 % of the frames each way: both TCPs
    (Linux's and the NIC's) send again what was lost and drop what came twice, and the
    RDMA above them sees a clean byte stream: every ping checked on both sides."""
    result = siw_client_to_nic(siw_vm, rnic, free_port, free_udp_port, count=3, size=4000,
                               relay=relay, rate=0.02)
    assert result["negotiated"]["crc"]


def siw_client_to_nic(siw_vm, rnic, free_port, free_udp_port, *, variant="default",
                      our_args=(), count=COUNT, size=SIZE, relay=None, rate=0.0):
    """siw's ``rping -c`` in the guest (``variant``) to ``rnic rping -s`` on the NIC (through
    ``relay`` at ``rate``); the ping data checked on both sides; our JSON result."""
    nic, control, device, wire = start_nic(siw_vm, rnic, free_port, free_udp_port, relay,
                                           rate)
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


#: The guest's rping servers of the several-connections test: port -> ping size.
SEVERAL = {7174: 64, 7175: 1000, 7176: 65535}


def test_several_nic_connections_at_once(siw_vm, rnic, free_port, free_udp_port):
    """Three rping clients of one host process on the NIC at once, to three rping servers
    in the guest: three TCP connections of the NIC, each negotiating MPA through the stream
    port while the others move FPDUs, each with its own core context and registered
    buffers (STags of the data path's choice); every ping of each checked on both sides."""
    import threading

    from rnic.host.apps import rping as rp
    from rnic.host.driver.device import open_device
    from rnic.host.net import cm, nic_tcp
    from rnic.host.net.transfer import make_datapath

    nic, control, device, wire = start_nic(siw_vm, rnic, free_port, free_udp_port)
    servers = "".join(f"(rping -s -a 169.254.7.1 -p {port} -S {size} -v > /tmp/{port} 2> /tmp/{port}.err; "
                      f"echo RPING_EXIT $? >> /tmp/{port}) & " for port, size in SEVERAL.items())
    # (stderr apart: rping's unbuffered event lines would land inside its ping data lines)
    show = "; ".join(f"echo == {port}; cat /tmp/{port}; cat /tmp/{port}.err"
                     for port in SEVERAL)
    vm = siw_vm.start("default", f"{servers}sleep 0.3; echo LISTENING; wait; {show}",
                      wire=wire)
    vm.wait_for("LISTENING")
    dev = open_device(device)
    results, errors = {}, {}

    def client(port, size):
        try:
            params = cm.ConnParams(timeout=60, first_fpdu_delay=0.1)
            neg, _ = nic_tcp.nic_connect_retry(dev, "169.254.7.1", port, params, retry=30)
            dp = make_datapath(neg, dev)
            try:
                results[port] = rp.run_client(dp, count=COUNT, size=size, validate=True,
                                              timeout=60)
            finally:
                dp.close()
        except Exception as e:              # reported by the assertion below
            errors[port] = e

    try:
        dev.reset()
        threads = [threading.Thread(target=client, args=item) for item in SEVERAL.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
    finally:
        dev.close()
    vm_rc, vm_out = vm.wait()
    assert not errors, f"{errors}\nguest:\n{vm_out}"
    parts = re.split(r"^== (\d+)\r?$", vm_out, flags=re.M)
    sections = dict(zip(parts[1::2], parts[2::2]))
    for port, size in SEVERAL.items():
        assert results[port] == expected(COUNT, size), port
        guest = sections[str(port)]
        assert guest_lines(guest, "server ") == expected(COUNT, size), guest
        assert "RPING_EXIT 0" in guest, guest
    check_nic(nic, control, COUNT * len(SEVERAL))
