"""rnic.host.net.rnic_sw: two software RNICs over a real TCP connection on 127.0.0.1."""

import os
import socket
import time

import pytest

from rnic.host.net import cm
from rnic.host.model import ddp
from rnic.host.spec.errors import Layer, MpaError
from rnic.host.model.rdmap import ReadRequest, Terminate
from rnic.host.spec.regmap import CqQueue, CqStatus, SqOpcode
from rnic.host.net.rnic_sw import Access, Completion, SoftwareRnic, error_name, opcode_from
from rnic.host.net.transfer import MirroredDataPath, make_datapath
from rnic.host.driver.device import open_device
from tests.host.net.loopback import events, negotiate, rq_completions

T = 3.0


class Pair:
    """Initiator ``a`` and responder ``b``; ``b`` exposes region 0x1000 and posts 8 buffers."""

    def __init__(self, pi=None, pr=None, *, region=b"", recv=8, start=True, **kw):
        self.ni, self.nr = negotiate(pi, pr)
        self.a = SoftwareRnic(self.ni, linger=1.0, **kw)
        self.b = SoftwareRnic(self.nr, linger=1.0, **kw)
        self.region = self.b.register_region(0x1000, 8192, to=0, data=region)
        self.bufs = [self.b.post_recv(4096) for _ in range(recv)]
        if start:
            self.b.start()
            self.a.start()

    def close(self):
        self.a.close(timeout=1.0)
        self.b.close(timeout=1.0)


@pytest.fixture
def pair_factory():
    made = []

    def make(*args, **kw):
        p = Pair(*args, **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


# -- transfers ---------------------------------------------------------------------------

COMBOS = [
    # (initiator markers, responder markers, crc, rev, p2p, rtr)
    (False, False, True, 2, False, None),
    (True, False, True, 2, True, "write"),
    (False, True, False, 2, True, "read"),
    (True, True, True, 2, True, "send"),
    (True, True, False, 1, False, None),
]


@pytest.mark.parametrize("mi,mr,crc,rev,p2p,rtr", COMBOS)
def test_sends_writes_reads_with_markers_and_crc(pair_factory, mi, mr, crc, rev, p2p, rtr):
    kw = dict(rev=rev, crc=crc, timeout=T, emss=536)
    pi = cm.ConnParams(markers=mi, p2p=p2p, rtr={rtr} if rtr else cm.RTR_TYPES, **kw)
    pr = cm.ConnParams(markers=mr, crc=crc, rev=rev, timeout=T, emss=536)
    src = os.urandom(3000)
    p = pair_factory(pi, pr, region=src)
    a, b = p.a, p.b
    assert (p.ni.markers_rx, p.ni.markers_tx, p.ni.crc) == (mi, mr, crc)
    assert p.ni.rtr == rtr
    big = os.urandom(2500)                      # several segments at MULPDU of EMSS 536
    ids = [a.send(b"hello"), a.send(big),
           a.post_send("send_se", b"solicited"),
           a.write(b"WRITTEN!", stag=0x1000, to=5000),
           a.write(big, stag=0x1000, to=5100),
           a.read(3000, stag=0x1000, to=0),
           a.read(8, stag=0x1000, to=5000),
           a.read(0, stag=0x1000, to=0)]
    got = a.wait(ids, timeout=T)
    assert all(c.ok for c in got.values()), got
    assert a.data(got[ids[5]]) == src
    assert a.data(got[ids[6]]) == b"WRITTEN!"
    assert got[ids[5]].opcode == SqOpcode.RDMA_READ and got[ids[5]].length == 3000
    assert got[ids[7]].length == 0
    assert b.read_memory(p.region.address(5100), len(big)) == big
    rq = rq_completions(b, 3)
    assert [(c.wr_id, c.length, c.opcode) for c in rq] == \
        [(p.bufs[0], 5, SqOpcode.SEND), (p.bufs[1], 2500, SqOpcode.SEND),
         (p.bufs[2], 9, SqOpcode.SEND_SE)]
    assert [b.data(c) for c in rq] == [b"hello", big, b"solicited"]
    assert rq[2].solicited
    evs = b.poll_events()
    writes = [(e.stag, e.to, e.length) for e in evs if e.kind == "remote_write"]
    reads = [(e.stag, e.to, e.length) for e in evs if e.kind == "remote_read"]
    assert writes == [(0x1000, 5000, 8), (0x1000, 5100, 2500)]
    assert reads == [(0x1000, 0, 3000), (0x1000, 5000, 8)]   # zero-length read: no event
    # the counters are updated by the peers' threads after the wire write / read: let the
    # last FPDUs in flight settle before comparing them
    deadline = time.monotonic() + 5
    while (b.stats["rx_fpdus"] != a.stats["tx_fpdus"] + (1 if p2p else 0)
           and time.monotonic() < deadline):
        time.sleep(0.01)
    assert a.stats["tx_fpdus"] > 10 and b.stats["rx_fpdus"] == a.stats["tx_fpdus"] + (1 if p2p else 0)
    if mr:
        assert a.stats["tx_markers"] > 0 and b.stats["rx_markers"] == a.stats["tx_markers"] + (
            1 if p2p else 0)
    # and the responder sends too: Sends need the initiator's receive buffers
    ra = a.post_recv(100)
    wid = b.send(b"pong")
    assert b.wait(wid).ok
    (c,) = rq_completions(a, 1)
    assert (c.wr_id, a.data(c)) == (ra, b"pong")
    # graceful close from the initiator: both sides end cleanly, posted buffers flush
    a.close(timeout=2.0)
    assert b.wait_closed(3.0) and a.closed
    assert a.error is None and b.error is None
    assert a.state == b.state == "closed"
    flushed = [c for c in b.poll() if c.queue == CqQueue.RQ]
    assert len(flushed) == 5 and all(c.status == CqStatus.FLUSHED for c in flushed)
    (closed,) = [e for e in b.poll_events() if e.kind == "closed"]
    assert closed.info is None


def test_ord_limits_outstanding_reads_and_queue_order(pair_factory):
    p = pair_factory(cm.ConnParams(ord=1, timeout=T), cm.ConnParams(ird=4, timeout=T),
                     region=bytes(range(256)) * 4)
    a = p.a
    assert a.ord == 1
    ids = [a.read(16, stag=0x1000, to=16 * i) for i in range(6)]
    ids.append(a.send(b"after the reads"))
    got = a.wait(ids)
    assert [a.data(got[i]) for i in ids[:6]] == [(bytes(range(256)) * 4)[16 * i:16 * i + 16]
                                                for i in range(6)]
    assert a.stats["max_outstanding_reads"] == 1
    assert rq_completions(p.b, 1)[0].length == len(b"after the reads")


def test_read_into_a_given_local_region(pair_factory):
    p = pair_factory(region=b"0123456789")
    a = p.a
    local = a.register_region(0x2000, 64, to=0x100, access=Access.REMOTE_WRITE)
    wid = a.read(4, stag=0x1000, to=3, local_stag=0x2000, local_to=0x108)
    c = a.wait(wid)
    assert c.ok and c.addr == local.address(0x108) and a.data(c) == b"3456"
    with pytest.raises(ValueError, match="not inside a registered region"):
        a.read(4, stag=0x1000, local_stag=0x2000, local_to=0x13E)


def test_sends_and_writes_from_registered_memory(pair_factory):
    """A Send and a Write name their data by a local STag and TO (a verbs scatter/gather
    entry): the octets there arrive, and a range outside any valid region, or a payload
    given as well, is refused before anything is posted."""
    p = pair_factory()
    a, b = p.a, p.b
    data = os.urandom(3000)
    a.register_region(0x2000, 4096, to=0x700, data=bytes(100) + data)
    ids = [a.send(length=2000, local_stag=0x2000, local_to=0x700 + 100),
           a.write(length=3000, stag=0x1000, to=64, local_stag=0x2000, local_to=0x764),
           a.send(length=0, local_stag=0x2000, local_to=0x700)]
    assert all(c.ok for c in a.wait(ids).values())
    sends = rq_completions(b, 2)
    assert [b.data(c) for c in sends] == [data[:2000], b""]
    assert b.read_memory(p.region.address(64), 3000) == data
    for kw, match in ((dict(local_to=0x700 + 4000, length=97), "not inside a registered region"),
                      (dict(local_stag=0x2001), "not inside a registered region"),
                      (dict(length=None), "length must be"),
                      (dict(payload=b"x"), "not both")):
        args = dict(local_stag=0x2000, local_to=0x700, length=8) | kw
        with pytest.raises(ValueError, match=match):
            a.post_send("send", args.pop("payload", b""), **args)
    a.invalidate(0x2000)
    with pytest.raises(ValueError, match="not inside a registered region"):
        a.send(length=1, local_stag=0x2000, local_to=0x700)


def test_send_with_invalidate(pair_factory):
    p = pair_factory()
    p.b.register_region(0x3000, 64)
    wid = p.a.post_send("send_inv", b"bye", inval_stag=0x3000)
    assert p.a.wait(wid).ok
    (c,) = rq_completions(p.b, 1)
    assert (c.opcode, c.inval_stag) == (SqOpcode.SEND_INV, 0x3000)
    assert p.b.region(0x3000).valid is False


def test_invalid_stag_write_terminates_both_sides(pair_factory):
    p = pair_factory()
    a, b = p.a, p.b
    assert a.wait(a.send(b"ok first")).ok
    w = a.write(b"nope", stag=0xBAD, to=0)
    assert a.wait(w).ok                          # a Write completes when it is sent
    r = a.read(4, stag=0x1000)                   # behind it: never answered
    (sent,) = events(b, "terminate_sent")
    (got,) = events(a, "terminate_received")
    for ev in (sent, got):
        assert (ev.info.layer, ev.info.etype, ev.info.ecode) == (Layer.DDP, 1, 0)
        assert (ev.terminate.layer, ev.terminate.etype, ev.terminate.ecode) == (1, 1, 0)
        assert ev.terminate.d and ev.terminate.m
        hdr, _ = ddp.parse(ev.terminate.ddp_header)
        assert hdr.tagged and hdr.stag == 0xBAD
    assert "STag 0xbad is unknown" in sent.info.text
    assert "DDP tagged buffer: invalid STag" in got.info.text
    c = a.wait(r)          # REMOTE_ERROR if it was sent, FLUSHED if still queued
    assert c.status in (CqStatus.REMOTE_ERROR, CqStatus.FLUSHED) and c.error.ecode == 0
    assert a.wait_closed(3.0) and b.wait_closed(3.0)
    assert a.state == b.state == "error"
    assert a.terminate_received == b.terminate_sent
    # after the end: posting flushes
    late = a.send(b"late")
    assert a.wait(late).status == CqStatus.FLUSHED


def test_read_from_invalid_source_stag_and_no_buffer(pair_factory):
    p = pair_factory()
    r = p.a.read(4, stag=0x4242, to=0)
    c = p.a.wait(r)
    assert c.status == CqStatus.REMOTE_ERROR
    assert (c.error.layer, c.error.etype, c.error.ecode) == (Layer.RDMAP, 1, 0)
    (ev,) = events(p.b, "terminate_sent")
    assert ev.terminate.r                       # the Read Request header is included
    assert ReadRequest.parse(ev.terminate.rdmap_header).src_stag == 0x4242

    q = pair_factory(recv=1)
    ids = [q.a.send(b"1"), q.a.send(b"2")]
    q.a.wait(ids)
    (ev,) = events(q.b, "terminate_sent")
    assert (ev.info.layer, ev.info.etype, ev.info.ecode) == (Layer.DDP, 2, 2)   # no buffer
    (got,) = events(q.a, "terminate_received")
    assert got.info.ecode == 2
    assert len(rq_completions(q.b, 1)) == 1


def test_ird_zero_rejects_reads(pair_factory):
    p = pair_factory(cm.ConnParams(ord=0, timeout=T), cm.ConnParams(ird=0, timeout=T))
    assert p.a.ord == 0 and p.b.ird == 0
    c = p.a.wait(p.a.read(4, stag=0x1000))
    assert c.status == CqStatus.BAD_REQUEST and "ORD 0" in c.error.text
    # a peer ignoring its ORD: the responder's sink enforces IRD 0 (RDMAP 2/7)
    (u,) = p.ni.tx.read_request(ReadRequest(sink_stag=1, sink_to=0, size=4, src_stag=0x1000,
                                            src_to=0))
    p.a.close(timeout=0.5)
    p2 = pair_factory(cm.ConnParams(ord=0, timeout=T), cm.ConnParams(ird=0, timeout=T), start=False)
    p2.b.start()
    p2.ni.send_ulpdu(u)
    (ev,) = events(p2.b, "terminate_sent")
    assert (ev.info.layer, ev.info.etype, ev.info.ecode) == (Layer.RDMAP, 2, 7)


# -- closing, framing errors ---------------------------------------------------------------

@pytest.mark.parametrize("first", [True, False])
def test_fin_inside_an_fpdu_is_mpa_error_1(pair_factory, first):
    p = pair_factory(start=False)
    p.b.start()
    if not first:                       # the cut FPDU is not the initiator's first one
        (u,) = p.ni.tx.send(b"complete")
        p.ni.send_ulpdu(u)
    (u,) = p.ni.tx.send(b"x" * 100)
    wire = p.ni.encoder.encode(u)
    p.ni.sock.sendall(wire[:40])
    p.ni.sock.shutdown(socket.SHUT_WR)
    (ev,) = events(p.b, "error")
    assert (ev.info.layer, ev.info.ecode) == (Layer.LLP, MpaError.TCP_CLOSED)
    assert "inside an FPDU" in ev.info.text
    assert p.b.wait_closed(3.0) and p.b.state == "error"
    assert not p.b.terminate_sent       # the peer is gone: no Terminate


def test_fin_at_a_boundary_is_a_clean_close(pair_factory):
    p = pair_factory(start=False)
    p.b.start()
    (u,) = p.ni.tx.send(b"last words")
    p.ni.send_ulpdu(u)
    p.ni.sock.shutdown(socket.SHUT_WR)
    # the FIN flushes the other posted buffers: their completions may come in the same poll
    done = rq_completions(p.b, 1)
    ok = [c for c in done if c.status == CqStatus.SUCCESS]
    assert len(ok) == 1 and all(c.status == CqStatus.FLUSHED for c in done if c not in ok)
    assert p.b.data(ok[0]) == b"last words"
    assert p.b.wait_closed(3.0)
    assert p.b.state == "closed" and p.b.error is None
    assert [e.kind for e in p.b.poll_events()] == ["closed"]


@pytest.mark.parametrize("first", [True, False])
def test_crc_error_gets_a_terminate(pair_factory, first):
    p = pair_factory(start=False)
    p.b.start()
    if not first:
        (u,) = p.ni.tx.send(b"good")
        p.ni.send_ulpdu(u)
    (u,) = p.ni.tx.send(b"payload")
    wire = bytearray(p.ni.encoder.encode(u))
    wire[-1] ^= 0xFF
    p.ni.sock.sendall(bytes(wire))
    (ev,) = events(p.b, "terminate_sent")
    assert (ev.info.layer, ev.info.ecode) == (Layer.LLP, MpaError.CRC)
    assert p.b.stats["rx_crc_errors"] == 1
    # the initiator's raw side reads the Terminate (layer 2, type 0, code 2), then FIN
    rec = p.ni.recv_fpdu(timeout=T)
    hdr, payload = ddp.parse(rec.ulpdu)
    assert hdr.qn == 2
    term = Terminate.parse(payload)
    assert (term.layer, term.etype, term.ecode) == (2, 0, 2)
    assert p.b.wait_closed(3.0)


def test_responder_with_wait_first_fpdu_done_by_the_caller():
    ni, nr = negotiate(cm.ConnParams(p2p=True, rtr={"read"}, timeout=T), cm.ConnParams(timeout=T))
    a = SoftwareRnic(ni, linger=1.0)
    a.start()
    nr.wait_first_fpdu(timeout=T)            # answers the Read RTR itself
    b = SoftwareRnic(nr, linger=1.0)
    b.register_region(0x1000, 16, data=b"abcd")
    buf = b.post_recv(16)
    b.start()                                # a side that only serves must start (or poll)
    try:
        assert a.wait(a.read(4, stag=0x1000)).ok
        assert a.wait(a.send(b"hi")).ok
        (c,) = rq_completions(b, 1)
        assert c.wr_id == buf and b.data(c) == b"hi"
    finally:
        a.close(timeout=1.0)
        b.close(timeout=1.0)


def test_close_before_start_and_idle_responder_close():
    ni, nr = negotiate()
    a, b = SoftwareRnic(ni, linger=0.5), SoftwareRnic(nr, linger=0.5)
    b.post_recv(10)
    b.start()                            # waits for the initiator's first FPDU
    t0 = time.monotonic()
    a.close()                            # never started: just FIN
    assert a.state == "closed"
    assert b.wait_closed(3.0) and b.state == "closed" and b.error is None
    (c,) = b.poll()
    assert c.status == CqStatus.FLUSHED
    assert time.monotonic() - t0 < 2.0
    b.close()
    with pytest.raises(RuntimeError):
        a.send(b"x")


def test_argument_checks(pair_factory):
    p = pair_factory()
    a = p.a
    for bad in ("frob", 2, 7):
        with pytest.raises(ValueError):
            a.post_send(bad)
    with pytest.raises(TypeError):
        opcode_from(1.5)
    with pytest.raises(ValueError, match="needs inval_stag"):
        a.post_send("send_inv", b"x")
    with pytest.raises(ValueError, match="send_inv / send_se_inv"):
        a.post_send("send", b"x", inval_stag=1)
    with pytest.raises(ValueError, match="no payload"):
        a.post_send("read", b"x", length=1, stag=1)
    with pytest.raises(ValueError, match="length must be"):
        a.post_send("read", stag=1)
    with pytest.raises(ValueError, match="does not fit"):
        a.write(b"x", stag=1 << 32)
    with pytest.raises(ValueError, match="already posted"):
        a.post_recv(4, wr_id=99) and a.post_recv(4, wr_id=99)
    with pytest.raises(ValueError, match="do not fit"):
        a.register_region(5, 2, data=b"abc")
    with pytest.raises(TimeoutError):
        a.wait(12345, timeout=0.2)
    assert Completion(1, CqStatus.SUCCESS, SqOpcode.SEND, 3).to_json() == {
        "wr_id": 1, "queue": "sq", "opcode": "send", "status": "success", "length": 3}
    assert error_name(Terminate(layer=0, etype=2, ecode=7).info) == \
        "RDMAP remote operation: catastrophic stream"


def test_mirrored_datapath_goes_through_the_registers():
    ni, nr = negotiate(cm.ConnParams(markers=True, timeout=T), cm.ConnParams(timeout=T))
    dev = open_device("model")
    dev.reset()
    a = make_datapath(ni, None, linger=1.0)
    b = make_datapath(nr, dev, linger=1.0)
    assert isinstance(b, MirroredDataPath) and isinstance(a, SoftwareRnic)
    assert dev.connection(0)["state"] == "WAIT_RX"
    core = dev.transport.core
    try:
        b.register_region(0x1000, 64, data=b"device!")
        assert any(r["stag"] == 0x1000 and r["remote_read"] for r in core.stags.values())
        bufs = [b.post_recv(32) for _ in range(2)]
        assert [e["wr_id"] for e in core.rq[0]] == bufs
        assert a.wait(a.send(b"via regs")).ok
        (c,) = rq_completions(b, 1)
        assert c.wr_id == bufs[0] and b.data(c) == b"via regs"
        assert [e["wr_id"] for e in core.rq[0]] == bufs[1:]          # retired through the core
        assert dev.connection(0)["state"] == "RTS"                   # the fence opened
        assert a.wait(a.read(7, stag=0x1000)).ok
        ra = a.post_recv(8)
        w = b.send(b"back")                                          # b's SQ via SQ_* registers
        assert b.wait(w).ok
        (c,) = rq_completions(a, 1)
        assert c.wr_id == ra and a.data(c) == b"back"
        assert dev.counters()["rx_fpdus"] >= 2 and dev.counters()["tx_fpdus"] >= 2
        r = b.read(4, stag=0x5555)                                   # a has no such STag
        assert b.wait(r).status == CqStatus.REMOTE_ERROR
        events(b, "terminate_received")
        assert dev.last_error()["ecode"] == 0
        assert dev.connection(0)["error"] == {"layer": 0, "etype": 1, "ecode": 0}
    finally:
        a.close(timeout=1.0)
        b.close(timeout=1.0)
    b.poll_events()                         # the mirror reports the end to the core
    assert dev.connection(0)["state"] == "ERROR"
