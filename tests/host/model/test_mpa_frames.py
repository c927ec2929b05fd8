"""MPA Request/Reply/Reject frames: exact bytes, every malformed case, round trips."""

import struct

import pytest
from hypothesis import given, settings, strategies as st

from rnic.host.spec.errors import ErrorInfo, Layer, MpaError, ProtocolError
from rnic.host.model.mpa_frames import (REQUEST_KEY, REPLY_KEY, IRD_ORD_ULP, MAX_PD_LENGTH, MpaFrame, build,
    parse, FrameReader)


def header(key=REQUEST_KEY, flags=0, rev=1, pd_length=0):
    return key + struct.pack(">BBH", flags, rev, pd_length)


def bad_frame(data, match, **kw):
    with pytest.raises(ProtocolError, match=match) as exc:
        parse(data, **kw)
    info = exc.value.info
    assert isinstance(info, ErrorInfo)
    assert (info.layer, info.etype, info.ecode) == (Layer.LLP, 0, MpaError.BAD_FRAME)
    return info


# -- exact bytes -------------------------------------------------------------

def test_keys_are_the_rfc_octets():
    assert REQUEST_KEY == bytes.fromhex("4D50412049442052657120467261 6D65")
    assert REPLY_KEY == bytes.fromhex("4D50412049442052657020467261 6D65")


def test_rev1_request_exact_bytes():
    f = MpaFrame(kind="request", markers=True, crc=True, private_data=b"hello")
    wire = build(f)
    assert wire == b"MPA ID Req Frame" + bytes([0xC0, 0x01, 0x00, 0x05]) + b"hello"
    assert parse(wire, expect="request") == f


def test_rev2_reply_with_ird_ord_exact_bytes():
    f = MpaFrame(kind="reply", crc=True, enhanced=True, rev=2, ird=16, ord=8,
                 p2p=True, rtr_write=True, private_data=b"ok")
    wire = build(f)
    # flags C|S = 0x50, Rev 2, PD_Length 6 (4 enhanced + 2 ULP)
    # A=1 B=0 IRD=16 -> 0x8010 ; C=1 D=0 ORD=8 -> 0x8008
    assert wire == (b"MPA ID Rep Frame" + bytes([0x50, 0x02, 0x00, 0x06])
                    + bytes([0x80, 0x10, 0x80, 0x08]) + b"ok")
    assert f.pd_length == 6
    assert parse(wire, expect="reply") == f


def test_enhanced_word_bit_positions():
    f = MpaFrame(kind="request", enhanced=True, rev=2, ird=IRD_ORD_ULP, ord=1,
                 p2p=True, rtr_send=True, rtr_read=True)
    assert build(f)[20:24] == bytes([0xFF, 0xFF, 0x40, 0x01])
    f = MpaFrame(kind="request", enhanced=True, rev=2, ird=1, ord=IRD_ORD_ULP)
    assert build(f)[20:24] == bytes([0x00, 0x01, 0x3F, 0xFF])


def test_reject_reply():
    f = MpaFrame(kind="reply", reject=True, private_data=b"no")
    wire = build(f)
    assert wire[16] == 0x20
    assert parse(wire).reject


def test_rev2_without_s_is_plain():
    f = MpaFrame(kind="request", rev=2, private_data=b"x")
    assert parse(build(f)) == f


def test_a_zero_means_bcd_ignored():
    # RFC 6581 9.2: with A = 0, B, C and D MUST be ignored on reception
    wire = header(flags=0x10, rev=2, pd_length=4) + bytes([0x40, 0x05, 0xC0, 0x07])
    f = parse(wire)
    assert (f.p2p, f.rtr_send, f.rtr_write, f.rtr_read) == (False,) * 4
    assert (f.ird, f.ord) == (5, 7)


# -- one test per malformed case --------------------------------------------

def test_short_header():
    bad_frame(header()[:19], "short frame")
    bad_frame(b"", "short frame")


def test_short_private_data():
    bad_frame(header(pd_length=10) + b"123456789", "short frame.*PD_Length 10")


def test_bad_key():
    bad_frame(header(key=b"MPA ID Xyz Frame"), "bad key")


def test_bad_key_names_expected_key():
    info = bad_frame(header(key=b"GET / HTTP/1.1\r\n"), "MPA ID Req Frame", expect="request")
    assert "expected" in info.text
    bad_frame(header(key=b"GET / HTTP/1.1\r\n"), "MPA ID Rep Frame", expect="reply")


def test_reply_key_when_request_expected():
    bad_frame(header(key=REPLY_KEY), "Request key.*Reply key", expect="request")
    bad_frame(header(key=REQUEST_KEY), "Reply key.*Request key", expect="reply")


def test_pd_length_too_big():
    bad_frame(header(pd_length=513) + bytes(513), "PD_Length 513 exceeds 512")


def test_reserved_flag_bits():
    for bit in (0x01, 0x02, 0x04, 0x08):
        bad_frame(header(flags=bit), "reserved flag bits")


def test_unknown_rev():
    for rev in (0, 3, 255):
        bad_frame(header(rev=rev), f"unknown MPA revision {rev}")


def test_s_with_rev1():
    bad_frame(header(flags=0x10, rev=1, pd_length=4) + bytes(4), "Rev 1")


def test_enhanced_pd_length_below_4():
    bad_frame(header(flags=0x10, rev=2, pd_length=3) + bytes(3), "PD_Length 3")


def test_r_in_request():
    bad_frame(header(flags=0x20), "R .*Request")


def test_trailing_octets():
    bad_frame(header() + b"\x00", "1 octets follow")


def test_not_strict_ignores_reserved_and_r_in_request():
    f = parse(header(flags=0x2F | 0x80), strict=False)
    assert f == MpaFrame(kind="request", markers=True)


@settings(max_examples=300)
@given(st.binary(max_size=600))
def test_random_bytes_only_raise_protocol_error(data):
    try:
        parse(data)
    except ProtocolError as e:
        assert e.info.ecode == MpaError.BAD_FRAME


@settings(max_examples=300)
@given(st.binary(min_size=4, max_size=40), st.integers(0, 0xFF), st.integers(0, 3))
def test_random_headers_only_raise_protocol_error(pd, flags, rev):
    for key in (REQUEST_KEY, REPLY_KEY):
        data = header(key=key, flags=flags, rev=rev, pd_length=len(pd)) + pd
        try:
            parse(data)
        except ProtocolError as e:
            assert e.info.ecode == MpaError.BAD_FRAME


# -- constructor checks -------------------------------------------------------

@pytest.mark.parametrize("kw, exc", [
    (dict(kind="req"), ValueError),
    (dict(kind="request", reject=True), ValueError),
    (dict(kind="request", rev=3), ValueError),
    (dict(kind="request", enhanced=True), ValueError),          # needs rev 2
    (dict(kind="request", ird=1), ValueError),                  # needs enhanced
    (dict(kind="request", p2p=True), ValueError),
    (dict(kind="request", enhanced=True, rev=2, rtr_send=True), ValueError),  # needs p2p
    (dict(kind="request", enhanced=True, rev=2, ird=0x4000), ValueError),
    (dict(kind="request", private_data=bytes(513)), ValueError),
    (dict(kind="request", enhanced=True, rev=2, private_data=bytes(509)), ValueError),
    (dict(kind="request", markers=1), TypeError),
    (dict(kind="request", rev=True), TypeError),
    (dict(kind="request", private_data="text"), TypeError),
])
def test_constructor_rejects(kw, exc):
    with pytest.raises(exc):
        MpaFrame(**kw)


def test_constructor_is_keyword_only():
    with pytest.raises(TypeError):
        MpaFrame("request")


def test_max_private_data():
    assert len(build(MpaFrame(kind="reply", private_data=bytes(MAX_PD_LENGTH)))) == 532
    f = MpaFrame(kind="reply", enhanced=True, rev=2, private_data=bytes(508))
    assert f.pd_length == 512


def test_parse_and_reader_arguments():
    with pytest.raises(ValueError):
        parse(b"", expect="both")
    with pytest.raises(TypeError):
        parse("MPA ID Req Frame")
    with pytest.raises(ValueError):
        FrameReader(expect=None)
    with pytest.raises(TypeError):
        FrameReader("request")


# -- round trips --------------------------------------------------------------

@st.composite
def frames(draw):
    kind = draw(st.sampled_from(["request", "reply"]))
    enhanced = draw(st.booleans())
    kw = dict(kind=kind, markers=draw(st.booleans()), crc=draw(st.booleans()),
              reject=kind == "reply" and draw(st.booleans()), enhanced=enhanced,
              rev=2 if enhanced else draw(st.sampled_from([1, 2])))
    if enhanced:
        ird_ord = st.one_of(st.integers(0, 0x3FFF), st.just(IRD_ORD_ULP))
        kw.update(ird=draw(ird_ord), ord=draw(ird_ord), p2p=draw(st.booleans()))
        if kw["p2p"]:
            kw.update(rtr_send=draw(st.booleans()), rtr_write=draw(st.booleans()),
                      rtr_read=draw(st.booleans()))
    kw["private_data"] = draw(st.binary(max_size=MAX_PD_LENGTH - 4 * enhanced))
    return MpaFrame(**kw)


@settings(max_examples=200)
@given(frames())
def test_round_trip(f):
    wire = build(f)
    assert len(wire) == 20 + f.pd_length
    assert parse(wire) == f
    assert parse(wire, expect=f.kind) == f


@settings(max_examples=200)
@given(frames(), st.binary(max_size=64), st.lists(st.integers(1, 600), max_size=8))
def test_reader_any_chunking(f, after, cuts):
    stream = build(f) + after
    reader = FrameReader(expect=f.kind)
    got, rest, pos = None, b"", 0
    for size in cuts + [len(stream)]:
        chunk = stream[pos:pos + size]
        pos += len(chunk)
        got, rest = reader.feed(chunk)
        if got is not None:
            break
    assert got == f and reader.done and reader.frame == f
    assert rest + stream[pos:] == after


def test_reader_frame_and_fpdu_in_one_read():
    f = MpaFrame(kind="request", markers=True, crc=True, private_data=b"pd")
    fpdu = bytes(range(52))
    reader = FrameReader(expect="request")
    assert reader.feed(build(f) + fpdu) == (f, fpdu)
    with pytest.raises(RuntimeError):
        reader.feed(b"more")


def test_reader_byte_at_a_time():
    f = MpaFrame(kind="reply", enhanced=True, rev=2, ird=3, ord=4, private_data=b"abc")
    wire = build(f)
    reader = FrameReader(expect="reply")
    for b in wire[:-1]:
        assert reader.feed(bytes([b])) == (None, b"")
    assert reader.feed(wire[-1:]) == (f, b"")


def test_reader_bad_key_fails_early():
    reader = FrameReader(expect="request")
    assert reader.feed(b"MPA ID R") == (None, b"")
    with pytest.raises(ProtocolError, match="MPA ID Req Frame"):
        reader.feed(b"ep")       # "MPA ID Rep" cannot become the Request key
    assert reader.failed
    with pytest.raises(ProtocolError):
        reader.feed(b" Frame")   # the same error again


def test_reader_bad_header_before_private_data():
    reader = FrameReader(expect="request")
    with pytest.raises(ProtocolError, match="PD_Length 1000") as exc:
        reader.feed(header(pd_length=1000))
    assert exc.value.info.ecode == MpaError.BAD_FRAME


def test_reader_close_inside_frame():
    reader = FrameReader(expect="reply")
    reader.feed(header(key=REPLY_KEY, pd_length=8) + b"abc")
    info = reader.close()
    assert info.ecode == MpaError.TCP_CLOSED and info.layer == Layer.LLP
    assert reader.failed
    assert reader.close() is None


def test_reader_close_after_frame():
    reader = FrameReader(expect="reply")
    reader.feed(header(key=REPLY_KEY))
    assert reader.close() is None
