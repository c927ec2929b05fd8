"""The segment processor: complete ULPDUs in, placement writes, completions and reports out."""

from amaranth.hdl import Cat, Module, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import ReadPort
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..axi import AXI4WriteSignature
from ..rdma_layouts import (
    Completion, ConnCtl, ReadRequestOut, RqPost, RrDone, StagWrite, TermReport,
)
from .axi_writer import AxiWriter, WriteAddress
from .completion_gate import CompletionGate
from .contexts import ContextTable
from .control_buffer import ControlBuffer
from .header import HeaderReader, big_endian, header_slot_rows
from .layouts import UlpduEntry
from .placer import Placer
from .receive_queue import ReceiveQueue
from .reporter import Reporter
from .sequencer import Sequencer, Step
from .stag_table import StagTable
from .validator import Validator

__all__ = ["SegmentProcessor"]


class SegmentProcessor(wiring.Component):
    """One segment at a time, in the order of the ingest's queue: reads the header rows of
    the slot and the connection context, validates in the order of
    :class:`rnic.host.model.sink.Sink`, then streams the payload from the slot into
    full-width AXI writes with byte strobes (or, for QN 1 / QN 2, into the connection's
    control buffer); on the L bit it completes (Sends in MSN order, after every write of
    the message has its B response), queues a Read Request or reports a Terminate. The
    first error is reported once every write already issued has left on AW, and stops the
    connection (later segments dropped) until ``ctl``. Between segments it serves the host
    requests (STag table writes and posts only while no write is in flight). A segment's
    placement to host memory runs in the placer while the sequencer finishes it and goes
    on with the next segments' headers and checks (up to the next placement).

    Parameters and the ports shared with :class:`rnic.hdl.ddp_rx.DdpRx`: see there. Its own:

    ulpdus : In(stream(UlpduEntry))
        Complete ULPDUs (the ingest's queue).
    slot_rd : In(ReadPort.Signature)
        The slot buffers' synchronous read port (the placer's).
    hdr_rd : In(ReadPort.Signature)
        The synchronous read port of the ingest's copy of the slots' header rows (the
        header reader's).
    release, release_placed : Out(stream(slot), always ready)
        A slot the processor is done with: in DONE, unless the segment was handed to the
        placer; from the placer once the placement's last word went.
    aw_side : Out(WriteAddress)
        The AW entry on ``m_axi``, with side band for checkers (connection, tagged, first
        and last strobed lanes).

    Its parts, steered by the :class:`~rnic.hdl.ddp_rx.sequencer.Sequencer`'s state: the
    :class:`~rnic.hdl.ddp_rx.header.HeaderReader`, the
    :class:`~rnic.hdl.ddp_rx.validator.Validator`, the tables
    (:class:`~rnic.hdl.ddp_rx.stag_table.StagTable`,
    :class:`~rnic.hdl.ddp_rx.receive_queue.ReceiveQueue`,
    :class:`~rnic.hdl.ddp_rx.contexts.ContextTable`,
    :class:`~rnic.hdl.ddp_rx.control_buffer.ControlBuffer`), the
    :class:`~rnic.hdl.ddp_rx.placer.Placer` with the
    :class:`~rnic.hdl.ddp_rx.axi_writer.AxiWriter`, the
    :class:`~rnic.hdl.ddp_rx.reporter.Reporter` and the
    :class:`~rnic.hdl.ddp_rx.completion_gate.CompletionGate`. They are public attributes
    (for checkers: their documented hooks and formal properties).
    """

    def __init__(self, *, width, connections, stags, slots, slot_bytes, rq_depth, addr_width):
        C = connections
        rows = slot_bytes // width
        super().__init__({
            "ulpdus": In(stream.Signature(UlpduEntry(slots=slots, connections=C))),
            "slot_rd": In(ReadPort.Signature(addr_width=exact_log2(slots * rows), shape=8 * width)),
            "hdr_rd": In(ReadPort.Signature(
                addr_width=exact_log2(slots * header_slot_rows(width)), shape=8 * width)),
            "release": Out(stream.Signature(unsigned(max(1, exact_log2(slots))), always_ready=True)),
            "release_placed": Out(stream.Signature(unsigned(max(1, exact_log2(slots))),
                                                   always_ready=True)),
            "stag_w": In(stream.Signature(StagWrite(stags=stags, connections=C))),
            "rq_post": In(stream.Signature(RqPost(connections=C))),
            "ctl": In(stream.Signature(ConnCtl(connections=C))),
            "rr_done": In(stream.Signature(RrDone(connections=C))),
            "cq": Out(stream.Signature(Completion(connections=C))),
            "rrq": Out(stream.Signature(ReadRequestOut(connections=C))),
            "term": Out(stream.Signature(TermReport(connections=C))),
            "m_axi": Out(AXI4WriteSignature(addr_width=addr_width, data_width=8 * width)),
            "aw_side": Out(WriteAddress(width=width, connections=C, addr_width=addr_width)),
            "rq_overflow": Out(1),
        })
        common = dict(connections=C, slots=slots)
        self.sequencer = Sequencer()
        self.header = HeaderReader(width=width, slot_bytes=slot_bytes, **common)
        self.validator = Validator(slot_bytes=slot_bytes, rq_depth=rq_depth,
                                   addr_width=addr_width, **common)
        self.stag_table = StagTable(stags=stags, connections=C, addr_width=addr_width)
        self.receive_queue = ReceiveQueue(connections=C, rq_depth=rq_depth)
        self.contexts = ContextTable(width=width, rq_depth=rq_depth, addr_width=addr_width,
                                     **common)
        self.control_buffer = ControlBuffer(width=width, connections=C)
        self.placer = Placer(width=width, slot_bytes=slot_bytes, addr_width=addr_width, **common)
        self.axi_writer = AxiWriter(width=width, connections=C, addr_width=addr_width)
        self.reporter = Reporter(rq_depth=rq_depth, **common)
        self.completion_gate = CompletionGate(connections=C)

    def elaborate(self, platform):
        m = Module()
        for name in ("sequencer", "header", "validator", "stag_table", "receive_queue",
                     "contexts", "control_buffer", "placer", "axi_writer", "reporter",
                     "completion_gate"):
            m.submodules[name] = part = getattr(self, name)
            if name not in ("sequencer", "axi_writer", "completion_gate"):
                m.d.comb += part.state.eq(self.sequencer.state)
        self._connect_sequencer(m)
        self._connect_segment(m)
        self._connect_tables(m)
        self._connect_outputs(m)
        return m

    def _connect_sequencer(self, m):
        seq, hdr, val = self.sequencer, self.header, self.validator
        seg = hdr.seg
        m.d.comb += [
            seq.ctl_valid.eq(self.ctl.valid), self.ctl.ready.eq(seq.take.ctl),
            seq.stag_w_valid.eq(self.stag_w.valid), self.stag_w.ready.eq(seq.take.stag_w),
            seq.rq_post_valid.eq(self.rq_post.valid), self.rq_post.ready.eq(seq.take.rq_post),
            seq.rr_done_valid.eq(self.rr_done.valid), self.rr_done.ready.eq(seq.take.rr_done),
            seq.segment_valid.eq(self.ulpdus.valid), self.ulpdus.ready.eq(seq.take.segment),
            # (the placer's words not yet pushed are writes in flight too)
            seq.writes_idle.eq(self.axi_writer.idle & self.placer.free),
            # (and a report never overtakes a completion)
            seq.aw_quiet.eq(self.axi_writer.aw_quiet & self.placer.free
                            & self.completion_gate.empty),
            self.placer.place_go.eq(seq.place_go), seq.place_free.eq(self.placer.free),
            self.completion_gate.i.valid.eq(seq.cq_valid),
            seq.cq_ready.eq(self.completion_gate.i.ready),
            self.rrq.valid.eq(seq.rrq_valid), seq.rrq_ready.eq(self.rrq.ready),
            self.term.valid.eq(seq.term_valid), seq.term_ready.eq(self.term.ready),
            seq.tagged.eq(seg.tagged), seq.last.eq(seg.last), seq.opcode.eq(seg.opcode),
            seq.length_nz.eq(seg.length_nz), seq.qn.eq(val.qn),
            seq.clear_last.eq(self.control_buffer.clear_last),
            seq.header_last.eq(hdr.last_cycle),
            seq.decode.eq(val.decode), seq.msn_in_range.eq(val.msn_in_range),
            seq.qn_msn_mismatch.eq(val.qn_msn_mismatch), seq.offsets_bad.eq(val.offsets_bad),
            seq.offsets_invalidate.eq(val.offsets_invalidate),
            seq.invalidate_bad.eq(val.invalidate_bad), seq.tagged_bad.eq(val.tagged_bad),
            seq.placed.eq(self.placer.placed), seq.drain_go.eq(self.reporter.drain_go),
            seq.read_back_last.eq(self.control_buffer.read_last),
            seq.message_bad.eq(val.message_bad), seq.read_size_nz.eq(val.read_size_nz),
            seq.source_bad.eq(val.source_bad),
            seq.at_head.eq(val.at_head), seq.later_done.eq(self.contexts.ctx.later_done),
        ]

    def _connect_segment(self, m):
        """The header reader (on the header rows' port), the validator and the placer (on
        the slot buffer's port)."""
        hdr, val, plc = self.header, self.validator, self.placer
        seg = hdr.seg
        m.d.comb += [
            hdr.head.eq(self.ulpdus.payload), hdr.slot_data.eq(self.hdr_rd.data),
            val.header_last.eq(hdr.last_cycle), val.seg.eq(seg), val.ctx.eq(self.contexts.ctx),
            val.row.eq(self.stag_table.row), val.rq_entry.eq(self.receive_queue.entry),
            val.message.eq(self.control_buffer.message),
            plc.seg.eq(seg), plc.qn.eq(val.qn), plc.buffer_addr.eq(val.recv_buffer.addr),
            plc.delta.eq(self.stag_table.row.delta),
            plc.slot_data.eq(self.slot_rd.data), plc.room.eq(self.axi_writer.room),
        ]
        HB = exact_log2(header_slot_rows(self.header.width))
        m.d.comb += [
            self.hdr_rd.en.eq(hdr.slot_read.en),
            self.hdr_rd.addr.eq(Cat(hdr.slot_read.row[:HB], hdr.slot_read.slot)),
            self.slot_rd.en.eq(plc.read.en),
            self.slot_rd.addr.eq(Cat(plc.read.row, plc.read.slot)),
        ]

    def _connect_tables(self, m):
        seq, seg, val = self.sequencer, self.header.seg, self.validator
        st, rq, cx, cb = self.stag_table, self.receive_queue, self.contexts, self.control_buffer
        mb = [self.control_buffer.message[8 * k:8 * k + 8] for k in range(64)]
        cq_done = self.completion_gate.i.valid & self.completion_gate.i.ready
        rrq_done = self.rrq.valid & self.rrq.ready
        m.d.comb += [
            st.header_last.eq(self.header.last_cycle),
            st.request.eq(self.stag_w.payload), st.take.eq(seq.take.stag_w),
            st.stag.eq(seg.stag), st.source_stag.eq(big_endian(mb[16:20])),
            st.qn.eq(val.qn), st.invalidate.eq(val.invalidate),
            rq.request.eq(cx.request.post), rq.post_ok.eq(cx.post_ok),
            rq.post_index.eq(cx.post_index), rq.read_index.eq(val.rq_read),
            rq.conn.eq(seg.entry.conn), rq.head.eq(cx.ctx.head),
            rq.index.eq(val.rq_index), rq.new_entry.eq(val.new_entry), rq.qn.eq(val.qn),
            cx.take.eq(seq.take), cx.ctl.eq(self.ctl.payload), cx.rq_post.eq(self.rq_post.payload),
            cx.rr_done.eq(self.rr_done.payload), cx.head_conn.eq(self.ulpdus.payload.conn),
            cx.header_cycle.eq(self.header.cycle), cx.seg.eq(seg),
            cx.qn.eq(val.qn), cx.new_queue.eq(val.new_queue), cx.at_head.eq(val.at_head),
            cx.cq_done.eq(cq_done), cx.rrq_done.eq(rrq_done),
            cx.term_done.eq(self.term.valid & self.term.ready),
            cb.conn.eq(seg.entry.conn), cb.request_conn.eq(cx.request.post.conn),
            cb.qn.eq(val.qn), cb.rrq_done.eq(rrq_done), cb.last.eq(seg.last),
            self.rq_overflow.eq(cx.rq_overflow),
        ]

    def _connect_outputs(self, m):
        rep, aw = self.reporter, self.axi_writer
        m.d.comb += [
            rep.seg.eq(self.header.seg), rep.ctx.eq(self.contexts.ctx), rep.qn.eq(self.validator.qn),
            rep.read_response.eq(self.contexts.read_response),
            rep.rq_entry.eq(self.receive_queue.entry), rep.new_entry.eq(self.validator.new_entry),
            rep.message.eq(self.control_buffer.message),
            rep.message_bad.eq(self.validator.message_bad), rep.error.eq(self.validator.error),
            rep.src_delta.eq(self.stag_table.row.delta),
            self.completion_gate.i.payload.eq(rep.cq),
            self.completion_gate.written.eq(self.placer.written),
            self.completion_gate.acked.eq(aw.acked),
            self.rrq.payload.eq(rep.rrq), self.term.payload.eq(rep.term),
            self.aw_side.eq(aw.aw_side),
            self.release.valid.eq((self.sequencer.state == Step.DONE)
                                  & self.header.seg.entry.has_slot & ~self.placer.handed),
            self.release.payload.eq(self.header.seg.entry.slot),
        ]
        wiring.connect(m, self.placer.release, wiring.flipped(self.release_placed))
        wiring.connect(m, self.placer.push, aw.push)
        wiring.connect(m, self.placer.control, self.control_buffer.place)
        wiring.connect(m, aw.m_axi, wiring.flipped(self.m_axi))
        wiring.connect(m, self.completion_gate.o, wiring.flipped(self.cq))
