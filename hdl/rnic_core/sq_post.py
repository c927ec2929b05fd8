"""Work requests posted through the registers (SQ_*): see :class:`WorkRequestPost`."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..ddp_tx import WorkRequest
from .layouts import BadPost
from .registers import register_signature

__all__ = ["WorkRequestPost"]


class WorkRequestPost(wiring.Component):
    """SQ_* + SQ_CMD.DOORBELL: one work request for the transmit path.

    SQ_CMD.DOORBELL (while ``ready`` and SQ_STATUS.BUSY 0; otherwise ignored) latches
    SQ_WR, SQ_LADDR, SQ_LENGTH, SQ_LSTAG, SQ_RSTAG, SQ_RTO, SQ_INV_STAG and SQ_ID and
    offers them on ``o``; SQ_STATUS.BUSY and FULL are 1 until it was taken (the transmit
    path waits while the connection's send queue is full). A DOORBELL whose SQ_WR.CONN is
    not below ``connections`` goes nowhere near the transmit path: it is offered on
    ``bad`` instead, to complete at once with BAD_REQUEST (signaled or not: an error).

    Ports
    -----
    regs : In(register_signature(...))
        SQ_CMD, SQ_WR, SQ_LADDR_LO/HI, SQ_LENGTH, SQ_LSTAG, SQ_RSTAG, SQ_RTO_LO/HI,
        SQ_INV_STAG, SQ_ID, SQ_STATUS.
    ready : In(1)
        The core is ready (STATUS.READY).
    o : Out(stream.Signature(WorkRequest))
        To :class:`~rnic.hdl.ddp_tx.DdpTx` ``wr``.
    bad : Out(stream.Signature(BadPost))
        To :class:`~rnic.hdl.rnic_core.completion_queue.CompletionQueue` ``bad``.

    Latency: ``o`` or ``bad`` is valid from the cycle after the DOORBELL pulse. One request
    at a time.
    """

    #: The register fields the component uses.
    REGISTERS = ("sq_cmd", "sq_wr", "sq_laddr_lo", "sq_laddr_hi", "sq_length", "sq_lstag", "sq_rstag",
                 "sq_rto_lo", "sq_rto_hi", "sq_inv_stag", "sq_id", "sq_status")

    def __init__(self, *, connections):
        self.connections = connections
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "ready": In(1),
            "o": Out(stream.Signature(WorkRequest(connections=connections))),
            "bad": Out(stream.Signature(BadPost())),
        })

    def elaborate(self, platform):
        m = Module()
        r, wr, bad = self.regs, self.o, self.bad
        sq_pend = Signal()
        bad_pend = Signal()
        ring = r.sq_cmd.doorbell & self.ready & ~sq_pend & ~bad_pend
        with m.If(ring & (r.sq_wr.conn >= self.connections)):
            b = bad.payload
            m.d.sync += [bad_pend.eq(1), b.conn.eq(r.sq_wr.conn), b.opcode.eq(r.sq_wr.opcode),
                         b.wr_id.eq(r.sq_id.wr_id)]
        with m.Elif(bad.ready):
            m.d.sync += bad_pend.eq(0)
        with m.If(ring & (r.sq_wr.conn < self.connections)):
            q = wr.payload
            m.d.sync += [
                sq_pend.eq(1), q.opcode.eq(r.sq_wr.opcode), q.signaled.eq(r.sq_wr.signaled),
                q.conn.eq(r.sq_wr.conn), q.laddr.eq(Cat(r.sq_laddr_lo.addr, r.sq_laddr_hi.addr)),
                q.length.eq(r.sq_length.length), q.lstag.eq(r.sq_lstag.stag),
                q.rstag.eq(r.sq_rstag.stag), q.rto.eq(Cat(r.sq_rto_lo.to, r.sq_rto_hi.to)),
                q.inv_stag.eq(r.sq_inv_stag.stag), q.wr_id.eq(r.sq_id.wr_id),
            ]
        with m.Elif(wr.ready):
            m.d.sync += sq_pend.eq(0)
        busy = sq_pend | bad_pend
        m.d.comb += [wr.valid.eq(sq_pend), bad.valid.eq(bad_pend),
                     r.sq_status.busy.eq(busy), r.sq_status.full.eq(busy)]
        return m
