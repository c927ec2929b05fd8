"""The platform-independent part of the core and NIC board tops: UART register access, the
board registers, traffic through the core.

:class:`BoardLogic` puts a core behind a UART bridge beside the :class:`BoardRegisters` and
feeds its data path with :mod:`~rnic.hdl.top.traffic`; the board tops add pins, clocks
and LEDs around it.

Board registers (32 bit, at 0x1000 + offset, through the UART bridge)
---------------------------------------------------------------------
(The bridge's whole address map: :mod:`rnic.host.spec.board`.)

=======  ==============  ==  ===========================================================
offset   name            rw  content
=======  ==============  ==  ===========================================================
0x00     BRD_ID          ro  0x42524430 ("BRD0")
0x04     BRD_CLK         ro  core clock frequency in Hz (as built)
0x08     BRD_STATUS      ro  bit 0 PLL locked, 1 PHY out of reset, 2 RGMII RX clock seen
                             in the last ~1 ms, 3 the core has a receive side (RnicCore,
                             NicTop; 0: FramerCore)
0x0C     BRD_GEN         rw  bit 0 traffic source on; bits 31..16 connection mask
                             (the source's connection ids are LFSR & mask)
0x10     BRD_TX_BEATS    ro  beats the core accepted from the traffic source
0x14     BRD_RX_BEATS    ro  beats the sink took from the core (rx_ulpdu, or tx_wire)
0x18     BRD_SIGNATURE   ro  signature (MISR) of everything the sink took
0x1C     BRD_ERRORS      ro  UART bridge error pulses (dropped octets/frames, timeouts)
=======  ==============  ==  ===========================================================

Other addresses in the window answer SLVERR; writes to read-only ones are ignored.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.board import BOARD_BASE, BOARD_ID, BRIDGE_ADDR_WIDTH, HOST_MEMORY_BASE
from rnic.host.spec.limits import check_width

from ..axi import RESP_OKAY, RESP_SLVERR, AXI4LiteSignature, AXI4LiteSplit
from ..beat import conn_bits
from ..rnic_core import RnicCore
from ..uart_bridge import UARTBridge
from .cores import core_name, core_ports
from .host_memory import HostMemory
from .traffic import Lfsr, Signature32, UlpduSource

__all__ = ["BoardLogic", "BoardRegisters", "BOARD_ID", "BOARD_BASE"]


class BoardRegisters(wiring.Component):
    """The board registers (see the module documentation) as an AXI4-Lite slave (12 address
    bits). ``bvalid`` rises one cycle after a write's handshake, ``rvalid`` two cycles after
    a read's (the word is selected from a registered index)."""

    NAMES = ("BRD_ID", "BRD_CLK", "BRD_STATUS", "BRD_GEN", "BRD_TX_BEATS", "BRD_RX_BEATS",
             "BRD_SIGNATURE", "BRD_ERRORS")

    def __init__(self, *, clk_freq, rnic_core):
        self.clk_freq = int(round(clk_freq))
        self.rnic_core = bool(rnic_core)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=12)),
            "locked": In(1), "phy_up": In(1), "eth_rx_seen": In(1),
            "gen_enable": Out(1), "gen_conn_mask": Out(16, init=0xFFFF),
            "tx_beats": In(32), "rx_beats": In(32), "sig_value": In(32), "errors": In(32),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil
        words = [
            Const(BOARD_ID, 32), Const(self.clk_freq, 32),
            Cat(self.locked, self.phy_up, self.eth_rx_seen, Const(int(self.rnic_core), 1)),
            Cat(self.gen_enable, Const(0, 15), self.gen_conn_mask),
            self.tx_beats, self.rx_beats, self.sig_value, self.errors,
        ]
        index_w = bus.awaddr[2:12]
        index_r = bus.araddr[2:12]
        go_w = Signal()
        m.d.comb += [go_w.eq(bus.awvalid & bus.wvalid & ~bus.bvalid),
                     bus.awready.eq(go_w), bus.wready.eq(go_w)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        with m.If(go_w):
            m.d.sync += [bus.bvalid.eq(1),
                         bus.bresp.eq(Mux(index_w < len(words), RESP_OKAY, RESP_SLVERR))]
            with m.If(index_w == 3):
                with m.If(bus.wstrb[0]):
                    m.d.sync += self.gen_enable.eq(bus.wdata[0])
                with m.If(bus.wstrb[2]):
                    m.d.sync += self.gen_conn_mask[:8].eq(bus.wdata[16:24])
                with m.If(bus.wstrb[3]):
                    m.d.sync += self.gen_conn_mask[8:].eq(bus.wdata[24:32])
        # reads: the word's index and whether it exists are registered, the word selected in
        # the next cycle by the index alone (timing: the words come from all over the board)
        go_r = Signal()
        r_pend = Signal()
        r_sel = Signal(range(len(words)))
        r_hit = Signal()
        m.d.comb += [go_r.eq(bus.arvalid & ~bus.rvalid & ~r_pend), bus.arready.eq(go_r)]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        m.d.sync += r_pend.eq(go_r)
        with m.If(go_r):
            m.d.sync += [r_sel.eq(index_r[:len(r_sel)]), r_hit.eq(index_r < len(words))]
        with m.If(r_pend):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(Mux(r_hit, Array(words)[r_sel], 0)),
                         bus.rresp.eq(Mux(r_hit, RESP_OKAY, RESP_SLVERR))]
        return m


#: The core's stream ports :class:`BoardLogic` drives or drains.
STREAMS = ("tx_ulpdu", "tx_wire", "rx_wire", "rx_ulpdu")


def _connect_stream(m, src, dst):
    """``src`` (an Out stream) into ``dst`` (an In stream): by wiring.connect when the
    signatures match, else field by field by name (missing fields are 0)."""
    try:
        wiring.connect(m, src, dst)
        return
    except (wiring.ConnectionError, TypeError):
        pass
    m.d.comb += [dst.valid.eq(src.valid), src.ready.eq(dst.ready)]
    src_fields = dict(src.payload.shape()) if hasattr(src.payload.shape(), "__iter__") else {}
    dst_shape = dst.payload.shape()
    for name in (dict(dst_shape) if hasattr(dst_shape, "__iter__") else {}):
        value = getattr(src.payload, name) if name in src_fields else 0
        m.d.comb += getattr(dst.payload, name).eq(value)


class BoardLogic(wiring.Component):
    """The platform-independent part of the core and NIC board tops (simulated in the tests).

    UART bridge (13 address bits; 14 with ``memory``) -> :class:`~rnic.hdl.axi.AXI4LiteSplit`
    -> the core's ``s_axil`` (0x0000-0x0FFF), :class:`BoardRegisters` (0x1000-0x1FFF) and,
    with ``memory``, the window of a :class:`~rnic.hdl.top.host_memory.HostMemory`
    (0x2000-0x3FFF) whose AXI4 ports are the core's ``m_axi`` and ``m_axi_rd``;
    :class:`~rnic.hdl.top.traffic.UlpduSource` -> ``core.tx_ulpdu``; ``core.tx_wire`` ->
    ``core.rx_wire`` (loopback); ``core.rx_ulpdu`` (or ``tx_wire`` when the core has no
    RX side) -> sink (beat counter, :class:`~rnic.hdl.top.traffic.Signature32`). Core
    ports beyond ``s_axil`` and the four streams: inputs from an LFSR, outputs into the
    signature.

    Ports: ``rx``/``tx`` (UART pins), ``locked``, ``phy_up``, ``eth_rx_seen``
    (status bits for BRD_STATUS), ``activity``/``error`` (bridge pulses),
    ``traffic`` (BRD_GEN.ENABLE), ``signature_bit`` (for an LED), ``irq`` (the core's
    interrupt line, if it has one).

    Parameters: ``width``, ``connections`` (the core's), ``clk_freq`` (``sync`` in Hz, for
    the UART's bit timing and BRD_CLK), ``baud``, ``core`` (a factory ``core(width=,
    connections=)``, default :class:`~rnic.hdl.rnic_core.RnicCore`), ``frame_timeout``
    (the bridge's, in seconds; default the bridge's), ``passthrough`` (names of core ports
    this block leaves alone, for the design around it to connect: the NIC board top wires
    ``gmii_rx``/``gmii_tx`` to its PHY adapter), ``memory`` (octets of host memory behind
    the core's AXI4 masters, a power of 2; default 0: none, the masters see the LFSR and
    the signature). The core is :attr:`core` from construction on, the host memory
    :attr:`host_memory` (or None).
    """

    def __init__(self, *, width, connections, clk_freq, baud=115200, core=None,
                 frame_timeout=None, passthrough=(), memory=0):
        self.width = check_width(width)
        conn_bits(connections)          # validates
        self.connections = connections
        self.clk_freq = clk_freq
        self.baud = baud
        self.core_factory = core or RnicCore
        self.frame_timeout = frame_timeout
        self.core = self.core_factory(width=width, connections=connections)
        members = self.core.signature.members
        for name in passthrough:
            if name not in members:
                raise ValueError(f"passthrough port {name!r} is not a port of "
                                 f"{core_name(self.core_factory)}")
        self.passthrough = tuple(passthrough)
        self.host_memory = None
        if memory:
            if "m_axi" not in members or "m_axi_rd" not in members:
                raise ValueError(f"memory needs a core with AXI4 masters (m_axi, m_axi_rd); "
                                 f"{core_name(self.core_factory)} has none")
            self.host_memory = HostMemory(
                width=width, octets=memory, addr_width=len(self.core.m_axi.awaddr),
                reg_addr_width=HOST_MEMORY_BASE.bit_length() - 1)
        super().__init__({
            "rx": In(1, init=1), "tx": Out(1, init=1),
            "locked": In(1), "phy_up": In(1), "eth_rx_seen": In(1),
            "activity": Out(1), "error": Out(1), "traffic": Out(1), "signature_bit": Out(1),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        kw = {} if self.frame_timeout is None else {"frame_timeout": self.frame_timeout}
        hmem = self.host_memory
        bus_width = BRIDGE_ADDR_WIDTH[hmem is not None]
        m.submodules.bridge = bridge = UARTBridge(clk_freq=self.clk_freq, baud=self.baud,
                                                  addr_width=bus_width, **kw)
        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx),
                     self.activity.eq(bridge.activity), self.error.eq(bridge.error)]
        regs_bit = BOARD_BASE.bit_length() - 1
        m.submodules.split = split = AXI4LiteSplit(addr_width=regs_bit + 1, select_bit=regs_bit)
        if hmem is None:
            wiring.connect(m, bridge.m_axil, split.s_axil)
        else:
            m.submodules.mem_split = mem_split = AXI4LiteSplit(addr_width=bus_width,
                                                               select_bit=bus_width - 1)
            wiring.connect(m, bridge.m_axil, mem_split.s_axil)
            wiring.connect(m, mem_split.m0, split.s_axil)
            m.submodules.host_memory = hmem
            wiring.connect(m, mem_split.m1, hmem.s_axil)

        m.submodules.core = core = self.core
        # BRD_STATUS bit 3: a core with a receive side (RnicCore, the NIC) or the framer
        is_rnic = "rx_wire" in core.signature.members
        m.submodules.board_regs = bregs = BoardRegisters(clk_freq=self.clk_freq, rnic_core=is_rnic)
        wiring.connect(m, split.m0, core.s_axil)
        wiring.connect(m, split.m1, bregs.s_axil)

        errors = Signal(32)
        bridge_error = Signal()                 # registered (timing)
        m.d.sync += bridge_error.eq(bridge.error)
        with m.If(bridge_error):
            m.d.sync += errors.eq(errors + 1)
        m.d.comb += [bregs.errors.eq(errors), bregs.locked.eq(self.locked),
                     bregs.phy_up.eq(self.phy_up), bregs.eth_rx_seen.eq(self.eth_rx_seen),
                     self.traffic.eq(bregs.gen_enable)]

        # ---- traffic: source -> tx_ulpdu; tx_wire -> rx_wire; rx_ulpdu (or tx_wire) -> sink
        members = core.signature.members
        has = {name: name in members for name in STREAMS}
        sink_port = None
        if has["tx_ulpdu"]:
            m.submodules.source = source = UlpduSource(core.tx_ulpdu, width=self.width,
                                                       connections=self.connections)
            m.d.comb += [source.enable.eq(bregs.gen_enable),
                         source.conn_mask.eq(bregs.gen_conn_mask),
                         bregs.tx_beats.eq(source.beats)]
        if has["tx_wire"] and has["rx_wire"]:
            _connect_stream(m, core.tx_wire, core.rx_wire)
            sink_port = core.rx_ulpdu if has["rx_ulpdu"] else None
        elif has["tx_wire"]:
            sink_port = core.tx_wire
        elif has["rx_ulpdu"]:
            sink_port = core.rx_ulpdu

        handled = set(STREAMS) | {"s_axil"} | set(self.passthrough)
        if hmem is not None:
            wiring.connect(m, core.m_axi, hmem.w)
            wiring.connect(m, core.m_axi_rd, hmem.r)
            handled |= {"m_axi", "m_axi_rd"}
        if "irq" in members and members["irq"].flow == Out and members["irq"].is_port:
            m.d.comb += self.irq.eq(core.irq)
            handled.add("irq")
        extra_in, extra_out = [], []
        for path, flow, value in core_ports(core):
            if path[0] in handled:
                continue
            (extra_in if flow == In else extra_out).append(value)

        sink_bits = []
        rx_beats = Signal(32)
        if sink_port is not None:
            m.d.comb += sink_port.ready.eq(1)
            with m.If(sink_port.valid):
                m.d.sync += rx_beats.eq(rx_beats + 1)
            sink_bits.append(Value.cast(sink_port.payload))
        m.submodules.signature = sig = Signature32(sum(len(b) for b in sink_bits + extra_out) or 1)
        # the signature takes the core's outputs one cycle late, from registers (timing: its
        # fold would add LUT levels behind ports that may end a long path inside the core; a
        # real consumer registers them at its boundary too)
        if sink_bits or extra_out:
            m.d.sync += sig.data.eq(Cat(*sink_bits, *extra_out))
        m.d.sync += sig.en.eq(sink_port.valid if sink_port is not None else 1)
        m.d.comb += [bregs.rx_beats.eq(rx_beats), bregs.sig_value.eq(sig.value),
                     self.signature_bit.eq(sig.value[31])]
        if extra_in:
            m.submodules.extra_lfsr = lfsr = Lfsr(seed=0x0BAD_F00D)
            bits = Cat(*extra_in)
            m.d.comb += bits.eq(Cat(*([lfsr.value] * ((len(bits) + 31) // 32))))
        return m
