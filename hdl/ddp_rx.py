"""DDP/RDMAP receive path: parse, validate, place, complete (RFC 5041 / RFC 5040).

See :class:`DdpRx`. It sits behind the MPA deframer (:class:`rnic.hdl.mpa_rx.MpaRxDeframer`,
payload :class:`rnic.hdl.mpa_rx.MpaRxBeat`) and turns ULPDUs into byte-granular AXI4
writes to host memory, completions, queued RDMA Read Requests and error /
Terminate reports. The golden model is :class:`rnic.host.model.sink.Sink`: validation order
and codes follow its module docstring exactly.

Layouts of the host-facing ports: :class:`StagWrite`, :class:`RqPost`,
:class:`ConnCtl`, :class:`Completion`, :class:`ReadRequestOut`,
:class:`TermReport`; the memory port is :class:`rnic.hdl.axi.AXI4WriteSignature`.
"""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2, exact_log2

from .axi import AXI4WriteSignature
from .beat import check_width, conn_bits
from .mpa_config import RxError
from .mpa_rx import RX_ABORTED, MpaRxBeat
from .synth_hints import no_rw_collision, one_hot

__all__ = [
    "StagWrite", "RqPost", "ConnCtl", "RrDone", "Completion",
    "ReadRequestOut", "TermReport", "DdpRx", "TERM_BYTES",
    "error_word",
]

#: Octets of the Terminate payload in a :class:`TermReport` (4 + 2 + 18 + 28).
TERM_BYTES = 52
_QN1_CAP = 28
_QN2_CAP = 52
_QN2_BASE = 32           # QN 2 message buffer starts at octet 32 of a connection's control buffer
_CTL_BYTES = 96          # control-message buffer per connection: QN 1 at 0..31, QN 2 at 32..95

_M64 = (1 << 64) - 1


def error_word(layer, etype, ecode):
    """16-bit error id used internally: layer(4) etype(4) ecode(8), as in a Terminate's first word."""
    return (layer << 12) | (etype << 8) | ecode


# Error ids (Layer 0 RDMAP, 1 DDP, 2 LLP), see rnic.host.spec.errors.
E_DDP_CATASTROPHIC = error_word(1, 0, 0)
E_DDP_T_INVALID_STAG = error_word(1, 1, 0)
E_DDP_T_BOUNDS = error_word(1, 1, 1)
E_DDP_T_NOT_ASSOC = error_word(1, 1, 2)
E_DDP_T_TO_WRAP = error_word(1, 1, 3)
E_DDP_T_VERSION = error_word(1, 1, 4)
E_DDP_U_QN = error_word(1, 2, 1)
E_DDP_U_NO_BUFFER = error_word(1, 2, 2)
E_DDP_U_MSN_RANGE = error_word(1, 2, 3)
E_DDP_U_MO = error_word(1, 2, 4)
E_DDP_U_TOO_LONG = error_word(1, 2, 5)
E_DDP_U_VERSION = error_word(1, 2, 6)
E_RP_INVALID_STAG = error_word(0, 1, 0)
E_RP_BOUNDS = error_word(0, 1, 1)
E_RP_ACCESS = error_word(0, 1, 2)
E_RP_NOT_ASSOC = error_word(0, 1, 3)
E_RP_TO_WRAP = error_word(0, 1, 4)
E_RP_CANNOT_INV = error_word(0, 1, 9)
E_RO_VERSION = error_word(0, 2, 5)
E_RO_OPCODE = error_word(0, 2, 6)
E_RO_CATA_STREAM = error_word(0, 2, 7)
E_RO_CANNOT_INV = error_word(0, 2, 9)
E_RO_UNSPECIFIED = error_word(0, 2, 0xFF)
E_LLP_CRC = error_word(2, 0, 2)
E_LLP_MARKER = error_word(2, 0, 3)

# DdpRx's DEC verdict (bits of ``dec_go``, from the flags registered in the HDR cycles)
_DEC_DONE, _DEC_FAIL, _DEC_TCHK, _DEC_TFIN, _DEC_ULOAD, _DEC_UCHK = range(6)


# ---------------------------------------------------------------------------- port layouts

class StagWrite(data.StructLayout):
    """One STag table row write (STAG_* registers + STAG_CMD.COMMIT).

    The row of a wire STag is ``stag % stags``; the row matches when ``valid`` and
    its ``stag`` equals the wire STag in full. A tagged segment is placed at host
    address = TO (the region's TOs ``base .. base + length - 1`` are addresses).
    """

    def __init__(self, *, stags, connections):
        super().__init__({
            "index": unsigned(ceil_log2(stags) or 1),
            "stag": unsigned(32), "base": unsigned(64), "length": unsigned(32),
            "valid": unsigned(1), "remote_read": unsigned(1), "remote_write": unsigned(1),
            "conn": unsigned(conn_bits(connections)),
        })


class _StagRow(data.StructLayout):
    """A row of the STag table: the region is ``base .. end - 1`` (``end = base + length``
    is stored rather than the length, so that no check adds them)."""

    def __init__(self, *, connections, addr_width):
        super().__init__({
            "stag": unsigned(32), "base": unsigned(addr_width), "end": unsigned(addr_width + 1),
            "valid": unsigned(1), "rr": unsigned(1), "rw": unsigned(1),
            "conn": unsigned(conn_bits(connections)),
        })


class RqPost(data.StructLayout):
    """Post a QN 0 receive buffer (RQ_* registers + RQ_CMD.POST)."""

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)),
            "addr": unsigned(64), "length": unsigned(32), "id": unsigned(32),
        })


class ConnCtl(data.StructLayout):
    """Reset a connection's receive context (CTX_CMD.COMMIT): MSNs to 1, queues empty,
    no error, IRD set."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "ird": unsigned(14)})


class RrDone(data.StructLayout):
    """The TX side finished answering one inbound RDMA Read Request of ``conn`` (frees an IRD slot)."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections))})


class Completion(data.StructLayout):
    """Completion of a received message.

    ``opcode`` 3..6: a Send kind filled receive buffer ``wr_id`` (MSN ``msn``) with
    ``length`` octets; ``invalidated``/``inval_stag``: the Send-with-Invalidate
    kinds; ``solicited``: the SE kinds. ``opcode`` 2: the last segment of an RDMA
    Read Response: ``stag``/``to`` of its first segment, ``length`` octets.
    """

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)), "opcode": unsigned(4),
            "msn": unsigned(32), "wr_id": unsigned(32), "length": unsigned(32),
            "solicited": unsigned(1), "invalidated": unsigned(1), "inval_stag": unsigned(32),
            "stag": unsigned(32), "to": unsigned(64),
        })


class ReadRequestOut(data.StructLayout):
    """A validated inbound RDMA Read Request, for the TX side (it holds an IRD slot until
    ``rr_done``)."""

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)), "msn": unsigned(32),
            "sink_stag": unsigned(32), "sink_to": unsigned(64), "size": unsigned(32),
            "src_stag": unsigned(32), "src_to": unsigned(64),
        })


class TermReport(data.StructLayout):
    """An error found on the connection (``received = 0``) or a Terminate received from the
    peer (``received = 1``); either way the connection stops (later segments dropped).

    ``term`` holds ``tlen`` octets of a Terminate payload (octet 0 in bits 0..7): for an
    error, the payload this side sends (RFC 5040 section 4.8: Layer/EType/ErrorCode,
    M D R, DDP Segment Length, the offending DDP header, the Read Request header), exactly
    :meth:`rnic.host.model.rdmap.Terminate.for_error`; for a received Terminate, its payload as
    received. ``layer``/``etype``/``ecode`` repeat the error (or the received one's).
    """

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)), "received": unsigned(1),
            "layer": unsigned(4), "etype": unsigned(4), "ecode": unsigned(8),
            "tlen": unsigned(6), "term": unsigned(8 * TERM_BYTES),
        })


# ---------------------------------------------------------------------------- internal layouts

class _QState(data.StructLayout):
    """Reassembly state of the QN 1 / QN 2 message in progress (values <= 52 once checked)."""

    def __init__(self):
        super().__init__({
            "msn": unsigned(32), "any": unsigned(1), "max_mo": unsigned(6), "max_end": unsigned(6),
            "lv": unsigned(1), "l_mo": unsigned(6), "l_end": unsigned(6),
        })


class _Ctx(data.StructLayout):
    """Per-connection receive context (one memory row per connection)."""

    def __init__(self, *, rq_depth):
        db = exact_log2(rq_depth)
        super().__init__({
            "stopped": unsigned(1), "ird": unsigned(14), "rrc": unsigned(14),
            "rbase": unsigned(32), "head": unsigned(max(db, 1)), "count": unsigned(db + 1),
            "q1": _QState(), "q2": _QState(),
            "tm_v": unsigned(1), "tm_stag": unsigned(32), "tm_to": unsigned(64), "tm_len": unsigned(32),
        })


class _RqEntry(data.StructLayout):
    """A posted receive buffer and the reassembly state of its message."""

    def __init__(self):
        super().__init__({
            "addr": unsigned(64), "length": unsigned(32), "id": unsigned(32),
            "any": unsigned(1), "max_mo": unsigned(32), "max_end": unsigned(32),
            "lv": unsigned(1), "l_mo": unsigned(32), "l_end": unsigned(32),
            "done": unsigned(1), "opcode": unsigned(4), "inval": unsigned(1), "inval_stag": unsigned(32),
        })


class _Entry(data.StructLayout):
    """A received ULPDU waiting in its slot (or an MPA status without a slot)."""

    def __init__(self, *, slots, connections):
        super().__init__({
            "slot": unsigned(max(1, exact_log2(slots))), "has_slot": unsigned(1),
            "conn": unsigned(conn_bits(connections)), "len": unsigned(16),
            "err": unsigned(3), "ovf": unsigned(1),
        })


class _InCtx(data.StructLayout):
    def __init__(self, *, slots, rows):
        super().__init__({
            "open": unsigned(1), "slot": unsigned(max(1, exact_log2(slots))),
            "beats": unsigned(bits_for(rows)), "len": unsigned(16), "ovf": unsigned(1),
        })


class _RegFIFO(Elaboratable):
    """A small FIFO in flops (first word falls through one cycle after its write):
    the :class:`SyncFIFOBuffered` interface (``w_en w_rdy w_data r_en r_rdy r_data``,
    ``level``). Its entries are registers (``entries``, valid ones ``valid(k)``), so a
    formal proof can state an invariant for every queued entry."""

    def __init__(self, *, width, depth):
        assert depth >= 2 and depth & (depth - 1) == 0
        self.width = width
        self.depth = depth
        self.w_en = Signal()
        self.w_rdy = Signal()
        self.w_data = Signal(width)
        self.r_en = Signal()
        self.r_rdy = Signal()
        self.r_data = Signal(width)
        self.level = Signal(range(depth + 1))
        self.entries = [Signal(width, name=f"entry{k}") for k in range(depth)]
        self.rp = Signal(range(depth))
        self.wp = Signal(range(depth))

    def valid(self, k):
        """Entry ``k`` holds a queued word."""
        return ((k - self.rp)[:exact_log2(self.depth)]) < self.level

    def elaborate(self, platform):
        m = Module()
        do_w = self.w_en & self.w_rdy
        do_r = self.r_en & self.r_rdy
        m.d.comb += [self.w_rdy.eq(self.level != self.depth), self.r_rdy.eq(self.level != 0)]
        with m.Switch(self.rp):         # (a multiplexer tree, not a chain of priority levels)
            for k in range(self.depth):
                with m.Case(k):
                    m.d.comb += self.r_data.eq(self.entries[k])
        for k in range(self.depth):
            # the entry at the write pointer holds no word unless the FIFO is full, so it takes
            # whatever is offered (timing: its enable does not wait for ``w_en``; only the
            # pointer and the level do)
            with m.If(self.w_rdy & (self.wp == k)):
                m.d.sync += self.entries[k].eq(self.w_data)
        with m.If(do_w):
            m.d.sync += self.wp.eq(self.wp + 1)
        with m.If(do_r):
            m.d.sync += self.rp.eq(self.rp + 1)
        m.d.sync += self.level.eq(self.level + do_w - do_r)
        return m


class _WriteRequest:
    """``addr``, ``data``, ``en`` of a memory write, registered in front of its write port."""

    def __init__(self, *, addr, data, en):
        self.addr = Signal(addr)
        self.data = Signal(data)
        self.en = Signal(en)


def _be(byte_sigs):
    """Big-endian value of a list of 8-bit values (first = most significant)."""
    return Cat(*reversed(byte_sigs))


# ---------------------------------------------------------------------------- the block

class DdpRx(wiring.Component):
    """DDP/RDMAP receive path: ULPDUs in, placement writes, completions and reports out.

    Parameters
    ----------
    width : int
        Datapath width W in octets (4, 8, 16, 32); also the AXI data width.
    connections : int
        Connection contexts (rows of the context memories).
    stags : int
        Rows of the STag table (power of 2); row of a wire STag = ``stag % stags``.
    slots : int
        Segment buffers (power of 2). A ULPDU is buffered whole until the deframer's
        verdict on its last beat, so that no octet of an FPDU with a bad CRC is placed.
    slot_bytes : int
        Capacity of one segment buffer (power of 2, >= MULPDU of every connection);
        longer ULPDUs are reported as DDP local catastrophic.
    rq_depth : int
        Receive buffers that may be posted per connection (power of 2).
    addr_width : int
        AXI address width AW: host memory is ``2**AW`` octets. Placement and bounds
        arithmetic is done in AW bits: an STag row or receive buffer reaching beyond
        ``2**AW`` is refused (the row never matches, the post is dropped), and a TO with
        bits set above AW fails the bounds check (the TO-wrap check stays 64-bit).

    Ports
    -----
    i : In(stream(MpaRxBeat))
        The deframer's output.
    stag_w : In(stream(StagWrite))
        STag table row writes. Taken only between segments while no write is in
        flight, so a region that is rewritten is never written after the rewrite.
    rq_post : In(stream(RqPost))
        (Also taken only between segments with no write in flight.)
        Receive buffer posts; ``rq_overflow`` pulses (two cycles after the handshake) when
        one is dropped: queue full, or the buffer not inside the bus address space
        (``addr + length > 2**addr_width``).
    ctl : In(stream(ConnCtl))
        Connection (re)start: MSNs 1, queues empty, no error, IRD.
    rr_done : In(stream(RrDone))
        One Read Request of the connection answered (IRD slot freed).
    cq : Out(stream(Completion))
        Send and Read Response completions; issued after every write of the message
        was acknowledged on B.
    rrq : Out(stream(ReadRequestOut))
        Validated inbound RDMA Read Requests, in order, for the TX side.
    term : Out(stream(TermReport))
        Errors and received Terminates (one per connection until ``ctl``).
    m_axi : Out(AXI4WriteSignature)
        Placement writes: single-beat (``awlen`` 0) full-width writes, byte strobes.
    aw_conn : Out(conn)
        Connection of the write on ``m_axi`` AW (side band, for checkers).
    rq_overflow : Out(1)
        See ``rq_post``.

    Operation
    ---------
    *Ingest* (one beat per cycle, no bubbles): a per-connection context (memory
    ``inctx``) says whether the connection has a ULPDU open and in which slot; a
    ULPDU's first beat takes a free slot, every beat is written to the slot buffer, the
    last beat (with the deframer's verdict) queues an entry for the processor. An MPA
    status beat queues an entry without a slot. Nothing is placed before the verdict:
    a ULPDU with a CRC or marker error is dropped whole and reported (LLP 0/2, 0/3).
    Caveat: a first beat waits for a free slot, so more than ``slots`` ULPDUs open at
    once (partial ULPDUs of different connections interleaved by the deframer) stall
    the input for good; ``slots`` must cover the connections that can have a partial
    FPDU in flight.

    *Processor* (one segment at a time, in order of last beats): reads the header rows
    of the slot and the connection context, validates in the order of
    :class:`rnic.host.model.sink.Sink` (STag table row, receive-queue entry, QN 1/2 state), then
    streams the payload from the slot through a byte rotator into full-width AXI writes
    with byte strobes (one AW and one W per word, at most 128 unacknowledged), or, for
    QN 1/2, into the per-connection control buffer; on the L bit it completes (Sends in
    MSN order, after every write of the message has its B response), queues a Read
    Request or reports a Terminate. The first error is reported once every write already
    issued has left on AW, and stops the connection (later segments dropped) until
    ``ctl``. Per-segment overhead about ``ceil(18/W) + 8`` cycles (HDR takes at least
    three cycles: one more at W = 16, two more at W = 32; one more for an untagged segment,
    UACT; one more for an inbound RDMA Read Request or Terminate, RBV, and two more for a
    Read Request with a non-zero size, SWAIT and SWAIT2). Host requests: a STag table
    write takes three cycles (IDLE, STW0, STW1), a receive buffer post three (IDLE, POST0,
    POST), an IRD release four (IDLE, RRD0, RRD1, RRD), a restart two plus the control
    buffer's rows (IDLE, CTL, CLR).

    *Pipeline registers* (for timing; none of them changes the AXI, completion or report
    order, and none adds latency to a Write or a Send's placement):

    * Input: ``i.ready`` is a register (a skid register ``sk`` takes the beat offered while
      the ingest stage stalls); the queue of complete ULPDUs is read into a head register
      while it is empty, so IDLE's request arbiter only clears that register.
    * DEC's checks (context, entry and header octets 0..13) are worked out from registers
      and registered, DEC only acts on the registered flags: those on ``ent`` and octets
      0..1 (MPA verdict, length, versions, opcode) from the second-to-last HDR cycle on,
      with their priority (one error code) registered in the last HDR cycle; the others
      (stopped, QN, the MSN difference) in the last HDR cycle. The compares of a QN 0
      segment's MSN difference with the receive queue's count are registered in DEC and
      acted on in ULOAD, a QN 1 / QN 2 segment's MSN check in UCHK: the order of the
      checks is the model's, and a segment failing one of them reaches ERR one cycle
      later than in DEC.
    * The connection context is read at a registered address (the connection of the
      request IDLE takes), so its row is taken in the second HDR cycle and a post / IRD
      release waits one cycle (POST0, RRD0); the release's decremented count is
      registered in RRD1. Context and control-buffer writes are registered in front of
      the memories' write ports (done at the end of the cycle after the request: the
      context's in CLR / IDLE, where nothing reads it; the control buffer's before RB). A
      STag table write's region end (a 64-bit sum) is registered in STW0, the row written
      in STW1.
    * ``writes_idle`` (no write in flight) and ``aw_quiet_q`` (every write has left on AW;
      it gates ``term.valid``) are registers, one cycle late and never early.
    * A Send's completion is decided from registered copies of the receive-queue entry
      (block RAM) in DRAIN2, one cycle per completed Send; the checks of a Read Request or
      Terminate read back from the control buffer are registered in RBV before RBCHK acts
      on them; an untagged segment's offset checks (six compares against its message
      state) are registered in UCHK and UACT acts on them; UFIN's new message state (the
      receive-queue entry or the QN 1 / QN 2 state) is registered from UACT on, so the
      write ports see registers.
    * The STag table (block RAM) is read with the STag field of the header (octets 2..5:
      the tagged STag and the Invalidate STag alike) from the second-to-last HDR cycle on;
      the row is in the register ``row_q`` from DEC on, where TCHK's checks are worked out
      and registered (TCHK acts on them, ICHK on the first two; the sums they compare are
      registered a cycle earlier still); the source STag of a Read Request is read in
      RBCHK, registered in SWAIT, its checks registered one by one in SWAIT2 and acted on
      in SCHK.
    * The payload length ``n_q`` and ``n_nz`` (``n != 0``), the message end ``endv``, the
      control-buffer row base of the connection, the first slot row, the remaining octets
      and the words of each kind of placement are registered copies of values that are
      constant during a segment. The check states set the placer up unconditionally and
      already read the first slot row, and assign the error registers (read only in ERR)
      unconditionally, so that only the next state depends on the checks.
    * The placer reads the slot buffer through two stages (the read port, then ``cur``; the
      byte rotator sees only registers): one row per cycle at full rate, with the same
      first-write latency as a single stage.

    No bypass is needed: the processor handles one segment at a time, the STag table is
    written only in STW1 (``stag_w``) and UFIN (invalidation), never between the read of
    a row and its check, and the control buffer is read only in RB, where no write is
    pending.
    """

    def __init__(self, *, width=8, connections=16, stags=256, slots=4, slot_bytes=2048,
                 rq_depth=8, addr_width=64):
        check_width(width)
        for name, v in (("stags", stags), ("slots", slots), ("slot_bytes", slot_bytes),
                        ("rq_depth", rq_depth)):
            if not isinstance(v, int) or v < 2 or v & (v - 1):
                raise ValueError(f"{name} must be a power of 2 (>= 2), not {v!r}")
        if slot_bytes < 2 * width or slot_bytes < 32:
            raise ValueError("slot_bytes too small")
        if not 8 <= addr_width <= 64:
            raise ValueError("addr_width must be 8..64")
        self.width = width
        self.connections = connections
        self.stags = stags
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.rq_depth = rq_depth
        self.addr_width = addr_width
        C = connections
        super().__init__({
            "i": In(stream.Signature(MpaRxBeat(width=width, connections=C))),
            "stag_w": In(stream.Signature(StagWrite(stags=stags, connections=C))),
            "rq_post": In(stream.Signature(RqPost(connections=C))),
            "ctl": In(stream.Signature(ConnCtl(connections=C))),
            "rr_done": In(stream.Signature(RrDone(connections=C))),
            "cq": Out(stream.Signature(Completion(connections=C))),
            "rrq": Out(stream.Signature(ReadRequestOut(connections=C))),
            "term": Out(stream.Signature(TermReport(connections=C))),
            "m_axi": Out(AXI4WriteSignature(addr_width=addr_width, data_width=8 * width)),
            "aw_conn": Out(conn_bits(C)),
            "rq_overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        LW = exact_log2(W)
        C = self.connections
        CB = conn_bits(C)
        S = self.stags
        SB = exact_log2(S)
        N = self.slots
        NB = max(1, exact_log2(N))
        ROWS = self.slot_bytes // W
        RB = exact_log2(ROWS)
        D = self.rq_depth
        DB = exact_log2(D)
        HR = -(-18 // W)              # rows holding the 18-octet untagged header
        # HDR cycles: at least two more than the rows holding octets 0..5 (the STag field),
        # so that the STag is in ``hdr`` in the second-to-last HDR cycle (STag table read
        # address: the row is in ``row_q`` in DEC, for TCHK's verdict), and at least one more than the rows holding octets 0..13 and than the cycle taking
        # the context (``hk == 1``), so that DEC's checks can be worked out from registers in
        # the last HDR cycle (one cycle more than the rows only at W >= 16), and at least three,
        # so that the checks on ``ent`` and octets 0..1 (in place from the second HDR cycle
        # on) and their priority are registered one after the other before DEC
        HDR_END = max(HR, -(-6 // W) + 2, -(-14 // W) + 1, 3)
        CROWS = _CTL_BYTES // W       # control-buffer rows per connection
        entry_l = _Entry(slots=N, connections=C)
        ctx_l = _Ctx(rq_depth=D)
        AW = self.addr_width
        row_l = _StagRow(connections=C, addr_width=AW)
        rqe_l = _RqEntry()

        # ---------------------------------------------------------------- memories
        # Marked no_rw_collision (synthesis builds no collision logic, rnic.hdl.synth_hints); the
        # simulation semantics below stay as declared. Why no used read meets a write:
        # ``slotbuf``: the ingest writes only free or open slots, the processor reads only
        # complete slots it owns (the rows it reads for an entry without a slot are unused);
        # ``ctx``: written in CLR and IDLE (the registered requests of CTL, POST, RRD, DONE);
        # rows used are read in HDR (hk 0), POST0, RRD0; ``stag``: written in STW1 and UFIN;
        # rows used are read in the last two HDR cycles, DEC, UCHK and RBCHK; ``rq``: written
        # in POST and UFIN; rows used are read in DEC and DRAIN0; ``ctlbuf``: read only in RB,
        # where no write is pending (the requests of PLACE, CLR, QCLR). ``inctx`` is
        # read and written in the same cycle for back-to-back beats of a connection and keeps
        # its transparency.
        slotbuf = no_rw_collision(Memory(shape=8 * W, depth=N * ROWS, init=[]))
        m.submodules.slotbuf = slotbuf
        sb_wr = slotbuf.write_port()
        sb_rd = slotbuf.read_port(domain="sync")

        inctx = Memory(shape=_InCtx(slots=N, rows=ROWS), depth=C, init=[])
        m.submodules.inctx = inctx
        ic_wr = inctx.write_port()
        ic_rd = inctx.read_port(domain="sync", transparent_for=(ic_wr,))

        ctxm = no_rw_collision(Memory(shape=ctx_l, depth=C, init=[]))
        m.submodules.ctx = ctxm
        cx_wp = ctxm.write_port()
        cx_rd = ctxm.read_port(domain="sync", transparent_for=(cx_wp,))

        stagm = no_rw_collision(Memory(shape=row_l, depth=S, init=[]))
        m.submodules.stag = stagm
        st_wr = stagm.write_port()
        st_rd = stagm.read_port(domain="sync", transparent_for=(st_wr,))

        rqm = no_rw_collision(Memory(shape=rqe_l, depth=C * D, init=[]))
        m.submodules.rq = rqm
        rq_wr = rqm.write_port()
        rq_rd = rqm.read_port(domain="sync", transparent_for=(rq_wr,))

        ctlm = no_rw_collision(Memory(shape=8 * W, depth=C * CROWS, init=[]))
        m.submodules.ctlbuf = ctlm
        cb_wp = ctlm.write_port(granularity=8)
        # (not transparent: it reads only in RB, where nothing writes the control buffer;
        # a bypass would put the write address compare into the read data path)
        cb_rd = ctlm.read_port(domain="sync")

        # The context and control-buffer writes are registered in front of the write ports
        # (timing: the write data are multiplexed by the state from several sources, the
        # placer's byte rotator among them, and distributed RAM / block RAM inputs are slow):
        # a write requested on ``cx_wr`` / ``cb_wr`` in one cycle happens at the end of the
        # next. No read is affected: the context is written (requested) in CTL, POST, RRD and
        # DONE, which go to CLR or IDLE, where nothing reads it, and it is read for the next
        # request (HDR, POST0, RRD0) at the end of the cycle after IDLE at the earliest; the
        # control buffer is read only in RB, after UFIN, and written by the placer (PLACE),
        # CLR and QCLR.
        cx_wr = _WriteRequest(addr=len(cx_wp.addr), data=ctx_l, en=1)
        cb_wr = _WriteRequest(addr=len(cb_wp.addr), data=8 * W, en=len(cb_wp.en))
        m.d.sync += [cx_wp.addr.eq(cx_wr.addr), cx_wp.data.eq(cx_wr.data), cx_wp.en.eq(cx_wr.en),
                     cb_wp.addr.eq(cb_wr.addr), cb_wp.data.eq(cb_wr.data), cb_wp.en.eq(cb_wr.en)]

        # entries of complete ULPDUs, in order of their last beats (a FIFO with a
        # combinational read of its storage; the processor takes its head from the register
        # ``q_head`` below, so that the request arbiter is not in front of the FIFO's
        # pointers and output)
        ready = fifo.SyncFIFO(width=entry_l.size, depth=N + 4)
        m.submodules.ready = ready

        # AXI AW / W FIFOs; the AW one carries side band for checkers (conn, tagged, lanes)
        aw_l = data.StructLayout({
            "addr": unsigned(self.addr_width), "conn": unsigned(CB), "tagged": unsigned(1),
            "lo": unsigned(max(1, LW)), "hi": unsigned(max(1, LW)),
        })
        w_l = data.StructLayout({"data": unsigned(8 * W), "strb": unsigned(W)})
        awf = _RegFIFO(width=aw_l.size, depth=4)
        wf = _RegFIFO(width=w_l.size, depth=4)
        m.submodules.awf = awf
        m.submodules.wf = wf
        aw_out = aw_l(awf.r_data)
        w_out = w_l(wf.r_data)
        axi = self.m_axi
        m.d.comb += [
            axi.awaddr.eq(aw_out.addr), axi.awlen.eq(0), axi.awsize.eq(LW), axi.awburst.eq(1),
            axi.awvalid.eq(awf.r_rdy), awf.r_en.eq(axi.awready),
            self.aw_conn.eq(aw_out.conn),
            axi.wdata.eq(w_out.data), axi.wstrb.eq(w_out.strb), axi.wlast.eq(1),
            axi.wvalid.eq(wf.r_rdy), wf.r_en.eq(axi.wready),
            axi.bready.eq(1),
        ]
        # writes pushed and not yet acknowledged on B
        outstanding = Signal(range(256))
        w_push = Signal()
        b_ack = Signal()
        m.d.comb += b_ack.eq(axi.bvalid & (outstanding != 0))
        m.d.sync += outstanding.eq(outstanding + w_push - b_ack)
        # ``writes_idle`` registered for timing (it gates the processor's request arbiter):
        # one cycle late, and low in the cycle after a push, so it never claims idle early
        writes_idle_c = Signal()
        m.d.comb += writes_idle_c.eq((outstanding == 0) & ~awf.r_rdy & ~wf.r_rdy)
        writes_idle = Signal()
        m.d.sync += writes_idle.eq(writes_idle_c & ~w_push)
        aw_quiet = Signal()      # every pushed AW has been handed to the bus
        m.d.comb += aw_quiet.eq(~awf.r_rdy & ~wf.r_rdy)
        # room for one more write next cycle, registered for timing (it heads the placer's
        # flow control: consume -> move -> issue -> the slot buffer's read enable). It is
        # conservative: the placer pushes at most one write a cycle, so a FIFO with at most
        # depth - 2 entries, and fewer than 127 writes outstanding, take the next one.
        w_room = Signal()
        m.d.sync += w_room.eq((awf.level <= awf.depth - 2) & (wf.level <= wf.depth - 2)
                              & (outstanding < 127))

        # ---------------------------------------------------------------- ingest
        busy = Signal(N)           # slot in use
        free_mask = Signal(N)      # slots freed by the processor this cycle
        alloc_mask = Signal(N)

        s1_valid = Signal()
        s1 = Signal(MpaRxBeat(width=W, connections=C))
        s1_go = Signal()
        # ``i.ready`` is a register (timing: ``s1_go`` depends on the ingest context read, the
        # free slots and the queue, and the stage in front of the block must not wait for it):
        # a beat taken while ``s1`` stalls waits in the skid register ``sk`` and goes to ``s1``
        # first; ``i.ready`` is low while it waits. No latency is added (a beat goes straight
        # to ``s1`` while ``sk`` is empty), and after a stall the input is back at one beat per
        # cycle once ``sk`` has drained.
        sk_v = Signal()
        sk = Signal(MpaRxBeat(width=W, connections=C))
        s1_adv = Signal()          # ``s1`` takes the next beat (``sk``'s, else the input's)
        nb = Signal(MpaRxBeat(width=W, connections=C))
        m.d.comb += [
            self.i.ready.eq(~sk_v),
            s1_adv.eq(~s1_valid | s1_go),
            nb.eq(Mux(sk_v, sk.as_value(), self.i.payload.as_value())),
            ic_rd.addr.eq(nb.conn), ic_rd.en.eq(s1_adv),
        ]
        # (``sk`` loads every beat offered while it is empty: its enable waits for nothing)
        with m.If(~sk_v):
            m.d.sync += sk.eq(self.i.payload)
        m.d.sync += sk_v.eq(~s1_adv & (sk_v | self.i.valid))
        # two decodes of the beat in ``s1`` are registered with it (timing: ``s1_go``)
        s1_nz = Signal()           # s1.n != 0
        s1_err = Signal()          # an error or status beat that queues an entry
        with m.If(s1_adv):
            m.d.sync += [s1.eq(nb), s1_valid.eq(sk_v | self.i.valid), s1_nz.eq(nb.n != 0),
                         s1_err.eq((nb.error != 0) & (nb.error != RX_ABORTED))]

        ictx = _InCtx(slots=N, rows=ROWS)(ic_rd.data)
        nctx = Signal(_InCtx(slots=N, rows=ROWS))
        have_free = Signal()
        free_idx = Signal(NB)
        for k in reversed(range(N)):
            with m.If(~busy[k]):
                m.d.comb += [have_free.eq(1), free_idx.eq(k)]
        ent_in = Signal(entry_l)
        push = Signal()
        need_slot = Signal()
        m.d.comb += [
            need_slot.eq(s1_nz & s1.first & ~ictx.open),
            s1_go.eq(s1_valid & (~need_slot | have_free) & (~push | ready.w_rdy)),
            ready.w_data.eq(ent_in.as_value()),
            ready.w_en.eq(s1_go & push),
            ic_wr.addr.eq(s1.conn), ic_wr.data.eq(nctx), ic_wr.en.eq(s1_go),
        ]
        slot_now = Signal(NB)
        row_now = Signal(bits_for(ROWS))
        m.d.comb += [
            nctx.eq(ictx),
            slot_now.eq(Mux(ictx.open, ictx.slot, free_idx)),
            row_now.eq(Mux(s1.first, 0, ictx.beats)),
            sb_wr.addr.eq(Cat(row_now[:RB], slot_now)),
            sb_wr.data.eq(s1.data),
            ent_in.conn.eq(s1.conn), ent_in.err.eq(s1.error),
        ]
        with m.If(~s1_nz):
            # status or abort beat: ends an open ULPDU (its slot goes with the entry)
            m.d.comb += [
                push.eq(ictx.open | s1_err),
                ent_in.slot.eq(ictx.slot), ent_in.has_slot.eq(ictx.open),
                ent_in.len.eq(0), nctx.open.eq(0),
            ]
        with m.Else():
            new_len = Signal(17)
            ovf = Signal()
            m.d.comb += [
                new_len.eq(Mux(s1.first, 0, ictx.len) + s1.n),
                ovf.eq((row_now >= ROWS) | (~s1.first & ictx.ovf) | new_len[16]),
                sb_wr.en.eq(s1_go & (row_now < ROWS)),
                alloc_mask.eq(Mux(s1_go & need_slot, 1 << free_idx, 0)),
                nctx.slot.eq(slot_now), nctx.beats.eq(row_now + 1), nctx.len.eq(new_len),
                nctx.ovf.eq(ovf), nctx.open.eq(~s1.last),
                push.eq(s1.last),
                ent_in.slot.eq(slot_now), ent_in.has_slot.eq(1),
                ent_in.len.eq(Mux(new_len[16], 0xFFFF, new_len[:16])), ent_in.ovf.eq(ovf),
            ]
        m.d.sync += busy.eq((busy | alloc_mask) & ~free_mask)

        # ---------------------------------------------------------------- processor
        ent = Signal(entry_l)
        c = Signal(ctx_l)
        hdr = Signal(8 * HR * W)
        hk = Signal(range(HR + 2))
        hb = [hdr[8 * k:8 * k + 8] for k in range(HR * W)]
        ctrl = hb[0]
        T = ctrl[7]
        Lb = ctrl[6]
        dv = ctrl[0:2]
        rv = hb[1][6:8]
        opcode = hb[1][0:4]
        h_stag = _be(hb[2:6])
        h_to = _be(hb[6:14])
        h_inval = _be(hb[2:6])
        h_qn = _be(hb[6:10])
        h_msn = _be(hb[10:14])
        h_mo = _be(hb[14:18])
        hlen = Signal(5)
        m.d.comb += hlen.eq(Mux(T, 14, 18))
        n = Signal(17)             # payload octets (valid once len >= hlen)
        m.d.comb += n.eq(ent.len - hlen)
        # ``n_q``/``n_nz``/``endv`` registered for timing (the subtraction, the zero test and
        # the MO addition stay out of the checks, the placer set-up and the next-state
        # logic): ``ent`` and octet 0 (T, hence ``hlen``) are in place from the second HDR
        # cycle on, so ``n_q == n`` and ``n_nz == (n != 0)`` from the third HDR cycle to the
        # end of the segment; ``endv == h_mo + n`` from the cycle after DEC on (the header's
        # last row is in place in DEC).
        n_q = Signal(17)
        m.d.sync += n_q.eq(n)
        n_nz = Signal()
        m.d.sync += n_nz.eq(ent.len != hlen)

        einfo = Signal(16)
        emd = Signal()             # report carries M (segment length) and D (DDP header)
        ed = Signal()
        er = Signal()
        row = Signal(row_l)        # STag row under check
        e = Signal(rqe_l)          # receive buffer of the segment (QN 0)
        # uniform message state for the offset checks
        mcap = Signal(32)
        many = Signal()
        mmaxmo = Signal(32)
        mmaxend = Signal(33)
        mlv = Signal()
        mlmo = Signal(32)
        mlend = Signal(33)
        endv = Signal(33)
        m.d.sync += endv.eq(h_mo + n_q)
        qn_now = Signal(2)         # QN of the segment (0, 1, 2) once checked
        ridx = Signal(DB + CB)     # rq entry index of the segment
        msgbuf = Signal(8 * 64)    # read back QN 1 / QN 2 message
        mb = [msgbuf[8 * k:8 * k + 8] for k in range(64)]
        rcnt = Signal(range(64 // W + 2))
        rb_code = Signal(16)       # RBV's verdict on the message read back: its error
        rb_bad = Signal()          # (if ``rb_bad``)
        rb_size_nz = Signal()
        drain_go = Signal()        # DRAIN1's verdict: the head entry is complete

        # placer
        p_axi = Signal()           # target: host memory (else the control buffer)
        p_addr = Signal(AW)        # aligned address of the next output word
        p_start = Signal(AW)       # first and one-past-last address of the placement
        p_end = Signal(AW + 1)     # (kept for checkers; unused by the logic)
        p_lo = Signal(max(1, LW))  # A mod W
        p_rem = Signal(18)         # octets from the current output word's start to the end
        p_first_word = Signal()
        p_r = Signal(max(1, LW))   # byte rotation
        p_row = Signal(RB + 1)
        p_reads = Signal(bits_for(ROWS + 2))
        p_words = Signal(bits_for(ROWS + 2))
        # slot rows in the placer's two-stage read pipeline: ``p_rv`` the slot buffer's read
        # port holds a row not yet taken, ``p_dv`` ``cur`` holds a row not yet consumed.
        # ``cur`` is registered for timing: the block RAM's clock-to-out must not feed the
        # byte rotator and the W FIFO in the same cycle.
        p_rv = Signal()
        p_dv = Signal()
        p_load = Signal()          # next consumed row only loads ``prev``
        cur = Signal(8 * W)
        prev = Signal(8 * W)
        p_done = Signal()
        m.d.comb += p_done.eq(p_words == 0)

        cq_p = Signal(Completion(connections=C))
        rr_p = Signal(ReadRequestOut(connections=C))
        tr_p = Signal(TermReport(connections=C))
        m.d.comb += [self.cq.payload.eq(cq_p), self.rrq.payload.eq(rr_p), self.term.payload.eq(tr_p)]

        # context read address: a register, loaded with the connection of the request taken
        # in IDLE, so that the arbiter is not in the read path; the row is on the read port
        # from the second cycle after IDLE (HDR with ``hk == 1``, POST, RRD)
        req_conn = Signal(CB)
        rd_conn = Signal(CB)
        m.d.comb += [cx_rd.addr.eq(rd_conn), cx_rd.en.eq(1)]
        ctl_p = self.ctl.payload
        post_p = self.rq_post.payload
        # what the processor sees of the ingest: the queue of complete ULPDUs and the slot
        # buffer's read data. A formal harness may replace both by free signals
        # (``_formal_ingest = (r_rdy, r_data, slot_data)``): the processor and the
        # placement are then checked against every possible ingest behaviour.
        # The head of the queue is a register (timing: the request arbiter of IDLE, which
        # waits for the other requests' valid signals, then only clears ``q_head_v``; the
        # FIFO is read only while the register is empty): the same latency as a buffered
        # FIFO, and one idle cycle between two takes, which the processor never uses.
        q_head_v = Signal()
        q_head = Signal(entry_l.size)
        q_take = Signal()
        m.d.comb += ready.r_en.eq(~q_head_v)
        with m.If(~q_head_v):
            m.d.sync += [q_head.eq(ready.r_data), q_head_v.eq(ready.r_rdy)]
        with m.Elif(q_take):
            m.d.sync += q_head_v.eq(0)
        q_rdy, q_data, sb_data = q_head_v, q_head, sb_rd.data
        if getattr(self, "_formal_ingest", None) is not None:
            q_rdy, q_data, sb_data = self._formal_ingest
        ent_head = entry_l(q_data)
        lat = Signal(RqPost(connections=C))    # latched post / ctl / rr_done request
        lat_ird = Signal(14)
        rrd_rrc = Signal(14)
        clr = Signal(range(CROWS + 1))
        clr_base = Signal(range(CROWS + 1))
        clr_n = Signal(range(CROWS + 1))
        # first control-buffer row of the segment's / the latched connection, registered for
        # timing (a constant multiply in the control buffer's address path): ``ent`` is
        # stable from the cycle after IDLE to the end of the segment, ``lat.conn`` from
        # CTL to the end of CLR (QCLR, where ``lat.conn == ent.conn``, uses ``ent_cb``)
        ent_cb = Signal(range(C * CROWS + 1))
        lat_cb = Signal(range(C * CROWS + 1))
        # (shifts and adds: a multiplier would take a DSP block, slower than the adders)
        def times_crows(v):
            return sum(v << b for b in range(bits_for(CROWS)) if CROWS >> b & 1)
        m.d.sync += [ent_cb.eq(times_crows(ent.conn)), lat_cb.eq(times_crows(lat.conn))]
        # the first row of the segment's QN 1 / QN 2 message buffer, likewise (``qn_now`` is
        # stable from the cycle after DEC on; RB reads it)
        rb_base = Signal(range(C * CROWS + 1))
        m.d.sync += rb_base.eq(ent_cb + Mux(qn_now == 1, 0, _QN2_BASE // W))

        # slot read port default: header rows
        m.d.comb += [sb_rd.en.eq(0), sb_rd.addr.eq(Cat(Const(0, RB), ent.slot))]

        # control-buffer port defaults
        m.d.comb += [cb_wr.en.eq(0)]

        def verdict(code, md=1):
            """The error a check state reports if it goes to ERR. Assigned in every cycle of
            the state, whatever the checks say (timing: the error registers' enables are the
            state only; ERR is the only reader and every way to it sets them)."""
            m.d.sync += [einfo.eq(code), emd.eq(md)]

        def fail(code=None, md=1):
            if code is not None:
                verdict(code, md)
            m.next = "ERR"

        # placement set-up; done unconditionally in the check states (the placer registers
        # are only used in PLACE), so that only the next state depends on the checks. The
        # first slot row is read here already (``p_rv``), which hides the cycle of ``cur``.
        # The first slot row (it depends on the low bits of the target address) is worked out
        # a cycle ahead and registered, one copy per kind of segment: it drives the slot
        # buffer's read address, which must not wait for the header register's fan-out and
        # the address adder. Tagged: from TO (stable from the last HDR cycle on); untagged:
        # from the buffer address and MO (stable from UCHK on).
        # (``hl``: the header length of the kind of segment, a constant: 14 tagged, 18 untagged)
        def first_row_of(lo, hl):
            sum_ = Signal(6, name="p_s")
            row = Signal(max(7, RB + 1), name="p_first_row")
            m.d.comb += [sum_.eq(hl + W - lo), row.eq(sum_[LW:] - 1)]
            return sum_, row

        if LW:
            t_lo = h_to[:LW]
            # (the QN 1 / QN 2 message buffers start at a row boundary: 0 and _QN2_BASE)
            assert _QN2_BASE % W == 0
            u_lo = (Mux(qn_now == 0, e.addr[:LW], 0) + h_mo[:LW])[:LW]
        else:
            t_lo = u_lo = Const(0, 1)
        t_first_row = Signal(max(7, RB + 1))
        u_first_row = Signal(max(7, RB + 1))
        # the untagged target address, registered likewise (its operands are stable from UCHK
        # on: ``e`` loaded in ULOAD, ``qn_now`` in DEC, the header): used in UACT and ICHK
        u_addr = Signal(AW)
        m.d.sync += u_addr.eq(Mux(qn_now == 0, (e.addr[:AW] + h_mo)[:AW],
                                  Mux(qn_now == 1, 0, _QN2_BASE) + h_mo[:7]))
        m.d.sync += [t_first_row.eq(first_row_of(t_lo, 14)[1]), u_first_row.eq(first_row_of(u_lo, 18)[1])]
        # the octets from the first output word's start to the end, and the words, registered
        # likewise (``place_pairs``: valid in TCHK, and in UACT and ICHK); ``n_w`` (``n_q + W -
        # 1``, from DEC on) keeps them one adder deep
        n_w = Signal(18)
        m.d.sync += n_w.eq(n_q + (W - 1))
        place_pairs = []

        def place_sums(lo, kind):
            rem = Signal(18, name=f"{kind}_rem")
            words = Signal(bits_for(ROWS + 2), name=f"{kind}_words")
            for reg, value in ((rem, lo + n_q), (words, (lo + n_w) >> LW)):
                comb = Signal(len(reg), name=f"{reg.name}_c")
                m.d.comb += comb.eq(value)
                m.d.sync += reg.eq(comb)
                place_pairs.append((reg, comb, kind == "t"))
            return rem, words
        t_sums = place_sums(t_lo, "t")
        u_sums = place_sums(u_lo, "u")

        def place_regs(addr, to_axi, first_row, sums, hl):
            n = n_q
            lo = addr[:LW] if LW else Const(0, 1)
            s, _ = first_row_of(lo, hl)
            rem, words = sums
            m.d.sync += [
                p_axi.eq(to_axi),
                p_addr.eq(Cat(Const(0, LW), addr[LW:AW])),
                p_start.eq(addr[:AW]), p_end.eq(addr[:AW] + n),
                p_lo.eq(lo), p_r.eq(s[:LW] if LW else 0),
                p_rem.eq(rem), p_first_word.eq(1),
                p_row.eq(first_row[:RB + 1] + 1),
                p_reads.eq(words), p_words.eq(words),
                p_rv.eq(1), p_dv.eq(0), p_load.eq(1),
            ]
            m.d.comb += [sb_rd.en.eq(1), sb_rd.addr.eq(Cat(first_row[:RB], ent.slot))]


        # STag table read: the address defaults to the segment's STag field (octets 2..5 of
        # the header: the tagged STag and the Send-with-Invalidate STag alike), presented from
        # the second-to-last HDR cycle on, so that the row is on the read port from the last
        # HDR cycle and in ``row_q`` from DEC on (TCHK's verdict, ICHK). ``row_q`` is
        # registered for timing: the block RAM's clock-to-out (~4 ns on ECP5) must not feed
        # the bounds compare and the placer's enables in the same cycle.
        stag_idx = Signal(SB if SB else 1)
        m.d.comb += [st_rd.en.eq(1), st_rd.addr.eq(stag_idx), st_wr.en.eq(0)]
        m.d.comb += [rq_rd.en.eq(1), rq_wr.en.eq(0)]
        m.d.comb += stag_idx.eq(h_stag)
        rd_row = row_l(st_rd.data)
        row_q = Signal(row_l)
        m.d.sync += row_q.eq(rd_row)
        rd_e = rqe_l(rq_rd.data)

        # DEC's checks (in the order of rnic.host.model.sink.Sink): they read only ``ent``, the context
        # ``c`` and octets 0..13 of the header, which are all in place in the last HDR cycle
        # and do not change until the segment ends. Each condition is worked out every cycle
        # from registers and registered, so that in DEC only a short priority of registered
        # flags is in front of the next state (timing), in three groups:
        #
        # * ``dec_early`` (the verdict on ``ent`` and octets 0..1: CRC / marker / status,
        #   length, DDP and RDMAP versions, opcode): their operands are in place from the
        #   second HDR cycle on, so they are registered one cycle earlier still, and their
        #   priority (``pre_*``: one error code) is registered in the last HDR cycle;
        # * ``dec_pairs`` (stopped / aborted, QN compares) and ``dec_msn_pairs`` (the MSN
        #   difference ``d_msn``, the QN 1 / QN 2 MSN compares, the receive-queue entry
        #   index), registered in the last HDR cycle;
        # * the compares of ``d_msn`` with the receive queue's count (QN 0), registered in DEC
        #   and acted on in ULOAD (the state DEC goes to for every untagged QN 0 segment with
        #   no earlier error), and the QN 1 / QN 2 MSN check, acted on in UCHK (the state DEC
        #   goes to for every untagged QN 1 / QN 2 segment with no earlier error): the order of
        #   the checks and the codes are those of the model; a failing segment reaches ERR one
        #   cycle later than it would in DEC, and no segment is placed later.
        def first_code(name, cases):
            """The error code of the first (flag, code) case whose flag is set, else 0."""
            code = Signal(16, name=name)
            value = Const(0, 16)
            for flag, c in reversed(cases):
                value = Mux(flag, c, value)
            m.d.comb += code.eq(value)
            return code

        def registered(conds, prefix):
            flags, pairs = {}, []
            for name, value in conds.items():
                comb = Signal(len(Value.cast(value)), name=f"{prefix}_{name}_c")
                reg = Signal(len(Value.cast(value)), name=f"{prefix}_{name}")
                m.d.comb += comb.eq(value)
                m.d.sync += reg.eq(comb)
                flags[name] = reg
                pairs.append((reg, comb))
            return flags, pairs

        aflag, dec_early = registered(dict(
            crc=ent.err == RxError.CRC, marker=ent.err == RxError.MARKER, err=ent.err != 0,
            # (longer than a slot without ``ovf``: only with beats of more than W octets,
            # which the deframer never sends)
            len=ent.ovf | (ent.len < hlen) | (ent.len > ROWS * W),
            dv=dv != 1, rv=rv != 1, opcode=opcode[3] | (((opcode == 0) | (opcode == 2)) != T),
        ), "dec")
        pre_code_c = Signal(16)
        with m.If(aflag["crc"]):
            m.d.comb += pre_code_c.eq(E_LLP_CRC)
        with m.Elif(aflag["marker"]):
            m.d.comb += pre_code_c.eq(E_LLP_MARKER)
        with m.Elif(aflag["err"] | aflag["len"]):
            m.d.comb += pre_code_c.eq(E_DDP_CATASTROPHIC)
        with m.Elif(aflag["dv"]):
            m.d.comb += pre_code_c.eq(Mux(T, E_DDP_T_VERSION, E_DDP_U_VERSION))
        with m.Elif(aflag["rv"]):
            m.d.comb += pre_code_c.eq(E_RO_VERSION)
        with m.Else():
            m.d.comb += pre_code_c.eq(E_RO_OPCODE)
        pflag, pre_pairs = registered(dict(
            bad=Cat(*aflag.values()).any(), code=pre_code_c,
            # M and D (the segment length and the DDP header) go with every error but the
            # MPA ones (CRC, marker, status); D not with a length error either
            md=~(aflag["crc"] | aflag["marker"] | aflag["err"]),
            ed=~(aflag["crc"] | aflag["marker"] | aflag["err"] | aflag["len"]),
        ), "pre")

        d_msn_c = Signal(32)
        m.d.comb += d_msn_c.eq(h_msn - c.rbase)
        dflag, dec_pairs = registered(dict(
            done=c.stopped | (ent.err == RX_ABORTED),
            qn_gt2=h_qn > 2, qn_op=h_qn != Mux(opcode == 1, 1, Mux(opcode == 7, 2, 0)),
            qn0=h_qn == 0, q1=h_qn == 1,
        ), "dec")
        dec_pairs = dec_early + pre_pairs + dec_pairs
        # (the MSN checks' operands, kept apart for a formal harness: only untagged segments
        # use them)
        dflag_msn, dec_msn_pairs = registered(dict(
            q1_ne=h_msn != c.q1.msn, q2_ne=h_msn != c.q2.msn, d_msn=d_msn_c,
            # receive-queue entry of an untagged QN 0 segment (only the low bits of the sum)
            ridx=(Cat((c.head[:DB] + h_msn[:DB] - c.rbase[:DB])[:DB], ent.conn) if DB
                  else ent.conn),
        ), "dec")
        dflag.update(dflag_msn)
        dec_q1 = dflag["q1"]       # QN 1 (else QN 2) for UCHK
        dec_ridx = dflag["ridx"]
        # the MSN of a QN 0 segment against the receive queue (valid from the cycle after DEC)
        mflag, msn_pairs = registered(dict(
            lt=dflag["d_msn"] < c.count, eq=dflag["d_msn"] == c.count), "msn")

        # DEC's verdict, from the registered flags
        dec_go = Signal(6)         # one-hot: _DEC_DONE .. _DEC_UCHK
        with m.If(dflag["done"]):
            m.d.comb += dec_go[_DEC_DONE].eq(1)
        with m.Elif(pflag["bad"]):
            m.d.comb += dec_go[_DEC_FAIL].eq(1)
        with m.Elif(T):
            m.d.comb += [dec_go[_DEC_TCHK].eq(n_nz), dec_go[_DEC_TFIN].eq(~n_nz)]
        with m.Elif(dflag["qn_gt2"] | dflag["qn_op"]):
            m.d.comb += dec_go[_DEC_FAIL].eq(1)
        with m.Elif(dflag["qn0"]):
            m.d.comb += dec_go[_DEC_ULOAD].eq(1)
        with m.Else():
            m.d.comb += dec_go[_DEC_UCHK].eq(1)
        dec_code = Mux(pflag["bad"], pflag["code"], Mux(dflag["qn_gt2"], E_DDP_U_QN, E_RO_OPCODE))

        # TCHK's checks (tagged segment against its STag row), worked out every cycle from
        # registers and registered: in DEC ``row_q`` already holds the segment's row (the
        # table is read from the second-to-last HDR cycle on), ``n_q`` its payload length,
        # and none of them changes until the segment ends, so TCHK acts on DEC's verdict.
        # The adder is a cycle ahead: ``endt_q`` (end of the tagged range) from the last HDR
        # cycle, where ``h_to`` and ``n_q`` are in place; the row holds the end of its region.
        # So DEC only compares.
        endt_q = Signal(65)
        to_hi_q = Signal()
        m.d.sync += [endt_q.eq(h_to + n_q),
                     to_hi_q.eq((h_to[AW:64] != 0) if AW < 64 else 0)]
        # the compares (with TO below 2**AW, ``endt_q`` is below 2**(AW+1)), registered in
        # DEC (``tchk_pairs``); TCHK's verdict is their priority. ICHK uses the first two
        # (the row of the Invalidate STag, the same header field).
        tflag, tchk_pairs = registered(dict(
            invalid=~row_q.valid | (row_q.stag != h_stag), other_conn=row_q.conn != ent.conn,
            no_write=~row_q.rw, wrap=endt_q[64],
            bounds=to_hi_q | (h_to[:AW] < row_q.base) | (endt_q[:AW + 1] > row_q.end)), "tchk")
        tchk_code = first_code("tchk_code", (
            (tflag["invalid"], E_DDP_T_INVALID_STAG), (tflag["other_conn"], E_DDP_T_NOT_ASSOC),
            (tflag["no_write"], E_RP_ACCESS), (tflag["wrap"], E_DDP_T_TO_WRAP),
            (tflag["bounds"], E_DDP_T_BOUNDS)))

        # UCHK's offset checks (untagged segment against its message state: the receive
        # buffer for QN 0, the queue state for QN 1/2): the six compares are worked out every
        # cycle from the registers DEC or ULOAD loaded and registered (``uchk_flags``), so
        # that in UACT, which acts on the verdict, only their priority is in front of the
        # next state. The operands stay put until the segment ends, so UFIN uses two of the
        # flags for the new message state too.
        uflag, uchk_pairs = registered(dict(
            mo_ge_cap=h_mo >= mcap, end_gt_cap=endv > mcap, mo_gt_cap=h_mo > mcap,
            mo_gt_lmo=h_mo > mlmo, end_gt_lend=endv > mlend, maxmo_gt=mmaxmo > h_mo,
            maxend_gt=mmaxend > endv,
            # which compares count, registered too (timing: ``n_nz`` fans out far)
            when_nz=n_nz, when_z_l=~n_nz & Lb, when_lv=(n_nz | Lb) & mlv, when_l_many=Lb & many,
            when_l=Lb), "uchk")
        uchk_bad = Signal(16)
        uchk_fail = Signal()       # uchk_bad != 0, as a sum of products of the flags
        m.d.comb += uchk_fail.eq((uflag["when_nz"] & (uflag["mo_ge_cap"] | uflag["end_gt_cap"]))
                                 | (uflag["when_z_l"] & uflag["mo_gt_cap"])
                                 | (uflag["when_lv"] & (uflag["mo_gt_lmo"] | uflag["end_gt_lend"]))
                                 | (uflag["when_l_many"] & uflag["maxmo_gt"])
                                 | (uflag["when_l"] & uflag["maxend_gt"]))
        with m.If(uflag["when_nz"] & uflag["mo_ge_cap"]):
            m.d.comb += uchk_bad.eq(E_DDP_U_MO)
        with m.Elif(uflag["when_nz"] & uflag["end_gt_cap"]):
            m.d.comb += uchk_bad.eq(E_DDP_U_TOO_LONG)
        with m.Elif(uflag["when_z_l"] & uflag["mo_gt_cap"]):
            m.d.comb += uchk_bad.eq(E_DDP_U_TOO_LONG)
        with m.Elif(uflag["when_lv"] & (uflag["mo_gt_lmo"] | uflag["end_gt_lend"])):
            m.d.comb += uchk_bad.eq(E_DDP_U_MO)
        with m.Elif((uflag["when_l_many"] & uflag["maxmo_gt"]) | (uflag["when_l"] & uflag["maxend_gt"])):
            m.d.comb += uchk_bad.eq(E_DDP_U_MO)

        # UFIN's new message state (the receive-queue entry for QN 0, the queue state for
        # QN 1/2), worked out every cycle and registered (timing: the block RAM's write data
        # and the context register see only registers): its operands are in place from UACT
        # on (the offset flags are registered in UCHK) and UFIN comes at least a cycle later.
        note = n_nz | Lb
        nmaxmo = Mux(many & uflag["maxmo_gt"], mmaxmo, h_mo)
        nmaxend = Mux(uflag["maxend_gt"], mmaxend, endv)
        inv = (opcode == 4) | (opcode == 6)
        ufin_e_c = Signal(rqe_l)
        m.d.comb += ufin_e_c.eq(e)
        with m.If(note):
            m.d.comb += [ufin_e_c.any.eq(1), ufin_e_c.max_mo.eq(nmaxmo), ufin_e_c.max_end.eq(nmaxend)]
        with m.If(Lb):
            m.d.comb += [ufin_e_c.lv.eq(1), ufin_e_c.l_mo.eq(h_mo), ufin_e_c.l_end.eq(endv),
                         ufin_e_c.done.eq(1), ufin_e_c.opcode.eq(opcode), ufin_e_c.inval.eq(inv),
                         ufin_e_c.inval_stag.eq(Mux(inv, h_inval, 0))]
        ufin_q_c = Signal(_QState())
        m.d.comb += ufin_q_c.eq(Mux(qn_now == 1, c.q1.as_value(), c.q2.as_value()))
        with m.If(note):
            m.d.comb += [ufin_q_c.any.eq(1), ufin_q_c.max_mo.eq(nmaxmo), ufin_q_c.max_end.eq(nmaxend)]
        with m.If(Lb):
            m.d.comb += [ufin_q_c.lv.eq(1), ufin_q_c.l_mo.eq(h_mo), ufin_q_c.l_end.eq(endv)]
        ufin_e = Signal(rqe_l)
        ufin_q = Signal(_QState())
        ufin_inv = Signal()        # a Send with Invalidate completes its message
        m.d.sync += [ufin_e.eq(ufin_e_c), ufin_q.eq(ufin_q_c), ufin_inv.eq(Lb & inv)]

        # a posted buffer inside the bus address space: worked out from ``lat`` (latched in
        # IDLE) in POST0 and registered, POST only uses the flag
        post_end = Signal(65)
        m.d.comb += post_end.eq(lat.addr + lat.length)
        post_fit = Signal()
        m.d.sync += post_fit.eq((post_end <= (1 << AW)) & (lat.addr < (1 << AW)))

        # SCHK's checks (an inbound Read Request's source STag, TO and size, from the message
        # read back, against the row in ``row_q``), worked out every cycle and registered
        # one by one: valid in SCHK (the row is in ``row_q`` in SWAIT2), where only their
        # priority is in front of the next state. The message is in place from RBV on, so
        # the sum ``ends`` (registered) is valid from RBCHK on.
        src_to = _be(mb[20:28])
        src_stag = _be(mb[16:20])
        src_size = _be(mb[12:16])
        ends = Signal(65)
        src_hi_zero = Signal()
        m.d.sync += [ends.eq(src_to + src_size),
                     src_hi_zero.eq((src_to[AW:64] == 0) if AW < 64 else 1)]
        # TOs src_to .. ends - 1 inside the row (with src_to below 2**AW, ``ends`` is the sum
        # in the bus address width plus one bit)
        sflag, schk_pairs = registered(dict(
            invalid=~row_q.valid | (row_q.stag != src_stag), other_conn=row_q.conn != ent.conn,
            no_read=~row_q.rr, wrap=ends[64],
            bounds=~src_hi_zero | (src_to[:AW] < row_q.base) | (ends > row_q.end)), "schk")
        schk_code = first_code("schk_code", (
            (sflag["invalid"], E_RP_INVALID_STAG), (sflag["other_conn"], E_RP_NOT_ASSOC),
            (sflag["no_read"], E_RP_ACCESS), (sflag["wrap"], E_RP_TO_WRAP),
            (sflag["bounds"], E_RP_BOUNDS)))

        # STag table writes (``stag_w``): the request is latched in IDLE, the end of the region
        # (a 64-bit sum) registered in STW0 and the row written in STW1 (timing: neither the
        # sum nor the request arbiter is in front of the block RAM's write port)
        sw_lat = Signal(StagWrite(stags=S, connections=C))
        sw_end = Signal(65)
        m.d.sync += sw_end.eq(sw_lat.base + sw_lat.length)
        wrow = Signal(row_l)
        m.d.comb += [
            wrow.stag.eq(sw_lat.stag), wrow.base.eq(sw_lat.base[:AW]), wrow.end.eq(sw_end[:AW + 1]),
            # a region outside the bus address space never matches
            wrow.valid.eq(sw_lat.valid & (sw_end <= (1 << AW)) & (sw_lat.base < (1 << AW))),
            wrow.rr.eq(sw_lat.remote_read), wrow.rw.eq(sw_lat.remote_write), wrow.conn.eq(sw_lat.conn),
        ]
        # the write ports' data and address are chosen by the state only (timing: no check is
        # in front of them; the enables say whether a write happens): the STag table is
        # written in STW1 and UFIN (invalidation), the receive queue in POST and UFIN
        irow = Signal(row_l)
        m.d.comb += [irow.eq(row), irow.valid.eq(0),
                     st_wr.addr.eq(h_inval), st_wr.data.eq(irow),
                     rq_wr.addr.eq(ridx), rq_wr.data.eq(ufin_e)]

        # the report queue may take the report once every write issued has left on AW:
        # registered (timing: ``term.valid`` goes to the host side's logic), one cycle late and
        # never early (low in the cycle after a push)
        aw_quiet_q = Signal()
        m.d.sync += aw_quiet_q.eq(aw_quiet & ~w_push)

        with m.FSM(name="proc") as fsm:
            with m.State("IDLE"):
                # the head of the queue is loaded whether or not it is taken, and its first
                # slot row read (timing: only the next state and ``q_take`` wait for the
                # arbiter; nothing reads ``ent`` or ``hk`` outside a segment)
                m.d.sync += [rd_conn.eq(req_conn), ent.eq(ent_head), hk.eq(0)]
                m.d.comb += [sb_rd.en.eq(1), sb_rd.addr.eq(Cat(Const(0, RB), ent_head.slot))]
                with m.If(self.ctl.valid):
                    m.d.comb += [req_conn.eq(ctl_p.conn), self.ctl.ready.eq(1)]
                    m.d.sync += [lat.conn.eq(ctl_p.conn), lat_ird.eq(ctl_p.ird)]
                    m.next = "CTL"
                with m.Elif(self.stag_w.valid & writes_idle):
                    m.d.comb += self.stag_w.ready.eq(1)
                    m.d.sync += sw_lat.eq(self.stag_w.payload)
                    m.next = "STW0"
                with m.Elif(self.rq_post.valid & writes_idle):
                    m.d.comb += [req_conn.eq(post_p.conn), self.rq_post.ready.eq(1)]
                    m.d.sync += lat.eq(post_p)
                    m.next = "POST0"
                with m.Elif(self.rr_done.valid):
                    m.d.comb += [req_conn.eq(self.rr_done.payload.conn), self.rr_done.ready.eq(1)]
                    m.d.sync += lat.conn.eq(self.rr_done.payload.conn)
                    m.next = "RRD0"
                with m.Elif(q_rdy):
                    m.d.comb += [req_conn.eq(ent_head.conn), q_take.eq(1)]
                    m.next = "HDR"

            # a STag table row: the sum ``sw_end`` is registered here, the row written in STW1
            with m.State("STW0"):
                m.next = "STW1"

            with m.State("STW1"):
                m.d.comb += [st_wr.en.eq(1), st_wr.addr.eq(sw_lat.index), st_wr.data.eq(wrow)]
                m.next = "IDLE"

            with m.State("CTL"):
                m.d.comb += [cx_wr.en.eq(1), cx_wr.addr.eq(lat.conn)]
                rst = Signal(ctx_l, name="ctx_reset")
                m.d.comb += [rst.ird.eq(lat_ird), rst.rbase.eq(1), rst.q1.msn.eq(1),
                             rst.q2.msn.eq(1), cx_wr.data.eq(rst)]
                m.d.sync += [clr.eq(0), clr_base.eq(0), clr_n.eq(CROWS)]
                m.next = "CLR"

            with m.State("CLR"):
                # zero control-buffer rows clr_base .. clr_base + clr_n - 1 of lat.conn
                m.d.comb += [
                    cb_wr.addr.eq(lat_cb + clr_base + clr), cb_wr.data.eq(0),
                    cb_wr.en.eq((1 << W) - 1),
                ]
                m.d.sync += clr.eq(clr + 1)
                with m.If(clr + 1 >= clr_n):
                    m.next = "IDLE"

            # (the context row of ``lat.conn`` is read in POST0 / RRD0)
            with m.State("POST0"):
                m.next = "POST"

            with m.State("RRD0"):
                m.next = "RRD1"

            with m.State("POST"):
                cc = ctx_l(cx_rd.data)
                ne = Signal(rqe_l, name="post_entry")
                nc = Signal(ctx_l, name="post_ctx")
                m.d.comb += [
                    ne.addr.eq(lat.addr), ne.length.eq(lat.length), ne.id.eq(lat.id),
                    rq_wr.addr.eq(Cat((cc.head + cc.count)[:DB], lat.conn) if DB else lat.conn),
                    rq_wr.data.eq(ne),
                    cx_wr.addr.eq(lat.conn), nc.eq(cc), nc.count.eq(cc.count + 1), cx_wr.data.eq(nc),
                ]
                # a buffer that wraps the 64-bit address space is refused like a full queue
                with m.If((cc.count < D) & post_fit):
                    m.d.comb += [rq_wr.en.eq(1), cx_wr.en.eq(1)]
                with m.Else():
                    m.d.comb += self.rq_overflow.eq(1)
                m.next = "IDLE"

            with m.State("RRD1"):
                # the decremented count is registered (timing: the context memory's write
                # data sees no subtraction); RRD writes it
                cc = ctx_l(cx_rd.data)
                m.d.sync += rrd_rrc.eq(Mux(cc.rrc == 0, 0, cc.rrc - 1))
                m.next = "RRD"

            with m.State("RRD"):
                cc = ctx_l(cx_rd.data)
                nc = Signal(ctx_l, name="rrd_ctx")
                m.d.comb += [nc.eq(cc), nc.rrc.eq(rrd_rrc),
                             cx_wr.en.eq(1), cx_wr.addr.eq(lat.conn), cx_wr.data.eq(nc)]
                m.next = "IDLE"

            with m.State("HDR"):
                with m.If(hk == 1):
                    m.d.sync += c.eq(cx_rd.data)
                # data of row hk is on the read port
                for k in range(HR):
                    with m.If(hk == k):
                        m.d.sync += hdr[8 * W * k:8 * W * (k + 1)].eq(sb_data)
                hrow = Signal(RB, name="hdr_row")
                m.d.comb += [hrow.eq(hk + 1), sb_rd.en.eq(1), sb_rd.addr.eq(Cat(hrow, ent.slot))]
                m.d.sync += hk.eq(hk + 1)
                with m.If(hk == HDR_END - 1):
                    m.next = "DEC"

            with m.State("DEC"):
                # acts on the flags registered in the last HDR cycle (``dec_go``). The
                # untagged set-up is done whatever the verdict (timing: the wide registers'
                # enables do not wait for the verdict): the queue number, the receive-queue
                # entry (read here; ULOAD takes it) and the QN 1 / QN 2 message state, which
                # ULOAD replaces by the receive buffer's for QN 0. A tagged or failed segment
                # uses none of them.
                q = Signal(_QState(), name="q_sel")
                m.d.comb += [q.eq(Mux(dec_q1, c.q1.as_value(), c.q2.as_value())), rq_rd.addr.eq(dec_ridx)]
                verdict(dec_code, pflag["md"])
                m.d.sync += [
                    ed.eq(pflag["ed"]), er.eq(0),
                    qn_now.eq(Mux(dflag["qn0"], 0, Mux(dec_q1, 1, 2))), ridx.eq(dec_ridx),
                    mcap.eq(Mux(dec_q1, _QN1_CAP, _QN2_CAP)),
                    many.eq(q.any), mmaxmo.eq(q.max_mo), mmaxend.eq(q.max_end),
                    mlv.eq(q.lv), mlmo.eq(q.l_mo), mlend.eq(q.l_end),
                ]
                for kind, state in ((_DEC_DONE, "DONE"), (_DEC_FAIL, "ERR"), (_DEC_TCHK, "TCHK"),
                                    (_DEC_TFIN, "TFIN"), (_DEC_ULOAD, "ULOAD"), (_DEC_UCHK, "UCHK")):
                    with m.If(dec_go[kind]):
                        m.next = state

            with m.State("ULOAD"):
                # a QN 0 segment: acts on the MSN compares registered in DEC (``msn_*``)
                m.d.sync += [
                    e.eq(rd_e), mcap.eq(rd_e.length), many.eq(rd_e.any), mmaxmo.eq(rd_e.max_mo),
                    mmaxend.eq(rd_e.max_end), mlv.eq(rd_e.lv), mlmo.eq(rd_e.l_mo),
                    mlend.eq(rd_e.l_end),
                ]
                verdict(Mux(mflag["eq"], E_DDP_U_NO_BUFFER, E_DDP_U_MSN_RANGE))
                with m.If(mflag["lt"]):
                    m.next = "UCHK"
                with m.Else():
                    fail()

            with m.State("UCHK"):
                # the ``uchk_flags`` (registered every cycle) settle here: their operands were
                # loaded in DEC or ULOAD. A QN 1 / QN 2 segment's MSN is checked here (the
                # compares registered in the last HDR cycle).
                verdict(E_DDP_U_MSN_RANGE)
                with m.If((qn_now != 0) & Mux(dec_q1, dflag["q1_ne"], dflag["q2_ne"])):
                    fail()
                with m.Else():
                    m.next = "UACT"

            with m.State("UACT"):
                # acts on the offset checks registered in UCHK
                place_regs(u_addr, qn_now == 0, u_first_row, u_sums, 18)
                verdict(uchk_bad)
                with m.If(uchk_fail):
                    fail()
                with m.Elif((qn_now == 0) & Lb & ((opcode == 4) | (opcode == 6))):
                    m.next = "ICHK"
                with m.Elif(n_nz):
                    m.next = "PLACE"
                with m.Else():
                    m.next = "UFIN"

            with m.State("ICHK"):
                # acts on TCHK's first two compares (registered every cycle; ``row_q`` holds
                # the Invalidate STag's row from DEC on)
                place_regs(u_addr, 1, u_first_row, u_sums, 18)
                m.d.sync += row.eq(row_q)
                verdict(Mux(tflag["invalid"], E_RO_CANNOT_INV, E_RP_CANNOT_INV))
                with m.If(tflag["invalid"] | tflag["other_conn"]):
                    fail()
                with m.Elif(n_nz):
                    m.next = "PLACE"
                with m.Else():
                    m.next = "UFIN"

            with m.State("TCHK"):
                # acts on the verdict registered in DEC (``tchk_code``)
                place_regs(h_to[:AW], 1, t_first_row, t_sums, 14)
                verdict(tchk_code)
                with m.If(Cat(*tflag.values()).any()):
                    fail()
                with m.Else():
                    m.next = "PLACE"

            with m.State("PLACE"):
                out_ok = Signal()
                consume = Signal()
                move = Signal()
                issue = Signal()
                m.d.comb += [
                    out_ok.eq(~p_axi | w_room),
                    consume.eq(p_dv & (p_load | out_ok)),
                    move.eq(p_rv & (~p_dv | consume)),
                    issue.eq((p_reads != 0) & (~p_rv | move)),
                    sb_rd.en.eq(issue), sb_rd.addr.eq(Cat(p_row[:RB], ent.slot)),
                ]
                with m.If(issue):
                    m.d.sync += [p_row.eq(p_row + 1), p_reads.eq(p_reads - 1)]
                with m.If(move):
                    m.d.sync += cur.eq(sb_data)
                m.d.sync += [p_rv.eq(issue | (p_rv & ~move)), p_dv.eq(move | (p_dv & ~consume))]
                # output word: bytes p_r .. p_r + W - 1 of {row, prev}
                win = Signal(16 * W)
                word = Signal(8 * W)
                strb = Signal(W)
                m.d.comb += win.eq(Cat(prev, cur))
                with m.Switch(p_r):     # (a multiplexer tree, not a chain of priority levels)
                    for r in range(W):
                        with m.Case(r):
                            m.d.comb += word.eq(win[8 * r:8 * (r + W)])
                for lane in range(W):
                    m.d.comb += strb[lane].eq((~p_first_word | (lane >= p_lo)) & (lane < p_rem))
                lo_lane = Signal(max(1, LW))
                hi_lane = Signal(max(1, LW))
                m.d.comb += [lo_lane.eq(Mux(p_first_word, p_lo, 0)),
                             hi_lane.eq(Mux(p_rem >= W, W - 1, p_rem - 1))]
                aw_in = Signal(aw_l)
                w_in = Signal(w_l)
                m.d.comb += [
                    aw_in.addr.eq(p_addr), aw_in.conn.eq(ent.conn), aw_in.tagged.eq(T),
                    aw_in.lo.eq(lo_lane), aw_in.hi.eq(hi_lane),
                    w_in.data.eq(word), w_in.strb.eq(strb),
                    awf.w_data.eq(aw_in), wf.w_data.eq(w_in),
                ]
                with m.If(consume):
                    m.d.sync += [prev.eq(cur), p_load.eq(0)]
                    with m.If(~p_load):
                        m.d.sync += [p_addr.eq(p_addr + W), p_rem.eq(p_rem - W),
                                     p_first_word.eq(0), p_words.eq(p_words - 1)]
                        with m.If(p_axi):
                            m.d.comb += [awf.w_en.eq(1), wf.w_en.eq(1), w_push.eq(1)]
                        with m.Else():
                            m.d.comb += [
                                cb_wr.addr.eq(ent_cb + p_addr[LW:7]),
                                cb_wr.data.eq(word), cb_wr.en.eq(strb),
                            ]
                with m.If(p_done):
                    m.d.sync += [p_rv.eq(0), p_dv.eq(0)]
                    with m.If(T):
                        m.next = "TFIN"
                    with m.Else():
                        m.next = "UFIN"

            with m.State("TFIN"):
                tm_stag = Mux(c.tm_v, c.tm_stag, h_stag)
                tm_to = Mux(c.tm_v, c.tm_to, h_to)
                tm_len = Mux(c.tm_v, c.tm_len, 0) + n_q
                m.d.sync += [c.tm_v.eq(~Lb), c.tm_stag.eq(tm_stag), c.tm_to.eq(tm_to),
                             c.tm_len.eq(tm_len)]
                m.d.sync += [cq_p.conn.eq(ent.conn), cq_p.opcode.eq(2), cq_p.msn.eq(0),
                             cq_p.wr_id.eq(0), cq_p.length.eq(tm_len), cq_p.solicited.eq(0),
                             cq_p.invalidated.eq(0), cq_p.inval_stag.eq(0),
                             cq_p.stag.eq(tm_stag), cq_p.to.eq(tm_to)]
                with m.If(Lb & (opcode == 2)):
                    m.next = "CQ_RR"
                with m.Else():
                    m.next = "DONE"

            with m.State("CQ_RR"):
                m.d.comb += self.cq.valid.eq(writes_idle)
                with m.If(writes_idle & self.cq.ready):
                    m.next = "DONE"

            with m.State("UFIN"):
                # writes the new message state registered from UACT on (``ufin_*``); the write
                # ports' data and address default to UFIN's
                with m.If(qn_now == 0):
                    m.d.comb += [rq_wr.en.eq(1), st_wr.en.eq(ufin_inv)]
                    with m.If(Lb):
                        m.next = "DRAIN0"
                    with m.Else():
                        m.next = "DONE"
                with m.Else():
                    with m.If(qn_now == 1):
                        m.d.sync += c.q1.eq(ufin_q)
                    with m.Else():
                        m.d.sync += c.q2.eq(ufin_q)
                    with m.If(Lb):
                        m.d.sync += rcnt.eq(0)
                        m.next = "RB"
                    with m.Else():
                        m.next = "DONE"

            with m.State("DRAIN0"):
                m.d.comb += rq_rd.addr.eq(Cat(c.head[:DB], ent.conn) if DB else ent.conn)
                m.next = "DRAIN1"

            with m.State("DRAIN1"):
                # the entry (block RAM out) only goes into registers here; DRAIN2 decides
                m.d.sync += [cq_p.conn.eq(ent.conn), cq_p.opcode.eq(rd_e.opcode),
                             cq_p.msn.eq(c.rbase), cq_p.wr_id.eq(rd_e.id), cq_p.length.eq(rd_e.l_end),
                             cq_p.solicited.eq((rd_e.opcode == 5) | (rd_e.opcode == 6)),
                             cq_p.invalidated.eq(rd_e.inval), cq_p.inval_stag.eq(rd_e.inval_stag),
                             cq_p.stag.eq(0), cq_p.to.eq(0),
                             drain_go.eq((c.count != 0) & rd_e.done)]
                m.next = "DRAIN2"

            with m.State("DRAIN2"):
                with m.If(drain_go):
                    m.next = "CQ_SEND"
                with m.Else():
                    m.next = "DONE"

            with m.State("CQ_SEND"):
                m.d.comb += self.cq.valid.eq(writes_idle)
                with m.If(writes_idle & self.cq.ready):
                    m.d.sync += [c.head.eq(c.head + 1), c.count.eq(c.count - 1),
                                 c.rbase.eq(c.rbase + 1)]
                    m.next = "DRAIN0"

            with m.State("RB"):
                # read back the message buffer of QN 1 (32 octets) / QN 2 (64 octets)
                nrows = Mux(qn_now == 1, 32 // W, 64 // W)
                m.d.comb += [cb_rd.en.eq(1), cb_rd.addr.eq(rb_base + rcnt)]
                for k in range(64 // W):
                    with m.If(rcnt == k + 1):
                        m.d.sync += msgbuf[8 * W * k:8 * W * (k + 1)].eq(cb_rd.data)
                m.d.sync += rcnt.eq(rcnt + 1)
                with m.If(rcnt == nrows):
                    m.next = "RBV"

            mlen = Signal(7, name="mlen")
            m.d.comb += mlen.eq(endv[:7])
            rr_size = _be(mb[12:16])

            with m.State("RBV"):
                # the checks of the message read back, registered for timing (the message
                # buffer's last row is written in the last RB cycle; RBCHK acts on these)
                tm = mb[2][7]
                td = mb[2][6]
                tr = mb[2][5]
                hl = Mux(mb[6][7], 14, 18)
                expect = Signal(7, name="term_expect")
                m.d.comb += expect.eq(4 + Mux(tm | td, 2, 0) + Mux(td, hl, 0) + Mux(tr, 28, 0))
                with m.If(qn_now == 1):
                    m.d.sync += [rb_code.eq(Mux(mlen != _QN1_CAP, E_RO_UNSPECIFIED, E_RO_CATA_STREAM)),
                                 rb_bad.eq((mlen != _QN1_CAP) | (c.rrc >= c.ird))]
                with m.Else():
                    m.d.sync += [rb_code.eq(E_RO_UNSPECIFIED),
                                 rb_bad.eq((td & (mlen <= 6)) | (mlen != expect))]
                m.d.sync += rb_size_nz.eq(rr_size != 0)
                m.next = "RBCHK"

            with m.State("RBCHK"):
                m.d.comb += stag_idx.eq(_be(mb[16:20]))
                verdict(rb_code)
                with m.If(qn_now == 1):
                    m.d.sync += [
                        rr_p.conn.eq(ent.conn), rr_p.msn.eq(c.q1.msn),
                        rr_p.sink_stag.eq(_be(mb[0:4])), rr_p.sink_to.eq(_be(mb[4:12])),
                        rr_p.size.eq(rr_size), rr_p.src_stag.eq(_be(mb[16:20])),
                        rr_p.src_to.eq(_be(mb[20:28])),
                    ]
                    # R (the Read Request header) goes with RDMAP errors from here on
                    m.d.sync += er.eq(n_q == _QN1_CAP)
                    with m.If(rb_bad):
                        fail()
                    with m.Elif(rb_size_nz):
                        m.next = "SWAIT"
                    with m.Else():
                        m.next = "RRPUSH"
                with m.Else():
                    with m.If(rb_bad):
                        fail()
                    with m.Else():
                        m.d.sync += [
                            tr_p.conn.eq(ent.conn), tr_p.received.eq(1),
                            tr_p.layer.eq(mb[0][4:8]), tr_p.etype.eq(mb[0][0:4]), tr_p.ecode.eq(mb[1]),
                            tr_p.tlen.eq(mlen), tr_p.term.eq(msgbuf[:8 * TERM_BYTES]),
                        ]
                        m.next = "TRECV"

            with m.State("SWAIT"):
                # the source STag's row (read in RBCHK) goes to ``row_q``
                m.next = "SWAIT2"

            with m.State("SWAIT2"):
                # SCHK's checks are worked out from ``row_q`` and registered (``schk_*``)
                m.next = "SCHK"

            with m.State("SCHK"):
                verdict(schk_code)
                with m.If(Cat(*sflag.values()).any()):
                    fail()
                with m.Else():
                    m.next = "RRPUSH"

            with m.State("RRPUSH"):
                m.d.comb += self.rrq.valid.eq(1)
                with m.If(self.rrq.ready):
                    m.d.sync += [c.rrc.eq(c.rrc + 1), c.q1.eq(0), c.q1.msn.eq(c.q1.msn + 1),
                                 lat.conn.eq(ent.conn), clr.eq(0), clr_base.eq(0),
                                 clr_n.eq(32 // W)]
                    m.next = "QCLR"

            with m.State("QCLR"):
                m.d.comb += [
                    cb_wr.addr.eq(ent_cb + clr_base + clr), cb_wr.data.eq(0),
                    cb_wr.en.eq((1 << W) - 1),
                ]
                m.d.sync += clr.eq(clr + 1)
                with m.If(clr + 1 >= clr_n):
                    m.next = "DONE"

            with m.State("TRECV"):
                # a received Terminate (``tr_p`` loaded in RBCHK) or an error report (loaded in
                # ERR): every write already issued leaves first
                m.d.comb += self.term.valid.eq(aw_quiet_q)
                with m.If(aw_quiet_q & self.term.ready):
                    m.d.sync += c.stopped.eq(1)
                    m.next = "DONE"

            with m.State("ERR"):
                # the report is built here and registered (timing: its octets are muxed from
                # the header, the message and the error registers); TRECV offers it once every
                # write already issued has left on AW (none follows)
                lay = einfo[12:16]
                et = einfo[8:12]
                ec = einfo[0:8]
                d_on = emd & ed
                r_on = (d_on & er & (lay == 0) & ((et == 1) | (et == 2))
                        & ~((et == 2) & ((ec == 5) | (ec == 6)))
                        & ~T & (opcode == 1))
                term = Signal(8 * TERM_BYTES, name="term_bytes")
                tb = [term[8 * k:8 * k + 8] for k in range(TERM_BYTES)]
                m.d.comb += [
                    tb[0].eq(Cat(et, lay)), tb[1].eq(ec),
                    tb[2].eq(Cat(Const(0, 5), r_on, d_on, emd)), tb[3].eq(0),
                ]
                with m.If(emd):
                    m.d.comb += [tb[4].eq(ent.len[8:16]), tb[5].eq(ent.len[0:8])]
                with m.If(d_on):
                    for k in range(18):
                        if k < 14:
                            m.d.comb += tb[6 + k].eq(hb[k])
                        else:
                            with m.If(~T):
                                m.d.comb += tb[6 + k].eq(hb[k])
                with m.If(r_on):
                    for k in range(28):
                        m.d.comb += tb[24 + k].eq(mb[k])
                tlen = Signal(6, name="tlen")
                m.d.comb += tlen.eq(4 + Mux(emd, 2, 0) + Mux(d_on, hlen, 0) + Mux(r_on, 28, 0))
                m.d.sync += [
                    tr_p.conn.eq(ent.conn), tr_p.received.eq(0), tr_p.layer.eq(lay),
                    tr_p.etype.eq(et), tr_p.ecode.eq(ec), tr_p.tlen.eq(tlen), tr_p.term.eq(term),
                ]
                m.next = "TRECV"

            with m.State("DONE"):
                m.d.comb += [cx_wr.en.eq(1), cx_wr.addr.eq(ent.conn), cx_wr.data.eq(c)]
                with m.If(ent.has_slot):
                    m.d.comb += free_mask.eq(1 << ent.slot)
                m.next = "IDLE"
        one_hot(fsm)

        # handles for formal checks and tests
        p_inflight = Signal(2)     # rows read and not yet consumed
        m.d.comb += p_inflight.eq(p_rv + p_dv)
        self._f = dict(
            fsm=fsm, p_addr=p_addr, p_start=p_start, p_end=p_end, p_rem=p_rem, p_lo=p_lo,
            p_first_word=p_first_word, p_words=p_words, p_axi=p_axi, p_load=p_load, T=T,
            ent=ent, e=e, ridx=ridx, qn_now=qn_now, h_stag=h_stag, rd_row=row_q, st_rd_row=rd_row,
            rd_e=rd_e,
            st_wr=st_wr, rq_wr=rq_wr, row_l=row_l, rqe_l=rqe_l, n=n, mcap=mcap, h_mo=h_mo,
            stag_idx=stag_idx, D=D, DB=DB, SB=SB, AW=AW, LW=LW, c=c, hk=hk, lat=lat, rd_conn=rd_conn, cx_wr=cx_wp, writes_idle=writes_idle,
            outstanding=outstanding, wf=wf, dec_pairs=dec_pairs, tchk=tchk_pairs, HDR_END=HDR_END,
            tchk_parts=(endt_q, to_hi_q), schk_parts=(ends, src_hi_zero), h_to=h_to, uchk=uchk_pairs, endv=endv,
            cx_rd=cx_rd, ctx_l=ctx_l, tr_p=tr_p, p_reads=p_reads, p_dv=p_inflight, n_q=n_q, hlen=hlen, ROWS=ROWS,
            entry_l=entry_l, n_w=n_w, dec_early=dec_early, dec_msn=dec_msn_pairs, msn=msn_pairs, n_nz=n_nz, schk=schk_pairs,
            aw_quiet_q=aw_quiet_q, sw_lat=sw_lat, sw_end=sw_end, place=place_pairs,
        )
        self._aw_fifo_out = aw_out
        self._awf = awf
        self._aw_l = aw_l
        self._mems = dict(stag=stagm, rq=rqm, ctx=ctxm)
        self._stag_wr = st_wr
        self._rq_wr = rq_wr
        self._wf_in = (wf.w_en, wf.w_data, w_l)
        self._aw_in = (awf.w_en, awf.w_data, aw_l)
        return m
