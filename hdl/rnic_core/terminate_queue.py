"""The receive path's reports: the TERM_* queue, the transmit path, the connection state
(see :class:`TerminateQueue`)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..rdma_layouts import TERM_BYTES, TermReport
from ..synth_hints import SyncFIFOBuffered
from .layouts import ConnError, ConnReport
from .registers import register_signature
from .slices import slice_out_of

__all__ = ["TerminateQueue"]


class TerminateQueue(wiring.Component):
    """Every report of the receive path (an error found here, or a Terminate received) goes
    to three places at once: the queue the host reads through TERM_* (``depth``
    entries; TERM_CMD.POP drops the head), the transmit path (``responder``: an error
    sends a Terminate and stops the connection's transmit side, a received Terminate
    stops it) and the per-connection state (``report``). An error found here also goes
    to the error capture (``error``).

    A report goes into the queue when the queue has room and the reset sweep ended at
    least a cycle before; then to the transmit path and the per-connection state; the next
    report follows once both took it.

    Ports
    -----
    regs : In(register_signature(...))
        TERM_CMD.POP and the views TERM_STATUS, TERM_INFO, TERM_DATA0 ..
    i : In(stream.Signature(TermReport))
        :class:`~rnic.hdl.ddp_rx.DdpRx` ``term``.
    responder : Out(stream.Signature(TermReport))
        To :class:`~rnic.hdl.ddp_tx.DdpTx` ``term``.
    report : Out(stream.Signature(ConnReport))
    error : Out(stream.Signature(ConnError, always_ready=True))
    sweeping : In(1)
    nonempty : Out(1)
        The queue holds a report (for the interrupt).

    Latency and throughput
    ----------------------
    ``i`` passes a half-rate register slice (reports are rare and wide); the queue is
    written from it (at the earliest in the first cycle a report is there), then
    ``responder`` and ``report`` are offered from it (from the next cycle): one report
    every three cycles at most. The octets of a payload beyond its length come in as
    0 (:class:`~rnic.hdl.rdma_layouts.TermReport`), so the TERM_DATA views read 0 there. The
    queue is in distributed RAM (why not block RAM:
    :class:`~rnic.hdl.synth_hints.SyncFIFOBuffered`). The views are registers, one cycle
    behind the queue (see
    :class:`~rnic.hdl.rnic_core.completion_queue.CompletionQueue`).
    """

    #: The register fields the component uses.
    REGISTERS = ("term_cmd", "term_status", "term_info",
                 *(f"term_data{k}" for k in range(TERM_BYTES // 4)))

    def __init__(self, *, connections, depth):
        self.connections = connections
        self.depth = depth
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "i": In(stream.Signature(TermReport(connections=connections))),
            "responder": Out(stream.Signature(TermReport(connections=connections))),
            "report": Out(stream.Signature(ConnReport(connections=connections))),
            "error": Out(stream.Signature(ConnError(connections=connections), always_ready=True)),
            "sweeping": In(1),
            "nonempty": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        r, resp = self.regs, self.responder
        dterm = slice_out_of(m, "ddp_term_slice", wiring.flipped(self.i), full_rate=False)
        tm_l = TermReport(connections=self.connections)
        m.submodules.term_fifo = tmf = SyncFIFOBuffered(width=tm_l.size, depth=self.depth)
        m.d.comb += self.nonempty.eq(tmf.r_rdy)
        # A report stays in the slice until it is in the queue, then until the transmit
        # path and the per-connection state took it, each straight from the slice's
        # register (no second 426-bit copy on its way across the die).
        rep, err, p = self.report, self.error, dterm.payload
        queued, tx_took, state_took = Signal(), Signal(), Signal()
        # a copy of `sweeping` one cycle behind (timing: its fanout); reset with it, it only
        # holds reports back one cycle longer after the sweep
        sweep_t = Signal(init=1)
        m.d.sync += sweep_t.eq(self.sweeping)
        write = Signal()
        m.d.comb += [
            write.eq(dterm.valid & ~queued & tmf.w_rdy & ~sweep_t),
            tmf.w_en.eq(write),
            err.valid.eq(write & ~p.received), err.payload.conn.eq(p.conn),
            err.payload.info.ecode.eq(p.ecode), err.payload.info.etype.eq(p.etype),
            err.payload.info.layer.eq(p.layer),
            resp.valid.eq(dterm.valid & queued & ~tx_took), resp.payload.eq(p),
            rep.valid.eq(dterm.valid & queued & ~state_took),
            rep.payload.conn.eq(p.conn), rep.payload.received.eq(p.received),
            rep.payload.info.eq(err.payload.info),
            dterm.ready.eq(queued & (tx_took | resp.ready) & (state_took | rep.ready)),
        ]
        with m.If(dterm.valid & dterm.ready):
            m.d.sync += [queued.eq(0), tx_took.eq(0), state_took.eq(0)]
        with m.Else():
            with m.If(write):
                m.d.sync += queued.eq(1)
            with m.If(resp.valid & resp.ready):
                m.d.sync += tx_took.eq(1)
            with m.If(rep.valid & rep.ready):
                m.d.sync += state_took.eq(1)
        m.d.comb += tmf.w_data.eq(p)
        tm = Signal(tm_l)
        m.d.comb += [tm.eq(Mux(tmf.r_rdy, tmf.r_data, 0)), tmf.r_en.eq(r.term_cmd.pop)]
        m.d.sync += [
            r.term_status.valid.eq(tmf.r_rdy), r.term_status.received.eq(tm.received),
            r.term_status.len.eq(tm.tlen), r.term_status.conn.eq(tm.conn),
            r.term_info.layer.eq(tm.layer), r.term_info.etype.eq(tm.etype), r.term_info.ecode.eq(tm.ecode),
        ]
        for k in range(TERM_BYTES // 4):
            m.d.sync += getattr(r, f"term_data{k}").data.eq(tm.term[32 * k:32 * k + 32])
        return m
