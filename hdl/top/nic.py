"""The NIC on a board (``rnic build --top nic``): RGMII port, MAC, ARP/IPv4/ICMP and the
RNIC core, registers over the UART. See :class:`NicBoardTop`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring

from rnic.host.spec.board import NIC_CLOCK_HZ

from ..nic_top import NicTop
from .board_logic import BoardLogic
from .rgmii_board import RgmiiBoard, eth_rx_domain, rgmii_adapters, toggle_seen, uart_buffers

__all__ = ["NicBoardTop"]


class NicBoardTop(RgmiiBoard):
    """The design ``rnic build --top nic`` puts on an ECP5 board::

        board clock -> EHXPLLL -> sync (core clock, 83.33 MHz) and eth_tx (125 MHz)
        PHY rx_clk  -> eth_rx
        RGMII pins <-> RgmiiRx / RgmiiTx <-> NicTop.gmii_rx / gmii_tx
                       (EthernetPort, NetworkLayer, RnicCore with its register bank; with
                       ``tcp``, TcpOffload)
        USB UART -> UARTBridge -> 0x0000-0x0FFF  NicTop's registers (Network block included)
                               -> 0x1000-0x1FFF  board registers (BRD_*)
                               -> 0x2000-0x3FFF  host memory window (HMEM_*, with ``memory``)

    Clocks, PHY reset and pins as :class:`~rnic.hdl.top.rgmii_board.RgmiiBoard`; the
    UART bridge, the board registers, the host memory and what drives the core's other
    ports as :class:`~rnic.hdl.top.board_logic.BoardLogic`.

    With ``tcp`` (the default where the whole NIC fits: the ECPIX-5 85F) this is the NIC a
    host drives over the UART (``rnic --device uart:...``) exactly like the simulated one:
    TCP connections, MPA negotiation through the stream port, then the core moves every
    payload octet between TCP and the host memory (:class:`~rnic.hdl.top.host_memory.HostMemory`,
    where registered regions and receive buffers live; the host reads and writes it through
    the UART). TCP's time base ticks every millisecond of the clock; the core's
    ``rx_ulpdu`` (DP_CTRL.BYPASS) goes into the board's sink (BRD_RX_BEATS, BRD_SIGNATURE).
    Without ``tcp`` (the 45F boards) the network layer drops TCP segments and the core's
    wire side is looped back and fed by the board's ULPDU source (BRD_GEN), so that its data
    path is built and exercised. Without ``memory`` the core's AXI4 masters see an LFSR.
    The board answers ARP and ping at the addresses of the Network registers (default
    169.254.7.2/24, MAC 02:00:0a:07:00:02), which the host changes over the UART.

    LEDs, in order: :attr:`LED_FUNCTIONS` (the ``*_frame``, ``dropped`` and ``uart`` ones
    light for 50 ms per event).

    Parameters
    ----------
    board : rnic.hdl.top.boards.Board
        An entry of ``BOARDS`` with an RGMII resource.
    width : int
        The core's datapath width W in octets (default 4: 2.67 Gb/s at 83.33 MHz, room for a
        1 Gb/s line).
    connections : int
        The core's connection contexts (default 16).
    freq : float
        Core clock (``sync``) in Hz (default :data:`~rnic.host.spec.board.NIC_CLOCK_HZ`,
        83.33 MHz; with ``eth_tx``, 125 MHz, from one
        PLL).
    baud : int
        UART line rate (default 115200).
    port : int
        Number of the RGMII resource (default 0).
    tcp : bool or None
        With the TCP engine in the NIC top (default None: the board's ``nic_tcp``).
    memory : int or None
        Octets of host memory, a power of 2, or 0 for none (default None: the board's
        ``host_memory``).
    """

    #: The NIC's TCP ports this top drives itself.
    TCP_PORTS = ("tick", "tcp_active")

    #: What the LEDs show, in order (a board with fewer LEDs shows the first ones).
    LED_FUNCTIONS = ("heartbeat", "phy_up", "rx_clock", "rx_frame", "tx_frame", "dropped",
                     "uart", "irq")

    def __init__(self, board, *, width=4, connections=16, freq=NIC_CLOCK_HZ, baud=115200, port=0,
                 tcp=None, memory=None):
        super().__init__(board, width=width, freq=freq, port=port)
        tcp = board.nic_tcp if tcp is None else tcp
        if not isinstance(tcp, bool):
            raise TypeError(f"tcp must be a bool or None, not {tcp!r}")
        memory = board.host_memory if memory is None else memory
        if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
            raise ValueError(f"memory must be an integer number of octets >= 0, not {memory!r}")
        self.connections = connections
        self.baud = baud
        self.tcp = tcp
        self.memory = memory
        self.logic = None                   # BoardLogic, after elaboration

    def elaborate(self, platform):
        m = Module()
        rx_pins, tx_pins, phy_up, locked, rst_in = self._board(m, platform)
        rgmii_rx, rgmii_tx = rgmii_adapters(self.board, rx_pins, tx_pins)
        m.submodules.rgmii_rx = rgmii_rx
        m.submodules.rgmii_tx = rgmii_tx
        rx_clock_led, rx_toggle = eth_rx_domain(m, rgmii_rx.rx_clk, phy_up, rst_in)

        tcp = self.tcp

        def nic_top(**params):
            return NicTop(tcp=tcp, **params)
        nic_top.__name__ = NicTop.__name__
        self.logic = logic = BoardLogic(
            width=self.width, connections=self.connections, clk_freq=self.pll.f_out,
            baud=self.baud, core=nic_top, memory=self.memory,
            passthrough=(*(self.TCP_PORTS if tcp else ()), "gmii_rx", "gmii_tx"))
        m.submodules.logic = logic
        nic = logic.core
        wiring.connect(m, rgmii_rx.gmii, nic.gmii_rx)
        wiring.connect(m, nic.gmii_tx, rgmii_tx.gmii)
        if tcp:
            # its time base ticks every millisecond of the clock
            m.d.comb += nic.tick.eq(self._millisecond(m))
        uart_rx, uart_tx = uart_buffers(m, platform, self.board)
        rx_seen = toggle_seen(m, rx_toggle, int(self.pll.f_out * 1e-3))
        m.d.comb += [logic.rx.eq(uart_rx.i), uart_tx.o.eq(logic.tx), logic.locked.eq(locked),
                     logic.phy_up.eq(phy_up), logic.eth_rx_seen.eq(rx_seen)]

        rx_frame, tx_frame = self._frame_pulses(m, nic.eth)
        functions = {
            "heartbeat": self._heartbeat(m), "phy_up": phy_up, "rx_clock": rx_clock_led,
            "rx_frame": self._stretch(m, rx_frame),
            "tx_frame": self._stretch(m, tx_frame),
            "dropped": self._stretch(m, nic.net.drop.valid),
            "uart": self._stretch(m, logic.activity),
            "irq": logic.irq,
        }
        self._leds(m, platform, functions)
        return m

    def _millisecond(self, m):
        """A pulse every millisecond of the ``sync`` clock."""
        period = int(self.pll.f_out * 1e-3)
        count = Signal(range(period))
        pulse = Signal()
        m.d.sync += [count.eq(Mux(count == period - 1, 0, count + 1)),
                     pulse.eq(count == period - 1)]
        return pulse
