"""Output buffer of the RX deframer: a FIFO of output beats written two at a time."""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import check_width
from .layouts import MpaRxBeat

__all__ = ["output_write_signature", "MpaRxOutputBuffer"]


def output_write_signature(*, width, connections):
    """Write port of :class:`MpaRxOutputBuffer` (seen from the writer): with ``en`` both
    slots are written, ``beat0`` at the write pointer and ``beat1`` after it; the pointer
    moves past ``beat0`` if ``keep0`` and then past ``beat1`` if ``keep1``."""
    beat = MpaRxBeat(width=width, connections=connections)
    return wiring.Signature({
        "en": Out(1), "beat0": Out(beat), "beat1": Out(beat), "keep0": Out(1), "keep1": Out(1),
    })


def _depth(width):
    """Output FIFO depth (beats): 4 up to W = 8, 8 above; a step needs 2 free entries."""
    return 4 if width <= 8 else 8


class MpaRxOutputBuffer(wiring.Component):
    """Output buffer of the RX deframer: 4 beats (8 at W >= 16) in registers.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connections (width of ``conn``).

    Ports
    -----
    w : In(output_write_signature)
        Written by the output stage, two entries per write (kept: 0, 1 or 2).
    room : Out(1)
        At least 2 entries are free (the output stage may step).
    o : Out(stream.Signature(MpaRxBeat))
        The deframer's output.

    A beat written at one edge is valid on ``o`` from that edge if it is the first one
    in the buffer. Throughput: one beat out per cycle; beats leave in the order written.
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        super().__init__({
            "w": In(output_write_signature(width=width, connections=connections)),
            "room": Out(1),
            "o": Out(stream.Signature(MpaRxBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        depth = _depth(self.width)
        obuf = [Signal(len(self.o.payload.as_value()), name=f"obuf{j}") for j in range(depth)]
        o_rp = Signal(range(depth))
        o_wp = Signal(range(depth))
        o_cnt = Signal(range(depth + 1))
        m.d.comb += self.room.eq(o_cnt <= depth - 2)
        rd = Signal()
        m.d.comb += [
            self.o.valid.eq(o_cnt != 0),
            self.o.payload.eq(Array(obuf)[o_rp]),
            rd.eq(self.o.valid & self.o.ready),
        ]
        wp1 = Signal(range(depth))
        m.d.comb += wp1.eq(o_wp + 1)
        w = self.w
        # (entries o_wp and o_wp + 1 are free whenever the output stage steps: written on
        # every step, kept only if the write pointer moves past them)
        for j in range(depth):
            with m.If(w.en & (o_wp == j)):
                m.d.sync += obuf[j].eq(w.beat0)
            with m.If(w.en & (wp1 == j)):
                m.d.sync += obuf[j].eq(w.beat1)
        m.d.sync += [
            o_wp.eq(o_wp + w.keep0 + w.keep1),
            o_rp.eq(o_rp + rd),
            o_cnt.eq(o_cnt + w.keep0 + w.keep1 - rd),
        ]
        return m
