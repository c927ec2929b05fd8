"""The placer: a segment's payload from its slot through a byte rotator into full-width writes."""

from amaranth.hdl import Assert, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from ..beat import conn_bits
from .axi_writer import PlacerWrite
from .completion_gate import COUNT_BITS
from .control_buffer import ControlWrite
from .header import SegmentView
from .layouts import QN2_BASE
from .sequencer import Step, in_steps

__all__ = ["PayloadRead", "PlaceCommand", "Placer"]


class PayloadRead(data.StructLayout):
    """The placer's reads of the slot buffer: row ``row`` of slot ``slot`` when ``en``
    (``en`` and ``row`` 0 while the placer neither starts nor runs a placement)."""

    def __init__(self, *, slots, slot_rows):
        super().__init__({"en": unsigned(1), "row": unsigned(exact_log2(slot_rows)),
                          "slot": unsigned(max(1, exact_log2(slots)))})


class PlaceCommand(data.StructLayout):
    """A placement, as the set-up works it out: to host memory (``axi``) or the control
    buffer, the aligned address of the first word ``addr``, the first lane ``lo``, the
    byte rotation ``r``, the octets from the first word's start to the end ``rem``, the
    slot row of the first payload octet ``first_row``, the ``words``; the segment's
    ``conn``, ``tagged`` and ``slot``. For checkers (unused by the logic): the first and
    one-past-last target address ``start``/``end`` and the payload octets ``n``."""

    def __init__(self, *, width, connections, slots, slot_rows, addr_width):
        LW, RB = exact_log2(width), exact_log2(slot_rows)
        super().__init__({
            "axi": unsigned(1), "addr": unsigned(addr_width), "lo": unsigned(max(1, LW)),
            "r": unsigned(max(1, LW)), "rem": unsigned(18), "first_row": unsigned(RB + 1),
            "words": unsigned(bits_for(slot_rows + 2)),
            "conn": unsigned(conn_bits(connections)), "tagged": unsigned(1),
            "slot": unsigned(max(1, exact_log2(slots))),
            "start": unsigned(addr_width), "end": unsigned(addr_width + 1), "n": unsigned(17),
        })


class Placer(wiring.Component):
    """Streams the payload of a segment from its slot buffer into aligned full-width
    writes with byte strobes: to host memory (``push``) or to the connection's control
    buffer (``control``, QN 1 / QN 2), while the sequencer goes on with the next segment.

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
    place_go : In(1)
        The check state passes the segment on to placement this cycle.
    read : Out(PayloadRead), slot_data : In(8 * width)
        The slot buffer's read port (read data the cycle after the read).
    push : Out(stream(PlacerWrite)), room : In(1)
        Writes to host memory, one per cycle while ``room``.
    control : Out(stream(ControlWrite))
        Writes to the control buffer (always taken).
    free : Out(1)
        No placement runs (every word of the last one went); a segment is handed over
        only then.
    handed : Out(1)
        The sequencer's segment was handed over (cleared in IDLE): its slot is the
        placer's to release.
    placed : Out(1)
        In PLACE: PLACE ends (a placement to memory is handed over this cycle; one to the
        control buffer, whose message the sequencer reads next, has gone whole).
    release : Out(stream(slot), always ready)
        The slot of a placement whose every word went.
    written : Out(COUNT_BITS)
        Words of placements to host memory handed over so far (a wrapping counter: the
        writes a completion waits for, :class:`~rnic.hdl.ddp_rx.completion_gate.CompletionGate`).

    Set-up: the check states that go on to placement (CHECK_TAGGED, CHECK_OFFSETS,
    CHECK_INVALIDATE) work out the :class:`PlaceCommand` and register it (unconditionally:
    only the next state depends on the checks). The first slot row, the octets from the
    first output word's start to the end and the words (each depends on the low bits of
    the target address) are worked out a cycle ahead and registered, one copy per kind of
    segment: they drive the slot buffer's read address and the placer's counters, which
    must not wait for the header register's fan-out and the address adder. Tagged: from TO
    and the row's translation (stable from DECODE on); untagged: from the buffer address
    and MO (stable from CHECK_QN_MSN on).

    Hand-over: with ``place_go`` and the placer ``free``, the set-up's command starts at
    once (its first slot row is read in the check state); else the sequencer waits in
    PLACE until the placer is free and the registered command starts then. A free placer
    loads the command's address, lanes, octets and labels in every check state, whatever
    the checks say; ``place_go`` only enables the word and read counters (the start), so
    the verdict drives a few registers, not the whole command. A placement to
    memory runs on its own from there (the sequencer finishes the segment and takes the
    next one: its header comes from the ingest's header copy, not from the slot buffer);
    one to the control buffer keeps the sequencer in PLACE until its last word.

    Placement: the slot is read through two stages (the read port, then ``cur``; the byte
    rotator sees only registers): one row per cycle at full rate. Each word is bytes
    ``r .. r + W - 1`` of {``prev``, ``cur``}; the first and last words of a segment carry
    partial strobes. A segment of ``n`` payload octets at target address ``A`` takes
    ``(A mod W + n + W - 1) / W`` words; the placer is busy for one cycle more (the first
    row read only loads ``prev``), plus a cycle per word the AXI queues are full, and
    free again the cycle after its last word: back-to-back segments cost one cycle each
    beyond their words (the hand-over reads the first row).

    For checkers: ``start``/``end`` (the running placement's first and one-past-last
    target address), ``to_memory`` (it goes to host memory, else to the control buffer),
    ``conn``/``tagged`` (its segment's), ``cmd`` (the registered command). With
    ``platform == "formal"`` it asserts that its set-up sums are registered right
    (``lemma_place_sums``, ``lemma_n_q``), that the registered command is the segment's
    while the sequencer waits in PLACE (``lemma_cmd_label``, ``lemma_cmd_n``) and that a placement has
    words (``lemma_setup_words``, ``lemma_cmd_words``), and, for the command waiting
    in PLACE and for the running placement to host memory, how the address, remaining
    octets and word counts relate to the placement range (``lemma_end``,
    ``lemma_n``, ``lemma_aligned``, ``lemma_first``, ``lemma_later``, ``lemma_lo``,
    ``lemma_rem``, ``lemma_words``; for tagged segments these names, for untagged ones with
    ``_untagged`` appended; for the waiting command with ``_cmd`` appended), and for every
    placement how many slot rows are in flight and that nothing moves while it is free
    (``lemma_reads``, ``lemma_idle``), and that ``free`` is the word count's being 0
    (``lemma_free``).
    """

    def __init__(self, *, width, connections, slots, slot_bytes, addr_width):
        self.width = width
        self.slot_rows = slot_bytes // width
        self.addr_width = addr_width
        C = connections
        slot = unsigned(max(1, exact_log2(slots)))
        super().__init__({
            "state": In(Step),
            "seg": In(SegmentView(slots=slots, connections=C)),
            "qn": In(2), "buffer_addr": In(64), "delta": In(addr_width),
            "place_go": In(1),
            "read": Out(PayloadRead(slots=slots, slot_rows=self.slot_rows)),
            "slot_data": In(8 * width),
            "push": Out(stream.Signature(PlacerWrite(width=width, connections=C,
                                                     addr_width=addr_width), always_ready=True)),
            "room": In(1),
            "control": Out(stream.Signature(ControlWrite(width=width), always_ready=True)),
            "free": Out(1), "handed": Out(1), "placed": Out(1),
            "release": Out(stream.Signature(slot, always_ready=True)),
            "written": Out(COUNT_BITS),
        })
        self._command = PlaceCommand(width=width, connections=C, slots=slots,
                                     slot_rows=self.slot_rows, addr_width=addr_width)
        self.cmd = Signal(self._command, name="p_cmd")
        self._regs = _PlacerRegs(width=width, addr_width=addr_width, slot_rows=self.slot_rows,
                                 connections=C, slots=slots)
        self.start, self.end = self._regs.start, self._regs.end
        self.to_memory, self.conn, self.tagged = self._regs.axi, self._regs.conn, self._regs.tagged

    def elaborate(self, platform):
        m = Module()
        state, regs, cmd = self.state, self._regs, self.cmd
        m.d.comb += self.free.eq(regs.free)
        now = self._now = self._setup(m)
        in_setup = Signal(name="p_in_setup")
        m.d.comb += in_setup.eq(in_steps(state, Step.CHECK_TAGGED, Step.CHECK_OFFSETS,
                                         Step.CHECK_INVALIDATE))
        with m.If(in_setup):
            m.d.sync += cmd.eq(now)
        self._place(m, regs)
        # the hand-over (after the placement's own updates: they are those of an idle placer).
        # A free placer loads the set-up's command in every check state, whatever the
        # checks say (timing: the verdict only enables the few registers that start it)
        from_setup = self.place_go & self.free
        from_cmd = (state == Step.PLACE) & ~self.handed & self.free
        with m.If(in_setup & self.free):
            self._load(m, regs, now)
        with m.Elif(from_cmd):
            self._load(m, regs, cmd)
        with m.If(from_setup):
            self._start(m, regs, now)
        with m.Elif(from_cmd):
            self._start(m, regs, cmd)
        # the first slot row of a placement about to start: read in every check state while
        # the placer is free (timing: the read enable waits for no check; a row read for a
        # segment that is not placed is not used)
        with m.If(in_setup):
            self._first_read(m, now)
        with m.Elif((state == Step.PLACE) & ~self.handed):
            self._first_read(m, cmd)
        with m.If(state == Step.IDLE):
            m.d.sync += self.handed.eq(0)
        with m.Elif(from_setup | from_cmd):
            m.d.sync += self.handed.eq(1)
        m.d.comb += self.placed.eq(self.free & (cmd.axi | self.handed))
        # the slot goes back once the placement's last word went (a slot is handed over with
        # every placement: only segments with payload are placed)
        active = Signal(name="p_active")
        m.d.comb += [self.release.valid.eq(active & self.free),
                     self.release.payload.eq(regs.slot)]
        with m.If(from_setup | from_cmd):
            m.d.sync += active.eq(1)
        with m.Elif(self.release.valid):
            m.d.sync += active.eq(0)
        if platform == "formal":
            self._formal(m, regs)
        return m

    def _first_read(self, m, c):
        """Read command ``c``'s first slot row if the placer is free."""
        with m.If(self.free):
            m.d.comb += [self.read.en.eq(1), self.read.row.eq(c.first_row[:-1]),
                         self.read.slot.eq(c.slot)]

    def _load(self, m, regs, c):
        """Load the placement's registers that nothing reads while the placer is free from
        command ``c``."""
        m.d.sync += [
            regs.axi.eq(c.axi), regs.addr.eq(c.addr), regs.lo.eq(c.lo), regs.r.eq(c.r),
            regs.rem.eq(c.rem), regs.first_word.eq(1), regs.row.eq(c.first_row + 1),
            regs.conn.eq(c.conn), regs.tagged.eq(c.tagged), regs.slot.eq(c.slot),
            regs.start.eq(c.start), regs.end.eq(c.end), regs.n.eq(c.n),
        ]

    def _start(self, m, regs, c):
        """Start command ``c`` (loaded by :meth:`_load` in the same cycle; its first slot row
        is read then too, :meth:`_first_read`)."""
        with m.If(c.axi):
            m.d.sync += self.written.eq(self.written + c.words)
        # (``c.words`` is not 0, ``lemma_setup_words`` and ``lemma_cmd_words``; the compare
        # keeps ``lemma_free`` inductive on its own)
        m.d.sync += [regs.reads.eq(c.words), regs.words.eq(c.words),
                     regs.free.eq(c.words == 0),
                     regs.rv.eq(1), regs.dv.eq(0), regs.load.eq(1)]

    def _setup(self, m):
        """The set-up sums, registered every cycle; returns the command of the check state
        (zero in the other states)."""
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

        now = Signal(self._command, name="p_now")

        def command(addr, first_row, sums, hl, to_axi):
            lo = addr[:LW] if LW else Const(0, 1)
            s, _ = first_row_of(lo, hl)
            rem, words = sums
            m.d.comb += [
                now.axi.eq(to_axi), now.addr.eq(Cat(Const(0, LW), addr[LW:AW])),
                now.lo.eq(lo), now.r.eq(s[:LW] if LW else 0), now.rem.eq(rem),
                now.first_row.eq(first_row[:RB + 1]), now.words.eq(words),
                now.conn.eq(seg.entry.conn), now.tagged.eq(seg.tagged),
                now.slot.eq(seg.entry.slot),
                now.start.eq(addr[:AW]), now.end.eq(addr[:AW] + n_q), now.n.eq(n_q),
            ]
        with m.Switch(self.state):
            with m.Case(Step.CHECK_TAGGED):
                command(t_addr, t_first_row, t_sums, 14, 1)
            with m.Case(Step.CHECK_OFFSETS):
                command(u_addr, u_first_row, u_sums, 18, qn == 0)
            with m.Case(Step.CHECK_INVALIDATE):
                command(u_addr, u_first_row, u_sums, 18, 1)
        return now

    def _place(self, m, regs):
        """The running placement: one output word per cycle (a row consumed per word, the
        first only loads ``prev``); nothing moves while ``words`` is 0."""
        W = self.width
        LW = exact_log2(W)
        out_ok = Signal()
        consume = Signal()
        move = Signal()
        issue = Signal()
        m.d.comb += [
            out_ok.eq(~regs.axi | self.room),
            # (``~free``: never needed, as ``lemma_idle`` states, but it keeps the proof that
            # only a hand-over starts a placement free of the lemmas that show it)
            consume.eq(regs.dv & (regs.load | out_ok) & ~self.free),
            move.eq(regs.rv & (~regs.dv | consume)),
            issue.eq((regs.reads != 0) & (~regs.rv | move)),
            self.read.en.eq(issue), self.read.row.eq(regs.row), self.read.slot.eq(regs.slot),
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
            aw.addr.eq(regs.addr), aw.conn.eq(regs.conn), aw.tagged.eq(regs.tagged),
            aw.lo.eq(Mux(regs.first_word, regs.lo, 0)),
            aw.hi.eq(Mux(regs.rem >= W, W - 1, regs.rem - 1)),
            w.data.eq(word), w.strb.eq(strb),
        ]
        with m.If(consume):
            m.d.sync += [regs.prev.eq(regs.cur), regs.load.eq(0)]
            with m.If(~regs.load):
                m.d.sync += [regs.addr.eq(regs.addr + W), regs.rem.eq(regs.rem - W),
                             regs.first_word.eq(0), regs.words.eq(regs.words - 1),
                             regs.free.eq(regs.words == 1)]
                with m.If(regs.axi):
                    m.d.comb += self.push.valid.eq(1)
                with m.Else():
                    m.d.comb += [
                        self.control.valid.eq(1), self.control.payload.row.eq(regs.addr[LW:7]),
                        self.control.payload.data.eq(word), self.control.payload.strb.eq(strb),
                    ]
        with m.If(regs.free):
            m.d.sync += [regs.rv.eq(0), regs.dv.eq(0)]

    def _formal(self, m, regs):
        state, seg, cmd = self.state, self.seg, self.cmd
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
        waiting = (state == Step.PLACE) & ~self.handed
        # a placement has words (so the placer is busy from its hand-over to its last word)
        with m.If(self.place_go):
            m.d.comb += Assert(self._now.words != 0, "lemma_setup_words")
        with m.If(waiting):
            m.d.comb += Assert(cmd.words != 0, "lemma_cmd_words")
        with m.If(waiting):
            m.d.comb += [
                Assert((cmd.conn == seg.entry.conn) & (cmd.tagged == seg.tagged)
                       & (cmd.slot == seg.entry.slot), "lemma_cmd_label"),
                Assert(cmd.n == n, "lemma_cmd_n"),
            ]
            with m.If(cmd.axi):
                m.d.comb += Assert(seg.tagged | (self.qn == 0), "lemma_axi_qn")

        def facts(start, end, n, addr, lo, rem, words, first_word):
            return {
                "lemma_end": end == start + n,
                "lemma_n": n != 0,
                "lemma_aligned": addr[:LW] == 0,
                "lemma_first": ~first_word | ((addr + lo) == start),
                "lemma_later": first_word | (words == 0) | (addr > start),
                "lemma_lo": lo == start[:LW],
                "lemma_rem": (words == 0) | ((addr + rem) == end),
                "lemma_words": (words == 0) | ((rem > ((words - 1) << LW)) & (rem <= (words << LW))),
            }
        running = facts(regs.start, regs.end, regs.n, regs.addr, regs.lo, regs.rem, regs.words,
                        regs.first_word)
        # (every placement, to memory or not: the rows in flight, and nothing moves when free)
        m.d.comb += [
            Assert(regs.free == (regs.words == 0), "lemma_free"),
            Assert(regs.reads + regs.rv + regs.dv == regs.words + regs.load, "lemma_reads"),
            Assert(~self.free | ((regs.reads == 0) & ~regs.rv & ~regs.dv & ~regs.load),
                   "lemma_idle"),
        ]
        waiting_facts = facts(cmd.start, cmd.end, cmd.n, cmd.addr, cmd.lo, cmd.rem, cmd.words,
                              Const(1, 1))
        placing = ~self.free & regs.axi
        for group, cond, tagged, suffix in ((running, placing, regs.tagged, ""),
                                            (waiting_facts, waiting & cmd.axi, cmd.tagged, "_cmd")):
            for name, fact in group.items():
                with m.If(cond & tagged):
                    m.d.comb += Assert(fact, f"{name}{suffix}")
                with m.If(cond & ~tagged):
                    m.d.comb += Assert(fact, f"{name}_untagged{suffix}")


class _PlacerRegs:
    """The running placement's registers."""

    def __init__(self, *, width, addr_width, slot_rows, connections, slots):
        LW, RB = exact_log2(width), exact_log2(slot_rows)
        self.axi = Signal(name="p_axi")                     # host memory, else the control buffer
        self.addr = Signal(addr_width, name="p_addr")       # aligned address of the next output word
        self.lo = Signal(max(1, LW), name="p_lo")           # A mod W
        self.rem = Signal(18, name="p_rem")                 # octets from the word's start to the end
        self.first_word = Signal(name="p_first_word")
        self.r = Signal(max(1, LW), name="p_r")             # byte rotation
        self.row = Signal(RB + 1, name="p_row")
        self.reads = Signal(bits_for(slot_rows + 2), name="p_reads")
        self.words = Signal(bits_for(slot_rows + 2), name="p_words")
        # ``words == 0``, kept as a register of its own (timing: the slot buffer's read and
        # the hand-over wait for no compare on the word count)
        self.free = Signal(init=1, name="p_free")
        # slot rows in the two-stage read pipeline: ``rv`` the slot buffer's read port holds
        # a row not yet taken, ``dv`` ``cur`` holds a row not yet consumed. ``cur`` is
        # registered for timing: the block RAM's clock-to-out must not feed the byte rotator
        # and the W queue in the same cycle.
        self.rv = Signal(name="p_rv")
        self.dv = Signal(name="p_dv")
        self.load = Signal(name="p_load")                   # next consumed row only loads ``prev``
        self.cur = Signal(8 * width, name="cur")
        self.prev = Signal(8 * width, name="prev")
        self.conn = Signal(conn_bits(connections), name="p_conn")
        self.tagged = Signal(name="p_tagged")
        self.slot = Signal(max(1, exact_log2(slots)), name="p_slot")
        # for checkers: the placement range and its octets
        self.start = Signal(addr_width, name="p_start")
        self.end = Signal(addr_width + 1, name="p_end")
        self.n = Signal(17, name="p_n")
