"""Per-connection MPA configuration written by the host, shared by the TX framer and RX deframer.

A write on a block's ``cfg`` stream sets one connection's parameters for that
block's direction and resets its context (FPDU state, partial CRC, marker
phase, leftover octets, error state). The host writes it before the first
octet of the connection and, after an error, to reset the connection.
"""

import enum

from amaranth.hdl import unsigned
from amaranth.lib import data

from rnic.host.spec.limits import MARKER_INTERVAL

from .beat import conn_bits

__all__ = ["MARKER_INTERVAL", "MpaConfig", "CrcStatus", "RxError"]



class MpaConfig(data.StructLayout):
    """Payload of a ``cfg`` write.

    Fields
    ------
    conn
        Connection id.
    markers
        Markers in this direction.
    crc
        CRC generated (TX) / checked (RX); when 0 the CRC field is zeros (TX) or ignored (RX).
    phase
        Stream offset of the connection's next octet minus the marker origin, modulo 512.
        A multiple of 4 (markers and FPDUs share the 4-octet grid).
    mulpdu
        Largest ULPDU_Length accepted (RX); the TX framer ignores it.
    """

    def __init__(self, *, connections):
        super().__init__({
            "conn":    unsigned(conn_bits(connections)),
            "markers": unsigned(1),
            "crc":     unsigned(1),
            "phase":   unsigned(9),
            "mulpdu":  unsigned(16),
        })


class CrcStatus(enum.IntEnum):
    """CRC result of one received FPDU."""
    UNCHECKED = 0
    OK = 1
    BAD = 2


class RxError(enum.IntEnum):
    """Why the RX deframer stopped a connection (0: no error)."""
    NONE = 0
    CRC = 1        # MPA error 2
    MARKER = 2     # MPA error 3: FPDUPTR disagrees with the ULPDU_Length chain
    TOO_LONG = 3   # ULPDU_Length above MULPDU
    TOO_SHORT = 4  # ULPDU_Length below the DDP header its control octet announces
