"""FPDU encoder/decoder: the spec 002 figures as exact vectors, and properties."""

import random

import crc32c as crc32c_pkg
import pytest
from hypothesis import assume, given, settings, strategies as st

from rnic.host.spec.errors import Layer, MpaError
from rnic.host.model.fpdu import (MARKER_INTERVAL, FpduDecoder, FpduEncoder, FpduError, FpduRecord,
    fpdu_layout, mulpdu)

# -- Figures 5 and 6 of spec 002 ----------------------------------------------

# Send with Last set (old DDP/RDMAP revision: control 40 03), 4 reserved octets
# (STag position), Queue 0, MSN, MO 0, then 24 octets of Send data, all zero.
def figure_ulpdu(msn):
    return (bytes([0x40, 0x03]) + bytes(4) + (0).to_bytes(4, "big")
            + msn.to_bytes(4, "big") + (0).to_bytes(4, "big") + bytes(24))


FIGURE5 = bytes.fromhex(
    "0000 0000"          # marker: reserved, FPDUPTR 0
    "002a"               # ULPDU_Length 42
    "4003 0000 0000"     # DDP control, reserved
    "0000 0000"          # Queue 0
    "0000 0001"          # MSN 1
    "0000 0000"          # MO 0
    + "00" * 24 +        # Send data
    "4c86 b384")         # CRC32c 0x84B3864C, least significant octet first

FIGURE6 = bytes.fromhex(
    "002a"               # 0x1ec: ULPDU_Length 42
    "4003 0000 0000"     # DDP control, reserved
    "0000 0000"          # Queue 0
    "0000 0002"          # MSN 2
    "0000 0000"          # MO 0
    "0000 0014"          # 0x200: marker, FPDUPTR 0x14 (back to 0x1ec)
    + "00" * 24 +        # Send data
    "a19c d103")         # CRC32c 0x03D19CA1


def test_figure5_encode():
    enc = FpduEncoder(markers=True, crc=True)
    assert enc.encode(figure_ulpdu(1)) == FIGURE5
    assert enc.offset == 0x34
    assert crc32c_pkg.crc32c(FIGURE5[:48]) == 0x84B3864C


def test_figure5_decode():
    dec = FpduDecoder(markers=True, crc=True)
    assert dec.feed(FIGURE5) == [FpduRecord(
        offset=0, length=52, ulpdu_length=42, crc="ok", markers=[(0, 0)],
        ulpdu=figure_ulpdu(1))]
    assert dec.close() is None


def test_figure6_encode():
    enc = FpduEncoder(markers=True, crc=True, offset=0x1EC)
    assert enc.encode(figure_ulpdu(2)) == FIGURE6
    assert enc.offset == 0x220
    assert crc32c_pkg.crc32c(FIGURE6[:48]) == 0x03D19CA1


def test_figure6_decode():
    dec = FpduDecoder(markers=True, crc=True, offset=0x1EC)
    assert dec.feed(FIGURE6) == [FpduRecord(
        offset=0x1EC, length=52, ulpdu_length=42, crc="ok", markers=[(0x200, 0x14)],
        ulpdu=figure_ulpdu(2))]


def test_figure6_after_a_492_octet_first_fpdu():
    # the text of Figure 6: the first FPDU is 492 octets on the wire:
    # leading marker 4 + ULPDU_Length 2 + ULPDU 482 + pad 0 + CRC 4
    enc = FpduEncoder(markers=True, crc=True)
    first = enc.encode(figure_ulpdu(1)[:18] + bytes(492 - 4 - 2 - 4 - 18))
    assert len(first) == 492
    assert enc.encode(figure_ulpdu(2)) == FIGURE6
    dec = FpduDecoder(markers=True, crc=True)
    out = dec.feed(first + FIGURE6)
    assert [r.offset for r in out] == [0, 0x1EC]
    assert out[1].ulpdu == figure_ulpdu(2)


def test_figures_without_crc():
    enc = FpduEncoder(markers=True, crc=False)
    wire = enc.encode(figure_ulpdu(1))
    assert wire == FIGURE5[:-4] + bytes(4)
    dec = FpduDecoder(markers=True, crc=False)
    [rec] = dec.feed(FIGURE5[:-4] + b"\xde\xad\xbe\xef")   # not checked
    assert rec.crc == "unchecked" and rec.ulpdu == figure_ulpdu(1)


# -- layout corner cases --------------------------------------------------------

def test_marker_right_after_pad_is_inside_the_fpdu():
    # marker 4 + length 2 + ULPDU 506 = 512: no pad, the marker at 512 comes
    # before the CRC, is inside this FPDU and points back 508 octets.
    n = 512 - 4 - 2
    lay = fpdu_layout(n, offset=0, markers=True)
    assert lay.pad == 0
    assert lay.markers == ((0, 0), (512, 508))
    assert lay.crc_offset == 516 and lay.end == 520
    wire = FpduEncoder(markers=True, crc=True).encode(bytes([0x41]) + bytes(n - 1))
    assert wire[512:516] == bytes([0, 0, 0x01, 0xFC])
    assert int.from_bytes(wire[516:], "little") == crc32c_pkg.crc32c(wire[:516])


def test_marker_right_after_crc_belongs_to_next_fpdu():
    n = 500                        # marker 4 + length 2 + 500 + pad 2 + CRC 4 = 512
    lay = fpdu_layout(n, offset=0, markers=True)
    assert lay.end == 512 and lay.markers == ((0, 0),)
    nxt = fpdu_layout(20, offset=512, markers=True)
    assert nxt.markers == ((512, 0),) and nxt.length_offset == 516


def test_marker_splits_ulpdu_and_pad():
    # marker 4 + length 2 + ULPDU 505 = 511: 1 pad octet, then the marker at 512
    lay = fpdu_layout(512 - 4 - 2 - 1, offset=0, markers=True)
    assert lay.pad == 1 and lay.markers[-1] == (512, 508) and lay.end == 520


def test_fpdu_lengths_are_multiples_of_4():
    for n in range(0, 1100, 7):
        for off in (0, 4, 500, 508):
            for markers in (False, True):
                lay = fpdu_layout(n, offset=off, markers=markers)
                assert lay.length % 4 == 0


def test_every_marker_in_a_large_fpdu_points_at_the_length_field():
    enc = FpduEncoder(markers=True, crc=True, offset=8)
    wire = enc.encode(bytes(5000))
    for m in range(512, 8 + len(wire), 512):
        assert wire[m - 8:m - 6] == b"\0\0"
        assert int.from_bytes(wire[m - 6:m - 4], "big") == m - 8


# -- hypothesis: round trips -------------------------------------------------------

def ulpdu_for(n, seed, tagged):
    """A ULPDU of n octets whose first octet passes the header-length check."""
    data = bytearray(random.Random(seed).randbytes(n))
    if n:
        if n >= 18:
            data[0] = (data[0] & 0x7F) | (0x80 if tagged else 0)
        elif n >= 14:
            data[0] |= 0x80                  # must be tagged
    return bytes(data)


sizes = st.one_of(st.integers(1, 64), st.integers(1, 1500), st.integers(1, 64768))
origins = st.integers(-3000, 3000).map(lambda x: 4 * x)
offsets = st.integers(0, 3000).map(lambda x: 4 * x)


def chunked(data, seed):
    rng = random.Random(seed)
    pos = 0
    while pos < len(data):
        size = rng.choice([1, 2, 3, 4, 5, 7, 64, 511, 512, 513, 4096, 70000])
        yield data[pos:pos + size]
        pos += size


def decode(dec, pieces):
    out = []
    for piece in pieces:
        out += dec.feed(piece)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(sizes, min_size=1, max_size=4), st.booleans(), st.booleans(),
       origins, offsets, st.integers(0, 2**32), st.booleans())
def test_round_trip(ns, markers, crc, origin, offset, seed, tagged):
    assume(sum(ns) < 150000)
    if not markers:
        origin = 0
    ulpdus = [ulpdu_for(n, seed + i, tagged) for i, n in enumerate(ns)]
    check_header = all(len(u) >= 14 for u in ulpdus)
    enc = FpduEncoder(markers=markers, crc=crc, marker_origin=origin, offset=offset)
    bounds, stream = [], b""
    for u in ulpdus:
        start = enc.offset
        stream += enc.encode(u)
        bounds.append((start, enc.offset))
    assert bounds[0][0] == offset and enc.offset == offset + len(stream)

    # independent checks of the octets on the wire
    for start, end in bounds:
        wire = stream[start - offset:end - offset]
        assert len(wire) % 4 == 0
        crc_value = int.from_bytes(wire[-4:], "little")
        assert crc_value == (crc32c_pkg.crc32c(wire[:-4]) if crc else 0)
    if markers:
        for m in range(offset + (origin - offset) % 512, offset + len(stream), 512):
            start = max(s for s, _ in bounds if s <= m)
            len_pos = start + 4 if (start - origin) % 512 == 0 else start
            at = m - offset
            assert stream[at:at + 2] == b"\0\0"
            assert int.from_bytes(stream[at + 2:at + 4], "big") == (
                0 if m == start else m - len_pos)

    dec = FpduDecoder(markers=markers, crc=crc, marker_origin=origin, offset=offset,
                      mulpdu=max(ns), check_header=check_header)
    out = decode(dec, chunked(stream, seed))
    assert [r.ulpdu for r in out] == ulpdus
    assert [(r.offset, r.offset + r.length) for r in out] == bounds
    assert all(r.crc == ("ok" if crc else "unchecked") for r in out)
    assert all(r.ulpdu_length == len(r.ulpdu) for r in out)
    n_markers = sum(len(r.markers) for r in out)
    assert n_markers == (len(range(offset + (origin - offset) % 512,
                                   offset + len(stream), 512)) if markers else 0)
    assert dec.close() is None and not dec.failed


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 700), min_size=1, max_size=5), st.booleans(),
       st.booleans(), origins, st.integers(0, 2**32))
def test_byte_at_a_time_is_identical(ns, markers, crc, origin, seed):
    enc = FpduEncoder(markers=markers, crc=crc, marker_origin=origin)
    stream = b"".join(enc.encode(ulpdu_for(n, seed + n, True)) for n in ns)
    # corrupt one octet sometimes, so that errors are compared too
    if seed % 3 == 0:
        pos = seed % len(stream)
        stream = stream[:pos] + bytes([stream[pos] ^ 0x10]) + stream[pos + 1:]
    results = []
    for feed in (lambda d: d.feed(stream),
                 lambda d: [x for b in stream for x in d.feed(bytes([b]))]):
        dec = FpduDecoder(markers=markers, crc=crc, marker_origin=origin,
                          check_header=False)
        res = feed(dec)
        results.append((res, dec.close(), dec.offset))
    assert results[0] == results[1]


# -- hypothesis: corruption --------------------------------------------------------

LENGTH_ERRORS = ("exceeds MULPDU", "shorter than")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(14, 1500), min_size=1, max_size=3), st.booleans(),
       origins, st.integers(0, 2**32), st.data())
def test_any_flipped_bit_is_detected(ns, markers, origin, seed, data):
    enc = FpduEncoder(markers=markers, crc=True, marker_origin=origin)
    ulpdus = [ulpdu_for(n, seed + i, True) for i, n in enumerate(ns)]
    fpdus = [(enc.offset, enc.encode(u)) for u in ulpdus]
    stream = bytearray(b"".join(w for _, w in fpdus))
    target = data.draw(st.integers(0, len(fpdus) - 1))
    start, wire = fpdus[target]
    bit = data.draw(st.integers(0, 8 * len(wire) - 1))
    stream[start + bit // 8] ^= 0x80 >> (bit % 8)
    lay = fpdu_layout(len(ulpdus[target]), offset=start, markers=markers,
                      marker_origin=origin)
    in_length = lay.length_offset <= start + bit // 8 < lay.length_offset + 2
    # the ULPDU's first octet (the third one of the FPDU's data that is not a marker): its
    # T flag says how long the DDP header is, so flipping it in a ULPDU shorter than the
    # untagged header (18) is a length error found before the CRC, as flipping the length
    in_marker = {m + k for m, _ in lay.markers for k in range(4)}
    data_octets = (pos for pos in range(lay.length_offset, lay.end) if pos not in in_marker)
    first_ulpdu_octet = [next(data_octets) for _ in range(3)][-1]
    t_flag = start + bit // 8 == first_ulpdu_octet and bit % 8 == 0
    in_length = in_length or (t_flag and len(ulpdus[target]) < 18)

    dec = FpduDecoder(markers=markers, crc=True, marker_origin=origin)
    out = decode(dec, chunked(bytes(stream), seed))
    closed = dec.close()
    good = [r for r in out if isinstance(r, FpduRecord)]
    assert [r.ulpdu for r in good] == ulpdus[:target]     # nothing from the target on
    errors = [r for r in out if isinstance(r, FpduError)] + ([closed] if closed else [])
    assert len(errors) == 1 and dec.failed
    err = errors[0]
    assert err.offset == start
    if err.info.layer == Layer.LLP:
        allowed = {MpaError.CRC} | ({MpaError.TCP_CLOSED} if in_length else set())
        assert err.info.ecode in allowed
    else:
        assert in_length and any(t in err.info.text for t in LENGTH_ERRORS)


def replace_crc(wire, start, lay):
    """Recompute the CRC of the FPDU at ``start`` inside ``wire``."""
    a, b = lay.offset - start, lay.crc_offset - start
    wire[b:b + 4] = crc32c_pkg.crc32c(bytes(wire[a:b])).to_bytes(4, "little")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(14, 3000), min_size=1, max_size=3), origins,
       st.integers(0, 2**32), st.data())
def test_wrong_fpduptr_with_good_crc_is_a_marker_error(ns, origin, seed, data):
    enc = FpduEncoder(markers=True, crc=True, marker_origin=origin)
    fpdus = []
    for i, n in enumerate(ns):
        start = enc.offset
        lay = enc.layout(n)
        fpdus.append((start, lay, enc.encode(ulpdu_for(n, seed + i, True))))
    all_markers = [(i, m, ptr) for i, (_, lay, _) in enumerate(fpdus)
                   for m, ptr in lay.markers]
    assume(all_markers)
    i, m, ptr = data.draw(st.sampled_from(all_markers))
    new = data.draw(st.integers(0, 0xFFFF).filter(lambda v: (v & ~3) != ptr))
    start, lay, wire = fpdus[i]
    wire = bytearray(wire)
    wire[m - start + 2:m - start + 4] = new.to_bytes(2, "big")
    replace_crc(wire, start, lay)
    stream = b"".join(bytes(w) if j != i else bytes(wire) for j, (_, _, w) in enumerate(fpdus))

    dec = FpduDecoder(markers=True, crc=True, marker_origin=origin)
    out = decode(dec, chunked(stream, seed))
    assert all(isinstance(r, FpduRecord) for r in out[:-1]) and len(out) == i + 1
    err = out[-1]
    assert isinstance(err, FpduError) and err.offset == start
    assert (err.info.layer, err.info.ecode) == (Layer.LLP, MpaError.MARKER)
    assert dec.feed(b"\0" * 100) == []


def test_fpduptr_low_bits_are_ignored():
    wire = bytearray(FIGURE6)
    wire[23] |= 0x03                       # FPDUPTR 0x14 -> 0x17
    lay = fpdu_layout(42, offset=0x1EC, markers=True)
    replace_crc(wire, 0x1EC, lay)
    [rec] = FpduDecoder(markers=True, crc=True, offset=0x1EC).feed(bytes(wire))
    assert rec.markers == [(0x200, 0x17)] and rec.crc == "ok"


def test_reserved_marker_octets_not_checked():
    wire = bytearray(FIGURE6)
    wire[20:22] = b"\xff\xff"
    replace_crc(wire, 0x1EC, fpdu_layout(42, offset=0x1EC, markers=True))
    [rec] = FpduDecoder(markers=True, crc=True, offset=0x1EC).feed(bytes(wire))
    assert isinstance(rec, FpduRecord)


def test_marker_checked_without_crc():
    wire = bytearray(FIGURE6)
    wire[23] = 0x40
    [err] = FpduDecoder(markers=True, crc=False, offset=0x1EC).feed(bytes(wire))
    assert err.info.ecode == MpaError.MARKER


def test_crc_error_reported_before_marker_error():
    wire = bytearray(FIGURE6)
    wire[23] = 0x40                        # bad FPDUPTR and now a bad CRC too
    [err] = FpduDecoder(markers=True, crc=True, offset=0x1EC).feed(bytes(wire))
    assert (err.info.layer, err.info.ecode) == (Layer.LLP, MpaError.CRC)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.booleans(), st.booleans(), st.booleans(),
       st.integers(0, 2**32))
def test_random_bytes_never_raise(data, markers, crc, check_header, seed):
    dec = FpduDecoder(markers=markers, crc=crc, check_header=check_header, mulpdu=1000)
    out = decode(dec, chunked(data, seed))
    closed = dec.close()
    assert all(isinstance(r, FpduRecord) for r in out[:-1])
    assert sum(isinstance(r, FpduError) for r in out + [closed]) <= 1


# -- length errors -------------------------------------------------------------------

def one_fpdu(ulpdu, markers=True):
    return FpduEncoder(markers=markers, crc=True).encode(ulpdu)


def test_oversized_reported_when_length_field_completes():
    wire = one_fpdu(ulpdu_for(129, 1, False))
    dec = FpduDecoder(markers=True, crc=True, mulpdu=128)
    assert dec.feed(wire[:5]) == []
    [err] = dec.feed(wire[5:6])
    assert err == FpduError(0, err.info)
    assert (err.info.layer, err.info.etype, err.info.ecode) == (Layer.DDP, 0, 0)
    assert err.info.text == "ULPDU_Length 129 exceeds MULPDU 128"
    assert dec.feed(wire[6:]) == [] and dec.failed and dec.error is err
    assert dec.close() is None


@pytest.mark.parametrize("n, control, hdr, kind", [
    (13, 0xC1, 14, "tagged"), (1, 0x80, 14, "tagged"),
    (17, 0x41, 18, "untagged"), (14, 0x00, 18, "untagged"),
])
def test_undersized_reported_at_first_ulpdu_octet(n, control, hdr, kind):
    wire = one_fpdu(bytes([control]) + bytes(n - 1), markers=False)
    dec = FpduDecoder(markers=False, crc=True)
    assert dec.feed(wire[:2]) == []
    [err] = dec.feed(wire[2:3])
    assert (err.info.layer, err.info.etype, err.info.ecode) == (Layer.DDP, 0, 0)
    assert err.info.text == (f"ULPDU_Length {n} is shorter than the {hdr}-octet "
                             f"{kind} DDP header")


def test_tagged_17_is_long_enough():
    wire = one_fpdu(bytes([0xC1]) + bytes(16))
    [rec] = FpduDecoder(markers=True, crc=True).feed(wire)
    assert isinstance(rec, FpduRecord)


def test_zero_length():
    wire = one_fpdu(b"", markers=False)
    assert wire == bytes(4) + crc32c_pkg.crc32c(bytes(4)).to_bytes(4, "little")
    [err] = FpduDecoder(markers=False, crc=True).feed(wire[:2])
    assert "ULPDU_Length 0 is shorter than" in err.info.text
    [rec] = FpduDecoder(markers=False, crc=True, check_header=False).feed(wire)
    assert rec.ulpdu == b"" and rec.length == 8


def test_oversize_checked_before_header():
    wire = one_fpdu(bytes([0x41]) + bytes(199))
    [err] = FpduDecoder(markers=True, crc=True, mulpdu=150).feed(wire)
    assert "exceeds MULPDU" in err.info.text


# -- close ---------------------------------------------------------------------------

@pytest.mark.parametrize("cut", [1, 5, 6, 7, 30, 51])
def test_close_inside_fpdu(cut):
    dec = FpduDecoder(markers=True, crc=True)
    assert dec.feed(FIGURE5[:cut]) == []
    err = dec.close()
    assert err.offset == 0
    assert (err.info.layer, err.info.ecode) == (Layer.LLP, MpaError.TCP_CLOSED)
    assert err.info.text.startswith("stream ends inside an FPDU")
    assert dec.failed and dec.close() is None
    with pytest.raises(RuntimeError):
        dec.feed(b"x")


def test_close_at_boundary():
    dec = FpduDecoder(markers=True, crc=True)
    assert len(dec.feed(FIGURE5)) == 1
    assert dec.close() is None and not dec.failed


# -- parameters --------------------------------------------------------------------

def test_mulpdu_values():
    assert mulpdu(1460, markers=True) == 1460 - (6 + 4 * 3 + 0) == 1442
    assert mulpdu(1460, markers=False) == 1454
    assert mulpdu(1461, markers=False) == 1461 - 7
    assert mulpdu(100, markers=True) == 128
    assert mulpdu(0, markers=False) == 128
    assert mulpdu(10**6, markers=True) == 64768
    assert mulpdu(65535, markers=False) == 64768
    assert mulpdu(9000, markers=True) == 9000 - (6 + 4 * 18 + 0)


def test_encoder_limits():
    enc = FpduEncoder(markers=False, crc=True)
    assert len(enc.encode(bytes(65535))) == 65535 + 2 + 3 + 4
    with pytest.raises(ValueError):
        enc.encode(bytes(65536))
    with pytest.raises(TypeError):
        enc.encode("text")
    # with markers, a 65535-octet ULPDU needs an FPDUPTR above 0xFFFF
    menc = FpduEncoder(markers=True, crc=True)
    with pytest.raises(ValueError, match="FPDUPTR"):
        menc.encode(bytes(65535))
    assert menc.offset == 0
    assert len(menc.encode(bytes(64768))) > 64768


@pytest.mark.parametrize("cls", [FpduEncoder, FpduDecoder])
def test_constructor_checks(cls):
    with pytest.raises(ValueError, match="multiple of 4"):
        cls(markers=True, crc=True, marker_origin=2)
    with pytest.raises(ValueError, match="multiple of 4"):
        cls(markers=False, crc=True, marker_origin=6)
    with pytest.raises(ValueError, match="multiple of 4"):
        cls(markers=True, crc=True, offset=2)
    with pytest.raises(ValueError):
        cls(markers=True, crc=True, offset=-4)
    with pytest.raises(TypeError):
        cls(markers=1, crc=True)
    with pytest.raises(TypeError):
        cls(True, True)
    cls(markers=False, crc=True, offset=2)           # no grid without markers


def test_decoder_checks():
    with pytest.raises(ValueError):
        FpduDecoder(markers=True, crc=True, mulpdu=65536)
    with pytest.raises(TypeError):
        FpduDecoder(markers=True, crc=True, check_header=None)
    with pytest.raises(TypeError):
        FpduDecoder(markers=True, crc=True).feed("text")


def test_marker_origin_property():
    assert FpduEncoder(markers=True, crc=True, marker_origin=-4).marker_origin == 508


def test_marker_origin_is_taken_mod_512():
    ulpdus = [ulpdu_for(n, n, True) for n in (100, 600, 40)]
    streams = set()
    for origin in (12, 12 + 512, 12 - 5 * 512):
        enc = FpduEncoder(markers=True, crc=True, marker_origin=origin)
        streams.add(b"".join(enc.encode(u) for u in ulpdus))
    assert len(streams) == 1
    assert MARKER_INTERVAL == 512
