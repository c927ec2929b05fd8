"""CRC32c vectors (RFC 3720 appendix B.4) and the FPDU CRC field's wire order."""

import pytest
from hypothesis import given, settings, strategies as st

from rnic.host.model.crc import crc32c, crc_field, crc_from_field, CRC_FIELD_LEN


@pytest.mark.parametrize("data, value", [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),
    (b"", 0),
])
def test_vectors(data, value):
    assert crc32c(data) == value


def test_wire_order_is_least_significant_first():
    # Figure 5 of spec 002: crc32c 0x84B3864C is sent as 4C 86 B3 84
    assert crc_field(0x84B3864C) == bytes([0x4C, 0x86, 0xB3, 0x84])
    assert crc_field(0x03D19CA1) == bytes([0xA1, 0x9C, 0xD1, 0x03])  # Figure 6
    assert crc_from_field(bytes([0x4C, 0x86, 0xB3, 0x84])) == 0x84B3864C
    assert len(crc_field(0)) == CRC_FIELD_LEN


@settings(max_examples=200)
@given(st.binary(max_size=300), st.integers(0, 300))
def test_incremental(data, cut):
    assert crc32c(data[cut:], crc32c(data[:cut])) == crc32c(data)


@settings(max_examples=200)
@given(st.integers(0, 0xFFFFFFFF))
def test_field_round_trip(value):
    assert crc_from_field(crc_field(value)) == value


def test_bad_arguments():
    with pytest.raises(ValueError):
        crc_field(1 << 32)
    with pytest.raises(ValueError):
        crc_field(-1)
    with pytest.raises(TypeError):
        crc_field(True)
    with pytest.raises(ValueError):
        crc_from_field(b"\x00\x00\x00")
    with pytest.raises(ValueError):
        crc32c(b"", 1 << 32)
