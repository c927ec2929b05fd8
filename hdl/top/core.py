"""The core on a board (``rnic build --top core``): the RNIC core (or another core) with its
registers over the UART and a traffic loopback, no network. See :class:`CoreBoardTop`."""

from amaranth.hdl import Const, Elaboratable, Module, Signal

from rnic.host.spec.limits import check_width

from ..beat import conn_bits
from ..rnic_core import RnicCore
from .board_logic import BoardLogic
from .rgmii_board import (
    board_clocks, drive_leds, eth_rx_domain, heartbeat, rgmii_adapters, rgmii_port, stretch,
    toggle_seen, uart_buffers,
)

__all__ = ["CoreBoardTop"]


class CoreBoardTop(Elaboratable):
    """A core on an ECP5 board, its data path exercised by a traffic loopback::

        board clock -> EHXPLLL -> sync (core clock, 125 MHz by default)
                               -> eth_tx (125 MHz, RGMII TX clock)
        reset button / PLL unlocked -> ResetSynchronizer per domain
        USB UART -> UARTBridge -> 0x0000-0x0FFF  the core's registers (s_axil)
                               -> 0x1000-0x1FFF  board registers (BRD_*)
        traffic source -> core.tx_ulpdu ; core.tx_wire -> core.rx_wire (loopback)
                       ; core.rx_ulpdu -> sink (beat counter, signature)
        RGMII PHY: reset held 20 ms after the core's reset, then released;
                   TX clock 125 MHz (delayed as the board needs), TX idle;
                   RX clock -> eth_rx domain

    TCP is not in this top: the core's wire side is looped back (TX octet stream into RX)
    and its ULPDU side is fed by a pseudo-random ULPDU source and drained into a signature
    register, so that the whole data path is exercised on the board and nothing is
    optimised away; core ports other than ``s_axil`` and the four streams are driven from
    an LFSR (inputs) and folded into the signature (outputs). All of that is
    :class:`~rnic.hdl.top.board_logic.BoardLogic`, whose module documents the BRD_*
    registers. Clocks, PHY reset and pins are those of
    :class:`~rnic.hdl.top.rgmii_board.RgmiiBoard` (:mod:`rnic.hdl.top.rgmii_board`); the
    PHY's transmit side idles (the GMII input of its
    :class:`~rnic.hdl.net.rgmii.RgmiiTx` is held low) and only its clocks run.

    LEDs, in order: :attr:`LED_FUNCTIONS` (``uart`` lights for 50 ms per bridge transfer,
    ``bridge_error`` for 0.5 s per error).

    Parameters
    ----------
    board : rnic.hdl.top.boards.Board
        An entry of :data:`~rnic.hdl.top.boards.BOARDS`.
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
        Drive the RGMII PHY pins (default: if the board has a PHY). Without them the top
        has the ``sync`` domain only and BRD_STATUS reads the PHY down.
    """

    #: What the LEDs show, in order (a board with fewer LEDs shows the first ones).
    LED_FUNCTIONS = ("heartbeat", "running", "uart", "bridge_error", "eth_rx_clock", "phy_up",
                     "traffic", "irq")

    def __init__(self, board, *, width=8, connections=16, freq=125e6, baud=115200, core=None,
                 eth=None):
        self.board = board
        self.width = check_width(width)
        conn_bits(connections)          # validates
        self.connections = connections
        self.freq = freq
        self.baud = baud
        self.core_factory = core or RnicCore
        if eth and board.eth is None:
            raise ValueError(f"board {board.name!r} has no RGMII port")
        self.eth = (board.eth is not None) if eth is None else bool(eth)
        self.pll = None                     # PllConfig, after elaboration
        self.domains = ("sync", "eth_tx", "eth_rx") if self.eth else ("sync",)

    def elaborate(self, platform):
        m = Module()
        self.pll, locked, rst_in = board_clocks(m, platform, self.board, self.freq,
                                                eth_tx=self.eth)
        f_sync = self.pll.f_out

        m.submodules.logic = logic = BoardLogic(
            width=self.width, connections=self.connections, clk_freq=f_sync, baud=self.baud,
            core=self.core_factory)
        uart_rx, uart_tx = uart_buffers(m, platform, self.board)
        m.d.comb += [logic.rx.eq(uart_rx.i), uart_tx.o.eq(logic.tx), logic.locked.eq(locked)]

        if self.eth:
            phy_up, eth_rx_seen, eth_rx_led = self._phy(m, platform, rst_in)
        else:
            phy_up = eth_rx_seen = eth_rx_led = Const(0)
        m.d.comb += [logic.phy_up.eq(phy_up), logic.eth_rx_seen.eq(eth_rx_seen)]

        running = Signal()
        m.d.sync += running.eq(1)          # 1 once the sync domain is out of reset
        functions = {
            "heartbeat": heartbeat(m, f_sync),
            "running": running,
            "uart": stretch(m, logic.activity, int(f_sync * 0.05)),
            "bridge_error": stretch(m, logic.error, int(f_sync * 0.5)),
            "eth_rx_clock": eth_rx_led,
            "phy_up": phy_up,
            "traffic": logic.traffic,
            "irq": logic.irq,
        }
        drive_leds(m, platform, self.board, self.LED_FUNCTIONS, functions)
        return m

    def _phy(self, m, platform, rst_in):
        """The RGMII PHY: its reset, its clocks (the receive clock's ``eth_rx`` domain, the
        transmit clock forwarded idle). Returns ``(phy_up, eth_rx_seen, eth_rx_led)``."""
        f_sync = self.pll.f_out
        rx_pins, tx_pins, phy_up = rgmii_port(m, platform, self.board, self.board.eth[1], f_sync)
        rgmii_rx, rgmii_tx = rgmii_adapters(self.board, rx_pins, tx_pins)
        m.submodules.rgmii_rx = rgmii_rx
        m.submodules.rgmii_tx = rgmii_tx            # its GMII input is never driven: idle
        eth_rx_led, rx_toggle = eth_rx_domain(m, rgmii_rx.rx_clk, phy_up, rst_in)
        return phy_up, toggle_seen(m, rx_toggle, int(f_sync * 1e-3)), eth_rx_led
