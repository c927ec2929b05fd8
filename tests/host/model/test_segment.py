"""TX segmentation (host/model/segment.py)."""

import pytest
from hypothesis import given, strategies as st

from rnic.host.model import ddp, rdmap, segment
from rnic.host.model.rdmap import Opcode, ReadRequest, Terminate


def _parse_all(segs):
    return [ddp.parse(s) for s in segs]


def test_rfc5041_untagged_example():
    # RFC 5041 5.2: 2048 octets, MULPDU 1500 -> 1482 at MO 0, 566 at MO 1482
    segs = segment.segment(Opcode.SEND, bytes(2048), mulpdu=1500, msn=7)
    parsed = _parse_all(segs)
    assert [len(p) for _, p in parsed] == [1482, 566]
    assert [h.mo for h, _ in parsed] == [0, 1482]
    assert [h.last for h, _ in parsed] == [False, True]
    assert all(h.msn == 7 and h.qn == 0 for h, _ in parsed)
    assert all(len(s) <= 1500 for s in segs)


def test_rfc5041_tagged_example():
    # RFC 5041 5.2: 2048 octets at TO 16384, MULPDU 1500 -> 1486 at 16384, 562 at 17870
    segs = segment.segment(Opcode.RDMA_WRITE, bytes(2048), mulpdu=1500, stag=0x55, to=16384)
    parsed = _parse_all(segs)
    assert [len(p) for _, p in parsed] == [1486, 562]
    assert [h.to for h, _ in parsed] == [16384, 17870]
    assert [h.last for h, _ in parsed] == [False, True]
    assert all(h.tagged and h.stag == 0x55 and h.rsvd_ulp == 0x40 for h, _ in parsed)


@pytest.mark.parametrize("opcode", [Opcode.SEND, Opcode.RDMA_WRITE])
def test_zero_length_is_one_segment(opcode):
    segs = segment.segment(opcode, b"", mulpdu=128, stag=1, to=5)
    assert len(segs) == 1
    header, payload = ddp.parse(segs[0])
    assert header.last and payload == b""


def test_exact_fit():
    segs = segment.segment(Opcode.SEND, bytes(110), mulpdu=128)
    assert len(segs) == 1 and len(segs[0]) == 128
    segs = segment.segment(Opcode.SEND, bytes(111), mulpdu=128)
    assert len(segs) == 2


def test_send_with_invalidate_fields():
    raw = segment.ulpdu(Opcode.SEND_SE_INVALIDATE, b"x", msn=3, inval_stag=0xCAFEF00D)
    header, _ = ddp.parse(raw)
    assert header.rsvd_ulp == (0x46 << 32) | 0xCAFEF00D and header.qn == 0 and header.msn == 3
    with pytest.raises(ValueError):
        segment.ulpdu(Opcode.SEND, b"", inval_stag=5)
    with pytest.raises(ValueError):
        segment.ulpdu(Opcode.RDMA_WRITE, b"", inval_stag=5)


def test_read_request_and_terminate_payloads():
    rr = ReadRequest(sink_stag=1, sink_to=2, size=3, src_stag=4, src_to=5)
    header, payload = ddp.parse(segment.ulpdu(Opcode.RDMA_READ_REQUEST, rr))
    assert header.qn == 1 and header.rsvd_ulp >> 32 == 0x41 and payload == rr.build()
    t = Terminate(layer=2, etype=0, ecode=2)
    header, payload = ddp.parse(segment.ulpdu(Opcode.TERMINATE, t))
    assert header.qn == 2 and header.rsvd_ulp >> 32 == 0x47 and payload == t.build()


def test_bad_arguments():
    with pytest.raises(ValueError):
        segment.segment(Opcode.SEND, b"x", mulpdu=18)
    assert segment.segment(Opcode.RDMA_WRITE, b"x", mulpdu=15, stag=1, to=0)
    with pytest.raises(ValueError):
        segment.segment(Opcode.RDMA_WRITE, b"xx", mulpdu=100, stag=1, to=2**64 - 1)
    with pytest.raises(ValueError):
        segment.segment(9, b"", mulpdu=100)
    with pytest.raises(TypeError):
        segment.TxStream(128)
    with pytest.raises(ValueError):
        segment.TxStream(mulpdu=18)


def test_txstream_msn_per_queue():
    tx = segment.TxStream(mulpdu=64)
    msns = []
    for segs in (tx.send(b"a"), tx.send(b"b", solicited=True),
                 tx.read_request(ReadRequest(sink_stag=1, sink_to=0, size=1, src_stag=2, src_to=0)),
                 tx.send(b"c", inval_stag=9), tx.write(b"w", stag=1, to=0),
                 tx.read_response(b"r", stag=1, to=0),
                 tx.terminate(Terminate(layer=0, etype=0, ecode=0)),
                 tx.read_request(ReadRequest(sink_stag=1, sink_to=0, size=1, src_stag=2, src_to=0))):
        header, _ = ddp.parse(segs[-1])
        opcode = rdmap.parse_control(header.rsvd_ulp if header.tagged else header.rsvd_ulp >> 32)[2]
        msns.append((opcode, None if header.tagged else (header.qn, header.msn)))
    assert msns == [(3, (0, 1)), (5, (0, 2)), (1, (1, 1)), (4, (0, 3)), (0, None), (2, None),
                    (7, (2, 1)), (1, (1, 2))]
    assert [tx.next_msn(q) for q in (0, 1, 2)] == [4, 3, 2]


def test_txstream_msn_wraps():
    tx = segment.TxStream(mulpdu=64)
    tx._msn[0] = 0xFFFFFFFF
    assert ddp.parse(tx.send(b"")[0])[0].msn == 0xFFFFFFFF
    assert ddp.parse(tx.send(b"")[0])[0].msn == 0


def test_txstream_mulpdu_change():
    tx = segment.TxStream(mulpdu=1000)
    assert len(tx.send(bytes(1500))) == 2
    tx.mulpdu = 200
    assert len(tx.send(bytes(1500))) == 9
    with pytest.raises(ValueError):
        tx.mulpdu = 10


@given(opcode=st.sampled_from([Opcode.SEND, Opcode.SEND_SE, Opcode.RDMA_WRITE, Opcode.RDMA_READ_RESPONSE]),
       payload=st.binary(max_size=600), mulpdu=st.integers(19, 300),
       to=st.integers(0, 2**64 - 1000))
def test_segmentation_properties(opcode, payload, mulpdu, to):
    segs = segment.segment(opcode, payload, mulpdu=mulpdu, stag=0x77, to=to, msn=5)
    parsed = _parse_all(segs)
    assert all(len(s) <= mulpdu for s in segs)
    assert [h.last for h, _ in parsed] == [False] * (len(segs) - 1) + [True]
    assert b"".join(p for _, p in parsed) == payload
    offset = 0
    for header, chunk in parsed:
        if header.tagged:
            assert header.to == to + offset and header.stag == 0x77
        else:
            assert header.mo == offset and header.msn == 5 and header.qn == 0
        assert rdmap.check_header(header) is None and ddp.check_version(header) is None
        offset += len(chunk)
    # every segment but the last is full
    assert all(len(s) == mulpdu for s in segs[:-1])
