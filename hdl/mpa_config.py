"""Per-connection MPA configuration written by the host, shared by the TX framer and RX deframer.

A write on a block's ``cfg`` stream sets one connection's parameters for that
block's direction and resets its context (FPDU state, partial CRC, marker
phase, leftover octets, error state). The host writes it before the first
octet of the connection and, after an error, to reset the connection.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

from rnic.host.spec.limits import MARKER_INTERVAL
from rnic.host.spec.regmap import DpCrc, DpError

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


#: CRC result of one received FPDU (the ``crc`` field of the RX deframer's output beats):
#: the register map's :class:`~rnic.host.spec.regmap.DpCrc`, under the deframer's name.
CrcStatus = DpCrc

#: Why the RX deframer stopped a connection, or ``NONE`` (the ``error`` field of its output
#: beats): the register map's :class:`~rnic.host.spec.regmap.DpError`, under the deframer's name.
RxError = DpError
