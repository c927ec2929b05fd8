"""Per-connection state of the transmit path: contexts, queues, active connections. See :class:`TxQueues`."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..beat import conn_bits
from ..synth_hints import no_rw_collision
from .conn_queue import ConnQueue
from .layouts import ReadEntry, RrEntry, TxContext, WorkRequest, check_depths

__all__ = ["TxQueues"]


class TxQueues(wiring.Component):
    """The memories of the per-connection state: one context row per connection
    (:class:`TxContext`), the send queues, the Read Request queues, the outstanding Reads,
    and the FIFO of the active connections (those with work, each at most once).

    A queue is ``depth`` rows per connection (row = connection, slot); the context row
    holds its head slot and entry count. The sequencer serves one connection at a time,
    ``conn``, and holds its context in a register, ``ctx``: pushes go to the slot after the
    last entry of ``ctx``, the outstanding Read is read at ``ctx.rd_head``.

    Parameters
    ----------
    connections, sq_depth, rrq_depth, ord_depth, addr_width : int
        As :class:`rnic.hdl.ddp_tx.DdpTx`.

    Ports
    -----
    conn : In(range(connections))
        The connection being served.
    ctx : In(TxContext)
        Its context register.
    pick : In(stream(unsigned))
        Read the context of this connection next (else of ``conn``).
    ctx_read : Out(TxContext)
        The context row, 2 cycles after ``pick`` (read at a registered address).
    ctx_write : In(stream(TxContext))
        Write the context row of ``conn``.
    sq_push, rrq_push, rd_push : In(stream)
        Append a work request, a Read Request, an outstanding Read to ``conn``'s queue.
    sq_head, rrq_head : Out(WorkRequest), Out(RrEntry)
        The queue heads at ``ctx_read``'s pointers, 1 cycle after ``ctx_read``.
    rd_head : Out(ReadEntry)
        The oldest outstanding Read of ``ctx``, 1 cycle after ``ctx.rd_head``.
    enlist : In(stream(unsigned))
        Put this connection into the active-connection FIFO.
    active : Out(stream(unsigned))
        The active-connection FIFO's oldest entry.

    Latency, throughput and packet boundaries
    -----------------------------------------
    Synchronous block RAM reads (1 cycle) behind registered addresses; a push lands at
    the end of its cycle; ``enlist`` reaches ``active`` 3 cycles later (see
    :class:`rnic.hdl.ddp_tx.conn_queue.ConnQueue`). No read whose data is used meets a write
    to its row (the sequencer reads and writes a connection's rows in different states),
    so the memories carry :func:`rnic.hdl.synth_hints.no_rw_collision`.
    """

    def __init__(self, *, connections, sq_depth, rrq_depth, ord_depth, addr_width):
        check_depths(sq_depth=sq_depth, rrq_depth=rrq_depth, ord_depth=ord_depth)
        self.connections = connections
        self.sq_depth = sq_depth
        self.rrq_depth = rrq_depth
        self.ord_depth = ord_depth
        C, CB = connections, conn_bits(connections)
        self._ctx = TxContext(sq_depth=sq_depth, rrq_depth=rrq_depth, ord_depth=ord_depth)
        wr, rq = WorkRequest(connections=C), RrEntry(addr_width=addr_width)

        def push(layout):
            return In(stream.Signature(layout, always_ready=True))
        super().__init__({
            "conn": In(CB), "ctx": In(self._ctx), "pick": push(CB),
            "ctx_read": Out(self._ctx), "ctx_write": push(self._ctx),
            "sq_push": push(wr), "rrq_push": push(rq), "rd_push": push(ReadEntry()),
            "sq_head": Out(wr), "rrq_head": Out(rq), "rd_head": Out(ReadEntry()),
            "enlist": push(CB), "active": Out(stream.Signature(CB)),
        })

    def elaborate(self, platform):
        m = Module()
        C = self.connections
        SQD, SQB = self.sq_depth, exact_log2(self.sq_depth)
        RQD, RQB = self.rrq_depth, exact_log2(self.rrq_depth)
        OD, OB = self.ord_depth, exact_log2(self.ord_depth)
        conn, c = self.conn, self.ctx
        # no_rw_collision: ``ctx`` is written in the sequencer's RRQ_ENQUEUE, POST_ENQUEUE,
        # EMIT and WRITE_BACK states and the rows used are read in the *_READ_CONTEXT states;
        # the send and Read Request queues are written in POST_ENQUEUE / RRQ_ENQUEUE and
        # read for use in TURN_LOAD_CONTEXT; ``rd`` is written in START_READ_REQUEST and read
        # for use in READ_DONE_FETCH_ENTRY and FLUSH_READ_FETCH.
        ctxm = no_rw_collision(Memory(shape=self._ctx, depth=C, init=[]))
        sqm = no_rw_collision(Memory(shape=self.sq_push.payload.shape(), depth=C * SQD, init=[]))
        rqm = no_rw_collision(Memory(shape=self.rrq_push.payload.shape(), depth=C * RQD, init=[]))
        rdm = no_rw_collision(Memory(shape=ReadEntry(), depth=C * OD, init=[]))
        m.submodules.ctx = ctxm
        m.submodules.sq = sqm
        m.submodules.rrq_mem = rqm
        m.submodules.rd = rdm
        cx_wr, cx_rd = ctxm.write_port(), ctxm.read_port(domain="sync")
        sq_wr, sq_rd = sqm.write_port(), sqm.read_port(domain="sync")
        rq_wr, rq_rd = rqm.write_port(), rqm.read_port(domain="sync")
        rd_wr, rd_rd = rdm.write_port(), rdm.read_port(domain="sync")
        for p in (cx_rd, sq_rd, rq_rd, rd_rd):
            m.d.comb += p.en.eq(1)

        def slot(idx, bits):
            return Cat(idx[:bits], conn)

        # The context is read at a registered address, ``cx_addr`` (the connection picked,
        # then the one being served): the sequencer's arbitration among the input streams
        # ends in that register instead of running into the memory (timing).
        cx_addr = Signal.like(conn, name="cx_addr")
        m.d.sync += cx_addr.eq(Mux(self.pick.valid, self.pick.payload, conn))
        cxd = self._ctx(cx_rd.data)
        m.d.comb += [cx_rd.addr.eq(cx_addr), self.ctx_read.eq(cx_rd.data),
                     cx_wr.addr.eq(conn), cx_wr.data.eq(self.ctx_write.payload),
                     cx_wr.en.eq(self.ctx_write.valid)]
        # the write addresses and data do not depend on the sequencer's state, only the
        # enables do (timing: a state decode in front of the block RAM address inputs)
        m.d.comb += [
            sq_wr.addr.eq(slot((c.sq_head + c.sq_count), SQB)),
            sq_wr.data.eq(self.sq_push.payload), sq_wr.en.eq(self.sq_push.valid),
            rq_wr.addr.eq(slot((c.rr_head + c.rr_count), RQB)),
            rq_wr.data.eq(self.rrq_push.payload), rq_wr.en.eq(self.rrq_push.valid),
            rd_wr.addr.eq(slot((c.rd_head + c.nreads), OB)),
            rd_wr.data.eq(self.rd_push.payload), rd_wr.en.eq(self.rd_push.valid),
        ]
        m.d.comb += [sq_rd.addr.eq(slot(cxd.sq_head, SQB)), rq_rd.addr.eq(slot(cxd.rr_head, RQB)),
                     rd_rd.addr.eq(slot(c.rd_head, OB)),
                     self.sq_head.eq(sq_rd.data), self.rrq_head.eq(rq_rd.data), self.rd_head.eq(rd_rd.data)]

        # connections with work, each at most once
        m.submodules.active = active = ConnQueue(connections=C, depth=max(C, 2))
        wiring.connect(m, wiring.flipped(self.enlist), active.push)
        wiring.connect(m, active.pop, wiring.flipped(self.active))
        return m
