"""Data sink golden model (host/model/sink.py): placement, completion, one test per error code."""

import pytest
from hypothesis import given, settings, strategies as st

from rnic.host.model import ddp, segment
from rnic.host.spec.errors import (DdpErrorType, DdpTaggedCode, DdpUntaggedCode, Layer, RdmapErrorType,
    RdmapOperationCode, RdmapProtectionCode)
from rnic.host.model.rdmap import Opcode, ReadRequest, Terminate
from rnic.host.model.sink import (Access, Error, Memory, Placement, ReadRequestQueued, ReadResponseComplete,
    Region, SendComplete, Sink, TerminateReceived)

RW = Access.REMOTE_READ | Access.REMOTE_WRITE
STAG = 0x100
BASE = 0x10000
LEN = 0x1000
RECV = 0x80000


def make_sink(**kwargs):
    s = Sink(**kwargs)
    s.register_region(stag=STAG, base=BASE, length=LEN, access=RW)
    return s


def write(payload, *, stag=STAG, to=BASE, last=True):
    return segment.ulpdu(Opcode.RDMA_WRITE, payload, stag=stag, to=to, last=last)


def send(payload, *, msn=1, mo=0, last=True, opcode=Opcode.SEND, qn=None, inval_stag=0):
    return segment.ulpdu(opcode, payload, msn=msn, mo=mo, last=last, qn=qn, inval_stag=inval_stag)


def read_request(*, src_stag=STAG, src_to=BASE, size=16, msn=1):
    rr = ReadRequest(sink_stag=0x999, sink_to=0x5000, size=size, src_stag=src_stag, src_to=src_to)
    return segment.ulpdu(Opcode.RDMA_READ_REQUEST, rr, msn=msn)


def raw_untagged(control, payload=b"", *, qn=0, msn=1, mo=0, dv=1, last=True):
    return ddp.build(ddp.UntaggedHeader(last=last, qn=qn, msn=msn, mo=mo, rsvd_ulp=control << 32, dv=dv),
                     payload)


def raw_tagged(control, payload=b"", *, stag=STAG, to=BASE, dv=1, last=True):
    return ddp.build(ddp.TaggedHeader(last=last, stag=stag, to=to, rsvd_ulp=control, dv=dv), payload)


def expect_error(sink, ulpdu, layer, etype, ecode):
    """One Error event with the given code and a well-formed Terminate; later input dropped."""
    events = sink.receive(ulpdu)
    assert len(events) == 1 and isinstance(events[0], Error), events
    info = events[0].info
    assert (info.layer, info.etype, info.ecode) == (layer, etype, ecode), info
    assert info.text
    assert sink.error == info
    header, payload = ddp.parse(events[0].terminate)
    assert (header.tagged, header.last, header.qn, header.msn, header.mo) == (False, True, 2, 1, 0)
    assert header.rsvd_ulp == 0x47 << 32
    term = Terminate.parse(payload)
    assert (term.layer, term.etype, term.ecode) == (layer, etype, ecode)
    if term.m:
        assert term.ddp_segment_length == len(ulpdu)
    if term.d:
        assert term.ddp_header == ulpdu[:len(term.ddp_header)]
    # the stream is dead: anything later is silently dropped
    assert sink.receive(write(b"later")) == []
    assert sink.receive(send(b"later")) == []
    return term


DDP = Layer.DDP
RDMAP = Layer.RDMAP
TAGGED = DdpErrorType.TAGGED
UNTAGGED = DdpErrorType.UNTAGGED
PROT = RdmapErrorType.REMOTE_PROTECTION
OPER = RdmapErrorType.REMOTE_OPERATION


# -- memory and regions -----------------------------------------------------

def test_memory_sparse():
    m = Memory()
    assert m.read(0x1234, 4) == bytes(4)
    m.write(4090, bytes(range(20)))
    assert m.read(4090, 20) == bytes(range(20))
    assert m.read(4088, 4) == b"\0\0\0\1"
    m.write(2**64 - 2, b"ab")
    assert m.read(2**64 - 2, 2) == b"ab"


def test_region_checks():
    with pytest.raises(ValueError):
        Region(stag=1, base=2**64 - 1, length=2, access=RW)
    with pytest.raises(TypeError):
        Region(1, 0, 1, RW)
    r = Region(stag=1, base=0x1000, length=16, access=RW, addr=0x9000)
    assert r.contains(0x1000, 16) and not r.contains(0x1000, 17) and not r.contains(0xFFF, 1)
    assert r.address(0x1004) == 0x9004


def test_constructor_checks():
    with pytest.raises(TypeError):
        Sink(memory=bytearray(10))
    with pytest.raises(ValueError):
        Sink(ird=-1)
    with pytest.raises(TypeError):
        Sink(None)


# -- tagged placement ----------------------------------------------------------

def test_write_is_silent_placement():
    s = make_sink()
    events = s.receive(write(b"hello", to=BASE + 8))
    assert events == [Placement(BASE + 8, b"hello")]
    assert s.memory.read(BASE + 8, 5) == b"hello"


def test_write_segments_out_of_order_and_duplicates():
    s = make_sink()
    payload = bytes(range(200))
    segs = segment.segment(Opcode.RDMA_WRITE, payload, mulpdu=64, stag=STAG, to=BASE + 100)
    order = [2, 0, 1] + list(range(3, len(segs)))
    for i in order:
        s.receive(segs[i])
    s.receive(segs[1])  # placing again is allowed
    assert s.memory.read(BASE + 100, 200) == payload
    assert s.error is None


def test_zero_based_region_address():
    s = Sink()
    s.register_region(stag=7, base=0, length=64, access=Access.REMOTE_WRITE, addr=0x4000)
    assert s.receive(write(b"xy", stag=7, to=10)) == [Placement(0x400A, b"xy")]


def test_zero_length_tagged_not_checked():
    s = make_sink()
    assert s.receive(write(b"", stag=0xDEAD, to=2**64 - 1)) == []
    assert s.error is None


def test_read_response_complete():
    s = make_sink()
    segs = segment.segment(Opcode.RDMA_READ_RESPONSE, bytes(100), mulpdu=50, stag=STAG, to=BASE + 4)
    events = [e for seg in segs for e in s.receive(seg)]
    assert events[-1] == ReadResponseComplete(STAG, BASE + 4, 100)
    assert sum(isinstance(e, Placement) for e in events) == len(segs)
    # zero-length read response completes too
    assert s.receive(segment.ulpdu(Opcode.RDMA_READ_RESPONSE, b"", stag=1, to=0)) == [
        ReadResponseComplete(1, 0, 0)]


# -- untagged placement and completion --------------------------------------------

def test_send_completes_in_buffer():
    s = make_sink()
    assert s.post_receive(addr=RECV, length=100, buffer_id="a") == 1
    segs = segment.segment(Opcode.SEND_SE, b"x" * 70, mulpdu=50)
    events = [e for seg in segs for e in s.receive(seg)]
    assert events[-1] == SendComplete(70, 1, "a", None, True)
    assert s.memory.read(RECV, 70) == b"x" * 70
    assert s.posted == 0


def test_sends_consume_buffers_in_msn_order():
    s = make_sink()
    for i in range(3):
        s.post_receive(addr=RECV + 0x100 * i, length=0x100)
    assert s.receive(send(b"one", msn=1))[-1] == SendComplete(3, 1, 1, None, False)
    assert s.receive(send(b"", msn=2)) == [SendComplete(0, 2, 2, None, False)]
    assert s.receive(send(b"three", msn=3))[-1].buffer_id == 3
    assert s.memory.read(RECV + 0x200, 5) == b"three"


def test_delivery_waits_for_earlier_messages():
    s = make_sink()
    s.post_receive(addr=RECV, length=64)
    s.post_receive(addr=RECV + 64, length=64)
    first = segment.segment(Opcode.SEND, bytes(40), mulpdu=38, msn=1)
    assert s.receive(first[0]) == [Placement(RECV, bytes(20))]
    events = s.receive(send(b"second", msn=2))
    assert events == [Placement(RECV + 64, b"second")]  # placed, not delivered yet
    events = s.receive(first[1])
    assert events[1:] == [SendComplete(40, 1, 1, None, False), SendComplete(6, 2, 2, None, False)]


def test_send_segments_placed_by_mo():
    s = make_sink()
    s.post_receive(addr=RECV, length=100)
    payload = bytes(range(90))
    segs = segment.segment(Opcode.SEND, payload, mulpdu=48, msn=1)
    for seg in [segs[1], segs[0]] + segs[2:]:
        events = s.receive(seg)
    assert events[-1] == SendComplete(90, 1, 1, None, False)
    assert s.memory.read(RECV, 90) == payload


def test_send_with_invalidate():
    s = Sink()
    s.register_region(stag=STAG, base=BASE, length=LEN, access=RW | Access.REMOTE_INV)
    s.post_receive(addr=RECV, length=16)
    events = s.receive(send(b"inv", opcode=Opcode.SEND_SE_INVALIDATE, inval_stag=STAG))
    assert events[-1] == SendComplete(3, 1, 1, STAG, True)
    assert not s.region(STAG).valid
    # the invalidated STag is now refused
    expect_error(s, write(b"x"), DDP, TAGGED, DdpTaggedCode.INVALID_STAG)


def test_read_request_queued_and_ird():
    s = make_sink(ird=2)
    e1 = s.receive(read_request(msn=1))
    assert e1 == [ReadRequestQueued(ReadRequest.parse(read_request()[18:]), 1)]
    s.receive(read_request(msn=2))
    assert len(s.read_requests) == 2
    assert s.pop_read_request().size == 16
    assert s.receive(read_request(msn=3))[0].msn == 3


def test_zero_size_read_request_not_checked():
    s = make_sink()
    events = s.receive(read_request(src_stag=0xBAD, src_to=2**64 - 1, size=0))
    assert isinstance(events[0], ReadRequestQueued)


def test_terminate_received_ends_stream():
    s = make_sink()
    t = Terminate(layer=2, etype=0, ecode=2)
    assert s.receive(segment.ulpdu(Opcode.TERMINATE, t)) == [TerminateReceived(t)]
    assert s.terminate_received == t
    assert s.receive(write(b"x")) == []
    assert s.error is None


# -- errors: DDP ----------------------------------------------------------------

def test_ddp_catastrophic_short_ulpdu():
    s = make_sink()
    term = expect_error(s, b"\xc1\x40" + bytes(8), DDP, DdpErrorType.CATASTROPHIC, 0)
    assert (term.m, term.d, term.r) == (True, False, False)


def test_ddp_tagged_invalid_stag_unknown():
    s = make_sink()
    term = expect_error(s, write(b"x", stag=0x200), DDP, TAGGED, DdpTaggedCode.INVALID_STAG)
    assert (term.m, term.d, term.r) == (True, True, False) and len(term.ddp_header) == 14


def test_ddp_tagged_invalid_stag_invalidated():
    s = make_sink()
    s.invalidate(STAG)
    expect_error(s, write(b"x"), DDP, TAGGED, DdpTaggedCode.INVALID_STAG)
    assert s.memory.read(BASE, 1) == b"\0"


@pytest.mark.parametrize("to,n", [(BASE - 1, 4), (BASE + LEN - 3, 4), (BASE + LEN, 1)])
def test_ddp_tagged_base_bounds(to, n):
    s = make_sink()
    expect_error(s, write(b"z" * n, to=to), DDP, TAGGED, DdpTaggedCode.BASE_BOUNDS)
    assert s.memory.read(to, n) == bytes(n)  # nothing of the segment placed


def test_ddp_tagged_stag_not_associated():
    s = make_sink(stream=1)
    s.register_region(stag=0x300, base=0, length=64, access=RW, stream=2)
    expect_error(s, write(b"x", stag=0x300, to=0), DDP, TAGGED, DdpTaggedCode.STAG_NOT_ASSOCIATED)


def test_ddp_tagged_to_wrap():
    s = Sink()
    s.register_region(stag=5, base=2**64 - 16, length=16, access=RW, addr=0x1000)
    assert s.receive(write(b"a" * 16, stag=5, to=2**64 - 16)) == [Placement(0x1000, b"a" * 16)]
    expect_error(s, write(b"b" * 16, stag=5, to=2**64 - 8), DDP, TAGGED, DdpTaggedCode.TO_WRAP)


def test_ddp_tagged_invalid_version():
    s = make_sink()
    expect_error(s, raw_tagged(0x40, b"x", dv=2), DDP, TAGGED, DdpTaggedCode.INVALID_VERSION)


def test_ddp_untagged_invalid_qn():
    s = make_sink()
    s.post_receive(addr=RECV, length=64)
    expect_error(s, send(b"x", qn=3), DDP, UNTAGGED, DdpUntaggedCode.INVALID_QN)


def test_ddp_untagged_no_buffer():
    s = make_sink()
    term = expect_error(s, send(b"x"), DDP, UNTAGGED, DdpUntaggedCode.INVALID_MSN_NO_BUFFER)
    assert (term.m, term.d, term.r) == (True, True, False) and len(term.ddp_header) == 18


def test_ddp_untagged_no_buffer_after_consuming():
    s = make_sink()
    s.post_receive(addr=RECV, length=64)
    s.receive(send(b"", msn=1))
    expect_error(s, send(b"", msn=2), DDP, UNTAGGED, DdpUntaggedCode.INVALID_MSN_NO_BUFFER)


@pytest.mark.parametrize("msn", [0, 3, 0x80000000])
def test_ddp_untagged_msn_range(msn):
    s = make_sink()
    s.post_receive(addr=RECV, length=64)
    expect_error(s, send(b"x", msn=msn), DDP, UNTAGGED, DdpUntaggedCode.INVALID_MSN_RANGE)


def test_ddp_untagged_msn_range_completed_message():
    s = make_sink()
    s.post_receive(addr=RECV, length=64)
    s.post_receive(addr=RECV + 64, length=64)
    s.receive(send(b"x", msn=1))
    expect_error(s, send(b"x", msn=1), DDP, UNTAGGED, DdpUntaggedCode.INVALID_MSN_RANGE)


def test_ddp_untagged_msn_range_qn1():
    s = make_sink()
    expect_error(s, read_request(msn=2), DDP, UNTAGGED, DdpUntaggedCode.INVALID_MSN_RANGE)


def test_ddp_untagged_invalid_mo():
    s = make_sink()
    s.post_receive(addr=RECV, length=100)
    expect_error(s, send(b"x", mo=100, last=False), DDP, UNTAGGED, DdpUntaggedCode.INVALID_MO)
    assert s.memory.read(RECV + 100, 1) == b"\0"


def test_ddp_untagged_invalid_mo_last_not_highest():
    s = make_sink()
    s.post_receive(addr=RECV, length=100)
    assert s.receive(send(b"late", mo=50, last=False)) == [Placement(RECV + 50, b"late")]
    expect_error(s, send(b"early", mo=0, last=True), DDP, UNTAGGED, DdpUntaggedCode.INVALID_MO)
    assert s.memory.read(RECV, 5) == bytes(5)


def test_ddp_untagged_message_too_long():
    s = make_sink()
    s.post_receive(addr=RECV, length=100)
    expect_error(s, send(b"y" * 20, mo=90), DDP, UNTAGGED, DdpUntaggedCode.MESSAGE_TOO_LONG)
    assert s.memory.read(RECV + 90, 10) == bytes(10)


def test_ddp_untagged_message_too_long_zero_length_last():
    s = make_sink()
    s.post_receive(addr=RECV, length=100)
    expect_error(s, send(b"", mo=101), DDP, UNTAGGED, DdpUntaggedCode.MESSAGE_TOO_LONG)


def test_ddp_untagged_message_too_long_read_request():
    s = make_sink()
    expect_error(s, raw_untagged(0x41, bytes(29), qn=1), DDP, UNTAGGED,
                 DdpUntaggedCode.MESSAGE_TOO_LONG)


def test_ddp_untagged_invalid_version():
    s = make_sink()
    s.post_receive(addr=RECV, length=100)
    expect_error(s, raw_untagged(0x43, b"x", dv=0), DDP, UNTAGGED, DdpUntaggedCode.INVALID_VERSION)


def test_ddp_version_checked_before_rdmap_version():
    s = make_sink()
    # the old-revision frame: DV 0 and RV 0
    expect_error(s, bytes.fromhex("4003") + bytes(16), DDP, UNTAGGED, DdpUntaggedCode.INVALID_VERSION)


# -- errors: RDMAP -----------------------------------------------------------------

def test_rdmap_invalid_version():
    s = make_sink()
    s.post_receive(addr=RECV, length=100)
    term = expect_error(s, raw_untagged(0x83, b"x"), RDMAP, OPER, RdmapOperationCode.INVALID_VERSION)
    assert (term.m, term.d, term.r) == (True, True, False)


def test_rdmap_invalid_version_tagged():
    s = make_sink()
    expect_error(s, raw_tagged(0x00, b"x"), RDMAP, OPER, RdmapOperationCode.INVALID_VERSION)
    assert s.memory.read(BASE, 1) == b"\0"


@pytest.mark.parametrize("ulpdu", [
    raw_untagged(0x48, b"x"),                 # undefined opcode 8
    raw_tagged(0x4F, b"x"),                   # undefined opcode 15
    raw_untagged(0x40, b"x"),                 # Write, untagged
    raw_untagged(0x42, b"x"),                 # Read Response, untagged
    raw_tagged(0x43, b"x"),                   # Send, tagged
    raw_tagged(0x41, bytes(28)),              # Read Request, tagged
    raw_untagged(0x43, b"x", qn=1),           # Send on QN 1
    raw_untagged(0x41, bytes(28), qn=0),      # Read Request on QN 0
    raw_untagged(0x47, bytes(4), qn=0),       # Terminate on QN 0
    raw_untagged(0x43, b"x", qn=2),           # Send on QN 2
], ids=["op8", "op15", "write-untagged", "rresp-untagged", "send-tagged", "rreq-tagged",
        "send-qn1", "rreq-qn0", "term-qn0", "send-qn2"])
def test_rdmap_unexpected_opcode(ulpdu):
    s = make_sink()
    s.post_receive(addr=RECV, length=100)
    expect_error(s, ulpdu, RDMAP, OPER, RdmapOperationCode.UNEXPECTED_OPCODE)


@pytest.mark.parametrize("opcode", [Opcode.RDMA_WRITE, Opcode.RDMA_READ_RESPONSE])
def test_rdmap_access_rights_write(opcode):
    s = Sink()
    s.register_region(stag=9, base=0, length=64, access=Access.REMOTE_READ)
    term = expect_error(s, segment.ulpdu(opcode, b"x", stag=9, to=0), RDMAP, PROT,
                        RdmapProtectionCode.ACCESS_RIGHTS)
    assert (term.m, term.d, term.r) == (True, True, False)


def test_rdmap_read_request_invalid_stag():
    s = make_sink()
    term = expect_error(s, read_request(src_stag=0x555), RDMAP, PROT, RdmapProtectionCode.INVALID_STAG)
    assert (term.m, term.d, term.r) == (True, True, True)
    assert term.rdmap_header == read_request(src_stag=0x555)[18:]
    assert s.read_requests == ()


def test_rdmap_read_request_invalidated_stag():
    s = make_sink()
    s.invalidate(STAG)
    expect_error(s, read_request(), RDMAP, PROT, RdmapProtectionCode.INVALID_STAG)


@pytest.mark.parametrize("to,size", [(BASE - 1, 2), (BASE + 1, LEN)])
def test_rdmap_read_request_base_bounds(to, size):
    s = make_sink()
    expect_error(s, read_request(src_to=to, size=size), RDMAP, PROT, RdmapProtectionCode.BASE_BOUNDS)


def test_rdmap_read_request_access_rights():
    s = Sink()
    s.register_region(stag=9, base=0, length=64, access=Access.REMOTE_WRITE)
    expect_error(s, read_request(src_stag=9, src_to=0), RDMAP, PROT, RdmapProtectionCode.ACCESS_RIGHTS)


def test_rdmap_read_request_stag_not_associated():
    s = make_sink()
    s.register_region(stag=9, base=0, length=64, access=RW, stream=5)
    expect_error(s, read_request(src_stag=9, src_to=0), RDMAP, PROT,
                 RdmapProtectionCode.STAG_NOT_ASSOCIATED)


def test_rdmap_read_request_to_wrap():
    s = Sink()
    s.register_region(stag=9, base=2**64 - 64, length=64, access=RW)
    expect_error(s, read_request(src_stag=9, src_to=2**64 - 8, size=16), RDMAP, PROT,
                 RdmapProtectionCode.TO_WRAP)


def test_rdmap_ird_overflow():
    s = make_sink(ird=2)
    s.receive(read_request(msn=1))
    s.receive(read_request(msn=2))
    term = expect_error(s, read_request(msn=3), RDMAP, OPER, RdmapOperationCode.CATASTROPHIC_STREAM)
    assert (term.m, term.d, term.r) == (True, True, True)
    assert len(s.read_requests) == 2


def test_rdmap_ird_zero():
    s = make_sink(ird=0)
    expect_error(s, read_request(), RDMAP, OPER, RdmapOperationCode.CATASTROPHIC_STREAM)


def test_rdmap_malformed_read_request():
    s = make_sink()
    term = expect_error(s, raw_untagged(0x41, bytes(27), qn=1), RDMAP, OPER,
                        RdmapOperationCode.UNSPECIFIED)
    assert (term.m, term.d, term.r) == (True, True, False)


def test_rdmap_malformed_terminate():
    s = make_sink()
    expect_error(s, raw_untagged(0x47, bytes.fromhex("1000c000"), qn=2), RDMAP, OPER,
                 RdmapOperationCode.UNSPECIFIED)


def test_rdmap_cannot_invalidate_unknown():
    s = make_sink()
    s.post_receive(addr=RECV, length=16)
    expect_error(s, send(b"abc", opcode=Opcode.SEND_INVALIDATE, inval_stag=0x777), RDMAP, OPER,
                 RdmapOperationCode.STAG_CANNOT_INVALIDATE)
    assert s.memory.read(RECV, 3) == bytes(3)


def test_rdmap_cannot_invalidate_other_stream():
    s = make_sink()
    s.register_region(stag=0x777, base=0, length=8, access=RW, stream=3)
    s.post_receive(addr=RECV, length=16)
    expect_error(s, send(b"abc", opcode=Opcode.SEND_SE_INVALIDATE, inval_stag=0x777), RDMAP, PROT,
                 RdmapProtectionCode.STAG_CANNOT_INVALIDATE)
    assert s.region(0x777).valid


def test_error_terminate_uses_terminate_msn():
    s = make_sink(terminate_msn=5)
    events = s.receive(write(b"x", stag=1))
    assert ddp.parse(events[0].terminate)[0].msn == 5
    assert s.terminate_sent == events[0].terminate


# -- properties ---------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["send", "send_se", "write"]), payload=st.binary(max_size=700),
       mulpdu=st.integers(19, 400), offset=st.integers(0, 64))
def test_property_segment_then_sink(kind, payload, mulpdu, offset):
    s = make_sink()
    s.post_receive(addr=RECV + offset, length=len(payload) + offset, buffer_id="buf")
    tx = segment.TxStream(mulpdu=mulpdu)
    if kind == "write":
        segs = tx.write(payload, stag=STAG, to=BASE + offset)
        where = BASE + offset
    else:
        segs = tx.send(payload, solicited=kind == "send_se")
        where = RECV + offset
    events = [e for seg in segs for e in s.receive(seg)]
    assert s.error is None
    assert s.memory.read(where, len(payload)) == payload
    completions = [e for e in events if not isinstance(e, Placement)]
    if kind == "write":
        assert completions == []
    else:
        assert completions == [SendComplete(len(payload), 1, "buf", None, kind == "send_se")]


plausible = st.builds(
    lambda ctl, op, rest: bytes([ctl, 0x40 | op]) + rest,
    st.sampled_from([0x41, 0x01, 0xC1, 0x81]), st.integers(0, 15), st.binary(max_size=60))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=80), plausible))
def test_property_garbage_never_raises(raw):
    s = make_sink()
    s.post_receive(addr=RECV, length=32)
    events = s.receive(raw)
    for e in events:
        if isinstance(e, Error):
            Terminate.parse(ddp.parse(e.terminate)[1])
    assert s.receive(raw) == [] or s.error is None


def test_send_with_invalidate_needs_remote_inv():
    """A region registered without REMOTE_INV may not be invalidated by the peer: RDMAP
    Remote Protection, STag cannot be invalidated (1/9), and the region stays valid."""
    s = make_sink()
    s.post_receive(addr=RECV, length=16)
    expect_error(s, send(b"inv", opcode=Opcode.SEND_INVALIDATE, inval_stag=STAG),
                 RDMAP, RdmapErrorType.REMOTE_PROTECTION, RdmapProtectionCode.STAG_CANNOT_INVALIDATE)
    assert s.region(STAG).valid
