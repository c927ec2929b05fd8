"""The RNIC core: register bank, MPA TX framer, MPA RX deframer, and the glue between them.

See :class:`RnicCore`.
"""

from amaranth.hdl import (Cat, ClockDomain, ClockSignal, DomainRenamer, Module, Mux, ResetInserter, ResetSignal,
                          Signal, unsigned)
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from rnic.host.spec.regmap import REGMAP, ConnState, CqQueue, SqOpcode
from rnic.host.spec.errors import Layer, MpaError

from .beat import check_width, OctetBeat, conn_bits
from .axi import AXI4LiteSignature, AXI4ReadSignature, AXI4WriteSignature
from .ddp_rx import TERM_BYTES, Completion, DdpRx, ReadRequestOut, StagWrite, TermReport
from .ddp_tx import DdpTx
from .mpa_config import MARKER_INTERVAL, RxError
from .mpa_rx import RX_ABORTED, MpaRxBeat, MpaRxDeframer
from .mpa_tx import MpaTxBeat, MpaTxFramer
from .regbank import RegisterBank
from .stream_slice import StreamSlice
from .synth_hints import SyncFIFOBuffered

__all__ = ["RnicCore", "CtxEntry", "DpRxEntry", "DP_DEPTH", "DP_ULPDUS"]

#: Defaults of the DDP/RDMAP receive path's parameters (see :class:`RnicCore`).
DDP_DEFAULTS = {"rq_depth": 8, "cq_depth": 16, "rrq_depth": 8, "term_depth": 4, "ddp_slots": 4,
                "ddp_slot_bytes": 2048, "addr_width": 32, "sq_depth": 8, "ird_depth": 4, "ord_depth": 4}

#: MULPDU the reset sweep gives the transmit path of every connection (until its COMMIT).
TX_SWEEP_MULPDU = 128

#: Default depth (32-bit words) of each data port FIFO.
DP_DEPTH = 512
#: Default number of received ULPDUs the data port's RX status FIFO holds.
DP_ULPDUS = 32


class CtxEntry(data.StructLayout):
    """Per-connection state kept by the core (one memory row per connection):
    ``state`` (:class:`~rnic.host.spec.regmap.ConnState`), ``err`` (stopped on an error) and the
    first error in Terminate layout (``ecode``, ``etype``, ``layer``)."""

    def __init__(self):
        super().__init__({"state": unsigned(3), "err": unsigned(1), "ecode": unsigned(8),
                          "etype": unsigned(4), "layer": unsigned(4)})


class _TxTrack(data.StructLayout):
    """Per-connection TX marker tracking (counts markers for TX_MARKERS)."""

    def __init__(self):
        super().__init__({"markers": unsigned(1), "phase": unsigned(9)})


class _CqEntry(data.StructLayout):
    """One entry of the host CQ: a receive-path :class:`~rnic.hdl.ddp_rx.Completion` or (``tx``)
    a transmit-path :class:`~rnic.hdl.ddp_tx.TxCompletion` (then ``status`` is its status)."""

    def __init__(self, *, connections):
        super().__init__({"rx": Completion(connections=connections), "tx": unsigned(1),
                          "status": unsigned(8)})


class DpRxEntry(data.StructLayout):
    """One entry of the data port's RX status FIFO (a ULPDU whose words are in the data FIFO)."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "len": unsigned(16),
                          "crc": unsigned(2), "error": unsigned(3)})


class RnicCore(wiring.Component):
    """The RNIC core: registers, the MPA layer of both directions, DDP/RDMAP receive and transmit.

    Contains a :class:`~rnic.hdl.regbank.RegisterBank` (the map of
    :mod:`rnic.host.spec.regmap`), a :class:`~rnic.hdl.mpa_tx.MpaTxFramer`, a
    :class:`~rnic.hdl.mpa_rx.MpaRxDeframer` and behind it the DDP/RDMAP receive
    path :class:`~rnic.hdl.ddp_rx.DdpRx` (validation, placement into host memory
    on ``m_axi``, completions, Read Requests, Terminates), in front of the
    framer the DDP/RDMAP transmit path :class:`~rnic.hdl.ddp_tx.DdpTx` (send
    queues, segmenter reading payload on ``m_axi_rd``, Read Responder,
    Terminates, completions), plus the glue below. ULPDUs (DDP segments)
    made outside the core still come in as a stream (``tx_ulpdu``) or
    through the register data port.

    Parameters (keyword-only, checked)
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connection contexts, 1 .. 65535 (per-connection state lives in memories).
    stags : int
        STag table rows (reported in CAPS): a power of 2, 2 .. 32768.
    dp_depth : int
        Depth in 32-bit words of each data port FIFO (TX data, RX data), 2 .. 65535.
    dp_ulpdus : int
        Received ULPDUs the data port's RX status FIFO holds, 2 .. 4096.
    rq_depth : int
        Receive buffers that may be posted per connection (power of 2, 2 .. 1024; default 8).
    cq_depth, rrq_depth, term_depth : int
        Entries of the completion, Read Request and Terminate queues read through the
        registers (2 .. 4096; defaults 16, 8, 4).
    ddp_slots, ddp_slot_bytes : int
        Segment buffers of the receive path and their size in octets (powers of 2;
        defaults 4 and 2048): a ULPDU is held whole until its CRC verdict;
        ``ddp_slot_bytes`` must be at least the RX MULPDU of every connection (a longer
        ULPDU is a DDP error 1/0/0), and ``ddp_slots`` at least the number of connections
        whose FPDUs arrive interleaved (segments that end inside an FPDU), or the
        receive path stalls.
    addr_width : int
        Address bits of ``m_axi`` and ``m_axi_rd`` (13 .. 64, default 32): host memory is
        ``2**addr_width`` octets; STag regions, receive buffers and work request buffers must
        lie inside it.
    sq_depth : int
        Work requests the send queue of each connection holds (power of 2, 2 .. 1024; default 8).
    ird_depth : int
        Inbound RDMA Read Requests that may wait for the Read Responder per connection (power
        of 2, 2 .. 1024; default 4): every connection's IRD (CTX_IRD_ORD.IRD) must be at most
        this while DP_CTRL.HOST_READS is 0.
    ord_depth : int
        Outbound RDMA Reads that may be outstanding per connection (power of 2, 2 .. 1024;
        default 4); an ORD (CTX_IRD_ORD.ORD) above it acts as ``ord_depth``.

    ``stags`` must be a power of 2 (at least 2): the receive path's STag table has
    ``stags`` rows.

    Ports
    -----
    s_axil : In(AXI4LiteSignature(addr_width=12))
        The register bus, exactly as :class:`~rnic.hdl.regbank.RegisterBank`'s
        (Verilog ``s_axil__awaddr`` .. ``s_axil__rready``).
    tx_ulpdu : In(stream.Signature(MpaTxBeat(width=W, connections=N)))
        ULPDUs to send (``length`` on the first beat), as the framer's ``i``.
    tx_wire : Out(stream.Signature(OctetBeat(width=W, connections=N)))
        TCP payload to send: runs of whole FPDUs of one connection.
    rx_wire : In(stream.Signature(OctetBeat(width=W, connections=N)))
        TCP payload received, as segments (``first`` .. ``last``), any cut.
    rx_ulpdu : Out(stream.Signature(MpaRxBeat(width=W, connections=N)))
        ULPDUs received with their CRC/error verdict on the ``last`` beat
        (status and abort beats as defined by :class:`~rnic.hdl.mpa_rx.MpaRxBeat`),
        only while DP_CTRL.BYPASS (its reset value) and not SINK: for a DDP
        layer outside the core, or to look at the MPA layer alone. Otherwise
        never valid.
    m_axi : Out(AXI4WriteSignature(addr_width=addr_width, data_width=8*W))
        Host memory, AXI4 write channels (AW, W, B) of the receive path's
        placement writes: single-beat full-width writes with byte strobes
        (Verilog ``m_axi__awaddr`` ..; see :class:`~rnic.hdl.axi.AXI4WriteSignature`).
    m_axi_rd : Out(AXI4ReadSignature(addr_width=addr_width, data_width=8*W))
        Host memory, AXI4 read channels (AR, R) of the transmit path's payload reads (Send and
        RDMA Write data, Read Responses): INCR bursts of at most 16 full-width beats, not
        crossing 4 KiB (Verilog ``m_axi_rd__araddr`` ..; see :class:`~rnic.hdl.axi.AXI4ReadSignature`).
    irq : Out(1)
        Interrupt level: OR of INT_ENABLE.ERR and ERR_STATUS.PENDING,
        INT_ENABLE.CQ and CQ_STATUS.VALID, INT_ENABLE.TERM and TERM_STATUS.VALID.

    What the glue does
    ------------------
    * Contexts. CTX_CMD.COMMIT (while STATUS.READY and CTX_STATUS.BUSY is 0,
      for CONN_SEL below CAPS.CONNECTIONS; otherwise ignored) latches CTX_TX,
      CTX_RX and CTX_STATE and writes them into the framer (``cfg``:
      markers, CRC, phase), the deframer (``cfg``: markers, CRC, phase,
      MULPDU) and the core's per-connection state memory (state from
      CTX_STATE, no error). CTX_STATUS.BUSY is 1 until all of them took it
      (a few cycles). CTX_CMD.SET_STATE writes only the state. COMMIT a
      connection while none of its octets is inside the core.
    * Per-connection state (:class:`CtxEntry`, one memory row per
      connection), shown for CONN_SEL in CTX_STATUS.STATE/ERROR and
      CTX_ERROR: written by COMMIT/SET_STATE; a received ULPDU whose FPDU
      was good moves WAIT_RX to RTS (the MPA fence opens); an RX error
      (CRC, marker, length) moves the connection to ERROR and records the
      first error (CTX_ERROR) until the next COMMIT. The state does not gate
      data in this core (the DDP/RDMAP layer will); CTRL.ENABLE does.
    * Counters: RX_FPDUS (every FPDU whose end the deframer reported: good,
      CRC or marker error), RX_CRC_ERRORS, RX_MARKER_ERRORS,
      RX_LENGTH_ERRORS (TOO_LONG, TOO_SHORT), RX_OCTETS (octets accepted on
      the deframer input), TX_FPDUS (ULPDUs accepted by the framer),
      TX_MARKERS (markers in the framer's output: a small per-connection
      phase memory follows the output runs), TX_OCTETS (octets out of the
      framer). CTRL.CLEAR_COUNTERS zeroes them and ERR_COUNT.
    * Errors: an RX error ends a ULPDU (deframer ``error`` CRC, MARKER,
      TOO_LONG, TOO_SHORT; aborts are not errors). The first while
      ERR_STATUS.PENDING is 0 is captured: PENDING, ERR_CONN (TX = 0),
      ERR_INFO = LLP/0/2 (CRC), LLP/0/3 (marker), DDP/0/0 (length), as the
      model (:mod:`rnic.host.model.fpdu`) reports them; later ones set OVERFLOW. Every
      one counts in ERR_COUNT.
    * The DDP/RDMAP receive path (:class:`~rnic.hdl.ddp_rx.DdpRx`) takes the
      deframer's ULPDUs unless DP_CTRL.SINK or DP_CTRL.BYPASS is set (BYPASS
      resets to 1, so that ULPDUs leave on ``rx_ulpdu`` as before until a
      driver clears it: ``rnic.host.driver.regs.Registers.dp_configure()``). Its host
      side is the register map: STAG_* + STAG_CMD.COMMIT write a row of its
      STag table (STAG_STATUS.BUSY until taken; the row only matches for
      STAG_INDEX = STAG_KEY mod ``stags``, a row whose CONN is not below
      ``connections`` is written invalid); RQ_* + RQ_CMD.POST post a receive
      buffer (RQ_STATUS.BUSY until taken, RQ_STATUS.OVERFLOW when dropped);
      CTX_CMD.COMMIT also restarts the connection there (MSNs 1, receive queue
      empty, no error, IRD from CTX_IRD_ORD; part of CTX_STATUS.BUSY); its
      completions fill the CQ queue (CQ_*), its Read Requests the RRQ queue
      (RRQ_*; RRQ_CMD.DONE frees an IRD slot of RRQ_DONE_CONN), its reports
      the TERM queue (TERM_*). A full queue back-pressures the receive path.
      A report of an error found here (TERM_STATUS.RECEIVED 0) is the error
      capture's source while the receive path is in use (ERR_*, ERR_COUNT:
      MPA errors included, one per connection until its next COMMIT) and
      moves the connection to ERROR (first error in CTX_ERROR); a received
      Terminate moves it to CLOSING. With SINK or BYPASS the capture follows
      the deframer as described under Errors.
    * The DDP/RDMAP transmit path (:class:`~rnic.hdl.ddp_tx.DdpTx`). SQ_* +
      SQ_CMD.DOORBELL (while STATUS.READY, SQ_STATUS.BUSY 0 and SQ_WR.CONN
      below ``connections``; otherwise ignored) latch one work request;
      SQ_STATUS.BUSY and FULL are 1 until the transmit path took it, which
      it does while the connection's send queue (``sq_depth``) has room.
      CTX_CMD.COMMIT restarts the connection there too (MSNs 1, queues
      emptied without completions, MULPDU from CTX_TX.MULPDU, which must be
      at least 72 for a connection that sends, ORD from CTX_IRD_ORD.ORD; part
      of CTX_STATUS.BUSY). STAG_CMD.COMMIT writes the row into the transmit
      path's copy of the STag table as well (STAG_STATUS.BUSY until both
      took it; the Read Responder checks Read sources against it; an STag
      invalidated by a received Send with Invalidate is written invalid
      there too, when its completion enters the CQ). The framer takes, unless DP_CTRL.SOURCE: ``tx_ulpdu``
      and the transmit path's ULPDUs, switched only between ULPDUs, the port
      first when both have one to start. Every report of the receive path
      (``DdpRx.term``) also goes to the transmit path (one at a time: a
      report is taken when the TERM queue has room and the transmit path
      took the previous one): an error found here sends a Terminate and stops
      the connection's transmit side (queued work requests complete with
      FLUSHED), a received Terminate stops it (outstanding Reads complete
      with REMOTE_ERROR); COMMIT restarts it. With DP_CTRL.HOST_READS 0
      inbound RDMA Read Requests go to the transmit path's Read Responder
      (``DdpRx.rrq`` -> ``DdpTx.rrq``; each answered one frees its IRD slot,
      ``DdpTx.rr_done`` -> ``DdpRx.rr_done``; RRQ_* stays empty) and a
      received Read Response message completes the connection's oldest
      outstanding RDMA Read work request (``DdpRx.cq`` opcode 2 ->
      ``DdpTx.read_done``); with HOST_READS 1 (its reset value, the
      behaviour of map 0.3) they go to the RRQ queue for the host
      (RRQ_CMD.DONE frees the slot) and to CQ_* as an SQ/RDMA_READ entry
      with CQ_WR_ID 0 and CQ_STAG/CQ_TO, and an RDMA Read work request never
      completes. RRQ_CMD.DONE works in either mode (the transmit path's
      releases go first). The one completion queue (CQ_*) merges the
      transmit path's completions (QUEUE SQ: CQ_WR_ID = SQ_ID, OPCODE,
      STATUS, CQ_LENGTH; taken first) and the receive path's (QUEUE RQ). The
      connection state (e.g. WAIT_RX, the MPA fence) does not hold work
      requests back in this build: post none before the connection may send.
    * CTRL.SOFT_RESET resets, in the cycle after its pulse (the pulse is
      registered first), everything but the register bank: framer,
      deframer, data port FIFOs, counters, the captured ERR_CONN/ERR_INFO;
      then every connection's context is rewritten (state IDLE, no error,
      framer and deframer configuration zero: such a connection reports
      TOO_LONG on its first FPDU) while STATUS.READY is 0 (about 2 cycles
      per connection; the receive path gets an abort and a restart with IRD
      0 for every connection: queues empty; the transmit path a restart with
      MULPDU 128 and ORD 0: send queues empty). The same runs after ``rst``.
      The bank keeps its values, ERR_STATUS included (clear it with a
      write), and so does the STag table. Stop traffic (and let every
      placement write complete) before a soft reset.
    * CTRL.ENABLE = 0 (the reset value) or STATUS.READY = 0 hold the framer
      and deframer inputs (back-pressure on ``tx_ulpdu``/``rx_wire``, on the
      data port and on the DDP/RDMAP transmit path); the beat or two already
      in the register slices in front of the framer and deframer, and the
      outputs, drain.
    * The data port (registers DP_*, see :mod:`rnic.host.spec.regmap`): LOOPBACK
      feeds the framer's output into the deframer (``tx_wire`` is then
      never valid and ``rx_wire`` never ready); SOURCE takes the framer's
      ULPDUs from the DP TX FIFO (words pushed by writes to DP_TX_DATA,
      turned into beats by DP_TX_CMD.SEND) instead of ``tx_ulpdu``; SINK
      puts the deframer's ULPDUs into the DP RX data FIFO (words) and RX
      status FIFO (conn, length, CRC, error per ULPDU) instead of the
      receive path (or ``rx_ulpdu``). The sink keeps ULPDUs whole only if ULPDUs of different
      connections do not interleave at the deframer output, which holds
      when segments carry whole FPDUs (as with LOOPBACK). A ULPDU received
      through the sink must fit the RX data FIFO (``dp_depth`` words). The
      DP TX FIFO is filled by watching the bus: a write handshake at
      DP_TX_DATA pushes ``wdata`` (zero words included).

    Latency
    -------
    ``tx_ulpdu`` to ``tx_wire``: 9 cycles (two register slices, framer 6, output
    register 1).
    ``rx_wire`` to ``rx_ulpdu``: 12 cycles (input register slice 1, deframer
    10, output register 1). The streams between the DDP/RDMAP paths and the
    glue (DdpRx input, completions, Read Requests, DdpTx output) each pass a
    register slice (1 cycle; :class:`~rnic.hdl.stream_slice.StreamSlice`).
    LOOPBACK, ULPDU in to ULPDU out: 21 cycles plus the FPDU's length in
    beats (the deframer holds a ULPDU's last beat until its CRC). (Counted
    as the framer's: a beat transferred at edge t can leave at edge t + n.)
    TX_MARKERS counts a beat's marker 2 cycles after the beat left the
    framer (the marker tracker reads its memory into a register first).
    DP_CTRL and CTRL.ENABLE act one cycle after their register changes (the
    core keeps registered copies); the CQ_*, RRQ_*, TERM_* and DP_RX_* views
    of the queue heads are registers, one cycle behind the queues (a read
    that follows a POP's write response sees the next head).

    Throughput
    ----------
    Both directions move one beat per cycle (the framer's and deframer's
    own limits apply, see their docstrings). A COMMIT or SET_STATE takes one
    cycle of the deframer's output, a COMMIT one cycle of the framer's
    output (the TX marker tracker's write). The data port moves one 32-bit
    word per cycle (a W-octet beat every W/4 + 1 cycles); its speed is that
    of the register accesses feeding it.
    """

    def __init__(self, *, width, connections=16, stags=256, dp_depth=DP_DEPTH, dp_ulpdus=DP_ULPDUS,
                 rq_depth=8, cq_depth=16, rrq_depth=8, term_depth=4, ddp_slots=4, ddp_slot_bytes=2048,
                 addr_width=32, sq_depth=8, ird_depth=4, ord_depth=4):
        REGMAP.check_params({"width": width, "connections": connections, "stags": stags})
        check_width(width)
        for name, value, lo, hi in (("dp_depth", dp_depth, 2, 0xFFFF), ("dp_ulpdus", dp_ulpdus, 2, 4096),
                                    ("cq_depth", cq_depth, 2, 4096), ("rrq_depth", rrq_depth, 2, 4096),
                                    ("term_depth", term_depth, 2, 4096), ("addr_width", addr_width, 13, 64),
                                    ("rq_depth", rq_depth, 2, 1024), ("ddp_slots", ddp_slots, 2, 256),
                                    ("ddp_slot_bytes", ddp_slot_bytes, max(32, 2 * width), 1 << 16),
                                    ("sq_depth", sq_depth, 2, 1024), ("ird_depth", ird_depth, 2, 1024),
                                    ("ord_depth", ord_depth, 2, 1024)):
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")
        for name, value in (("stags", stags), ("rq_depth", rq_depth), ("ddp_slots", ddp_slots),
                            ("ddp_slot_bytes", ddp_slot_bytes), ("sq_depth", sq_depth),
                            ("ird_depth", ird_depth), ("ord_depth", ord_depth)):
            if value < 2 or value & (value - 1):
                raise ValueError(f"{name} must be a power of 2 (>= 2), not {value!r}")
        self.width = width
        self.connections = connections
        self.stags = stags
        self.dp_depth = dp_depth
        self.dp_ulpdus = dp_ulpdus
        self.rq_depth = rq_depth
        self.cq_depth = cq_depth
        self.rrq_depth = rrq_depth
        self.term_depth = term_depth
        self.ddp_slots = ddp_slots
        self.ddp_slot_bytes = ddp_slot_bytes
        self.addr_width = addr_width
        self.sq_depth = sq_depth
        self.ird_depth = ird_depth
        self.ord_depth = ord_depth
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=REGMAP.addr_width)),
            "tx_ulpdu": In(stream.Signature(MpaTxBeat(width=width, connections=connections))),
            "tx_wire": Out(stream.Signature(OctetBeat(width=width, connections=connections))),
            "rx_wire": In(stream.Signature(OctetBeat(width=width, connections=connections))),
            "rx_ulpdu": Out(stream.Signature(MpaRxBeat(width=width, connections=connections))),
            "m_axi": Out(AXI4WriteSignature(addr_width=addr_width, data_width=8 * width)),
            "m_axi_rd": Out(AXI4ReadSignature(addr_width=addr_width, data_width=8 * width)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, N = self.width, self.connections
        K = W // 4
        cb = conn_bits(N)

        m.submodules.bank = bank = RegisterBank(width=W, connections=N, stags=self.stags)
        wiring.connect(m, wiring.flipped(self.s_axil), bank.s_axil)
        r = bank.regs

        # Everything below is reset by rst and by CTRL.SOFT_RESET (a one-cycle pulse), through
        # one register, in the cycle after (timing: the reset fans out to every register of
        # the core; with the domain's rst ORed in, an OR gate sat behind both nets). So it
        # runs in a domain of its own: the sync clock, no domain reset.
        core_rst = Signal(init=1, reset_less=True)
        m.d.sync += core_rst.eq(ResetSignal("sync") | r.ctrl.soft_reset)
        m.domains.core = cd_core = ClockDomain("core", reset_less=True, local=True)
        m.d.comb += cd_core.clk.eq(ClockSignal("sync"))
        d = Module()
        m.submodules.core = DomainRenamer("core")(ResetInserter(core_rst)(d))
        d.submodules.framer = framer = MpaTxFramer(width=W, connections=N)
        d.submodules.deframer = deframer = MpaRxDeframer(width=W, connections=N)
        d.submodules.dp_tx_fifo = tx_fifo = SyncFIFOBuffered(width=32, depth=self.dp_depth)
        d.submodules.dp_rx_fifo = rx_fifo = SyncFIFOBuffered(width=32, depth=self.dp_depth)
        stat_layout = DpRxEntry(connections=N)
        d.submodules.dp_rx_stat = rx_stat = SyncFIFOBuffered(width=stat_layout.size,
                                                                  depth=self.dp_ulpdus)

        # DP_CTRL's bits as registered copies in the core (they act one cycle after the
        # bank's register; timing: the bank's flip-flops are far from most of their users)
        dp_ctrl = r.dp_ctrl
        loopback, source, sink, bypass, host_reads = (
            Signal(name=f"dp_{n}") for n in ("loopback", "source", "sink", "bypass", "host_reads"))
        d.d.sync += [loopback.eq(dp_ctrl.loopback), source.eq(dp_ctrl.source), sink.eq(dp_ctrl.sink),
                     bypass.eq(dp_ctrl.bypass), host_reads.eq(dp_ctrl.host_reads)]
        use_ddp = Signal()                       # ULPDUs go to the DDP/RDMAP receive path
        d.d.sync += use_ddp.eq(~dp_ctrl.sink & ~dp_ctrl.bypass)
        d.submodules.ddp = ddp = DdpRx(width=W, connections=N, stags=self.stags, slots=self.ddp_slots,
                                       slot_bytes=self.ddp_slot_bytes, rq_depth=self.rq_depth,
                                       addr_width=self.addr_width)
        wiring.connect(d, ddp.m_axi, wiring.flipped(self.m_axi))
        d.submodules.dtx = dtx = DdpTx(width=W, connections=N, sq_depth=self.sq_depth,
                                       rrq_depth=self.ird_depth, ord_depth=self.ord_depth,
                                       stags=self.stags, addr_width=self.addr_width)
        wiring.connect(d, dtx.m_axi, wiring.flipped(self.m_axi_rd))
        # Register slices on every stream between the data-path blocks and the glue, for
        # timing: each block's ready/valid came out of deep logic and went into the other's.
        ddp_i = self._slice_into(d, "ddp_i_slice", ddp.i)          # latency +1 on each
        # (control streams, rare and some wide: one register each, half rate)
        dctl = self._slice_into(d, "ddp_ctl_slice", ddp.ctl, full_rate=False)
        dterm = self._slice_out_of(d, "ddp_term_slice", ddp.term, full_rate=False)
        fc = self._slice_into(d, "framer_cfg_slice", framer.cfg, full_rate=False)
        dc = self._slice_into(d, "deframer_cfg_slice", deframer.cfg, full_rate=False)
        tc = self._slice_into(d, "dtx_cfg_slice", dtx.cfg, full_rate=False)
        dto = self._slice_out_of(d, "dtx_o_slice", dtx.o)
        # (completions: at most one per segment or work request, many cycles apart; half rate,
        # so that the wide entries' load enable does not wait for the CQ's ready)
        rxc = self._slice_out_of(d, "ddp_cq_slice", ddp.cq, full_rate=False)
        txc = self._slice_out_of(d, "dtx_cq_slice", dtx.cq, full_rate=False)
        rrq = self._slice_out_of(d, "ddp_rrq_slice", ddp.rrq)
        rr_done = self._slice_out_of(d, "dtx_rr_done_slice", dtx.rr_done)

        # ---------------------------------------------------------------- reset sweep
        # After a reset every connection's context is rewritten, one per step.
        sweeping = Signal(init=1)
        sweep_conn = Signal(cb)
        sw_tx_done = Signal()
        sw_rx_done = Signal()
        sw_ctl_done = Signal()                   # DdpRx.ctl of sweep_conn taken
        sw_abort_done = Signal()                 # DdpRx.i abort beat of sweep_conn taken
        sw_txc_done = Signal()                   # DdpTx.cfg of sweep_conn taken
        ready = Signal()
        d.d.comb += [ready.eq(~sweeping), r.status.ready.eq(ready)]
        gate = Signal()                          # registered (timing: a high fanout)
        d.d.sync += gate.eq(~sweeping & r.ctrl.enable)

        # ---------------------------------------------------------------- context commands
        c_conn = Signal(cb)
        c_tx_markers, c_tx_crc, c_tx_phase = Signal(), Signal(), Signal(9)
        c_rx_markers, c_rx_crc, c_rx_phase, c_rx_mulpdu = Signal(), Signal(), Signal(9), Signal(16)
        c_state = Signal(3)
        c_ird = Signal(14)
        c_ord = Signal(14)
        c_tx_mulpdu = Signal(16)
        c_commit = Signal()                      # ctx event kind: commit (else set_state)
        tx_cfg_pend, rx_cfg_pend, ctx_pend, trk_pend = Signal(), Signal(), Signal(), Signal()
        ctl_pend = Signal()                      # DdpRx.ctl of the COMMIT not yet taken
        txc_pend = Signal()                      # DdpTx.cfg of the COMMIT not yet taken
        busy = Signal()
        d.d.comb += [busy.eq(tx_cfg_pend | rx_cfg_pend | ctx_pend | trk_pend | ctl_pend | txc_pend),
                     r.ctx_status.busy.eq(busy)]
        sel_ok = Signal()
        d.d.comb += sel_ok.eq(r.conn_sel.conn < N)
        can_cmd = ready & ~busy & sel_ok
        with d.If(r.ctx_cmd.commit & can_cmd):
            d.d.sync += [
                c_conn.eq(r.conn_sel.conn), c_state.eq(r.ctx_state.state), c_commit.eq(1),
                c_tx_markers.eq(r.ctx_tx.markers), c_tx_crc.eq(r.ctx_tx.crc),
                c_tx_phase.eq(r.ctx_tx.phase & ~3),
                c_rx_markers.eq(r.ctx_rx.markers), c_rx_crc.eq(r.ctx_rx.crc),
                c_rx_phase.eq(r.ctx_rx.phase & ~3), c_rx_mulpdu.eq(r.ctx_rx.mulpdu),
                c_ird.eq(r.ctx_ird_ord.ird), c_ord.eq(r.ctx_ird_ord.ord), c_tx_mulpdu.eq(r.ctx_tx.mulpdu),
                tx_cfg_pend.eq(1), rx_cfg_pend.eq(1), ctx_pend.eq(1), trk_pend.eq(1), ctl_pend.eq(1),
                txc_pend.eq(1),
            ]
        with d.Elif(r.ctx_cmd.set_state & can_cmd):
            d.d.sync += [c_conn.eq(r.conn_sel.conn), c_state.eq(r.ctx_state.state), c_commit.eq(0),
                         ctx_pend.eq(1)]

        # framer / deframer configuration: the sweep's zeros, or the latched COMMIT
        with d.If(sweeping):
            d.d.comb += [
                fc.valid.eq(~sw_tx_done), fc.payload.conn.eq(sweep_conn),
                dc.valid.eq(~sw_rx_done), dc.payload.conn.eq(sweep_conn),
            ]
        with d.Else():
            d.d.comb += [
                fc.valid.eq(tx_cfg_pend), fc.payload.conn.eq(c_conn),
                fc.payload.markers.eq(c_tx_markers), fc.payload.crc.eq(c_tx_crc),
                fc.payload.phase.eq(c_tx_phase),
                dc.valid.eq(rx_cfg_pend), dc.payload.conn.eq(c_conn),
                dc.payload.markers.eq(c_rx_markers), dc.payload.crc.eq(c_rx_crc),
                dc.payload.phase.eq(c_rx_phase), dc.payload.mulpdu.eq(c_rx_mulpdu),
            ]
            with d.If(tx_cfg_pend & fc.ready):
                d.d.sync += tx_cfg_pend.eq(0)
            with d.If(rx_cfg_pend & dc.ready):
                d.d.sync += rx_cfg_pend.eq(0)

        # the receive path: ctl (restart) from the sweep (IRD 0) or the latched COMMIT (through
        # a register slice: the valid is a decode of the sweep's state)
        with d.If(sweeping):
            # (after the abort beat has left the slice in front of the receive path)
            d.d.comb += [dctl.valid.eq(sw_abort_done & ~sw_ctl_done & ~ddp.i.valid),
                         dctl.payload.conn.eq(sweep_conn)]
        with d.Else():
            d.d.comb += [dctl.valid.eq(ctl_pend), dctl.payload.conn.eq(c_conn),
                         dctl.payload.ird.eq(c_ird)]
            with d.If(ctl_pend & dctl.ready):
                d.d.sync += ctl_pend.eq(0)

        # the transmit path: cfg (restart) from the sweep or the latched COMMIT
        with d.If(sweeping):
            d.d.comb += [tc.valid.eq(~sw_txc_done), tc.payload.conn.eq(sweep_conn),
                         tc.payload.mulpdu.eq(TX_SWEEP_MULPDU)]
        with d.Else():
            d.d.comb += [tc.valid.eq(txc_pend), tc.payload.conn.eq(c_conn),
                         tc.payload.mulpdu.eq(c_tx_mulpdu), tc.payload.ord.eq(c_ord)]
            with d.If(txc_pend & tc.ready):
                d.d.sync += txc_pend.eq(0)

        with d.If(sweeping):
            txc_got = sw_txc_done | (tc.valid & tc.ready)
            tx_got = sw_tx_done | (fc.valid & fc.ready)
            rx_got = sw_rx_done | (dc.valid & dc.ready)
            ctl_got = sw_ctl_done | (dctl.valid & dctl.ready)
            abort_got = sw_abort_done | (ddp_i.valid & ddp_i.ready)
            with d.If(tx_got & rx_got & ctl_got & abort_got & txc_got):
                d.d.sync += [sw_tx_done.eq(0), sw_rx_done.eq(0), sw_ctl_done.eq(0), sw_abort_done.eq(0),
                             sw_txc_done.eq(0), sweep_conn.eq(sweep_conn + 1)]
                with d.If(sweep_conn == N - 1):
                    d.d.sync += sweeping.eq(0)
            with d.Else():
                d.d.sync += [sw_tx_done.eq(tx_got), sw_rx_done.eq(rx_got), sw_ctl_done.eq(ctl_got),
                             sw_abort_done.eq(abort_got), sw_txc_done.eq(txc_got)]

        # ---------------------------------------------------------------- per-connection state
        d.submodules.ctx_mem = ctx_mem = Memory(shape=CtxEntry(), depth=N, init=[])
        ctx_wp = ctx_mem.write_port()
        ctx_rp = ctx_mem.read_port(transparent_for=(ctx_wp,))       # read-modify-write
        view_rp = ctx_mem.read_port(transparent_for=(ctx_wp,))      # CTX_STATUS / CTX_ERROR
        d.d.comb += view_rp.addr.eq(r.conn_sel.conn)
        view = Signal(CtxEntry())                # registered for timing (block RAM clk-to-out)
        d.d.sync += view.eq(view_rp.data)
        d.d.comb += [
            r.ctx_status.state.eq(Mux(sel_ok, view.state, int(ConnState.IDLE))),
            r.ctx_status.error.eq(sel_ok & view.err),
            r.ctx_error.layer.eq(Mux(sel_ok & view.err, view.layer, 0)),
            r.ctx_error.etype.eq(Mux(sel_ok & view.err, view.etype, 0)),
            r.ctx_error.ecode.eq(Mux(sel_ok & view.err, view.ecode, 0)),
        ]

        # ---------------------------------------------------------------- TX path
        # source: the data port's sender (SOURCE), else the tx_ulpdu port and the DDP/RDMAP
        # transmit path, switched at ULPDU boundaries (the port first when both start one)
        dpt = stream.Signature(MpaTxBeat(width=W, connections=N)).create()
        # (the port through a register slice, which ENABLE gates like the switch: its valid
        # came from the user's logic into the switch and the framer's input in one cycle)
        d.submodules.tx_ulpdu_slice = txu_slice = StreamSlice(self.tx_ulpdu.payload.shape())
        d.d.comb += [txu_slice.i.payload.eq(self.tx_ulpdu.payload),
                     txu_slice.i.valid.eq(self.tx_ulpdu.valid & gate),
                     self.tx_ulpdu.ready.eq(txu_slice.i.ready & gate)]
        src = txu_slice.o
        in_ulpdu = Signal()                      # a ULPDU of the port or of DdpTx is under way
        held = Signal()                          # ... of DdpTx
        pick = Signal()                          # DdpTx feeds the framer this cycle
        d.d.comb += pick.eq(Mux(in_ulpdu, held, ~src.valid))
        # a register slice between this switch and the framer (timing: the switch's select
        # and the sources' payloads ran into the framer's input logic)
        d.submodules.framer_i_slice = fsl = StreamSlice(framer.i.payload.shape())
        fin = fsl.i
        wiring.connect(d, fsl.o, framer.i)      # (ENABLE gates the slice's input)
        d.d.comb += [
            fin.payload.eq(Mux(source, dpt.payload, Mux(pick, dto.payload, src.payload))),
            fin.valid.eq(Mux(source, dpt.valid, Mux(pick, dto.valid, src.valid)) & gate),
            src.ready.eq(~source & ~pick & fin.ready & gate),
            dto.ready.eq(~source & pick & fin.ready & gate),
            dpt.ready.eq(source & fin.ready & gate),
        ]
        with d.If(~source & fin.valid & fin.ready):
            d.d.sync += [in_ulpdu.eq(~fin.payload.last), held.eq(pick)]
        tx_fpdus = Signal(32)

        # output register S, with the per-connection marker tracker
        s_valid, s_fresh = Signal(), Signal()
        s_beat = Signal(OctetBeat(width=W, connections=N))
        s_out_ready = Signal()
        d.d.comb += framer.o.ready.eq((~s_valid | s_out_ready) & ~trk_pend)
        take = framer.o.valid & framer.o.ready
        d.d.sync += s_fresh.eq(take)
        with d.If(take):
            d.d.sync += [s_valid.eq(1), s_beat.eq(framer.o.payload)]
        with d.Elif(s_out_ready):
            d.d.sync += s_valid.eq(0)

        d.submodules.trk_mem = trk_mem = Memory(shape=_TxTrack(), depth=N, init=[])
        trk_wp = trk_mem.write_port()
        trk_rp = trk_mem.read_port(transparent_for=(trk_wp,))
        d.d.comb += trk_rp.addr.eq(framer.o.payload.conn)
        # Stage T (signals kt_*), the cycle after S: the row read for S's beat is registered
        # first, so that the memory output (slow on block RAM) only feeds flip-flops. 'run' (the state
        # after the last beat T processed) stands in for the row when that beat was of the
        # same connection: its write-back came too late for the read.
        kt_valid, kt_first, kt_last, kt_fwd = Signal(), Signal(), Signal(), Signal()
        kt_row = Signal(_TxTrack())
        kt_n = Signal(range(W + 1))
        kt_conn = Signal(cb)
        l_valid = Signal()              # 'run' holds the state of connection l_conn
        l_conn = Signal(cb)
        trk_cfg_wr = Signal()
        d.d.sync += [
            kt_valid.eq(s_fresh), kt_row.eq(trk_rp.data), kt_n.eq(s_beat.n),
            kt_first.eq(s_beat.first), kt_last.eq(s_beat.last), kt_conn.eq(s_beat.conn),
            kt_fwd.eq(Mux(kt_valid, kt_conn == s_beat.conn,
                         l_valid & ~trk_cfg_wr & (l_conn == s_beat.conn))),
        ]
        run = Signal(_TxTrack())
        base = Signal(_TxTrack())
        d.d.comb += base.eq(Mux(kt_first & ~kt_fwd, kt_row, run))
        sum_phase = Signal(10)
        d.d.comb += sum_phase.eq(base.phase + kt_n)
        marker_hit = Signal()
        d.d.comb += marker_hit.eq(kt_valid & base.markers
                                  & ((base.phase == 0) | (sum_phase > MARKER_INTERVAL)))
        trk_hit = Signal()              # counted one cycle later (off the memory path)
        d.d.sync += trk_hit.eq(marker_hit)
        after = Signal(_TxTrack())
        d.d.comb += [after.markers.eq(base.markers), after.phase.eq(sum_phase[:9])]
        tx_markers = Signal(32)
        tx_octets = Signal(64)
        wb = kt_valid & kt_last
        with d.If(kt_valid):
            d.d.sync += [run.eq(after), l_valid.eq(1), l_conn.eq(kt_conn)]
        with d.Elif(trk_cfg_wr):
            d.d.sync += l_valid.eq(0)
        with d.If(sweeping):
            d.d.comb += [trk_wp.en.eq(1), trk_wp.addr.eq(sweep_conn), trk_wp.data.eq(0)]
        with d.Elif(wb):
            d.d.comb += [trk_wp.en.eq(1), trk_wp.addr.eq(kt_conn), trk_wp.data.eq(after)]
        with d.Elif(trk_pend):
            d.d.comb += [trk_wp.en.eq(1), trk_wp.addr.eq(c_conn), trk_cfg_wr.eq(1),
                         trk_wp.data.markers.eq(c_tx_markers), trk_wp.data.phase.eq(c_tx_phase)]
            d.d.sync += trk_pend.eq(0)

        # S goes to tx_wire, or (LOOPBACK) into the deframer
        tx = self.tx_wire
        d.d.comb += [tx.payload.eq(s_beat), tx.valid.eq(s_valid & ~loopback)]

        # ---------------------------------------------------------------- RX path
        rxw = self.rx_wire
        # a register slice in front of the deframer (timing: its ready, which depends on a
        # pending context write, ran into the framer's output register through LOOPBACK or
        # an external loop from tx_wire to rx_wire)
        d.submodules.rx_slice = rx_slice = StreamSlice(OctetBeat(width=W, connections=N))
        rsi = rx_slice.i
        d.d.comb += [
            rsi.payload.eq(Mux(loopback, s_beat, rxw.payload)),
            rsi.valid.eq(Mux(loopback, s_valid, rxw.valid) & gate),
            rxw.ready.eq(~loopback & rsi.ready & gate),
            s_out_ready.eq(Mux(loopback, rsi.ready & gate, tx.ready)),
        ]
        wiring.connect(d, rx_slice.o, deframer.i)  # (ENABLE gates the slice's input)
        rx_octets = Signal(64)

        # output register R (so that the deframer can be held for a context write)
        r_valid = Signal()
        r_beat = Signal(MpaRxBeat(width=W, connections=N))
        r_out_ready = Signal()
        dpr_ready = Signal()
        rxu = self.rx_ulpdu
        tev_pend = Signal()                      # a receive-path report waits for the context pipeline
        d.d.comb += [
            rxu.payload.eq(r_beat), rxu.valid.eq(r_valid & ~sink & bypass),
            r_out_ready.eq(Mux(sink, dpr_ready, Mux(bypass, rxu.ready, ddp_i.ready))),
            deframer.o.ready.eq((~r_valid | r_out_ready) & ~ctx_pend & ~tev_pend & ~sweeping),
        ]
        # into the receive path: R's beats, or (sweep) one abort beat per connection
        with d.If(sweeping):
            d.d.comb += [ddp_i.valid.eq(~sw_abort_done), ddp_i.payload.conn.eq(sweep_conn),
                         ddp_i.payload.first.eq(1), ddp_i.payload.last.eq(1),
                         ddp_i.payload.error.eq(RX_ABORTED)]
        with d.Else():
            d.d.comb += [ddp_i.valid.eq(r_valid & use_ddp), ddp_i.payload.eq(r_beat)]
        o = deframer.o.payload
        got = deframer.o.valid & deframer.o.ready
        with d.If(got):
            d.d.sync += [r_valid.eq(1), r_beat.eq(o)]
        with d.Elif(r_out_ready):
            d.d.sync += r_valid.eq(0)

        # ---------------------------------------------------------------- RX events
        # an FPDU's end (the deframer's last beat of a ULPDU, with its verdict) is an event
        # one cycle after the handshake (registered for timing: the handshake depends on the
        # ready of the stream behind R; the events feed the context pipeline and the error
        # capture). Such an event goes first in the context pipeline's stage A, before a
        # pending COMMIT or report, which were set no earlier than its handshake.
        ev_end = Signal()
        ev_conn = Signal(cb)
        ev_error = Signal.like(o.error)
        d.d.sync += [ev_end.eq(got & o.last), ev_conn.eq(o.conn), ev_error.eq(o.error)]
        ev_err = Signal()
        d.d.comb += ev_err.eq(ev_end & (ev_error >= int(RxError.CRC)) & (ev_error <= int(RxError.TOO_SHORT)))
        ev_good = Signal()
        d.d.comb += ev_good.eq(ev_end & (ev_error == int(RxError.NONE)))
        e_layer, e_etype, e_ecode = Signal(4), Signal(4), Signal(8)
        with d.Switch(ev_error):
            with d.Case(int(RxError.CRC)):
                d.d.comb += [e_layer.eq(int(Layer.LLP)), e_ecode.eq(int(MpaError.CRC))]
            with d.Case(int(RxError.MARKER)):
                d.d.comb += [e_layer.eq(int(Layer.LLP)), e_ecode.eq(int(MpaError.MARKER))]
            with d.Default():
                d.d.comb += [e_layer.eq(int(Layer.DDP)), e_ecode.eq(0)]

        # context read-modify-write pipeline: A = this cycle (read), B = next cycle (the row
        # comes out of the memory and is registered, for timing), W = the cycle after (the new
        # row is made and written). A row read in A while the previous operation, on the same
        # connection, is in W misses that write: W takes the row it made last cycle instead.
        # (a receive-path report: tev_*, latched when the TERM queue takes it; the deframer's
        # output is held meanwhile, so it meets at most the event of the handshake before)
        A_NONE, A_COMMIT, A_SET, A_GOOD, A_ERR, A_CLOSE = range(6)
        a_kind = Signal(3)
        a_conn = Signal(cb)
        a_info = Signal(16)
        tev_conn = Signal(cb)
        tev_rcv = Signal()
        tev_info = Signal(16)
        d.d.comb += a_info.eq(Cat(e_ecode, e_etype, e_layer))
        with d.If(ev_err):
            d.d.comb += [a_kind.eq(A_ERR), a_conn.eq(ev_conn)]
        with d.Elif(ev_good):
            d.d.comb += [a_kind.eq(A_GOOD), a_conn.eq(ev_conn)]
        with d.Elif(ctx_pend):
            d.d.comb += [a_kind.eq(Mux(c_commit, A_COMMIT, A_SET)), a_conn.eq(c_conn)]
            d.d.sync += ctx_pend.eq(0)
        with d.Elif(tev_pend):
            d.d.comb += [a_kind.eq(Mux(tev_rcv, A_CLOSE, A_ERR)), a_conn.eq(tev_conn),
                         a_info.eq(tev_info)]
            d.d.sync += tev_pend.eq(0)
        d.d.comb += ctx_rp.addr.eq(a_conn)
        b_kind = Signal(3)
        b_conn = Signal(cb)
        b_state = Signal(3)
        b_info = Signal(16)
        d.d.sync += [b_kind.eq(a_kind), b_conn.eq(a_conn), b_state.eq(c_state),
                     b_info.eq(a_info)]
        w_kind = Signal(3)
        w_conn = Signal(cb)
        w_state = Signal(3)
        w_info = Signal(16)
        w_row = Signal(CtxEntry())               # the row read in A, registered in B
        new = Signal(CtxEntry())
        last_new = Signal(CtxEntry())            # the row C wrote in the previous cycle
        d.d.sync += [w_kind.eq(b_kind), w_conn.eq(b_conn), w_state.eq(b_state), w_info.eq(b_info),
                     w_row.eq(ctx_rp.data)]
        # a write in the cycle of B's read is seen by the (transparent) read port; one in the
        # cycle of A's read is not: forwarded here
        fwd = Signal()
        d.d.sync += fwd.eq(ctx_wp.en & (ctx_wp.addr == b_conn) & (b_kind != A_NONE) & ~sweeping)
        d.d.sync += [last_new.eq(ctx_wp.data)]
        old = Signal(CtxEntry())
        d.d.comb += old.eq(Mux(fwd, last_new, w_row))
        d.d.comb += new.eq(old)
        with d.Switch(w_kind):
            with d.Case(A_COMMIT):
                d.d.comb += [new.eq(0), new.state.eq(w_state)]
            with d.Case(A_SET):
                d.d.comb += new.state.eq(w_state)
            with d.Case(A_GOOD):
                with d.If(old.state == int(ConnState.WAIT_RX)):
                    d.d.comb += new.state.eq(int(ConnState.RTS))
            with d.Case(A_ERR):
                d.d.comb += [new.state.eq(int(ConnState.ERROR)), new.err.eq(1)]
                with d.If(~old.err):
                    d.d.comb += Cat(new.ecode, new.etype, new.layer).eq(w_info)
            with d.Case(A_CLOSE):
                with d.If(~old.err):
                    d.d.comb += new.state.eq(int(ConnState.CLOSING))
        with d.If(sweeping):
            d.d.comb += [ctx_wp.en.eq(1), ctx_wp.addr.eq(sweep_conn), ctx_wp.data.eq(0)]
        with d.Else():
            d.d.comb += [ctx_wp.en.eq(w_kind != A_NONE), ctx_wp.addr.eq(w_conn), ctx_wp.data.eq(new)]

        # error capture: the receive path's error reports while it is in use, else the deframer's
        trep = dterm
        term_take = Signal()
        # the captured event, registered (timing: the Terminate handshake ran into the
        # capture registers' enables); ERR_* follow one cycle later
        cap_ev = Signal()
        cap_in_conn = Signal(cb)
        cap_in_info = Signal(16)
        d.d.sync += [
            cap_ev.eq(Mux(use_ddp, term_take & ~trep.payload.received, ev_err)),
            cap_in_conn.eq(Mux(use_ddp, trep.payload.conn, ev_conn)),
            cap_in_info.eq(Mux(use_ddp, Cat(trep.payload.ecode, trep.payload.etype, trep.payload.layer),
                               Cat(e_ecode, e_etype, e_layer))),
        ]
        with d.If(term_take):
            d.d.sync += [tev_pend.eq(1), tev_conn.eq(trep.payload.conn), tev_rcv.eq(trep.payload.received),
                         tev_info.eq(Cat(trep.payload.ecode, trep.payload.etype, trep.payload.layer))]
        pending = r.err_status.pending
        cap_conn = Signal(cb)
        cap_info = Signal(16)
        err_count = Signal(32)
        d.d.comb += [
            r.err_status.pending_set.eq(cap_ev & ~pending),
            r.err_status.overflow_set.eq(cap_ev & pending),
            r.err_conn.conn.eq(cap_conn), r.err_conn.tx.eq(0),
            Cat(r.err_info.ecode, r.err_info.etype, r.err_info.layer).eq(cap_info),
            r.err_count.count.eq(err_count),
        ]
        with d.If(cap_ev & ~pending):
            d.d.sync += [cap_conn.eq(cap_in_conn), cap_info.eq(cap_in_info)]

        # ---------------------------------------------------------------- counters
        rx_fpdus, rx_crc, rx_marker, rx_length = (Signal(32, name=n) for n in (
            "rx_fpdus", "rx_crc_errors", "rx_marker_errors", "rx_length_errors"))
        counters = [
            # (counted behind the framer's input slice, from its registers; timing)
            (tx_fpdus, framer.i.valid & framer.i.ready & framer.i.payload.last),
            (tx_markers, trk_hit),
            (tx_octets, Mux(s_fresh, s_beat.n, 0)),
            (rx_octets, Mux(deframer.i.valid & deframer.i.ready, deframer.i.payload.n, 0)),
            (rx_fpdus, ev_end & (ev_error <= int(RxError.MARKER))),
            (rx_crc, ev_end & (ev_error == int(RxError.CRC))),
            (rx_marker, ev_end & (ev_error == int(RxError.MARKER))),
            (rx_length, ev_end & ((ev_error == int(RxError.TOO_LONG)) | (ev_error == int(RxError.TOO_SHORT)))),
            (err_count, cap_ev),
        ]
        clear = Signal()                         # CTRL.CLEAR_COUNTERS, registered (timing)
        d.d.sync += clear.eq(r.ctrl.clear_counters)
        for counter, inc in counters:
            # the increment is registered first (the counter runs one cycle behind its
            # events): handshakes and decodes feeding a 32/64-bit adder were critical paths
            inc_r = Signal(len(inc), name=f"{counter.name}_inc")
            with d.If(clear):
                d.d.sync += [counter.eq(0), inc_r.eq(0)]
            with d.Else():
                d.d.sync += [counter.eq(counter + inc_r), inc_r.eq(inc)]
        d.d.comb += [
            r.rx_fpdus.count.eq(rx_fpdus), r.rx_crc_errors.count.eq(rx_crc),
            r.rx_marker_errors.count.eq(rx_marker), r.rx_length_errors.count.eq(rx_length),
            r.rx_octets_lo.count.eq(rx_octets[:32]), r.rx_octets_hi.count.eq(rx_octets[32:]),
            r.tx_fpdus.count.eq(tx_fpdus), r.tx_markers.count.eq(tx_markers),
            r.tx_octets_lo.count.eq(tx_octets[:32]), r.tx_octets_hi.count.eq(tx_octets[32:]),
        ]

        # ---------------------------------------------------------------- data port: TX
        bus = self.s_axil
        dp_data_addr = REGMAP["DP_TX_DATA"].addr >> 2
        # a write to DP_TX_DATA goes into the FIFO one cycle after its handshake (registered:
        # the handshake and the address decode come from the bus master); the SEND pulse of
        # a later write comes later still
        d.d.sync += [
            tx_fifo.w_data.eq(bus.wdata),
            tx_fifo.w_en.eq(bus.awvalid & bus.awready & bus.wvalid & bus.wready
                            & (bus.awaddr[2:REGMAP.addr_width] == dp_data_addr)),
        ]
        d.d.comb += r.dp_tx_status.free.eq(self.dp_depth - tx_fifo.level)
        t_busy = Signal()
        t_conn = Signal(cb)
        t_len = Signal(16)
        t_left = Signal(16)                     # octets not yet put into a beat
        t_first = Signal()
        t_lane = Signal(range(K))
        t_n = Signal(bits_for(W))
        t_data = Signal(8 * W)
        t_full = Signal()                       # the beat is complete and offered
        t_last = Signal()
        d.d.comb += r.dp_tx_status.busy.eq(t_busy)
        with d.If(r.dp_tx_cmd.send & ~t_busy & (r.dp_tx_len.len != 0) & (r.dp_tx_conn.conn < N)):
            d.d.sync += [t_busy.eq(1), t_conn.eq(r.dp_tx_conn.conn), t_len.eq(r.dp_tx_len.len),
                         t_left.eq(r.dp_tx_len.len), t_first.eq(1), t_lane.eq(0), t_n.eq(0),
                         t_data.eq(0), t_full.eq(0), t_last.eq(0)]
        take_word = t_busy & ~t_full & tx_fifo.r_rdy
        d.d.comb += tx_fifo.r_en.eq(take_word)
        word_octets = Mux(t_left < 4, t_left, 4)
        with d.If(take_word):
            d.d.sync += [
                t_data.word_select(t_lane, 32).eq(tx_fifo.r_data),
                t_n.eq(t_n + word_octets),
                t_left.eq(t_left - word_octets),
                t_lane.eq(t_lane + 1),
            ]
            with d.If((t_lane == K - 1) | (t_left <= 4)):
                d.d.sync += [t_full.eq(1), t_last.eq(t_left <= 4)]
        d.d.comb += [
            dpt.valid.eq(t_full),
            dpt.payload.data.eq(t_data), dpt.payload.n.eq(t_n), dpt.payload.first.eq(t_first),
            dpt.payload.last.eq(t_last), dpt.payload.conn.eq(t_conn), dpt.payload.length.eq(t_len),
        ]
        with d.If(dpt.valid & dpt.ready):
            d.d.sync += [t_full.eq(0), t_first.eq(0), t_lane.eq(0), t_n.eq(0), t_data.eq(0)]
            with d.If(t_last):
                d.d.sync += t_busy.eq(0)

        # ---------------------------------------------------------------- data port: RX
        u_valid = Signal()
        u_beat = Signal(MpaRxBeat(width=W, connections=N))
        u_lane = Signal(range(K + 1))
        u_len = Signal(16)
        d.d.comb += dpr_ready.eq(~u_valid)
        with d.If(r_valid & sink & dpr_ready):
            d.d.sync += [u_valid.eq(1), u_beat.eq(r_beat), u_lane.eq(0), u_len.eq(u_len + r_beat.n)]
        u_words = (u_beat.n + 3) >> 2
        u_word = u_beat.data.word_select(u_lane, 32)
        keep = Signal(32)
        octets_here = Signal(bits_for(W))
        d.d.comb += octets_here.eq(u_beat.n - (u_lane << 2))
        d.d.comb += keep.eq(Cat(*(Mux(octets_here > j, 0xFF, 0) for j in range(4))))
        d.d.comb += rx_fifo.w_data.eq(u_word & keep)
        stat_in = Signal(stat_layout)
        d.d.comb += [stat_in.conn.eq(u_beat.conn), stat_in.len.eq(u_len), stat_in.crc.eq(u_beat.crc),
                     stat_in.error.eq(u_beat.error), rx_stat.w_data.eq(stat_in)]
        with d.If(u_valid):
            with d.If(u_lane < u_words):
                d.d.comb += rx_fifo.w_en.eq(1)
                with d.If(rx_fifo.w_rdy):
                    d.d.sync += u_lane.eq(u_lane + 1)
            with d.Elif(u_beat.last):
                d.d.comb += rx_stat.w_en.eq(1)
                with d.If(rx_stat.w_rdy):
                    d.d.sync += [u_valid.eq(0), u_len.eq(0)]
            with d.Else():
                d.d.sync += u_valid.eq(0)

        # reader: the head entry, NEXT and POP
        head = Signal(stat_layout)
        d.d.comb += head.eq(rx_stat.r_data)
        skipping = Signal()
        skip = Signal(16)
        consumed = Signal(16)
        head_valid = rx_stat.r_rdy & ~skipping
        d.d.sync += [                            # registered views (see the CQ's)
            r.dp_rx_status.valid.eq(head_valid),
            r.dp_rx_status.crc.eq(Mux(head_valid, head.crc, 0)),
            r.dp_rx_status.error.eq(Mux(head_valid, head.error, 0)),
            r.dp_rx_status.len.eq(Mux(head_valid, head.len, 0)),
            r.dp_rx_conn.conn.eq(Mux(head_valid, head.conn, 0)),
            r.dp_rx_data.data.eq(Mux(rx_fifo.r_rdy, rx_fifo.r_data, 0)),
        ]
        head_words = Signal(17)
        d.d.comb += head_words.eq((head.len + 3) >> 2)
        with d.If(skipping):
            with d.If(skip == 0):
                d.d.sync += skipping.eq(0)
            with d.Elif(rx_fifo.r_rdy):
                d.d.comb += rx_fifo.r_en.eq(1)
                d.d.sync += skip.eq(skip - 1)
        with d.Elif(r.dp_rx_cmd.pop & head_valid):
            d.d.comb += rx_stat.r_en.eq(1)
            d.d.sync += [consumed.eq(0), skipping.eq(1),
                         skip.eq(Mux(head_words > consumed, head_words - consumed, 0))]
        with d.Elif(r.dp_rx_cmd.next & rx_fifo.r_rdy):
            d.d.comb += rx_fifo.r_en.eq(1)
            d.d.sync += consumed.eq(consumed + 1)

        self._elaborate_ddp(m, d, r, ddp, dtx, ready=ready, term_take=term_take, tev_pend=tev_pend,
                            dterm=dterm,
                            host_reads=host_reads,
                            sweeping=sweeping, rxc=rxc, txc=txc, rrq=rrq, rr_done=rr_done)
        return m

    @staticmethod
    def _slice_out_of(d, name, port, *, full_rate=True):
        """A :class:`StreamSlice` behind a block's output stream ``port``; returns its output."""
        d.submodules[name] = s = StreamSlice(port.payload.shape(), full_rate=full_rate)
        wiring.connect(d, port, s.i)
        return s.o

    @staticmethod
    def _slice_into(d, name, port, *, full_rate=True):
        """A :class:`StreamSlice` in front of a block's input stream ``port``; returns its input."""
        d.submodules[name] = s = StreamSlice(port.payload.shape(), full_rate=full_rate)
        wiring.connect(d, s.o, port)
        return s.i

    def _elaborate_ddp(self, m, d, r, ddp, dtx, *, ready, term_take, tev_pend, dterm, host_reads, sweeping,
                       rxc, txc, rrq, rr_done):
        """The register side of the DDP/RDMAP receive path: STag table writes, receive
        buffer posts, IRD releases, and the CQ / RRQ / TERM queues read by the host."""
        N = self.connections

        # STag table row writes (both the receive path's table and the transmit path's copy):
        # STAG_CMD.COMMIT latches the row; STAG_STATUS.BUSY until both took it
        sw = ddp.stag_w
        # (into the transmit path through a register: its table works out the region's end
        # from the payload, after a multiplexer here)
        tsw = self._slice_into(d, "dtx_stag_slice", dtx.stag_w, full_rate=False)
        stag_pend = Signal()
        stag_pend_tx = Signal()
        row = Signal(StagWrite(stags=self.stags, connections=N))
        inv_pend = Signal()                      # a remote invalidation for the TX copy
        inv_row = Signal(StagWrite(stags=self.stags, connections=N))
        d.d.comb += [sw.payload.eq(row), tsw.payload.eq(Mux(stag_pend_tx, row, inv_row))]
        with d.If(r.stag_cmd.commit & ready & ~stag_pend & ~stag_pend_tx & (r.stag_index.index < self.stags)):
            p = row
            d.d.sync += [
                stag_pend.eq(1), stag_pend_tx.eq(1), p.index.eq(r.stag_index.index), p.stag.eq(r.stag_key.stag),
                p.base.eq(Cat(r.stag_base_lo.addr, r.stag_base_hi.addr)), p.length.eq(r.stag_length.length),
                p.valid.eq(r.stag_attr.valid & (r.stag_attr.conn < N)),
                p.remote_read.eq(r.stag_attr.remote_read), p.remote_write.eq(r.stag_attr.remote_write),
                p.conn.eq(r.stag_attr.conn),
            ]
        with d.Else():
            with d.If(sw.ready):
                d.d.sync += stag_pend.eq(0)
            with d.If(tsw.ready):
                d.d.sync += stag_pend_tx.eq(0)
        with d.If(~stag_pend_tx & tsw.ready):
            d.d.sync += inv_pend.eq(0)
        d.d.comb += [sw.valid.eq(stag_pend), tsw.valid.eq(stag_pend_tx | inv_pend),
                     r.stag_status.busy.eq(stag_pend | stag_pend_tx)]

        # work requests: SQ_* + SQ_CMD.DOORBELL latch one; SQ_STATUS.BUSY/FULL until the
        # transmit path took it (it waits while the connection's send queue is full)
        wr = dtx.wr
        sq_pend = Signal()
        with d.If(r.sq_cmd.doorbell & ready & ~sq_pend & (r.sq_wr.conn < N)):
            q = wr.payload
            d.d.sync += [
                sq_pend.eq(1), q.opcode.eq(r.sq_wr.opcode), q.signaled.eq(r.sq_wr.signaled),
                q.conn.eq(r.sq_wr.conn), q.laddr.eq(Cat(r.sq_laddr_lo.addr, r.sq_laddr_hi.addr)),
                q.length.eq(r.sq_length.length), q.lstag.eq(r.sq_lstag.stag),
                q.rstag.eq(r.sq_rstag.stag), q.rto.eq(Cat(r.sq_rto_lo.to, r.sq_rto_hi.to)),
                q.inv_stag.eq(r.sq_inv_stag.stag), q.wr_id.eq(r.sq_id.wr_id),
            ]
        with d.Elif(wr.ready):
            d.d.sync += sq_pend.eq(0)
        d.d.comb += [wr.valid.eq(sq_pend), r.sq_status.busy.eq(sq_pend), r.sq_status.full.eq(sq_pend)]

        # receive buffer posts: RQ_CMD.POST latches; RQ_STATUS.BUSY until taken
        rp = ddp.rq_post
        rq_pend = Signal()
        with d.If(r.rq_cmd.post & ready & ~rq_pend & (r.rq_conn.conn < N)):
            d.d.sync += [
                rq_pend.eq(1), rp.payload.conn.eq(r.rq_conn.conn),
                rp.payload.addr.eq(Cat(r.rq_addr_lo.addr, r.rq_addr_hi.addr)),
                rp.payload.length.eq(r.rq_length.length), rp.payload.id.eq(r.rq_id.wr_id),
            ]
        with d.Elif(rp.ready):
            d.d.sync += rq_pend.eq(0)
        d.d.comb += [rp.valid.eq(rq_pend), r.rq_status.busy.eq(rq_pend),
                     r.rq_status.full.eq(0), r.rq_status.overflow_set.eq(ddp.rq_overflow)]

        # IRD releases: the Read Responder's rr_done (first), or RRQ_CMD.DONE
        rd = ddp.rr_done
        rrd_pend = Signal()
        rrd_conn = Signal(conn_bits(N))
        with d.If(r.rrq_cmd.done & ready & ~rrd_pend & (r.rrq_done_conn.conn < N)):
            d.d.sync += [rrd_pend.eq(1), rrd_conn.eq(r.rrq_done_conn.conn)]
        with d.Elif(rd.ready & ~rr_done.valid):
            d.d.sync += rrd_pend.eq(0)
        d.d.comb += [rd.valid.eq(rrd_pend | rr_done.valid),
                     rd.payload.conn.eq(Mux(rr_done.valid, rr_done.payload.conn, rrd_conn)),
                     rr_done.ready.eq(rd.ready),
                     r.rrq_status.done_busy.eq(rrd_pend)]

        # completion queue: the transmit path's work request completions (first) and the
        # receive path's; a Read Response completion goes to the transmit path's read_done
        # (HOST_READS 0) or into the queue as an SQ/RDMA_READ entry (HOST_READS 1)
        cq_l = _CqEntry(connections=N)
        # one entry more than cq_depth: the writers look at a registered room flag (timing:
        # the FIFO's level compare fed both completion slices' ready), which is conservative
        # by one entry
        d.submodules.cq_fifo = cqf = SyncFIFOBuffered(width=cq_l.size, depth=self.cq_depth + 1)
        cq_room = Signal()
        d.d.sync += cq_room.eq(cqf.level < self.cq_depth)
        # (into the transmit path through a register slice: the valid is a decode of the
        # receive path's completion and HOST_READS)
        rdd = self._slice_into(d, "dtx_read_done_slice", dtx.read_done)
        to_tx = Signal()
        d.d.comb += to_tx.eq((rxc.payload.opcode == 2) & ~host_reads)
        tx_e = Signal(cq_l)
        d.d.comb += [
            tx_e.tx.eq(1), tx_e.status.eq(txc.payload.status), tx_e.rx.conn.eq(txc.payload.conn),
            tx_e.rx.opcode.eq(txc.payload.opcode), tx_e.rx.wr_id.eq(txc.payload.wr_id),
            tx_e.rx.length.eq(txc.payload.length),
        ]
        rx_e = Signal(cq_l)
        d.d.comb += rx_e.rx.eq(rxc.payload)
        d.d.comb += [
            cqf.w_data.eq(Mux(txc.valid, tx_e, rx_e)),
            # (a receive completion waits while an invalidation is pending: not written then)
            cqf.w_en.eq(cq_room & (txc.valid | (rxc.valid & ~to_tx & ~inv_pend))),
            txc.ready.eq(cq_room),
            rdd.valid.eq(rxc.valid & to_tx),
            rdd.payload.conn.eq(rxc.payload.conn), rdd.payload.length.eq(rxc.payload.length),
            rxc.ready.eq(Mux(to_tx, rdd.ready, cq_room & ~txc.valid & ~inv_pend)),
        ]
        # a Send with Invalidate invalidated an STag in the receive path's table: the same row
        # of the transmit path's copy is written invalid (one at a time, after host writes)
        with d.If(rxc.valid & rxc.ready & ~to_tx & rxc.payload.invalidated):
            d.d.sync += [inv_pend.eq(1), inv_row.index.eq(rxc.payload.inval_stag),
                         inv_row.stag.eq(rxc.payload.inval_stag), inv_row.valid.eq(0)]
        ce = Signal(cq_l)
        d.d.comb += ce.eq(Mux(cqf.r_rdy, cqf.r_data, 0))
        cq = ce.rx
        rresp = Signal()                         # the head is an RDMA Read Response (opcode 2)
        d.d.comb += rresp.eq(~ce.tx & (cq.opcode == 2))
        # The CQ, RRQ, TERM and data port views (the queue heads as registers) are registered
        # (timing: the FIFOs' outputs and these decodes went into the register bank's read
        # mux). They follow a pop one cycle later; the bank samples them no earlier than 3
        # cycles after the pop's write handshake (the write response, then a read address
        # handshake, then the bank's registered read address), so a read that follows the
        # pop's response sees the next head.
        d.d.comb += cqf.r_en.eq(r.cq_cmd.pop)
        d.d.sync += [
            r.cq_status.valid.eq(cqf.r_rdy),
            r.cq_wr_id.wr_id.eq(Mux(rresp, 0, cq.wr_id)),
            r.cq_info.opcode.eq(Mux(rresp, int(SqOpcode.RDMA_READ), cq.opcode)),
            r.cq_info.queue.eq(Mux(cqf.r_rdy & ~rresp & ~ce.tx, int(CqQueue.RQ), int(CqQueue.SQ))),
            r.cq_info.invalidated.eq(~rresp & cq.invalidated),
            r.cq_info.solicited.eq(~rresp & cq.solicited),
            r.cq_info.status.eq(ce.status),
            r.cq_info.conn.eq(cq.conn),
            r.cq_length.length.eq(cq.length),
            r.cq_inv_stag.stag.eq(Mux(~rresp & cq.invalidated, cq.inval_stag, 0)),
            r.cq_msn.msn.eq(Mux(rresp, 0, cq.msn)),
            r.cq_stag.stag.eq(Mux(rresp, cq.stag, 0)),
            r.cq_to_lo.to.eq(Mux(rresp, cq.to[:32], 0)),
            r.cq_to_hi.to.eq(Mux(rresp, cq.to[32:], 0)),
        ]

        # inbound Read Request queue
        rr_l = ReadRequestOut(connections=N)
        d.submodules.rrq_fifo = rrf = SyncFIFOBuffered(width=rr_l.size, depth=self.rrq_depth)
        d.d.comb += [
            rrf.w_data.eq(rrq.payload), rrf.w_en.eq(rrq.valid & host_reads),
            dtx.rrq.payload.eq(rrq.payload), dtx.rrq.valid.eq(rrq.valid & ~host_reads),
            rrq.ready.eq(Mux(host_reads, rrf.w_rdy, dtx.rrq.ready)),
        ]
        rr = Signal(rr_l)
        d.d.comb += [rr.eq(Mux(rrf.r_rdy, rrf.r_data, 0)), rrf.r_en.eq(r.rrq_cmd.pop)]
        d.d.sync += [
            r.rrq_status.valid.eq(rrf.r_rdy), r.rrq_status.conn.eq(rr.conn),
            r.rrq_msn.msn.eq(rr.msn), r.rrq_sink_stag.stag.eq(rr.sink_stag),
            r.rrq_sink_to_lo.to.eq(rr.sink_to[:32]), r.rrq_sink_to_hi.to.eq(rr.sink_to[32:]),
            r.rrq_size.size.eq(rr.size), r.rrq_src_stag.stag.eq(rr.src_stag),
            r.rrq_src_to_lo.to.eq(rr.src_to[:32]), r.rrq_src_to_hi.to.eq(rr.src_to[32:]),
        ]

        # Terminate queue (a report is taken only when the context pipeline can take its event,
        # and the transmit path took the previous one: a copy goes there, which sends the
        # Terminate or stops the connection)
        tm_l = TermReport(connections=N)
        d.submodules.term_fifo = tmf = SyncFIFOBuffered(width=tm_l.size, depth=self.term_depth)
        tt_pend = Signal()
        with d.If(term_take):
            d.d.sync += [tt_pend.eq(1), dtx.term.payload.eq(dterm.payload)]
        with d.Elif(dtx.term.ready):
            d.d.sync += tt_pend.eq(0)
        d.d.comb += dtx.term.valid.eq(tt_pend)
        # a copy of `sweeping` one cycle behind (timing: its fanout); reset with it, it only
        # holds reports back one cycle longer after the sweep
        sweep_t = Signal(init=1)
        d.d.sync += sweep_t.eq(sweeping)
        d.d.comb += [
            dterm.ready.eq(tmf.w_rdy & ~tev_pend & ~sweep_t & ~tt_pend),
            term_take.eq(dterm.valid & dterm.ready),
            tmf.w_en.eq(term_take),
        ]
        # the queue stores the payload with the octets beyond its length zeroed, so that the
        # TERM_DATA views only select (timing)
        tm_in = Signal(tm_l)
        d.d.comb += [
            tm_in.eq(dterm.payload),
            tm_in.term.eq(Cat(*(Mux(dterm.payload.tlen > i, dterm.payload.term[8 * i:8 * i + 8], 0)
                                for i in range(TERM_BYTES)))),
            tmf.w_data.eq(tm_in),
        ]
        tm = Signal(tm_l)
        d.d.comb += [tm.eq(Mux(tmf.r_rdy, tmf.r_data, 0)), tmf.r_en.eq(r.term_cmd.pop)]
        d.d.sync += [
            r.term_status.valid.eq(tmf.r_rdy), r.term_status.received.eq(tm.received),
            r.term_status.len.eq(tm.tlen), r.term_status.conn.eq(tm.conn),
            r.term_info.layer.eq(tm.layer), r.term_info.etype.eq(tm.etype), r.term_info.ecode.eq(tm.ecode),
        ]
        for k in range(TERM_BYTES // 4):
            d.d.sync += getattr(r, f"term_data{k}").data.eq(tm.term[32 * k:32 * k + 32])

        m.d.comb += self.irq.eq((r.int_enable.err & r.err_status.pending)
                                | (r.int_enable.cq & cqf.r_rdy)
                                | (r.int_enable.term & tmf.r_rdy))
