"""Width converters between the MAC's octet streams and the core's W-octet beats."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width

from .layouts import FrameBeat

__all__ = ["OctetsToBeats", "BeatsToOctets"]


class OctetsToBeats(wiring.Component):
    """Packs a frame stream of one octet per beat into beats of ``width`` octets.

    A beat leaves when it is full or holds the frame's ``last`` octet (then ``n`` is the
    octets left; lanes above ``n`` are 0), so a frame's beats are all full but its last.

    Parameters
    ----------
    width : int
        Octets per output beat, one of :data:`rnic.host.spec.limits.WIDTHS`.

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width=1)))
    o : Out(stream.Signature(FrameBeat(width=width)))
        Registered.

    Latency: a beat is valid on ``o`` 1 cycle after its last octet was taken. Throughput:
    one octet per cycle (``i.ready`` is low only while a finished beat waits on ``o``).
    """

    def __init__(self, *, width):
        self._width = check_width(width)
        super().__init__({
            "i": In(stream.Signature(FrameBeat(width=1))),
            "o": Out(stream.Signature(FrameBeat(width=width))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        lanes = [Signal(8, name=f"lane{k}") for k in range(W - 1)]   # the beat being filled
        fill = Signal(range(W))
        first = Signal()                 # the beat being filled holds a frame's first octet
        octet = self.i.payload.data
        done = (fill == W - 1) | self.i.payload.last

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.i.valid & self.i.ready):
            with m.If(done):
                out = [Mux(fill > k, lanes[k], Mux(fill == k, octet, 0)) for k in range(W - 1)]
                out.append(Mux(fill == W - 1, octet, Const(0, 8)))
                m.d.sync += [self.o.valid.eq(1),
                             self.o.payload.data.eq(Cat(*out)),
                             self.o.payload.n.eq(fill + 1),
                             self.o.payload.first.eq(Mux(fill == 0, self.i.payload.first, first)),
                             self.o.payload.last.eq(self.i.payload.last),
                             fill.eq(0)]
            with m.Else():
                m.d.sync += fill.eq(fill + 1)
                for k in range(W - 1):
                    with m.If(fill == k):
                        m.d.sync += lanes[k].eq(octet)
                with m.If(fill == 0):
                    m.d.sync += first.eq(self.i.payload.first)
        return m


class BeatsToOctets(wiring.Component):
    """Unpacks a frame stream of ``width``-octet beats into one octet per beat.

    Parameters
    ----------
    width : int
        Octets per input beat, one of :data:`rnic.host.spec.limits.WIDTHS`.

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width=width)))
        Beats with ``n`` valid octets in lanes ``0 .. n-1``.
    o : Out(stream.Signature(FrameBeat(width=1)))
        Registered; ``first`` on a frame's first octet, ``last`` on its last.

    Latency: the first octet of a beat is valid on ``o`` 1 cycle after the beat was taken.
    Throughput: one octet per cycle, also across beats and frames.
    """

    def __init__(self, *, width):
        self._width = check_width(width)
        super().__init__({
            "i": In(stream.Signature(FrameBeat(width=width))),
            "o": Out(stream.Signature(FrameBeat(width=1))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        rest = Signal(8 * W)             # octets of the beat still to send, the next in lane 0
        left = Signal(range(W + 1))      # how many
        first = Signal()
        last = Signal()
        m.d.comb += [self.o.valid.eq(left != 0),
                     self.o.payload.data.eq(rest[:8]),
                     self.o.payload.n.eq(1),
                     self.o.payload.first.eq(first),
                     self.o.payload.last.eq(last & (left == 1))]
        taking_last = self.o.ready & (left == 1)
        m.d.comb += self.i.ready.eq((left == 0) | taking_last)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [rest.eq(self.i.payload.data), left.eq(self.i.payload.n),
                         first.eq(self.i.payload.first), last.eq(self.i.payload.last)]
        with m.Elif(self.o.valid & self.o.ready):
            m.d.sync += [rest.eq(rest >> 8), left.eq(left - 1), first.eq(0)]
        return m
