"""RDMAP codec (host/model/rdmap.py): opcodes, Read Request, Terminate."""

import pytest
from hypothesis import given, strategies as st

from rnic.host.model import ddp, rdmap
from rnic.host.spec.errors import (DdpErrorType, DdpUntaggedCode, ErrorInfo, Layer, MpaError, ProtocolError,
    RdmapErrorType, RdmapOperationCode, RdmapProtectionCode)
from rnic.host.model.rdmap import Opcode, ReadRequest, Terminate


def test_opcodes_and_names():
    assert [int(o) for o in Opcode] == list(range(8))
    assert [rdmap.opcode_name(o) for o in range(8)] == [
        "write", "read_request", "read_response", "send", "send_inv", "send_se",
        "send_se_inv", "terminate"]
    assert rdmap.opcode_name(9) == "unknown"
    assert rdmap.opcode_from_name("send_se_inv") is Opcode.SEND_SE_INVALIDATE
    with pytest.raises(ValueError):
        rdmap.opcode_from_name("bogus")
    assert [rdmap.queue_number(o) for o in Opcode] == [None, 1, None, 0, 0, 0, 0, 2]


def test_control_byte():
    assert rdmap.control_byte(Opcode.SEND) == 0x43
    assert rdmap.control_byte(Opcode.RDMA_WRITE) == 0x40
    assert rdmap.control_byte(Opcode.TERMINATE) == 0x47
    assert rdmap.parse_control(0x43) == (1, 0, 3)
    assert rdmap.parse_control(0xFF) == (3, 3, 15)
    with pytest.raises(ValueError):
        rdmap.control_byte(16)
    with pytest.raises(ValueError):
        rdmap.control_byte(0, rv=4)


def _untagged(control, qn=0):
    return ddp.UntaggedHeader(last=True, qn=qn, msn=1, mo=0, rsvd_ulp=control << 32)


def _tagged(control):
    return ddp.TaggedHeader(last=True, stag=1, to=0, rsvd_ulp=control)


def _code(info):
    return (info.layer, info.etype, info.ecode)


def test_check_header():
    assert rdmap.check_header(_untagged(0x43)) is None
    assert rdmap.check_header(_tagged(0x40)) is None
    assert rdmap.check_header(_tagged(0x42)) is None
    version = (Layer.RDMAP, RdmapErrorType.REMOTE_OPERATION, RdmapOperationCode.INVALID_VERSION)
    opcode = (Layer.RDMAP, RdmapErrorType.REMOTE_OPERATION, RdmapOperationCode.UNEXPECTED_OPCODE)
    assert _code(rdmap.check_header(_untagged(0x03))) == version
    assert _code(rdmap.check_header(_tagged(0x80))) == version
    assert _code(rdmap.check_header(_untagged(0x48))) == opcode
    assert _code(rdmap.check_header(_untagged(0x40))) == opcode   # Write untagged
    assert _code(rdmap.check_header(_tagged(0x43))) == opcode     # Send tagged
    # reserved bits are not checked
    assert rdmap.check_header(_untagged(0x73)) is None


def test_read_request_layout():
    rr = ReadRequest(sink_stag=0x01020304, sink_to=0x1112131415161718, size=0x2000,
                     src_stag=0xA0B0C0D0, src_to=0xFFEEDDCCBBAA9988)
    raw = rr.build()
    assert raw == bytes.fromhex("01020304" "1112131415161718" "00002000" "a0b0c0d0" "ffeeddccbbaa9988")
    assert ReadRequest.parse(raw) == rr
    assert rr.to_json() == {"sink_stag": 0x01020304, "sink_to": 0x1112131415161718, "size": 0x2000,
                            "src_stag": 0xA0B0C0D0, "src_to": 0xFFEEDDCCBBAA9988}


@pytest.mark.parametrize("n", [0, 27, 29])
def test_read_request_wrong_length(n):
    with pytest.raises(ProtocolError) as exc:
        ReadRequest.parse(bytes(n))
    assert _code(exc.value.info) == (Layer.RDMAP, RdmapErrorType.REMOTE_OPERATION,
                                     RdmapOperationCode.UNSPECIFIED)


def test_read_request_ranges():
    with pytest.raises(ValueError):
        ReadRequest(sink_stag=0, sink_to=0, size=1 << 32, src_stag=0, src_to=0)
    with pytest.raises(TypeError):
        ReadRequest(0, 0, 0, 0, 0)


def test_terminate_bare():
    t = Terminate(layer=Layer.LLP, etype=0, ecode=MpaError.CRC)
    assert t.build() == bytes.fromhex("20020000")
    assert Terminate.parse(t.build()) == t
    assert t.info == ErrorInfo.mpa(MpaError.CRC)


def test_terminate_full():
    hdr = ddp.UntaggedHeader(last=True, qn=1, msn=1, mo=0, rsvd_ulp=0x41 << 32).to_bytes()
    rr = ReadRequest(sink_stag=1, sink_to=2, size=3, src_stag=4, src_to=5).build()
    t = Terminate(layer=0, etype=1, ecode=0, m=True, d=True, r=True,
                  ddp_segment_length=46, ddp_header=hdr, rdmap_header=rr)
    raw = t.build()
    assert raw[:4] == bytes.fromhex("0100e000")
    assert raw[4:6] == (46).to_bytes(2, "big")
    assert raw[6:24] == hdr and raw[24:] == rr
    assert len(raw) == rdmap.TERMINATE_MAX_LEN == 52
    assert Terminate.parse(raw) == t


def test_terminate_tagged_header_length_from_t_bit():
    hdr = ddp.TaggedHeader(last=True, stag=9, to=0, rsvd_ulp=0x40).to_bytes()
    t = Terminate(layer=1, etype=1, ecode=0, m=True, d=True, ddp_segment_length=20, ddp_header=hdr)
    assert len(t.build()) == 4 + 2 + 14
    assert Terminate.parse(t.build()) == t


def test_terminate_d_without_m_keeps_length_field():
    hdr = ddp.TaggedHeader(last=True, stag=9, to=0, rsvd_ulp=0x40).to_bytes()
    t = Terminate(layer=1, etype=1, ecode=0, d=True, ddp_header=hdr)
    raw = t.build()
    assert raw[:4] == bytes.fromhex("11004000") and raw[4:6] == b"\0\0"
    assert Terminate.parse(raw) == t
    m_only = Terminate(layer=1, etype=0, ecode=0, m=True, ddp_segment_length=7)
    assert m_only.build() == bytes.fromhex("10008000" "0007")


@pytest.mark.parametrize("raw", [
    b"", b"\x10\x00", bytes.fromhex("1000c000"),               # D but nothing
    bytes.fromhex("1000c000" "0010" "c1"),                         # short DDP header
    bytes.fromhex("10002000"),                                     # R but nothing
    bytes.fromhex("20020000" "00"),                                # trailing octet
])
def test_terminate_malformed(raw):
    with pytest.raises(ProtocolError) as exc:
        Terminate.parse(raw)
    assert _code(exc.value.info) == (Layer.RDMAP, RdmapErrorType.REMOTE_OPERATION,
                                     RdmapOperationCode.UNSPECIFIED)


def test_terminate_invariants():
    with pytest.raises(ValueError):
        Terminate(layer=0, etype=0, ecode=0, ddp_segment_length=3)
    with pytest.raises(ValueError):
        Terminate(layer=0, etype=0, ecode=0, d=True, ddp_header=bytes(13))
    with pytest.raises(ValueError):
        Terminate(layer=0, etype=0, ecode=0, ddp_header=bytes(14))
    with pytest.raises(ValueError):
        Terminate(layer=0, etype=0, ecode=0, r=True, rdmap_header=bytes(27))
    with pytest.raises(ValueError):
        Terminate(layer=16, etype=0, ecode=0)


def _send_ulpdu(payload=b"abc"):
    return ddp.build(ddp.UntaggedHeader(last=True, qn=0, msn=1, mo=0, rsvd_ulp=0x43 << 32), payload)


def _read_request_ulpdu():
    rr = ReadRequest(sink_stag=1, sink_to=2, size=3, src_stag=4, src_to=5).build()
    return ddp.build(ddp.UntaggedHeader(last=True, qn=1, msn=1, mo=0, rsvd_ulp=0x41 << 32), rr)


def test_for_error_ddp():
    ulpdu = _send_ulpdu()
    info = ErrorInfo.ddp(DdpErrorType.UNTAGGED, DdpUntaggedCode.INVALID_MSN_NO_BUFFER)
    t = Terminate.for_error(info, ulpdu)
    assert (t.m, t.d, t.r) == (True, True, False)
    assert t.ddp_segment_length == len(ulpdu) and t.ddp_header == ulpdu[:18]
    assert _code(t.info) == _code(info)


def test_for_error_read_request_includes_rdmap_header():
    ulpdu = _read_request_ulpdu()
    info = ErrorInfo.rdmap(RdmapErrorType.REMOTE_PROTECTION, RdmapProtectionCode.INVALID_STAG)
    t = Terminate.for_error(info, ulpdu)
    assert (t.m, t.d, t.r) == (True, True, True)
    assert t.rdmap_header == ulpdu[18:]
    # a DDP error on the same segment: DDP header only
    t = Terminate.for_error(ErrorInfo.ddp(2, 3), ulpdu)
    assert (t.m, t.d, t.r) == (True, True, False)
    # "unexpected opcode": the RDMAP layout is not trusted
    t = Terminate.for_error(ErrorInfo.rdmap(2, RdmapOperationCode.UNEXPECTED_OPCODE), ulpdu)
    assert (t.m, t.d, t.r) == (True, True, False)


def test_for_error_without_segment_or_header():
    t = Terminate.for_error(ErrorInfo.ddp(0, 0), b"\xc1\x40")
    assert (t.m, t.d, t.r) == (True, False, False) and t.ddp_segment_length == 2
    t = Terminate.for_error(ErrorInfo.rdmap(0, 0))
    assert (t.m, t.d, t.r) == (False, False, False)
    t = Terminate.for_error(ErrorInfo.mpa(MpaError.CRC), _send_ulpdu())
    assert (t.m, t.d, t.r) == (True, False, False)


terminates = st.builds(
    lambda layer, etype, ecode, m, hdr, rr, seg_len, rsvd: Terminate(
        layer=layer, etype=etype, ecode=ecode, m=m, d=hdr is not None, r=rr is not None,
        ddp_segment_length=seg_len if (m or hdr is not None) else 0,
        ddp_header=hdr or b"", rdmap_header=rr or b"", rsvd=rsvd),
    st.integers(0, 15), st.integers(0, 15), st.integers(0, 255), st.booleans(),
    st.one_of(st.none(),
              st.binary(min_size=13, max_size=13).map(lambda b: b"\xc1" + b),
              st.binary(min_size=17, max_size=17).map(lambda b: b"\x41" + b)),
    st.one_of(st.none(), st.binary(min_size=28, max_size=28)),
    st.integers(0, 0xFFFF), st.integers(0, 0x1FFF))


@given(terminates)
def test_terminate_roundtrip(t):
    assert Terminate.parse(t.build()) == t


@given(st.binary(max_size=60))
def test_terminate_parse_never_raises_raw(raw):
    try:
        t = Terminate.parse(raw)
    except ProtocolError:
        pass
    else:
        assert t.build() == raw
