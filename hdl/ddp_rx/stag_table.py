"""The STag table: host registrations, read for every tagged segment, Invalidate and Read Request."""

from amaranth.hdl import Assert, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..compare import above
from ..rdma_layouts import StagWrite
from ..synth_hints import no_rw_collision
from .layouts import StagRow
from .sequencer import Step

__all__ = ["StagTable"]


class StagTable(wiring.Component):
    """One row per STag index (block RAM): registrations written by the host, checked by the
    validator, invalidated by a Send with Invalidate.

    Ports
    -----
    state : In(Step)
    request : In(StagWrite), take : In(1)
        A host write, latched when ``take`` (in IDLE); the region's ends (of its TOs and of
        its memory) and its translation are registered in STAG_END_SUM and the row written in
        STAG_WRITE (timing: neither the 64-bit sums nor the request arbiter is in front of
        the block RAM's write port). A region whose memory is outside the bus address space
        (``addr + length > 2**addr_width``) or whose TOs pass ``2**64`` never matches.
    stag : In(32)
        The segment's STag field (header octets 2..5: the tagged STag and the Invalidate
        STag alike); read from the second-to-last HEADER cycle on.
    source_stag : In(32)
        A Read Request's source STag, read in MESSAGE_VERDICT.
    qn : In(2), invalidate : In(1)
        FINISH_UNTAGGED of a QN 0 segment with ``invalidate`` writes the row of ``stag``
        back invalid (the row checked in CHECK_INVALIDATE).
    row : Out(StagRow)
        The row read, registered (timing: the block RAM's clock-to-out must not feed the
        checks in the same cycle): the segment's from DECODE on, the source STag's from
        WAIT_SOURCE_CHECKS on.
    header_last : In(1)
        The last HEADER cycle (used by its formal properties only).

    No bypass is needed: the table is written only in STAG_WRITE and FINISH_UNTAGGED,
    never between the read of a row and its check.

    For checkers: ``memory`` (a checker may add asynchronous read ports), ``latched`` (the
    host write latched in IDLE, until STAG_WRITE). With ``platform == "formal"`` it asserts
    that the row read is the memory's row of ``stag`` in the last HEADER cycle, DECODE and
    CHECK_TAGGED (``lemma_hdr_read``, ``lemma_dec_read``, ``lemma_dec_row``,
    ``lemma_tchk_read``) and that the latched write's sums are right in STAG_WRITE
    (``lemma_stw``).
    """

    def __init__(self, *, stags, connections, addr_width):
        self.addr_width = addr_width
        self._row_l = StagRow(connections=connections, addr_width=addr_width)
        super().__init__({
            "state": In(Step),
            "header_last": In(1),
            "request": In(StagWrite(stags=stags, connections=connections)), "take": In(1),
            "stag": In(32), "source_stag": In(32),
            "qn": In(2), "invalidate": In(1),
            "row": Out(self._row_l),
        })
        # Marked no_rw_collision (rnic.hdl.synth_hints): written in STAG_WRITE and
        # FINISH_UNTAGGED; the rows used are read in the last two HEADER cycles, DECODE,
        # CHECK_QN_MSN and MESSAGE_VERDICT.
        self.memory = no_rw_collision(Memory(shape=self._row_l, depth=stags, init=[]))
        self.latched = Signal(StagWrite(stags=stags, connections=connections))

    def elaborate(self, platform):
        m = Module()
        AW, state = self.addr_width, self.state
        row_l = self._row_l
        m.submodules.memory = self.memory
        wr = self.memory.write_port()
        rd = self.memory.read_port(domain="sync", transparent_for=(wr,))
        # read address: the segment's STag field, or a Read Request's source STag
        index = Signal(len(rd.addr))
        m.d.comb += [rd.en.eq(1), rd.addr.eq(index), wr.en.eq(0), index.eq(self.stag)]
        read_row = row_l(rd.data)
        m.d.sync += self.row.eq(read_row)

        # host writes
        lat = self.latched
        with m.If(self.take):
            m.d.sync += lat.eq(self.request)
        lat_end = Signal(65)            # TO end
        lat_aend = Signal(65)           # memory end
        lat_delta = Signal(AW)          # memory address - TO, mod 2**AW
        m.d.sync += [lat_end.eq(lat.base + lat.length), lat_aend.eq(lat.addr + lat.length),
                     lat_delta.eq(lat.addr[:AW] - lat.base[:AW])]
        new_row = Signal(row_l)
        m.d.comb += [
            new_row.stag.eq(lat.stag), new_row.base.eq(lat.base), new_row.end.eq(lat_end),
            new_row.delta.eq(lat_delta),
            new_row.valid.eq(lat.valid & ~above(lat_aend, 1 << AW) & ~above(lat_end, 1 << 64)),
            new_row.rr.eq(lat.remote_read), new_row.rw.eq(lat.remote_write),
            new_row.ri.eq(lat.remote_inv),
            new_row.conn.eq(lat.conn),
        ]
        # the write port's data and address are chosen by the state only (timing: no check
        # is in front of them; the enable says whether a write happens)
        checked = Signal(row_l)    # the Invalidate STag's row, checked in CHECK_INVALIDATE
        invalid = Signal(row_l)
        m.d.comb += [invalid.eq(checked), invalid.valid.eq(0),
                     wr.addr.eq(self.stag), wr.data.eq(invalid)]
        with m.Switch(state):
            with m.Case(Step.STAG_WRITE):
                m.d.comb += [wr.en.eq(1), wr.addr.eq(lat.index), wr.data.eq(new_row)]
            with m.Case(Step.CHECK_INVALIDATE):
                m.d.sync += checked.eq(self.row)
            with m.Case(Step.FINISH_UNTAGGED):
                with m.If(self.qn == 0):
                    m.d.comb += wr.en.eq(self.invalidate)
            with m.Case(Step.MESSAGE_VERDICT):
                m.d.comb += index.eq(self.source_stag)

        if platform == "formal":
            self._formal(m, read_row, lat_end, lat_aend, lat_delta)
        return m

    def _formal(self, m, read_row, lat_end, lat_aend, lat_delta):
        state, lat = self.state, self.latched
        now = self.memory.read_port(domain="comb")
        m.d.comb += now.addr.eq(self.stag)
        with m.If((state == Step.HEADER) & self.header_last):
            m.d.comb += Assert(read_row.as_value() == now.data.as_value(), "lemma_hdr_read")
        with m.If(state == Step.DECODE):
            m.d.comb += [Assert(read_row.as_value() == now.data.as_value(), "lemma_dec_read"),
                         Assert(self.row.as_value() == now.data.as_value(), "lemma_dec_row")]
        with m.If(state == Step.CHECK_TAGGED):
            m.d.comb += Assert(self.row.as_value() == now.data.as_value(), "lemma_tchk_read")
        with m.If(state == Step.STAG_WRITE):
            AW = self.addr_width
            m.d.comb += Assert((lat_end == lat.base + lat.length) & (lat_aend == lat.addr + lat.length)
                               & (lat_delta == (lat.addr[:AW] - lat.base[:AW])[:AW]), "lemma_stw")
