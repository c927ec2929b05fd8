"""Output stage of the RX deframer: ULPDU octets out of the connection's carry, with status."""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ..beat import check_width
from ..mpa_config import CrcStatus
from .layouts import RX_ABORTED, OutputStep
from .output_buffer import output_write_signature
from .stage import ahead_signature, context_memory

__all__ = ["MpaRxOutCtx", "MpaRxOutput"]


class MpaRxOutCtx(data.StructLayout):
    """Output context.

    ``carry``, ``cw``: ``cw`` (0..K+1) words of the current FPDU not yet output, markers
    removed; the ULPDU octets start at octet 2 of ``carry[0]`` (the ULPDU_Length word,
    or a word whose first 2 octets went out with the previous beat). ``opened``: a beat
    of the current ULPDU was output (its ``last`` not yet). ``err``: an error was
    reported (drop everything). ``complete``: the last ULPDU word of the current FPDU is
    in the carry; ``lastn``: its content octets minus 1. ``short``: ``complete &
    ~lastn[1]`` (kept for the full beat decision).
    """

    def __init__(self, *, width):
        k = width // 4
        super().__init__({
            "carry": unsigned(32 * (k + 1)), "cw": unsigned(bits_for(k + 1)),
            "opened": unsigned(1), "err": unsigned(1), "complete": unsigned(1),
            "lastn": unsigned(2), "short": unsigned(1),
        })


class MpaRxOutput(wiring.Component):
    """Output stage of the RX deframer: appends each step's compacted words to the
    connection's carry (:class:`MpaRxOutCtx`, in a context memory) and writes the output
    beats to the output buffer.

    Output beats are the carry shifted by the 2 octets of ULPDU_Length. A ULPDU's final
    octets (at most W) are held back in the carry, also across segment boundaries, until
    its CRC word has been seen, so that the ``last`` beat carries the verdict; all other
    ULPDU octets go out as soon as they make a full beat (cut-through: FPDUs up to 64 KB
    are not buffered). A step writes up to two beats: a full beat or the last beat of a
    ULPDU (slot 0), and after a full beat the ULPDU's last beat (slot 1). At an FPDU end
    the carry starts over with the next ULPDU's words of the step. A length error gives a
    status beat; a cfg op to a connection with a partly output ULPDU an abort beat (see
    :class:`~rnic.hdl.mpa_rx.MpaRxBeat`). After an error the stage drops everything of
    the connection until its cfg op.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Rows of the context memory.

    Ports
    -----
    i : In(stream.Signature(OutputStep))
        From the step split stage.
    ahead : In(ahead_signature)
        A beat enters the step split stage (its context row is read then).
    w : Out(output_write_signature)
        The output buffer's write port.
    room : In(1)
        The output buffer has 2 free entries.

    Latency 1 (its input register) to the output buffer; one step per cycle while the
    buffer has room (``i.ready`` is ``room`` or an empty register).
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        self.connections = connections
        super().__init__({
            "i": In(stream.Signature(OutputStep(width=width, connections=connections))),
            "ahead": In(ahead_signature(connections)),
            "w": Out(output_write_signature(width=width, connections=connections)),
            "room": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, K = self.width, self.width // 4
        valid = Signal(name="out_step_valid")
        p = Signal(self.i.payload.shape(), name="out_step")
        step = Signal()
        take = Signal()
        m.d.comb += [
            step.eq(valid & self.room),
            self.i.ready.eq(~valid | step),
            take.eq(self.i.valid & self.i.ready),
        ]
        with m.If(take):
            m.d.sync += [valid.eq(1), p.eq(self.i.payload)]
        with m.Elif(step):
            m.d.sync += valid.eq(0)
        nxt = Signal(MpaRxOutCtx(width=W))
        cur, same, fwd = context_memory(
            m, "ctx_out", MpaRxOutCtx(width=W), self.connections,
            load_en=self.ahead.load, load_addr=self.ahead.conn,
            take=take, in_conn=self.i.payload.conn, valid=valid, conn=p.conn, done=step,
            nxt=nxt, own_loop=True)
        has_end = Signal()      # an FPDU ends in this step (and counts: no earlier error)
        m.d.comb += has_end.eq(p.has_end & ~cur.err)
        win, full, fin, lastn_c, u_oct = self._window(m, p, cur)
        abort = self._beats(m, p, cur, win, full, u_oct)
        m.d.comb += [
            self.w.en.eq(step),
            self.w.keep0.eq(step & (full | has_end | abort)),
            self.w.keep1.eq(step & full & has_end),
        ]

        cw_cont = Signal.like(cur.cw)       # cw after a step that goes on (the step split's table)
        with m.Switch(Cat(cur.cw, full)):
            for f in range(2):
                for c in range(K + 2):
                    with m.Case(c | f << len(cur.cw)):
                        m.d.comb += cw_cont.eq(p.cwt[f * (K + 2) + c])
        with m.If(p.cfg):
            pass                # all zero: nothing in the carry, no error
        with m.Elif(has_end):
            m.d.comb += [
                nxt.carry.eq(p.nwords),
                nxt.cw.eq(p.nn),
                nxt.err.eq(p.bad),
                nxt.complete.eq(p.lastd_n),
                nxt.lastn.eq(p.lastn_n),
                nxt.short.eq(p.lastd_n & ~p.lastn_n[1]),
            ]
        with m.Else():
            m.d.comb += [
                nxt.carry.eq(Cat(*fin)),
                nxt.cw.eq(cw_cont),
                nxt.opened.eq(cur.opened | full),
                nxt.err.eq(cur.err),
                nxt.complete.eq(cur.complete | p.lastd_c),
                nxt.lastn.eq(lastn_c),
                nxt.short.eq((cur.complete | p.lastd_c) & ~lastn_c[1]),
            ]
        # the loop: the next step's context is nxt (same connection) or fwd; for the
        # fields that depend on the full beat decision that choice is made beside it
        # (timing: behind ``full`` only one multiplexer level)
        cont = Signal()         # same connection, no cfg op, no FPDU end: the carry goes on
        m.d.comb += cont.eq(same & ~p.cfg & ~has_end)
        with m.If(take):
            m.d.sync += [
                cur.carry.eq(Mux(cont, Cat(*fin),
                                 Mux(same, Mux(p.cfg, 0, p.nwords), fwd.carry))),
                cur.cw.eq(Mux(cont, cw_cont,
                              Mux(same, Mux(p.cfg, 0, p.nn), fwd.cw))),
                cur.opened.eq(Mux(cont, cur.opened | full, ~same & fwd.opened)),
                cur.err.eq(Mux(same, nxt.err, fwd.err)),
                cur.complete.eq(Mux(same, nxt.complete, fwd.complete)),
                cur.lastn.eq(Mux(same, nxt.lastn, fwd.lastn)),
                cur.short.eq(Mux(same, nxt.short, fwd.short)),
            ]
        return m

    def _window(self, m, p, cur):
        """The window (the carry's ``cw`` words, then the step's words of the current ULPDU),
        the full beat decision, the carry after the step (``fin``), the content octets
        minus 1 of the current ULPDU's last word and the ULPDU octets in the window."""
        K = self.width // 4
        cwords = [p.cwords[32 * j:32 * j + 32] for j in range(K)]
        cwin = Signal(range(2 * K + 2))
        m.d.comb += cwin.eq(cur.cw + p.nc)
        # the last word of the current ULPDU: its content octets minus 1
        lastn_c = Signal(2)
        m.d.comb += lastn_c.eq(Mux(p.lastd_c, p.lastn_c, cur.lastn))
        carry_words = [cur.carry[32 * j:32 * j + 32] for j in range(K + 1)]
        win = [Signal(32, name=f"win{j}") for j in range(2 * K + 1)]
        for j in range(2 * K):
            with m.Switch(cur.cw):
                for c in range(K + 2):
                    with m.Case(c):
                        if j < c:
                            m.d.comb += win[j].eq(carry_words[j])
                        elif j - c < K:
                            m.d.comb += win[j].eq(cwords[j - c])
        m.d.comb += win[2 * K].eq(0)

        # ULPDU octets in the window if complete: 4 * cwin - 2 - (3 - lastn_c). A full
        # beat goes out if the window holds more than one beat's worth, i.e. if
        # cwin >= K + 1 and, when complete, u_oct > W: cwin >= K + 2, or cwin == K + 1
        # with lastn_c >= 2. (Worked out by the step split for every cw and short of the
        # context, timing; also 0 on a cfg op and a length error, where the window is
        # empty; the error of the context is the one term left here.)
        u_oct = Signal(range(8 * K + 8))
        full = Signal()
        m.d.comb += [
            u_oct.eq(4 * cwin + lastn_c - 5),
            full.eq(~cur.err & p.ftab.bit_select(Cat(cur.short, cur.cw), 1)),
        ]
        fin = [Signal(32, name=f"fin{j}") for j in range(K + 1)]
        for j in range(K + 1):
            m.d.comb += fin[j].eq(Mux(full, win[K + j], win[j]))
        return win, full, fin, lastn_c, u_oct

    def _beats(self, m, p, cur, win, full, u_oct):
        """The two beats of the step onto the write port; returns ``abort`` (slot 0 holds an
        abort beat)."""
        W, K = self.width, self.width // 4
        beat0 = self.w.beat0
        beat1 = self.w.beat1
        # The beats' data does not depend on ``full`` (timing): slot 0 holds the window's
        # first beat (zero on a status or abort beat, which never follows a full beat),
        # slot 1 its second one.
        m.d.comb += [
            beat0.data.eq(Mux(p.cfg | p.lenend, 0, Cat(*win[:K + 1])[16:16 + 8 * W])),
            beat0.conn.eq(p.conn),
            beat1.data.eq(Cat(*win[K:])[16:16 + 8 * W]),
            beat1.n.eq(u_oct - W),
            beat1.last.eq(1),
            beat1.conn.eq(p.conn),
            beat1.crc.eq(p.crcst),
            beat1.error.eq(p.err),
        ]
        with m.If(full):
            m.d.comb += [beat0.n.eq(W), beat0.first.eq(~cur.opened)]
        with m.Elif(p.cfg):     # a cfg write to a connection with a partly output ULPDU
            m.d.comb += [
                beat0.last.eq(1),
                beat0.crc.eq(CrcStatus.UNCHECKED),
                beat0.error.eq(RX_ABORTED),
            ]
        with m.Elif(p.lenend):
            m.d.comb += [
                beat0.first.eq(1),
                beat0.last.eq(1),
                beat0.crc.eq(CrcStatus.UNCHECKED),
                beat0.error.eq(p.err),
            ]
        with m.Else():
            m.d.comb += [
                beat0.n.eq(u_oct),
                beat0.first.eq(~cur.opened),
                beat0.last.eq(1),
                beat0.crc.eq(p.crcst),
                beat0.error.eq(p.err),
            ]
        abort = Signal()
        m.d.comb += abort.eq(p.cfg & cur.opened & ~cur.err)
        return abort
