"""Drops the lanes before a packet's first octet and realigns the packet to lane 0."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from rnic.host.spec.limits import check_width

from ..beat import OctetBeat
from ..net.layouts import FrameBeat
from .layouts import ShiftBeat

__all__ = ["LaneShift"]


class LaneShift(wiring.Component):
    """Realigns packets whose first octet is in lane ``skip`` of their first beat.

    Output beat ``j`` of a packet is lanes ``skip ..`` of input beat ``j`` followed by lanes
    ``.. skip-1`` of input beat ``j+1`` (a funnel shift of two beats by ``skip`` octets),
    so every output beat but the last is full, as :class:`~rnic.hdl.net.layouts.FrameBeat`
    requires. A packet of ``m`` octets leaves as ``ceil(m / W)`` beats.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    connections : int or None
        With a number, the beats carry a connection id (``conn``, one per packet) through.

    Ports
    -----
    i : In(stream.Signature(ShiftBeat(width, connections)))
        Packets; ``skip`` on the ``first`` beat (``n > skip`` there), every beat but the
        last full.
    o : Out(stream.Signature(FrameBeat(width)))
        Registered; :class:`~rnic.hdl.beat.OctetBeat` with ``connections``.

    Latency: an output beat is valid 1 cycle after the input beat that completes it (with
    ``skip`` 0, 1 cycle after its input beat). Throughput: one beat per cycle; with
    ``skip`` > 0 a packet whose last input beat holds more than ``skip`` octets takes one
    cycle more (its last output beat, during which ``i`` is not ready). Packet boundaries:
    packets never merge; a packet's last beat leaves before the next packet's first.
    """

    def __init__(self, *, width, connections=None):
        self._width = check_width(width)
        self._tagged = connections is not None
        out = FrameBeat(width=width) if connections is None else \
            OctetBeat(width=width, connections=connections)
        super().__init__({
            "i": In(stream.Signature(ShiftBeat(width=width, connections=connections))),
            "o": Out(stream.Signature(out)),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        i, o = self.i.payload, self.o.payload
        prev = Signal(8 * W)                # the input beat before this one
        prev_n = Signal(bits_for(W))
        skip = Signal.like(i.skip)          # the packet's skip, from its first beat
        spill = Signal()                    # prev holds the packet's last output beat
        out_first = Signal()                # the next output beat is its packet's first
        shift = Mux(i.first & ~spill, i.skip, skip)
        # a funnel shift of (low, high) by ``shift`` octets; ``low`` is the beat itself when
        # nothing is shifted in from the next beat: with no shift, or on a first beat (which
        # leaves at once only when it is also the last)
        low = Mux((i.first & ~spill) | (shift == 0), i.data, prev)
        shifted = Signal(8 * W)
        with m.Switch(shift):
            for s in range(W):
                with m.Case(s):
                    m.d.comb += shifted.eq(Cat(low[8 * s:], i.data[:8 * s]))

        free = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(free & ~spill)
        with m.If(free):
            m.d.sync += self.o.valid.eq(0)
            with m.If(spill):
                m.d.sync += [self.o.valid.eq(1), o.data.eq(shifted), o.n.eq(prev_n - skip),
                             o.first.eq(0), o.last.eq(1), spill.eq(0)]
            with m.Elif(self.i.valid):
                m.d.sync += [prev.eq(i.data), prev_n.eq(i.n)]
                if self._tagged:
                    # a packet's beats share one conn: the spill beat keeps it
                    m.d.sync += o.conn.eq(i.conn)
                with m.If(i.first):
                    m.d.sync += skip.eq(i.skip)
                self._step(m, i, o, shift, shifted, out_first, spill)
        return m

    def _step(self, m, i, o, shift, shifted, out_first, spill):
        """One input beat: what it puts on ``o``."""
        W = self._width
        emit = [self.o.valid.eq(1), o.data.eq(shifted)]
        with m.If(shift == 0):
            m.d.sync += [*emit, o.n.eq(i.n), o.first.eq(i.first), o.last.eq(i.last)]
        with m.Elif(i.first):
            with m.If(i.last):
                m.d.sync += [*emit, o.n.eq(i.n - shift), o.first.eq(1), o.last.eq(1)]
            with m.Else():
                m.d.sync += out_first.eq(1)
        with m.Else():
            m.d.sync += [*emit, o.first.eq(out_first), out_first.eq(0)]
            with m.If(i.last & (i.n > shift)):
                m.d.sync += [o.n.eq(W), o.last.eq(0), spill.eq(1)]
            with m.Elif(i.last):
                m.d.sync += [o.n.eq(W - shift + i.n), o.last.eq(1)]
            with m.Else():
                m.d.sync += [o.n.eq(W), o.last.eq(0)]
