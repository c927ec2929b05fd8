"""rnic.host.net.rnic_hw: the simulated-hardware data path (MPA in the Verilated RnicCore, DDP/RDMAP in the model).

Endpoints over loopback TCP: software <-> sim-hardware (each role) and sim-hardware <->
sim-hardware (two connections of one simulated device), Sends/Writes/Reads with markers
and CRC on/off: data arrives intact (the software peer's decoder checks the hardware's
framing byte for byte); the device's counters saw the FPDUs. A corrupted octet on the wire
-> the hardware's CRC error in the ERR registers, a Terminate goes out. rnic listen/connect
--device sim run through it.
"""

import json
import os
import subprocess
import sys

import pytest

from rnic.host.net import cm
from rnic.host.driver.device import Device
from rnic.host.spec.errors import Layer, MpaError
from rnic.host.spec.regmap import ConnState
from rnic.host.net.rnic_hw import HardwareRnic, HwDecoder, HwEncoder, hardware_datapath
from rnic.host.net.rnic_sw import SoftwareRnic
from rnic.host.net.transfer import make_datapath
from tests.host.net.loopback import T, events, negotiate, rq_completions, sim_device



@pytest.fixture(scope="module")
def device():
    with sim_device(hardware_datapath) as dev:
        yield dev


def rq_data(rnic, n, timeout=T):
    """The data of the next ``n`` filled receive buffers (flushed ones are skipped)."""
    out = rq_completions(rnic, n, timeout, ok=True)
    assert len(out) == n, out
    return [rnic.data(c) for c in out]


SIDES = {
    # which endpoints run on the simulated hardware (connection ids on the one device)
    "hw_initiator": (1, None),
    "hw_responder": (None, 2),
    "both_hw": (3, 4),
}
COMBOS = [
    # (side, initiator markers, responder markers, crc, p2p, rtr)
    ("hw_initiator", True, True, True, True, "send"),
    ("hw_responder", True, False, True, True, "read"),
    ("hw_responder", False, False, False, False, None),
    ("both_hw", True, True, True, True, "write"),
    ("both_hw", False, True, False, False, None),
]


@pytest.mark.parametrize("side,mi,mr,crc,p2p,rtr", COMBOS)
def test_transfers_through_the_hardware(device, side, mi, mr, crc, p2p, rtr):
    kw = dict(rev=2, crc=crc, timeout=T, emss=536)
    pi = cm.ConnParams(markers=mi, p2p=p2p, rtr={rtr} if rtr else cm.RTR_TYPES, **kw)
    pr = cm.ConnParams(markers=mr, **kw)
    ni, nr = negotiate(pi, pr)
    conn_a, conn_b = SIDES[side]
    before = device.counters()
    a = (HardwareRnic(ni, device, conn=conn_a, linger=0.5) if conn_a is not None
         else SoftwareRnic(ni, linger=0.5))
    b = (make_datapath(nr, device, conn=conn_b, linger=0.5) if conn_b is not None
         else SoftwareRnic(nr, linger=0.5))
    if conn_b is not None:
        assert isinstance(b, HardwareRnic)
        assert isinstance(nr.encoder, HwEncoder) and isinstance(nr.decoder, HwDecoder)
        # the responder waits for the initiator's first FPDU (MPA fence)
        assert device.connection(conn_b)["state"] == "WAIT_RX"
    src = os.urandom(3000)
    b.register_region(0x1000, 8192, to=0, data=src)
    for _ in range(4):
        b.post_recv(4096)
    try:
        b.start()
        a.start()
        big = os.urandom(2500)                 # several FPDUs at the MULPDU of EMSS 536
        ids = [a.send(b"hello"), a.send(big),
               a.write(b"WRITTEN!", stag=0x1000, to=5000),
               a.write(big, stag=0x1000, to=5100),
               a.read(3000, stag=0x1000, to=0),
               a.read(8, stag=0x1000, to=5000)]
        got = a.wait(ids, timeout=T)
        assert all(c.ok for c in got.values()), got
        assert a.data(got[ids[4]]) == src
        assert a.data(got[ids[5]]) == b"WRITTEN!"
        assert rq_data(b, 2) == [b"hello", big]
        assert b.read_memory(b.region(0x1000).address(5100), len(big)) == big
        assert a.error is None and b.error is None
    finally:
        a.close(timeout=2.0)
        b.close(timeout=2.0)
    after = device.counters()
    hw = [c for c in (conn_a, conn_b) if c is not None]
    # every FPDU the hardware side(s) sent and received went through the core
    sent = sum(r.stats["tx_fpdus"] for r in (a, b) if isinstance(r, HardwareRnic))
    recv = sum(r.stats["rx_fpdus"] for r in (a, b) if isinstance(r, HardwareRnic))
    assert after["tx_fpdus"] - before["tx_fpdus"] == sent > 0
    assert after["rx_fpdus"] - before["rx_fpdus"] == recv > 0
    assert after["err_count"] == before["err_count"]
    if mi or mr:
        assert after["tx_markers"] > before["tx_markers"] or not any(
            (c == conn_a and mr) or (c == conn_b and mi) for c in hw)
    for c in hw:
        assert device.connection(c)["state"] == "RTS" and device.connection(c)["error"] is None


class _Corrupt:
    """Wraps an encoder: flips one octet inside the ULPDU of the ``which``-th FPDU it encodes."""

    def __init__(self, enc, which):
        self.enc, self.which, self.n = enc, which, 0

    def __getattr__(self, name):
        return getattr(self.enc, name)

    def encode(self, ulpdu):
        wire = bytearray(self.enc.encode(ulpdu))
        self.n += 1
        if self.n == self.which:
            wire[len(wire) // 2] ^= 0x20
        return bytes(wire)


def test_crc_error_reported_by_the_hardware(device):
    """A software initiator whose 2nd FPDU has a flipped octet: the hardware responder finds the
    CRC error (ERR_* registers, CTX_ERROR, RX_CRC_ERRORS) and the data path sends a Terminate."""
    kw = dict(rev=2, crc=True, timeout=T, markers=True)
    ni, nr = negotiate(cm.ConnParams(**kw), cm.ConnParams(**kw))
    device.regs.clear("ERR_STATUS")
    before = device.counters()
    a = SoftwareRnic(ni, linger=0.5)
    b = make_datapath(nr, device, conn=5, linger=0.5)
    assert isinstance(b, HardwareRnic)
    for _ in range(4):
        b.post_recv(4096)
    ni.encoder = _Corrupt(ni.encoder, 2)
    try:
        b.start()
        a.start()
        a.send(b"first: intact" * 10)
        a.send(b"second: corrupted on the wire" * 10)
        assert rq_data(b, 1) == [b"first: intact" * 10]
        sent = events(b, "terminate_sent")[0]
        assert (sent.info.layer, sent.info.ecode) == (Layer.LLP, MpaError.CRC)
        got = events(a, "terminate_received")[0]
        assert (got.info.layer, got.info.etype, got.info.ecode) == (Layer.LLP, 0, MpaError.CRC)
    finally:
        a.close(timeout=1.0)
        b.close(timeout=1.0)
    err = device.last_error()
    assert err is not None and (err["conn"], err["tx"], err["layer"], err["etype"], err["ecode"]) == \
        (5, False, Layer.LLP, 0, MpaError.CRC)
    st = device.connection(5)
    assert st["state"] == "ERROR" and st["error"] == {"layer": 2, "etype": 0, "ecode": 2}
    after = device.counters()
    assert after["rx_crc_errors"] - before["rx_crc_errors"] == 1
    assert after["err_count"] - before["err_count"] == 1
    [report] = device.read_errors()                     # pops it (W1C)
    assert report.conn == 5 and device.last_error() is None


def test_programmed_context_follows_the_negotiation(device):
    """Phases continue after the RTR; a HardwareRnic needs a device with stream access."""
    kw = dict(rev=2, crc=False, timeout=T, p2p=True, rtr={"send"})
    ni, nr = negotiate(cm.ConnParams(markers=True, **kw), cm.ConnParams(markers=True, **kw))
    rtr_len = len(ni.rtr_wire)
    a = HardwareRnic(ni, device, conn=6, linger=0.2)
    p = a.programmed
    assert p["tx"].phase == rtr_len % 512 and p["tx"].markers and not p["tx"].crc
    assert p["rx"].phase == 0 and p["state"] == ConnState.RTS
    assert device.connection(6)["state"] == "RTS"
    a.close(timeout=0.5)
    nr.close()
    from rnic.host.driver.model import ModelTransport
    with pytest.raises(TypeError, match="stream access"):
        HardwareRnic(nr, Device(ModelTransport()), conn=0)


def _rnic(*args, timeout=60):
    return subprocess.Popen([sys.executable, "-m", "rnic.host.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_cli_listen_connect_on_the_sim(device):
    """rnic listen --device sim and rnic connect --device sim (two simulated devices)."""
    srv = _rnic("listen", "--port", "0", "--once", "--json", "--device", "sim", "--markers",
                "--region-data", "00112233445566778899", "--idle-timeout", "3")
    try:
        first = json.loads(srv.stdout.readline())
        assert first["event"] == "listening"
        port = first["port"]
        out = subprocess.run([sys.executable, "-m", "rnic.host.cli", "connect", f"127.0.0.1:{port}",
                              "--device", "sim", "--markers", "--send", "68656c6c6f",
                              "--read", "4", "--stag", "0x1000", "--to", "2", "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        res = json.loads(out.stdout)
        assert res["ok"] and [t["status"] for t in res["transfers"]] == ["success", "success"]
        assert res["transfers"][1]["data"] == "22334455"
        assert res["device"]["counters"]["tx_fpdus"] >= 2
        assert res["device"]["counters"]["rx_fpdus"] >= 1
        lines, _ = srv.communicate(timeout=60)
        evs = [json.loads(x) for x in lines.splitlines()]
        comp = [e for e in evs if e["event"] == "completion"]
        assert comp and comp[0]["data"] == "68656c6c6f"
        closed = [e for e in evs if e["event"] == "closed"][0]
        assert closed["device"]["counters"]["rx_fpdus"] >= 2
        assert closed["device"]["counters"]["tx_markers"] >= 1
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
