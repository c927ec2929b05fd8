"""The placer: a segment's payload from its slot through a byte rotator into full-width writes."""

from amaranth.hdl import Assert, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from .axi_writer import PlacerWrite
from .control_buffer import ControlWrite
from .header import SegmentView
from .layouts import QN2_BASE
from .sequencer import Step

__all__ = ["PayloadRead", "Placer"]


class PayloadRead(data.StructLayout):
    """The placer's reads of the slot buffer: row ``row`` of the segment's slot when ``en``
    (both 0 outside its set-up states and PLACE)."""

    def __init__(self, *, slot_rows):
        super().__init__({"en": unsigned(1), "row": unsigned(exact_log2(slot_rows))})


class Placer(wiring.Component):
    """Streams the payload of the segment from its slot buffer into aligned full-width
    writes with byte strobes: to host memory (``push``) or to the connection's control
    buffer (``control``, QN 1 / QN 2).

    Ports
    -----
    state : In(Step)
    seg : In(SegmentView)
    qn : In(2), buffer_addr : In(64)
        An untagged segment's queue number and receive buffer (QN 0): the target is the
        buffer's address + MO (QN 0), else MO in the QN 1 / QN 2 message buffer.
    delta : In(addr_width)
        A tagged segment's translation (its STag row's ``delta``, stable from DECODE on): the
        target is TO + ``delta`` (mod ``2**addr_width``).
    read : Out(PayloadRead), slot_data : In(8 * width)
        The slot buffer's read port (read data the cycle after the read).
    push : Out(stream(PlacerWrite)), room : In(1)
        Writes to host memory, one per cycle while ``room``.
    control : Out(stream(ControlWrite))
        Writes to the control buffer (always taken).
    done : Out(1)
        Every word went (PLACE ends).

    Set-up: the check states that go to PLACE (CHECK_TAGGED, CHECK_OFFSETS,
    CHECK_INVALIDATE) load the placer unconditionally (its registers are only used in
    PLACE), so that only the next state depends on the checks, and already read the first
    slot row. The first slot row, the octets from the first output word's start to the end
    and the words (each depends on the low bits of the target address) are worked out a
    cycle ahead and registered, one copy per kind of segment: they drive the slot buffer's
    read address and the placer's counters, which must not wait for the header register's
    fan-out and the address adder. Tagged: from TO and the row's translation (stable from
    DECODE on); untagged: from the buffer address and MO (stable from CHECK_QN_MSN on).

    PLACE: the slot is read through two stages (the read port, then ``cur``; the byte
    rotator sees only registers): one row per cycle at full rate, with the same
    first-write latency as a single stage. Each word is bytes ``r .. r + W - 1`` of
    {``prev``, ``cur``}; the first and last words of a segment carry partial strobes.
    A segment of ``n`` payload octets at target address ``A`` takes
    ``(A mod W + n + W - 1) / W`` words and PLACE lasts one cycle more (the first row read
    only loads ``prev``), plus a cycle per word the AXI queues are full.

    For checkers: ``start``/``end`` (the first and one-past-last target address of the
    placement, unused by the logic), ``to_memory`` (the placement goes to host memory,
    else to the control buffer). With ``platform == "formal"`` it asserts that its
    set-up sums are registered right (``lemma_place_sums``, ``lemma_n_q``) and, while it
    places to host memory, how its address, remaining octets and word counts relate to
    the placement range (``lemma_reads``, ``lemma_end``, ``lemma_n``, ``lemma_aligned``,
    ``lemma_first``, ``lemma_later``, ``lemma_lo``, ``lemma_rem``, ``lemma_words``; for
    tagged segments these names, for untagged ones with ``_untagged`` appended).
    """

    def __init__(self, *, width, connections, slots, slot_bytes, addr_width):
        self.width = width
        self.slot_rows = slot_bytes // width
        self.addr_width = addr_width
        C = connections
        super().__init__({
            "state": In(Step),
            "seg": In(SegmentView(slots=slots, connections=C)),
            "qn": In(2), "buffer_addr": In(64), "delta": In(addr_width),
            "read": Out(PayloadRead(slot_rows=self.slot_rows)), "slot_data": In(8 * width),
            "push": Out(stream.Signature(PlacerWrite(width=width, connections=C,
                                                     addr_width=addr_width), always_ready=True)),
            "room": In(1),
            "control": Out(stream.Signature(ControlWrite(width=width), always_ready=True)),
            "done": Out(1),
        })
        self.start = Signal(addr_width, name="p_start")
        self.end = Signal(addr_width + 1, name="p_end")
        self.to_memory = Signal(name="p_axi")

    def elaborate(self, platform):
        m = Module()
        W, AW, ROWS = self.width, self.addr_width, self.slot_rows
        LW, RB = exact_log2(W), exact_log2(ROWS)
        state, seg = self.state, self.seg
        regs = _PlacerRegs(width=W, addr_width=AW, slot_rows=ROWS, to_memory=self.to_memory)
        setup = self._setup(m, regs)
        with m.Switch(state):
            with m.Case(Step.CHECK_TAGGED):
                setup("t", to_axi=1)
            with m.Case(Step.CHECK_OFFSETS):
                setup("u", to_axi=self.qn == 0)
            with m.Case(Step.CHECK_INVALIDATE):
                setup("u", to_axi=1)
            with m.Case(Step.PLACE):
                self._place(m, regs)
        m.d.comb += self.done.eq(regs.words == 0)
        if platform == "formal":
            self._formal(m, regs)
        return m

    def _setup(self, m, regs):
        """The set-up sums, registered every cycle; returns the set-up action of a check state
        that goes to PLACE (for a tagged, ``"t"``, or untagged, ``"u"``, segment)."""
        W, AW, ROWS = self.width, self.addr_width, self.slot_rows
        LW, RB = exact_log2(W), exact_log2(ROWS)
        seg, qn, e_addr = self.seg, self.qn, self.buffer_addr
        h_to, h_mo, n_q = seg.to, seg.mo, seg.length

        # (``hl``: the header length of the kind of segment, a constant: 14 tagged, 18
        # untagged)
        def first_row_of(lo, hl):
            sum_ = Signal(6, name="p_s")
            row = Signal(max(7, RB + 1), name="p_first_row")
            m.d.comb += [sum_.eq(hl + W - lo), row.eq(sum_[LW:] - 1)]
            return sum_, row

        # the tagged target address, registered (its operands, the TO and the row's
        # translation, are stable from DECODE on: valid in CHECK_TAGGED)
        t_addr = Signal(AW)
        t_addr_c = Signal(AW)
        m.d.comb += t_addr_c.eq(h_to[:AW] + self.delta)
        m.d.sync += t_addr.eq(t_addr_c)
        if LW:
            t_lo = (h_to[:LW] + self.delta[:LW])[:LW]
            # (the QN 1 / QN 2 message buffers start at a row boundary: 0 and QN2_BASE)
            assert QN2_BASE % W == 0
            u_lo = (Mux(qn == 0, e_addr[:LW], 0) + h_mo[:LW])[:LW]
        else:
            t_lo = u_lo = Const(0, 1)
        t_first_row = Signal(max(7, RB + 1))
        u_first_row = Signal(max(7, RB + 1))
        # the untagged target address, registered likewise (its operands are stable from
        # CHECK_QN_MSN on: the receive buffer loaded in LOAD_RECV_BUFFER, the queue number in
        # DECODE, the header)
        u_addr = Signal(AW)
        m.d.sync += u_addr.eq(Mux(qn == 0, (e_addr[:AW] + h_mo)[:AW],
                                  Mux(qn == 1, 0, QN2_BASE) + h_mo[:7]))
        m.d.sync += [t_first_row.eq(first_row_of(t_lo, 14)[1]),
                     u_first_row.eq(first_row_of(u_lo, 18)[1])]
        # the octets from the first output word's start to the end, and the words, registered
        # likewise (valid in CHECK_TAGGED, and in CHECK_OFFSETS and CHECK_INVALIDATE);
        # ``n_w`` (``length + W - 1``, from DECODE on) keeps them one adder deep
        n_w = Signal(18)
        m.d.sync += n_w.eq(n_q + (W - 1))
        self._n_w = n_w
        self._sums = []

        def place_sums(lo, kind):
            rem = Signal(18, name=f"{kind}_rem")
            words = Signal(bits_for(ROWS + 2), name=f"{kind}_words")
            for reg, value in ((rem, lo + n_q), (words, (lo + n_w) >> LW)):
                comb = Signal(len(reg), name=f"{reg.name}_c")
                m.d.comb += comb.eq(value)
                m.d.sync += reg.eq(comb)
                self._sums.append((reg, comb, kind == "t"))
            return rem, words
        t_sums = place_sums(t_lo, "t")
        self._sums.append((t_addr, t_addr_c, True))
        u_sums = place_sums(u_lo, "u")

        kinds = {"t": (t_addr, t_first_row, t_sums, 14), "u": (u_addr, u_first_row, u_sums, 18)}

        def setup(kind, *, to_axi):
            addr, first_row, sums, hl = kinds[kind]
            lo = addr[:LW] if LW else Const(0, 1)
            s, _ = first_row_of(lo, hl)
            rem, words = sums
            m.d.sync += [
                regs.axi.eq(to_axi),
                regs.addr.eq(Cat(Const(0, LW), addr[LW:AW])),
                self.start.eq(addr[:AW]), self.end.eq(addr[:AW] + n_q),
                regs.lo.eq(lo), regs.r.eq(s[:LW] if LW else 0),
                regs.rem.eq(rem), regs.first_word.eq(1),
                regs.row.eq(first_row[:RB + 1] + 1),
                regs.reads.eq(words), regs.words.eq(words),
                regs.rv.eq(1), regs.dv.eq(0), regs.load.eq(1),
            ]
            m.d.comb += [self.read.en.eq(1), self.read.row.eq(first_row[:RB])]
        return setup

    def _place(self, m, regs):
        """PLACE: one output word per cycle (a row consumed per word, the first only loads
        ``prev``)."""
        W = self.width
        LW = exact_log2(W)
        seg = self.seg
        out_ok = Signal()
        consume = Signal()
        move = Signal()
        issue = Signal()
        m.d.comb += [
            out_ok.eq(~regs.axi | self.room),
            consume.eq(regs.dv & (regs.load | out_ok)),
            move.eq(regs.rv & (~regs.dv | consume)),
            issue.eq((regs.reads != 0) & (~regs.rv | move)),
            self.read.en.eq(issue), self.read.row.eq(regs.row),
        ]
        with m.If(issue):
            m.d.sync += [regs.row.eq(regs.row + 1), regs.reads.eq(regs.reads - 1)]
        with m.If(move):
            m.d.sync += regs.cur.eq(self.slot_data)
        m.d.sync += [regs.rv.eq(issue | (regs.rv & ~move)),
                     regs.dv.eq(move | (regs.dv & ~consume))]
        # output word: bytes r .. r + W - 1 of {prev, cur}
        win = Signal(16 * W)
        word = Signal(8 * W)
        strb = Signal(W)
        m.d.comb += win.eq(Cat(regs.prev, regs.cur))
        with m.Switch(regs.r):     # (a multiplexer tree, not a chain of priority levels)
            for r in range(W):
                with m.Case(r):
                    m.d.comb += word.eq(win[8 * r:8 * (r + W)])
        for lane in range(W):
            m.d.comb += strb[lane].eq((~regs.first_word | (lane >= regs.lo)) & (lane < regs.rem))
        aw, w = self.push.payload.aw, self.push.payload.w
        m.d.comb += [
            aw.addr.eq(regs.addr), aw.conn.eq(seg.entry.conn), aw.tagged.eq(seg.tagged),
            aw.lo.eq(Mux(regs.first_word, regs.lo, 0)),
            aw.hi.eq(Mux(regs.rem >= W, W - 1, regs.rem - 1)),
            w.data.eq(word), w.strb.eq(strb),
        ]
        with m.If(consume):
            m.d.sync += [regs.prev.eq(regs.cur), regs.load.eq(0)]
            with m.If(~regs.load):
                m.d.sync += [regs.addr.eq(regs.addr + W), regs.rem.eq(regs.rem - W),
                             regs.first_word.eq(0), regs.words.eq(regs.words - 1)]
                with m.If(regs.axi):
                    m.d.comb += self.push.valid.eq(1)
                with m.Else():
                    m.d.comb += [
                        self.control.valid.eq(1), self.control.payload.row.eq(regs.addr[LW:7]),
                        self.control.payload.data.eq(word), self.control.payload.strb.eq(strb),
                    ]
        with m.If(regs.words == 0):
            m.d.sync += [regs.rv.eq(0), regs.dv.eq(0)]

    def _formal(self, m, regs):
        state, seg = self.state, self.seg
        W, LW = self.width, exact_log2(self.width)
        n = Signal(17, name="formal_n")
        m.d.comb += n.eq(seg.entry.len - seg.header_len)
        in_tagged_setup = state == Step.CHECK_TAGGED
        in_untagged_setup = (state == Step.CHECK_OFFSETS) | (state == Step.CHECK_INVALIDATE)
        for reg, value, tagged in self._sums:
            with m.If(in_tagged_setup if tagged else in_untagged_setup):
                m.d.comb += Assert(reg == value, "lemma_place_sums")
        with m.Switch(state):
            with m.Case(Step.DECODE, Step.LOAD_RECV_BUFFER, Step.CHECK_QN_MSN, Step.CHECK_OFFSETS,
                        Step.CHECK_INVALIDATE, Step.CHECK_TAGGED):
                m.d.comb += Assert(self._n_w == n + W - 1, "lemma_n_q")
        start, end, addr, rem, words = self.start, self.end, regs.addr, regs.rem, regs.words
        facts = {
            "lemma_reads": regs.reads + regs.rv + regs.dv == words + regs.load,
            "lemma_end": end == start + n,
            "lemma_n": n != 0,
            "lemma_aligned": addr[:LW] == 0,
            "lemma_first": ~regs.first_word | ((addr + regs.lo) == start),
            "lemma_later": regs.first_word | (words == 0) | (addr > start),
            "lemma_lo": regs.lo == start[:LW],
            "lemma_rem": (words == 0) | ((addr + rem) == end),
            "lemma_words": (words == 0) | ((rem > ((words - 1) << LW)) & (rem <= (words << LW))),
        }
        placing = (state == Step.PLACE) & regs.axi
        for name, fact in facts.items():
            with m.If(placing & seg.tagged):
                m.d.comb += Assert(fact, name)
            with m.If(placing & ~seg.tagged):
                m.d.comb += Assert(fact, f"{name}_untagged")
        with m.If(placing):
            m.d.comb += Assert(seg.tagged | (self.qn == 0), "lemma_axi_qn")


class _PlacerRegs:
    """The placer's registers."""

    def __init__(self, *, width, addr_width, slot_rows, to_memory):
        LW, RB = exact_log2(width), exact_log2(slot_rows)
        self.axi = to_memory                                # host memory, else the control buffer
        self.addr = Signal(addr_width, name="p_addr")       # aligned address of the next output word
        self.lo = Signal(max(1, LW), name="p_lo")           # A mod W
        self.rem = Signal(18, name="p_rem")                 # octets from the word's start to the end
        self.first_word = Signal(name="p_first_word")
        self.r = Signal(max(1, LW), name="p_r")             # byte rotation
        self.row = Signal(RB + 1, name="p_row")
        self.reads = Signal(bits_for(slot_rows + 2), name="p_reads")
        self.words = Signal(bits_for(slot_rows + 2), name="p_words")
        # slot rows in the two-stage read pipeline: ``rv`` the slot buffer's read port holds
        # a row not yet taken, ``dv`` ``cur`` holds a row not yet consumed. ``cur`` is
        # registered for timing: the block RAM's clock-to-out must not feed the byte rotator
        # and the W queue in the same cycle.
        self.rv = Signal(name="p_rv")
        self.dv = Signal(name="p_dv")
        self.load = Signal(name="p_load")                   # next consumed row only loads ``prev``
        self.cur = Signal(8 * width, name="cur")
        self.prev = Signal(8 * width, name="prev")
