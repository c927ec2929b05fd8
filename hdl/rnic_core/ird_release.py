"""IRD slot releases (RRQ_CMD.DONE and the Read Responder's): see :class:`IrdRelease`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import conn_bits
from ..rdma_layouts import RrDone
from .registers import register_signature
from .slices import slice_out_of

__all__ = ["IrdRelease"]


class IrdRelease(wiring.Component):
    """Frees IRD slots of the receive path: the Read Responder's releases (``responder``,
    first) and the host's RRQ_CMD.DONE.

    RRQ_CMD.DONE (while ``ready``, RRQ_STATUS.DONE_BUSY 0 and RRQ_DONE_CONN below
    ``connections``; otherwise ignored) latches RRQ_DONE_CONN; RRQ_STATUS.DONE_BUSY is 1
    until it went out on ``o``, which it does in a cycle without a release of the
    responder.

    Ports
    -----
    regs : In(register_signature(...))
        RRQ_CMD.DONE, RRQ_DONE_CONN, RRQ_STATUS.DONE_BUSY.
    ready : In(1)
        The core is ready (STATUS.READY).
    responder : In(stream.Signature(RrDone))
        :class:`~rnic.hdl.ddp_tx.DdpTx` ``rr_done``.
    o : Out(stream.Signature(RrDone))
        To :class:`~rnic.hdl.ddp_rx.DdpRx` ``rr_done``.

    Latency and throughput
    ----------------------
    ``responder`` passes a register slice (one cycle, one release per cycle); a DONE is
    offered from the cycle after its pulse.
    """

    #: The register fields the component uses.
    REGISTERS = ("rrq_cmd.done", "rrq_done_conn", "rrq_status.done_busy")

    def __init__(self, *, connections):
        self.connections = connections
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "ready": In(1),
            "responder": In(stream.Signature(RrDone(connections=connections))),
            "o": Out(stream.Signature(RrDone(connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        r, rd = self.regs, self.o
        rr_done = slice_out_of(m, "dtx_rr_done_slice", wiring.flipped(self.responder))
        rrd_pend = Signal()
        rrd_conn = Signal(conn_bits(self.connections))
        with m.If(r.rrq_cmd.done & self.ready & ~rrd_pend & (r.rrq_done_conn.conn < self.connections)):
            m.d.sync += [rrd_pend.eq(1), rrd_conn.eq(r.rrq_done_conn.conn)]
        with m.Elif(rd.ready & ~rr_done.valid):
            m.d.sync += rrd_pend.eq(0)
        m.d.comb += [rd.valid.eq(rrd_pend | rr_done.valid),
                     rd.payload.conn.eq(Mux(rr_done.valid, rr_done.payload.conn, rrd_conn)),
                     rr_done.ready.eq(rd.ready),
                     r.rrq_status.done_busy.eq(rrd_pend)]
        return m
