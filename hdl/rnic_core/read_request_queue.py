"""Inbound RDMA Read Requests: the RRQ_* queue or the Read Responder (see :class:`ReadRequestQueue`)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..rdma_layouts import ReadRequestOut
from ..synth_hints import SyncFIFOBuffered
from .registers import register_signature
from .slices import slice_out_of

__all__ = ["ReadRequestQueue"]


class ReadRequestQueue(wiring.Component):
    """Inbound RDMA Read Requests of the receive path go to the transmit path's Read
    Responder (``responder``) while ``host_reads`` is 0, else into the queue the host
    reads through RRQ_* (``depth`` entries; RRQ_CMD.POP drops the head). Either one full
    back-pressures the receive path.

    Ports
    -----
    regs : In(register_signature(...))
        RRQ_CMD.POP and the views RRQ_STATUS.VALID/CONN, RRQ_MSN, RRQ_SINK_STAG,
        RRQ_SINK_TO_LO/HI, RRQ_SIZE, RRQ_SRC_STAG, RRQ_SRC_TO_LO/HI.
    i : In(stream.Signature(ReadRequestOut))
        :class:`~rnic.hdl.ddp_rx.DdpRx` ``rrq``.
    responder : Out(stream.Signature(ReadRequestOut))
        To :class:`~rnic.hdl.ddp_tx.DdpTx` ``rrq``.
    host_reads : In(1)
        DP_CTRL.HOST_READS.

    Latency and throughput
    ----------------------
    ``i`` passes a half-rate register slice (one cycle, one request every two cycles: a
    request is wide and takes the receive path several cycles per segment). The queue is in
    distributed RAM (see :class:`~rnic.hdl.synth_hints.SyncFIFOBuffered`). The
    views are registers, one cycle behind the queue (see
    :class:`~rnic.hdl.rnic_core.completion_queue.CompletionQueue`).
    """

    #: The register fields the component uses.
    REGISTERS = ("rrq_cmd.pop", "rrq_status.valid", "rrq_status.conn", "rrq_msn", "rrq_sink_stag",
                 "rrq_sink_to_lo", "rrq_sink_to_hi", "rrq_size", "rrq_src_stag", "rrq_src_to_lo",
                 "rrq_src_to_hi")

    def __init__(self, *, connections, depth):
        self.connections = connections
        self.depth = depth
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "i": In(stream.Signature(ReadRequestOut(connections=connections))),
            "responder": Out(stream.Signature(ReadRequestOut(connections=connections))),
            "host_reads": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        r, host_reads, resp = self.regs, self.host_reads, self.responder
        rrq = slice_out_of(m, "ddp_rrq_slice", wiring.flipped(self.i), full_rate=False)
        rr_l = ReadRequestOut(connections=self.connections)
        m.submodules.rrq_fifo = rrf = SyncFIFOBuffered(width=rr_l.size, depth=self.depth)
        m.d.comb += [
            rrf.w_data.eq(rrq.payload), rrf.w_en.eq(rrq.valid & host_reads),
            resp.payload.eq(rrq.payload), resp.valid.eq(rrq.valid & ~host_reads),
            rrq.ready.eq(Mux(host_reads, rrf.w_rdy, resp.ready)),
        ]
        rr = Signal(rr_l)
        m.d.comb += [rr.eq(Mux(rrf.r_rdy, rrf.r_data, 0)), rrf.r_en.eq(r.rrq_cmd.pop)]
        m.d.sync += [
            r.rrq_status.valid.eq(rrf.r_rdy), r.rrq_status.conn.eq(rr.conn),
            r.rrq_msn.msn.eq(rr.msn), r.rrq_sink_stag.stag.eq(rr.sink_stag),
            r.rrq_sink_to_lo.to.eq(rr.sink_to[:32]), r.rrq_sink_to_hi.to.eq(rr.sink_to[32:]),
            r.rrq_size.size.eq(rr.size), r.rrq_src_stag.stag.eq(rr.src_stag),
            r.rrq_src_to_lo.to.eq(rr.src_to[:32]), r.rrq_src_to_hi.to.eq(rr.src_to[32:]),
        ]
        return m
