"""DDP/RDMAP transmit path: send queues, segmenter, RDMA Read responder, Terminate (RFC 5041 / 5040).

See :class:`DdpTx`. It sits in front of the MPA TX framer (:class:`rnic.hdl.mpa_tx.MpaTxFramer`,
payload :class:`rnic.hdl.mpa_tx.MpaTxBeat`) and turns work requests, inbound RDMA Read Requests
(from :class:`rnic.hdl.ddp_rx.DdpRx`'s ``rrq``) and error reports (``DdpRx.term``) into ULPDUs,
reading payload from host memory over an AXI4 read master. The golden model is
:mod:`rnic.host.model.segment` (:class:`rnic.host.model.segment.TxStream`): every ULPDU is octet for octet what it
gives for the same messages.

Layouts of the host-facing ports: :class:`~rnic.hdl.ddp_tx.layouts.WorkRequest`,
:class:`~rnic.hdl.ddp_tx.layouts.TxConnCfg`, :class:`~rnic.hdl.ddp_tx.layouts.ReadDone`,
:class:`~rnic.hdl.ddp_tx.layouts.TxCompletion`; the memory port is
:class:`rnic.hdl.axi.AXI4ReadSignature`. The layouts it shares with the receive path:
:class:`~rnic.hdl.rdma_layouts.ReadRequestOut`, :class:`~rnic.hdl.rdma_layouts.TermReport`,
:class:`~rnic.hdl.rdma_layouts.StagWrite` and :class:`~rnic.hdl.rdma_layouts.RrDone`.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..axi import AXI4ReadSignature
from ..beat import check_width, conn_bits
from ..mpa_tx import MpaTxBeat
from ..rdma_layouts import ReadRequestOut, RrDone, StagWrite, TermReport
from .conn_queue import ConnQueue
from .emitter import SegmentEmitter
from .fetch import PayloadFetch
from .headers import TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN
from .layouts import ReadDone, TxCompletion, TxConnCfg, WorkRequest, check_depths
from .planner import SegmentPlanner
from .queues import TxQueues
from .segment_start import SegmentStart
from .sequencer import TxSequencer
from .source_check import SourceCheck
from .stag_table import TxStagTable
from .terminate import TerminateBuilder

__all__ = ["DdpTx"]


class DdpTx(wiring.Component):
    """DDP/RDMAP transmit path: work requests, Read Requests and error reports in, ULPDUs out.

    Parameters
    ----------
    width : int
        Datapath width W in octets (4, 8, 16, 32); also the AXI data width.
    connections : int
        Connection contexts (rows of the context memory).
    sq_depth : int
        Work requests that may be queued per connection (power of 2).
    rrq_depth : int
        Inbound RDMA Read Requests that may wait per connection (power of 2, >= the IRD
        the RX side enforces).
    ord_depth : int
        Outbound RDMA Reads that may be outstanding per connection (power of 2); a
        connection's ``ord`` above it acts as ``ord_depth``.
    stags : int
        Rows of the TX copy of the STag table (power of 2); row of an STag = ``stag % stags``.
    addr_width : int
        AXI address width AW (host memory is ``2**AW`` octets; addresses wrap).
    gated : bool
        Whether the connection's state gates transmission (ports ``open_conn``, ``open``);
        without, every connection may send at any time.

    Ports
    -----
    wr : In(stream(WorkRequest))
        Work request posts. Accepted when the connection's send queue has room; while it is
        full ``ready`` stays low (the doorbell waits).
    cfg : In(stream(TxConnCfg))
        Connection (re)start; write it while the connection is idle (queued work and the
        Read Request queue of the connection are dropped without completions).
    stag_w : In(stream(StagWrite))
        TX copy of the STag table (same writes as ``DdpRx.stag_w``; a remote invalidation,
        ``DdpRx.cq`` with ``invalidated``, must be written here too as a row with
        ``valid = 0``). Only the Read Responder looks at it. A write lands in the table 2
        cycles after it is taken (through two registers); ``ready`` is low for a cycle when
        both hold a write while the FSM reads the table (DECIDE).
    rrq : In(stream(ReadRequestOut))
        Validated inbound RDMA Read Requests (``DdpRx.rrq``), queued per connection.
    rr_done : Out(stream(RrDone))
        One Read Request answered (its last Read Response segment left): to ``DdpRx.rr_done``.
        Queued in a FIFO of ``connections * rrq_depth`` entries, so the TX side never waits
        for the RX side (which takes ``rr_done`` only between segments and may itself be
        waiting to hand over a Read Request: a wait here would deadlock the pair). The
        FIFO cannot overflow while every connection's IRD is at most ``rrq_depth``.
    term : In(stream(TermReport))
        ``DdpRx.term``. ``received = 0``: send one Terminate (QN 2, the next QN 2 MSN) with
        the report's ``tlen`` octets of ``term`` as payload, then stop the connection.
        ``received = 1``: stop the connection (outstanding Reads complete with
        REMOTE_ERROR). Either way nothing more is sent on the connection until ``cfg``;
        queued work requests complete with FLUSHED, waiting Read Requests are dropped.
    read_done : In(stream(ReadDone))
        Read Response message arrived (``DdpRx.cq`` with opcode 2): completes the oldest
        outstanding Read of the connection (SUCCESS, or LOCAL_LENGTH when the length
        differs from the request).
    cq : Out(stream(TxCompletion))
        Work request completions.
    o : Out(stream(MpaTxBeat))
        ULPDUs for :class:`rnic.hdl.mpa_tx.MpaTxFramer`: one ULPDU at a time, ``length`` on the
        ``first`` beat, every beat full but the last, never zero octets (a ULPDU holds at
        least its 14- or 18-octet header).
    m_axi : Out(AXI4ReadSignature)
        Payload reads: INCR bursts of at most 16 full-width beats, not crossing 4 KiB
        (``rresp`` is not looked at).
    open_conn : Out(conn), open : In(1)
        (``gated``) ``open`` is 1 when connection ``open_conn`` may send, one cycle after
        ``open_conn`` is set (a read port of the connection state: RTS or CLOSING; not in
        IDLE, WAIT_RX (the MPA fence), ERROR). A turn of a connection that may not send
        sends nothing: its work requests and Read Requests wait, other connections go on.
        Terminates are not held.
    started : Out(stream.Signature(conn, always_ready=True))
        (``gated``) A segment of connection ``payload`` starts (a pulse, a few cycles before
        its first beat leaves on ``o``): Terminates included.

    Operation
    ---------
    One FSM (:class:`~rnic.hdl.ddp_tx.sequencer.TxSequencer`) serves, in priority order,
    ``cfg``, ``term``, ``read_done``, ``rrq``, and then alternately ``wr`` and the
    scheduler. Per-connection state (MSNs, queue pointers, progress of the message at the
    head of each queue, Reads outstanding) is one row of a context memory; the send
    queues, Read Request queues and outstanding Reads are memories too
    (:class:`~rnic.hdl.ddp_tx.queues.TxQueues`).

    The stages, each a component of this package: the queues and the active-connection
    FIFO (:mod:`.queues`, :mod:`.conn_queue`); the segmenter: the plan of each queue
    head's next segment (:mod:`.planner`), the header and start values of the segment
    that starts (:mod:`.segment_start`), the payload reads (:mod:`.fetch`), the output
    beats (:mod:`.emitter`); the Read Responder's STag table and source check
    (:mod:`.stag_table`, :mod:`.source_check`) and its ``rr_done`` FIFO; the Terminates'
    octets (:mod:`.terminate`); the sequencer.

    *Scheduler*: connections with work sit in a FIFO (each at most once). A turn pops
    one connection and sends **one DDP segment** of it, then puts it back if it has
    work left, so connections are served round robin segment by segment. Inside a
    connection the Read Responder and the send queue alternate segment by segment
    (fair interleaving of Read Responses with the connection's untagged messages; a
    message never interleaves with another message of the same queue). Tagged messages
    do not interleave with each other: a Read Response waits for an RDMA Write in
    progress to finish and vice versa, because the receiver (:class:`rnic.host.model.sink.Sink`,
    :class:`rnic.hdl.ddp_rx.DdpRx`) ties consecutive tagged segments of a stream to one
    message (the Read Response completion carries the first segment's STag/TO and the
    summed length). A Read at the head of the
    send queue waits while ``ord`` Reads are outstanding (Read Responses still flow).

    *Segments* (bit-exact with :meth:`rnic.host.model.segment.TxStream.message`): at most the
    connection's MULPDU octets each; untagged MSN per queue from 1, MO from 0; tagged TO
    advancing; L on the last; a zero-length message is one header-only segment. Read
    Requests (18 + 28 octets) and Terminates (18 + ``tlen``) are always one segment.

    *Read Responder*: before the first segment of a non-empty Read Response the source
    (``src_stag``/``src_to``/``size``) is checked against the TX STag table like
    ``DdpRx`` does (row valid with that STag, same connection, remote read right, no TO
    wrap, inside the region's TOs, and still mapped to the ``src_addr`` DdpRx found; the
    response reads from there). A failure (the region changed after the RX side validated
    the request) sends a Terminate with RDMAP Remote
    Protection 1/0, 1/3, 1/2, 1/4 or 1/1, M D R set, the 46-octet segment length, the
    Read Request's DDP header (as a single segment: L, QN 1, its MSN, MO 0) and its 28
    octets, and stops the connection.

    *Completions*: Send and Write when their last segment has left on ``o``; Read on
    ``read_done``; invalid opcodes (and a Read with ``ord`` 0) at once with BAD_REQUEST.

    Latency, throughput and packet boundaries
    -----------------------------------------
    A connection's turn is IDLE (pick), TURN_READ_CONTEXT (context memory read at the
    registered connection), TURN_LOAD_CONTEXT (the context arrives), READ_HEADS (queue
    heads read at the context's pointers and registered), DECIDE (what to send, from
    registers only; the segment's L flag, octets left, room, memory address and TO for
    both queue heads are computed here and registered), PLAN_SQ_SEGMENT / PLAN_RR_SEGMENT
    (the emitter's and the AR side's start values computed from those, per head, and
    registered), then the START_* state that loads the emitter and the AR side (register
    copies only); a segment's first beat is offered 2 cycles after it (the emitter's
    waiting register, then its header registers), 8 cycles after the turn starts, when it
    is header-only or its header fills the first beat, else when the first memory word
    arrives (AR issued in the same cycle). The first segment of a
    Read Response takes 3 more cycles for the source check (STag row registered in
    PLAN_RR_SEGMENT, the region's end and the row's compares, the in-region compare, then
    the decision); a failed check starts its Terminate one cycle after the decision. A
    Read Request and a Terminate of ``term`` need no plan: the Read Request starts in
    START_READ_REQUEST right after DECIDE, the Terminate in TERM_TAKE.
    The context is written back in the first emit cycle (it is updated for after the
    segment when the segment starts: the segment always goes out whole). A segment after
    which nothing is posted ends its turn there: the next turn runs while it goes out, and
    its segment starts as soon as the payload reads of the one going out are all requested
    (the payload fetch takes it; its words queue behind) and waits in the emitter, which
    loads it with the last beat of the one before: no idle cycle between the two. A
    segment that completes a signaled work request or ends a Read Response keeps its turn
    until its last beat; a signaled completion takes one more cycle (``cq``). While payload
    flows ``o`` moves one beat per cycle (the header is merged with the memory words,
    each rotated as the emitter takes it, no bubble at the header/payload seam), limited only by ``o.ready`` and
    the R channel; the AR side keeps bursts in flight for the whole segment (a 32-word R
    FIFO). The emitter's per-beat conditions (memory word needed, last beat, header and
    length masks) are registers computed one beat ahead, so that ``o.valid`` is one gate
    of registers. Measured with cocotbext-axi's AxiRamRead (no pauses), one connection of
    6000-octet signaled RDMA Writes at MULPDU 1460: ``o`` carries 0.993 / 0.984 beats per
    cycle at W = 4 / 8 (the test's bounds: 0.95 / 0.9 / 0.8 / 0.65 at W = 4 / 8 / 16 /
    32). ``o`` carries whole ULPDUs, never interleaved; ``first``/``last`` delimit one
    ULPDU.

    ``cq`` offers a completion 1 cycle after the ULPDU's last beat (Send, Write) or 4
    cycles after ``read_done`` is taken (Read: the outstanding Read's entry registered,
    then the length compare registered); ``rr_done`` is queued in the cycle after the
    last beat of the Read Response (into its FIFO; offered 2 cycles later). IDLE arbitrates among registered copies of the
    request streams' ``valid``: a request is picked at the earliest in the cycle after its
    ``valid`` rises. ``cfg`` is taken 2 cycles after IDLE picks it,
    ``wr``, ``rrq``, ``read_done`` and ``term`` 3 cycles after (the context is read at the
    registered connection, then registered; ``ready`` is high for one cycle); a post
    (``wr``, ``rrq``) takes 4 cycles in all, its context written back in the cycle it is
    taken.
    """

    def __init__(self, *, width=8, connections=16, sq_depth=8, rrq_depth=4, ord_depth=4,
                 stags=256, addr_width=64, gated=False):
        check_width(width)
        check_depths(sq_depth=sq_depth, rrq_depth=rrq_depth, ord_depth=ord_depth, stags=stags)
        if not isinstance(addr_width, int) or not 13 <= addr_width <= 64:
            raise ValueError(f"addr_width must be 13..64, not {addr_width!r}")
        conn_bits(connections)
        self.width = width
        self.connections = connections
        self.sq_depth = sq_depth
        self.rrq_depth = rrq_depth
        self.ord_depth = ord_depth
        self.stags = stags
        self.addr_width = addr_width
        self.gated = bool(gated)
        C = connections
        super().__init__({
            "wr": In(stream.Signature(WorkRequest(connections=C))),
            "cfg": In(stream.Signature(TxConnCfg(connections=C))),
            "stag_w": In(stream.Signature(StagWrite(stags=stags, connections=C))),
            "rrq": In(stream.Signature(ReadRequestOut(connections=C))),
            "rr_done": Out(stream.Signature(RrDone(connections=C))),
            "term": In(stream.Signature(TermReport(connections=C))),
            "read_done": In(stream.Signature(ReadDone(connections=C))),
            "cq": Out(stream.Signature(TxCompletion(connections=C))),
            "o": Out(stream.Signature(MpaTxBeat(width=width, connections=C))),
            "m_axi": Out(AXI4ReadSignature(addr_width=addr_width, data_width=8 * width)),
            **({"open_conn": Out(conn_bits(C)), "open": In(1),
                "started": Out(stream.Signature(conn_bits(C), always_ready=True))}
               if self.gated else {}),
        })

    def elaborate(self, platform):
        m = Module()
        W, C, AW = self.width, self.connections, self.addr_width
        depths = dict(sq_depth=self.sq_depth, rrq_depth=self.rrq_depth, ord_depth=self.ord_depth)
        m.submodules.seq = seq = TxSequencer(width=W, connections=C, addr_width=AW, gated=self.gated,
                                             **depths)
        if self.gated:
            m.d.comb += [self.open_conn.eq(seq.open_conn), seq.open.eq(self.open),
                         self.started.valid.eq(seq.start.any), self.started.payload.eq(seq.conn)]
        m.submodules.queues = queues = TxQueues(connections=C, addr_width=AW, **depths)
        m.submodules.sq_planner = sq_plan = SegmentPlanner(width=W, addr_width=AW, headers=(TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN))
        m.submodules.rr_planner = rr_plan = SegmentPlanner(width=W, addr_width=AW, headers=(TAGGED_HEADER_LEN,))
        m.submodules.stag_table = stags = TxStagTable(stags=self.stags, connections=C, addr_width=AW)
        m.submodules.source_check = check = SourceCheck(connections=C, addr_width=AW)
        m.submodules.terminate = term = TerminateBuilder(width=W, connections=C, addr_width=AW)
        m.submodules.segment_start = start = SegmentStart(width=W, connections=C, addr_width=AW, **depths)
        m.submodules.fetch = fetch = PayloadFetch(width=W, addr_width=AW)
        m.submodules.emitter = emitter = SegmentEmitter(width=W, connections=C)
        m.submodules.rr_done_fifo = rr_done = ConnQueue(connections=C, depth=C * self.rrq_depth)

        # the requests and the completions
        for name in ("cfg", "term", "read_done", "rrq", "wr"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(seq, name))
        wiring.connect(m, seq.cq, wiring.flipped(self.cq))

        # the sequencer and the per-connection state
        for name in ("pick", "ctx_write", "sq_push", "rrq_push", "rd_push", "enlist"):
            wiring.connect(m, getattr(seq, name), getattr(queues, name))
        wiring.connect(m, queues.active, seq.active)
        m.d.comb += [queues.conn.eq(seq.conn), queues.ctx.eq(seq.ctx), seq.ctx_read.eq(queues.ctx_read),
                     seq.sq_read.eq(queues.sq_head), seq.rrq_read.eq(queues.rrq_head),
                     seq.rd_read.eq(queues.rd_head)]

        # the segmenter: the plans of both queue heads, the segment start, the payload
        # reads, the output beats
        c, wre, rqe = seq.ctx, seq.sq_entry, seq.rr_entry
        for planner, base, to, length, off in ((sq_plan, wre.laddr, wre.rto, wre.length, c.sq_off),
                                               (rr_plan, rqe.src_addr, rqe.sink_to, rqe.size, c.rr_off)):
            h = planner.head
            m.d.comb += [h.base.eq(base), h.to.eq(to), h.length.eq(length), h.off.eq(off),
                         h.mulpdu.eq(c.mulpdu), planner.limits.eq(seq.plan_limits),
                         planner.first.eq(seq.deciding)]
        m.d.comb += [sq_plan.head.tagged.eq(seq.sq_tagged),
                     seq.sq_plan.eq(sq_plan.plan), seq.rr_plan.eq(rr_plan.plan),
                     start.kind.eq(seq.start), start.conn.eq(seq.conn), start.ctx.eq(c),
                     start.sq_head.eq(wre), start.rr_head.eq(rqe),
                     start.sq_plan.eq(sq_plan.plan), start.rr_plan.eq(rr_plan.plan),
                     start.terminate.eq(term.headers)]
        wiring.connect(m, start.fetch, fetch.start)
        wiring.connect(m, start.emit, emitter.start)
        wiring.connect(m, fetch.words, emitter.words)
        wiring.connect(m, fetch.m_axi, wiring.flipped(self.m_axi))
        wiring.connect(m, emitter.o, wiring.flipped(self.o))
        # a segment may start while the previous one goes out, once its reads are all
        # requested and no other start waits in the emitter
        m.d.comb += [seq.emit_done.eq(emitter.done), seq.emit_busy.eq(emitter.busy | fetch.busy)]

        # the Read Responder: its STag table and source check, the answered Read Requests
        wiring.connect(m, wiring.flipped(self.stag_w), stags.w)
        m.d.comb += [stags.hold.eq(seq.deciding), stags.index.eq(rqe.src_stag),
                     check.row.eq(stags.row), check.request.eq(rqe), check.conn.eq(seq.conn),
                     check.step.eq(seq.check), seq.check_fail.eq(check.fail)]
        m.d.comb += [rr_done.push.valid.eq(seq.rr_answered.valid),
                     rr_done.push.payload.eq(seq.rr_answered.payload.conn),
                     self.rr_done.valid.eq(rr_done.pop.valid), self.rr_done.payload.conn.eq(rr_done.pop.payload),
                     rr_done.pop.ready.eq(self.rr_done.ready)]

        # the Terminates
        m.d.comb += [term.report.eq(self.term.payload), term.msn.eq(c.msn2), term.request.eq(rqe),
                     term.code.eq(check.code)]
        return m
