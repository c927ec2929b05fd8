"""The rotation of each payload word as it enters the emitter. See :class:`WordRotation`."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..beat import check_width
from ..synth_hints import register_copies

__all__ = ["WordRotation", "WORD_COUNT_BITS"]

#: Bits of a segment's memory word count (``EmitStart.lastw + 1``; ``lastw`` is signed(20)).
WORD_COUNT_BITS = 20


class WordRotation(wiring.Component):
    """The rotation of the memory word that the emitter takes next: that of the segment
    the word belongs to, from the word count of each segment.

    The payload fetch does not delimit segments on its words; the emitter takes exactly
    ``lastw + 1`` of them per segment, in the order the segments start. The words of a
    segment may arrive while the segment before it is still going out, so the rotation of
    the word arriving is not always that of the segment going out.

    Parameters
    ----------
    width : int
        Datapath width W in octets.

    Ports
    -----
    push : In(stream(rot, words))
        A segment with ``words`` > 0 memory words and rotation ``rot`` starts (always
        taken; before its first word arrives; at most one segment waits behind the one
        whose words arrive, which holds for the emitter: a start waits for ``busy`` 0,
        i.e. for the segment before it to be loaded, i.e. for the words of the one before
        that to be taken).
    take : In(1)
        A memory word is taken.
    rot : Out(ArrayLayout(unsigned(log2 W), W))
        The rotation of the next word to be taken, W copies of one register (one per
        output octet's multiplexer: timing, one register fanning out to all of them is
        too far from some).

    Latency and throughput
    ----------------------
    ``rot`` is that of a pushed segment from the cycle after its ``push`` when no word of
    an earlier segment is left to take, else from the cycle after the earlier segment's
    last word is taken. One word per cycle.
    """

    def __init__(self, *, width):
        check_width(width)
        self.width = width
        lw = exact_log2(width)
        super().__init__({
            "push": In(stream.Signature(data.StructLayout({
                "rot": unsigned(lw), "words": unsigned(WORD_COUNT_BITS)}), always_ready=True)),
            "take": In(1),
            "rot": Out(data.ArrayLayout(unsigned(lw), width)),
        })

    def elaborate(self, platform):
        m = Module()
        W, LW = self.width, exact_log2(self.width)
        push = self.push
        copies = register_copies(LW, W, name="word_rot")
        m.d.comb += [self.rot[b].eq(c) for b, c in enumerate(copies)]
        head_left = Signal(WORD_COUNT_BITS)   # words of the oldest segment still to come (0: none)
        # head_left == 1, a register kept in step (timing: ``take`` comes from the fetch's
        # handshake; the compare is not in series with it)
        head_last = Signal()
        next_rot = Signal(LW)                 # the segment after it, pushed while the oldest
        next_left = Signal(WORD_COUNT_BITS)   # one still had words to come (0: none)
        head_free = Signal()
        m.d.comb += head_free.eq((head_left == 0) | (self.take & head_last))
        with m.If(head_free):
            with m.If(next_left != 0):
                m.d.sync += [head_left.eq(next_left), head_last.eq(next_left == 1),
                             *[c.eq(next_rot) for c in copies], next_left.eq(0)]
            with m.Elif(push.valid):
                m.d.sync += [head_left.eq(push.payload.words), head_last.eq(push.payload.words == 1),
                             *[c.eq(push.payload.rot) for c in copies]]
            with m.Else():
                m.d.sync += [head_left.eq(0), head_last.eq(0)]
        with m.Elif(self.take):
            m.d.sync += [head_left.eq(head_left - 1), head_last.eq(head_left == 2)]
        with m.If(push.valid & ~(head_free & (next_left == 0))):
            m.d.sync += [next_rot.eq(push.payload.rot), next_left.eq(push.payload.words)]
        return m
