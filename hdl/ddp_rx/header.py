"""The header reader: a segment's entry and header rows, decoded into a :class:`SegmentView`."""

from amaranth.hdl import Assert, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..rdma_layouts import Opcode
from .layouts import UlpduEntry
from .sequencer import Step, in_steps

__all__ = ["SegmentView", "HeaderRead", "HeaderReader", "header_rows", "header_slot_rows",
           "header_cycles", "big_endian"]


def header_rows(width):
    """Slot rows holding the 18-octet untagged header."""
    return -(-18 // width)


def header_slot_rows(width):
    """Rows per slot of the ingest's copy of the header rows (:func:`header_rows` rounded
    up to a power of 2)."""
    return 1 << (header_rows(width) - 1).bit_length()


def header_cycles(width):
    """Cycles of HEADER: at least two more than the rows holding octets 0..5 (the STag
    field), so that the STag is in the header register in the second-to-last HEADER cycle
    (the STag table's read address: the row is registered in DECODE, for CHECK_TAGGED's
    verdict), at least one more than the rows holding octets 0..13 and than the cycle that
    takes the context (``cycle == 1``), so that DECODE's checks can be worked out from
    registers in the last HEADER cycle (one cycle more than the rows only at W >= 16), and
    at least three, so that the checks on the entry and octets 0..1 (in place from the
    second HEADER cycle on) and their priority are registered one after the other before
    DECODE."""
    return max(header_rows(width), -(-6 // width) + 2, -(-14 // width) + 1, 3)


class SegmentView(data.StructLayout):
    """The segment being processed, as the header reader holds it.

    ``entry``: its :class:`UlpduEntry`; ``header``: octets 0..17 of the ULPDU (octet 0 in
    bits 0..7; octets 14..17 are payload for a tagged segment); ``tagged``/``last``: the T
    and L bits, ``ddp_version``/``rdmap_version``/``opcode`` the fields of octets 0..1;
    ``stag`` (tagged STag, or the Invalidate STag), ``to`` (tagged); ``qn``, ``msn``, ``mo``
    (untagged); ``header_len`` 14 or 18. Registered: ``length`` the payload octets
    (``entry.len - header_len``, from the third HEADER cycle on), ``length_nz`` (it is not
    0), ``end`` (``mo + length``, from the cycle after DECODE on).
    """

    def __init__(self, *, slots, connections):
        super().__init__({
            "entry": UlpduEntry(slots=slots, connections=connections),
            "header": unsigned(8 * 18),
            "tagged": unsigned(1), "last": unsigned(1), "ddp_version": unsigned(2),
            "rdmap_version": unsigned(2), "opcode": Opcode,
            "stag": unsigned(32), "to": unsigned(64),
            "qn": unsigned(32), "msn": unsigned(32), "mo": unsigned(32),
            "header_len": unsigned(5), "length": unsigned(17), "length_nz": unsigned(1),
            "end": unsigned(33),
        })


class HeaderRead(data.StructLayout):
    """A read of the slot buffer: ``en``, row ``row`` of slot ``slot``."""

    def __init__(self, *, slots, rows):
        super().__init__({"en": unsigned(1), "row": unsigned(exact_log2(rows)),
                          "slot": unsigned(max(1, exact_log2(slots)))})


def big_endian(octets):
    """The big-endian value of a list of 8-bit values (the first is the most significant)."""
    return Cat(*reversed(octets))


class HeaderReader(wiring.Component):
    """Takes a segment's queue entry in IDLE and its header rows in HEADER.

    Ports
    -----
    state : In(Step)
    head : In(UlpduEntry)
        The queue's head entry (taken in IDLE whether or not the sequencer takes it:
        nothing reads the segment outside one).
    slot_read : Out(HeaderRead)
        The rows it reads (from the ingest's copy of the slots' header rows, so that the
        placer's reads of the slot buffer go on meanwhile): the first row of the head
        entry's slot in IDLE, row ``cycle + 1`` in HEADER (rows beyond the header's are
        unused); ``en`` and ``row`` are 0 in the other states.
    slot_data : In(8 * width)
        The header copy's read data (row read in the previous cycle).
    seg : Out(SegmentView)
        The segment, stable from the cycle after IDLE to the end of the segment (header
        octets from the cycle after their HEADER cycle on).
    cycle : Out(range)
        The HEADER cycle (0 in the first).
    last_cycle : Out(1)
        In HEADER: its last cycle (:func:`header_cycles` of them).

    Latency: the header is in ``seg`` at the end of HEADER, which lasts
    ``header_cycles(width)`` cycles (5 at W = 4, 3 at W = 8, 16 and 32).

    For checkers: with ``platform == "formal"`` it asserts that HEADER's cycle count stays
    below the number of its cycles (``lemma_hk``) and that the registered ``length``, ``length_nz`` and
    ``end`` hold their operands' values in the states that use them (``lemma_n_q``,
    ``lemma_n_nz``, ``lemma_endv``).
    """

    def __init__(self, *, width, connections, slots, slot_bytes):
        self.width = width
        self.rows = header_rows(width)
        #: cycles of HEADER
        self.cycles = header_cycles(width)
        self._slot_rows = slot_bytes // width
        super().__init__({
            "state": In(Step),
            "head": In(UlpduEntry(slots=slots, connections=connections)),
            "slot_read": Out(HeaderRead(slots=slots, rows=self._slot_rows)),
            "slot_data": In(8 * width),
            "seg": Out(SegmentView(slots=slots, connections=connections)),
            "cycle": Out(range(self.rows + 2)),
            "last_cycle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, HR = self.width, self.rows
        state, seg, hk = self.state, self.seg, self.cycle
        ent = Signal(seg.entry.shape())
        hdr = Signal(8 * HR * W)
        hb = [hdr[8 * k:8 * k + 8] for k in range(HR * W)]
        T = hb[0][7]
        m.d.comb += [
            seg.entry.eq(ent), seg.header.eq(hdr[:8 * 18]),
            seg.tagged.eq(T), seg.last.eq(hb[0][6]), seg.ddp_version.eq(hb[0][0:2]),
            seg.rdmap_version.eq(hb[1][6:8]), seg.opcode.eq(hb[1][0:4]),
            seg.stag.eq(big_endian(hb[2:6])), seg.to.eq(big_endian(hb[6:14])),
            seg.qn.eq(big_endian(hb[6:10])), seg.msn.eq(big_endian(hb[10:14])),
            seg.mo.eq(big_endian(hb[14:18])),
            seg.header_len.eq(Mux(T, 14, 18)),
            self.last_cycle.eq(hk == self.cycles - 1),
        ]
        # ``length``/``length_nz``/``end`` registered for timing (the subtraction, the zero
        # test and the MO addition stay out of the checks, the placer set-up and the
        # next-state logic): the entry and octet 0 (T, hence the header length) are in place
        # from the second HEADER cycle on, so ``length == entry.len - header_len`` and
        # ``length_nz == (length != 0)`` from the third HEADER cycle to the end of the
        # segment; ``end == mo + length`` from the cycle after DECODE on (the header's last
        # row is in place in DECODE).
        n = Signal(17)
        n_q = Signal(17)
        n_nz = Signal()
        endv = Signal(33)
        m.d.comb += [n.eq(ent.len - seg.header_len),
                     seg.length.eq(n_q), seg.length_nz.eq(n_nz), seg.end.eq(endv)]
        m.d.sync += [n_q.eq(n), n_nz.eq(ent.len != seg.header_len), endv.eq(seg.mo + n_q)]

        read = self.slot_read
        m.d.comb += read.slot.eq(ent.slot)
        with m.Switch(state):
            with m.Case(Step.IDLE):
                # the head of the queue is loaded whether or not it is taken, and its first
                # slot row read (timing: only the sequencer's next state waits for the arbiter)
                m.d.sync += [ent.eq(self.head), hk.eq(0)]
                m.d.comb += [read.en.eq(1), read.slot.eq(self.head.slot)]
            with m.Case(Step.HEADER):
                # data of row ``cycle`` is on the read port
                for k in range(HR):
                    with m.If(hk == k):
                        m.d.sync += hdr[8 * W * k:8 * W * (k + 1)].eq(self.slot_data)
                m.d.comb += [read.en.eq(1), read.row.eq(hk + 1)]
                m.d.sync += hk.eq(hk + 1)
        if platform == "formal":
            self._formal(m, n)
        return m

    def _formal(self, m, n):
        state, seg, hk = self.state, self.seg, self.cycle
        last = (state == Step.HEADER) & self.last_cycle
        with m.If(state == Step.HEADER):
            m.d.comb += Assert(hk < self.cycles, "lemma_hk")
        with m.If(last | in_steps(state, Step.DECODE, Step.LOAD_RECV_BUFFER, Step.CHECK_QN_MSN,
                             Step.CHECK_OFFSETS, Step.CHECK_INVALIDATE, Step.CHECK_TAGGED)):
            m.d.comb += Assert(seg.length == n, "lemma_n_q")
        with m.If(last | in_steps(state, Step.DECODE, Step.LOAD_RECV_BUFFER, Step.CHECK_QN_MSN,
                             Step.CHECK_OFFSETS, Step.CHECK_INVALIDATE, Step.CHECK_TAGGED,
                             Step.PLACE, Step.FINISH_TAGGED, Step.FINISH_UNTAGGED)):
            m.d.comb += Assert(seg.length_nz == (n != 0), "lemma_n_nz")
        with m.If(in_steps(state, Step.CHECK_QN_MSN, Step.CHECK_OFFSETS)):
            m.d.comb += Assert(seg.end == seg.mo + n, "lemma_endv")

