"""CRC stage of the RX deframer: the connection's CRC register over the words of a beat."""

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import check_width
from ..crc32c import crc32c_apply
from .layouts import CFG_CRC, CrcBeat, CrcPreparedBeat, CrcTag
from .stage import ahead_signature, context_memory, stage_register

__all__ = ["MpaRxCrcCtx", "MpaRxCrcAccumulate"]


class MpaRxCrcCtx(data.StructLayout):
    """CRC context: CRC on (``crc_en``), the raw CRC32c register of the current FPDU
    (``crc``), a marker of it was bad (``merr``)."""

    def __init__(self):
        super().__init__({"crc_en": unsigned(1), "crc": unsigned(32), "merr": unsigned(1)})


class MpaRxCrcAccumulate(wiring.Component):
    """CRC stage of the RX deframer: adds the part of the CRC register that depends on the
    register at the beat's start to what the precompute stage worked out, and gives the
    computed CRC value at each CRC word.

    With s the connection's register (:class:`MpaRxCrcCtx`, in a context memory), the
    register before word i is ``r_i ^ XOR_c sel_i[c] & M^c(s)``; the CRC value there is its
    complement, tagged on the word (``calc``) with the FPDU's marker error (``merr``). A
    cfg op sets ``crc_en`` from its payload and restarts the register. The loop (the
    register, K + 1 parity trees M^c, one AND-XOR level, the register) has no multiplexer:
    the choice between this beat's result and the forwarded context is folded into the
    terms.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Rows of the context memory.

    Ports
    -----
    i : In(stream.Signature(CrcPreparedBeat))
        From the CRC precompute stage.
    ahead : In(ahead_signature)
        A beat enters the CRC precompute stage (its context row is read then).
    o : Out(stream.Signature(CrcBeat))
        The words with their CRC tags and the connection's ``crc_en``, to the verdict stage.

    Latency 1 (its input register), throughput one beat per cycle. FPDU boundaries are in
    the tags (the register restarts after a CRC word).
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        self.connections = connections
        super().__init__({
            "i": In(stream.Signature(CrcPreparedBeat(width=width, connections=connections))),
            "ahead": In(ahead_signature(connections)),
            "o": Out(stream.Signature(CrcBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        K = self.width // 4
        p, take, done = stage_register(m, self.i, self.o, name="prepared_beat")
        nxt = Signal(MpaRxCrcCtx())
        cur, same, fwd = context_memory(
            m, "ctx_crc", MpaRxCrcCtx(), self.connections,
            load_en=self.ahead.load, load_addr=self.ahead.conn,
            take=take, in_conn=self.i.payload.conn, valid=self.o.valid, conn=p.conn,
            done=done, nxt=nxt, own_loop=True)
        # M^c(s) for c = 0..K (M: the CRC step matrix, linear in the register)
        mpow_s = [Signal(32, name=f"mpow{c}") for c in range(K + 1)]
        for c in range(K + 1):
            m.d.comb += mpow_s[c].eq(crc32c_apply(cur.crc, c))
        crc = [Signal(32, name=f"crc{i}") for i in range(K + 1)]
        merr = [Signal(name=f"merr{i}") for i in range(K + 1)]
        for i in range(K + 1):
            term = Const(0, 32)
            for c in range(K + 1):
                term = term ^ Mux(p.sel[i][c], mpow_s[c], 0)
            m.d.comb += [
                crc[i].eq(p.r[i] ^ term),
                merr[i].eq((cur.merr & p.live[i]) | p.pm[i]),
            ]
        tags = Signal(data.ArrayLayout(CrcTag(), K))
        for i in range(K):
            m.d.comb += [tags[i].p.eq(p.tags[i]), tags[i].calc.eq(~crc[i]),
                         tags[i].merr.eq(merr[i])]
        m.d.comb += [
            nxt.crc_en.eq(Mux(p.cfg, p.words[CFG_CRC], cur.crc_en)),
            nxt.crc.eq(crc[K]),
            nxt.merr.eq(merr[K]),
        ]
        # the loop: the next beat's context is nxt (same connection) or fwd; for the CRC
        # register that choice is folded into the terms (timing: the M^c(s) terms go
        # through one AND-XOR level, with no multiplexer behind it)
        with m.If(take):
            term = Const(0, 32)
            for c in range(K + 1):
                term = term ^ Mux(p.sel[K][c] & same, mpow_s[c], 0)
            m.d.sync += [
                cur.crc.eq(term ^ Mux(same, p.r[K], fwd.crc)),
                cur.crc_en.eq(Mux(same, nxt.crc_en, fwd.crc_en)),
                cur.merr.eq(Mux(same, nxt.merr, fwd.merr)),
            ]
        o = self.o.payload
        m.d.comb += [o.words.eq(p.words), o.first.eq(p.first), o.last.eq(p.last),
                     o.conn.eq(p.conn), o.cfg.eq(p.cfg), o.tags.eq(tags),
                     o.crc_en.eq(cur.crc_en)]
        return m
