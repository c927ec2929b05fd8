"""A small FIFO in flip-flops whose entries a checker can see."""

from amaranth.hdl import Assert, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

__all__ = ["RegFIFO"]


class RegFIFO(wiring.Component):
    """A FIFO of ``depth`` entries held in registers.

    Parameters
    ----------
    shape : shape-like
        Payload shape.
    depth : int
        Entries (a power of 2, at least 2).

    Ports
    -----
    w : In(stream(shape))
        Writes; ``w.ready`` while not full.
    r : Out(stream(shape))
        Reads: the oldest entry, ``r.valid`` while not empty.
    level : Out(range(depth + 1))
        Entries held.

    Latency one cycle (an entry written is readable the next cycle), throughput one
    entry per cycle in and out. The entry at the write pointer holds no word unless the
    FIFO is full, so it loads ``w.payload`` whenever not full, whether or not ``w.valid``
    (timing: its enable does not wait for ``w.valid``; only the pointer and the level do).

    For checkers: ``entries`` (the registers), ``valid(k)`` (entry ``k`` holds a queued
    word), ``rp``/``wp`` (read / write pointer); with ``platform == "formal"`` the block
    asserts that its level and pointers agree.
    """

    def __init__(self, *, shape, depth):
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of 2 (>= 2), not {depth!r}")
        self.depth = depth
        super().__init__({
            "w": In(stream.Signature(shape)),
            "r": Out(stream.Signature(shape)),
            "level": Out(range(depth + 1)),
        })
        self.entries = [Signal(shape, name=f"entry{k}") for k in range(depth)]
        self.rp = Signal(range(depth))
        self.wp = Signal(range(depth))

    def valid(self, k):
        """Entry ``k`` holds a queued word."""
        return ((k - self.rp)[:exact_log2(self.depth)]) < self.level

    def elaborate(self, platform):
        m = Module()
        do_w = self.w.valid & self.w.ready
        do_r = self.r.valid & self.r.ready
        m.d.comb += [self.w.ready.eq(self.level != self.depth), self.r.valid.eq(self.level != 0)]
        with m.Switch(self.rp):         # (a multiplexer tree, not a chain of priority levels)
            for k in range(self.depth):
                with m.Case(k):
                    m.d.comb += self.r.payload.eq(self.entries[k])
        for k in range(self.depth):
            with m.If(self.w.ready & (self.wp == k)):
                m.d.sync += self.entries[k].eq(self.w.payload)
        with m.If(do_w):
            m.d.sync += self.wp.eq(self.wp + 1)
        with m.If(do_r):
            m.d.sync += self.rp.eq(self.rp + 1)
        m.d.sync += self.level.eq(self.level + do_w - do_r)

        if platform == "formal":
            bits = exact_log2(self.depth)
            m.d.comb += [
                Assert(self.level <= self.depth, "lemma_fifo_level"),
                Assert((self.wp - self.rp)[:bits] == self.level[:bits], "lemma_fifo_ptrs"),
            ]
        return m
