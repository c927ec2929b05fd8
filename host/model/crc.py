"""CRC32c of MPA FPDUs (RFC 5044 section 4.4) and its wire encoding.

The CRC is the Castagnoli CRC as used by iSCSI: reflected polynomial
0x82F63B78, initial value and final XOR 0xFFFFFFFF. The value is carried in
the 4-octet CRC field least significant octet first: a CRC of 0x84B3864C is
sent as ``4C 86 B3 84`` (Figure 5 of the MPA draft, spec 002).

The computation is delegated to the ``crc32c`` package.
"""

import crc32c as _crc32c_pkg

__all__ = ["crc32c", "crc_field", "crc_from_field", "CRC_FIELD_LEN"]

#: Octets in the FPDU CRC field.
CRC_FIELD_LEN = 4


def _check_value(value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"CRC value must be an int, not {type(value).__name__}")
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"CRC value {value:#x} does not fit 32 bits")


def crc32c(data, value=0):
    """CRC32c of ``data``.

    Parameters
    ----------
    data : bytes-like
        Octets to cover.
    value : int
        A previous result to continue from (``crc32c(b, crc32c(a)) ==
        crc32c(a + b)``); 0 starts a new CRC.

    Returns
    -------
    int
        The final (already inverted) 32-bit CRC.
    """
    _check_value(value)
    return _crc32c_pkg.crc32c(data, value)


def crc_field(value):
    """The 4 wire octets of CRC ``value``, least significant octet first."""
    _check_value(value)
    return value.to_bytes(CRC_FIELD_LEN, "little")


def crc_from_field(b):
    """The CRC value carried by the 4 wire octets ``b`` (inverse of :func:`crc_field`)."""
    b = bytes(b)
    if len(b) != CRC_FIELD_LEN:
        raise ValueError(f"a CRC field is {CRC_FIELD_LEN} octets, got {len(b)}")
    return int.from_bytes(b, "little")
