"""DDP/RDMAP transmit path: send queues, segmenter, RDMA Read responder, Terminate (RFC 5041 / 5040).

See :class:`DdpTx`. It sits in front of the MPA TX framer (:class:`hdl.mpa_tx.MpaTxFramer`,
payload :class:`hdl.mpa_tx.MpaTxBeat`) and turns work requests, inbound RDMA Read Requests
(from :class:`hdl.ddp_rx.DdpRx`'s ``rrq``) and error reports (``DdpRx.term``) into ULPDUs,
reading payload from host memory over an AXI4 read master. The golden model is
:mod:`host.segment` (:class:`host.segment.TxStream`): every ULPDU is octet for octet what it
gives for the same messages.

Layouts of the host-facing ports: :class:`WorkRequest`, :class:`TxConnCfg`, :class:`ReadDone`,
:class:`TxCompletion`; the memory port is :class:`AXI4ReadSignature`. The RX-side layouts
:class:`hdl.ddp_rx.ReadRequestOut`, :class:`hdl.ddp_rx.TermReport`,
:class:`hdl.ddp_rx.StagWrite` and :class:`hdl.ddp_rx.RrDone` are used unchanged.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from .beat import WIDTHS, conn_bits
from .ddp_rx import TERM_BYTES, ReadRequestOut, RrDone, StagWrite, TermReport
from .mpa_tx import MpaTxBeat
from .synth_hints import SyncFIFOBuffered, no_rw_collision, one_hot

__all__ = [
    "AXI4ReadSignature", "WorkRequest", "TxConnCfg", "ReadDone", "TxCompletion", "DdpTx",
    "TX_STATUS_SUCCESS", "TX_STATUS_LOCAL_LENGTH", "TX_STATUS_BAD_REQUEST",
    "TX_STATUS_REMOTE_ERROR", "TX_STATUS_FLUSHED",
]

# Completion status values (host.regmap.CqStatus)
TX_STATUS_SUCCESS = 0
TX_STATUS_LOCAL_LENGTH = 1
TX_STATUS_BAD_REQUEST = 3
TX_STATUS_REMOTE_ERROR = 4
TX_STATUS_FLUSHED = 5

_HMAX = 72           # header buffer: 18-octet untagged header + 52-octet Terminate payload, rounded up
_RREQ_HDR = 18 + 28
_BURST = 16          # AXI beats per AR burst at most


# ---------------------------------------------------------------------------- port layouts

class AXI4ReadSignature(wiring.Signature):
    """AXI4 read channels (AR, R), seen from the master.

    Members carry the AMBA names in lower case: ``arid araddr arlen arsize arburst arvalid
    arready rid rdata rresp rlast rvalid rready`` (ID width 1, always 0). A port
    ``m_axi: Out(AXI4ReadSignature(...))`` becomes Verilog ports ``m_axi__araddr`` ...
    which ``cocotbext.axi.AxiReadBus.from_prefix(dut, "m_axi_")`` finds.
    """

    def __init__(self, *, addr_width, data_width):
        self.addr_width = addr_width
        self.data_width = data_width
        super().__init__({
            "arid": Out(1), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
            "rid": In(1), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
        })

    def __eq__(self, other):
        return (type(other) is type(self) and other.addr_width == self.addr_width
                and other.data_width == self.data_width)

    def __hash__(self):
        return hash((type(self), self.addr_width, self.data_width))


class WorkRequest(data.StructLayout):
    """One work request (the SQ_* registers + SQ_CMD.DOORBELL).

    ``opcode`` is :class:`host.regmap.SqOpcode`: 0 RDMA Write (``length`` octets from
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

    ``status`` is :class:`host.regmap.CqStatus`; ``length`` the octets transferred (0 unless
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
        ``valid = 0``). Only the Read Responder looks at it.
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
        ULPDUs for :class:`hdl.mpa_tx.MpaTxFramer`: one ULPDU at a time, ``length`` on the
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
    progress to finish and vice versa, because the receiver (:class:`host.sink.Sink`,
    :class:`hdl.ddp_rx.DdpRx`) ties consecutive tagged segments of a stream to one
    message (the Read Response completion carries the first segment's STag/TO and the
    summed length). A Read at the head of the
    send queue waits while ``ord`` Reads are outstanding (Read Responses still flow).

    *Segments* (bit-exact with :meth:`host.segment.TxStream.message`): at most the
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
    only; the segment's length, L flag, memory address and TO for both queue heads are
    computed here and registered), then the SEG state that loads the emitter and the AR
    side; a segment's first beat is offered in the cycle after it, 6 cycles after the turn
    starts, when it is header-only or its header fills the first beat, else when the
    first memory word arrives (AR issued in the same cycle). The first segment of a Read
    Response takes 4 more cycles for the source check (STag row registered, the region's
    end, the checks, then the decision). The context is written back in the first emit cycle
    (it is updated for after the segment when the segment starts: the segment always
    goes out whole), so the turn ends with the last beat; a signaled completion takes one
    more cycle (``cq``). While payload flows ``o`` moves one beat per cycle (the header is
    merged with the memory words by a byte rotator, no bubble at the header/payload seam),
    limited only by ``o.ready`` and the R channel; the AR side keeps bursts in flight for
    the whole segment (a 32-word R FIFO). The emitter's per-beat conditions (memory word
    needed, last beat, header and length masks) are registers computed one beat ahead,
    so that ``o.valid`` is one gate of registers. Between segments there are about 6
    cycles of control plus the memory latency: measured with cocotbext-axi's AxiRamRead
    (no pauses), one connection of 6000-octet RDMA Writes at MULPDU 1460, ``o`` carries
    at least 0.95 / 0.9 / 0.8 / 0.65 beats per cycle at W = 4 / 8 / 16 / 32 (the test's
    bounds; prefetching the next segment is the remaining work). ``o`` carries whole
    ULPDUs, never interleaved; ``first``/``last`` delimit one ULPDU.

    ``cq`` offers a completion 1 cycle after the ULPDU's last beat (Send, Write) or 3
    cycles after ``read_done`` is taken (Read); ``rr_done`` is queued with the last beat
    of the Read Response (into its FIFO). ``cfg`` is taken 2 cycles after IDLE picks it,
    ``wr``, ``rrq``, ``read_done`` and ``term`` 3 cycles after (the context is read at the
    registered connection, then registered; ``ready`` is high for one cycle); a post
    (``wr``, ``rrq``) takes 4 cycles in all, its context written back in the cycle it is
    taken.
    """

    def __init__(self, *, width=8, connections=16, sq_depth=8, rrq_depth=4, ord_depth=4,
                 stags=256, addr_width=64):
        if width not in WIDTHS:
            raise ValueError(f"width must be one of {WIDTHS}, not {width!r}")
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
        # Marked no_rw_collision (synthesis builds no collision logic, hdl.synth_hints): the
        # FSM serves one connection at a time and no read it uses is issued in a state that
        # writes: ``ctx`` is written in RRQ, POST, EMIT, WB and the rows used are read in the
        # W_* states;
        # ``sq`` / ``rrq_mem`` are written in POST / RRQ and read for use in LOAD; ``rd`` is
        # written in SEG_RREQ and read for use in RDONE and FLUSH_RD. The STag table is
        # written whenever ``stag_w`` is valid, so its reads may meet a write: it keeps
        # Amaranth's read-before-write semantics (a row half old, half new could pass a check).
        ctxm = no_rw_collision(Memory(shape=ctx_l, depth=C, init=[]))
        sqm = no_rw_collision(Memory(shape=wr_l, depth=C * SQD, init=[]))
        rqm = no_rw_collision(Memory(shape=rq_l, depth=C * RQD, init=[]))
        rdm = no_rw_collision(Memory(shape=rd_l, depth=C * OD, init=[]))
        stm = Memory(shape=row_l, depth=S, init=[])
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
        m.d.comb += self.stag_w.ready.eq(1)
        sw = self.stag_w.payload
        wrow = Signal(row_l)
        m.d.comb += [
            wrow.stag.eq(sw.stag), wrow.base.eq(sw.base[:AW]), wrow.length.eq(sw.length),
            wrow.valid.eq(sw.valid & ((sw.base + sw.length) <= (1 << AW))),
            wrow.rr.eq(sw.remote_read), wrow.conn.eq(sw.conn),
            st_wr.addr.eq(sw.index[:SB]), st_wr.data.eq(wrow), st_wr.en.eq(self.stag_w.valid),
        ]

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
        with m.If(ar_set):
            m.d.sync += [ar_addr.eq(ar_set_addr), ar_left.eq(ar_set_words),
                         to4k.eq((4096 - ar_set_addr[:12]) >> LW)]
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
        rot = Signal(max(LW, 1))
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
        for r in range(W):
            with m.If(rot == r):
                m.d.comb += rdat.eq(win[8 * r:8 * (r + W)])
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

        # Parameters of the next payload segment (SEG_SQ / SEG_RR), registers loaded in DECIDE;
        # what the emitter and the AR side need of them is computed here once, outside the
        # FSM, so that no state decode sits in front of these adders (timing)
        seg_rr = Signal()              # the Read Response's (else the SQ head's) registers below
        sq_n, rr_n = Signal(32), Signal(32)
        sq_nz, rr_nz = Signal(), Signal()
        sq_addr, rr_addr = Signal(AW), Signal(AW)
        sq_last, rr_last = Signal(), Signal()
        sq_to, rr_to = Signal(64), Signal(64)
        seg_hl = Signal(8)             # header octets
        seg_n = Signal(32)             # payload octets
        seg_nz = Signal()              # seg_n != 0
        seg_addr = Signal(AW)          # host address of the payload
        m.d.comb += [seg_n.eq(Mux(seg_rr, rr_n, sq_n)), seg_nz.eq(Mux(seg_rr, rr_nz, sq_nz)),
                     seg_addr.eq(Mux(seg_rr, rr_addr, sq_addr))]
        seg_lo = Signal(max(LW, 1))
        seg_rot = Signal(max(LW, 1))   # rotator amount: (lo - hl) mod W      } registers, from
        seg_k = Signal(8)              # header-only beats before word 0    } the low address
        seg_t = Signal(signed(20))     # t of the first beat: 1 - seg_k      } bits in DECIDE
        seg_endw = Signal(18)
        seg_words = Signal(18)
        seg_tot = Signal(17)
        m.d.comb += [
            seg_lo.eq(seg_addr[:LW] if LW else 0),
            # endw + 1 as its own adder (not chained after endw)
            seg_endw.eq((seg_lo + seg_n - 1) >> LW), seg_words.eq((seg_lo + seg_n + (W - 1)) >> LW),
            seg_tot.eq(seg_hl + seg_n),
        ]

        def start_segment(conn, hdr_bytes, hl=None):
            """Set up one ULPDU: ``hl`` octets from ``hdr_bytes``; without ``hl`` the payload
            segment of the ``seg_*`` registers (``seg_hl`` octets of header, then ``seg_n``
            octets at ``seg_addr``)."""
            payload = hl is None
            if payload:
                hl = seg_hl
            elif isinstance(hl, int):
                hl = Const(hl, 8)
            hv = Signal(8 * _HMAX, name="seg_hdr")
            m.d.comb += hv.eq(Cat(*hdr_bytes))
            m.d.sync += [hsh.eq(hv), hrem.eq(hl), e_first.eq(1), e_conn.eq(conn), emitting.eq(1),
                         hmask.eq(Cat(*[hl > b for b in range(W)])),
                         wbp.eq(1)]
            if not payload:
                m.d.sync += [tot.eq(hl), e_len.eq(hl), rot.eq(0), t.eq(0), lastw.eq(-1), pre.eq(0),
                             need.eq(0), last_beat.eq(hl <= W),
                             tmask.eq(Cat(*[hl > b for b in range(W)]))]
                return
            nz = seg_nz
            # the first beat's flags from seg_n directly, not after the adders (timing):
            # need = 0 <= t <= endw with t = 1 - k; tot = hl + n
            m.d.sync += [tot.eq(seg_tot), e_len.eq(seg_tot), rot.eq(seg_rot), t.eq(seg_t),
                         lastw.eq(Mux(nz, seg_endw, -1)), pre.eq((seg_k == 0) & nz),
                         need.eq(nz & ((seg_k == 1) | ((seg_k == 0) & (seg_n > (W - seg_lo))))),
                         last_beat.eq(seg_n <= (W - seg_hl)),
                         tmask.eq(Cat(*[seg_n > (b - seg_hl) for b in range(W)]))]
            m.d.comb += ar_set.eq(1)

        m.d.comb += [ar_set_addr.eq(Cat(Const(0, LW), seg_addr[LW:AW])),
                     ar_set_words.eq(Mux(seg_nz, seg_words, 0))]

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
        go_rr = Signal()               # in SEG_RR
        go_rreq = Signal()             # in SEG_RREQ
        go_term = Signal()             # in TERM, and it sends a Terminate
        go_chk = Signal()              # in RRCHK2, and the check failed (Terminate)
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
        m.d.comb += [self.rr_done.payload.conn.eq(rrdf.r_data), self.rr_done.valid.eq(rrdf.r_rdy),
                     rrdf.r_en.eq(self.rr_done.ready), rrdf.w_data.eq(conn),
                     rrdf.w_en.eq(e_done & push_rrd)]
        m.d.comb += [cx_wr.en.eq(0), cx_wr.addr.eq(conn), cx_wr.data.eq(c)]
        m.d.comb += [sq_wr.en.eq(0), rq_wr.en.eq(0), rd_wr.en.eq(0)]
        m.d.comb += [sq_rd.addr.eq(qaddr(conn, cxd.sq_head, SQB)),
                     rq_rd.addr.eq(qaddr(conn, cxd.rr_head, RQB)),
                     rd_rd.addr.eq(qaddr(conn, c.rd_head, OB)),
                     st_rd.addr.eq(rqe.src_stag[:SB])]
        m.d.sync += cx_addr.eq(Mux(load_now, load_conn, conn))
        ord_eff = Signal(15)
        m.d.comb += ord_eff.eq(Mux(c.ord > OD, OD, c.ord))
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
                m.d.comb += [active.w_en.eq(1), active.w_data.eq(conn)]

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
        chk_fail = Signal()
        chk_code = Signal(8)

        m.d.sync += [ld_c.eq(0), go_sq.eq(0), go_rr.eq(0), go_rreq.eq(0), go_term.eq(0), go_chk.eq(0)]
        waits = {}                     # state after a W_* state -> whether it loads the context
        with m.FSM(name="tx") as fsm:
            with m.State("IDLE"):
                m.d.sync += popped.eq(0)

                def pick(nconn, state, load=True):
                    m.d.comb += [load_now.eq(1), load_conn.eq(nconn)]
                    m.d.sync += conn.eq(nconn)
                    waits[state] = load
                    m.next = "W_" + state
                with m.If(self.cfg.valid):
                    pick(self.cfg.payload.conn, "CFG", load=False)
                with m.Elif(self.term.valid):
                    pick(self.term.payload.conn, "TERM_LD")
                with m.Elif(self.read_done.valid):
                    pick(self.read_done.payload.conn, "RDONE_LD")
                with m.Elif(self.rrq.valid & ~rrq_hold):
                    pick(self.rrq.payload.conn, "RRQ_LD")
                with m.Elif(self.wr.valid & (prefer_post | ~active.r_rdy)):
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
                m.d.sync += go_term.eq(~cxd.stopped & ~self.term.payload.received)
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
                ok = rde.length == wre.length
                complete(rde.wr_id, Mux(ok, TX_STATUS_SUCCESS, TX_STATUS_LOCAL_LENGTH), wre.length, 1,
                         force=~ok | rde.signaled)
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
                    m.d.comb += [self.rrq.ready.eq(1), rq_wr.en.eq(1), acc.eq(1),
                                 rq_wr.addr.eq(qaddr(conn, (c.rr_head + c.rr_count)[:max(RQB, 1)], RQB)),
                                 rq_wr.data.eq(self.rrq.payload)]
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
                    m.d.comb += [self.wr.ready.eq(1), sq_wr.en.eq(1), acc.eq(1),
                                 sq_wr.addr.eq(qaddr(conn, (c.sq_head + c.sq_count)[:max(SQB, 1)], SQB)),
                                 sq_wr.data.eq(self.wr.payload)]
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
                op = wre.opcode
                # tagged messages never interleave on a stream (the receiver, host.sink and
                # DdpRx, ties consecutive tagged segments to one message): a Write in progress
                # holds off Read Responses and a Read Response in progress holds off Writes
                wr_mid = f_sq & op0 & f_sqoff
                rr_mid = f_rr & c.rr_started
                sq_ok = f_sq & (~op1 | f_ord) & ~(rr_mid & op0)
                rr_ok = f_rr & ~wr_mid
                rr_sel = Signal()
                m.d.comb += rr_sel.eq(rr_ok & (~sq_ok | c.last_sq))
                # the payload segment of either head, for SEG_SQ / SEG_RR (both segment rooms
                # compared in parallel and the head selected late)
                tagged = op0
                rem = Signal(32)
                last = Signal()
                # (rem <= room as length <= off + room: no compare after the subtraction)
                m.d.comb += [rem.eq(wre.length - c.sq_off),
                             last.eq(Mux(tagged, wre.length <= lim14, wre.length <= lim18))]
                rrem = Signal(32)
                rlast = Signal()
                m.d.comb += [rrem.eq(rqe.size - c.rr_off), rlast.eq(rqe.size <= rlim)]
                # the rotator amount and the header-only beats from the low address bits
                # alone (small adders), registered with the rest
                # (for both heads, selected last)
                n_hl = Signal(8)
                n_rot = Signal(max(LW, 1))
                n_k = Signal(8)
                hls = []
                for name, lo_v, hl_v in (("sq", wre.laddr[:LW] + c.sq_off[:LW], Mux(tagged, 14, 18)),
                                         ("rr", rqe.src_to[:LW] + c.rr_off[:LW], Const(14, 8))):
                    h_lo = Signal(max(LW, 1), name=f"{name}_lo")
                    h_hl = Signal(8, name=f"{name}_hl")
                    h_rot = Signal(max(LW, 1), name=f"{name}_rot")
                    h_k = Signal(8, name=f"{name}_k")
                    if LW:
                        m.d.comb += h_lo.eq(lo_v)
                    m.d.comb += [h_hl.eq(hl_v), h_rot.eq((h_lo - h_hl)[:LW] if LW else 0),
                                 h_k.eq((h_rot + h_hl - h_lo) >> LW)]
                    hls.append((h_hl, h_rot, h_k))
                (sq_hl_, sq_rot_, sq_k_), (rr_hl_, rr_rot_, rr_k_) = hls
                m.d.comb += [n_hl.eq(Mux(rr_sel, rr_hl_, sq_hl_)), n_rot.eq(Mux(rr_sel, rr_rot_, sq_rot_)),
                             n_k.eq(Mux(rr_sel, rr_k_, sq_k_))]
                # (each head into its own registers: yosys would share the two heads' adders
                # behind a mux of their inputs if one register took either)
                m.d.sync += [
                    seg_rr.eq(rr_sel), seg_hl.eq(n_hl),
                    seg_rot.eq(n_rot), seg_k.eq(n_k), seg_t.eq(1 - n_k),
                    sq_last.eq(last), sq_n.eq(Mux(last, rem, Mux(tagged, room14, room18))),
                    sq_nz.eq(~(last & (wre.length == c.sq_off))),
                    sq_addr.eq((wre.laddr + c.sq_off)[:AW]), sq_to.eq((wre.rto + c.sq_off)[:64]),
                    rr_last.eq(rlast), rr_n.eq(Mux(rlast, rrem, room14)),
                    rr_nz.eq(~(rlast & (rqe.size == c.rr_off))),
                    rr_addr.eq((rqe.src_to + c.rr_off)[:AW]), rr_to.eq((rqe.sink_to + c.rr_off)[:64]),
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
                    with m.If(~c.rr_started & (rqe.size != 0)):
                        m.next = "RRCHK0"
                    with m.Else():
                        m.d.sync += go_rr.eq(1)
                        m.next = "SEG_RR"
                with m.Elif(sq_ok):
                    m.d.sync += c.last_sq.eq(1)
                    with m.If(opbad | (op1 & f_ord0)):
                        m.next = "SQ_DROP"
                    with m.Elif(op1):
                        m.d.sync += go_rreq.eq(1)
                        m.next = "SEG_RREQ"
                    with m.Else():
                        m.d.sync += go_sq.eq(1)
                        m.next = "SEG_SQ"
                with m.Else():
                    m.next = "WB"

            with m.State("SQ_DROP"):
                # the SQ head completes without being sent: FLUSHED (stopped) or BAD_REQUEST
                # (own state for timing: the decision no longer enables the completion registers)
                complete(wre.wr_id, Mux(c.stopped, TX_STATUS_FLUSHED, TX_STATUS_BAD_REQUEST), 0, wre.opcode)
                sq_pop()
                m.next = "CQ"

            with m.State("FLUSH_RD"):
                m.next = "FLUSH_RD2"

            with m.State("FLUSH_RD2"):
                e = rd_l(rd_rd.data)
                complete(e.wr_id, Mux(c.rterm, TX_STATUS_REMOTE_ERROR, TX_STATUS_FLUSHED), 0, 1)
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
                    m.d.sync += c.sq_off.eq(c.sq_off + sq_n)
                m.next = "EMIT"

            with m.State("SEG_RREQ"):
                ent = Signal(rd_l, name="rd_entry")
                m.d.comb += [ent.wr_id.eq(wre.wr_id), ent.length.eq(wre.length), ent.signaled.eq(wre.signaled),
                             rd_wr.en.eq(1), rd_wr.addr.eq(qaddr(conn, (c.rd_head + c.nreads)[:max(OB, 1)], OB)),
                             rd_wr.data.eq(ent)]
                m.d.sync += [c.nreads.eq(c.nreads + 1), c.msn1.eq(c.msn1 + 1)]
                sq_pop()
                m.next = "EMIT"

            with m.State("RRCHK0"):
                # STag row of rqe.src_stag (address stable since SCHED)
                m.d.sync += [srow.eq(st_rd.data), s_ends.eq(rqe.src_to + rqe.size)]
                m.next = "RRCHK1"

            with m.State("RRCHK1"):
                # the region's end and the lower bound compare, registered (timing: an adder
                # then a compare then the priority below)
                hi_zero = (rqe.src_to[AW:64] == 0) if AW < 64 else Const(1)
                m.d.sync += [s_rend.eq(srow.base + srow.length),
                             s_lo_ok.eq(hi_zero & (rqe.src_to[:AW] >= srow.base))]
                m.next = "RRCHK"

            with m.State("RRCHK"):
                in_space = s_lo_ok & (s_ends <= s_rend)
                with m.If(~srow.valid | (srow.stag != rqe.src_stag)):
                    m.d.sync += [chk_fail.eq(1), go_chk.eq(1), chk_code.eq(0)]
                with m.Elif(srow.conn != conn):
                    m.d.sync += [chk_fail.eq(1), go_chk.eq(1), chk_code.eq(3)]
                with m.Elif(~srow.rr):
                    m.d.sync += [chk_fail.eq(1), go_chk.eq(1), chk_code.eq(2)]
                with m.Elif(s_ends[64]):
                    m.d.sync += [chk_fail.eq(1), go_chk.eq(1), chk_code.eq(4)]
                with m.Elif(~in_space):
                    m.d.sync += [chk_fail.eq(1), go_chk.eq(1), chk_code.eq(1)]
                with m.Else():
                    m.d.sync += [chk_fail.eq(0), chk_code.eq(0)]
                m.next = "RRCHK2"

            with m.State("RRCHK2"):
                with m.If(chk_fail):
                    # (go_chk: the Terminate starts, below the FSM)
                    m.d.sync += [c.stopped.eq(1), c.msn2.eq(c.msn2 + 1)]
                    m.next = "EMIT"
                with m.Else():
                    m.d.sync += go_rr.eq(1)
                    m.next = "SEG_RR"

            with m.State("SEG_RR"):
                with m.If(rr_last):
                    rr_pop()
                    m.d.sync += push_rrd.eq(1)
                with m.Else():
                    m.d.sync += [c.rr_off.eq(c.rr_off + rr_n), c.rr_started.eq(1)]
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
        # RRCHK2 with a failed check) has a one-hot flag register set on the way in, so that
        # the wide header and emitter registers are loaded under a register rather than a
        # decode of the state (timing)
        with m.If(go_sq):
            op = wre.opcode
            inv = (op == 4) | (op == 6)
            th = tagged_hdr(sq_last, op, wre.rstag, sq_to)
            uh = untagged_hdr(sq_last, op, Mux(inv, wre.inv_stag, 0), 0, c.msn0, c.sq_off)
            hdr = Signal(8 * _HMAX, name="sq_hdr")
            m.d.comb += hdr.eq(Mux(sq_tagged, Cat(*pad(th)), Cat(*pad(uh))))
            start_segment(conn, [hdr[8 * k:8 * k + 8] for k in range(_HMAX)])
        with m.Elif(go_rr):
            start_segment(conn, pad(tagged_hdr(rr_last, 2, rqe.sink_stag, rr_to)))
        with m.Elif(go_rreq):
            body = (_be(wre.lstag, 4) + _be(wre.laddr, 8) + _be(wre.length, 4)
                    + _be(wre.rstag, 4) + _be(wre.rto, 8))
            start_segment(conn, pad(untagged_hdr(1, 1, Const(0, 32), 1, c.msn1, Const(0, 32)) + body),
                          _RREQ_HDR)
        with m.Elif(go_term):
            tp = self.term.payload
            tb = [tp.term[8 * k:8 * k + 8] for k in range(TERM_BYTES)]
            start_segment(conn, pad(untagged_hdr(1, 7, Const(0, 32), 2, c.msn2, Const(0, 32)) + tb),
                          18 + tp.tlen)
        with m.Elif(go_chk):
            rhdr = untagged_hdr(1, 1, Const(0, 32), 1, rqe.msn, Const(0, 32))
            body = (_be(rqe.sink_stag, 4) + _be(rqe.sink_to, 8) + _be(rqe.size, 4)
                    + _be(rqe.src_stag, 4) + _be(rqe.src_to, 8))
            term = [Const(0x01, 8), chk_code, Const(0xE0, 8), Const(0, 8), Const(0, 8),
                    Const(_RREQ_HDR, 8)] + rhdr + body
            start_segment(conn, pad(untagged_hdr(1, 7, Const(0, 32), 2, c.msn2, Const(0, 32)) + term),
                          18 + 52)

        # the context read in the cycle after IDLE picked a request goes straight into c
        # (after the FSM: no other assignment of c in those states; timing: BRAM clk-to-out
        # through one mux only)
        with m.If(ld_c):
            m.d.sync += c.eq(cxd)

        self._active = active
        return m
