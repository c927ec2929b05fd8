"""MPA connection manager over real sockets (socketpair and 127.0.0.1), both roles."""

import select
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rnic.host.net import cm
from rnic.host.model import ddp, rdmap, segment
from rnic.host.net.cm import ConnParams, MpaRejected, MpaSetupError, accept, connect
from rnic.host.spec.errors import ErrorInfo, Layer, MpaError, ProtocolError
from rnic.host.model.fpdu import FpduDecoder, FpduEncoder, FpduRecord, mulpdu
from rnic.host.model.mpa_frames import FrameReader, MpaFrame, build
from rnic.host.model.rdmap import Opcode, ReadRequest, Terminate

T = 3.0          # generous limit for exchanges that succeed
SHORT = 0.3      # for the timeout tests


# -- helpers ---------------------------------------------------------------------

def P(**kw):
    kw.setdefault("timeout", T)
    return ConnParams(**kw)


def tcp_pair():
    with socket.create_server(("127.0.0.1", 0)) as lst:
        c = socket.create_connection(lst.getsockname())
        s, _ = lst.accept()
    return c, s


def both(f_init, f_resp):
    """Run the responder side in a thread, the initiator here; return both results
    (an exception instance where a side raised)."""
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(f_resp)
        try:
            ri = f_init()
        except Exception as e:          # noqa: BLE001
            ri = e
        try:
            rr = fut.result(timeout=10)
        except Exception as e:          # noqa: BLE001
            rr = e
    return ri, rr


def setup(pi, pr, *, pair=socket.socketpair, reject=False):
    a, b = pair()
    ri, rr = both(lambda: connect(a, pi), lambda: accept(b, pr, reject=reject))
    return ri, rr


def ok(ri, rr):
    for r in (ri, rr):
        if isinstance(r, Exception):
            raise r
    return ri, rr


def raw_read_frame(sock, expect, timeout=T):
    sock.settimeout(timeout)
    reader = FrameReader(expect=expect, strict=False)
    while True:
        data = sock.recv(65536)
        assert data, "peer closed before its frame"
        frame, rest = reader.feed(data)
        if frame is not None:
            return frame, rest


def peer_closed(sock, timeout=T):
    """True when the peer closed (EOF or reset) within ``timeout``, draining data."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def raw_fpdus(sock, *, markers, crc, timeout=T, count=None):
    """The FPDUs the peer sends until it closes (or ``count`` of them)."""
    dec = FpduDecoder(markers=markers, crc=crc)
    out = []
    sock.settimeout(timeout)
    while count is None or len(out) < count:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        out += dec.feed(data)
    return out


def terminate_of(record):
    header, payload = ddp.parse(record.ulpdu)
    assert not header.tagged and header.qn == 2
    assert rdmap.parse_control(header.rsvd_ulp >> 32)[2] == Opcode.TERMINATE
    return Terminate.parse(payload)


def opcode_of(ulpdu):
    header, payload = ddp.parse(ulpdu)
    ctl = header.rsvd_ulp if header.tagged else header.rsvd_ulp >> 32
    return rdmap.parse_control(ctl)[2], header, payload


def assert_mpa(exc, code):
    assert isinstance(exc, MpaSetupError), f"expected MpaSetupError, got {exc!r}"
    assert exc.info.layer == Layer.LLP and exc.info.etype == 0
    assert exc.info.ecode == code, exc.info


# -- basic setups ------------------------------------------------------------------

def test_rev1_both_sides_client_server():
    ri, rr = ok(*setup(P(rev=1, crc=False, private_data=b"hi"),
                       P(rev=1, crc=False, private_data=b"there!")))
    for n in (ri, rr):
        assert (n.rev, n.enhanced, n.crc, n.markers_tx, n.markers_rx) == (1, False, False,
                                                                          False, False)
        assert n.ird is None and n.ord is None and n.peer_ird is None
        assert not n.p2p and n.rtr is None
    assert ri.local_frame.kind == "request" and rr.local_frame.kind == "reply"
    assert ri.peer_private_data == b"there!" and rr.peer_private_data == b"hi"
    assert ri.tx_frame_octets == rr.rx_frame_octets == 22
    assert ri.rx_frame_octets == rr.tx_frame_octets == 26
    assert (ri.tx_stream_offset, ri.rx_stream_offset) == (22, 26)
    assert ri.tx_marker_origin == ri.rx_marker_origin == 0
    assert ri.leftover == rr.leftover == b""
    # fence: the responder may not send before the initiator's first FPDU
    with pytest.raises(RuntimeError, match="fence"):
        rr.send_ulpdu(segment.ulpdu(Opcode.SEND, b"too early"))
    ri.send_ulpdu(segment.ulpdu(Opcode.SEND, b"request"))
    rec = rr.wait_first_fpdu()
    assert isinstance(rec, FpduRecord) and rec.ulpdu.endswith(b"request")
    assert rr.fence_open and rr.rx_msn[0] == 2
    rr.send_ulpdu(segment.ulpdu(Opcode.SEND, b"response"))
    assert ri.recv_fpdu().ulpdu.endswith(b"response")
    ri.close()
    rr.close()


def test_rev2_defaults_and_frames():
    ri, rr = ok(*setup(P(private_data=b"abc"), P(private_data=b"")))
    for n in (ri, rr):
        assert (n.rev, n.enhanced, n.crc) == (2, True, True)
        assert (n.ird, n.ord) == (4, 4)
    assert ri.local_frame.enhanced and ri.local_frame.pd_length == 7
    assert ri.tx_frame_octets == 27 and rr.rx_frame_octets == 27
    assert rr.tx_frame_octets == 24 and ri.rx_frame_octets == 24
    assert (ri.peer_ird, ri.peer_ord) == (4, 4)
    ctx = ri.context()
    assert ctx["tx_stream_offset"] == 27 and ctx["rx_stream_offset"] == 24
    assert ctx["tx_fpdu_offset"] == 0 and ctx["mulpdu"] == ri.mulpdu
    ri.close()
    rr.close()


U = 0x3FFF


@pytest.mark.parametrize("ini, res, want_i, want_r, wire", [
    # (ird, ord[, ird_max, ord_min]) of each side -> (ird, ord) after, Reply (IRD, ORD)
    ((4, 8), (16, 2), (4, 8), (16, 2), (16, 2)),
    # responder raises its IRD to the initiator ORD (RFC 6581 9.1 "MAY be increased")
    ((4, 8), (2, 2, 8), (4, 8), (8, 2), (8, 2)),
    # responder cannot raise: initiator lowers its ORD to the responder IRD
    ((4, 8), (2, 2), (4, 2), (2, 2), (2, 2)),
    # responder ORD at most the initiator IRD
    ((2, 1), (4, 8), (2, 1), (4, 2), (4, 2)),
    # 0x3FFF initiator ORD: responder IRD unchanged locally, 0x3FFF in the Reply
    ((4, U), (6, 3), (4, U), (6, 3), (U, 3)),
    # 0x3FFF initiator IRD: responder ORD unchanged locally, 0x3FFF in the Reply
    ((U, 2), (6, 9), (U, 2), (6, 9), (6, U)),
    # 0x3FFF from the responder: the initiator keeps its own values
    ((3, 5), (U, U), (3, 5), (U, U), (U, U)),
    # zeros
    ((0, 0), (0, 0), (0, 0), (0, 0), (0, 0)),
])
def test_rev2_ird_ord_negotiation(ini, res, want_i, want_r, wire):
    def mk(t):
        kw = dict(ird=t[0], ord=t[1])
        if len(t) > 2:
            kw["ird_max"] = t[2]
        return P(**kw)
    ri, rr = ok(*setup(mk(ini), mk(res)))
    assert (ri.ird, ri.ord) == want_i
    assert (rr.ird, rr.ord) == want_r
    assert (rr.local_frame.ird, rr.local_frame.ord) == wire
    assert (ri.peer_ird, ri.peer_ord) == wire
    assert (rr.peer_ird, rr.peer_ord) == ini[:2]
    ri.close()
    rr.close()


@pytest.mark.parametrize("mi, mr", [(True, False), (False, True), (True, True), (False, False)])
def test_markers_per_direction(mi, mr):
    ri, rr = ok(*setup(P(markers=mi), P(markers=mr)))
    assert ri.local_frame.markers == mi and rr.local_frame.markers == mr
    assert (ri.markers_rx, ri.markers_tx) == (mi, mr)
    assert (rr.markers_tx, rr.markers_rx) == (mi, mr)
    assert ri.mulpdu == mulpdu(ri.emss, markers=mr)
    big = bytes(range(256)) * 6
    wire = ri.send_ulpdu(segment.ulpdu(Opcode.SEND, big))
    # a marker with FPDUPTR 0 opens the initiator's FPDU stream when the responder asked
    assert (wire[:4] == bytes(4)) == mr
    assert rr.wait_first_fpdu().ulpdu.endswith(big)
    wire = rr.send_ulpdu(segment.ulpdu(Opcode.SEND, big, msn=1))
    assert (wire[:4] == bytes(4)) == mi
    rec = ri.recv_fpdu()
    assert rec.ulpdu.endswith(big) and bool(rec.markers) == mi
    ri.close()
    rr.close()


@pytest.mark.parametrize("ci, cr", [(True, False), (False, True), (True, True), (False, False)])
@pytest.mark.parametrize("rev", [1, 2])
def test_crc_from_either_side(ci, cr, rev):
    ri, rr = ok(*setup(P(rev=rev, crc=ci), P(rev=rev, crc=cr)))
    want = ci or cr
    assert ri.crc == rr.crc == want
    assert rr.local_frame.crc == want          # the Reply carries the result
    ri.send_ulpdu(segment.ulpdu(Opcode.SEND, b"x" * 33))
    rec = rr.wait_first_fpdu()
    assert rec.crc == ("ok" if want else "unchecked")
    ri.close()
    rr.close()


# -- reject ----------------------------------------------------------------------------

@pytest.mark.parametrize("rev", [1, 2])
def test_reject_with_private_data(rev):
    ri, rr = setup(P(rev=rev, private_data=b"please"),
                   P(rev=rev, private_data=b"no: busy"), reject=True)
    assert isinstance(ri, MpaRejected)
    assert ri.peer_private_data == b"no: busy" and ri.frame.reject
    assert ri.code == MpaError.TCP_CLOSED
    assert rr.rejected and rr.closed and rr.peer_private_data == b"please"
    assert rr.local_frame.reject and rr.local_frame.enhanced == (rev == 2)


def test_reject_callable_sees_the_request():
    seen = []

    def decide(req):
        seen.append(req.private_data)
        return req.private_data == b"bad"

    a, b = socket.socketpair()
    ri, rr = both(lambda: connect(a, P(private_data=b"bad")),
                  lambda: accept(b, P(private_data=b"denied"), reject=decide))
    assert isinstance(ri, MpaRejected) and ri.peer_private_data == b"denied"
    assert seen == [b"bad"] and rr.rejected
    a, b = socket.socketpair()
    ri, rr = ok(*both(lambda: connect(a, P(private_data=b"good")),
                      lambda: accept(b, P(), reject=decide)))
    assert not rr.rejected
    ri.close()
    rr.close()


# -- invalid frames, closes, timeouts ---------------------------------------------------

BAD_REQUESTS = {
    "bad key": b"MPA ID Xyz Frame" + bytes([0x40, 1, 0, 0]),
    "reply key": build(MpaFrame(kind="reply", rev=1)),
    "pd_length > 512": b"MPA ID Req Frame" + bytes([0, 1]) + (513).to_bytes(2, "big") + bytes(513),
    "short enhanced data": b"MPA ID Req Frame" + bytes([0x10, 2, 0, 2, 0, 0]),
    "rev 3": b"MPA ID Req Frame" + bytes([0, 3, 0, 0]),
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_responder_invalid_request_error4_and_closed(name):
    raw, b = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(accept, b, P())
        raw.sendall(BAD_REQUESTS[name])
        assert peer_closed(raw)                 # closed without an answer
        with pytest.raises(MpaSetupError) as ei:
            fut.result(timeout=T)
    assert_mpa(ei.value, MpaError.BAD_FRAME)
    assert ei.value.frame is None
    raw.close()


@pytest.mark.parametrize("reply", [
    build(MpaFrame(kind="request", rev=2, enhanced=True)),        # Request key back
    b"MPA ID Rep Frame" + bytes([0, 1]) + (600).to_bytes(2, "big"),
    build(MpaFrame(kind="reply", rev=2, enhanced=True)),          # S to a Rev 1 Request
])
def test_initiator_invalid_reply_error4_and_closed(reply):
    a, raw = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(connect, a, P(rev=1))
        raw_read_frame(raw, "request")
        raw.sendall(reply)
        assert peer_closed(raw)
        with pytest.raises(MpaSetupError) as ei:
            fut.result(timeout=T)
    assert_mpa(ei.value, MpaError.BAD_FRAME)
    assert ei.value.term_sent is None             # no FPDU mode: just close
    raw.close()


def test_responder_peer_closes_mid_frame_error1():
    raw, b = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(accept, b, P())
        raw.sendall(build(MpaFrame(kind="request", private_data=b"x" * 40))[:30])
        time.sleep(0.05)
        raw.close()
        with pytest.raises(MpaSetupError) as ei:
            fut.result(timeout=T)
    assert_mpa(ei.value, MpaError.TCP_CLOSED)
    assert "30 octets" in ei.value.info.text


def test_initiator_peer_closes_mid_frame_error1():
    a, raw = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(connect, a, P())
        raw_read_frame(raw, "request")
        raw.sendall(b"MPA ID Rep Fr")
        raw.close()
        with pytest.raises(MpaSetupError) as ei:
            fut.result(timeout=T)
    assert_mpa(ei.value, MpaError.TCP_CLOSED)


def test_initiator_peer_closes_before_reply_error1():
    a, raw = socket.socketpair()
    raw.close()
    with pytest.raises(MpaSetupError) as ei:
        connect(a, P())
    assert_mpa(ei.value, MpaError.TCP_CLOSED)


@pytest.mark.parametrize("role", ["initiator", "responder"])
def test_timeout_error1(role):
    a, raw = socket.socketpair()
    t0 = time.monotonic()
    with pytest.raises(MpaSetupError) as ei:
        if role == "initiator":
            connect(a, P(timeout=SHORT))
        else:
            raw.sendall(build(MpaFrame(kind="request"))[:10])   # a partial Request
            accept(a, P(timeout=SHORT))
    dt = time.monotonic() - t0
    assert_mpa(ei.value, MpaError.TCP_CLOSED)
    assert "timeout" in ei.value.info.text
    assert SHORT * 0.9 <= dt < SHORT + 1.0
    assert peer_closed(raw)
    raw.close()


def test_first_fpdu_timeout_error1():
    ri, rr = ok(*setup(P(), P()))          # client-server: the initiator stays silent
    with pytest.raises(MpaSetupError) as ei:
        rr.wait_first_fpdu(timeout=SHORT)
    assert_mpa(ei.value, MpaError.TCP_CLOSED)
    assert rr.closed and ei.value.term_sent is None
    with pytest.raises(ProtocolError) as ei:
        ri.recv_fpdu(timeout=T)             # the initiator sees the close
    assert ei.value.info.ecode == MpaError.TCP_CLOSED
    ri.close()


@pytest.mark.parametrize("strict", [False, True])
def test_reserved_flag_bits_ignored_unless_strict(strict):
    raw, b = socket.socketpair()
    req = bytearray(build(MpaFrame(kind="request", rev=2, enhanced=True, crc=True)))
    req[16] |= 0x08                         # a reserved bit (siw's GSO hint)
    raw.sendall(bytes(req))
    if strict:
        with pytest.raises(MpaSetupError) as ei:
            accept(b, P(strict=True))
        assert_mpa(ei.value, MpaError.BAD_FRAME)
    else:
        rr = accept(b, P())
        assert rr.crc and rr.enhanced
        rr.close()
    raw.close()


def test_connect_to_address_refused_error1():
    with socket.create_server(("127.0.0.1", 0)) as lst:
        addr = lst.getsockname()
    with pytest.raises(MpaSetupError) as ei:
        connect(addr, P(timeout=SHORT))
    assert_mpa(ei.value, MpaError.TCP_CLOSED)


# -- peer-to-peer and RTR --------------------------------------------------------------

@pytest.mark.parametrize("markers, crc", [(False, True), (True, True), (False, False)])
@pytest.mark.parametrize("rtr", ["send", "write", "read"])
def test_p2p_each_rtr(rtr, markers, crc):
    ri, rr = ok(*setup(P(p2p=True, rtr={rtr}, markers=markers, crc=crc, ird=1, ord=1),
                       P(markers=markers, crc=crc)))
    assert ri.p2p and rr.p2p and ri.rtr == rr.rtr == rtr
    flags = rr.local_frame
    assert (flags.rtr_send, flags.rtr_write, flags.rtr_read) == (
        rtr == "send", rtr == "write", rtr == "read")
    op, header, payload = opcode_of(ri.rtr_ulpdu)
    if rtr == "send":
        assert op == Opcode.SEND and (header.qn, header.msn, header.mo) == (0, 1, 0)
        assert payload == b"" and ri.tx.next_msn(0) == 2
    elif rtr == "write":
        assert op == Opcode.RDMA_WRITE and header.tagged and payload == b""
        assert header.stag != 0 and header.stag == 1 and header.to == 0
    else:
        assert op == Opcode.RDMA_READ_REQUEST and (header.qn, header.msn) == (1, 1)
        req = ReadRequest.parse(payload)
        assert req.size == 0 and req.sink_stag == req.src_stag == 1
    assert header.last
    rec = rr.wait_first_fpdu()
    assert rec.ulpdu == ri.rtr_ulpdu and rr.rtr_ulpdu == ri.rtr_ulpdu
    assert rr.rtr == rtr and rr.fence_open
    if rtr == "send":
        assert rr.rx_msn[0] == 2
    if rtr == "read":
        assert rr.rx_msn[1] == 2
        # the zero-length Read RTR is answered with a zero-length Read Response
        op, header, payload = opcode_of(ri.recv_fpdu().ulpdu)
        assert op == Opcode.RDMA_READ_RESPONSE and header.stag == 1 and payload == b""
    # the fence is open: the responder talks first now
    rr.send_ulpdu(segment.ulpdu(Opcode.SEND, b"hello from responder"))
    assert ri.recv_fpdu().ulpdu.endswith(b"hello from responder")
    ri.send_ulpdu(segment.ulpdu(Opcode.SEND, b"and back", msn=ri.tx.next_msn(0)))
    assert rr.recv_fpdu().ulpdu.endswith(b"and back")
    ri.close()
    rr.close()


def test_p2p_responder_picks_one_by_preference():
    ri, rr = ok(*setup(P(p2p=True), P(rtr={"send", "read"})))
    assert rr.local_frame.rtr_read and not rr.local_frame.rtr_send
    assert not rr.local_frame.rtr_write
    assert ri.rtr == rr.rtr == "read"
    rr.wait_first_fpdu()
    ri.close()
    rr.close()


def test_p2p_read_rtr_raises_zero_responder_ird():
    ri, rr = ok(*setup(P(p2p=True, rtr={"read"}, ird=0, ord=0), P(ird=0, ord=0)))
    assert rr.local_frame.ird == 1 and rr.ird == 1 and ri.rtr == "read"
    rr.wait_first_fpdu()
    ri.close()
    rr.close()


def test_fence_on_the_wire():
    """A raw initiator sees no FPDU from the responder until it sent its RTR."""
    raw, b = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        def responder():
            n = accept(b, P())
            with pytest.raises(RuntimeError):
                n.send_ulpdu(segment.ulpdu(Opcode.SEND, b"early"))
            n.wait_first_fpdu()
            t = time.monotonic()
            n.send_ulpdu(segment.ulpdu(Opcode.SEND, b"after rtr"))
            return n, t
        fut = ex.submit(responder)
        req = MpaFrame(kind="request", rev=2, enhanced=True, crc=True, ird=1, ord=1, p2p=True,
                       rtr_write=True)
        raw.sendall(build(req))
        reply, rest = raw_read_frame(raw, "reply")
        assert reply.p2p and reply.rtr_write and rest == b""
        r, _, _ = select.select([raw], [], [], 0.3)
        assert not r, "the responder sent before the RTR"
        enc = FpduEncoder(markers=False, crc=True)
        t_rtr = time.monotonic()
        raw.sendall(enc.encode(segment.ulpdu(Opcode.RDMA_WRITE, b"", stag=7)))
        dec = FpduDecoder(markers=False, crc=True)
        raw.settimeout(T)
        recs = []
        while not recs:
            recs = dec.feed(raw.recv(65536))
        n, t_sent = fut.result(timeout=T)
    assert recs[0].ulpdu.endswith(b"after rtr") and t_sent >= t_rtr
    assert n.rtr == "write"
    n.close()
    raw.close()


def test_first_fpdu_delay_holds_back_the_rtr():
    a, b = socket.socketpair()
    ri, rr = ok(*both(lambda: connect(a, P(p2p=True, first_fpdu_delay=0.2)),
                      lambda: (accept(b, P()), time.monotonic())))
    rr, t_reply = rr
    rr.wait_first_fpdu()
    assert time.monotonic() - t_reply >= 0.18
    ri.close()
    rr.close()


def test_no_matching_rtr_error7_both_sides():
    a, b = socket.socketpair()

    def responder():
        n = accept(b, P(rtr={"write", "read"}))
        assert n.rtr is None and n.rtr_offered == {"write", "read"}
        # RFC 6581 9.2: no match -> the Reply names what the responder supports
        assert n.local_frame.rtr_write and n.local_frame.rtr_read
        assert not n.local_frame.rtr_send
        n.wait_first_fpdu()

    ri, rr = both(lambda: connect(a, P(p2p=True, rtr={"send"})), responder)
    assert_mpa(ri, MpaError.NO_MATCHING_RTR)
    assert ri.term_sent is not None and ri.term_sent.ecode == 7
    assert ri.frame is not None and ri.frame.kind == "reply"
    assert_mpa(rr, MpaError.NO_MATCHING_RTR)
    assert rr.terminate is not None and (rr.terminate.layer, rr.terminate.etype) == (2, 0)


def _raw_responder(reply_frame, *, markers=False, crc=True, count=None):
    """A raw responder: read the Request, send ``reply_frame``, collect FPDUs until
    EOF (or ``count`` FPDUs)."""
    def run(raw):
        raw_read_frame(raw, "request")
        raw.sendall(build(reply_frame))
        if count == 0:
            return []
        return raw_fpdus(raw, markers=markers, crc=crc, count=count)
    return run


def _run_raw_responder(params, reply_frame, **kw):
    a, raw = socket.socketpair()
    ri, recs = both(lambda: connect(a, params), lambda: _raw_responder(reply_frame, **kw)(raw))
    raw.close()
    if isinstance(recs, Exception):
        raise recs
    return ri, recs


@pytest.mark.parametrize("reply", [
    MpaFrame(kind="reply", rev=2, enhanced=True, crc=True, ird=4, ord=4),        # A = 0
    MpaFrame(kind="reply", rev=1, crc=True),                                     # unenhanced
    MpaFrame(kind="reply", rev=2, enhanced=True, crc=True, ird=0, ord=4, p2p=True,
             rtr_read=True),                                                     # Read, IRD 0
])
def test_initiator_no_compatible_model_error7_with_terminate(reply):
    ri, recs = _run_raw_responder(P(p2p=True, rtr={"read", "send"}), reply)
    assert_mpa(ri, MpaError.NO_MATCHING_RTR)
    assert len(recs) == 1
    term = terminate_of(recs[0])
    assert (term.layer, term.etype, term.ecode) == (2, 0, 7)
    assert not (term.m or term.d or term.r)


def test_initiator_accepts_several_offered_rtr_and_chooses():
    reply = MpaFrame(kind="reply", rev=2, enhanced=True, crc=True, ird=4, ord=4, p2p=True,
                     rtr_send=True, rtr_write=True, rtr_read=True)
    ri, recs = _run_raw_responder(P(p2p=True, rtr={"send", "read"}), reply, count=1)
    assert ri.rtr == "read"
    ri.close()
    op, _, _ = opcode_of(recs[0].ulpdu)
    assert op == Opcode.RDMA_READ_REQUEST


def test_responder_unexpected_first_fpdu_error7():
    raw, b = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(lambda: accept(b, P()).wait_first_fpdu())
        raw.sendall(build(MpaFrame(kind="request", rev=2, enhanced=True, crc=True, p2p=True,
                                   rtr_write=True)))
        raw_read_frame(raw, "reply")
        enc = FpduEncoder(markers=False, crc=True)
        raw.sendall(enc.encode(segment.ulpdu(Opcode.SEND, b"not an RTR")))
        recs = raw_fpdus(raw, markers=False, crc=True)
        with pytest.raises(MpaSetupError) as ei:
            fut.result(timeout=T)
    assert_mpa(ei.value, MpaError.NO_MATCHING_RTR)
    assert terminate_of(recs[0]).ecode == 7
    raw.close()


def test_responder_bad_crc_in_first_fpdu_terminates():
    raw, b = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(lambda: accept(b, P()).wait_first_fpdu())
        raw.sendall(build(MpaFrame(kind="request", rev=2, enhanced=True, crc=True)))
        raw_read_frame(raw, "reply")
        wire = bytearray(FpduEncoder(markers=False, crc=True).encode(
            segment.ulpdu(Opcode.SEND, b"payload")))
        wire[-1] ^= 0xFF
        raw.sendall(bytes(wire))
        recs = raw_fpdus(raw, markers=False, crc=True)
        with pytest.raises(MpaSetupError) as ei:
            fut.result(timeout=T)
    assert_mpa(ei.value, MpaError.CRC)
    assert terminate_of(recs[0]).ecode == MpaError.CRC
    raw.close()


@pytest.mark.parametrize("crc_field", ["zero", "bad"])
def test_responder_first_fpdu_terminate_with_zero_crc_field(crc_field):
    """Linux siw sends the Terminate of a failed setup (2/0/7 as the initiator) before it
    turns CRC on: a first-FPDU Terminate with an all-zero CRC field is taken as the
    peer's Terminate; any other bad CRC is still MPA error 2."""
    raw, b = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        box = {}

        def responder():
            box["neg"] = accept(b, P())
            return box["neg"].wait_first_fpdu()
        fut = ex.submit(responder)
        raw.sendall(build(MpaFrame(kind="request", rev=2, enhanced=True, crc=True, p2p=True,
                                   rtr_write=True)))
        raw_read_frame(raw, "reply")
        term = Terminate.for_error(ErrorInfo.mpa(MpaError.NO_MATCHING_RTR, "no RTR"))
        wire = bytearray(FpduEncoder(markers=False, crc=False).encode(
            segment.ulpdu(Opcode.TERMINATE, term)))
        if crc_field == "bad":
            wire[-4:] = b"\x01\x02\x03\x04"
        raw.sendall(bytes(wire))
        recs = raw_fpdus(raw, markers=False, crc=True)
        with pytest.raises(MpaSetupError) as ei:
            fut.result(timeout=T)
    if crc_field == "zero":
        assert_mpa(ei.value, MpaError.NO_MATCHING_RTR)
        assert ei.value.terminate is not None and box["neg"].zero_crc_terminate
        assert recs == []                       # nothing sent back: the peer said it all
    else:
        assert_mpa(ei.value, MpaError.CRC)
        assert terminate_of(recs[0]).ecode == MpaError.CRC
    raw.close()


# -- insufficient IRD -----------------------------------------------------------------

def test_insufficient_ird_neither_side_adjusts_error6():
    a, b = socket.socketpair()

    def responder():
        n = accept(b, P(ird=2, ord=2))            # cannot raise its IRD above 2
        assert n.local_frame.ird == 2
        n.wait_first_fpdu()

    ri, rr = both(lambda: connect(a, P(ird=2, ord=8, ord_min=8)), responder)
    assert_mpa(ri, MpaError.INSUFFICIENT_IRD)
    assert ri.term_sent.ecode == 6
    assert_mpa(rr, MpaError.INSUFFICIENT_IRD)
    assert rr.terminate.ecode == 6


def test_insufficient_initiator_ird_responder_rejects_error6():
    a, b = socket.socketpair()
    ri, rr = both(lambda: connect(a, P(ird=2, ord=2)),
                  lambda: accept(b, P(ird=4, ord=8, ord_min=8, private_data=b"need 8")))
    assert isinstance(ri, MpaRejected)
    assert_mpa(ri, MpaError.INSUFFICIENT_IRD)
    assert ri.frame.ord == 8 and ri.peer_private_data == b"need 8"
    assert_mpa(rr, MpaError.INSUFFICIENT_IRD)
    assert rr.frame.kind == "request"


def test_responder_ord_above_initiator_ird_max_error6_terminate():
    reply = MpaFrame(kind="reply", rev=2, enhanced=True, crc=True, ird=4, ord=8)
    ri, recs = _run_raw_responder(P(ird=2, ird_max=4, ord=2), reply)
    assert_mpa(ri, MpaError.INSUFFICIENT_IRD)
    term = terminate_of(recs[0])
    assert (term.layer, term.etype, term.ecode) == (2, 0, 6)


def test_initiator_raises_ird_to_responder_ord():
    reply = MpaFrame(kind="reply", rev=2, enhanced=True, crc=True, ird=4, ord=6)
    ri, recs = _run_raw_responder(P(ird=2, ird_max=8, ord=2), reply, count=0)
    assert (ri.ird, ri.ord) == (6, 2)
    ri.close()
    assert recs == []


# -- leftover, private data, revisions, EMSS ----------------------------------------

def test_reply_and_first_fpdu_in_one_write_leftover_kept():
    a, raw = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(connect, a, P(rev=1, crc=True))
        raw_read_frame(raw, "request")
        reply = build(MpaFrame(kind="reply", rev=1, crc=True, private_data=b"pd"))
        fpdu = FpduEncoder(markers=False, crc=True).encode(segment.ulpdu(Opcode.SEND, b"early"))
        raw.sendall(reply + fpdu)
        ri = fut.result(timeout=T)
    assert ri.rx_frame_octets == len(reply) == 22
    assert ri.leftover == fpdu
    rec = ri.recv_fpdu()
    assert rec.ulpdu.endswith(b"early") and rec.offset == 0 and rec.crc == "ok"
    ri.close()
    raw.close()


def test_request_and_fpdu_in_one_write_leftover_kept():
    raw, b = socket.socketpair()
    req = build(MpaFrame(kind="request", rev=2, enhanced=True, ird=1, ord=1))
    fpdu = FpduEncoder(markers=False, crc=False).encode(segment.ulpdu(Opcode.SEND, b"eager"))
    raw.sendall(req + fpdu)
    rr = accept(b, P(crc=False))
    assert rr.leftover == fpdu and rr.rx_frame_octets == len(req) == 24
    assert rr.wait_first_fpdu(timeout=SHORT).ulpdu.endswith(b"eager")
    rr.close()
    raw.close()


@pytest.mark.parametrize("rev, n", [(1, 512), (2, 508)])
def test_private_data_up_to_512(rev, n):
    pi, pr = bytes(range(256)) * 2, bytes(reversed(range(256))) * 2
    ri, rr = ok(*setup(P(rev=rev, private_data=pi[:n]), P(rev=rev, private_data=pr[:n])))
    assert ri.peer_private_data == pr[:n] and rr.peer_private_data == pi[:n]
    assert ri.tx_frame_octets == rr.tx_frame_octets == 20 + 512
    ri.close()
    rr.close()


def test_private_data_limits_checked():
    with pytest.raises(ValueError):
        ConnParams(rev=1, private_data=bytes(513))
    with pytest.raises(ValueError):
        ConnParams(rev=2, private_data=bytes(509))
    with pytest.raises(ValueError):
        ConnParams(rev=1, p2p=True)
    with pytest.raises(ValueError):
        ConnParams(rtr_stag=0)
    with pytest.raises(ValueError):
        ConnParams(rtr={"bogus"})


def test_rev2_request_rev1_responder():
    ri, rr = ok(*setup(P(rev=2, ird=3, ord=3, private_data=b"v2"), P(rev=1)))
    assert ri.rev == rr.rev == 1 and not ri.enhanced and not rr.enhanced
    assert ri.ird is None and ri.ord is None
    assert rr.local_frame.rev == 1 and not rr.local_frame.enhanced
    assert rr.peer_private_data == b"v2" and rr.peer_frame.ird == 3
    ri.close()
    rr.close()


def test_rev1_request_rev2_responder_answers_rev1():
    ri, rr = ok(*setup(P(rev=1), P(rev=2)))
    assert rr.local_frame.rev == 1 and not rr.local_frame.enhanced
    assert ri.rev == 1
    ri.close()
    rr.close()


def test_p2p_against_rev1_responder_error7():
    a, b = socket.socketpair()

    def responder():
        accept(b, P(rev=1)).wait_first_fpdu()

    ri, rr = both(lambda: connect(a, P(p2p=True)), responder)
    assert_mpa(ri, MpaError.NO_MATCHING_RTR)
    assert_mpa(rr, MpaError.NO_MATCHING_RTR)
    assert rr.terminate is not None


def test_tcp_loopback_emss_and_address_connect():
    with socket.create_server(("127.0.0.1", 0)) as lst:
        addr = lst.getsockname()
        ri, rr = ok(*both(lambda: connect(addr, P(markers=True)),
                          lambda: accept(lst.accept()[0], P(markers=True))))
    emss = ri.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    assert ri.emss == emss and ri.mulpdu == mulpdu(emss, markers=True)
    assert ri.markers_tx and ri.markers_rx
    ri.send_ulpdu(segment.ulpdu(Opcode.SEND, bytes(5000)))
    assert len(rr.wait_first_fpdu().ulpdu) == 18 + 5000
    ri.close()
    rr.close()


def test_socketpair_emss_falls_back():
    ri, rr = ok(*setup(P(), P(emss=9000)))
    assert ri.emss == cm.DEFAULT_EMSS and ri.mulpdu == mulpdu(1460, markers=False)
    assert rr.emss == 9000
    ri.close()
    rr.close()


# -- local catastrophic -------------------------------------------------------------------

def test_local_catastrophic_before_reply_error5():
    def boom(_req):
        raise RuntimeError("ULP callback crashed")

    a, b = socket.socketpair()
    ri, rr = both(lambda: connect(a, P()), lambda: accept(b, P(), reject=boom))
    assert_mpa(rr, MpaError.LOCAL_CATASTROPHIC)
    assert isinstance(rr.__cause__, RuntimeError)
    assert_mpa(ri, MpaError.TCP_CLOSED)          # the initiator just sees the close


def test_local_catastrophic_after_reply_error5_terminate(monkeypatch):
    def broken(self, deadline):
        raise RuntimeError("RTR path broken")

    monkeypatch.setattr(cm.Negotiated, "_send_rtr", broken)
    a, b = socket.socketpair()
    ri, rr = both(lambda: connect(a, P(p2p=True)),
                  lambda: accept(b, P()).wait_first_fpdu())
    assert_mpa(ri, MpaError.LOCAL_CATASTROPHIC)
    assert ri.term_sent.ecode == 5
    assert_mpa(rr, MpaError.LOCAL_CATASTROPHIC)
    assert rr.terminate.ecode == 5


def test_setup_errors_are_protocol_errors():
    assert issubclass(MpaSetupError, ProtocolError)
    assert issubclass(MpaRejected, MpaSetupError)


def test_many_setups_in_threads_tcp():
    """Several connections at once over TCP, each its own negotiation."""
    with socket.create_server(("127.0.0.1", 0), backlog=8) as lst:
        addr = lst.getsockname()
        results = []

        def server():
            for _ in range(4):
                s, _ = lst.accept()
                n = accept(s, P())
                n.wait_first_fpdu()
                results.append(n)

        t = threading.Thread(target=server)
        t.start()
        clients = [connect(addr, P(p2p=True, rtr={r})) for r in ("send", "write", "read", "send")]
        t.join(timeout=10)
    assert [n.rtr for n in results] == ["send", "write", "read", "send"]
    for n in clients + results:
        n.close()
