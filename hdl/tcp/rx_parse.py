"""The TCP receive parser: the header stage, the option walker and the payload realignment
as one component."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width

from ..net.layouts import FrameBeat
from .lane_shift import LaneShift
from .layouts import TcpSegInfo
from .option_walker import TcpOptionWalker
from .rx_header import TcpRxHeader

__all__ = ["TcpRxParse"]


class TcpRxParse(wiring.Component):
    """Parses the received segments: :class:`~rnic.hdl.tcp.rx_header.TcpRxHeader` →
    :class:`~rnic.hdl.tcp.option_walker.TcpOptionWalker` (``seg``) and
    :class:`~rnic.hdl.tcp.lane_shift.LaneShift` (``payload``), the gateware of
    :func:`rnic.host.model.tcp.receive_info`.

    Every segment gives one report on ``seg``; one with ``length`` > 0 also gives its
    ``length`` payload octets on ``payload``, aligned to lane 0 (whatever its report says,
    ``bad_options`` included: the stage after decides whether to deliver or drop them).
    A report is on ``seg`` before its segment's last payload beat is on ``payload``, and the
    next segment's report waits until its own header is in: a consumer that takes the
    report first and then its payload never waits on the parser for anything else.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width)))
        Frames of IPv4 TCP segments from the network layer (checksum and data offset
        checked there: :attr:`rnic.hdl.net.network_layer.NetworkLayer.tcp`).
    seg : Out(stream.Signature(TcpSegInfo))
    payload : Out(stream.Signature(FrameBeat(width)))
        The payload of each segment with payload, ``first`` to ``last``.

    Latency: the report of a segment with ``k`` options, ``j`` of them with a length
    octet, is valid ``k + j + 3`` cycles after the beat ending its TCP header was taken; a
    payload beat leaves one cycle after the input beat that completes it. Throughput: one
    beat per cycle through the payload; a frame's header beats wait while the header
    before is still being walked (``k + j + 2`` cycles, at most 42) or its report has not
    been taken.
    """

    def __init__(self, *, width):
        self._width = check_width(width)
        super().__init__({
            "i": In(stream.Signature(FrameBeat(width=width))),
            "seg": Out(stream.Signature(TcpSegInfo())),
            "payload": Out(stream.Signature(FrameBeat(width=width))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.header = header = TcpRxHeader(width=self._width)
        m.submodules.walker = walker = TcpOptionWalker()
        m.submodules.shift = shift = LaneShift(width=self._width)
        wiring.connect(m, wiring.flipped(self.i), header.i)
        wiring.connect(m, header.hdr, walker.i)
        wiring.connect(m, header.payload, shift.i)
        wiring.connect(m, walker.o, wiring.flipped(self.seg))
        wiring.connect(m, shift.o, wiring.flipped(self.payload))
        return m
