"""The connection contexts: one row per connection, the segment's copy, and the host requests on them."""

from amaranth.hdl import Assert, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..beat import conn_bits
from ..compare import above
from ..rdma_layouts import ConnCtl, RqPost, RrDone
from ..synth_hints import no_rw_collision
from .header import SegmentView, header_rows
from .layouts import ConnContext, QueueState
from .sequencer import Step, Take

__all__ = ["HostRequest", "ReadResponseTotals", "ContextTable"]


class HostRequest(data.StructLayout):
    """A host request latched in IDLE: the connection (restart, post, IRD release), the
    IRD (restart), the receive buffer (post)."""

    def __init__(self, *, connections):
        super().__init__({"post": RqPost(connections=connections), "ird": unsigned(14)})


class ReadResponseTotals(data.StructLayout):
    """An RDMA Read Response message so far, this segment included: ``stag``/``to`` of its
    first segment, ``length`` octets."""

    def __init__(self):
        super().__init__({"stag": unsigned(32), "to": unsigned(64), "length": unsigned(32)})


class ContextTable(wiring.Component):
    """Per-connection receive contexts (:class:`ConnContext`, distributed RAM), the copy of
    the segment's connection (``ctx``), and the host requests that change them.

    Ports
    -----
    state : In(Step)
    take : In(Take)
        The request taken in IDLE; ``ctl``, ``rq_post``, ``rr_done``, ``head_conn`` are the
        requests' payloads (``head_conn``: the connection of the segment at the queue's
        head). The context row of the connection taken is read from the cycle after IDLE
        on (a registered address: the arbiter is not in the read path), so it is in HEADER's
        second cycle, POST and RELEASE_COUNT.
    request : Out(HostRequest)
        The request latched in IDLE (for the receive queue and the control buffer).
    header_cycle : In
        HEADER's cycle count: the segment's context is taken in the second.
    seg : In(SegmentView), qn : In(2), new_queue : In(QueueState), at_head : In(1)
        The segment (its connection and the Read Response fields), its queue number and
        its QN 1 / QN 2 message state after it (written in FINISH_UNTAGGED).
    cq_done, rrq_done, term_done : In(1)
        Handshakes on the output streams: a Send completion moves the receive queue's head,
        a Read Request takes an IRD slot and starts the next QN 1 message, a report stops
        the connection.
    ctx : Out(ConnContext)
        The segment's context, from HEADER's third cycle to DONE, which writes it back.
    read_response : Out(ReadResponseTotals)
        A tagged segment's RDMA Read Response totals (used in FINISH_TAGGED).
    post_ok, post_index : Out
        POST: the queue has room and the buffer lies inside the bus address space (else
        ``rq_overflow``); the receive-queue row it takes.
    rq_overflow : Out(1)
        A post dropped (in POST: two cycles after the handshake).

    Writes are registered in front of the memory's write port (timing: the write data are
    multiplexed by the state from several sources): a write requested in RESTART, POST,
    RELEASE or DONE happens at the end of the next cycle (CLEAR_CONTROL or IDLE, where
    nothing reads the memory; the next read is at the end of the cycle after IDLE at the
    earliest).

    For checkers: ``memory`` (a checker may add asynchronous read ports), ``write`` (the
    registered write: ``en``, ``addr``, ``data``), ``read_data`` (the read port's data).
    With ``platform == "formal"`` it asserts that only CLEAR_CONTROL and IDLE see a pending
    write (``lemma_cx_wr``), that the read address is the request's connection
    (``lemma_rd_conn``) and that POST and RELEASE read the row of the request's connection
    (``lemma_cx_rd``).
    """

    def __init__(self, *, width, connections, slots, rq_depth, addr_width):
        self.connections = connections
        self.rq_depth = rq_depth
        self.addr_width = addr_width
        C, CB, DB = connections, conn_bits(connections), exact_log2(rq_depth)
        ctx_l = ConnContext(rq_depth=rq_depth)
        super().__init__({
            "state": In(Step),
            "take": In(Take()),
            "ctl": In(ConnCtl(connections=C)), "rq_post": In(RqPost(connections=C)),
            "rr_done": In(RrDone(connections=C)), "head_conn": In(CB),
            "request": Out(HostRequest(connections=C)),
            "header_cycle": In(range(header_rows(width) + 2)),
            "seg": In(SegmentView(slots=slots, connections=C)),
            "qn": In(2), "new_queue": In(QueueState()), "at_head": In(1),
            "cq_done": In(1), "rrq_done": In(1), "term_done": In(1),
            "ctx": Out(ctx_l),
            "read_response": Out(ReadResponseTotals()),
            "post_ok": Out(1), "post_index": Out(DB + CB), "rq_overflow": Out(1),
        })
        # Marked no_rw_collision (rnic.hdl.synth_hints): written (the registered requests)
        # in CLEAR_CONTROL and IDLE; the rows used are read in HEADER, POST and RELEASE_COUNT.
        self.memory = no_rw_collision(Memory(shape=ctx_l, depth=C, init=[]))
        self.write = self.memory.write_port()
        self.read_data = Signal(ctx_l)
        self._rd_conn = Signal(CB, name="rd_conn")

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = self.memory
        wp = self.write
        rd = self.memory.read_port(domain="sync", transparent_for=(wp,))
        m.d.comb += [rd.addr.eq(self._rd_conn), rd.en.eq(1), self.read_data.eq(rd.data)]
        # the write request, registered in front of the write port
        wr_addr = Signal(len(wp.addr))
        wr_data = Signal(self.ctx.shape())
        wr_en = Signal()
        m.d.sync += [wp.addr.eq(wr_addr), wp.data.eq(wr_data), wp.en.eq(wr_en)]

        state, seg, c, lat, cc = self.state, self.seg, self.ctx, self.request, self.read_data
        ctx_l, AW, D = self.ctx.shape(), self.addr_width, self.rq_depth
        DB = exact_log2(D)
        # a posted buffer inside the bus address space: worked out from the latched request
        # in POST_READ_CONTEXT and registered, POST only uses the flag
        post_end = Signal(65)
        m.d.comb += post_end.eq(lat.post.addr + lat.post.length)
        post_fit = Signal()
        m.d.sync += post_fit.eq(~above(post_end, 1 << AW) & ~above(lat.post.addr, (1 << AW) - 1))
        m.d.comb += [
            # a buffer that wraps the 64-bit address space is refused like a full queue
            self.post_ok.eq((cc.count < D) & post_fit),
            self.post_index.eq(Cat((cc.head + cc.count)[:DB], lat.post.conn) if DB
                               else lat.post.conn),
        ]
        tm = self.read_response
        m.d.comb += [tm.stag.eq(Mux(c.tm_v, c.tm_stag, seg.stag)),
                     tm.to.eq(Mux(c.tm_v, c.tm_to, seg.to)),
                     tm.length.eq(Mux(c.tm_v, c.tm_len, 0) + seg.length)]
        rrc = Signal(14)           # the decremented count of an IRD release
        # The write data are the segment's copy unless a host request writes (timing: with
        # 0 in the other states, the whole row had a synchronous reset decoded from four
        # states; RESTART's zeros are one state's, a bit of the one-hot state register)
        m.d.comb += wr_data.eq(c)

        with m.Switch(state):
            # the host requests: latched in IDLE, then a restart resets the row, a post counts
            # one more buffer, an IRD release frees a slot
            with m.Case(Step.IDLE):
                self._take(m)
            with m.Case(Step.RESTART):
                m.d.comb += [wr_en.eq(1), wr_addr.eq(lat.post.conn)]
            with m.Case(Step.POST):
                posted = Signal(ctx_l, name="post_ctx")
                m.d.comb += [posted.eq(cc), posted.count.eq(cc.count + 1),
                             wr_addr.eq(lat.post.conn), wr_data.eq(posted)]
                with m.If(self.post_ok):
                    m.d.comb += wr_en.eq(1)
                with m.Else():
                    m.d.comb += self.rq_overflow.eq(1)
            with m.Case(Step.RELEASE_COUNT):
                # registered (timing: the write data see no subtraction)
                m.d.sync += rrc.eq(Mux(cc.rrc == 0, 0, cc.rrc - 1))
            with m.Case(Step.RELEASE):
                released = Signal(ctx_l, name="rrd_ctx")
                m.d.comb += [released.eq(cc), released.rrc.eq(rrc),
                             wr_en.eq(1), wr_addr.eq(lat.post.conn), wr_data.eq(released)]

            # the segment's copy of its context: taken in HEADER, changed by the steps of the
            # segment, written back in DONE
            with m.Case(Step.HEADER):
                with m.If(self.header_cycle == 1):
                    m.d.sync += c.eq(self.read_data)
            with m.Case(Step.FINISH_TAGGED):
                m.d.sync += [c.tm_v.eq(~seg.last), c.tm_stag.eq(tm.stag), c.tm_to.eq(tm.to),
                             c.tm_len.eq(tm.length)]
            with m.Case(Step.FINISH_UNTAGGED):
                with m.If(self.qn == 1):
                    m.d.sync += c.q1.eq(self.new_queue)
                with m.Elif(self.qn != 0):
                    m.d.sync += c.q2.eq(self.new_queue)
                with m.Elif(seg.last & ~self.at_head):
                    m.d.sync += c.later_done.eq(1)
            with m.Case(Step.COMPLETE_SEND):
                with m.If(self.cq_done):
                    m.d.sync += [c.head.eq(c.head + 1), c.count.eq(c.count - 1),
                                 c.rbase.eq(c.rbase + 1)]
                    with m.If(c.count == 1):
                        m.d.sync += c.later_done.eq(0)
            with m.Case(Step.QUEUE_READ_REQUEST):
                with m.If(self.rrq_done):
                    m.d.sync += [c.rrc.eq(c.rrc + 1), c.q1.eq(0), c.q1.msn.eq(c.q1.msn + 1)]
            with m.Case(Step.REPORT_SENT):
                with m.If(self.term_done):
                    m.d.sync += c.stopped.eq(1)
            with m.Case(Step.DONE):
                m.d.comb += [wr_en.eq(1), wr_addr.eq(seg.entry.conn)]
        with m.If(state == Step.RESTART):
            reset = Signal(ctx_l, name="ctx_reset")
            m.d.comb += [reset.ird.eq(lat.ird), reset.rbase.eq(1), reset.q1.msn.eq(1),
                         reset.q2.msn.eq(1), wr_data.eq(reset)]
        if platform == "formal":
            self._formal(m)
        return m

    def _take(self, m):
        """IDLE: the request taken is latched, and its connection's context row read."""
        take, lat = self.take, self.request
        req_conn = Signal.like(self._rd_conn, name="req_conn")
        m.d.sync += self._rd_conn.eq(req_conn)
        with m.If(take.ctl):
            m.d.comb += req_conn.eq(self.ctl.conn)
            m.d.sync += [lat.post.conn.eq(self.ctl.conn), lat.ird.eq(self.ctl.ird)]
        with m.Elif(take.rq_post):
            m.d.comb += req_conn.eq(self.rq_post.conn)
            m.d.sync += lat.post.eq(self.rq_post)
        with m.Elif(take.rr_done):
            m.d.comb += req_conn.eq(self.rr_done.conn)
            m.d.sync += lat.post.conn.eq(self.rr_done.conn)
        with m.Elif(take.segment):
            m.d.comb += req_conn.eq(self.head_conn)

    def _formal(self, m):
        state, lat, seg = self.state, self.request, self.seg
        m.d.comb += Assert(~self.write.en | (state == Step.IDLE) | (state == Step.CLEAR_CONTROL),
                           "lemma_cx_wr")
        now = self.memory.read_port(domain="comb")
        m.d.comb += now.addr.eq(lat.post.conn)
        with m.Switch(state):
            with m.Case(Step.POST_READ_CONTEXT, Step.RELEASE_READ_CONTEXT, Step.RELEASE_COUNT):
                m.d.comb += Assert(self._rd_conn == lat.post.conn, "lemma_rd_conn")
            with m.Case(Step.POST, Step.RELEASE):
                m.d.comb += [Assert(self._rd_conn == lat.post.conn, "lemma_rd_conn"),
                             Assert(self.read_data.stopped == now.data.stopped, "lemma_cx_rd")]
            with m.Case(Step.HEADER):
                m.d.comb += Assert(self._rd_conn == seg.entry.conn, "lemma_rd_conn")
