"""Beat layouts shared by every byte stream of the data path.

A stream of octets moves as beats of ``width`` octets. The first octet on
the wire is in the lowest byte lane (``data[0:8]``). ``n`` counts the valid
octets, which are always lanes ``0 .. n-1``; every beat but the ``last`` of a
unit is full (``n == width``), and ``n`` is never 0. ``first`` and ``last``
delimit the unit the stream carries (a TCP segment on the wire side, an FPDU
or ULPDU inside). ``conn`` is the connection id the beat belongs to; a beat
never mixes connections.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.utils import bits_for, ceil_log2

from rnic.host.spec.limits import WIDTHS, check_width

__all__ = ["WIDTHS", "check_width", "conn_bits", "OctetBeat"]


def conn_bits(connections):
    """Width of a connection id for ``connections`` connections (at least 1 bit)."""
    if not isinstance(connections, int) or connections < 1:
        raise TypeError(f"connections must be a positive integer, not {connections!r}")
    return max(1, ceil_log2(connections))


class OctetBeat(data.StructLayout):
    """One beat of an octet stream.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`WIDTHS`.
    connections : int
        Number of connections; sets the width of ``conn``.
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        self.connections = connections
        super().__init__({
            "data":  unsigned(8 * width),
            "n":     unsigned(bits_for(width)),
            "first": unsigned(1),
            "last":  unsigned(1),
            "conn":  unsigned(conn_bits(connections)),
        })
