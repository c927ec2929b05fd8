"""Board top-levels for ECP5 boards: clocking, reset, UART register access, the RNIC core, PHY pins.

Pieces
------
:data:`BOARDS`
    The boards ``rnic build`` knows (amaranth-boards platforms) and which of
    their resources the top uses: ``versa_ecp5`` (Lattice ECP5 Versa,
    LFE5UM-45F-8, 100 MHz LVDS clock, two RGMII PHYs, FTDI UART),
    ``ecpix5`` (LambdaConcept ECPIX-5, LFE5UM5G-85F-8, 100 MHz clock, RGMII
    PHY, FTDI UART) and ``ecpix5_45`` (the LFE5UM5G-45F variant).
:func:`rnic.hdl.ecp5_pll.ecp5_pll`
    EHXPLLL divider search (like ``ecppll``): the core clock on CLKOP
    (feedback path), an optional second output (the 125 MHz RGMII clock) on
    CLKOS from the same VCO.
:class:`BoardTop`
    The design that goes on a board::

        board clock -> EHXPLLL -> sync (core clock, 125 MHz by default)
                               -> eth_tx (125 MHz, RGMII TX clock)
        reset button / PLL unlocked -> ResetSynchronizer per domain
        USB UART -> UARTBridge -> 0x0000-0x0FFF  the core's registers (s_axil)
                               -> 0x1000-0x1FFF  board registers (BoardRegisters)
        traffic source -> core.tx_ulpdu ; core.tx_wire -> core.rx_wire (loopback)
                       ; core.rx_ulpdu -> sink (beat counter, signature)
        RGMII PHY: reset held 20 ms after the core's reset, then released;
                   TX clock 125 MHz (ODDR), TX idle; RX clock -> eth_rx domain
        LEDs: heartbeat, running, UART activity, bridge error, RX clock, PHY up,
              traffic source on, core interrupt

    Until a MAC/TCP engine exists, the core's wire side is looped back
    (TX octet stream into RX) and its ULPDU side is fed by a pseudo-random
    ULPDU source and drained into a signature register, so that the whole
    data path is exercised on the board and nothing is optimised away. Core
    ports other than ``s_axil`` and the four streams are driven from an LFSR
    (inputs) and folded into the signature (outputs).
:class:`CoreHarness`
    The core alone for benchmarks (``rnic build --sweep``): every input bit
    comes from a flip-flop of a serial scan chain (one pin), every output bit
    goes through a flip-flop into a 32-bit signature register (one pin), so
    placement and timing see the core between registers, with nothing
    constant and nothing unused.
:class:`FramerCore`
    The register bank plus the MPA TX framer behind RnicCore's ports ``s_axil``,
    ``tx_ulpdu`` and ``tx_wire``: a small core whose bitstream builds in minutes
    (``rnic build --core framer``; the build flow's test).

Board registers (32 bit, at 0x1000 + offset, through the UART bridge)
---------------------------------------------------------------------
=======  ==============  ==  ===========================================================
offset   name            rw  content
=======  ==============  ==  ===========================================================
0x00     BRD_ID          ro  0x42524430 ("BRD0")
0x04     BRD_CLK         ro  core clock frequency in Hz (as built)
0x08     BRD_STATUS      ro  bit 0 PLL locked, 1 PHY out of reset, 2 RGMII RX clock seen
                             in the last ~1 ms, 3 the core is RnicCore (0: FramerCore)
0x0C     BRD_GEN         rw  bit 0 traffic source on; bits 31..16 connection mask
                             (the source's connection ids are LFSR & mask)
0x10     BRD_TX_BEATS    ro  beats the core accepted from the traffic source
0x14     BRD_RX_BEATS    ro  beats the sink took from the core (rx_ulpdu, or tx_wire)
0x18     BRD_SIGNATURE   ro  signature (MISR) of everything the sink took
0x1C     BRD_ERRORS      ro  UART bridge error pulses (dropped octets/frames, timeouts)
=======  ==============  ==  ===========================================================

Other addresses in the window answer SLVERR; writes to read-only ones are ignored.
"""

from __future__ import annotations

import dataclasses
import importlib
import math

from amaranth.hdl import Array, Cat, ClockDomain, Const, Elaboratable, Module, \
    Mux, Signal, Value
from amaranth.lib import io, stream, wiring
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import REGMAP

from .beat import OctetBeat, conn_bits
from .mpa_tx import MpaTxBeat, MpaTxFramer
from .ecp5_pll import ECP5PLL, ecp5_pll
from .axi import RESP_OKAY, RESP_SLVERR, AXI4LiteSignature
from .regbank import RegisterBank
from .rnic_core import RnicCore
from .uart_bridge import UARTBridge

__all__ = [
    "Board", "BOARDS", "BoardTop", "CoreHarness", "FramerCore",
    "core_name", "toggle_seen", "uart_buffers", "BoardLogic", "BoardRegisters", "AXI4LiteSplit", "UlpduSource", "Signature32",
    "BOARD_ID", "BOARD_BASE",
]

BOARD_ID = 0x42524430          # "BRD0"
BOARD_BASE = 0x1000


# -- boards ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Board:
    """What the top needs to know about one amaranth-boards platform."""
    name: str
    platform: str                  # "module:Class"
    title: str
    clock: str                     # input clock resource (its Clock() gives the frequency)
    reset: str | None              # reset button resource (active-high after the board's inversion)
    uart: tuple = ("uart", 0)
    eth: tuple | None = ("eth_rgmii", 0)
    leds: tuple = ()               # ((resource, number, subsignal or None), ...) in LED_FUNCTIONS order
    constraints: str | None = None  # file under constraints/ appended to the LPF

    def platform_class(self):
        module, _, cls = self.platform.partition(":")
        return getattr(importlib.import_module(module), cls)

    def make_platform(self):
        return self.platform_class()()


#: What each LED shows, in order (a board with fewer LEDs shows the first ones).
LED_FUNCTIONS = ("heartbeat", "running", "uart", "bridge_error", "eth_rx_clock", "phy_up",
                 "traffic", "irq")

_ECPIX5_LEDS = (("rgb_led", 0, "g"), ("rgb_led", 1, "g"), ("rgb_led", 2, "b"), ("rgb_led", 0, "r"),
                ("rgb_led", 3, "g"), ("rgb_led", 3, "b"), ("rgb_led", 2, "g"), ("rgb_led", 1, "b"))

BOARDS = {
    "versa_ecp5": Board(
        "versa_ecp5", "amaranth_boards.versa_ecp5:VersaECP5Platform",
        "Lattice ECP5 Versa (LFE5UM-45F-8BG381)", clock="clk100", reset="rst",
        leds=tuple(("led", i, None) for i in range(8)), constraints="versa_ecp5.lpf"),
    "ecpix5": Board(
        "ecpix5", "amaranth_boards.ecpix5:ECPIX585Platform",
        "LambdaConcept ECPIX-5 (LFE5UM5G-85F-8BG554)", clock="clk100", reset="rst",
        leds=_ECPIX5_LEDS, constraints="ecpix5.lpf"),
    "ecpix5_45": Board(
        "ecpix5_45", "amaranth_boards.ecpix5:ECPIX545Platform",
        "LambdaConcept ECPIX-5 (LFE5UM5G-45F-8BG554)", clock="clk100", reset="rst",
        leds=_ECPIX5_LEDS, constraints="ecpix5.lpf"),
}


# -- a small core, for the build flow ---------------------------------------------------------

class FramerCore(wiring.Component):
    """Register bank + MPA TX framer behind RnicCore's ports (TX side only): a small core
    whose bitstream builds in minutes (``rnic build --core framer``).

    Ports: ``s_axil`` (as :class:`~rnic.hdl.regbank.RegisterBank`), ``tx_ulpdu``
    (In, :class:`~rnic.hdl.mpa_tx.MpaTxBeat`), ``tx_wire`` (Out,
    :class:`~rnic.hdl.beat.OctetBeat`). CTX_CMD.COMMIT loads CTX_TX of the
    connection in CONN_SEL into the framer (CTX_STATUS.BUSY until the framer
    took it); CTRL.ENABLE gates ``tx_ulpdu``; TX_FPDUS and TX_OCTETS count;
    SOFT_RESET and CLEAR_COUNTERS zero the counters; STATUS.READY is 1.
    """

    def __init__(self, *, width, connections):
        self.width = width
        self.connections = connections
        self._bank = RegisterBank(width=width, connections=connections)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=REGMAP.addr_width)),
            "tx_ulpdu": In(stream.Signature(MpaTxBeat(width=width, connections=connections))),
            "tx_wire": Out(stream.Signature(OctetBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = bank = self._bank
        m.submodules.framer = framer = MpaTxFramer(width=self.width, connections=self.connections)
        wiring.connect(m, wiring.flipped(self.s_axil), bank.s_axil)
        r = bank.regs

        cfg = framer.cfg
        with m.If(cfg.ready):
            m.d.sync += cfg.valid.eq(0)
        with m.If(r.ctx_cmd.commit):
            m.d.sync += [
                cfg.valid.eq(1),
                cfg.payload.conn.eq(r.conn_sel.conn),
                cfg.payload.markers.eq(r.ctx_tx.markers),
                cfg.payload.crc.eq(r.ctx_tx.crc),
                cfg.payload.phase.eq(r.ctx_tx.phase),
                cfg.payload.mulpdu.eq(r.ctx_tx.mulpdu),
            ]
        enable = r.ctrl.enable
        m.d.comb += [
            framer.i.payload.eq(self.tx_ulpdu.payload),
            framer.i.valid.eq(self.tx_ulpdu.valid & enable),
            self.tx_ulpdu.ready.eq(framer.i.ready & enable),
            self.tx_wire.payload.eq(framer.o.payload),
            self.tx_wire.valid.eq(framer.o.valid),
            framer.o.ready.eq(self.tx_wire.ready),
            r.status.ready.eq(1),
            r.ctx_status.busy.eq(cfg.valid),
        ]
        fpdus = Signal(32)
        octets = Signal(64)
        with m.If(r.ctrl.soft_reset | r.ctrl.clear_counters):
            m.d.sync += [fpdus.eq(0), octets.eq(0)]
        with m.Else():
            with m.If(framer.i.valid & framer.i.ready & framer.i.payload.last):
                m.d.sync += fpdus.eq(fpdus + 1)
            with m.If(framer.o.valid & framer.o.ready):
                m.d.sync += octets.eq(octets + framer.o.payload.n)
        m.d.comb += [
            r.tx_fpdus.count.eq(fpdus),
            r.tx_octets_lo.count.eq(octets[:32]),
            r.tx_octets_hi.count.eq(octets[32:]),
        ]
        return m


def _block(name):
    """A factory for one block of :class:`~rnic.hdl.rnic_core.RnicCore` alone, with the parameters
    the core gives it, for ``rnic build --top core --core <block>`` (its fmax and size)."""
    def make(*, width, connections):
        if name == "ddp_rx":
            from .ddp_rx import DdpRx
            return DdpRx(width=width, connections=connections, stags=256, slots=4,
                         slot_bytes=2048, rq_depth=8, addr_width=32)
        if name == "ddp_tx":
            from .ddp_tx import DdpTx
            return DdpTx(width=width, connections=connections, sq_depth=8, rrq_depth=4,
                         ord_depth=4, stags=256, addr_width=32)
        if name == "mpa_rx":
            from .mpa_rx import MpaRxDeframer
            return MpaRxDeframer(width=width, connections=connections)
        from .mpa_tx import MpaTxFramer
        return MpaTxFramer(width=width, connections=connections)
    make.__name__ = {"ddp_rx": "DdpRx", "ddp_tx": "DdpTx", "mpa_rx": "MpaRxDeframer",
                     "mpa_tx": "MpaTxFramer"}[name]
    return make


#: Blocks of the core that ``--top core`` builds alone.
BLOCKS = ("ddp_rx", "ddp_tx", "mpa_rx", "mpa_tx")


def core_name(factory):
    return getattr(factory, "__name__", str(factory))


# -- small building blocks --------------------------------------------------------------

class Lfsr(Elaboratable):
    """32-bit Galois LFSR (x^32 + x^22 + x^2 + x + 1), stepping every cycle ``en`` is high."""

    TAPS = 0x80200003

    def __init__(self, seed=0xACE1_2468):
        self.seed = seed
        self.en = Signal(init=1)
        self.value = Signal(32, init=seed)

    def elaborate(self, platform):
        m = Module()
        v = self.value
        with m.If(self.en):
            m.d.sync += v.eq(Mux(v[0], (v >> 1) ^ self.TAPS, v >> 1))
        return m


def _fold(value, width=32):
    """XOR of the ``width``-bit slices of ``value`` (zero-padded)."""
    value = Value.cast(value)
    out = Const(0, width)
    for i in range(0, len(value), width):
        chunk = value[i:i + width]
        out = out ^ chunk
    return out


class Signature32(Elaboratable):
    """32-bit multiple-input signature register: ``sig <= rotl(sig, 1) ^ fold(data)`` when ``en``."""

    def __init__(self, width):
        self.data = Signal(width)
        self.en = Signal()
        self.value = Signal(32)

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.value.eq(Cat(self.value[31], self.value[:31]) ^ _fold(self.data))
        return m


class UlpduSource(Elaboratable):
    """Pseudo-random ULPDUs for a ``tx_ulpdu`` stream of any layout with the usual fields.

    Drives, when the layout has them: ``data`` (LFSR words; each ULPDU starts
    with the octets 0x41 0x43, a DDP untagged/last control octet and an RDMAP
    Send, so that a receiver checking the DDP header length accepts it),
    ``n``, ``first``, ``last``, ``conn`` (LFSR & ``conn_mask``, below
    ``connections``), ``length`` (18..1041 octets, on every beat of the
    ULPDU); other fields are 0. A ULPDU, once started, is finished even if
    ``enable`` drops; ``enable`` acts a cycle late. The output is registered.
    """

    MIN_LENGTH = 18              # an untagged DDP header
    DDP_CONTROL = 0x41
    RDMAP_CONTROL = 0x43

    def __init__(self, stream_port, *, width, connections):
        self.port = stream_port
        self.width = width
        self.connections = connections
        self.enable = Signal()
        self.conn_mask = Signal(16, init=0xFFFF)
        self.beats = Signal(32)

    def elaborate(self, platform):
        m = Module()
        m.submodules.lfsr = lfsr = Lfsr(seed=0x1234_5678)
        m.d.comb += lfsr.en.eq(0)
        W = self.width
        port = self.port
        layout = port.payload.shape()
        fields = dict(layout) if hasattr(layout, "__iter__") else {}

        left = Signal(16)                   # octets left in the current ULPDU (0: between ULPDUs)
        length = Signal(16)
        conn = Signal(conn_bits(self.connections))
        busy = Signal()
        # the next ULPDU's length and whether it is more than one beat, registered from the
        # LFSR every cycle (timing: no adder and compare in front of the beat logic); a
        # length may so come from the LFSR's value of the cycle before, which is as random
        lfsr_len = Signal(16)
        m.d.comb += lfsr_len.eq(lfsr.value[4:14] + self.MIN_LENGTH)
        new_len = Signal(16)
        new_multi = Signal()
        m.d.sync += [new_len.eq(lfsr_len), new_multi.eq(lfsr_len > W)]
        left_multi = Signal()               # left > W
        new_conn = Signal.like(conn)
        raw = lfsr.value[16:16 + len(conn)] & self.conn_mask[:len(conn)]
        if self.connections & (self.connections - 1):
            m.d.comb += new_conn.eq(Mux(raw < self.connections, raw, raw - self.connections))
        else:
            m.d.comb += new_conn.eq(raw)

        cur_len = Mux(busy, length, new_len)
        cur_left = Mux(busy, left, new_len)
        cur_multi = Mux(busy, left_multi, new_multi)
        n = Mux(cur_multi, W, cur_left)
        words = Cat(*[lfsr.value ^ (0x9E3779B9 * (i + 1) & 0xFFFFFFFF)
                      for i in range((8 * W + 31) // 32)])
        # a ULPDU starts like a DDP segment: untagged + last, DV 1; RDMAP Send
        header = Cat(Const(self.DDP_CONTROL, 8), Const(self.RDMAP_CONTROL, 8), words[16:8 * W])
        values = {
            "data": Mux(busy, words[:8 * W], header),
            "n": n,
            "first": ~busy,
            "last": ~cur_multi,
            "conn": Mux(busy, conn, new_conn),
            "length": cur_len,
        }
        # generated beat -> output register (so that nothing combinational reaches the core)
        gen = Signal(layout)
        for name in fields:
            m.d.comb += getattr(gen, name).eq(values.get(name, 0))
        out_valid = Signal()
        out_payload = Signal(layout)
        m.d.comb += [port.valid.eq(out_valid), port.payload.eq(out_payload)]
        # the enable comes from the register bank across the die: registered here first
        # (timing: it gates the clock enables of every register below)
        enable = Signal()
        m.d.sync += enable.eq(self.enable)
        gen_valid = busy | enable
        load = ~out_valid | port.ready
        with m.If(port.valid & port.ready):
            m.d.sync += self.beats.eq(self.beats + 1)
        with m.If(load):
            m.d.sync += [out_valid.eq(gen_valid), out_payload.eq(gen)]
        with m.If(load & gen_valid):
            m.d.comb += lfsr.en.eq(1)
            with m.If(~cur_multi):
                m.d.sync += busy.eq(0)
            with m.Else():
                m.d.sync += [busy.eq(1), left.eq(cur_left - W), left_multi.eq(cur_left > 2 * W),
                             length.eq(cur_len), conn.eq(Mux(busy, conn, new_conn))]
        return m


class AXI4LiteSplit(wiring.Component):
    """One AXI4-Lite master to two slaves by address bit ``select_bit``, through registers.

    ``s_axil`` (In, ``addr_width`` bits) -> ``m0`` (bit clear) / ``m1`` (bit
    set), each with ``select_bit`` address bits. One transaction per channel
    at a time (the UART bridge issues one at a time anyway). Every output is
    a flip-flop (timing: on a board the bridge, the core's register bank and
    the board registers are far apart): a request is latched at its handshake
    with ``s_axil`` and offered to its slave from the next cycle; the slave's
    response is latched and offered to the master from the cycle after.
    Latency: 2 cycles more than the slave's on each channel. A write's
    address and data are taken together (``awready`` = ``wready``).
    """

    def __init__(self, *, addr_width, select_bit):
        self.select_bit = select_bit
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=addr_width)),
            "m0": Out(AXI4LiteSignature(addr_width=select_bit)),
            "m1": Out(AXI4LiteSignature(addr_width=select_bit)),
        })

    def elaborate(self, platform):
        m = Module()
        s, sb = self.s_axil, self.select_bit
        ms = (self.m0, self.m1)

        # write: IDLE (take AW+W) -> REQ (offer to the slave until both are taken) -> RESP
        # (wait for B) -> the response on s until taken
        w_busy, w_sel, aw_left, w_left, b_wait = (Signal(name=n) for n in
                                                   ("w_busy", "w_sel", "aw_left", "w_left", "b_wait"))
        m.d.comb += [s.awready.eq(~w_busy & s.wvalid), s.wready.eq(~w_busy & s.awvalid)]
        with m.If(~w_busy & s.awvalid & s.wvalid):
            m.d.sync += [w_busy.eq(1), w_sel.eq(s.awaddr[sb]), aw_left.eq(1), w_left.eq(1),
                         b_wait.eq(1)]
            for mi in ms:
                m.d.sync += [mi.awaddr.eq(s.awaddr[:sb]), mi.awprot.eq(s.awprot),
                             mi.wdata.eq(s.wdata), mi.wstrb.eq(s.wstrb)]
        for k, mi in enumerate(ms):
            mine = w_sel == k
            m.d.comb += [mi.awvalid.eq(aw_left & mine), mi.wvalid.eq(w_left & mine),
                         mi.bready.eq(b_wait & mine)]
            with m.If(mine):
                with m.If(mi.awready):
                    m.d.sync += aw_left.eq(0)
                with m.If(mi.wready):
                    m.d.sync += w_left.eq(0)
                with m.If(b_wait & mi.bvalid):
                    m.d.sync += [b_wait.eq(0), s.bvalid.eq(1), s.bresp.eq(mi.bresp)]
        with m.If(s.bvalid & s.bready):
            m.d.sync += [s.bvalid.eq(0), w_busy.eq(0)]

        # read: the same with AR and R
        r_busy, r_sel, ar_left, r_wait = (Signal(name=n) for n in ("r_busy", "r_sel", "ar_left", "r_wait"))
        m.d.comb += s.arready.eq(~r_busy)
        with m.If(~r_busy & s.arvalid):
            m.d.sync += [r_busy.eq(1), r_sel.eq(s.araddr[sb]), ar_left.eq(1), r_wait.eq(1)]
            for mi in ms:
                m.d.sync += [mi.araddr.eq(s.araddr[:sb]), mi.arprot.eq(s.arprot)]
        for k, mi in enumerate(ms):
            mine = r_sel == k
            m.d.comb += [mi.arvalid.eq(ar_left & mine), mi.rready.eq(r_wait & mine)]
            with m.If(mine):
                with m.If(mi.arready):
                    m.d.sync += ar_left.eq(0)
                with m.If(r_wait & mi.rvalid):
                    m.d.sync += [r_wait.eq(0), s.rvalid.eq(1), s.rdata.eq(mi.rdata),
                                 s.rresp.eq(mi.rresp)]
        with m.If(s.rvalid & s.rready):
            m.d.sync += [s.rvalid.eq(0), r_busy.eq(0)]
        return m


class BoardRegisters(wiring.Component):
    """The board registers (see the module documentation) as an AXI4-Lite slave (12 address bits)."""

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


def _ports(core):
    """``[(path, flow, value)]`` of a component's ports, flattened to signals."""
    out = []
    for path, member, value in core.signature.flatten(core):
        out.append((path, member.flow, value))
    return out


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
    """The platform-independent part of :class:`BoardTop` (simulated in the tests).

    UART bridge (13 address bits) -> :class:`AXI4LiteSplit` -> the core's
    ``s_axil`` (0x0000-0x0FFF) and :class:`BoardRegisters` (0x1000-0x1FFF);
    :class:`UlpduSource` -> ``core.tx_ulpdu``; ``core.tx_wire`` ->
    ``core.rx_wire`` (loopback); ``core.rx_ulpdu`` (or ``tx_wire`` when the
    core has no RX side) -> sink (beat counter, :class:`Signature32`). Core
    ports beyond ``s_axil`` and the four streams: inputs from an LFSR,
    outputs into the signature.

    Ports: ``rx``/``tx`` (UART pins), ``locked``, ``phy_up``, ``eth_rx_seen``
    (status bits for BRD_STATUS), ``activity``/``error`` (bridge pulses),
    ``traffic`` (BRD_GEN.ENABLE), ``signature_bit`` (for an LED), ``irq`` (the core's
    interrupt line, if it has one).

    ``passthrough`` names core ports this block leaves alone, for the design around it
    to connect (the NIC board top wires ``gmii_rx``/``gmii_tx`` to its PHY adapter);
    the core is :attr:`core` from construction on.
    """

    def __init__(self, *, width, connections, clk_freq, baud=115200, core=None,
                 frame_timeout=None, passthrough=()):
        self.width = width
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
        super().__init__({
            "rx": In(1, init=1), "tx": Out(1, init=1),
            "locked": In(1), "phy_up": In(1), "eth_rx_seen": In(1),
            "activity": Out(1), "error": Out(1), "traffic": Out(1), "signature_bit": Out(1),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        kw = {} if self.frame_timeout is None else {"frame_timeout": self.frame_timeout}
        m.submodules.bridge = bridge = UARTBridge(clk_freq=self.clk_freq, baud=self.baud,
                                                  addr_width=13, **kw)
        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx),
                     self.activity.eq(bridge.activity), self.error.eq(bridge.error)]
        m.submodules.split = split = AXI4LiteSplit(addr_width=13, select_bit=12)
        wiring.connect(m, bridge.m_axil, split.s_axil)

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
        if "irq" in members and members["irq"].flow == Out and members["irq"].is_port:
            m.d.comb += self.irq.eq(core.irq)
            handled.add("irq")
        extra_in, extra_out = [], []
        for path, flow, value in _ports(core):
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


# -- the board top -----------------------------------------------------------------------

class BoardTop(Elaboratable):
    """Everything that goes on a board (see the module documentation).

    Parameters
    ----------
    board : Board
        An entry of :data:`BOARDS`.
    width, connections : int
        The core's build parameters.
    freq : float
        Core clock in Hz (default 125 MHz).
    baud : int
        UART line rate (default 115200).
    core : callable
        ``core(width=, connections=)`` returning the core component (default
        :class:`~rnic.hdl.rnic_core.RnicCore`).
    eth : bool
        Drive the RGMII PHY pins (default: if the board has a PHY).
    """

    ETH_FREQ = 125e6

    def __init__(self, board, *, width=8, connections=16, freq=125e6, baud=115200, core=None,
                 eth=None):
        self.board = board
        self.width = width
        self.connections = connections
        self.freq = freq
        self.baud = baud
        self.core_factory = core or RnicCore
        self.eth = (board.eth is not None) if eth is None else eth
        self.pll = None                     # PllConfig, after elaboration
        self.domains = ("sync", "eth_tx", "eth_rx") if self.eth else ("sync",)

    def elaborate(self, platform):
        m = Module()
        board = self.board

        # ---- clocks and resets
        clk_res = platform.lookup(board.clock, 0)
        f_in = clk_res.clock.frequency
        clk_io = platform.request(board.clock, 0, dir="-")
        m.submodules.clk_buf = clk_buf = io.Buffer("i", clk_io)
        self.pll = cfg = ecp5_pll(f_in, self.freq, self.ETH_FREQ if self.eth else None)
        m.submodules.pll = pll = ECP5PLL(cfg, aux_domain="eth_tx" if self.eth else None)
        m.d.comb += pll.clk_in.eq(clk_buf.i)

        rst_in = Const(0)
        if board.reset is not None:
            m.submodules.rst_buf = rst_buf = io.Buffer("i", platform.request(board.reset, 0, dir="-"))
            rst_in = rst_buf.i

        m.domains.sync = cd_sync = ClockDomain("sync")
        m.d.comb += cd_sync.clk.eq(pll.clk_out)
        # no add_clock_constraint here: nextpnr derives the PLL outputs' constraints from the
        # board clock's ("Derived frequency constraint"); a FREQUENCY NET on an Amaranth
        # name may not match the net name Yosys keeps.
        m.submodules.sync_reset = ResetSynchronizer(~pll.locked | rst_in, domain="sync")

        # ---- UART bridge, core, board registers, traffic
        m.submodules.logic = logic = BoardLogic(
            width=self.width, connections=self.connections, clk_freq=cfg.f_out, baud=self.baud,
            core=self.core_factory)
        uart_rx, uart_tx = uart_buffers(m, platform, board)
        m.d.comb += [logic.rx.eq(uart_rx.i), uart_tx.o.eq(logic.tx), logic.locked.eq(pll.locked)]

        # ---- Ethernet PHY pins
        phy_up = Signal()
        eth_rx_seen = Signal()
        eth_rx_led = Signal()
        if self.eth and board.eth is not None:
            m.domains.eth_tx = cd_eth_tx = ClockDomain("eth_tx")
            m.d.comb += cd_eth_tx.clk.eq(pll.clk_aux)
            m.submodules.eth_tx_reset = ResetSynchronizer(~pll.locked | rst_in, domain="eth_tx")

            eth_pins = platform.request(*board.eth, dir="-")
            eth = _EthBuffers()
            for sub, direction in (("rst", "o"), ("mdc", "o"), ("mdio", "io"), ("tx_ctl", "o"),
                                   ("tx_data", "o"), ("rx_clk", "i"), ("rx_ctl", "i"),
                                   ("rx_data", "i")):
                port = getattr(eth_pins, sub, None)
                if port is None:          # some boards spell them tx_ctrl / rx_ctrl
                    port = getattr(eth_pins, sub.replace("_ctl", "_ctrl"))
                buf = io.Buffer(direction, port)
                m.submodules[f"eth_{sub}"] = buf
                setattr(eth, sub, buf)
            m.submodules.eth_tx_clk = txc = io.DDRBuffer("o", eth_pins.tx_clk, o_domain="eth_tx")
            m.d.comb += [txc.o[0].eq(1), txc.o[1].eq(0),       # 125 MHz clock (no skew yet)
                         eth.tx_ctl.o.eq(0), eth.tx_data.o.eq(0),  # idle: no frames
                         eth.mdc.o.eq(0), eth.mdio.oe.eq(0), eth.mdio.o.eq(0)]
            # PHY reset: held for 20 ms after the core leaves reset
            hold = Signal(range(int(cfg.f_out * 0.02) + 2))
            with m.If(~phy_up):
                m.d.sync += hold.eq(hold + 1)
                with m.If(hold == int(cfg.f_out * 0.02)):
                    m.d.sync += phy_up.eq(1)
            m.d.comb += eth.rst.o.eq(~phy_up)

            # RX clock from the PHY: its own domain, a counter, a "seen" flag in sync
            m.domains.eth_rx = cd_eth_rx = ClockDomain("eth_rx", reset_less=True)
            m.d.comb += cd_eth_rx.clk.eq(eth.rx_clk.i)
            # its 125 MHz constraint is in constraints/<board>.lpf (FREQUENCY PORT)
            rx_count = Signal(24)
            m.d.eth_rx += rx_count.eq(rx_count + 1)
            rx_toggle = Signal()
            m.submodules.rx_seen_sync = FFSynchronizer(rx_count[10], rx_toggle)
            m.d.comb += [eth_rx_seen.eq(toggle_seen(m, rx_toggle, int(cfg.f_out * 1e-3))),
                         eth_rx_led.eq(rx_count[23])]
        m.d.comb += [logic.phy_up.eq(phy_up), logic.eth_rx_seen.eq(eth_rx_seen)]

        # ---- LEDs
        heartbeat = Signal(max(1, math.ceil(math.log2(cfg.f_out))))
        m.d.sync += heartbeat.eq(heartbeat + 1)

        def stretch(pulse, seconds):
            # the pulse is registered first: it comes combinationally from the UART bridge,
            # which the placer may put far from the LED logic (timing)
            pulse_q = Signal()
            m.d.sync += pulse_q.eq(pulse)
            timer = Signal(range(int(cfg.f_out * seconds) + 2))
            with m.If(pulse_q):
                m.d.sync += timer.eq(int(cfg.f_out * seconds))
            with m.Elif(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            return timer != 0

        running = Signal()
        m.d.sync += running.eq(1)          # 1 once the sync domain is out of reset
        functions = {
            "heartbeat": heartbeat[-1],
            "running": running,
            "uart": stretch(logic.activity, 0.05),
            "bridge_error": stretch(logic.error, 0.5),
            "eth_rx_clock": eth_rx_led,
            "phy_up": phy_up,
            "traffic": logic.traffic,
            "irq": logic.irq,
        }
        requested = {}
        for i, ((res, num, sub), function) in enumerate(zip(board.leds, LED_FUNCTIONS)):
            if (res, num) not in requested:
                requested[(res, num)] = platform.request(res, num, dir="-")
            port = requested[(res, num)]
            if sub is not None:
                port = getattr(port, sub)
            m.submodules[f"led_{i}"] = led = io.Buffer("o", port)
            # registered: an LED pin is far from most of the logic that drives it
            m.d.sync += led.o.eq(functions[function])
        return m


def toggle_seen(m, toggle, cycles):
    """1 while ``toggle`` (a bit synchronized into ``sync`` from a counter of another
    clock) changed in the last ``cycles`` cycles: that clock runs."""
    last = Signal()
    seen = Signal()
    timer = Signal(range(cycles + 2))
    m.d.sync += last.eq(toggle)
    with m.If(last != toggle):
        m.d.sync += [timer.eq(cycles), seen.eq(1)]
    with m.Elif(timer != 0):
        m.d.sync += timer.eq(timer - 1)
    with m.Else():
        m.d.sync += seen.eq(0)
    return seen


class _EthBuffers:
    """The RGMII pins' I/O buffers, by subsignal name."""


def uart_buffers(m, platform, board):
    """The UART's rx and tx pins through input and output buffers."""
    uart = platform.request(*board.uart, dir="-")
    m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
    m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
    return rx, tx


# -- the core alone, for benchmarks --------------------------------------------------------

class CoreHarness(Elaboratable):
    """The core between registers on a board, for fmax and resource figures (``rnic build --sweep``).

    Every input bit of the core is a flip-flop of one scan chain fed from a
    pin; every output bit is registered and folded into a 32-bit signature
    register whose top bit drives a pin. Clock: the board clock through an
    EHXPLLL at ``freq``. The harness costs one flip-flop per core port bit
    plus 32 (reported as :attr:`harness_ffs` after elaboration) and a few
    LUTs per 32 output bits for the fold.
    """

    def __init__(self, board, *, width=8, connections=16, freq=125e6, core=None):
        self.board = board
        self.width = width
        self.connections = connections
        self.freq = freq
        self.core_factory = core or RnicCore
        self.harness_ffs = None
        self.pll = None
        self.domains = ("sync",)

    def elaborate(self, platform):
        m = Module()
        board = self.board
        f_in = platform.lookup(board.clock, 0).clock.frequency
        clk_io = platform.request(board.clock, 0, dir="-")
        m.submodules.clk_buf = clk_buf = io.Buffer("i", clk_io)
        self.pll = cfg = ecp5_pll(f_in, self.freq)
        m.submodules.pll = pll = ECP5PLL(cfg)
        m.d.comb += pll.clk_in.eq(clk_buf.i)
        m.domains.sync = cd_sync = ClockDomain("sync")
        m.d.comb += cd_sync.clk.eq(pll.clk_out)
        # no add_clock_constraint here: nextpnr derives the PLL outputs' constraints from the
        # board clock's ("Derived frequency constraint"); a FREQUENCY NET on an Amaranth
        # name may not match the net name Yosys keeps.
        m.submodules.sync_reset = ResetSynchronizer(~pll.locked, domain="sync")

        core = self.core_factory(width=self.width, connections=self.connections)
        m.submodules.core = core
        ins, outs = [], []
        for _, flow, value in _ports(core):
            (ins if flow == In else outs).append(value)
        in_bits = Cat(*ins)
        out_bits = Cat(*outs)

        # scan-in and signature-out: the UART's pins (every board has them)
        uart_rx, uart_tx = uart_buffers(m, platform, board)

        scan = Signal(len(in_bits))
        m.d.sync += scan.eq(Cat(uart_rx.i, scan[:-1]))
        m.d.comb += in_bits.eq(scan)
        out_reg = Signal(len(out_bits))
        m.d.sync += out_reg.eq(out_bits)
        m.submodules.signature = sig = Signature32(len(out_bits))
        m.d.comb += [sig.data.eq(out_reg), sig.en.eq(1), uart_tx.o.eq(sig.value[31])]
        self.harness_ffs = len(in_bits) + len(out_bits) + 32
        self.in_bits, self.out_bits = len(in_bits), len(out_bits)
        return m
