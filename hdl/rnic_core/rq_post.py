"""Receive buffers posted through the registers (RQ_*): see :class:`ReceiveBufferPost`."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..rdma_layouts import RqPost
from .registers import register_signature

__all__ = ["ReceiveBufferPost"]


class ReceiveBufferPost(wiring.Component):
    """RQ_* + RQ_CMD.POST: one receive buffer for the receive path.

    RQ_CMD.POST (while ``ready``, RQ_STATUS.BUSY 0 and RQ_CONN below ``connections``;
    otherwise ignored) latches RQ_CONN, RQ_ADDR, RQ_LENGTH and RQ_ID and offers them on
    ``o``; RQ_STATUS.BUSY is 1 until it was taken. ``overflow`` (the receive path dropped
    a post: the connection's queue was full) sets RQ_STATUS.OVERFLOW; RQ_STATUS.FULL is 0.

    Ports
    -----
    regs : In(register_signature(...))
        RQ_CMD, RQ_CONN, RQ_ADDR_LO/HI, RQ_LENGTH, RQ_ID, RQ_STATUS.
    ready : In(1)
        The core is ready (STATUS.READY).
    o : Out(stream.Signature(RqPost))
        To :class:`~rnic.hdl.ddp_rx.DdpRx` ``rq_post``.
    overflow : In(1)
        :class:`~rnic.hdl.ddp_rx.DdpRx` ``rq_overflow``.

    Latency: ``o`` is valid from the cycle after the POST pulse. One post at a time.
    """

    #: The register fields the component uses.
    REGISTERS = ("rq_cmd", "rq_conn", "rq_addr_lo", "rq_addr_hi", "rq_length", "rq_id", "rq_status")

    def __init__(self, *, connections):
        self.connections = connections
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "ready": In(1),
            "o": Out(stream.Signature(RqPost(connections=connections))),
            "overflow": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        r, rp = self.regs, self.o
        rq_pend = Signal()
        with m.If(r.rq_cmd.post & self.ready & ~rq_pend & (r.rq_conn.conn < self.connections)):
            m.d.sync += [
                rq_pend.eq(1), rp.payload.conn.eq(r.rq_conn.conn),
                rp.payload.addr.eq(Cat(r.rq_addr_lo.addr, r.rq_addr_hi.addr)),
                rp.payload.length.eq(r.rq_length.length), rp.payload.id.eq(r.rq_id.wr_id),
            ]
        with m.Elif(rp.ready):
            m.d.sync += rq_pend.eq(0)
        m.d.comb += [rp.valid.eq(rq_pend), r.rq_status.busy.eq(rq_pend),
                     r.rq_status.full.eq(0), r.rq_status.overflow_set.eq(self.overflow)]
        return m
