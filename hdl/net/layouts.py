"""Layouts of the Ethernet frame streams.

A frame moves as beats of ``width`` octets (:class:`FrameBeat`): the first octet of the
frame (the first octet of the destination address) in the lowest lane, ``n`` valid octets
in lanes ``0 .. n-1``, every beat but the ``last`` of a frame full (``n == width``), ``n``
never 0; ``first`` and ``last`` delimit the frame. A frame carries no preamble, SFD or FCS.
Width 1 is the octet stream at the MAC; the core's streams have a width of
:data:`rnic.host.spec.limits.WIDTHS`.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.utils import bits_for

from rnic.host.spec import net
from rnic.host.spec.limits import check_width

from ..shapes import shaped_enum

__all__ = ["FrameBeat", "RxDrop", "TxDrop", "RxOctet", "RX_COUNTERS", "NETWORK_DROPS"]


#: :class:`rnic.host.spec.net.RxDrop` (same members and values) as a 4-bit field shape (its
#: 16 values fill it).
RxDrop = shaped_enum(net.RxDrop, 4, module=__name__)
#: :class:`rnic.host.spec.net.TxDrop` (same members and values) as a 2-bit field shape.
TxDrop = shaped_enum(net.TxDrop, 2, module=__name__)

#: Receive counters of the MAC, indexed by their ``RxDrop`` value: ``NONE`` counts the good
#: frames, the others each drop reason the MAC itself decides.
RX_COUNTERS = (RxDrop.NONE, RxDrop.FCS, RxDrop.RUNT, RxDrop.GIANT, RxDrop.OTHER_MAC,
               RxDrop.OVERFLOW)

#: The reasons the network layer decides (every :class:`RxDrop` the MAC's counters leave out),
#: in value order: ``ETHERTYPE`` .. ``TCP_CHECKSUM``.
NETWORK_DROPS = tuple(reason for reason in RxDrop if reason not in RX_COUNTERS)


class FrameBeat(data.StructLayout):
    """One beat of a frame stream.

    Parameters
    ----------
    width : int
        Octets per beat: 1 (the MAC's octet streams) or one of
        :data:`rnic.host.spec.limits.WIDTHS`.
    """

    def __init__(self, *, width):
        if width != 1:
            check_width(width)
        self.width = width
        super().__init__({
            "data":  unsigned(8 * width),
            "n":     unsigned(bits_for(width)),
            "first": unsigned(1),
            "last":  unsigned(1),
        })


class RxOctet(data.StructLayout):
    """One octet of a received frame with its verdict, from the MAC to the frame buffer.

    ``drop`` is valid on the ``last`` octet: ``NONE`` keeps the frame, any other reason
    makes the frame buffer discard all of it.
    """

    def __init__(self):
        super().__init__({
            "data":  unsigned(8),
            "first": unsigned(1),
            "last":  unsigned(1),
            "drop":  RxDrop,
        })
