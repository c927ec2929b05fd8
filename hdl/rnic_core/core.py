"""The RNIC core: register bank, MPA TX framer and RX deframer, DDP/RDMAP receive and transmit
paths, and the components between them.

See :class:`RnicCore`.
"""

from amaranth.hdl import ClockDomain, ClockSignal, DomainRenamer, Module, Mux, ResetInserter, ResetSignal, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import REGMAP

from ..axi import AXI4LiteSignature, AXI4ReadSignature, AXI4WriteSignature
from ..beat import OctetBeat, check_width, conn_bits
from ..ddp_rx import DdpRx
from ..ddp_tx import DdpTx
from ..global_buffer import on_global_network
from ..mpa_rx import MpaRxBeat, MpaRxDeframer
from ..mpa_tx import MpaTxBeat, MpaTxFramer
from ..regbank import NETWORK_BLOCK, TCP_BLOCK, RegisterBank, block_signature
from .completion_queue import CompletionQueue
from .control import CoreControl
from .counters import Counters
from .dp_rx import DataPortRx
from .dp_tx import DataPortTx
from .error_capture import ErrorCapture
from .ird_release import IrdRelease
from .loopback import LoopbackSwitch
from .read_request_queue import ReadRequestQueue
from .registers import connect_registers
from .rq_post import ReceiveBufferPost
from .rx_output import DeframerOutput
from .setup import ConnectionSetup
from .sq_post import WorkRequestPost
from .stag_writer import StagWriter
from .state import ConnectionState
from .terminate_queue import TerminateQueue
from .tx_output import FramerOutput
from .tx_switch import UlpduSwitch

__all__ = ["RnicCore", "DP_DEPTH", "DP_ULPDUS"]

#: Default depth (32-bit words) of each data port FIFO.
DP_DEPTH = 512
#: Default number of received ULPDUs the data port's RX status FIFO holds.
DP_ULPDUS = 32


class RnicCore(wiring.Component):
    """The RNIC core: registers, the MPA layer of both directions, DDP/RDMAP receive and transmit.

    Contains a :class:`~rnic.hdl.regbank.RegisterBank` (the map of
    :mod:`rnic.host.spec.regmap`), a :class:`~rnic.hdl.mpa_tx.MpaTxFramer`, a
    :class:`~rnic.hdl.mpa_rx.MpaRxDeframer` and behind it the DDP/RDMAP receive
    path :class:`~rnic.hdl.ddp_rx.DdpRx` (validation, placement into host memory
    on ``m_axi``, completions, Read Requests, Terminates), in front of the
    framer the DDP/RDMAP transmit path :class:`~rnic.hdl.ddp_tx.DdpTx` (send
    queues, segmenter reading payload on ``m_axi_rd``, Read Responder,
    Terminates, completions), plus the components of :mod:`rnic.hdl.rnic_core`
    between them (what they do: below). ULPDUs (DDP segments) made outside the
    core still come in as a stream (``tx_ulpdu``) or through the register data
    port.

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
        registers (2 .. 4096; defaults 16, 8, 2). A full queue holds the receive path back
        (the CQ's loses the completion instead). Terminates end their connection, so few
        wait at once: at 2 the Terminate queue is two registers, at 4 its 426-bit entries
        took 111 distributed-RAM cells (some 670 LUT sites of the 45F).
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
    network : bool
        False (default): the core alone; the bank's Network registers (NET_*) are plain
        storage, their read-only fields read 0 and NET_CAPS reports no network layer. True:
        a design with the network layer around the core (:class:`rnic.hdl.nic_top.NicTop`):
        NET_CAPS.NETWORK reads 1, the Network and TCP registers are passed through on the
        ports ``net`` and ``tcp``, and the transmit path takes TCP's per-connection
        permission to send (``may_send``, ``tx_started``).
    arp_entries : int
        Reported in NET_CAPS.ARP_ENTRIES (0 .. 64, default 0): the ARP cache slots of the
        network layer behind ``net``.

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
    net : Out(block_signature("Network")), only with ``network``
        The register bank's Network block, exactly as the bank's ports (seen from the
        bank: RW fields and pulses out, RO fields in), by register and field name:
        ``net.net_ip.ip`` (out), ``net.net_arp_cmd.write`` (pulse, out),
        ``net.net_rx_good.count`` (in). The core does not use them.
    tcp : Out(block_signature("TCP")), only with ``network``
        The bank's TCP block, the same way (``tcp.tcp_cmd.listen``, ``tcp.tcp_now.ticks``).
    may_send : In(connections), only with ``network``
        Bit ``c``: connection ``c`` may begin a run on ``tx_wire`` (TCP's send ring has room
        and no run of it is under way). A turn of the transmit path's scheduler sends only
        on a connection whose bit is set (besides its state, below), read a cycle after the
        turn picks it; a connection whose bit is 0 waits, the others go on. All ones after
        reset: a design that does not drive it sends whenever the state allows.
    tx_started : Out(stream.Signature(range(connections), always_ready=True)), only with
        ``network``
        A segment of the transmit path (a FPDU on ``tx_wire`` a few cycles later) starts on
        connection ``payload``: the design in front of TCP keeps ``may_send`` of that
        connection 0 until the run reaches TCP. Terminates are not held by ``may_send``.

    What the components between the blocks do
    -----------------------------------------
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
      resets to 1: ULPDUs leave on ``rx_ulpdu`` undecoded until a driver clears
      it, ``rnic.host.driver.regs.Registers.dp_configure()``). Its host
      side is the register map: STAG_* + STAG_CMD.COMMIT write a row of its
      STag table (STAG_STATUS.BUSY until taken; the row only matches for
      STAG_INDEX = STAG_KEY mod ``stags``, a row whose CONN is not below
      ``connections`` is written invalid); RQ_* + RQ_CMD.POST post a receive
      buffer (RQ_STATUS.BUSY until taken, RQ_STATUS.OVERFLOW when dropped);
      CTX_CMD.COMMIT also restarts the connection there (MSNs 1, receive queue
      empty, no error, IRD from CTX_IRD_ORD; part of CTX_STATUS.BUSY); its
      completions fill the CQ queue (CQ_*), its Read Requests the RRQ queue
      (RRQ_*; RRQ_CMD.DONE frees an IRD slot of RRQ_DONE_CONN), its reports
      the TERM queue (TERM_*). A full RRQ or TERM queue back-pressures the
      receive path; a completion that finds CQ_* full is lost (CQ_STATUS.OVERFLOW).
      A report of an error found here (TERM_STATUS.RECEIVED 0) is the error
      capture's source while the receive path is in use (ERR_*, ERR_COUNT:
      MPA errors included, one per connection until its next COMMIT) and
      moves the connection to ERROR (first error in CTX_ERROR); a received
      Terminate moves it to CLOSING. With SINK or BYPASS the capture follows
      the deframer as described under Errors.
    * The DDP/RDMAP transmit path (:class:`~rnic.hdl.ddp_tx.DdpTx`). SQ_* +
      SQ_CMD.DOORBELL (while STATUS.READY and SQ_STATUS.BUSY 0; otherwise
      ignored; SQ_WR.CONN not below ``connections``: completes at once with
      BAD_REQUEST) latch one work request;
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
      connection state gates the transmit path: a connection sends (work
      requests, Read Responses) only in RTS or CLOSING; in IDLE or WAIT_RX (the
      MPA fence: until its first good FPDU arrives) its work waits, posted
      early or not, while other connections go on; Terminates are not held.
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
    components around them (DdpRx input, completions, Read Requests, DdpTx
    output) each pass a register slice (1 cycle;
    :class:`~rnic.hdl.stream_slice.StreamSlice`).
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
                 rq_depth=8, cq_depth=16, rrq_depth=8, term_depth=2, ddp_slots=4, ddp_slot_bytes=2048,
                 addr_width=32, sq_depth=8, ird_depth=4, ord_depth=4, network=False, arp_entries=0):
        if not isinstance(network, bool):
            raise TypeError(f"network must be a bool, not {network!r}")
        REGMAP.check_params({"width": width, "connections": connections, "stags": stags,
                             "network": int(network), "arp_entries": arp_entries})
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
        self.network = network
        self.arp_entries = arp_entries
        net = {"net": Out(block_signature(NETWORK_BLOCK)),
               "tcp": Out(block_signature(TCP_BLOCK)),
               "may_send": In(connections, init=(1 << connections) - 1),
               "tx_started": Out(stream.Signature(conn_bits(connections), always_ready=True)),
               } if network else {}
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=REGMAP.addr_width)),
            "tx_ulpdu": In(stream.Signature(MpaTxBeat(width=width, connections=connections))),
            "tx_wire": Out(stream.Signature(OctetBeat(width=width, connections=connections))),
            "rx_wire": In(stream.Signature(OctetBeat(width=width, connections=connections))),
            "rx_ulpdu": Out(stream.Signature(MpaRxBeat(width=width, connections=connections))),
            "m_axi": Out(AXI4WriteSignature(addr_width=addr_width, data_width=8 * width)),
            "m_axi_rd": Out(AXI4ReadSignature(addr_width=addr_width, data_width=8 * width)),
            "irq": Out(1),
            **net,
        })


    def elaborate(self, platform):
        m = Module()
        W, N = self.width, self.connections
        m.submodules.bank = bank = RegisterBank(
            width=W, connections=N, stags=self.stags, network=int(self.network),
            arp_entries=self.arp_entries, ird_depth=self.ird_depth, ord_depth=self.ord_depth)
        wiring.connect(m, wiring.flipped(self.s_axil), bank.s_axil)
        r = bank.regs
        if self.network:
            for block in (self.net, self.tcp):
                for name in block.signature.members:
                    wiring.connect(m, wiring.flipped(getattr(block, name)), getattr(r, name))

        # Everything below is reset by rst and by CTRL.SOFT_RESET (a one-cycle pulse), through
        # one register, in the cycle after (timing: the reset fans out to every register of
        # the core; with the domain's rst ORed in, an OR gate sat behind both nets). So it
        # runs in a domain of its own: the sync clock, no domain reset. The register drives
        # a global network (on an ECP5), not the general routing of the core's every tile.
        core_rst = Signal(init=1, reset_less=True)
        m.d.sync += core_rst.eq(ResetSignal("sync") | r.ctrl.soft_reset)
        m.domains.core = cd_core = ClockDomain("core", reset_less=True, local=True)
        m.d.comb += cd_core.clk.eq(ClockSignal("sync"))
        d = Module()
        reset = on_global_network(m, core_rst, name="core_rst_net")
        m.submodules.core = DomainRenamer("core")(ResetInserter(reset)(d))

        # ---- the data-path blocks
        d.submodules.framer = framer = MpaTxFramer(width=W, connections=N)
        d.submodules.deframer = deframer = MpaRxDeframer(width=W, connections=N)
        d.submodules.ddp = ddp = DdpRx(width=W, connections=N, stags=self.stags, slots=self.ddp_slots,
                                       slot_bytes=self.ddp_slot_bytes, rq_depth=self.rq_depth,
                                       addr_width=self.addr_width)
        wiring.connect(d, ddp.m_axi, wiring.flipped(self.m_axi))
        d.submodules.dtx = dtx = DdpTx(width=W, connections=N, sq_depth=self.sq_depth,
                                       rrq_depth=self.ird_depth, ord_depth=self.ord_depth,
                                       stags=self.stags, addr_width=self.addr_width, gated=True)
        wiring.connect(d, dtx.m_axi, wiring.flipped(self.m_axi_rd))

        # ---- the components around them
        parts = {
            "control": CoreControl(),
            "setup": ConnectionSetup(connections=N),
            "state": ConnectionState(connections=N),
            "tx_switch": UlpduSwitch(width=W, connections=N),
            "tx_output": FramerOutput(width=W, connections=N),
            "loopback": LoopbackSwitch(width=W, connections=N),
            "rx_output": DeframerOutput(width=W, connections=N),
            "errors": ErrorCapture(connections=N),
            "counters": Counters(width=W, connections=N),
            "dp_tx": DataPortTx(width=W, connections=N, depth=self.dp_depth),
            "dp_rx": DataPortRx(width=W, connections=N, depth=self.dp_depth, ulpdus=self.dp_ulpdus),
            "stag_writer": StagWriter(stags=self.stags, connections=N),
            "sq_post": WorkRequestPost(connections=N),
            "rq_post": ReceiveBufferPost(connections=N),
            "ird_release": IrdRelease(connections=N),
            "cq": CompletionQueue(connections=N, stags=self.stags, depth=self.cq_depth),
            "rrq": ReadRequestQueue(connections=N, depth=self.rrq_depth),
            "term": TerminateQueue(connections=N, depth=self.term_depth),
        }
        for name, part in parts.items():
            d.submodules[name] = part
            if "regs" in part.signature.members:
                connect_registers(d, r, part.regs)
        self._connect_data_path(d, framer, deframer, ddp, dtx, **parts)
        self._connect_host_side(d, ddp, dtx, **parts)

        cq, term = parts["cq"], parts["term"]
        m.d.comb += self.irq.eq((r.int_enable.err & r.err_status.pending)
                                | (r.int_enable.cq & cq.nonempty)
                                | (r.int_enable.term & term.nonempty))
        return m

    def _connect_data_path(self, d, framer, deframer, ddp, dtx, *, control, setup, state, tx_switch,
                           tx_output, loopback, rx_output, errors, counters, dp_tx, dp_rx, **_):
        """The streams of both directions, the reset sweep and the per-connection state."""
        # the reset sweep and the context commands
        wiring.connect(d, setup.framer_cfg, framer.cfg)
        wiring.connect(d, setup.deframer_cfg, deframer.cfg)
        wiring.connect(d, setup.rx_ctl, ddp.ctl)
        wiring.connect(d, setup.tx_cfg, dtx.cfg)
        wiring.connect(d, setup.command, state.command)
        wiring.connect(d, setup.tracker_cfg, tx_output.config)
        wiring.connect(d, setup.abort, rx_output.abort)
        d.d.comb += setup.abort_in_flight.eq(ddp.i.valid)
        for part in (control, state, tx_output, rx_output):
            d.d.comb += part.sweeping.eq(setup.sweeping)
        for part in (state, tx_output):
            d.d.comb += part.sweep_conn.eq(setup.sweep_conn)
        dp = control.dp

        # transmit: tx_ulpdu, DdpTx or the data port -> framer -> S -> tx_wire or loopback
        wiring.connect(d, wiring.flipped(self.tx_ulpdu), tx_switch.port)
        wiring.connect(d, dtx.o, tx_switch.ddp)
        wiring.connect(d, dp_tx.o, tx_switch.data_port)
        wiring.connect(d, tx_switch.o, framer.i)
        wiring.connect(d, framer.o, tx_output.i)
        wiring.connect(d, tx_output.o, loopback.tx)
        wiring.connect(d, loopback.tx_wire, wiring.flipped(self.tx_wire))
        d.d.comb += [tx_switch.enable.eq(control.enable), tx_switch.source.eq(dp.source),
                     loopback.enable.eq(control.enable), loopback.loopback.eq(dp.loopback)]
        # (the data port's TX FIFO takes every write to DP_TX_DATA, watched on the bus)
        bus = self.s_axil
        d.d.comb += [
            dp_tx.push.valid.eq(bus.awvalid & bus.awready & bus.wvalid & bus.wready
                                & (bus.awaddr[2:REGMAP.addr_width] == REGMAP["DP_TX_DATA"].addr >> 2)),
            dp_tx.push.payload.eq(bus.wdata),
        ]

        # receive: rx_wire or loopback -> deframer -> R -> rx_ulpdu, DdpRx or the data port
        wiring.connect(d, wiring.flipped(self.rx_wire), loopback.rx_wire)
        wiring.connect(d, loopback.o, deframer.i)
        wiring.connect(d, deframer.o, rx_output.i)
        wiring.connect(d, rx_output.ulpdu, wiring.flipped(self.rx_ulpdu))
        wiring.connect(d, rx_output.ddp, ddp.i)
        wiring.connect(d, rx_output.sink, dp_rx.i)
        d.d.comb += [rx_output.dp.eq(dp), rx_output.hold.eq(state.hold)]

        # the ends of ULPDUs: connection state, error capture, counters
        for part in (state, errors, counters):
            wiring.connect(d, rx_output.fpdu_end, part.fpdu_end)
        d.d.comb += [
            errors.use_ddp.eq(dp.use_ddp),
            # (TX_FPDUS counted behind the framer's input slice, from its registers; timing)
            counters.tx_fpdu.eq(framer.i.valid & framer.i.ready & framer.i.payload.last),
            counters.tx_marker.eq(tx_output.marker),
            counters.tx_octets.eq(tx_output.octets),
            counters.error.eq(errors.captured),
        ]
        # (RX_OCTETS from the deframer's input handshake, through a register of its own that
        # can sit beside the deframer: timing, the counters are elsewhere on the die)
        rx_octets = Signal.like(counters.rx_octets, name="rx_octets_taken")
        d.d.sync += rx_octets.eq(Mux(deframer.i.valid & deframer.i.ready, deframer.i.payload.n, 0))
        d.d.comb += counters.rx_octets.eq(rx_octets)

    def _connect_host_side(self, d, ddp, dtx, *, control, setup, state, errors, stag_writer, sq_post,
                           rq_post, ird_release, cq, rrq, term, **_):
        """The register side of the DDP/RDMAP paths: STag table writes, work requests,
        receive buffers, IRD releases, and the CQ / RRQ / TERM queues read by the host."""
        for part in (stag_writer, sq_post, rq_post, ird_release):
            d.d.comb += part.ready.eq(setup.ready)
        wiring.connect(d, stag_writer.rx, ddp.stag_w)
        wiring.connect(d, stag_writer.tx, dtx.stag_w)
        wiring.connect(d, sq_post.o, dtx.wr)
        d.d.comb += state.tx_conn.eq(dtx.open_conn)
        if self.network:
            # (the permission registered a cycle after the turn picked its connection, as the
            # state memory's read: the sequencer looks at ``open`` a cycle after ``open_conn``)
            may_send = Signal(name="may_send_q")
            d.d.sync += may_send.eq(self.may_send.bit_select(dtx.open_conn, 1))
            d.d.comb += [dtx.open.eq(state.tx_open & may_send),
                         self.tx_started.valid.eq(dtx.started.valid),
                         self.tx_started.payload.eq(dtx.started.payload)]
        else:
            d.d.comb += dtx.open.eq(state.tx_open)
        wiring.connect(d, rq_post.o, ddp.rq_post)
        d.d.comb += rq_post.overflow.eq(ddp.rq_overflow)
        wiring.connect(d, dtx.rr_done, ird_release.responder)
        wiring.connect(d, ird_release.o, ddp.rr_done)

        wiring.connect(d, ddp.cq, cq.rx)
        wiring.connect(d, dtx.cq, cq.tx)
        wiring.connect(d, sq_post.bad, cq.bad)
        wiring.connect(d, cq.read_done, dtx.read_done)
        wiring.connect(d, cq.invalidate, stag_writer.invalidate)
        wiring.connect(d, ddp.rrq, rrq.i)
        wiring.connect(d, rrq.responder, dtx.rrq)
        d.d.comb += [cq.host_reads.eq(control.dp.host_reads), rrq.host_reads.eq(control.dp.host_reads)]

        wiring.connect(d, ddp.term, term.i)
        wiring.connect(d, term.responder, dtx.term)
        wiring.connect(d, term.report, state.report)
        wiring.connect(d, term.error, errors.ddp_error)
        d.d.comb += term.sweeping.eq(setup.sweeping)
