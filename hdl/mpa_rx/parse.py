"""Parse stage of the RX deframer: FPDU delineation, marker removal and check, length check."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import check_width
from ..mpa_config import RxError
from .layouts import CFG_MARKERS, CFG_MULPDU, CFG_PHASE, AlignedBeat, ParsedBeat, ParseTag
from .stage import ahead_signature, context_memory, stage_register

__all__ = ["FpduState", "MpaRxParseCtx", "MpaRxParse"]


class FpduState(enum.Enum, shape=2):
    """Where a connection is in its FPDU, at the next word that is not a marker."""
    LENGTH = 0   #: the first word of an FPDU (ULPDU_Length + 2 octets)
    ULPDU = 1    #: inside the ULPDU (``left`` words, incl. the one with the pad, to come)
    CRC = 2      #: ULPDU and pad complete: the CRC word


class MpaRxParseCtx(data.StructLayout):
    """Parse context.

    ``phase``: word index of the next word in the 512-octet marker interval (0: marker);
    ``st``: :class:`FpduState`; ``left``: ULPDU words still to come after the first word
    (incl. the one with the pad); ``lastn``: ``(ULPDU_Length + 1) % 4``, content octets in
    the last ULPDU word minus 1; ``dist``: words from the ULPDU_Length field to the next
    word (its expected FPDUPTR / 4). Flags kept with them (so that the parse loop compares
    nothing), for the W/4 words i of a beat: ``mkv`` bit i: ``phase == -i mod 128``
    (word i of a full beat is a marker); ``leqv`` bit i: ``left == i + 1``.
    """

    def __init__(self, *, width=32):
        k = width // 4
        super().__init__({
            "markers": unsigned(1), "mulpdu": unsigned(16), "phase": unsigned(7),
            "st": FpduState, "left": unsigned(15), "lastn": unsigned(2), "dist": unsigned(14),
            "mkv": unsigned(k), "leqv": unsigned(k),
        })


def _count(flags):
    acc = Const(0, 4)
    for f in flags:
        acc = acc + f
    return acc


def _pick(m, flags, idx, name):
    """flags[idx] for a small Amaranth value idx (0 beyond the list)."""
    sig = Signal(name=name)
    with m.Switch(idx):
        for k, f in enumerate(flags):
            with m.Case(k):
                m.d.comb += sig.eq(f)
    return sig


def _pick_value(m, values, idx, sig):
    with m.Switch(idx):
        for c, val in enumerate(values):
            with m.Case(c):
                m.d.comb += sig.eq(val)


class MpaRxParse(wiring.Component):
    """Parse stage of the RX deframer: tells what each word of a beat is.

    Each word is a marker (by the connection's marker phase), the first word of an FPDU
    (ULPDU_Length and 2 ULPDU octets), a ULPDU word (the last one with the pad) or the CRC
    word, tagged with a :class:`~rnic.hdl.mpa_rx.layouts.ParseTag`. FPDUPTRs are checked
    against the ULPDU_Length chain and ULPDU_Length against MULPDU and the DDP header its
    T bit announces; the results are flags of the tags (the CRC and verdict stages report
    them). The connection's FPDU state (:class:`MpaRxParseCtx`) is kept in a context memory;
    a cfg op sets it (markers, MULPDU, phase; the next word starts an FPDU).

    The parse loop is kept short: per word only the FPDU state and the last FPDU event of
    the beat (none / length word j / CRC word) are chained; the counters (``left``,
    ``dist``) follow from them and from values precomputed from the registered words and
    the context.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Rows of the context memory.

    Ports
    -----
    i : In(stream.Signature(AlignedBeat))
        From the realign stage.
    ahead : In(ahead_signature)
        A beat enters the realign stage (its context row is read then).
    o : Out(stream.Signature(ParsedBeat))
        The words with their tags, to the CRC precompute stage.

    Latency 1 (its input register), throughput one beat per cycle. An FPDU may end and
    the next one start in one beat; segment boundaries do not matter here.
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        self.connections = connections
        super().__init__({
            "i": In(stream.Signature(AlignedBeat(width=width, connections=connections))),
            "ahead": In(ahead_signature(connections)),
            "o": Out(stream.Signature(ParsedBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        p, take, done = stage_register(m, self.i, self.o, name="aligned_beat")
        nxt = Signal(MpaRxParseCtx(width=W))
        cur = context_memory(
            m, "ctx_parse", MpaRxParseCtx(width=W), self.connections,
            load_en=self.ahead.load, load_addr=self.ahead.conn,
            take=take, in_conn=self.i.payload.conn, valid=self.o.valid, conn=p.conn,
            done=done, nxt=nxt)
        chain = self._word_chain(m, p, cur)
        self._context_after(m, p, cur, nxt, chain)
        o = self.o.payload
        m.d.comb += [o.words.eq(p.words), o.first.eq(p.first), o.last.eq(p.last),
                     o.conn.eq(p.conn), o.cfg.eq(p.cfg), o.tags.eq(chain["tags"])]
        return m

    def _word_chain(self, m, p, cur):
        """The per-word chain over the beat: the tags and the FPDU events."""
        K = self.width // 4
        words = [p.words[32 * i:32 * i + 32] for i in range(K)]

        def chain(name, shape):
            return [Signal(shape, name=f"{name}{i}") for i in range(K + 1)]
        vld = [Signal(name=f"pv{i}") for i in range(K)]
        mk = [Signal(name=f"pmark{i}") for i in range(K)]     # markers, by the phase
        ulen = [Cat(w[8:16], w[0:8]) for w in words]          # ULPDU_Length (big endian)
        lnv = [p.pre[j].lnv for j in range(K)]
        for i in range(K):
            m.d.comb += [
                vld[i].eq(i < p.nw),
                mk[i].eq(vld[i] & cur.markers & cur.mkv[i]),
            ]
        # equality flags: context left == k + 1, length word j's left == k + 1
        leq0 = [Signal(name=f"leq0_{k}") for k in range(K)]
        leqj = [[Signal(name=f"leq{j}_{k}") for k in range(K)] for j in range(K)]
        for k in range(K):
            m.d.comb += leq0[k].eq(cur.leqv[k])
            for j in range(K):
                m.d.comb += leqj[j][k].eq(p.pre[j].leq[k + 1])

        st = chain("st", FpduState)
        evn = chain("evn", 1)          # no length or CRC word before word i in this beat
        evc = chain("evc", 1)          # the last one was a CRC word
        evl = [[Signal(name=f"evl{i}_{j}") for j in range(K)] for i in range(K + 1)]
        isdata = [Signal(name=f"pdata{i}") for i in range(K)]
        m.d.comb += [st[0].eq(cur.st), evn[0].eq(1), evc[0].eq(0)]
        tags = Signal(data.ArrayLayout(ParseTag(), K))
        for i in range(K):
            w = words[i]
            t = tags[i]
            ptr14 = Cat(w[26:32], w[16:24])       # FPDUPTR (big endian) >> 2
            # left == 1 before word i (meaningful for a ULPDU word)
            left1 = Signal(name=f"left1_{i}")
            terms = [evn[i] & _pick(m, leq0, i - _count(mk[:i]), f"eqn{i}")]
            for j in range(i):
                terms.append(evl[i][j] & _pick(m, leqj[j], (i - j - 1) - _count(mk[j + 1:i]),
                                               f"eql{i}_{j}"))
            m.d.comb += left1.eq(Cat(*terms).any())
            # a marker at word i is bad: its FPDUPTR / 4 differs from the expected one
            # (each candidate compared beside the chain, which only selects)
            mbad_i = Signal(name=f"pmbad{i}")
            # (FPDUPTR / 4 - i, from the realign stage, against dist: ptr14 != dist + i
            # without an adder)
            m.d.comb += mbad_i.eq(Mux(cur.st == FpduState.LENGTH, ptr14 != cur.dist,
                                      p.pre[i].ptrm != cur.dist))
            for j in range(i):
                with m.If(evl[i][j]):
                    m.d.comb += mbad_i.eq(ptr14 != i - j)
            with m.If(evc[i]):
                m.d.comb += mbad_i.eq(ptr14 != 0)
            lastn_i = Signal(2, name=f"plastn{i}")
            m.d.comb += lastn_i.eq(cur.lastn)
            for j in range(i):
                with m.If(evl[i][j]):
                    m.d.comb += lastn_i.eq(lnv[j])

            m.d.comb += [st[i + 1].eq(st[i]), evn[i + 1].eq(evn[i]), evc[i + 1].eq(evc[i])]
            m.d.comb += [evl[i + 1][j].eq(evl[i][j]) for j in range(K)]
            with m.If(vld[i]):
                with m.If(mk[i]):
                    m.d.comb += [t.cov.eq(1), t.mark.eq(1), t.mbad.eq(mbad_i)]
                with m.Elif(st[i] == FpduState.LENGTH):
                    # (after a length error the parse goes on with garbage; the output
                    # stage drops it)
                    m.d.comb += [t.cov.eq(1), t.len.eq(1), st[i + 1].eq(FpduState.ULPDU),
                                 evn[i + 1].eq(0), evc[i + 1].eq(0)]
                    m.d.comb += [evl[i + 1][j].eq(j == i) for j in range(K)]
                    with m.If(ulen[i] > cur.mulpdu):
                        m.d.comb += t.lenerr.eq(RxError.TOO_LONG)
                    with m.Elif(p.pre[i].short):
                        m.d.comb += t.lenerr.eq(RxError.TOO_SHORT)
                with m.Elif(st[i] == FpduState.ULPDU):
                    m.d.comb += [t.cov.eq(1), t.data.eq(1), isdata[i].eq(1)]
                    with m.If(left1):
                        m.d.comb += [st[i + 1].eq(FpduState.CRC), t.lastd.eq(1),
                                     t.lastn.eq(lastn_i)]
                with m.Else():
                    m.d.comb += [t.crcw.eq(1), st[i + 1].eq(FpduState.LENGTH),
                                 evn[i + 1].eq(0), evc[i + 1].eq(1)]
                    m.d.comb += [evl[i + 1][j].eq(0) for j in range(K)]
        return dict(tags=tags, st=st, evn=evn, evc=evc, evl=evl, isdata=isdata, lnv=lnv)

    def _context_after(self, m, p, cur, nxt, chain):
        """The context after the beat (``nxt``), from the chain's events and candidates
        worked out beside it."""
        K = self.width // 4
        evn, evc, evl, isdata, lnv = (chain[k] for k in ("evn", "evc", "evl", "isdata", "lnv"))
        nw = p.nw
        left_a = Signal(15)
        dist_a = Signal(14)
        lastn_a = Signal(2)
        # (the subtractions run beside the parse chain; its data word count only selects)
        left0m = [Signal(15, name=f"left0m{c}") for c in range(K + 1)]
        lvalm = [[Signal(15, name=f"lval{j}m{c}") for c in range(K - j)] for j in range(K)]
        for c in range(K + 1):
            m.d.comb += left0m[c].eq(cur.left - c)
        for j in range(K):
            for c in range(K - j):
                m.d.comb += lvalm[j][c].eq(p.pre[j].lvalm[c])
        m.d.comb += [
            dist_a.eq(Mux(cur.st == FpduState.LENGTH, cur.dist, cur.dist + nw)),
            lastn_a.eq(cur.lastn),
        ]
        with m.If(evn[K]):
            _pick_value(m, left0m, _count(isdata), left_a)
        for j in range(K):
            with m.If(evl[K][j]):
                _pick_value(m, lvalm[j], _count(isdata[j + 1:]), left_a)
                m.d.comb += [dist_a.eq(nw - j), lastn_a.eq(lnv[j])]
        with m.If(evc[K]):
            m.d.comb += [left_a.eq(0), dist_a.eq(0)]
        # the flags of the new context, from candidates compared beside the chain
        leqv_a = Signal(K)
        eql0 = [Signal(name=f"eql0_{v}") for v in range(2 * K + 1)]    # left == v
        eqlj = [[Signal(name=f"eql{j}v{v}") for v in range(2 * K + 1)] for j in range(K)]
        for v in range(1, 2 * K + 1):
            m.d.comb += eql0[v].eq(cur.left == v)
            for j in range(K):
                m.d.comb += eqlj[j][v].eq(p.pre[j].leq[v])
        with m.If(evn[K]):
            with m.Switch(_count(isdata)):
                for c in range(K + 1):
                    with m.Case(c):
                        m.d.comb += leqv_a.eq(Cat(*[eql0[k + 1 + c] for k in range(K)]))
        for j in range(K):
            with m.If(evl[K][j]):
                with m.Switch(_count(isdata[j + 1:])):
                    for c in range(K - j):
                        with m.Case(c):
                            m.d.comb += leqv_a.eq(Cat(*[eqlj[j][k + 1 + c] for k in range(K)]))
        with m.If(evc[K]):
            m.d.comb += leqv_a.eq(0)
        eqp = [Signal(name=f"eqp{v}") for v in range(2 * K)]       # phase == -v mod 128
        for v in range(2 * K):
            m.d.comb += eqp[v].eq(cur.phase == (-v) % 128)
        mkv_a = Signal(K)
        with m.Switch(nw):
            for c in range(K + 1):
                with m.Case(c):
                    m.d.comb += mkv_a.eq(Cat(*[eqp[i + c] for i in range(K)]))
        cfg_phase = Signal(7)
        m.d.comb += cfg_phase.eq(p.words[CFG_PHASE + 2:CFG_PHASE + 9])
        cfgw = p.words[:32]
        with m.If(p.cfg):
            m.d.comb += [
                nxt.markers.eq(cfgw[CFG_MARKERS]),
                nxt.mulpdu.eq(cfgw[CFG_MULPDU:CFG_MULPDU + 16]),
                nxt.phase.eq(cfg_phase),
                nxt.st.eq(FpduState.LENGTH),
                nxt.mkv.eq(Cat(*[cfg_phase == (-i) % 128 for i in range(K)])),
            ]
        with m.Else():
            m.d.comb += [
                nxt.markers.eq(cur.markers), nxt.mulpdu.eq(cur.mulpdu),
                nxt.phase.eq(cur.phase + nw), nxt.st.eq(chain["st"][K]), nxt.left.eq(left_a),
                nxt.lastn.eq(lastn_a), nxt.dist.eq(dist_a),
                nxt.mkv.eq(mkv_a), nxt.leqv.eq(leqv_a),
            ]
