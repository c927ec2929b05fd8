"""The completion queue read through CQ_*: see :class:`CompletionQueue`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import CqQueue, CqStatus, SqOpcode

from ..ddp_tx import ReadDone, TxCompletion
from ..rdma_layouts import Completion, StagWrite
from ..synth_hints import SyncFIFOBuffered
from .layouts import BadPost, CqEntry
from .registers import register_signature
from .slices import slice_into, slice_out_of

__all__ = ["CompletionQueue", "READ_RESPONSE"]

#: :class:`~rnic.hdl.rdma_layouts.Completion` ``opcode`` of an RDMA Read Response message (its
#: RDMAP opcode, RFC 5040 section 4.3).
READ_RESPONSE = 2


class CompletionQueue(wiring.Component):
    """The one completion queue of the host (``depth`` entries, CQ_*): the transmit path's
    work request completions (``tx``: QUEUE SQ, CQ_WR_ID = SQ_ID; taken first), doorbells
    for connections that do not exist (``bad``: QUEUE SQ, BAD_REQUEST) and the receive
    path's (``rx``: QUEUE RQ).

    A receive-path completion of an RDMA Read Response message goes to the transmit
    path's ``read_done`` while ``host_reads`` is 0 (it completes the connection's oldest
    outstanding RDMA Read), else into the queue as an SQ/RDMA_READ entry with CQ_WR_ID
    0 and CQ_STAG/CQ_TO. One of a Send with Invalidate is offered on ``invalidate`` (the
    transmit path's copy of the STag row is written invalid), one at a time: a
    receive-path completion waits while one is pending. A completion that finds the queue
    full is lost and sets CQ_STATUS.OVERFLOW (W1C): neither path ever waits for the host
    (a host that stops popping must not stall every connection's traffic; its Send with
    Invalidate still invalidates). CQ_CMD.POP drops the head.

    Ports
    -----
    regs : In(register_signature(...))
        CQ_CMD.POP and the views CQ_STATUS, CQ_WR_ID, CQ_INFO, CQ_LENGTH, CQ_INV_STAG,
        CQ_MSN, CQ_STAG, CQ_TO_LO/HI.
    rx : In(stream.Signature(Completion))
        :class:`~rnic.hdl.ddp_rx.DdpRx` ``cq``.
    tx : In(stream.Signature(TxCompletion))
        :class:`~rnic.hdl.ddp_tx.DdpTx` ``cq``.
    bad : In(stream.Signature(BadPost))
        :class:`~rnic.hdl.rnic_core.sq_post.WorkRequestPost` ``bad``.
    read_done : Out(stream.Signature(ReadDone))
        To :class:`~rnic.hdl.ddp_tx.DdpTx` ``read_done``.
    invalidate : Out(stream.Signature(StagWrite))
        The invalidated row (``index`` and ``stag`` from the STag, ``valid`` 0).
    host_reads : In(1)
        DP_CTRL.HOST_READS.
    nonempty : Out(1)
        The queue holds an entry (for the interrupt).

    Latency and throughput
    ----------------------
    ``rx`` and ``tx`` pass half-rate register slices (completions are at most one per
    segment or work request, many cycles apart; half rate, so that the wide entries'
    load enable does not wait for the queue's ready); ``read_done`` a register slice
    (its valid: whether the completion is a Read Response's, decoded as the ``rx`` slice
    takes it, and ``host_reads``). The queue holds one
    entry more than ``depth``: the writers look at a registered room flag (timing: the
    FIFO's level compare fed both slices' ready), which is conservative by one entry.
    The queue is in distributed RAM (see :class:`~rnic.hdl.synth_hints.SyncFIFOBuffered`),
    each view one LUT level
    behind its output. The views are registers (timing: the FIFO's output
    and these decodes went into the register bank's read mux): they follow a POP one
    cycle later; the bank samples them no earlier than 3 cycles after the POP's write
    handshake (the write response, then a read address handshake, then the bank's
    registered read address), so a read that follows the POP's response sees the next
    head.
    """

    #: The register fields the component uses.
    REGISTERS = ("cq_cmd.pop", "cq_status", "cq_status.overflow_set", "cq_wr_id", "cq_info", "cq_length", "cq_inv_stag", "cq_msn",
                 "cq_stag", "cq_to_lo", "cq_to_hi")

    def __init__(self, *, connections, stags, depth):
        self.connections = connections
        self.stags = stags
        self.depth = depth
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "rx": In(stream.Signature(Completion(connections=connections))),
            "tx": In(stream.Signature(TxCompletion(connections=connections))),
            "bad": In(stream.Signature(BadPost())),
            "read_done": Out(stream.Signature(ReadDone(connections=connections))),
            "invalidate": Out(stream.Signature(StagWrite(stags=stags, connections=connections))),
            "host_reads": In(1),
            "nonempty": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        r = self.regs
        rxc = slice_out_of(m, "ddp_cq_slice", wiring.flipped(self.rx), full_rate=False)
        txc = slice_out_of(m, "dtx_cq_slice", wiring.flipped(self.tx), full_rate=False)
        rdd = slice_into(m, "dtx_read_done_slice", wiring.flipped(self.read_done))
        cq_l = CqEntry(connections=self.connections)
        m.submodules.cq_fifo = cqf = SyncFIFOBuffered(width=cq_l.size, depth=self.depth + 1)
        cq_room = Signal()
        m.d.sync += cq_room.eq(cqf.level < self.depth)
        m.d.comb += self.nonempty.eq(cqf.r_rdy)

        # ---- writers
        inv = self.invalidate
        to_tx = Signal()
        # an RDMA Read Response's completion: decoded as the slice takes it (timing: the
        # decode fed the read-done slice's valid and load enable)
        rx_rresp = Signal()
        with m.If(self.rx.valid & self.rx.ready):
            m.d.sync += rx_rresp.eq(self.rx.payload.opcode == READ_RESPONSE)
        m.d.comb += to_tx.eq(rx_rresp & ~self.host_reads)
        tx_e = Signal(cq_l)
        m.d.comb += [
            tx_e.tx.eq(1), tx_e.status.eq(txc.payload.status), tx_e.rx.conn.eq(txc.payload.conn),
            tx_e.rx.opcode.eq(txc.payload.opcode), tx_e.rx.wr_id.eq(txc.payload.wr_id),
            tx_e.rx.length.eq(txc.payload.length),
        ]
        bad = self.bad
        bad_e = Signal(cq_l)
        m.d.comb += [
            bad_e.tx.eq(1), bad_e.bad.eq(1), bad_e.bad_conn.eq(bad.payload.conn),
            bad_e.status.eq(CqStatus.BAD_REQUEST), bad_e.rx.opcode.eq(bad.payload.opcode),
            bad_e.rx.wr_id.eq(bad.payload.wr_id),
        ]
        rx_e = Signal(cq_l)
        m.d.comb += [rx_e.rx.eq(rxc.payload),
                     rx_e.rresp.eq(rx_rresp)]
        # one writer per cycle: tx, then bad, then rx; each is taken whether or not there is
        # room (without room it is lost: OVERFLOW)
        rx_take = Signal()
        m.d.comb += [
            rx_take.eq(rxc.valid & ~to_tx & ~txc.valid & ~bad.valid & ~inv.valid),
            cqf.w_data.eq(Mux(txc.valid, tx_e, Mux(bad.valid, bad_e, rx_e))),
            cqf.w_en.eq(cq_room & (txc.valid | bad.valid | rx_take)),
            r.cq_status.overflow_set.eq(~cq_room & (txc.valid | bad.valid | rx_take)),
            txc.ready.eq(1),
            bad.ready.eq(~txc.valid),
            rdd.valid.eq(rxc.valid & to_tx),
            rdd.payload.conn.eq(rxc.payload.conn), rdd.payload.length.eq(rxc.payload.length),
            rxc.ready.eq(Mux(to_tx, rdd.ready, rx_take)),
        ]
        with m.If(rxc.valid & rxc.ready & ~to_tx & rxc.payload.invalidated):
            m.d.sync += [inv.valid.eq(1), inv.payload.index.eq(rxc.payload.inval_stag),
                         inv.payload.stag.eq(rxc.payload.inval_stag), inv.payload.valid.eq(0)]
        with m.Elif(inv.ready):
            m.d.sync += inv.valid.eq(0)

        # ---- the head, as registered views
        ce = Signal(cq_l)
        m.d.comb += ce.eq(Mux(cqf.r_rdy, cqf.r_data, 0))
        cq = ce.rx
        rresp = ce.rresp                         # the head is an RDMA Read Response
        m.d.comb += cqf.r_en.eq(r.cq_cmd.pop)
        m.d.sync += [
            r.cq_status.valid.eq(cqf.r_rdy),
            r.cq_wr_id.wr_id.eq(Mux(rresp, 0, cq.wr_id)),
            r.cq_info.opcode.eq(Mux(rresp, SqOpcode.RDMA_READ, cq.opcode)),
            r.cq_info.queue.eq(Mux(cqf.r_rdy & ~rresp & ~ce.tx, CqQueue.RQ, CqQueue.SQ)),
            r.cq_info.invalidated.eq(~rresp & cq.invalidated),
            r.cq_info.solicited.eq(~rresp & cq.solicited),
            r.cq_info.status.eq(ce.status),
            r.cq_info.conn.eq(Mux(ce.bad, ce.bad_conn, cq.conn)),
            r.cq_length.length.eq(cq.length),
            r.cq_inv_stag.stag.eq(Mux(~rresp & cq.invalidated, cq.inval_stag, 0)),
            r.cq_msn.msn.eq(Mux(rresp, 0, cq.msn)),
            r.cq_stag.stag.eq(Mux(rresp, cq.stag, 0)),
            r.cq_to_lo.to.eq(Mux(rresp, cq.to[:32], 0)),
            r.cq_to_hi.to.eq(Mux(rresp, cq.to[32:], 0)),
        ]
        return m
