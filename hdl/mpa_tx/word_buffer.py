"""Word buffer of the TX framer: data words between the input and the lane stage."""

import operator
from functools import reduce

from amaranth.hdl import C, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..beat import check_width
from ..synth_hints import register_copies
from .context import start_queue_signature
from .layouts import WordEntry, WordGroup

__all__ = ["buffer_words", "MpaTxWordBuffer"]


def buffer_words(width):
    """Word buffer entries: a power of 2 >= 3 W/4."""
    return 1 << ceil_log2(3 * (width // 4))


class MpaTxWordBuffer(wiring.Component):
    """Word buffer of the TX framer: a circular buffer of :func:`buffer_words` data words
    (:class:`~rnic.hdl.mpa_tx.layouts.WordEntry`), which decouples the input rate (data
    words) from the output rate (data words plus markers and CRCs).

    A group of words is taken from ``i`` when it fits whatever the lane stage takes in
    the same cycle (``i.ready`` is a register), so no path runs from the framer's
    ``o.ready`` to its ``i.ready``; the extra words of buffer keep the output fed at one
    beat per cycle despite this. An FPDU's first word takes its start context from the
    queue (``starts``) and carries it as flags.

    The first W/4 + 1 words of the buffer are kept in registers (``window``; word k is
    valid if ``have[k]``), so that the lane chain has no multiplexer by the read pointer
    in front of it; their next values are worked out for every possible ``pop`` from
    registers and the pushed words, and chosen by ``pop`` (one multiplexer level behind
    the lane chain).

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connections (width of ``conn``).

    Ports
    -----
    i : In(stream.Signature(WordGroup))
        From the input stage.
    starts : In(start_queue_signature)
        FPDU start contexts.
    next_room : In(range(buffer_words + 1))
        ``i.payload.room`` of the next cycle.
    pop : In(range(W/4 + 1))
        Words the lane stage takes from the window in this cycle.
    window : Out(ArrayLayout(WordEntry, W/4 + 1))
        The first words of the buffer, registered.
    have : Out(W/4 + 1)
        Bit k: ``window[k]`` holds a word.

    Latency: a group taken at one edge is in ``window`` from that edge (if the buffer
    held fewer than W/4 + 1 words). Throughput: one group in and W/4 words out per cycle.
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        L = width // 4
        self.words = buffer_words(width)
        super().__init__({
            "i": In(stream.Signature(WordGroup(width=width, connections=connections,
                                               buffer_words=self.words))),
            "starts": In(start_queue_signature(width)),
            "next_room": In(range(self.words + 1)),
            "pop": In(range(L + 1)),
            "window": Out(data.ArrayLayout(WordEntry(width=width, connections=connections),
                                           L + 1)),
            "have": Out(L + 1),
        })

    def elaborate(self, platform):
        m = Module()
        L, CAP = self.width // 4, self.words
        entry = self.window.shape().elem_shape
        cnt = Signal(range(CAP + 1))
        # the read pointer, one copy per buffer position it selects from (timing: its
        # fanout, every bit of L buffer multiplexers)
        rd_ptrs = register_copies(ceil_log2(CAP), L, name="rd_ptr")
        wr_ptr = Signal(range(CAP))
        buf = [Signal(entry, name=f"buf{j}") for j in range(CAP)]
        b_fits = Signal(init=1)          # registered cnt <= room (see the update below)
        b_push = Signal()
        g = self.i.payload
        m.d.comb += [
            self.i.ready.eq(b_fits),
            b_push.eq(self.i.valid & self.i.ready),
            self.starts.pop.eq(b_push & g.sof),
        ]
        head = self.starts.head
        words = []
        for j in range(L + 1):
            w = Signal(entry, name=f"b_word{j}")
            m.d.comb += [
                w.data.eq(g.data[32 * j:32 * j + 32]),
                w.sof.eq(g.sof if j == 0 else 0),
                w.eof.eq(g.eof & (g.cnt == j + 1)),
                w.conn.eq(g.conn),
                w.cont.eq(g.same),
            ]
            if j == 0:
                m.d.comb += [
                    w.markers.eq(head.ctx.markers), w.crc.eq(head.ctx.crc),
                    w.mlanes.eq(head.mlanes), w.qn.eq(head.qn), w.mnext.eq(head.mnext),
                ]
            words.append(w)

        # the lane stage takes 'pop' words, the input stage appends its words
        pop = self.pop
        pushed = Signal(range(L + 2))
        m.d.comb += pushed.eq(Mux(b_push, g.cnt, 0))
        m.d.sync += [
            cnt.eq(cnt - pop + pushed),
            *[p.eq(p + pop) for p in rd_ptrs],
        ]
        # The window registers and flags of the next cycle, for every possible pop p (from
        # registers and the pushed words only), then chosen by pop, the lane chain's
        # result (timing: one multiplexer level behind the chain). Word j from the head,
        # after the push: buf[rd_ptr + j] if j < cnt (the window's register for j <= L),
        # else pushed word j - cnt (written at wr_ptr = rd_ptr + cnt); a position beyond
        # the pushed words is not valid and its value does not matter.
        window = self.window
        # ``cnt`` as a thermometer (bit c: cnt >= c), registered with it, and as flags
        # (bit c: cnt == c, for the counts the window's choice needs). Timing: the next
        # values are the thermometer shifted by the pop and the push, bits chosen by
        # multiplexers; compares of ``cnt - pop + pushed`` with constants put carry
        # chains in front of these registers.
        cnt_ge = Signal(CAP + 1, init=1)
        cnt_is = Signal(2 * L + 1, init=1)
        pos = []
        for j in range(2 * L + 1):
            v = Signal(entry, name=f"wpos{j}")
            if j > L:
                with m.Switch(rd_ptrs[j - L - 1]):
                    for e in range(CAP):
                        with m.Case(e):
                            m.d.comb += v.eq(buf[(e + j) % CAP])
            else:
                m.d.comb += v.eq(window[j])
            for c in range(max(0, j - L), j + 1):
                with m.If(cnt_is[c]):
                    m.d.comb += v.eq(words[j - c])
            pos.append(v)
        # the count after the push, and ``kept <= room`` / ``grown <= room`` below as
        # compares with ``room + p`` (timing: no subtract, add and compare in a row in front
        # of ``b_fits``; the pop is at most ``cnt``)
        push_cnt = Signal(range(CAP + L + 2))
        m.d.comb += push_cnt.eq(cnt + g.cnt)
        pushed_is = Signal(L + 2)        # bit n: the push appends n words
        m.d.comb += [pushed_is[n].eq(Mux(b_push, g.cnt == n, n == 0)) for n in range(L + 2)]

        def next_ge(c, p_):
            """Bit c of the thermometer after popping ``p_`` words and the push: the
            count kept, ``cnt - p_``, is at least ``c - n`` for the push of n words."""
            terms = []
            for n in range(L + 2):
                i = c - n + p_           # kept >= c - n, as a bit of cnt_ge
                if c - n <= 0:
                    terms.append(pushed_is[n])
                elif i <= CAP:
                    terms.append(pushed_is[n] & cnt_ge[i])
            return reduce(operator.or_, terms, C(0, 1))

        with m.Switch(pop):
            for p_ in range(L + 1):
                with m.Case(p_):
                    m.d.sync += [window[k].eq(pos[p_ + k]) for k in range(L + 1)]
                    ge = [next_ge(c, p_) for c in range(CAP + 2)]
                    m.d.sync += [cnt_ge[c].eq(ge[c]) for c in range(CAP + 1)]
                    m.d.sync += [self.have[k].eq(ge[k + 1]) for k in range(L + 1)]
                    m.d.sync += [cnt_is[c].eq(ge[c] & ~ge[c + 1]) for c in range(2 * L + 1)]
                    # (with and without the push side by side: b_push is the later input)
                    room_p = self.next_room + p_
                    m.d.sync += b_fits.eq(Mux(b_push, push_cnt <= room_p, cnt <= room_p))
        with m.If(b_push):
            m.d.sync += wr_ptr.eq(wr_ptr + g.cnt)
        for e in range(CAP):
            off = Signal(range(CAP), name=f"woff{e}")
            m.d.comb += off.eq(e - wr_ptr)
            with m.If(b_push & (off < g.cnt)):
                with m.Switch(off):
                    for k in range(L + 1):
                        with m.Case(k):
                            m.d.sync += buf[e].eq(words[k])
        return m
