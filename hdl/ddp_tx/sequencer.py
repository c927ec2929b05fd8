"""The control of the transmit path: one FSM serving one request or one segment at a time.
See :class:`TxSequencer`."""

from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import check_width, conn_bits
from ..rdma_layouts import ReadRequestOut, RrDone, TermReport
from ..synth_hints import one_hot
from .layouts import (CheckSteps, CqStatus, ReadDone, ReadEntry, RrEntry, SegmentKind, SegmentPlan, SqOpcode,
                      TxCompletion, TxConnCfg, TxContext, WorkRequest, check_depths)

__all__ = ["TxSequencer"]


class TxSequencer(wiring.Component):
    """The transmit path's FSM: it takes the requests (``cfg``, ``term``, ``read_done``, Read
    Requests, work requests), runs the scheduler's turns, decides what each turn sends and
    starts the segment, posts completions; the datapaths it steers are components of
    :class:`rnic.hdl.ddp_tx.DdpTx`, driven through the ports below.

    Parameters
    ----------
    width, connections, sq_depth, rrq_depth, ord_depth, addr_width : int
        As :class:`rnic.hdl.ddp_tx.DdpTx`.
    gated : bool
        As :class:`rnic.hdl.ddp_tx.DdpTx`: the ports ``open_conn`` and ``open``.

    Ports
    -----
    cfg, term, read_done, rrq, wr : In(stream)
        ``DdpTx``'s request streams (their payloads also go to the datapaths: ``term`` to the
        Terminate builder, ``wr`` and ``rrq`` to the queues).
    cq : Out(stream(TxCompletion))
        ``DdpTx.cq``.
    conn, ctx : Out
        The connection being served and its context (registers).
    pick, ctx_write, sq_push, rrq_push, rd_push, enlist : Out(stream)
        Commands to :class:`rnic.hdl.ddp_tx.queues.TxQueues`; ``ctx_read``, ``sq_read``,
        ``rrq_read``, ``rd_read``, ``active``: its answers.
    sq_entry, rr_entry : Out
        The send queue head and the Read Request queue head of ``conn`` (registers, read in
        READ_HEADS; ``sq_entry.length`` doubles as the length of a ``read_done`` taken);
        ``sq_tagged``: the send queue head is an RDMA Write.
    plan_limits, deciding : Out(1)
        The planners' stages 0 and 1 (READ_HEADS, DECIDE); ``deciding`` also holds the
        STag table's writes. ``sq_plan``, ``rr_plan``: In, the plans.
    check : Out(CheckSteps)
        The steps of the Read Response source check; ``check_fail``: In, its verdict.
    start : Out(SegmentKind)
        One-hot flag registers of the segment that starts (loads the emitter and the
        payload fetch); ``emit_done``: In, the last beat of the newest segment is taken;
        ``emit_busy``: In, a start now would have to wait (a segment already waits in the
        emitter, or the fetch still requests the previous one's words; registers).
    rr_answered : Out(stream(RrDone))
        A Read Response's last beat was taken (to the ``rr_done`` FIFO).
    open_conn : Out, open : In(1)
        (``gated``) ``DdpTx``'s: ``open_conn`` is ``conn``; ``open``, the answer one cycle
        later, is registered in READ_HEADS.

    Operation
    ---------
    IDLE serves, in priority order, ``cfg``, ``term``, ``read_done``, ``rrq``, and then
    alternately ``wr`` and a turn of the scheduler (a connection popped from ``active``).
    Each reads the connection's context (``*_READ_CONTEXT``: the row is read at a
    registered address; ``*_LOAD_CONTEXT``: it arrives and is registered into ``ctx``),
    then acts on it and writes it back. A turn reads the queue heads (READ_HEADS),
    decides (DECIDE) between the Read Responder and the send queue, plans the segment
    (PLAN_*), starts it (START_*: the context is updated for after the segment, which
    always goes out whole) and writes the context back in the first EMIT cycle. A segment
    after which nothing is posted (no completion, no ``rr_done``) ends the turn there: the
    emitter sends it on its own while the next turn runs, which starts its segment once
    ``emit_busy`` is 0 (the waits are in PLAN_*, READ_REQUEST_WAIT,
    CHECK_SOURCE_RESULT, and IDLE for a ``term`` report). Otherwise the turn ends with the
    segment's last beat; a work request's completion follows (COMPLETE_AFTER_EMIT).
    A Read Response's first non-empty segment is preceded by the source check
    (CHECK_SOURCE_*); one that fails starts a Terminate (START_CHECK_TERMINATE). A
    stopped connection's turns flush its outstanding Reads (FLUSH_READ_*) and its work
    requests (DROP_WORK_REQUEST), and drop its Read Requests. A turn of a connection that
    may not send yet (``gated``, ``open`` 0) sends nothing and puts the connection back in
    the active FIFO (WRITE_BACK): its work waits, other connections' turns go on.

    Latency, throughput and packet boundaries
    -----------------------------------------
    As :class:`rnic.hdl.ddp_tx.DdpTx` documents. One segment per turn; every decision is
    taken from registers (conditions on the context and the heads are registered in
    READ_HEADS, the plans in DECIDE and PLAN_*).
    """

    def __init__(self, *, width, connections, sq_depth, rrq_depth, ord_depth, addr_width, gated=False):
        check_width(width)
        self.gated = bool(gated)
        check_depths(sq_depth=sq_depth, rrq_depth=rrq_depth, ord_depth=ord_depth)
        self.connections = connections
        self.sq_depth = sq_depth
        self.rrq_depth = rrq_depth
        self.ord_depth = ord_depth
        C, CB = connections, conn_bits(connections)
        ctx = TxContext(sq_depth=sq_depth, rrq_depth=rrq_depth, ord_depth=ord_depth)
        wr, rq = WorkRequest(connections=C), RrEntry(addr_width=addr_width)
        plan = SegmentPlan(width=width, addr_width=addr_width)

        def command(layout):
            return Out(stream.Signature(layout, always_ready=True))
        super().__init__({
            "cfg": In(stream.Signature(TxConnCfg(connections=C))),
            "term": In(stream.Signature(TermReport(connections=C))),
            "read_done": In(stream.Signature(ReadDone(connections=C))),
            "rrq": In(stream.Signature(ReadRequestOut(connections=C))),
            "wr": In(stream.Signature(wr)),
            "cq": Out(stream.Signature(TxCompletion(connections=C))),
            "conn": Out(CB), "ctx": Out(ctx),
            "pick": command(CB), "ctx_read": In(ctx), "ctx_write": command(ctx),
            "sq_push": command(wr), "rrq_push": command(rq), "rd_push": command(ReadEntry()),
            "sq_read": In(wr), "rrq_read": In(rq), "rd_read": In(ReadEntry()),
            "enlist": command(CB), "active": In(stream.Signature(CB)),
            "sq_entry": Out(wr), "rr_entry": Out(rq), "sq_tagged": Out(1),
            "plan_limits": Out(1), "deciding": Out(1), "sq_plan": In(plan), "rr_plan": In(plan),
            "check": Out(CheckSteps()), "check_fail": In(1),
            "start": Out(SegmentKind()), "emit_done": In(1), "emit_busy": In(1),
            "rr_answered": command(RrDone(connections=C)),
            **({"open_conn": Out(CB), "open": In(1)} if self.gated else {}),
        })

    # ------------------------------------------------------------------------ helpers

    def _complete(self, m, wr_id, status, length, opcode, force=1):
        """Load the completion registers (``force``: offer it on ``cq``)."""
        p = self.cq.payload
        m.d.sync += [p.conn.eq(self.conn), p.wr_id.eq(wr_id), p.status.eq(status),
                     p.length.eq(length), p.opcode.eq(opcode), self._r.cq_force.eq(force)]

    def _sq_pop(self, m):
        c = self.ctx
        m.d.sync += [c.sq_head.eq(c.sq_head + 1), c.sq_count.eq(c.sq_count - 1), c.sq_off.eq(0)]

    def _rr_pop(self, m):
        c = self.ctx
        m.d.sync += [c.rr_head.eq(c.rr_head + 1), c.rr_count.eq(c.rr_count - 1), c.rr_off.eq(0),
                     c.rr_started.eq(0)]

    def _write_back(self, m, sq_inc=None, rr_inc=None):
        """Write ``ctx`` back (with ``sq_count``/``rr_count`` one higher if ``sq_inc``/``rr_inc``)
        and list the connection if it has work."""
        c, r = self.ctx, self._r
        listed = c.inlist & ~r.popped
        work = r.has_work
        nc = Signal.like(c, name="wb_ctx")
        m.d.comb += nc.eq(c)
        if sq_inc is not None:
            m.d.comb += nc.sq_count.eq(c.sq_count + sq_inc)
            work = work | sq_inc
        if rr_inc is not None:
            m.d.comb += nc.rr_count.eq(c.rr_count + rr_inc)
            work = work | rr_inc
        m.d.comb += [nc.inlist.eq(work | listed), self.ctx_write.valid.eq(1), self.ctx_write.payload.eq(nc)]
        with m.If(work & ~listed):
            m.d.comb += self.enlist.valid.eq(1)

    # ------------------------------------------------------------------------ the FSM

    def elaborate(self, platform):
        m = Module()
        c, conn, wre = self.ctx, self.conn, self.sq_entry
        self._r = r = SimpleNamespace(
            ld_c=Signal(),             # ctx <= the context read (the cycle after IDLE's pick)
            popped=Signal(),           # conn came out of the active FIFO this turn
            prefer_post=Signal(),      # a waiting post goes before the next turn (they alternate)
            rrq_hold=Signal(),         # rrq's connection has a full Read Request queue
            # the oldest outstanding Read (registered for timing: BRAM clk-to-out)
            rde=Signal(ReadEntry(), name="rd_entry_q"),
            wbp=Signal(),              # write the context back in the first EMIT cycle
            cq_force=Signal(),         # the completion registers hold one to offer
            cq_after=Signal(),         # the segment completes a work request: after EMIT
            push_rrd=Signal(),         # the segment ends a Read Response: rr_done at its last beat
            rd_ok=Signal(),            # Read completion: the length is the requested one
            has_work=Signal(), ord_eff=Signal(15),
        )
        m.d.comb += [
            self.ctx_write.payload.eq(c),
            self.sq_push.payload.eq(self.wr.payload), self.rrq_push.payload.eq(self.rrq_push.payload.shape().of(self.rrq.payload)),
            self.rd_push.payload.wr_id.eq(wre.wr_id), self.rd_push.payload.length.eq(wre.length),
            self.rd_push.payload.signaled.eq(wre.signaled),
            self.enlist.payload.eq(conn),
            self.rr_answered.valid.eq(self.emit_done & r.push_rrd), self.rr_answered.payload.conn.eq(conn),
            r.ord_eff.eq(Mux(c.ord > self.ord_depth, self.ord_depth, c.ord)),
            r.has_work.eq((c.sq_count != 0) | (c.rr_count != 0) | (c.stopped & (c.nreads != 0))),
        ]
        with m.If(self.emit_done):
            m.d.sync += [r.cq_after.eq(0), r.push_rrd.eq(0)]
        m.d.sync += [r.ld_c.eq(0), self.start.eq(0)]
        with m.FSM(name="tx") as fsm:
            self._pick_states(m)
            self._request_states(m)
            self._turn_states(m)
            self._segment_states(m)
        one_hot(fsm)
        with m.If(self.start.any):
            m.d.sync += r.wbp.eq(1)
        # the context read in the cycle after IDLE picked a request goes straight into ctx
        # (after the FSM: no other assignment of ctx in those states; timing: BRAM clk-to-out
        # through one mux only)
        with m.If(r.ld_c):
            m.d.sync += c.eq(self.ctx_read)
        return m

    def _pick_states(self, m):
        """IDLE, and the states in which the picked connection's context is read."""
        r = self._r
        # IDLE arbitrates among registered copies of the request streams' valid (timing: a
        # valid from outside would run through the arbitration into the context address, the
        # active FIFO's read side and the state register). A request is seen one cycle after
        # its valid rises; the copy is cleared by the transfer (valid & ~ready), so a taken
        # request is never picked again.
        requests = {"cfg": self.cfg, "term": self.term, "rdone": self.read_done, "rrq": self.rrq, "wr": self.wr}
        v = {name: Signal(name=f"v_{name}") for name in requests}
        m.d.sync += [v[name].eq(st.valid & ~st.ready) for name, st in requests.items()]
        waits = {}                     # *_READ_CONTEXT state -> (next state, whether it loads ctx)
        with m.State("IDLE"):
            m.d.sync += r.popped.eq(0)

            def pick(nconn, prefix, state, load=True):
                m.d.comb += [self.pick.valid.eq(1), self.pick.payload.eq(nconn)]
                m.d.sync += self.conn.eq(nconn)
                waits[f"{prefix}_READ_CONTEXT"] = (state, load)
                m.next = f"{prefix}_READ_CONTEXT"
            with m.If(v["cfg"]):
                pick(self.cfg.payload.conn, "CFG", "CFG_APPLY", load=False)
            with m.Elif(v["term"] & self.emit_busy):
                pass                   # its Terminate may start at once: wait for the emitter
            with m.Elif(v["term"]):
                pick(self.term.payload.conn, "TERM", "TERM_LOAD_CONTEXT")
            with m.Elif(v["rdone"]):
                pick(self.read_done.payload.conn, "READ_DONE", "READ_DONE_LOAD_CONTEXT")
            with m.Elif(v["rrq"] & ~r.rrq_hold):
                pick(self.rrq.payload.conn, "RRQ", "RRQ_LOAD_CONTEXT")
            with m.Elif(v["wr"] & (r.prefer_post | ~self.active.valid)):
                pick(self.wr.payload.conn, "POST", "POST_LOAD_CONTEXT")
                m.d.sync += r.prefer_post.eq(0)
            with m.Elif(self.active.valid):
                m.d.comb += self.active.ready.eq(1)
                pick(self.active.payload, "TURN", "TURN_LOAD_CONTEXT")
                m.d.sync += [r.popped.eq(1), r.prefer_post.eq(1), r.rrq_hold.eq(0)]

        # the context of ``conn`` is read at the queues' registered address here; it arrives
        # in the next state
        for wait, (state, load) in waits.items():
            with m.State(wait):
                m.d.sync += r.ld_c.eq(int(load))
                m.next = state

    def _request_states(self, m):
        """A context (re)start, a ``term`` report, a ``read_done`` and the two posts."""
        c, r, wre = self.ctx, self._r, self.sq_entry
        cxd = self.ctx_read
        with m.State("CFG_APPLY"):
            p = self.cfg.payload
            m.d.comb += self.cfg.ready.eq(1)
            m.d.sync += [c.eq(0), c.inlist.eq(cxd.inlist), c.mulpdu.eq(p.mulpdu), c.ord.eq(p.ord),
                         c.msn0.eq(1), c.msn1.eq(1), c.msn2.eq(1)]
            m.next = "WRITE_BACK"

        # *_LOAD_CONTEXT: the context arrives and is registered into ctx (ld_c, below the FSM)
        with m.State("TERM_LOAD_CONTEXT"):
            sends = ~cxd.stopped & ~self.term.payload.received
            m.d.sync += [self.start.terminate.eq(sends), self.start.any.eq(sends)]
            m.next = "TERM_TAKE"

        with m.State("TERM_TAKE"):
            p = self.term.payload
            m.d.comb += self.term.ready.eq(1)
            with m.If(c.stopped):
                m.next = "WRITE_BACK"
            with m.Elif(p.received):
                m.d.sync += [c.stopped.eq(1), c.rterm.eq(1)]
                m.next = "WRITE_BACK"
            with m.Else():
                # (start.terminate: the Terminate starts)
                m.d.sync += [c.stopped.eq(1), c.msn2.eq(c.msn2 + 1)]
                m.next = "EMIT"

        with m.State("READ_DONE_LOAD_CONTEXT"):
            m.next = "READ_DONE_TAKE"

        with m.State("READ_DONE_TAKE"):
            m.d.comb += self.read_done.ready.eq(1)
            with m.If(~c.stopped & (c.nreads != 0)):
                m.d.sync += wre.length.eq(self.read_done.payload.length)
                m.next = "READ_DONE_FETCH_ENTRY"
            with m.Else():
                m.next = "WRITE_BACK"

        with m.State("READ_DONE_FETCH_ENTRY"):
            # the outstanding Read was read at ctx.rd_head in READ_DONE_TAKE; registered for
            # timing (BRAM clk-to-out into a 32-bit compare)
            m.d.sync += r.rde.eq(self.rd_read)
            m.next = "READ_DONE_COMPARE"

        with m.State("READ_DONE_COMPARE"):
            # registered (timing: a 32-bit compare in front of the completion registers)
            m.d.sync += r.rd_ok.eq(r.rde.length == wre.length)
            m.next = "READ_DONE_COMPLETE"

        with m.State("READ_DONE_COMPLETE"):
            self._complete(m, r.rde.wr_id, Mux(r.rd_ok, CqStatus.SUCCESS, CqStatus.LOCAL_LENGTH), wre.length,
                           SqOpcode.RDMA_READ, force=~r.rd_ok | r.rde.signaled)
            m.d.sync += [c.rd_head.eq(c.rd_head + 1), c.nreads.eq(c.nreads - 1)]
            m.next = "COMPLETE"

        with m.State("RRQ_LOAD_CONTEXT"):
            m.next = "RRQ_ENQUEUE"

        with m.State("RRQ_ENQUEUE"):
            # the context is written back here (with the Read Request counted)
            acc = Signal(name="rrq_acc")
            with m.If(c.stopped):
                m.d.comb += self.rrq.ready.eq(1)          # dropped
            with m.Elif(c.rr_count < self.rrq_depth):
                m.d.comb += [self.rrq.ready.eq(1), self.rrq_push.valid.eq(1), acc.eq(1)]
            with m.Else():
                m.d.sync += r.rrq_hold.eq(1)
            self._write_back(m, rr_inc=acc)
            m.next = "IDLE"

        with m.State("POST_LOAD_CONTEXT"):
            m.next = "POST_ENQUEUE"

        with m.State("POST_ENQUEUE"):
            # the context is written back here (with the work request counted)
            acc = Signal(name="post_acc")
            with m.If(c.sq_count < self.sq_depth):
                m.d.comb += [self.wr.ready.eq(1), self.sq_push.valid.eq(1), acc.eq(1)]
            self._write_back(m, sq_inc=acc)
            m.next = "IDLE"

    def _turn_states(self, m):
        """A scheduler turn up to the start of its segment: the heads, the decision, the
        plan; and the turns that send nothing (a dropped work request, a flushed Read)."""
        c, r, wre, rqe, go = self.ctx, self._r, self.sq_entry, self.rr_entry, self.start
        # conditions on the context and the send queue head for DECIDE, registered in
        # READ_HEADS (timing: compares on ctx in front of the decision and the completion
        # registers' enables)
        f_sq = Signal()                # send queue not empty
        f_rr = Signal()                # Read Request queue not empty
        f_sqoff = Signal()             # the send queue head's message is under way (sq_off != 0)
        f_ord = Signal()               # a Read may be sent (fewer than ORD outstanding, or ord 0)
        f_ord0 = Signal()              # ord == 0
        f_nreads = Signal()            # Reads outstanding
        f_open = Signal()              # the connection may send (its state; always, ungated)
        if self.gated:
            m.d.comb += self.open_conn.eq(self.conn)
        op0 = self.sq_tagged           # the send queue head is an RDMA Write (tagged)
        op1 = Signal()                 # ... an RDMA Read
        opbad = Signal()               # ... an invalid opcode
        r.rr_chk = Signal()            # the Read Response's first non-empty segment: check first
        with m.State("TURN_LOAD_CONTEXT"):
            # the context arrives (into ctx); the queue heads are read at its pointers
            m.next = "READ_HEADS"

        with m.State("READ_HEADS"):
            # the queue heads, registered for timing (BRAM clk-to-out); DECIDE looks at them
            wop = self.sq_read.opcode
            m.d.comb += self.plan_limits.eq(1)
            m.d.sync += [wre.eq(self.sq_read), rqe.eq(self.rrq_read),
                         op0.eq(wop == SqOpcode.RDMA_WRITE), op1.eq(wop == SqOpcode.RDMA_READ),
                         opbad.eq(~((wop == SqOpcode.RDMA_WRITE) | (wop == SqOpcode.RDMA_READ)
                                    | (wop == SqOpcode.SEND) | (wop == SqOpcode.SEND_INV)
                                    | (wop == SqOpcode.SEND_SE) | (wop == SqOpcode.SEND_SE_INV))),
                         f_sq.eq(c.sq_count != 0), f_rr.eq(c.rr_count != 0), f_sqoff.eq(c.sq_off != 0),
                         f_ord.eq((c.nreads < r.ord_eff) | (c.ord == 0)), f_ord0.eq(c.ord == 0),
                         f_nreads.eq(c.nreads != 0), f_open.eq(self.open if self.gated else 1)]
            m.next = "DECIDE"

        with m.State("DECIDE"):
            m.d.comb += self.deciding.eq(1)
            # tagged messages never interleave on a stream (the receiver, rnic.host.model.sink and
            # DdpRx, ties consecutive tagged segments to one message): a Write in progress
            # holds off Read Responses and a Read Response in progress holds off Writes
            wr_mid = f_sq & op0 & f_sqoff
            rr_mid = f_rr & c.rr_started
            sq_ok = f_sq & (~op1 | f_ord) & ~(rr_mid & op0)
            rr_ok = f_rr & ~wr_mid
            rr_sel = Signal()
            m.d.comb += rr_sel.eq(rr_ok & (~sq_ok | c.last_sq))
            # (for PLAN_RR_SEGMENT: registered, not in front of the next state)
            m.d.sync += r.rr_chk.eq(~c.rr_started & (rqe.size != 0))
            with m.If(c.stopped):
                with m.If(f_nreads):
                    m.next = "FLUSH_READ_WAIT"
                with m.Elif(f_sq):
                    m.next = "DROP_WORK_REQUEST"
                with m.Else():
                    m.d.sync += [c.rr_count.eq(0), c.rr_off.eq(0), c.rr_started.eq(0)]
                    m.next = "WRITE_BACK"
            with m.Elif(~f_open):
                # not yet (the MPA fence): nothing is sent, the connection is listed again
                m.next = "WRITE_BACK"
            with m.Elif(rr_sel):
                m.d.sync += c.last_sq.eq(0)
                m.next = "PLAN_RR_SEGMENT"
            with m.Elif(sq_ok):
                m.d.sync += c.last_sq.eq(1)
                with m.If(opbad | (op1 & f_ord0)):
                    m.next = "DROP_WORK_REQUEST"
                with m.Elif(op1):
                    m.next = "READ_REQUEST_WAIT"
                with m.Else():
                    m.next = "PLAN_SQ_SEGMENT"
            with m.Else():
                m.next = "WRITE_BACK"

        with m.State("READ_REQUEST_WAIT"):
            # (the previous segment may still be going out)
            with m.If(~self.emit_busy):
                m.d.sync += [go.read_request.eq(1), go.any.eq(1)]
                m.next = "START_READ_REQUEST"

        with m.State("PLAN_SQ_SEGMENT"):
            # the send queue head's plan takes its second stage (and holds it: the planner's
            # stage 1 loads only in DECIDE) while the previous segment may still go out
            with m.If(~self.emit_busy):
                m.d.sync += [go.sq.eq(1), go.write.eq(op0), go.send.eq(~op0), go.payload.eq(1),
                             go.any.eq(1)]
                m.next = "START_SQ_SEGMENT"

        with m.State("PLAN_RR_SEGMENT"):
            # the Read Response's plan takes its second stage; the source check of a first
            # segment loads the STag row of rr_entry.src_stag (address stable since READ_HEADS)
            m.d.comb += self.check.load.eq(1)
            with m.If(r.rr_chk):
                m.next = "CHECK_SOURCE_COMPARE"
            with m.Elif(~self.emit_busy):
                m.d.sync += [go.read_response.eq(1), go.payload.eq(1), go.any.eq(1)]
                m.next = "START_RR_SEGMENT"

        with m.State("DROP_WORK_REQUEST"):
            # the send queue head completes without being sent: FLUSHED (stopped) or
            # BAD_REQUEST (own state for timing: the decision does not enable the completion
            # registers)
            self._complete(m, wre.wr_id, Mux(c.stopped, CqStatus.FLUSHED, CqStatus.BAD_REQUEST), 0, wre.opcode)
            self._sq_pop(m)
            m.next = "COMPLETE"

        with m.State("FLUSH_READ_WAIT"):
            # (the outstanding Read is read at ctx.rd_head)
            m.next = "FLUSH_READ_FETCH"

        with m.State("FLUSH_READ_FETCH"):
            # registered for timing (BRAM clk-to-out into the completion registers)
            m.d.sync += r.rde.eq(self.rd_read)
            m.next = "FLUSH_READ_COMPLETE"

        with m.State("FLUSH_READ_COMPLETE"):
            self._complete(m, r.rde.wr_id, Mux(c.rterm, CqStatus.REMOTE_ERROR, CqStatus.FLUSHED), 0,
                           SqOpcode.RDMA_READ)
            m.d.sync += [c.rd_head.eq(c.rd_head + 1), c.nreads.eq(c.nreads - 1)]
            m.next = "COMPLETE"

    def _segment_states(self, m):
        """The start of a segment, the source check, the emission, completions, write-back."""
        c, r, wre, go = self.ctx, self._r, self.sq_entry, self.start
        hsq, hrr = self.sq_plan, self.rr_plan
        with m.State("START_SQ_SEGMENT"):
            # the context is updated for after the segment here (the segment always goes
            # out whole); its completion is posted in COMPLETE_AFTER_EMIT after the last beat
            with m.If(hsq.last):
                self._sq_pop(m)
                with m.If(~self.sq_tagged):
                    m.d.sync += c.msn0.eq(c.msn0 + 1)
                self._complete(m, wre.wr_id, CqStatus.SUCCESS, wre.length, wre.opcode, force=wre.signaled)
                m.d.sync += r.cq_after.eq(wre.signaled)
            with m.Else():
                m.d.sync += c.sq_off.eq(c.sq_off + hsq.n)
            m.next = "EMIT"

        with m.State("START_READ_REQUEST"):
            m.d.comb += self.rd_push.valid.eq(1)
            m.d.sync += [c.nreads.eq(c.nreads + 1), c.msn1.eq(c.msn1 + 1)]
            self._sq_pop(m)
            m.next = "EMIT"

        with m.State("CHECK_SOURCE_COMPARE"):
            m.d.comb += self.check.compare.eq(1)
            m.next = "CHECK_SOURCE_DECIDE"

        with m.State("CHECK_SOURCE_DECIDE"):
            m.d.comb += self.check.decide.eq(1)
            m.next = "CHECK_SOURCE_RESULT"

        with m.State("CHECK_SOURCE_RESULT"):
            with m.If(self.emit_busy):
                pass                   # the previous segment is still going out
            with m.Elif(self.check_fail):
                m.d.sync += [go.check_terminate.eq(1), go.any.eq(1)]
                m.next = "START_CHECK_TERMINATE"
            with m.Else():
                m.d.sync += [go.read_response.eq(1), go.payload.eq(1), go.any.eq(1)]
                m.next = "START_RR_SEGMENT"

        with m.State("START_CHECK_TERMINATE"):
            # (start.check_terminate: the Terminate starts)
            m.d.sync += [c.stopped.eq(1), c.msn2.eq(c.msn2 + 1)]
            m.next = "EMIT"

        with m.State("START_RR_SEGMENT"):
            with m.If(hrr.last):
                self._rr_pop(m)
                m.d.sync += r.push_rrd.eq(1)
            with m.Else():
                m.d.sync += [c.rr_off.eq(c.rr_off + hrr.n), c.rr_started.eq(1)]
            m.next = "EMIT"

        with m.State("EMIT"):
            # the context (already updated for after the segment) is written back in the
            # first cycle, so that the turn ends with the last beat
            with m.If(r.wbp):
                self._write_back(m)
                m.d.sync += r.wbp.eq(0)
            with m.If(~r.cq_after & ~r.push_rrd):
                # nothing to post after it: the emitter finishes the segment on its own
                m.next = "IDLE"
            with m.Elif(self.emit_done):
                with m.If(r.cq_after):
                    m.next = "COMPLETE_AFTER_EMIT"
                with m.Else():
                    m.next = "IDLE"

        with m.State("COMPLETE_AFTER_EMIT"):
            m.d.comb += self.cq.valid.eq(1)
            with m.If(self.cq.ready):
                m.next = "IDLE"

        with m.State("COMPLETE"):
            m.d.comb += self.cq.valid.eq(r.cq_force)
            with m.If(~r.cq_force | self.cq.ready):
                m.next = "WRITE_BACK"

        with m.State("WRITE_BACK"):
            self._write_back(m)
            m.next = "IDLE"
