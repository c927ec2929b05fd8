"""The output side of the segmenter: header and payload words merged into ULPDU beats.
See :class:`SegmentEmitter`."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..beat import check_width, conn_bits
from ..compare import above
from ..global_buffer import on_global_network
from ..mpa_tx import MpaTxBeat
from .layouts import HEADER_MAX, EmitStart
from .word_rotation import WordRotation

__all__ = ["SegmentEmitter"]


class SegmentEmitter(wiring.Component):
    """Emits one ULPDU: its header octets, then the payload from the memory words, rotated
    so that the payload follows the header without a gap.

    Parameters
    ----------
    width : int
        Datapath width W in octets.
    connections : int
        Connection contexts.

    Ports
    -----
    start : In(stream(EmitStart))
        Load a segment (always taken; only while ``busy`` is 0). It waits in a register
        for a cycle at least, and follows a segment going out without a bubble.
    words : In(stream(unsigned(8 * W)))
        The payload's memory words in order, from the W-aligned address of its first
        octet (:class:`rnic.hdl.ddp_tx.fetch.PayloadFetch`): the emitter takes exactly
        ``lastw + 1`` of them per segment.
    o : Out(stream(MpaTxBeat))
        The ULPDU: ``length`` on the ``first`` beat, every beat full but the last.
    done : Out(1)
        The last beat of the newest segment (the last one started) is taken on ``o``
        (combinational; not for a segment that a waiting one follows).
    busy : Out(1)
        A started segment waits in the register (behind the one going out, or for the
        cycle after its ``start``), or the segment going out has header words still to
        take from the header register; a new ``start`` waits for 0.

    Latency, throughput and packet boundaries
    -----------------------------------------
    The first beat is offered 2 cycles after ``start`` (the waiting register, then the
    header registers) when the segment is header-only or its header fills the first beat,
    else a cycle after the first memory word is on ``words`` (each word is taken into a
    register of the emitter, ``cur``, first; ``pre``: the word that only starts the first
    beat is moved on one cycle more). A start while a segment goes out is loaded with its
    last beat. Then one beat per cycle, limited only by ``o.ready`` and the words (one
    taken per cycle while the beats use them):
    each memory word is rotated by its segment's rotation as it is taken into ``cur``
    (:class:`.word_rotation.WordRotation` says which segment's), so that a beat's octet is
    one of the header word's, the previous memory word's and the current one's (no bubble
    at the header/payload seam; a 2:1 choice of words behind registers). The per-beat
    conditions (a memory word is needed, last beat, header and length masks) are registers
    computed one beat ahead, so that ``o.valid`` is one gate of registers. One ULPDU at a
    time; ``first``/``last`` delimit it.
    """

    def __init__(self, *, width, connections):
        check_width(width)
        self.width = width
        C = connections
        super().__init__({
            "start": In(stream.Signature(EmitStart(width=width, connections=C), always_ready=True)),
            "words": In(stream.Signature(8 * width)),
            "o": Out(stream.Signature(MpaTxBeat(width=width, connections=C))),
            "done": Out(1),
            "busy": Out(1),
        })
        self._conn_bits = conn_bits(C)

    def elaborate(self, platform):
        m = Module()
        W, LW = self.width, exact_log2(self.width)
        # the header (+ inline payload) octets as words of W, loaded straight from ``start``
        # (area and wires: one register of the header, not a waiting copy and a working
        # copy); the beat's word is selected by a counter (area and timing: a shift register
        # would be a multiplexer per bit, enabled by every beat's handshake)
        n_words = -(-HEADER_MAX // W)
        assert n_words > 1
        hdr = Signal(8 * W * n_words)
        # the header word of the current beat, registered (timing: the word multiplexer is
        # in front of this register, not of the output), and the index of the next beat's
        # (past the header it wraps or runs out of range: ``hmask`` is 0 from there on and
        # the word is not used)
        hword = Signal(8 * W)
        hk = Signal(range(n_words + 1))
        next_hword = Signal(8 * W)
        # a later beat of the segment going out takes its header word from ``hdr``
        # (``hrem > W``): ``hdr`` is not free for the next segment's header
        hdr_more = Signal()
        hrem = Signal(range(HEADER_MAX + 1))
        tot = Signal(17)               # octets of the ULPDU from the current beat on
        t = Signal(signed(20))         # index of the memory word that the current beat ends in
        lastw = Signal(signed(20))     # index of the last memory word (-1: none)
        prev = Signal(8 * W)
        e_first = Signal()
        e_len = Signal(16)
        e_conn = Signal(self._conn_bits)
        pre = Signal()                 # load memory word 0 into ``prev`` first (when lo >= header)
        # The following are registers kept in step with hrem/tot/t (registered for timing:
        # they gate o.valid, whose handshake enables the wide ``prev`` register and the
        # counters, and would otherwise be wide compares in front of that enable).
        emitting = Signal()            # a ULPDU is being emitted
        need = Signal()                # the current beat takes a memory word: 0 <= t <= lastw
        last_beat = Signal()           # tot <= W
        hmask = Signal(W)              # octet b of the beat comes from hdr: b < hrem
        tmask = Signal(W)              # octet b of the beat is in the ULPDU: b < tot

        words = self.words
        # The next memory word, in a register of the emitter with its own valid flag
        # (timing: the beat's handshake and the clock enables of the beat registers are
        # then gates of local registers; ``words.valid`` comes from the fetch across the
        # die and reaches only ``cur`` and ``cur_valid``). ``cur`` loads whatever is on
        # ``words`` while it is free or used up (a payload loaded without its valid is
        # never used). It is not zeroed when the beat takes no word: its octets are then
        # past the ULPDU's end or under the header, masked by ``tmask``/``hmask``.
        cur = Signal(8 * W)
        cur_valid = Signal()
        use_cur = Signal()             # the word in ``cur`` is used up in this cycle
        m.d.comb += words.ready.eq(~cur_valid | use_cur)
        # Each word is rotated by its segment's rotation r as it enters ``cur`` (octet b of
        # the stored word is octet (b + r) mod W of the memory word), so that a beat's
        # payload octet b is octet b of ``prev`` when b + r < W (``from_prev``), else octet
        # b of ``cur``: a 2:1 choice in front of the output instead of a W:1 rotator (timing:
        # the rotator is between the fetch's slice and ``cur`` instead).
        m.submodules.word_rotation = rotation = WordRotation(width=W)
        m.d.comb += [rotation.push.valid.eq(self.start.valid & ~self.start.payload.lastw[-1]),
                     rotation.push.payload.rot.eq(self.start.payload.rot),
                     rotation.push.payload.words.eq(self.start.payload.lastw + 1),
                     rotation.take.eq(words.valid & words.ready)]
        rotated = Signal(8 * W)
        for b in range(W):
            # (a Switch: one multiplexer tree, not a chain of W priority levels)
            with m.Switch(rotation.rot[b]):
                for r in range(W):
                    with m.Case(r):
                        k = (b + r) % W
                        m.d.comb += rotated[8 * b:8 * b + 8].eq(words.payload[8 * k:8 * k + 8])
        with m.If(words.ready):
            m.d.sync += [cur.eq(rotated), cur_valid.eq(words.valid)]
        from_prev = Signal(W)          # octet b of the beat's payload is in ``prev``: b + rot < W
        rdat = Signal(8 * W)
        for b in range(W):
            m.d.comb += rdat[8 * b:8 * b + 8].eq(
                Mux(from_prev[b], prev[8 * b:8 * b + 8], cur[8 * b:8 * b + 8]))
        with m.Switch(hk):     # (a multiplexer tree: ``word_select`` takes more LUTs here)
            for k in range(1, n_words):
                with m.Case(k):
                    m.d.comb += next_hword.eq(hdr[8 * W * k:8 * W * (k + 1)])
        outd = Signal(8 * W)
        for b in range(W):
            m.d.comb += outd[8 * b:8 * b + 8].eq(
                Mux(tmask[b], Mux(hmask[b], hword[8 * b:8 * b + 8], rdat[8 * b:8 * b + 8]), 0))
        o = self.o
        m.d.comb += [
            o.payload.data.eq(outd), o.payload.n.eq(Mux(last_beat, tot[:LW + 1], W)),
            o.payload.first.eq(e_first), o.payload.last.eq(last_beat),
            o.payload.length.eq(e_len), o.payload.conn.eq(e_conn),
            o.valid.eq(emitting & ~pre & (~need | cur_valid)),
        ]
        with m.If(emitting & pre & cur_valid):
            m.d.comb += use_cur.eq(1)
            m.d.sync += [prev.eq(cur), pre.eq(0)]
        with m.If(o.valid & o.ready):
            m.d.sync += [
                hrem.eq(Mux(hrem > W, hrem - W, 0)), tot.eq(tot - W),
                t.eq(t + 1), e_first.eq(0), hk.eq(hk + 1), hword.eq(next_hword),
                hdr_more.eq(above(hrem, 2 * W)),
                # the same flags for the next beat (hrem - W, tot - W, t + 1; ``t >= -1`` is
                # "not negative, or all ones", and the compares with constants are LUTs:
                # area, no carry chains)
                need.eq((~t[-1] | t.as_unsigned().all()) & (t < lastw)),
                last_beat.eq(~above(tot, 2 * W)),
                hmask.eq(Cat(*[above(hrem, b + W) for b in range(W)])),
                tmask.eq(Cat(*[above(tot, b + W) for b in range(W)])),
            ]
            with m.If(need):
                m.d.comb += use_cur.eq(1)
                m.d.sync += prev.eq(cur)
            with m.If(last_beat):
                m.d.sync += emitting.eq(0)

        # Every start's header goes into ``hdr`` and the rest waits in ``nxt``, loaded when
        # the emitter is idle or with the last beat of the segment going out, so that
        # segments follow each other without a bubble. A start is taken once the segment
        # going out has its last header word in ``hword`` (``busy``): for a payload
        # segment a few beats into it, long before its end. (Area and timing: the header
        # register has one source, the start's multiplexer of every kind's header.)
        fire_last = Signal()
        m.d.comb += fire_last.eq(o.valid & o.ready & last_beat)
        nxt = Signal.like(self.start.payload, name="nxt")
        nxt_valid = Signal()
        load_nxt = Signal()
        m.d.comb += [
            load_nxt.eq(nxt_valid & (~emitting | fire_last)),
            # the newest segment's last beat (an older one's is followed by ``nxt``)
            self.done.eq(fire_last & ~nxt_valid),
            self.busy.eq(nxt_valid | hdr_more),
        ]
        with m.If(self.start.valid):
            m.d.sync += nxt_valid.eq(1)
            # (all but the header, which goes into ``hdr``)
            for name, _ in self.start.payload.shape():
                if name != "header":
                    m.d.sync += nxt[name].eq(self.start.payload[name])
        with m.Elif(load_nxt):
            m.d.sync += nxt_valid.eq(0)
        # (the enable of the whole header register, the start's kind flags: on a global
        # network, GlobalBuffer)
        with m.If(on_global_network(m, self.start.valid, name="hdr_load_net")):
            m.d.sync += hdr.eq(self.start.payload.header)
        with m.If(load_nxt):
            m.d.sync += [
                hword.eq(hdr[:8 * W]), hk.eq(1), hdr_more.eq(above(nxt.header_len, W)),
                hrem.eq(nxt.header_len), hmask.eq(nxt.hmask),
                e_first.eq(1), e_conn.eq(nxt.conn), e_len.eq(nxt.total), emitting.eq(1),
                tot.eq(nxt.total), tmask.eq(nxt.tmask), last_beat.eq(nxt.last_beat),
                from_prev.eq(Cat(*[nxt.rot + b < W for b in range(W)])),
                t.eq(nxt.t), lastw.eq(nxt.lastw), pre.eq(nxt.pre), need.eq(nxt.need),
            ]
        return m
