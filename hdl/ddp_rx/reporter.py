"""The reporter: the payloads of the completion, Read Request and report outputs."""

from amaranth.hdl import Assert, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..compare import above
from ..rdma_layouts import TERM_BYTES, Completion, Opcode, ReadRequestOut, TermReport
from .contexts import ReadResponseTotals
from .header import SegmentView, big_endian
from .layouts import QN1_CAP, ConnContext, RecvEntry
from .sequencer import Step, in_steps
from .validator import ErrorVerdict

__all__ = ["Reporter"]


class Reporter(wiring.Component):
    """Builds what the processor outputs, in registers (the sequencer does the handshakes).

    Ports
    -----
    state : In(Step)
    seg : In(SegmentView), ctx : In(ConnContext), qn : In(2)
    read_response : In(ReadResponseTotals)
        FINISH_TAGGED: the Read Response completion (offered in COMPLETE_READ_RESPONSE).
    rq_entry : In(RecvEntry)
        DRAIN_LOAD: the receive buffer at the queue's head (its Send completion, offered in
        COMPLETE_SEND once ``drain_go``).
    new_entry : In(RecvEntry)
        FINISH_UNTAGGED: the receive buffer after a QN 0 segment; when the segment ends the
        message of the head buffer, its Send completion (offered in COMPLETE_SEND next).
    drain_go : Out(1)
        The head buffer's message is complete (registered in DRAIN_LOAD, for DRAIN_DECIDE).
    message : In(8 * 64), message_bad : In(1)
        MESSAGE_VERDICT: a Read Request (QN 1) for ``rrq``, or a received Terminate (QN 2,
        unless ``message_bad``) for ``term``.
    src_delta : In(64)
        WAIT_SOURCE_CHECKS: the translation of the Read Request's source STag row (its
        ``delta``): ``rrq.src_addr`` is ``src_to`` + it.
    error : In(ErrorVerdict)
        BUILD_ERROR_REPORT: the error's Terminate, exactly
        :meth:`rnic.host.model.rdmap.Terminate.for_error` (Layer/EType/ErrorCode, M D R,
        the segment length, the DDP header, the Read Request header), built and registered
        (timing: its octets are multiplexed from the header, the message and the error).
    cq : Out(Completion), rrq : Out(ReadRequestOut), term : Out(TermReport)
        The payloads.

    For checkers: with ``platform == "formal"`` it asserts that the report offered in
    REPORT and REPORT_SENT is the segment's connection's (``lemma_trecv_conn``).
    """

    def __init__(self, *, connections, slots, rq_depth):
        C = connections
        super().__init__({
            "state": In(Step),
            "seg": In(SegmentView(slots=slots, connections=C)),
            "ctx": In(ConnContext(rq_depth=rq_depth)), "qn": In(2),
            "read_response": In(ReadResponseTotals()),
            "rq_entry": In(RecvEntry()), "new_entry": In(RecvEntry()), "drain_go": Out(1),
            "message": In(8 * 64), "message_bad": In(1), "src_delta": In(64),
            "error": In(ErrorVerdict()),
            "cq": Out(Completion(connections=C)), "rrq": Out(ReadRequestOut(connections=C)),
            "term": Out(TermReport(connections=C)),
        })

    def _send_completion(self, m, e):
        """The Send completion of receive buffer ``e`` (the head's: its MSN is ``rbase``)."""
        cq = self.cq
        m.d.sync += [cq.conn.eq(self.seg.entry.conn), cq.opcode.eq(e.opcode),
                     cq.msn.eq(self.ctx.rbase), cq.wr_id.eq(e.id), cq.length.eq(e.l_end),
                     cq.solicited.eq((e.opcode == Opcode.SEND_SE)
                                     | (e.opcode == Opcode.SEND_SE_INVALIDATE)),
                     cq.invalidated.eq(e.inval), cq.inval_stag.eq(e.inval_stag),
                     cq.stag.eq(0), cq.to.eq(0)]

    def elaborate(self, platform):
        m = Module()
        state, seg, c = self.state, self.seg, self.ctx
        conn = seg.entry.conn
        mb = [self.message[8 * k:8 * k + 8] for k in range(64)]
        cq, rr, tr = self.cq, self.rrq, self.term
        # a received Terminate's length, copied every cycle (timing: the header register's
        # bits fan out across the processor; a copy next to the 52 compares of the octet
        # mask); ``end`` holds from the cycle after DECODE to the segment's end, so
        # MESSAGE_VERDICT (at least five cycles after DECODE) sees the segment's
        tlen = Signal(7, name="term_len")
        m.d.sync += tlen.eq(seg.end[:7])
        # and the octets within that length, registered a cycle later (timing: the 52
        # compares are not in front of the report register's multiplexer)
        keep = Signal(TERM_BYTES, name="term_keep")
        m.d.sync += keep.eq(Cat(*(above(tlen, k) for k in range(TERM_BYTES))))

        with m.Switch(state):
            with m.Case(Step.FINISH_TAGGED):
                tm = self.read_response
                m.d.sync += [cq.conn.eq(conn), cq.opcode.eq(Opcode.RDMA_READ_RESPONSE), cq.msn.eq(0),
                             cq.wr_id.eq(0), cq.length.eq(tm.length), cq.solicited.eq(0),
                             cq.invalidated.eq(0), cq.inval_stag.eq(0),
                             cq.stag.eq(tm.stag), cq.to.eq(tm.to)]
            with m.Case(Step.FINISH_UNTAGGED):
                self._send_completion(m, self.new_entry)
            with m.Case(Step.DRAIN_LOAD):
                # the entry (block RAM out) only goes into registers here; DRAIN_DECIDE decides
                e = self.rq_entry
                self._send_completion(m, e)
                m.d.sync += self.drain_go.eq((c.count != 0) & e.done)

            with m.Case(Step.MESSAGE_VERDICT):
                with m.If(self.qn == 1):
                    m.d.sync += [
                        rr.conn.eq(conn), rr.msn.eq(c.q1.msn),
                        rr.sink_stag.eq(big_endian(mb[0:4])), rr.sink_to.eq(big_endian(mb[4:12])),
                        rr.size.eq(big_endian(mb[12:16])), rr.src_stag.eq(big_endian(mb[16:20])),
                        rr.src_to.eq(big_endian(mb[20:28])),
                    ]
                with m.Elif(~self.message_bad):
                    m.d.sync += [
                        tr.conn.eq(conn), tr.received.eq(1),
                        tr.layer.eq(mb[0][4:8]), tr.etype.eq(mb[0][0:4]), tr.ecode.eq(mb[1]),
                        tr.tlen.eq(tlen),
                        # the octets beyond the length zeroed here, where it is one more
                        # input of the register's multiplexer, not a stage of its own
                        tr.term.eq(Cat(*(Mux(keep[k], mb[k], 0) for k in range(TERM_BYTES)))),
                    ]
            with m.Case(Step.WAIT_SOURCE_CHECKS):
                m.d.sync += rr.src_addr.eq(rr.src_to + self.src_delta)
            with m.Case(Step.BUILD_ERROR_REPORT):
                self._error_report(m, mb)
        if platform == "formal":
            with m.If(in_steps(state, Step.REPORT, Step.REPORT_SENT)):
                m.d.comb += Assert(tr.conn == conn, "lemma_trecv_conn")
        return m

    def _error_report(self, m, mb):
        seg, err, tr = self.seg, self.error, self.term
        T = seg.tagged
        hb = [seg.header[8 * k:8 * k + 8] for k in range(18)]
        lay = err.code[12:16]
        et = err.code[8:12]
        ec = err.code[0:8]
        emd = err.md
        d_on = emd & err.ed
        r_on = (d_on & err.er & (lay == 0) & ((et == 1) | (et == 2))
                & ~((et == 2) & ((ec == 5) | (ec == 6)))
                & ~T & (seg.opcode == Opcode.RDMA_READ_REQUEST))
        term = Signal(8 * TERM_BYTES, name="term_bytes")
        tb = [term[8 * k:8 * k + 8] for k in range(TERM_BYTES)]
        m.d.comb += [
            tb[0].eq(Cat(et, lay)), tb[1].eq(ec),
            tb[2].eq(Cat(Const(0, 5), r_on, d_on, emd)), tb[3].eq(0),
        ]
        with m.If(emd):
            m.d.comb += [tb[4].eq(seg.entry.len[8:16]), tb[5].eq(seg.entry.len[0:8])]
        with m.If(d_on):
            for k in range(18):
                if k < 14:
                    m.d.comb += tb[6 + k].eq(hb[k])
                else:
                    with m.If(~T):
                        m.d.comb += tb[6 + k].eq(hb[k])
        with m.If(r_on):
            for k in range(QN1_CAP):
                m.d.comb += tb[24 + k].eq(mb[k])
        tlen = Signal(6, name="tlen")
        m.d.comb += tlen.eq(4 + Mux(emd, 2, 0) + Mux(d_on, seg.header_len, 0) + Mux(r_on, 28, 0))
        m.d.sync += [
            tr.conn.eq(seg.entry.conn), tr.received.eq(0), tr.layer.eq(lay),
            tr.etype.eq(et), tr.ecode.eq(ec), tr.tlen.eq(tlen), tr.term.eq(term),
        ]
