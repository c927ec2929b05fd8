"""The start of a segment: its header and the values the emitter and the payload fetch load.
See :class:`SegmentStart`."""

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from rnic.host.spec.regmap import SqOpcode

from ..beat import check_width, conn_bits
from .headers import (OP_READ_RESPONSE, QN_READ_REQUEST, QN_SEND, READ_REQUEST_SEGMENT_LEN, TAGGED_HEADER_LEN,
                      UNTAGGED_HEADER_LEN, octets, padded, tagged_header, untagged_header)
from .layouts import EmitStart, FetchStart, RrEntry, SegmentKind, SegmentPlan, TxContext, WorkRequest
from .terminate import CHECK_TERMINATE_LEN, TerminateHeaders

__all__ = ["SegmentStart"]


def _one_hot_select(*pairs):
    """The OR of ``value`` under ``flag`` over ``(flag, value)`` pairs whose flags are one-hot:
    every register it loads takes an OR of its sources, not a priority chain of the flags."""
    v = 0
    for flag, value in pairs:
        v = v | Mux(flag, value, 0)
    return v


class SegmentStart(wiring.Component):
    """The segment that starts: the header octets of its kind and the start values of the
    emitter and the payload fetch, selected by one-hot flag registers.

    Parameters
    ----------
    width, connections, sq_depth, rrq_depth, ord_depth, addr_width : int
        As :class:`rnic.hdl.ddp_tx.DdpTx`.

    Ports
    -----
    kind : In(SegmentKind)
        One-hot flags of the segment kind, high for the one cycle in which it starts (in
        the sequencer's state that starts it).
    conn, ctx, sq_head, rr_head : In
        The connection, its context (MSNs, octets of the send queue head sent) and the
        queue heads, as the sequencer holds them.
    sq_plan, rr_plan : In(SegmentPlan)
        The plans of the send queue head's and the Read Responder's next segment.
    terminate : In(TerminateHeaders)
        Both kinds of Terminate (:class:`rnic.hdl.ddp_tx.terminate.TerminateBuilder`).
    emit : Out(stream(EmitStart))
        The emitter's start values; ``valid`` while any kind flag is (never waits).
    fetch : Out(stream(FetchStart))
        The payload fetch's start values; ``valid`` for a payload segment (a send queue
        segment or a Read Response segment; never waits).

    Latency, throughput and packet boundaries
    -----------------------------------------
    Combinational: a mux of registers under the one-hot flags (no priority chain in front of
    the wide header register). One start per segment. Segment kinds: an RDMA Write's tagged
    (14) or a Send's untagged (18-octet) header, a Read Response's tagged header (with L on
    the last segment of each message), a Read Request (one 46-octet segment, QN 1, the next
    QN 1 MSN), the two Terminates.
    """

    def __init__(self, *, width, connections, sq_depth, rrq_depth, ord_depth, addr_width):
        check_width(width)
        self.width = width
        self.addr_width = addr_width
        C = connections
        plan = SegmentPlan(width=width, addr_width=addr_width)
        super().__init__({
            "kind": In(SegmentKind()), "conn": In(conn_bits(C)),
            "ctx": In(TxContext(sq_depth=sq_depth, rrq_depth=rrq_depth, ord_depth=ord_depth)),
            "sq_head": In(WorkRequest(connections=C)), "rr_head": In(RrEntry(addr_width=addr_width)),
            "sq_plan": In(plan), "rr_plan": In(plan), "terminate": In(TerminateHeaders(width=width)),
            "emit": Out(stream.Signature(EmitStart(width=width, connections=C), always_ready=True)),
            "fetch": Out(stream.Signature(FetchStart(width=width, addr_width=addr_width), always_ready=True)),
        })

    def _headers(self):
        """(flag, header octets) of every kind with a header built here."""
        k, c, wre, rqe = self.kind, self.ctx, self.sq_head, self.rr_head
        hsq, hrr = self.sq_plan, self.rr_plan
        op = wre.opcode
        inv = (op == SqOpcode.SEND_INV) | (op == SqOpcode.SEND_SE_INV)
        write = tagged_header(hsq.last, op, wre.rstag, hsq.to)
        send = untagged_header(hsq.last, op, Mux(inv, wre.inv_stag, 0), QN_SEND, c.msn0, c.sq_off)
        read_response = tagged_header(hrr.last, OP_READ_RESPONSE, rqe.sink_stag, hrr.to)
        read_request = (untagged_header(1, SqOpcode.RDMA_READ, Const(0, 32), QN_READ_REQUEST, c.msn1,
                                        Const(0, 32))
                        + octets(wre.lstag, 4) + octets(wre.laddr, 8) + octets(wre.length, 4)
                        + octets(wre.rstag, 4) + octets(wre.rto, 8))
        assert len(read_request) == READ_REQUEST_SEGMENT_LEN
        return [(k.write, Cat(*padded(write))), (k.send, Cat(*padded(send))),
                (k.read_response, Cat(*padded(read_response))), (k.read_request, Cat(*padded(read_request))),
                (k.terminate, self.terminate.report), (k.check_terminate, self.terminate.check)]

    def elaborate(self, platform):
        m = Module()
        W, LW, AW = self.width, exact_log2(self.width), self.addr_width
        k, hsq, hrr, term = self.kind, self.sq_plan, self.rr_plan, self.terminate
        e, f = self.emit.payload, self.fetch.payload
        sel = _one_hot_select

        def mask(octets):
            return Const(sum(1 << b for b in range(W) if octets > b), W)

        # the header-only kinds: a Read Request and the Terminates
        rreq, chk = READ_REQUEST_SEGMENT_LEN, CHECK_TERMINATE_LEN
        total = sel((k.sq, hsq.tot), (k.read_response, hrr.tot), (k.read_request, rreq),
                    (k.terminate, term.report_len), (k.check_terminate, chk))
        m.d.comb += [
            self.emit.valid.eq(k.any),
            e.header.eq(sel(*self._headers())),
            e.header_len.eq(sel((k.write, TAGGED_HEADER_LEN), (k.send, UNTAGGED_HEADER_LEN),
                                (k.read_response, TAGGED_HEADER_LEN), (k.read_request, rreq),
                                (k.terminate, term.report_len), (k.check_terminate, chk))),
            e.total.eq(total), e.conn.eq(self.conn),
            e.hmask.eq(sel((k.sq, hsq.hmask), (k.read_response, hrr.hmask), (k.read_request, mask(rreq)),
                           (k.terminate, term.report_hmask), (k.check_terminate, mask(chk)))),
            e.rot.eq(sel((k.sq, hsq.rot), (k.read_response, hrr.rot))),
            e.t.eq(sel((k.sq, hsq.t), (k.read_response, hrr.t))),
            e.lastw.eq(Mux(k.payload, sel((k.sq, hsq.lastw), (k.read_response, hrr.lastw)), -1)),
            e.pre.eq(sel((k.sq, hsq.pre), (k.read_response, hrr.pre))),
            e.need.eq(sel((k.sq, hsq.need), (k.read_response, hrr.need))),
            e.last_beat.eq(sel((k.sq, hsq.last_beat), (k.read_response, hrr.last_beat),
                               (k.read_request, int(rreq <= W)), (k.terminate, term.report_last_beat),
                               (k.check_terminate, int(chk <= W)))),
            e.tmask.eq(sel((k.sq, hsq.tmask), (k.read_response, hrr.tmask), (k.read_request, mask(rreq)),
                           (k.terminate, term.report_hmask), (k.check_terminate, mask(chk)))),
        ]
        # the payload of a send queue or Read Response segment, from its W-aligned address
        m.d.comb += [
            self.fetch.valid.eq(k.payload),
            f.addr.eq(Mux(k.read_response, Cat(Const(0, LW), hrr.addr[LW:AW]), Cat(Const(0, LW), hsq.addr[LW:AW]))),
            f.words.eq(Mux(k.read_response, hrr.words, hsq.words)),
            f.to4k.eq(Mux(k.read_response, hrr.to4k, hsq.to4k)),
        ]
        return m
