"""DDP header codec (host/model/ddp.py)."""

import pytest
from hypothesis import given, strategies as st

from rnic.host.model import ddp
from rnic.host.spec.errors import DdpErrorType, DdpTaggedCode, DdpUntaggedCode, Layer, ProtocolError


def test_tagged_layout():
    h = ddp.TaggedHeader(last=True, stag=0x11223344, to=0x0102030405060708, rsvd_ulp=0x40)
    raw = ddp.build(h, b"xy")
    assert raw == bytes.fromhex("c140" "11223344" "0102030405060708") + b"xy"
    assert len(h.to_bytes()) == ddp.TAGGED_HEADER_LEN == 14
    assert ddp.parse(raw) == (h, b"xy")


def test_untagged_layout():
    h = ddp.UntaggedHeader(last=True, qn=0, msn=1, mo=0x1482, rsvd_ulp=0x44_DEADBEEF)
    raw = ddp.build(h)
    assert raw == bytes.fromhex("41" "44deadbeef" "00000000" "00000001" "00001482")
    assert len(raw) == ddp.UNTAGGED_HEADER_LEN == 18
    assert ddp.parse(raw) == (h, b"")


def test_control_octets():
    assert ddp.UntaggedHeader(last=True, qn=0, msn=1, mo=0, rsvd_ulp=0).control == 0x41
    assert ddp.TaggedHeader(last=True, stag=0, to=0, rsvd_ulp=0).control == 0xC1
    assert ddp.TaggedHeader(last=False, stag=0, to=0, rsvd_ulp=0).control == 0x81
    assert ddp.UntaggedHeader(last=False, qn=0, msn=1, mo=0, rsvd_ulp=0).control == 0x01


def test_old_revision_parses():
    # control 0x40 (DV 0) and RDMAP octet 0x03, as in the early MPA figures
    raw = bytes.fromhex("4003") + bytes(16) + b"payload"
    header, payload = ddp.parse(raw)
    assert header.dv == 0 and header.last and not header.tagged
    assert header.rsvd_ulp >> 32 == 0x03
    assert payload == b"payload"
    assert ddp.build(header, payload) == raw


def test_reserved_bits_kept_not_checked():
    raw = bytes([0x80 | 0x3C | 0x01, 0x40]) + bytes(12)
    header, _ = ddp.parse(raw)
    assert header.rsvd == 0xF
    assert ddp.check_version(header) is None
    assert ddp.build(header) == raw


@pytest.mark.parametrize("raw", [b"", b"\xc1", b"\xc1" + bytes(12), b"\x41" + bytes(16)])
def test_short_ulpdu_is_catastrophic(raw):
    with pytest.raises(ProtocolError) as exc:
        ddp.parse(raw)
    info = exc.value.info
    assert (info.layer, info.etype, info.ecode) == (Layer.DDP, DdpErrorType.CATASTROPHIC, 0)
    assert info.text


def test_untagged_header_longer_than_tagged():
    # 14 octets with T = 0 are still short: the untagged header is 18
    with pytest.raises(ProtocolError):
        ddp.parse(b"\x41" + bytes(13))
    assert ddp.parse(b"\xc1" + bytes(13))[1] == b""


def test_check_version():
    tagged = ddp.TaggedHeader(last=True, stag=1, to=0, rsvd_ulp=0x40, dv=2)
    untagged = ddp.UntaggedHeader(last=True, qn=0, msn=1, mo=0, rsvd_ulp=0, dv=0)
    info = ddp.check_version(tagged)
    assert (info.layer, info.etype, info.ecode) == (Layer.DDP, DdpErrorType.TAGGED,
                                                    DdpTaggedCode.INVALID_VERSION)
    info = ddp.check_version(untagged)
    assert (info.layer, info.etype, info.ecode) == (Layer.DDP, DdpErrorType.UNTAGGED,
                                                    DdpUntaggedCode.INVALID_VERSION)
    assert ddp.check_version(ddp.TaggedHeader(last=True, stag=1, to=0, rsvd_ulp=0x40)) is None


@pytest.mark.parametrize("kwargs", [
    dict(stag=1 << 32), dict(to=1 << 64), dict(rsvd_ulp=256), dict(dv=4), dict(stag=-1), dict(rsvd=16),
])
def test_tagged_field_ranges(kwargs):
    args = dict(last=True, stag=0, to=0, rsvd_ulp=0)
    args.update(kwargs)
    with pytest.raises(ValueError):
        ddp.TaggedHeader(**args)


def test_keyword_only_and_types():
    with pytest.raises(TypeError):
        ddp.TaggedHeader(True, 0, 0, 0)
    with pytest.raises(TypeError):
        ddp.UntaggedHeader(last=True, qn="0", msn=1, mo=0, rsvd_ulp=0)
    with pytest.raises(ValueError):
        ddp.UntaggedHeader(last=True, qn=0, msn=1, mo=0, rsvd_ulp=1 << 40)
    with pytest.raises(TypeError):
        ddp.build("header", b"")


tagged_headers = st.builds(
    ddp.TaggedHeader, last=st.booleans(), stag=st.integers(0, 2**32 - 1),
    to=st.integers(0, 2**64 - 1), rsvd_ulp=st.integers(0, 255), dv=st.integers(0, 3),
    rsvd=st.integers(0, 15))
untagged_headers = st.builds(
    ddp.UntaggedHeader, last=st.booleans(), qn=st.integers(0, 2**32 - 1),
    msn=st.integers(0, 2**32 - 1), mo=st.integers(0, 2**32 - 1),
    rsvd_ulp=st.integers(0, 2**40 - 1), dv=st.integers(0, 3), rsvd=st.integers(0, 15))


@given(st.one_of(tagged_headers, untagged_headers), st.binary(max_size=64))
def test_roundtrip(header, payload):
    raw = ddp.build(header, payload)
    assert len(raw) == header.length + len(payload)
    assert ddp.parse(raw) == (header, payload)


@given(st.binary(max_size=40))
def test_parse_never_raises_raw(raw):
    try:
        header, payload = ddp.parse(raw)
    except ProtocolError as exc:
        assert exc.info.layer == Layer.DDP
    else:
        assert ddp.build(header, payload) == raw
