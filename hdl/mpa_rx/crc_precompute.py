"""CRC precompute stage of the RX deframer: the part of the CRC that needs no context."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import check_width
from ..crc32c import CRC32C_INIT, crc32c_apply, crc32c_power_const
from .layouts import CrcPreparedBeat, ParsedBeat
from .stage import ahead_signature, stage_register

__all__ = ["MpaRxCrcPrecompute"]


class MpaRxCrcPrecompute(wiring.Component):
    """CRC precompute stage of the RX deframer (no context).

    The CRC register is linear: after word i, ``state_i = r_i ^ M^c_i(s)``, with s the
    register at the beat's start, c_i the CRC-covered words before i (if no CRC word came
    before i; else the M^c(s) term is 0) and r_i the chain of the words alone (from 0,
    from CRC32C_INIT after a CRC word). r needs no context, so it is computed here and the
    CRC stage only has the M^c(s) term in its loop. Timing: r is not chained word by word
    (a CRC step per word) but unrolled over pairs of words: r_i is an XOR of M^e(w_j) (each
    one parity tree of the word) and of constants, gated by the tags, over the words of its
    pair and r at the pair's start (from W = 16). The selections of the CRC stage (which
    M^c(s) at word i, whether a CRC word came before it, the marker errors of the beat)
    are worked out here from the tags. A cfg op makes the register after the beat
    CRC32C_INIT and clears the marker error.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connections (width of ``conn``).

    Ports
    -----
    i : In(stream.Signature(ParsedBeat))
        From the parse stage.
    o : Out(stream.Signature(CrcPreparedBeat))
        To the CRC stage.
    ahead : Out(ahead_signature)
        A beat enters this stage (the CRC stage reads its context row then).

    Latency 1 (its input register), throughput one beat per cycle; FPDU and segment
    boundaries are in the tags (``crcw`` restarts the register).
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        super().__init__({
            "i": In(stream.Signature(ParsedBeat(width=width, connections=connections))),
            "o": Out(stream.Signature(CrcPreparedBeat(width=width, connections=connections))),
            "ahead": Out(ahead_signature(connections)),
        })

    def elaborate(self, platform):
        m = Module()
        K = self.width // 4
        q, take, _ = stage_register(m, self.i, self.o, name="parsed_beat")
        m.d.comb += [self.ahead.load.eq(take), self.ahead.conn.eq(self.i.payload.conn)]
        r = self._word_chains(m, q)
        live_b = [Signal(name=f"blive{i}") for i in range(K + 1)]   # no CRC word before i
        cnt_b = [Signal(range(K + 1), name=f"bcnt{i}") for i in range(K + 1)]
        pm_b = [Signal(name=f"bpm{i}") for i in range(K + 1)]   # a bad marker, since the CRC word
        m.d.comb += [live_b[0].eq(1), cnt_b[0].eq(0), pm_b[0].eq(0)]
        for i in range(K):
            t = q.tags[i]
            m.d.comb += [
                live_b[i + 1].eq(live_b[i] & ~t.crcw),
                cnt_b[i + 1].eq(cnt_b[i] + t.cov),
                pm_b[i + 1].eq(~t.crcw & (pm_b[i] | t.mbad)),
            ]
        o = self.o.payload
        m.d.comb += [o.words.eq(q.words), o.first.eq(q.first), o.last.eq(q.last),
                     o.conn.eq(q.conn), o.cfg.eq(q.cfg), o.tags.eq(q.tags)]
        for i in range(K + 1):
            # a cfg op (no words) makes the register CRC32C_INIT, the marker error 0
            live_i = live_b[i] & ~q.cfg if i == K else live_b[i]
            m.d.comb += [
                o.r[i].eq(Mux(q.cfg, CRC32C_INIT, r[i]) if i == K else r[i]),
                o.sel[i].eq(Cat(*[live_i & (cnt_b[i] == c) for c in range(K + 1)])),
                o.live[i].eq(live_i),
                o.pm[i].eq(pm_b[i]),
            ]
        return m

    def _word_chains(self, m, q):
        """r_0 .. r_K: the CRC register before each word from the words alone."""
        K = self.width // 4
        words = [q.words[32 * i:32 * i + 32] for i in range(K)]
        r = [Signal(32, name=f"r{i}") for i in range(K + 1)]
        srcs = {f"w{i}": words[i] for i in range(K)}  # sources (names: values)
        srcs.update({f"r{i}": r[i] for i in range(K + 1)})
        pvec = {}                                      # M^e(source), e >= 1

        def lin_value(state):
            acc = Const(0, 32)
            for src, es in state.items():
                for e, cond in es.items():
                    if src == "init":
                        val = Const(crc32c_power_const(CRC32C_INIT, e), 32)
                    elif e == 0:
                        val = srcs[src]
                    else:
                        if (src, e) not in pvec:
                            pvec[src, e] = Signal(32, name=f"crc_{src}_m{e}")
                            m.d.comb += pvec[src, e].eq(crc32c_apply(srcs[src], e))
                        val = pvec[src, e]
                    acc = acc ^ Mux(cond, val, 0)
            return acc

        state = {}                        # source -> {exponent: condition}: r_i
        m.d.comb += r[0].eq(0)
        for i in range(K):
            if i and i % 2 == 0:          # a new pair starts from r_i
                state = {f"r{i}": {0: Const(1, 1)}}
            t = q.tags[i]
            nstate = {}

            def add(src, e, cond):
                es = nstate.setdefault(src, {})
                es[e] = es[e] | cond if e in es else cond
            for src, es in state.items():
                for e, cond in es.items():
                    add(src, e + 1, cond & t.cov)
                    add(src, e, cond & ~t.cov & ~t.crcw)
            add(f"w{i}", 1, t.cov)
            add("init", 0, t.crcw)
            state = nstate
            m.d.comb += r[i + 1].eq(lin_value(state))
        return r
