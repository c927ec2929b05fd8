"""Input register and realign stage of the RX deframer: octets in, whole 32-bit words out."""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import OctetBeat, check_width
from ..mpa_config import MpaConfig
from .layouts import AlignedBeat
from .stage import ahead_signature, context_memory

__all__ = ["MpaRxAlignCtx", "MpaRxRealign"]


class MpaRxAlignCtx(data.StructLayout):
    """Realign context: 0..3 octets not yet forming a word, first in bits 0..7."""

    def __init__(self):
        super().__init__({"lo": unsigned(24), "lo_n": unsigned(2)})


def _lval_is(u, v):
    """(u + 1) >> 2 == v (ULPDU words after the first, of length u), without an adder
    (timing: no carry chain in front of the compare)."""
    if v == 0:
        return (u[2:] == 0) & (u[:2] != 3)
    return (u == 4 * v - 1) | ((u[2:] == v) & (u[:2] != 3))


class MpaRxRealign(wiring.Component):
    """Input register, cfg/segment arbitration and realign stage of the RX deframer.

    A ``cfg`` write and the segments on ``i`` share one input register; the write waits
    (``cfg.ready`` low) while a segment of its connection is open (its ``first`` beat
    accepted, its ``last`` not yet), and goes first when both are valid. It travels on
    as a cfg op: one beat without octets, its payload packed into ``o.words``.

    The realign stage joins the connection's 0..3 leftover octets (its
    :class:`MpaRxAlignCtx`, kept in a context memory) and the beat, and outputs the whole
    32-bit words they make (``o.nw``, 0..W/4), leaving 0..3 octets for the connection's
    next beat (a cfg op clears them). With each word it works out the word's
    :class:`~rnic.hdl.mpa_rx.layouts.WordFacts` for the parse stage.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Rows of the context memory.

    Ports
    -----
    cfg : In(stream.Signature(MpaConfig))
        The deframer's ``cfg`` port.
    i : In(stream.Signature(OctetBeat))
        The deframer's ``i`` port (TCP payload segments).
    o : Out(stream.Signature(AlignedBeat))
        Words of the connection's stream, ``first``/``last`` of the segment; cfg ops.
    ahead : Out(ahead_signature)
        A beat enters the realign stage's register (from the input register).

    Latency 2 (input register, realign register), throughput one beat or cfg write per
    cycle. ``cfg.ready`` and ``i.ready`` depend on registers and on ``cfg`` only.
    Segment boundaries: a segment may end at any octet; the leftover octets wait in the
    context for the connection's next segment.
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        self.connections = connections
        super().__init__({
            "cfg": In(stream.Signature(MpaConfig(connections=connections))),
            "i": In(stream.Signature(OctetBeat(width=width, connections=connections))),
            "o": Out(stream.Signature(AlignedBeat(width=width, connections=connections))),
            "ahead": Out(ahead_signature(connections)),
        })

    def elaborate(self, platform):
        m = Module()
        W, K, N = self.width, self.width // 4, self.connections
        beat_layout = OctetBeat(width=W, connections=N)
        in_valid = Signal()                             # the input register holds a beat
        in_beat = Signal(beat_layout)
        in_cfg = Signal()                               # ... a cfg op
        in_cfg_payload = Signal(MpaConfig(connections=N))
        align_valid = Signal()                          # the realign register holds a beat
        align_beat = Signal(beat_layout)
        align_cfg = Signal()                            # ... a cfg op
        align_cfg_payload = Signal(MpaConfig(connections=N))
        align_ready = Signal()                          # the realign register can take a beat
        in_ready = Signal()                             # the input register can take one
        in_done = Signal()
        align_done = Signal()
        m.d.comb += [
            align_ready.eq(~align_valid | self.o.ready),
            in_ready.eq(~in_valid | align_ready),
            in_done.eq(in_valid & align_ready),
            align_done.eq(align_valid & self.o.ready),
            self.o.valid.eq(align_valid),
            self.ahead.load.eq(in_done),
            self.ahead.conn.eq(in_beat.conn),
        ]

        # input arbitration: a cfg write waits while a segment of its connection is open
        seg_open = Signal()
        seg_conn = Signal(beat_layout["conn"].shape)
        cfg = self.cfg.payload
        i_take = Signal()
        cfg_block = Signal()
        cfg_go = Signal()
        m.d.comb += [
            cfg_block.eq(seg_open & (seg_conn == cfg.conn)),
            cfg_go.eq(self.cfg.valid & ~cfg_block),
            self.cfg.ready.eq(in_ready & ~cfg_block),
            self.i.ready.eq(in_ready & ~cfg_go),
            i_take.eq(self.i.valid & self.i.ready),
        ]
        with m.If(i_take):
            m.d.sync += [seg_open.eq(~self.i.payload.last), seg_conn.eq(self.i.payload.conn)]
        # The input register loads whenever it may take something (timing: its enable does
        # not depend on the valids of the ports; in_valid says whether it holds a beat).
        with m.If(in_ready):
            m.d.sync += [in_valid.eq(cfg_go | self.i.valid), in_cfg.eq(cfg_go),
                         in_cfg_payload.eq(cfg)]
            with m.If(cfg_go):
                m.d.sync += [
                    in_beat.data.eq(0), in_beat.n.eq(0), in_beat.first.eq(1), in_beat.last.eq(1),
                    in_beat.conn.eq(cfg.conn),
                ]
            with m.Else():
                m.d.sync += in_beat.eq(self.i.payload)
        with m.If(in_done):
            m.d.sync += [align_valid.eq(1), align_cfg.eq(in_cfg),
                         align_cfg_payload.eq(in_cfg_payload), align_beat.eq(in_beat)]
        with m.Elif(align_done):
            m.d.sync += align_valid.eq(0)

        # realign
        nxt = Signal(MpaRxAlignCtx())
        # (the input register loads whenever in_ready: a segment's beat or a cfg op, in_cfg)
        cur = context_memory(
            m, "ctx_align", MpaRxAlignCtx(), N,
            load_en=in_ready, load_addr=(self.i.payload.conn, cfg.conn), load_pick=cfg_go,
            load_picked=in_cfg, take=in_done, in_conn=in_beat.conn, valid=align_valid,
            conn=align_beat.conn, done=align_done, nxt=nxt)
        self._realign(m, cur, nxt, align_beat, align_cfg, align_cfg_payload)
        return m

    def _realign(self, m, cur, nxt, beat, is_cfg, cfg):
        """The words of the connection's leftover octets ``cur`` and ``beat`` (or the cfg op)
        onto ``o.payload``; the context after it, ``nxt``."""
        W, K = self.width, self.width // 4
        cat = Signal(8 * (W + 3))
        with m.Switch(cur.lo_n):
            for k in range(4):
                with m.Case(k):
                    m.d.comb += cat.eq(Cat(cur.lo[:8 * k], beat.data) if k else beat.data)
        total = Signal(range(W + 4))
        nwords = Signal(range(K + 1))
        m.d.comb += [total.eq(cur.lo_n + beat.n), nwords.eq(total >> 2)]
        with m.Switch(nwords):
            for j in range(K + 1):
                with m.Case(j):
                    m.d.comb += nxt.lo.eq(cat[32 * j:32 * j + 24])
        o = self.o.payload
        m.d.comb += [
            nxt.lo_n.eq(Mux(is_cfg, 0, total[:2])),
            o.words.eq(Mux(is_cfg, Cat(cfg.markers, cfg.crc, cfg.phase, cfg.mulpdu), cat[:32 * K])),
            o.nw.eq(Mux(is_cfg, 0, nwords)),
            o.first.eq(beat.first), o.last.eq(beat.last), o.conn.eq(beat.conn), o.cfg.eq(is_cfg),
        ]
        # timing: the values of the parse stage that depend on a word alone (adders,
        # compares of the ULPDU_Length field) are worked out here, beside the short loop
        for j in range(K):
            w = cat[32 * j:32 * j + 32]
            u = Cat(w[8:16], w[0:8])          # ULPDU_Length (big endian)
            pre = o.pre[j]
            m.d.comb += [
                pre.lnv.eq((u + 1)[:2]),
                pre.short.eq(u < Mux(w[23], 14, 18)),
                pre.ptrm.eq(Cat(w[26:32], w[16:24]) - j),
                pre.leq.eq(Cat(*[_lval_is(u, v) for v in range(2 * K + 1)])),
            ]
            # ((u + 1) >> 2) - c in one adder
            m.d.comb += [pre.lvalm[c].eq((u + (1 - 4 * c) % (1 << 17))[2:17]) for c in range(K)]
