"""DDP/RDMAP transmit path: send queues, segmenter, RDMA Read responder, Terminate (RFC 5041 / 5040).

See :class:`DdpTx`. It sits in front of the MPA TX framer (:class:`rnic.hdl.mpa_tx.MpaTxFramer`,
payload :class:`rnic.hdl.mpa_tx.MpaTxBeat`) and turns work requests, inbound RDMA Read Requests
(from :class:`rnic.hdl.ddp_rx.DdpRx`'s ``rrq``) and error reports (``DdpRx.term``) into ULPDUs,
reading payload from host memory over an AXI4 read master. The golden model is
:mod:`rnic.host.model.segment` (:class:`rnic.host.model.segment.TxStream`): every ULPDU is octet for octet what it
gives for the same messages.

Layouts of the host-facing ports: :class:`WorkRequest`, :class:`TxConnCfg`, :class:`ReadDone`,
:class:`TxCompletion`; the memory port is :class:`rnic.hdl.axi.AXI4ReadSignature`. The RX-side layouts
:class:`rnic.hdl.ddp_rx.ReadRequestOut`, :class:`rnic.hdl.ddp_rx.TermReport`,
:class:`rnic.hdl.ddp_rx.StagWrite` and :class:`rnic.hdl.ddp_rx.RrDone` are used unchanged.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from .axi import AXI4ReadSignature
from .beat import check_width, conn_bits
from .ddp_rx import TERM_BYTES, ReadRequestOut, RrDone, StagWrite, TermReport
from .mpa_tx import MpaTxBeat
from .synth_hints import SyncFIFOBuffered, no_rw_collision, one_hot, register_copies

__all__ = [
    "WorkRequest", "TxConnCfg", "ReadDone", "TxCompletion", "DdpTx",
    "TX_STATUS_SUCCESS", "TX_STATUS_LOCAL_LENGTH", "TX_STATUS_BAD_REQUEST",
    "TX_STATUS_REMOTE_ERROR", "TX_STATUS_FLUSHED",
]

# Completion status values (rnic.host.spec.regmap.CqStatus)
TX_STATUS_SUCCESS = 0
TX_STATUS_LOCAL_LENGTH = 1
TX_STATUS_BAD_REQUEST = 3
TX_STATUS_REMOTE_ERROR = 4
TX_STATUS_FLUSHED = 5

_HMAX = 72           # header buffer: 18-octet untagged header + 52-octet Terminate payload, rounded up
_RREQ_HDR = 18 + 28
_BURST = 16          # AXI beats per AR burst at most


# ---------------------------------------------------------------------------- port layouts

class WorkRequest(data.StructLayout):
    """One work request (the SQ_* registers + SQ_CMD.DOORBELL).

    ``opcode`` is :class:`rnic.host.spec.regmap.SqOpcode`: 0 RDMA Write (``length`` octets from
    ``laddr`` to the peer's ``rstag``/``rto``), 1 RDMA Read (``length`` octets from the
    peer's ``rstag``/``rto`` into the local sink ``lstag``/``laddr``: the Read Request
    carries Data Sink STag = ``lstag``, Data Sink TO = ``laddr``), 3 Send, 4 Send with
    Invalidate (of ``inv_stag``), 5 Send with SE, 6 Send with SE and Invalidate; others
    complete with BAD_REQUEST. ``signaled``: complete on success too (errors always do).
    """

    def __init__(self, *, connections):
        super().__init__({
            "opcode": unsigned(4), "signaled": unsigned(1), "conn": unsigned(conn_bits(connections)),
            "laddr": unsigned(64), "length": unsigned(32), "lstag": unsigned(32),
            "rstag": unsigned(32), "rto": unsigned(64), "inv_stag": unsigned(32), "wr_id": unsigned(32),
        })


class TxConnCfg(data.StructLayout):
    """(Re)start a connection's transmit context (CTX_CMD.COMMIT): MSNs of QN 0/1/2 to 1,
    queues empty, no Read outstanding, not stopped; ``mulpdu`` (largest ULPDU_Length sent,
    at least 72 so that a Terminate fits one segment) and ``ord``."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "mulpdu": unsigned(16),
                          "ord": unsigned(14)})


class ReadDone(data.StructLayout):
    """The RX side completed an RDMA Read Response message (``DdpRx.cq`` with opcode 2):
    ``length`` octets arrived. Completes the connection's oldest outstanding Read."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "length": unsigned(32)})


class TxCompletion(data.StructLayout):
    """A finished work request (CQ_* registers with CQ_INFO.QUEUE = SQ).

    ``status`` is :class:`rnic.host.spec.regmap.CqStatus`; ``length`` the octets transferred (0 unless
    SUCCESS or LOCAL_LENGTH); ``opcode`` the work request's.
    """

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)), "wr_id": unsigned(32), "status": unsigned(8),
            "length": unsigned(32), "opcode": unsigned(4),
        })


# ---------------------------------------------------------------------------- internal layouts

class _Ctx(data.StructLayout):
    def __init__(self, *, sq_depth, rrq_depth, ord_depth):
        sb, qb, ob = exact_log2(sq_depth), exact_log2(rrq_depth), exact_log2(ord_depth)
        super().__init__({
            "mulpdu": unsigned(16), "ord": unsigned(14),
            "msn0": unsigned(32), "msn1": unsigned(32), "msn2": unsigned(32),
            "stopped": unsigned(1), "rterm": unsigned(1), "inlist": unsigned(1), "last_sq": unsigned(1),
            "sq_head": unsigned(max(sb, 1)), "sq_count": unsigned(sb + 1), "sq_off": unsigned(32),
            "rr_head": unsigned(max(qb, 1)), "rr_count": unsigned(qb + 1), "rr_off": unsigned(32),
            "rr_started": unsigned(1),
            "rd_head": unsigned(max(ob, 1)), "nreads": unsigned(ob + 1),
        })


class _RdEntry(data.StructLayout):
    def __init__(self):
        super().__init__({"wr_id": unsigned(32), "length": unsigned(32), "signaled": unsigned(1)})


class _StagRow(data.StructLayout):
    def __init__(self, *, connections, addr_width):
        super().__init__({
            "stag": unsigned(32), "base": unsigned(addr_width), "length": unsigned(32),
            "valid": unsigned(1), "rr": unsigned(1), "conn": unsigned(conn_bits(connections)),
        })


def _be(value, nbytes):
    """Octets of ``value`` in network order (first = most significant), as 8-bit slices."""
    return [value[8 * (nbytes - 1 - k):8 * (nbytes - k)] for k in range(nbytes)]


# ---------------------------------------------------------------------------- the block

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

    Operation
    ---------
    One FSM serves, in priority order, ``cfg``, ``term``, ``read_done``, ``rrq``, and
    then alternately ``wr`` and the scheduler. Per-connection state (MSNs, queue
    pointers, progress of the message at the head of each queue, Reads outstanding) is
    one row of a context memory; the send queues, Read Request queues and outstanding
    Reads are memories too.

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
    wrap, inside the region; the TO is the host address). A failure (the region changed
    after the RX side validated the request) sends a Terminate with RDMAP Remote
    Protection 1/0, 1/3, 1/2, 1/4 or 1/1, M D R set, the 46-octet segment length, the
    Read Request's DDP header (as a single segment: L, QN 1, its MSN, MO 0) and its 28
    octets, and stops the connection.

    *Completions*: Send and Write when their last segment has left on ``o``; Read on
    ``read_done``; invalid opcodes (and a Read with ``ord`` 0) at once with BAD_REQUEST.

    Latency, throughput and packet boundaries
    -----------------------------------------
    A connection's turn is IDLE (pick), W_LOAD (context memory read at the registered
    connection), LOAD (the context arrives), SCHED (queue heads
    read at the context's pointers and registered), DECIDE (what to send, from registers
    only; the segment's L flag, octets left, room, memory address and TO for both queue
    heads are computed here and registered), PREP (the emitter's and the AR side's start
    values computed from those, per head, and registered), then the SEG state that loads
    the emitter and the AR side (register copies only); a segment's first beat is offered
    in the cycle after it, 7 cycles after the turn starts, when it is header-only or its
    header fills the first beat, else when the first memory word arrives (AR issued in the
    same cycle). The first segment of a Read Response takes 3 more cycles for the source
    check (STag row registered in PREP, the region's end and the row's compares, the
    in-region compare, then the decision); a failed check starts its Terminate one cycle
    after the decision. A Read Request and a Terminate of ``term`` need no PREP: the Read
    Request starts in SEG_RREQ right after DECIDE, the Terminate in TERM.
    The context is written back in the first emit cycle
    (it is updated for after the segment when the segment starts: the segment always
    goes out whole), so the turn ends with the last beat; a signaled completion takes one
    more cycle (``cq``). While payload flows ``o`` moves one beat per cycle (the header is
    merged with the memory words by a byte rotator, no bubble at the header/payload seam),
    limited only by ``o.ready`` and the R channel; the AR side keeps bursts in flight for
    the whole segment (a 32-word R FIFO). The emitter's per-beat conditions (memory word
    needed, last beat, header and length masks) are registers computed one beat ahead,
    so that ``o.valid`` is one gate of registers. Between segments there are about 7
    cycles of control plus the memory latency: measured with cocotbext-axi's AxiRamRead
    (no pauses), one connection of 6000-octet RDMA Writes at MULPDU 1460, ``o`` carries
    at least 0.95 / 0.9 / 0.8 / 0.65 beats per cycle at W = 4 / 8 / 16 / 32 (the test's
    bounds; prefetching the next segment is the remaining work). ``o`` carries whole
    ULPDUs, never interleaved; ``first``/``last`` delimit one ULPDU.

    ``cq`` offers a completion 1 cycle after the ULPDU's last beat (Send, Write) or 4
    cycles after ``read_done`` is taken (Read: the outstanding Read's entry registered,
    then the length compare registered); ``rr_done`` is queued in the cycle after the
    last beat of the Read Response (into its FIFO; offered one cycle later). IDLE arbitrates among registered copies of the
    request streams' ``valid``: a request is picked at the earliest in the cycle after its
    ``valid`` rises. ``cfg`` is taken 2 cycles after IDLE picks it,
    ``wr``, ``rrq``, ``read_done`` and ``term`` 3 cycles after (the context is read at the
    registered connection, then registered; ``ready`` is high for one cycle); a post
    (``wr``, ``rrq``) takes 4 cycles in all, its context written back in the cycle it is
    taken.
    """

    def __init__(self, *, width=8, connections=16, sq_depth=8, rrq_depth=4, ord_depth=4,
                 stags=256, addr_width=64):
        check_width(width)
        for name, v in (("sq_depth", sq_depth), ("rrq_depth", rrq_depth), ("ord_depth", ord_depth),
                        ("stags", stags)):
            if not isinstance(v, int) or v < 2 or v & (v - 1):
                raise ValueError(f"{name} must be a power of 2 (>= 2), not {v!r}")
        if not isinstance(addr_width, int) or not 13 <= addr_width <= 64:
            raise ValueError("addr_width must be 13..64")
        conn_bits(connections)
        self.width = width
        self.connections = connections
        self.sq_depth = sq_depth
        self.rrq_depth = rrq_depth
        self.ord_depth = ord_depth
        self.stags = stags
        self.addr_width = addr_width
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
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        LW = exact_log2(W)
        C = self.connections
        CB = conn_bits(C)
        AW = self.addr_width
        SQD, SQB = self.sq_depth, exact_log2(self.sq_depth)
        RQD, RQB = self.rrq_depth, exact_log2(self.rrq_depth)
        OD, OB = self.ord_depth, exact_log2(self.ord_depth)
        S, SB = self.stags, exact_log2(self.stags)
        ctx_l = _Ctx(sq_depth=SQD, rrq_depth=RQD, ord_depth=OD)
        wr_l = WorkRequest(connections=C)
        rq_l = ReadRequestOut(connections=C)
        rd_l = _RdEntry()
        row_l = _StagRow(connections=C, addr_width=AW)

        # ---------------------------------------------------------------- memories
        # Marked no_rw_collision (synthesis builds no collision logic, rnic.hdl.synth_hints): the
        # FSM serves one connection at a time and no read it uses is issued in a state that
        # writes: ``ctx`` is written in RRQ, POST, EMIT, WB and the rows used are read in the
        # W_* states;
        # ``sq`` / ``rrq_mem`` are written in POST / RRQ and read for use in LOAD; ``rd`` is
        # written in SEG_RREQ and read for use in RDONE and FLUSH_RD. The STag table's row is
        # read for use in DECIDE (at rqe.src_stag, its data registered in PREP_RR), and its
        # writes wait while the FSM is in DECIDE (below).
        ctxm = no_rw_collision(Memory(shape=ctx_l, depth=C, init=[]))
        sqm = no_rw_collision(Memory(shape=wr_l, depth=C * SQD, init=[]))
        rqm = no_rw_collision(Memory(shape=rq_l, depth=C * RQD, init=[]))
        rdm = no_rw_collision(Memory(shape=rd_l, depth=C * OD, init=[]))
        stm = no_rw_collision(Memory(shape=row_l, depth=S, init=[]))
        m.submodules.ctx = ctxm
        m.submodules.sq = sqm
        m.submodules.rrq_mem = rqm
        m.submodules.rd = rdm
        m.submodules.stag = stm
        # The context is read at a registered address, ``cx_addr`` (the connection IDLE
        # picks, then the one being served): IDLE's arbitration among the input streams ends
        # in that register instead of running into the memory (timing); the row is there two
        # cycles after the pick (a W_* state between IDLE and the state that takes it).
        cx_wr, cx_rd = ctxm.write_port(), ctxm.read_port(domain="sync")
        cx_addr = Signal(CB)
        m.d.comb += cx_rd.addr.eq(cx_addr)
        sq_wr, sq_rd = sqm.write_port(), sqm.read_port(domain="sync")
        rq_wr, rq_rd = rqm.write_port(), rqm.read_port(domain="sync")
        rd_wr, rd_rd = rdm.write_port(), rdm.read_port(domain="sync")
        st_wr, st_rd = stm.write_port(), stm.read_port(domain="sync")
        for p in (cx_rd, sq_rd, rq_rd, rd_rd, st_rd):
            m.d.comb += p.en.eq(1)
        cxd = ctx_l(cx_rd.data)

        def qaddr(conn, idx, bits):
            return Cat(idx[:bits], conn) if bits else conn

        # connections with work, each at most once
        active = SyncFIFOBuffered(width=CB, depth=max(C, 2))
        m.submodules.active = active

        # ---------------------------------------------------------------- STag table writes
        # The write goes through two registers, the write as taken, then the row with the
        # region's end (base + length) in place of its valid bit, and lands in the table two
        # cycles after it is taken (timing: the payload comes from a mux of two sources
        # outside the block, and the valid bit is a 64-bit adder and a compare: only the
        # compare of the registered end is in front of the block RAM's data input). The row
        # waits while the FSM is in DECIDE, the cycle whose read of the table is used, so
        # that the table needs no logic for a read meeting a write (a row half old, half new
        # could pass a check; timing: that logic sat behind the block RAM's output):
        # ``ready`` is low for that cycle when both registers are full.
        st_busy = Signal()             # the FSM is in DECIDE
        sw = Signal(StagWrite(stags=S, connections=C), name="sw_q")
        sw_v = Signal()
        wrow = Signal(row_l)
        wrow_i = Signal(SB)
        wrow_v = Signal()
        wrow_ok = Signal()             # the write's valid bit
        wrow_end = Signal(65)          # base + length (the row is valid if <= 2**AW)
        w_adv = Signal()               # the row register takes sw_q
        m.d.comb += [w_adv.eq(~(wrow_v & st_busy)), self.stag_w.ready.eq(w_adv | ~sw_v)]
        with m.If(self.stag_w.ready):
            m.d.sync += [sw.eq(self.stag_w.payload), sw_v.eq(self.stag_w.valid)]
        with m.If(w_adv):
            m.d.sync += [
                wrow.stag.eq(sw.stag), wrow.base.eq(sw.base[:AW]), wrow.length.eq(sw.length),
                wrow_ok.eq(sw.valid), wrow_end.eq(sw.base + sw.length),
                wrow.rr.eq(sw.remote_read), wrow.conn.eq(sw.conn),
                wrow_i.eq(sw.index[:SB]), wrow_v.eq(sw_v),
            ]
        m.d.comb += [wrow.valid.eq(wrow_ok & (wrow_end <= (1 << AW))),
                     st_wr.addr.eq(wrow_i), st_wr.data.eq(wrow), st_wr.en.eq(wrow_v & ~st_busy)]

        # ---------------------------------------------------------------- AXI read side
        axi = self.m_axi
        rf = SyncFIFOBuffered(width=8 * W, depth=32)
        m.submodules.rfifo = rf
        m.d.comb += [rf.w_data.eq(axi.rdata), rf.w_en.eq(axi.rvalid), axi.rready.eq(rf.w_rdy)]
        ar_addr = Signal(AW)
        ar_left = Signal(18)           # words still to request
        # words from ar_addr to the next 4 KiB boundary, a register kept in step with ar_addr
        # (timing: it was a subtract in front of the burst length compares and the address adder)
        to4k = Signal(13 - LW + 1)
        # burst length = min(ar_left, to4k, 16): its two cases as conditions on registers, and
        # every register's next value for each case computed beside them, selected late
        # (timing: the length no longer feeds adders)
        b_left = Signal()              # the burst is the rest of the segment (ar_left words)
        b_4k = Signal()                # else it ends on the 4 KiB boundary (to4k words)
        m.d.comb += [b_left.eq((ar_left < _BURST) & (ar_left <= to4k)), b_4k.eq(to4k <= _BURST)]
        m.d.comb += [
            axi.arid.eq(0), axi.araddr.eq(ar_addr),
            axi.arlen.eq(Mux(b_left, ar_left - 1, Mux(b_4k, to4k - 1, _BURST - 1))), axi.arsize.eq(LW),
            axi.arburst.eq(1), axi.arvalid.eq(ar_left != 0),
        ]
        ar_set = Signal()
        ar_set_addr = Signal(AW)
        ar_set_words = Signal(18)
        ar_set_to4k = Signal.like(to4k)
        with m.If(ar_set):
            m.d.sync += [ar_addr.eq(ar_set_addr), ar_left.eq(ar_set_words), to4k.eq(ar_set_to4k)]
        with m.Elif(axi.arvalid & axi.arready):
            with m.If(b_left):
                # the segment's last burst: ar_addr and to4k are reloaded before they matter
                m.d.sync += ar_left.eq(0)
            with m.Elif(b_4k):
                # a burst never crosses 4 KiB: one that ends on it steps the address bits above 11
                m.d.sync += [ar_left.eq(ar_left - to4k), ar_addr[:12].eq(0),
                             ar_addr[12:].eq(ar_addr[12:] + 1), to4k.eq(4096 >> LW)]
            with m.Else():
                m.d.sync += [ar_left.eq(ar_left - _BURST), ar_addr[:12].eq(ar_addr[:12] + (_BURST << LW)),
                             to4k.eq(to4k - _BURST)]

        # ---------------------------------------------------------------- segment emitter
        hsh = Signal(8 * _HMAX)        # header (+ inline payload) octets not yet sent, octet 0 first
        hrem = Signal(range(_HMAX + 1))
        tot = Signal(17)               # octets of the ULPDU from the current beat on
        t = Signal(signed(20))         # index of the memory word that the current beat ends in
        lastw = Signal(signed(20))     # index of the last memory word (-1: none)
        prev = Signal(8 * W)
        e_first = Signal()
        e_len = Signal(16)
        e_done = Signal()
        e_conn = Signal(conn_bits(self.connections))
        pre = Signal()                 # load memory word 0 into ``prev`` first (when lo >= header)
        cq_after = Signal()            # the segment completes a work request: CQ_END after EMIT
        push_rrd = Signal()            # the segment ends a Read Response: rr_done at its last beat
        # The following are registers kept in step with hrem/tot/t (registered for timing:
        # they gate o.valid, whose handshake enables the wide hsh/prev/rotator registers, and
        # would otherwise be wide compares in front of that enable).
        emitting = Signal()            # a ULPDU is being emitted (the EMIT state)
        need = Signal()                # the current beat takes a memory word: 0 <= t <= lastw
        last_beat = Signal()           # tot <= W
        hmask = Signal(W)              # octet b of the beat comes from hsh: b < hrem
        tmask = Signal(W)              # octet b of the beat is in the ULPDU: b < tot

        cur = Signal(8 * W)
        m.d.comb += cur.eq(Mux(need, rf.r_data, 0))
        win = Signal(16 * W)
        m.d.comb += win.eq(Cat(prev, cur))
        rdat = Signal(8 * W)
        # the rotation (octets of ``prev`` skipped): each output octet's multiplexer has its
        # own copy (timing: one register fanning out to all of them was on the critical
        # path); all are loaded together when a segment starts
        rot_c = register_copies(max(LW, 1), W, name="rot_c")
        for b in range(W):
            # (a Switch: one multiplexer tree, not a chain of W priority levels)
            with m.Switch(rot_c[b]):
                for r in range(W):
                    with m.Case(r):
                        m.d.comb += rdat[8 * b:8 * b + 8].eq(win[8 * (r + b):8 * (r + b) + 8])
        outd = Signal(8 * W)
        for b in range(W):
            m.d.comb += outd[8 * b:8 * b + 8].eq(
                Mux(tmask[b], Mux(hmask[b], hsh[8 * b:8 * b + 8], rdat[8 * b:8 * b + 8]), 0))
        o = self.o
        m.d.comb += [
            o.payload.data.eq(outd), o.payload.n.eq(Mux(last_beat, tot[:LW + 1], W)),
            o.payload.first.eq(e_first), o.payload.last.eq(last_beat),
            o.payload.length.eq(e_len), o.payload.conn.eq(e_conn),
            o.valid.eq(emitting & ~pre & (~need | rf.r_rdy)),
        ]
        with m.If(emitting & pre & rf.r_rdy):
            m.d.comb += rf.r_en.eq(1)
            m.d.sync += [prev.eq(rf.r_data), pre.eq(0)]
        with m.If(o.valid & o.ready):
            m.d.sync += [
                hsh.eq(hsh >> (8 * W)), hrem.eq(Mux(hrem > W, hrem - W, 0)), tot.eq(tot - W),
                t.eq(t + 1), e_first.eq(0),
                # the same flags for the next beat (hrem - W, tot - W, t + 1)
                need.eq((t >= -1) & (t < lastw)), last_beat.eq(tot <= 2 * W),
                hmask.eq(Cat(*[hrem > b + W for b in range(W)])),
                tmask.eq(Cat(*[tot > b + W for b in range(W)])),
            ]
            with m.If(need):
                m.d.comb += rf.r_en.eq(1)
                m.d.sync += prev.eq(cur)
            m.d.comb += e_done.eq(last_beat)
            with m.If(last_beat):
                m.d.sync += [emitting.eq(0), cq_after.eq(0), push_rrd.eq(0)]

        # Parameters of the next payload segment of either queue head (SEG_SQ / SEG_RR), in
        # two register stages so that no cycle of a segment start does more than one step
        # (timing: the start was a head select, adders and compares and the load of the
        # emitter in one cycle). DECIDE registers per head: the segment is the message's last,
        # the octets left of the message (a last segment's payload, at most MULPDU octets:
        # the low 16 bits), the segment room, whether nothing is left, the payload address,
        # the TO, and from the low address bits the rotator amount and the header-only beats.
        # In the cycle after DECIDE (PREP_SQ / PREP_RR) the emitter's and the AR side's start
        # values are computed from these, per head (no select of the head in front of the
        # adders and compares), and registered (``_prep`` below); the segment start (go_*)
        # only copies registers.
        def _head(name):
            return dict(
                last=Signal(name=f"{name}_last"), rem=Signal(16, name=f"{name}_rem"),
                room=Signal(16, name=f"{name}_room"), eqoff=Signal(name=f"{name}_eqoff"),
                addr=Signal(AW, name=f"{name}_addr"), to=Signal(64, name=f"{name}_to"),
                rot=Signal(max(LW, 1), name=f"{name}_rot"),
                # lo - 1, lo + W - 1, W - lo: registered so that the second stage has one adder
                lo_m1=Signal(signed(LW + 2), name=f"{name}_lo_m1"), lo_w=Signal(LW + 1, name=f"{name}_lo_w"),
                w_lo=Signal(LW + 1, name=f"{name}_w_lo"),
                k=Signal(8, name=f"{name}_k"),
                # second stage (``_prep``)
                n=Signal(16, name=f"{name}_n"), nz=Signal(name=f"{name}_nz"),
                tot=Signal(17, name=f"{name}_tot"), t=Signal(signed(20), name=f"{name}_t"),
                lastw=Signal(signed(20), name=f"{name}_lastw"),
                pre=Signal(name=f"{name}_pre"), need=Signal(name=f"{name}_need"),
                last_beat=Signal(name=f"{name}_lb"),
                hmask=Signal(W, name=f"{name}_hmask"), tmask=Signal(W, name=f"{name}_tmask"),
                words=Signal(18, name=f"{name}_words"), to4k=Signal.like(to4k, name=f"{name}_to4k"),
            )
        hsq, hrr = _head("sq"), _head("rr")
        sq_last, sq_to, rr_last, rr_to = hsq["last"], hsq["to"], hrr["last"], hrr["to"]

        def _prep(h, hl, tagged=None):
            """Second stage of head ``h``: its header is ``hl`` octets, or ``hl[0]`` if
            ``tagged`` else ``hl[1]`` (constants: the compares against them fold)."""
            def by_hl(f):
                return f(hl) if tagged is None else Mux(tagged, f(hl[0]), f(hl[1]))
            n = Signal(16, name=f"{h['n'].name}_d")
            nz = Signal(name=f"{h['nz'].name}_d")
            endw = Signal(18, name=f"{h['n'].name}_endw")
            k = h["k"]
            m.d.comb += [n.eq(Mux(h["last"], h["rem"], h["room"])), nz.eq(~(h["last"] & h["eqoff"])),
                         endw.eq((n + h["lo_m1"]) >> LW)]
            m.d.sync += [
                h["n"].eq(n), h["nz"].eq(nz),
                h["tot"].eq(n + by_hl(lambda v: Const(v, 8))),
                h["t"].eq(1 - k),
                h["lastw"].eq(Mux(nz, endw, -1)),
                h["pre"].eq((k == 0) & nz),
                # need = 0 <= t <= endw with t = 1 - k
                h["need"].eq(nz & ((k == 1) | ((k == 0) & (n > h["w_lo"])))),
                h["last_beat"].eq(by_hl(lambda v: n <= W - v)),
                h["tmask"].eq(by_hl(lambda v: Cat(*[n > b - v for b in range(W)]))),
                h["hmask"].eq(by_hl(lambda v: Const(sum(1 << b for b in range(W) if v > b), W))),
                h["words"].eq(Mux(nz, (n + h["lo_w"]) >> LW, 0)),
                h["to4k"].eq((4096 - Cat(Const(0, LW), h["addr"][LW:12])) >> LW),
            ]

        def untagged_hdr(last, opcode, inval, qn, msn, mo):
            return ([Const(0x01, 8) | (last << 6), Const(0x40, 8) | opcode]
                    + _be(inval, 4) + _be(Const(qn, 32) if isinstance(qn, int) else qn, 4)
                    + _be(msn, 4) + _be(mo, 4))

        def tagged_hdr(last, opcode, stag, to):
            return [Const(0x81, 8) | (last << 6), Const(0x40, 8) | opcode] + _be(stag, 4) + _be(to, 8)

        def pad(lst):
            return lst + [Const(0, 8)] * (_HMAX - len(lst))

        # ---------------------------------------------------------------- control FSM
        load_now = Signal()            # IDLE picked a request: read its context now
        load_conn = Signal(CB)
        ld_c = Signal()                # c <= the context read (the cycle after IDLE's pick)
        go_sq = Signal()               # in SEG_SQ
        go_sqt = Signal()              # in SEG_SQ, a tagged segment (RDMA Write)
        go_squ = Signal()              # in SEG_SQ, an untagged segment (Send)
        go_rr = Signal()               # in SEG_RR
        go_rreq = Signal()             # in SEG_RREQ
        go_term = Signal()             # in TERM, and it sends a Terminate
        go_chk = Signal()              # in RRCHK_TERM (the check failed: Terminate)
        go_pay = Signal()              # go_sq | go_rr: a payload segment starts
        go_any = Signal()              # one of the go_* flags
        rrq_hold = Signal()            # the Read Request queue of rrq's connection is full
        c = Signal(ctx_l)              # context of the connection being served
        conn = Signal(CB)
        popped = Signal()              # conn came out of the active FIFO this turn
        prefer_post = Signal()
        wre = Signal(wr_l)             # send queue head
        rqe = Signal(rq_l)             # Read Request queue head
        rde = Signal(rd_l)             # oldest outstanding Read (registered for timing: BRAM clk-to-out)
        wbp = Signal()                 # write the context back in the first EMIT cycle
        cq_p = Signal(TxCompletion(connections=C))
        cq_force = Signal()
        m.d.comb += self.cq.payload.eq(cq_p)
        # rr_done never makes the FSM wait (DdpRx takes it only between segments, and may
        # itself wait for ``rrq``): unacknowledged ones per connection <= IRD <= rrq_depth
        rrdf = SyncFIFOBuffered(width=CB, depth=C * RQD)
        m.submodules.rr_done_fifo = rrdf
        # (queued a cycle after the Read Response's last beat, from registers: timing, the
        # output handshake is not in front of the FIFO's level)
        rrd_push = Signal()
        rrd_conn = Signal(CB)
        m.d.sync += [rrd_push.eq(e_done & push_rrd), rrd_conn.eq(conn)]
        m.d.comb += [self.rr_done.payload.conn.eq(rrdf.r_data), self.rr_done.valid.eq(rrdf.r_rdy),
                     rrdf.r_en.eq(self.rr_done.ready), rrdf.w_data.eq(rrd_conn),
                     rrdf.w_en.eq(rrd_push)]
        m.d.comb += [cx_wr.en.eq(0), cx_wr.addr.eq(conn), cx_wr.data.eq(c)]
        m.d.comb += [sq_wr.en.eq(0), rq_wr.en.eq(0), rd_wr.en.eq(0)]
        # the queue memories' write addresses and data do not depend on the state, only their
        # enables do (timing: a state decode was in front of the block RAM address inputs)
        ent = Signal(rd_l, name="rd_entry")
        m.d.comb += [
            sq_wr.addr.eq(qaddr(conn, (c.sq_head + c.sq_count)[:max(SQB, 1)], SQB)),
            sq_wr.data.eq(self.wr.payload),
            rq_wr.addr.eq(qaddr(conn, (c.rr_head + c.rr_count)[:max(RQB, 1)], RQB)),
            rq_wr.data.eq(self.rrq.payload),
            ent.wr_id.eq(wre.wr_id), ent.length.eq(wre.length), ent.signaled.eq(wre.signaled),
            rd_wr.addr.eq(qaddr(conn, (c.rd_head + c.nreads)[:max(OB, 1)], OB)), rd_wr.data.eq(ent),
        ]
        m.d.comb += [sq_rd.addr.eq(qaddr(conn, cxd.sq_head, SQB)),
                     rq_rd.addr.eq(qaddr(conn, cxd.rr_head, RQB)),
                     rd_rd.addr.eq(qaddr(conn, c.rd_head, OB)),
                     st_rd.addr.eq(rqe.src_stag[:SB])]
        m.d.sync += cx_addr.eq(Mux(load_now, load_conn, conn))
        ord_eff = Signal(15)
        m.d.comb += ord_eff.eq(Mux(c.ord > OD, OD, c.ord))
        # a connection listed by a write-back enters the active FIFO a cycle later, from
        # registers (timing: the state decode ran into the FIFO's level and storage enables)
        act_push = Signal()
        act_push_q = Signal()
        act_conn_q = Signal(CB)
        m.d.sync += [act_push_q.eq(act_push), act_conn_q.eq(conn)]
        m.d.comb += [active.w_en.eq(act_push_q), active.w_data.eq(act_conn_q)]
        has_work = Signal()
        m.d.comb += has_work.eq((c.sq_count != 0) | (c.rr_count != 0) | (c.stopped & (c.nreads != 0)))

        def complete(wr_id, status, length, opcode, force=1):
            m.d.sync += [cq_p.conn.eq(conn), cq_p.wr_id.eq(wr_id), cq_p.status.eq(status),
                         cq_p.length.eq(length), cq_p.opcode.eq(opcode), cq_force.eq(force)]

        def sq_pop():
            m.d.sync += [c.sq_head.eq(c.sq_head + 1), c.sq_count.eq(c.sq_count - 1), c.sq_off.eq(0)]

        def rr_pop():
            m.d.sync += [c.rr_head.eq(c.rr_head + 1), c.rr_count.eq(c.rr_count - 1), c.rr_off.eq(0),
                         c.rr_started.eq(0)]

        def write_back(sq_inc=None, rr_inc=None):
            """Write ``c`` back (with ``sq_count``/``rr_count`` one higher if ``sq_inc``/``rr_inc``)
            and list the connection if it has work."""
            listed = c.inlist & ~popped
            work = has_work
            nc = Signal(ctx_l, name="wb_ctx")
            m.d.comb += nc.eq(c)
            if sq_inc is not None:
                m.d.comb += nc.sq_count.eq(c.sq_count + sq_inc)
                work = work | sq_inc
            if rr_inc is not None:
                m.d.comb += nc.rr_count.eq(c.rr_count + rr_inc)
                work = work | rr_inc
            m.d.comb += [nc.inlist.eq(work | listed), cx_wr.en.eq(1), cx_wr.data.eq(nc)]
            with m.If(work & ~listed):
                m.d.comb += act_push.eq(1)

        # Segment parameters of both queue heads, computed in DECIDE from registers for the
        # SEG_SQ / SEG_RR that may follow (registered for timing: they were a subtract, a
        # compare, a mux and the emitter's adders in one cycle)
        room14 = Signal(16)            # c.mulpdu - 14 (tagged header), registered in SCHED
        room18 = Signal(16)            # c.mulpdu - 18 (untagged header)
        lim14 = Signal(33)             # c.sq_off + room14: the SQ head's segment is its last if
        lim18 = Signal(33)             # its length is at most this (registered in SCHED)
        rlim = Signal(33)              # c.rr_off + room14, the same for the Read Response
        # conditions on the context for DECIDE, registered in SCHED (timing: compares on c
        # were in front of the decision and the completion registers' enables)
        f_sq = Signal()                # send queue not empty
        f_rr = Signal()                # Read Request queue not empty
        f_sqoff = Signal()             # the SQ head's message is under way (sq_off != 0)
        f_ord = Signal()               # a Read may be sent (fewer than ORD outstanding, or ord 0)
        f_ord0 = Signal()              # ord == 0
        f_nreads = Signal()            # Reads outstanding
        op0 = Signal()                 # the SQ head is an RDMA Write (tagged)
        op1 = Signal()                 # ... an RDMA Read
        opbad = Signal()               # ... an invalid opcode
        sq_tagged = op0
        # Read Responder source check (registered for timing: BRAM clk-to-out, then compares)
        srow = Signal(row_l)
        s_ends = Signal(65)            # src_to + size
        s_rend = Signal(AW + 33)       # row base + length
        s_lo_ok = Signal()             # src_to inside the address space and >= row base
        s_bad0 = Signal()              # row invalid or another STag     } registered in RRCHK1
        s_bad3 = Signal()              # row of another connection        } (timing: wide compares
        s_bad2 = Signal()              # no remote read right             } in front of the
        s_bad4 = Signal()              # src_to + size wraps              } priority of RRCHK)
        chk_fail = Signal()
        chk_code = Signal(8)
        rr_chk = Signal()              # the Read Response's first non-empty segment: check first
        rd_ok = Signal()               # Read completion: the length is the requested one

        # the emitter's start values of both queue heads, from DECIDE's registers (see _prep)
        _prep(hsq, (14, 18), tagged=op0)
        _prep(hrr, 14)
        # the same of a Terminate from ``term`` (its payload is stable while it waits)
        t_hl = Signal(8)
        t_hmask = Signal(W)
        t_lb = Signal()
        t_hlv = 18 + self.term.payload.tlen
        m.d.sync += [t_hl.eq(t_hlv), t_hmask.eq(Cat(*[t_hlv > b for b in range(W)])), t_lb.eq(t_hlv <= W)]

        # IDLE arbitrates among registered copies of the request streams' valid (timing: a
        # valid from outside ran through the arbitration into the context address, the active
        # FIFO's read side and the state register). A request is seen one cycle after its
        # valid rises; the copy is cleared by the transfer (valid & ~ready), so a taken request
        # is never picked again.
        v_cfg, v_term, v_rdone, v_rrq, v_wr = (Signal(name=f"v_{n}")
                                               for n in ("cfg", "term", "rdone", "rrq", "wr"))
        m.d.sync += [v.eq(st.valid & ~st.ready) for v, st in ((v_cfg, self.cfg), (v_term, self.term),
                     (v_rdone, self.read_done), (v_rrq, self.rrq), (v_wr, self.wr))]

        m.d.sync += [ld_c.eq(0), go_sq.eq(0), go_sqt.eq(0), go_squ.eq(0), go_rr.eq(0), go_rreq.eq(0),
                     go_term.eq(0), go_chk.eq(0), go_pay.eq(0), go_any.eq(0)]
        waits = {}                     # state after a W_* state -> whether it loads the context
        with m.FSM(name="tx") as fsm:
            with m.State("IDLE"):
                m.d.sync += popped.eq(0)

                def pick(nconn, state, load=True):
                    m.d.comb += [load_now.eq(1), load_conn.eq(nconn)]
                    m.d.sync += conn.eq(nconn)
                    waits[state] = load
                    m.next = "W_" + state
                with m.If(v_cfg):
                    pick(self.cfg.payload.conn, "CFG", load=False)
                with m.Elif(v_term):
                    pick(self.term.payload.conn, "TERM_LD")
                with m.Elif(v_rdone):
                    pick(self.read_done.payload.conn, "RDONE_LD")
                with m.Elif(v_rrq & ~rrq_hold):
                    pick(self.rrq.payload.conn, "RRQ_LD")
                with m.Elif(v_wr & (prefer_post | ~active.r_rdy)):
                    pick(self.wr.payload.conn, "POST_LD")
                    m.d.sync += prefer_post.eq(0)
                with m.Elif(active.r_rdy):
                    m.d.comb += active.r_en.eq(1)
                    pick(active.r_data, "LOAD")
                    m.d.sync += [popped.eq(1), prefer_post.eq(1), rrq_hold.eq(0)]

            # the context of ``conn`` is read at ``cx_addr`` here; it arrives in the next state
            for state, load in waits.items():
                with m.State("W_" + state):
                    m.d.sync += ld_c.eq(int(load))
                    m.next = state

            with m.State("CFG"):
                p = self.cfg.payload
                m.d.comb += self.cfg.ready.eq(1)
                m.d.sync += [c.eq(0), c.inlist.eq(cxd.inlist), c.mulpdu.eq(p.mulpdu), c.ord.eq(p.ord),
                             c.msn0.eq(1), c.msn1.eq(1), c.msn2.eq(1)]
                m.next = "WB"

            # *_LD and LOAD: the context arrives and is registered into c (ld_c, below the FSM)
            with m.State("TERM_LD"):
                sends = ~cxd.stopped & ~self.term.payload.received
                m.d.sync += [go_term.eq(sends), go_any.eq(sends)]
                m.next = "TERM"

            with m.State("TERM"):
                p = self.term.payload
                m.d.comb += self.term.ready.eq(1)
                with m.If(c.stopped):
                    m.next = "WB"
                with m.Elif(p.received):
                    m.d.sync += [c.stopped.eq(1), c.rterm.eq(1)]
                    m.next = "WB"
                with m.Else():
                    # (go_term: the Terminate starts, below the FSM)
                    m.d.sync += [c.stopped.eq(1), c.msn2.eq(c.msn2 + 1)]
                    m.next = "EMIT"

            with m.State("RDONE_LD"):
                m.next = "RDONE"

            with m.State("RDONE"):
                m.d.comb += self.read_done.ready.eq(1)
                with m.If(~c.stopped & (c.nreads != 0)):
                    m.d.sync += wre.length.eq(self.read_done.payload.length)
                    m.next = "RDONE2"
                with m.Else():
                    m.next = "WB"

            with m.State("RDONE2"):
                # rd_rd address followed c.rd_head in RDONE; registered for timing (BRAM clk-to-out
                # into a 32-bit compare)
                m.d.sync += rde.eq(rd_rd.data)
                m.next = "RDONE3"

            with m.State("RDONE3"):
                # the length compare registered (timing: a 32-bit compare in front of the
                # completion registers)
                m.d.sync += rd_ok.eq(rde.length == wre.length)
                m.next = "RDONE4"

            with m.State("RDONE4"):
                complete(rde.wr_id, Mux(rd_ok, TX_STATUS_SUCCESS, TX_STATUS_LOCAL_LENGTH), wre.length, 1,
                         force=~rd_ok | rde.signaled)
                m.d.sync += [c.rd_head.eq(c.rd_head + 1), c.nreads.eq(c.nreads - 1)]
                m.next = "CQ"

            with m.State("RRQ_LD"):
                m.next = "RRQ"

            with m.State("RRQ"):
                # the context is written back here (with the Read Request counted)
                acc = Signal(name="rrq_acc")
                with m.If(c.stopped):
                    m.d.comb += self.rrq.ready.eq(1)          # dropped
                with m.Elif(c.rr_count < RQD):
                    m.d.comb += [self.rrq.ready.eq(1), rq_wr.en.eq(1), acc.eq(1)]
                with m.Else():
                    m.d.sync += rrq_hold.eq(1)
                write_back(rr_inc=acc)
                m.next = "IDLE"

            with m.State("POST_LD"):
                m.next = "POST"

            with m.State("POST"):
                # the context is written back here (with the work request counted)
                acc = Signal(name="post_acc")
                with m.If(c.sq_count < SQD):
                    m.d.comb += [self.wr.ready.eq(1), sq_wr.en.eq(1), acc.eq(1)]
                write_back(sq_inc=acc)
                m.next = "IDLE"

            with m.State("LOAD"):
                # context arrives (into c); queue heads are read at its pointers
                m.next = "SCHED"

            with m.State("SCHED"):
                # queue heads at the context's pointers (addresses followed cxd in LOAD),
                # registered for timing (BRAM clk-to-out); DECIDE looks at them
                wop = wr_l(sq_rd.data).opcode
                m.d.sync += [wre.eq(sq_rd.data), rqe.eq(rq_rd.data),
                             op0.eq(wop == 0), op1.eq(wop == 1),
                             opbad.eq(~((wop == 0) | (wop == 1) | (wop == 3) | (wop == 4) | (wop == 5) |
                                        (wop == 6))),
                             room14.eq(c.mulpdu - 14), room18.eq(c.mulpdu - 18),
                             lim14.eq(c.sq_off + (c.mulpdu - 14)), lim18.eq(c.sq_off + (c.mulpdu - 18)),
                             rlim.eq(c.rr_off + (c.mulpdu - 14)),
                             f_sq.eq(c.sq_count != 0), f_rr.eq(c.rr_count != 0), f_sqoff.eq(c.sq_off != 0),
                             f_ord.eq((c.nreads < ord_eff) | (c.ord == 0)), f_ord0.eq(c.ord == 0),
                             f_nreads.eq(c.nreads != 0)]
                m.next = "DECIDE"

            with m.State("DECIDE"):
                m.d.comb += st_busy.eq(1)
                # tagged messages never interleave on a stream (the receiver, rnic.host.model.sink and
                # DdpRx, ties consecutive tagged segments to one message): a Write in progress
                # holds off Read Responses and a Read Response in progress holds off Writes
                wr_mid = f_sq & op0 & f_sqoff
                rr_mid = f_rr & c.rr_started
                sq_ok = f_sq & (~op1 | f_ord) & ~(rr_mid & op0)
                rr_ok = f_rr & ~wr_mid
                rr_sel = Signal()
                m.d.comb += rr_sel.eq(rr_ok & (~sq_ok | c.last_sq))
                # the first stage of the payload segment of both heads, for PREP_* / SEG_*
                # (the segment room is compared in parallel with the subtraction: rem <= room
                # as length <= off + room; each head into its own registers, as yosys would
                # share the two heads' adders behind a mux of their inputs if one register
                # took either)
                tagged = op0
                # the rotator amount and the header-only beats from the low address bits
                # alone (small adders)
                for h, lo_v, hl_v in ((hsq, wre.laddr[:LW] + c.sq_off[:LW], Mux(tagged, 14, 18)),
                                      (hrr, rqe.src_to[:LW] + c.rr_off[:LW], Const(14, 8))):
                    h_lo = Signal(max(LW, 1), name=f"{h['rot'].name[:2]}_lo")
                    h_hl = Signal(8, name=f"{h['rot'].name[:2]}_hl")
                    h_rot = Signal(max(LW, 1), name=f"{h['rot'].name}_d")
                    if LW:
                        m.d.comb += h_lo.eq(lo_v)
                    m.d.comb += [h_hl.eq(hl_v), h_rot.eq((h_lo - h_hl)[:LW] if LW else 0)]
                    m.d.sync += [h["rot"].eq(h_rot), h["k"].eq((h_rot + h_hl - h_lo) >> LW),
                                 h["lo_m1"].eq(h_lo - 1), h["lo_w"].eq(h_lo + (W - 1)),
                                 h["w_lo"].eq(W - h_lo)]
                m.d.sync += [
                    hsq["last"].eq(Mux(tagged, wre.length <= lim14, wre.length <= lim18)),
                    hsq["rem"].eq((wre.length - c.sq_off)[:16]), hsq["room"].eq(Mux(tagged, room14, room18)),
                    hsq["eqoff"].eq(wre.length == c.sq_off),
                    hsq["addr"].eq((wre.laddr + c.sq_off)[:AW]), hsq["to"].eq((wre.rto + c.sq_off)[:64]),
                    hrr["last"].eq(rqe.size <= rlim),
                    hrr["rem"].eq((rqe.size - c.rr_off)[:16]), hrr["room"].eq(room14),
                    hrr["eqoff"].eq(rqe.size == c.rr_off),
                    hrr["addr"].eq((rqe.src_to + c.rr_off)[:AW]), hrr["to"].eq((rqe.sink_to + c.rr_off)[:64]),
                    # (for PREP_RR: registered, not in front of the next state)
                    rr_chk.eq(~c.rr_started & (rqe.size != 0)),
                ]
                with m.If(c.stopped):
                    with m.If(f_nreads):
                        m.next = "FLUSH_RD"
                    with m.Elif(f_sq):
                        m.next = "SQ_DROP"
                    with m.Else():
                        m.d.sync += [c.rr_count.eq(0), c.rr_off.eq(0), c.rr_started.eq(0)]
                        m.next = "WB"
                with m.Elif(rr_sel):
                    m.d.sync += c.last_sq.eq(0)
                    m.next = "PREP_RR"
                with m.Elif(sq_ok):
                    m.d.sync += c.last_sq.eq(1)
                    with m.If(opbad | (op1 & f_ord0)):
                        m.next = "SQ_DROP"
                    with m.Elif(op1):
                        m.d.sync += [go_rreq.eq(1), go_any.eq(1)]
                        m.next = "SEG_RREQ"
                    with m.Else():
                        m.next = "PREP_SQ"
                with m.Else():
                    m.next = "WB"

            with m.State("PREP_SQ"):
                # the SQ head's second stage is registered (_prep)
                m.d.sync += [go_sq.eq(1), go_sqt.eq(op0), go_squ.eq(~op0), go_pay.eq(1), go_any.eq(1)]
                m.next = "SEG_SQ"

            with m.State("PREP_RR"):
                # the Read Response head's second stage is registered (_prep); and for the
                # source check of a first segment, the STag row of rqe.src_stag (address
                # stable since SCHED)
                m.d.sync += [srow.eq(st_rd.data), s_ends.eq(rqe.src_to + rqe.size)]
                with m.If(rr_chk):
                    m.next = "RRCHK1"
                with m.Else():
                    m.d.sync += [go_rr.eq(1), go_pay.eq(1), go_any.eq(1)]
                    m.next = "SEG_RR"

            with m.State("SQ_DROP"):
                # the SQ head completes without being sent: FLUSHED (stopped) or BAD_REQUEST
                # (own state for timing: the decision no longer enables the completion registers)
                complete(wre.wr_id, Mux(c.stopped, TX_STATUS_FLUSHED, TX_STATUS_BAD_REQUEST), 0, wre.opcode)
                sq_pop()
                m.next = "CQ"

            with m.State("FLUSH_RD"):
                m.next = "FLUSH_RD2"

            with m.State("FLUSH_RD2"):
                # registered for timing (BRAM clk-to-out into the completion registers)
                m.d.sync += rde.eq(rd_rd.data)
                m.next = "FLUSH_RD3"

            with m.State("FLUSH_RD3"):
                complete(rde.wr_id, Mux(c.rterm, TX_STATUS_REMOTE_ERROR, TX_STATUS_FLUSHED), 0, 1)
                m.d.sync += [c.rd_head.eq(c.rd_head + 1), c.nreads.eq(c.nreads - 1)]
                m.next = "CQ"

            with m.State("SEG_SQ"):
                # the context is updated for after the segment now (the segment always goes
                # out whole); its completion is posted in CQ_END after the last beat
                with m.If(sq_last):
                    sq_pop()
                    with m.If(~sq_tagged):
                        m.d.sync += c.msn0.eq(c.msn0 + 1)
                    complete(wre.wr_id, TX_STATUS_SUCCESS, wre.length, wre.opcode, force=wre.signaled)
                    m.d.sync += cq_after.eq(wre.signaled)
                with m.Else():
                    m.d.sync += c.sq_off.eq(c.sq_off + hsq["n"])
                m.next = "EMIT"

            with m.State("SEG_RREQ"):
                m.d.comb += rd_wr.en.eq(1)
                m.d.sync += [c.nreads.eq(c.nreads + 1), c.msn1.eq(c.msn1 + 1)]
                sq_pop()
                m.next = "EMIT"

            with m.State("RRCHK1"):
                # the region's end, the lower bound compare and the row's other checks,
                # registered (timing: adders and wide compares in front of the priority below)
                hi_zero = (rqe.src_to[AW:64] == 0) if AW < 64 else Const(1)
                m.d.sync += [s_rend.eq(srow.base + srow.length),
                             s_lo_ok.eq(hi_zero & (rqe.src_to[:AW] >= srow.base)),
                             s_bad0.eq(~srow.valid | (srow.stag != rqe.src_stag)),
                             s_bad3.eq(srow.conn != conn), s_bad2.eq(~srow.rr), s_bad4.eq(s_ends[64])]
                m.next = "RRCHK"

            with m.State("RRCHK"):
                in_space = s_lo_ok & (s_ends <= s_rend)
                with m.If(s_bad0):
                    m.d.sync += chk_code.eq(0)
                with m.Elif(s_bad3):
                    m.d.sync += chk_code.eq(3)
                with m.Elif(s_bad2):
                    m.d.sync += chk_code.eq(2)
                with m.Elif(s_bad4):
                    m.d.sync += chk_code.eq(4)
                with m.Elif(~in_space):
                    m.d.sync += chk_code.eq(1)
                with m.Else():
                    m.d.sync += chk_code.eq(0)
                m.d.sync += chk_fail.eq(s_bad0 | s_bad3 | s_bad2 | s_bad4 | ~in_space)
                m.next = "RRCHK2"

            with m.State("RRCHK2"):
                with m.If(chk_fail):
                    m.d.sync += [go_chk.eq(1), go_any.eq(1)]
                    m.next = "RRCHK_TERM"
                with m.Else():
                    m.d.sync += [go_rr.eq(1), go_pay.eq(1), go_any.eq(1)]
                    m.next = "SEG_RR"

            with m.State("RRCHK_TERM"):
                # (go_chk: the Terminate starts, below the FSM)
                m.d.sync += [c.stopped.eq(1), c.msn2.eq(c.msn2 + 1)]
                m.next = "EMIT"

            with m.State("SEG_RR"):
                with m.If(rr_last):
                    rr_pop()
                    m.d.sync += push_rrd.eq(1)
                with m.Else():
                    m.d.sync += [c.rr_off.eq(c.rr_off + hrr["n"]), c.rr_started.eq(1)]
                m.next = "EMIT"

            with m.State("EMIT"):
                # the context (already updated for after the segment) is written back in the
                # first cycle, so that the turn ends with the last beat
                with m.If(wbp):
                    write_back()
                    m.d.sync += wbp.eq(0)
                with m.If(e_done):
                    with m.If(cq_after):
                        m.next = "CQ_END"
                    with m.Else():
                        m.next = "IDLE"

            with m.State("CQ_END"):
                m.d.comb += self.cq.valid.eq(1)
                with m.If(self.cq.ready):
                    m.next = "IDLE"

            with m.State("CQ"):
                m.d.comb += self.cq.valid.eq(cq_force)
                with m.If(~cq_force | self.cq.ready):
                    m.next = "WB"

            with m.State("WB"):
                write_back()
                m.next = "IDLE"
        one_hot(fsm)

        # Segment starts. The FSM state that starts a segment (TERM, SEG_SQ, SEG_RREQ, SEG_RR,
        # RRCHK_TERM) has a one-hot flag register set on the way in, so that
        # the wide header and emitter registers are loaded under registers rather than a
        # decode of the state (timing). The flags are one-hot and a segment starts only while
        # the emitter is idle, so every register takes an OR of the sources under their flags
        # (no priority chain of the flags in front of the wide header register); the payload
        # segments' values come from _prep's registers.
        def onehot(*pairs):
            v = 0
            for flag, value in pairs:
                v = v | Mux(flag, value, 0)
            return v

        def bits(pred):
            return Const(sum(1 << b for b in range(W) if pred(b)), W)

        op = wre.opcode
        inv = (op == 4) | (op == 6)
        tp = self.term.payload
        th = tagged_hdr(sq_last, op, wre.rstag, sq_to)
        uh = untagged_hdr(sq_last, op, Mux(inv, wre.inv_stag, 0), 0, c.msn0, c.sq_off)
        rrh = tagged_hdr(rr_last, 2, rqe.sink_stag, rr_to)
        rq_body = (_be(wre.lstag, 4) + _be(wre.laddr, 8) + _be(wre.length, 4)
                   + _be(wre.rstag, 4) + _be(wre.rto, 8))
        rreqh = untagged_hdr(1, 1, Const(0, 32), 1, c.msn1, Const(0, 32)) + rq_body
        termh = (untagged_hdr(1, 7, Const(0, 32), 2, c.msn2, Const(0, 32))
                 + [tp.term[8 * k:8 * k + 8] for k in range(TERM_BYTES)])
        rhdr = untagged_hdr(1, 1, Const(0, 32), 1, rqe.msn, Const(0, 32))
        chk_body = (_be(rqe.sink_stag, 4) + _be(rqe.sink_to, 8) + _be(rqe.size, 4)
                    + _be(rqe.src_stag, 4) + _be(rqe.src_to, 8))
        chkh = (untagged_hdr(1, 7, Const(0, 32), 2, c.msn2, Const(0, 32))
                + [Const(0x01, 8), chk_code, Const(0xE0, 8), Const(0, 8), Const(0, 8), Const(_RREQ_HDR, 8)]
                + rhdr + chk_body)
        hload = Signal(8 * _HMAX)
        m.d.comb += hload.eq(onehot(*[(f, Cat(*pad(h))) for f, h in (
            (go_sqt, th), (go_squ, uh), (go_rr, rrh), (go_rreq, rreqh), (go_term, termh), (go_chk, chkh))]))
        CHK_HL = 18 + 52
        tot_load = onehot((go_sq, hsq["tot"]), (go_rr, hrr["tot"]), (go_rreq, _RREQ_HDR), (go_term, t_hl),
                          (go_chk, CHK_HL))
        with m.If(go_any):
            m.d.sync += [
                hsh.eq(hload),
                hrem.eq(onehot((go_sqt, 14), (go_squ, 18), (go_rr, 14), (go_rreq, _RREQ_HDR), (go_term, t_hl),
                               (go_chk, CHK_HL))),
                e_first.eq(1), e_conn.eq(conn), emitting.eq(1), wbp.eq(1),
                hmask.eq(onehot((go_sq, hsq["hmask"]), (go_rr, hrr["hmask"]),
                                (go_rreq, bits(lambda b: _RREQ_HDR > b)), (go_term, t_hmask),
                                (go_chk, bits(lambda b: CHK_HL > b)))),
                tot.eq(tot_load), e_len.eq(tot_load),
                *[rc.eq(onehot((go_sq, hsq["rot"]), (go_rr, hrr["rot"]))) for rc in rot_c],
                t.eq(onehot((go_sq, hsq["t"]), (go_rr, hrr["t"]))),
                lastw.eq(Mux(go_pay, onehot((go_sq, hsq["lastw"]), (go_rr, hrr["lastw"])), -1)),
                pre.eq(onehot((go_sq, hsq["pre"]), (go_rr, hrr["pre"]))),
                need.eq(onehot((go_sq, hsq["need"]), (go_rr, hrr["need"]))),
                last_beat.eq(onehot((go_sq, hsq["last_beat"]), (go_rr, hrr["last_beat"]),
                                    (go_rreq, int(_RREQ_HDR <= W)), (go_term, t_lb),
                                    (go_chk, int(CHK_HL <= W)))),
                tmask.eq(onehot((go_sq, hsq["tmask"]), (go_rr, hrr["tmask"]),
                                (go_rreq, bits(lambda b: _RREQ_HDR > b)), (go_term, t_hmask),
                                (go_chk, bits(lambda b: CHK_HL > b)))),
            ]
        # the AR side of a payload segment
        m.d.comb += [ar_set.eq(go_pay),
                     ar_set_addr.eq(Mux(go_rr, Cat(Const(0, LW), hrr["addr"][LW:AW]),
                                        Cat(Const(0, LW), hsq["addr"][LW:AW]))),
                     ar_set_words.eq(Mux(go_rr, hrr["words"], hsq["words"])),
                     ar_set_to4k.eq(Mux(go_rr, hrr["to4k"], hsq["to4k"]))]

        # the context read in the cycle after IDLE picked a request goes straight into c
        # (after the FSM: no other assignment of c in those states; timing: BRAM clk-to-out
        # through one mux only)
        with m.If(ld_c):
            m.d.sync += c.eq(cxd)

        self._active = active
        return m
