"""Step split stage of the RX deframer: prepares the output stage's steps from the tags."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ..beat import check_width
from ..mpa_config import CrcStatus, RxError
from .layouts import OutputStep, VerdictBeat
from .stage import ahead_signature

__all__ = ["MpaRxStepSplit"]


def _prefix_counts(m, name, bits):
    """Signals: for each i in 0..len(bits), the number of set bits among ``bits[:i]``."""
    out = []
    acc = Const(0, 4)
    for i in range(len(bits) + 1):
        s = Signal(range(len(bits) + 1), name=f"{name}{i}")
        m.d.comb += s.eq(acc)
        out.append(s)
        if i < len(bits):
            acc = s + bits[i]
    return out


class MpaRxStepSplit(wiring.Component):
    """Step split stage of the RX deframer (no context), behind a 2-beat buffer.

    Everything of the output stage's step that does not need the output context is
    worked out here from the beat's tags: which words the step covers (a beat with an
    FPDU end after a clean one goes to the output in two steps: the first up to and
    including the first end, the second from the word after it), where the FPDU ends and
    with what status, the words of the current and of the next ULPDU, each compacted
    (markers and CRC removed), and the output stage's full beat decision and carry count
    for every value of the context fields they depend on (the output stage only selects).

    The 2-entry buffer in front is the pipeline's only elastic point: ``i.ready`` is a
    register (every handshake of the stages in front depends on it), high while an entry
    is free.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connections (width of ``conn``).

    Ports
    -----
    i : In(stream.Signature(VerdictBeat))
        From the verdict stage.
    o : Out(stream.Signature(OutputStep))
        One step of the output stage per transfer.
    ahead : Out(ahead_signature)
        A beat enters this stage's register from the buffer (the output stage reads its
        context row then).

    Latency 1 with an empty buffer (its register), throughput one step per cycle: one
    beat per cycle, a beat with two FPDU ends without error (W >= 16 only) two cycles.
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        super().__init__({
            "i": In(stream.Signature(VerdictBeat(width=width, connections=connections))),
            "o": Out(stream.Signature(OutputStep(width=width, connections=connections))),
            "ahead": Out(ahead_signature(connections)),
        })

    def elaborate(self, platform):
        m = Module()
        K = self.width // 4
        layout = self.i.payload.shape()
        cut = Signal()          # the beat goes to the output in two steps (a second FPDU end)
        wo = Signal(range(max(K, 2)))                   # first word of the beat still to go
        valid = Signal()
        p = Signal(layout, name="step_beat")
        a_move = Signal()
        a_release = Signal()
        m.d.comb += [
            self.o.valid.eq(valid),
            a_move.eq(self.o.valid & self.o.ready),
            a_release.eq(a_move & ~cut),
        ]
        # the buffer
        sk = [Signal(layout, name=f"skid{j}") for j in range(2)]
        sk_rp = Signal()
        sk_wp = Signal()
        sk_cnt = Signal(range(3))
        sk_room = Signal(init=1)
        sk_head = Signal(layout)
        sk_pop = Signal()
        sk_push = Signal()
        m.d.comb += [
            sk_head.eq(Mux(sk_rp, sk[1].as_value(), sk[0].as_value())),
            sk_pop.eq((sk_cnt != 0) & (~valid | a_release)),
            self.i.ready.eq(sk_room),
            sk_push.eq(self.i.valid & self.i.ready),
            self.ahead.load.eq(sk_pop),
            self.ahead.conn.eq(sk_head.conn),
        ]
        # sk_room = (sk_cnt != 2), registered (timing: every handshake depends on it)
        with m.Switch(sk_cnt):
            with m.Case(2):
                m.d.sync += sk_room.eq(sk_pop)
            with m.Case(1):
                m.d.sync += sk_room.eq(~sk_push | sk_pop)
            with m.Default():
                m.d.sync += sk_room.eq(1)
        for j in range(2):
            with m.If(sk_push & (sk_wp == j)):
                m.d.sync += sk[j].eq(self.i.payload)
        m.d.sync += [
            sk_wp.eq(sk_wp ^ sk_push),
            sk_rp.eq(sk_rp ^ sk_pop),
            sk_cnt.eq(sk_cnt + sk_push - sk_pop),
        ]
        with m.If(sk_pop):
            m.d.sync += [valid.eq(1), p.eq(sk_head)]
        with m.Elif(a_release):
            m.d.sync += valid.eq(0)
        e1 = self._split(m, p, wo, cut)
        with m.If(a_move):
            m.d.sync += wo.eq(Mux(cut, e1, 0))
        return m

    def _split(self, m, p, wo, cut):
        """The step of the beat ``p`` from word ``wo`` on, onto ``o.payload``; drives ``cut``
        and returns the index after the step's first FPDU end."""
        K = self.width // 4
        o = self.o.payload
        words = [p.words[32 * i:32 * i + 32] for i in range(K)]
        tags = p.tags
        inr = [Signal(name=f"inr{i}") for i in range(K)]
        end = [Signal(name=f"end{i}") for i in range(K)]
        for i in range(K):
            m.d.comb += [inr[i].eq(i >= wo), end[i].eq(inr[i] & tags[i].end)]
        pre_end = [Signal(name=f"pre_end{i}") for i in range(K + 1)]   # an end before word i
        m.d.comb += pre_end[0].eq(0)
        for i in range(K):
            m.d.comb += pre_end[i + 1].eq(pre_end[i] | end[i])
        first_end = [end[i] & ~pre_end[i] for i in range(K)]
        e1 = Signal(range(K + 1))       # index after the first end word
        end_lenend = Signal()
        end_err = Signal(RxError)
        end_crc = Signal(CrcStatus)
        for i in reversed(range(K)):
            with m.If(first_end[i]):
                m.d.comb += [e1.eq(i + 1), end_lenend.eq(tags[i].lenend),
                             end_err.eq(tags[i].err), end_crc.eq(tags[i].crcst)]
        end_bad = Signal()
        m.d.comb += [
            end_bad.eq(end_err != RxError.NONE),
            # a second end after a clean first one: this step stops after the first
            cut.eq(Cat(*[end[i] & pre_end[i] for i in range(K)]).any() & ~end_bad),
        ]
        kc = [Signal(name=f"kc{i}") for i in range(K)]   # word of the current ULPDU
        kn = [Signal(name=f"kn{i}") for i in range(K)]   # word of the ULPDU after the end
        # (the words after the end are dropped if the end is bad or if the step stops
        # there; then only their count, nn, and completion are forced to 0, timing: the
        # compaction does not wait for that decision; no carry word beyond cw is used)
        drop_n = Signal()
        m.d.comb += drop_n.eq(cut | end_bad)
        for i in range(K):
            m.d.comb += [
                kc[i].eq(inr[i] & tags[i].data & ~pre_end[i]),
                kn[i].eq(inr[i] & tags[i].data & pre_end[i]),
            ]
        pc = _prefix_counts(m, "pc", kc)
        pn = _prefix_counts(m, "pn", kn)
        cw_a = [Signal(32, name=f"cwa{j}") for j in range(K)]
        nw_a = [Signal(32, name=f"nwa{j}") for j in range(K)]
        for j in range(K):
            src_c = 0
            src_n = 0
            for i in range(j, K):
                src_c = src_c | Mux(kc[i] & (pc[i] == j), words[i], 0)
                src_n = src_n | Mux(kn[i] & (pn[i] == j), words[i], 0)
            m.d.comb += [cw_a[j].eq(src_c), nw_a[j].eq(src_n)]
        lastd_c = Signal()
        lastn_now = Signal(2)
        lastd_n = Signal()
        lastn_n = Signal(2)
        for i in range(K):
            with m.If(kc[i] & tags[i].lastd):
                m.d.comb += [lastd_c.eq(1), lastn_now.eq(tags[i].lastn)]
            with m.If(kn[i] & tags[i].lastd):
                m.d.comb += [lastd_n.eq(1), lastn_n.eq(tags[i].lastn)]
        # the output stage's decision whether a full beat goes out (see there), worked out
        # here for every value of the context fields it depends on (timing: it only
        # selects) (``~complete | lastn[1]`` after the step's words, from the context's
        # short if the last word is not in this step; the context is complete if an FPDU
        # ends then)
        ftab = []
        for c in range(K + 2):
            for short in range(2):
                cwin_c = c + pc[K]
                ftab.append(~p.cfg & ~end_lenend & (cwin_c >= K + 1) &
                            ((cwin_c >= K + 2) | Mux(lastd_c, lastn_now[1], not short)))
        cwt = [(c + pc[K] - f * K)[:bits_for(K + 1)] for f in range(2) for c in range(K + 2)]
        m.d.comb += [
            o.cwords.eq(Cat(*cw_a)), o.nwords.eq(Cat(*nw_a)),
            o.nc.eq(pc[K]), o.nn.eq(Mux(drop_n, 0, pn[K])),
            o.first.eq(p.first & (wo == 0)), o.last.eq(p.last & ~cut),
            o.cfg.eq(p.cfg), o.conn.eq(p.conn),
            o.has_end.eq(pre_end[K]), o.lenend.eq(end_lenend), o.err.eq(end_err),
            o.crcst.eq(end_crc), o.bad.eq(end_bad),
            o.lastd_c.eq(lastd_c), o.lastn_c.eq(lastn_now),
            o.lastd_n.eq(lastd_n & ~drop_n), o.lastn_n.eq(Mux(drop_n, 0, lastn_n)),
            o.ftab.eq(Cat(*ftab)),
            o.cwt.eq(Cat(*cwt)),
        ]
        return e1
