"""A board top for Ethernet bring-up: RGMII PHY, MAC and the network layer; the board
answers ARP and ping in gateware."""

import ipaddress
import math

from amaranth.hdl import ClockDomain, ClockSignal, Const, Elaboratable, Module, Signal
from amaranth.lib import io, wiring
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer

from rnic.host.spec.limits import check_width
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX

from ..ecp5_pll import ECP5PLL, ecp5_pll
from .ethernet_port import EthernetPort
from .network_layer import NetworkLayer
from .rgmii import RgmiiRx, RgmiiTx, rgmii_pins

__all__ = ["EthernetBoardTop", "RgmiiBoard", "RgmiiNetStack", "ETH_FREQ", "PHY_RESET_S", "LED_FUNCTIONS"]

#: The RGMII clock at 1 Gb/s (``eth_tx``, and what the PHY's ``rx_clk`` runs at).
ETH_FREQ = 125e6
#: How long the PHY's reset pin is held after the design leaves reset: the RTL8211E needs
#: at least 10 ms.
PHY_RESET_S = 0.02

#: What the LEDs show, in order.
LED_FUNCTIONS = ("heartbeat", "phy_up", "rx_clock", "rx_frame", "tx_frame", "dropped",
                 "tcp_frame", "pll_locked")


class RgmiiNetStack(Elaboratable):
    """RGMII pins <-> :class:`~rnic.hdl.net.rgmii.RgmiiRx` /
    :class:`~rnic.hdl.net.rgmii.RgmiiTx` <-> :class:`~rnic.hdl.net.ethernet_port.EthernetPort`
    <-> :class:`~rnic.hdl.net.network_layer.NetworkLayer` with constant addresses: everything of :class:`EthernetBoardTop` but its clocks, resets
    and LEDs (so that it runs in the simulator).

    Clock domains: ``sync`` (core), ``eth_tx`` (125 MHz) from the design; ``eth_rx``
    defined by the design with :attr:`rx_clk` as its clock. TCP frames are taken and
    thrown away; nothing but ARP replies and echo replies is sent.

    Parameters: ``rx_pins``, ``tx_pins`` (keyword dictionaries of
    :func:`~rnic.hdl.net.rgmii.rgmii_pins`), ``width``, ``mac`` (48-bit int), ``ip``
    (32-bit int), ``prefix``. Attributes: ``rx_clk`` (the PHY's receive clock), ``port``
    and ``net`` (the two blocks, for counters).
    """

    def __init__(self, *, rx_pins, tx_pins, width, mac, ip, prefix):
        self.rgmii_rx = RgmiiRx(**rx_pins)
        self.rgmii_tx = RgmiiTx(**tx_pins)
        self.port = EthernetPort(width=width)
        self.net = NetworkLayer(width=width, send_path=False)
        self.rx_clk = self.rgmii_rx.rx_clk
        self._mac, self._ip, self._prefix = mac, ip, prefix

    def elaborate(self, platform):
        m = Module()
        m.submodules.rgmii_rx = self.rgmii_rx
        m.submodules.rgmii_tx = self.rgmii_tx
        m.submodules.port = port = self.port
        m.submodules.net = net = self.net
        wiring.connect(m, self.rgmii_rx.gmii, port.gmii_rx)
        wiring.connect(m, port.gmii_tx, self.rgmii_tx.gmii)
        wiring.connect(m, port.rx, net.rx)
        wiring.connect(m, net.tx, port.tx)
        m.d.comb += [port.mac.eq(self._mac), net.mac.eq(self._mac), net.ip.eq(self._ip),
                     net.prefix.eq(self._prefix), net.tcp.ready.eq(1),
                     net.arp_write.valid.eq(0), net.arp_request.valid.eq(0)]
        return m


class RgmiiBoard(Elaboratable):
    """What every ECP5 board top with an RGMII port has: the clocks, the PHY's reset, the
    RGMII pins and the LEDs (the base of :class:`EthernetBoardTop` and
    :class:`~rnic.hdl.nic_board_top.NicBoardTop`)::

        board clock -> EHXPLLL -> sync (core clock, ``freq``) and eth_tx (125 MHz)
        PHY rx_clk  -> eth_rx (out of reset once the PHY is)

    The PHY's reset pin is held for :data:`PHY_RESET_S` after the PLL locks (and the
    reset button is released); ``eth_rx`` leaves reset once the PHY is out of reset and
    its receive clock runs. MDC is held low and MDIO left floating: the PHY runs on its
    strapped defaults (auto-negotiation, RGMII delays on both sides; see
    :mod:`rnic.hdl.net.rgmii`). The link partner must negotiate 1000BASE-T.

    Parameters: ``board`` (an entry of ``BOARDS`` with an RGMII resource), ``width``
    (octets per beat of the core side), ``freq`` (``sync`` in Hz, 10..200 MHz; line rate
    needs at least 125 MHz / ``width``), ``port`` (number of the RGMII resource: the
    Versa has 0 and 1). Attributes (after elaboration): ``pll`` (the
    :class:`~rnic.hdl.ecp5_pll.PllConfig`), ``domains`` (for the build report).
    """

    #: What the LEDs show, in order (a board with fewer LEDs shows the first ones).
    LED_FUNCTIONS = LED_FUNCTIONS

    def __init__(self, board, *, width, freq, port):
        if board.eth is None:
            raise ValueError(f"board {board.name!r} has no RGMII port")
        self.board = board
        self.width = check_width(width)
        if not 10e6 <= freq <= 200e6:
            raise ValueError(f"freq must be 10..200 MHz, not {freq / 1e6:g} MHz")
        self.freq = freq
        if port not in (0, 1):
            raise ValueError(f"port must be 0 or 1, not {port!r}")
        self.port = port
        self.pll = None
        self.domains = ("sync", "eth_tx", "eth_rx")

    def _board(self, m, platform):
        """Clocks, resets and the PHY's pins. Returns ``(rx_pins, tx_pins, phy_up, locked,
        rst_in)``: the RGMII pins by role (:func:`~rnic.hdl.net.rgmii.rgmii_pins`) and the
        status bits. The caller creates ``eth_rx`` with :meth:`_eth_rx_domain`."""
        locked, rst_in = self._clocks(m, platform)
        pins = platform.request(self.board.eth[0], self.port, dir="-")
        phy_up = self._phy_reset(m, pins.rst)
        rx_pins, tx_pins = rgmii_pins(pins)
        platform.add_clock_constraint(rx_pins["clk"].io, ETH_FREQ)
        m.submodules.mdc = mdc = io.Buffer("o", pins.mdc)
        m.submodules.mdio = mdio = io.Buffer("io", pins.mdio)
        m.d.comb += [mdc.o.eq(0), mdio.oe.eq(0), mdio.o.eq(0)]
        return rx_pins, tx_pins, phy_up, locked, rst_in

    @staticmethod
    def _eth_rx_domain(m, rx_clk, phy_up, rst_in):
        """The ``eth_rx`` domain on the PHY's clock. Returns two bits of a counter on it,
        synchronized into ``sync``: one that blinks (~0.13 s) for an LED and one that
        toggles every 2048 cycles (for a "clock runs" flag)."""
        m.domains.eth_rx = ClockDomain("eth_rx")
        m.d.comb += ClockSignal("eth_rx").eq(rx_clk)
        m.submodules.eth_rx_reset = ResetSynchronizer(~phy_up | rst_in, domain="eth_rx")
        rx_count = Signal(24)
        m.d.eth_rx += rx_count.eq(rx_count + 1)
        rx_clock_led = Signal()
        rx_toggle = Signal()
        m.submodules.rx_clock_sync = FFSynchronizer(rx_count[-1], rx_clock_led)
        m.submodules.rx_toggle_sync = FFSynchronizer(rx_count[10], rx_toggle)
        return rx_clock_led, rx_toggle

    def _heartbeat(self, m):
        heartbeat = Signal(max(1, math.ceil(math.log2(self.pll.f_out))))
        m.d.sync += heartbeat.eq(heartbeat + 1)
        return heartbeat[-1]

    @staticmethod
    def _frame_pulses(m, port):
        """Pulses in ``sync`` for a frame received good and a frame sent by ``port`` (an
        :class:`~rnic.hdl.net.ethernet_port.EthernetPort`): its counters changed."""
        good = Signal.like(port.rx_counts[0])
        sent = Signal.like(port.tx_frames)
        m.d.sync += [good.eq(port.rx_counts[0]), sent.eq(port.tx_frames)]
        return good != port.rx_counts[0], sent != port.tx_frames

    def _clocks(self, m, platform):
        board = self.board
        f_in = platform.lookup(board.clock, 0).clock.frequency
        m.submodules.clk_buf = clk_buf = io.Buffer("i", platform.request(board.clock, 0,
                                                                         dir="-"))
        self.pll = cfg = ecp5_pll(f_in, self.freq, ETH_FREQ)
        if abs(cfg.f_aux - ETH_FREQ) > ETH_FREQ * 1e-4:
            raise ValueError(f"no EHXPLLL setting makes {self.freq / 1e6:g} MHz and 125 MHz "
                             f"together (125 MHz output would be {cfg.f_aux / 1e6:g} MHz)")
        m.submodules.pll = pll = ECP5PLL(cfg, aux_domain="eth_tx")
        m.d.comb += pll.clk_in.eq(clk_buf.i)
        rst_in = Const(0)
        if board.reset is not None:
            m.submodules.rst_buf = rst_buf = io.Buffer("i", platform.request(board.reset, 0,
                                                                             dir="-"))
            rst_in = rst_buf.i
        m.domains.sync = ClockDomain("sync")
        m.domains.eth_tx = ClockDomain("eth_tx")
        m.d.comb += [ClockSignal("sync").eq(pll.clk_out), ClockSignal("eth_tx").eq(pll.clk_aux)]
        m.submodules.sync_reset = ResetSynchronizer(~pll.locked | rst_in, domain="sync")
        m.submodules.eth_tx_reset = ResetSynchronizer(~pll.locked | rst_in, domain="eth_tx")
        return pll.locked, rst_in

    def _phy_reset(self, m, rst_port):
        """The PHY's reset pin (active low on the board; the port says so): held for
        PHY_RESET_S after ``sync`` leaves reset. Returns the "PHY is out of reset" flag."""
        m.submodules.phy_rst = phy_rst = io.Buffer("o", rst_port)
        hold_cycles = int(self.pll.f_out * PHY_RESET_S)
        hold = Signal(range(hold_cycles + 1))
        phy_up = Signal()
        with m.If(~phy_up):
            m.d.sync += hold.eq(hold + 1)
            with m.If(hold == hold_cycles):
                m.d.sync += phy_up.eq(1)
        m.d.comb += phy_rst.o.eq(~phy_up)
        return phy_up

    def _stretch(self, m, pulse, seconds=0.05):
        pulse_q = Signal()
        m.d.sync += pulse_q.eq(pulse)
        timer = Signal(range(int(self.pll.f_out * seconds) + 1))
        with m.If(pulse_q):
            m.d.sync += timer.eq(int(self.pll.f_out * seconds))
        with m.Elif(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        return timer != 0

    def _leds(self, m, platform, functions):
        requested = {}
        for i, ((res, num, sub), function) in enumerate(zip(self.board.leds, self.LED_FUNCTIONS)):
            if (res, num) not in requested:
                requested[(res, num)] = platform.request(res, num, dir="-")
            led_port = requested[(res, num)]
            if sub is not None:
                led_port = getattr(led_port, sub)
            m.submodules[f"led_{i}"] = led = io.Buffer("o", led_port)
            m.d.sync += led.o.eq(functions[function])


class EthernetBoardTop(RgmiiBoard):
    """An ECP5 board whose RGMII port answers ARP and ping (IPv4 echo) in gateware::

        board clock -> EHXPLLL -> sync (core clock, ``freq``) and eth_tx (125 MHz)
        PHY rx_clk  -> eth_rx
        RGMII pins <-> RgmiiRx / RgmiiTx <-> EthernetPort <-> NetworkLayer

    Clocks, PHY reset and pins as :class:`RgmiiBoard`. The MAC and IPv4 address are
    constants (default those of :mod:`rnic.host.spec.net`, ``02:00:0a:07:00:02`` and
    ``169.254.7.2/24``). Frames for TCP are taken and thrown away; nothing else is sent.
    LEDs, in order: :data:`LED_FUNCTIONS` (the ``*_frame`` and ``dropped`` ones light for
    50 ms per event).

    Parameters
    ----------
    board : rnic.hdl.board_top.Board
        An entry of ``BOARDS`` with an RGMII resource (``board.eth``).
    width : int
        Octets per beat of the core side (:data:`rnic.host.spec.limits.WIDTHS`).
    freq : float
        Core clock (``sync``) in Hz; line rate needs at least 125 MHz / ``width`` (the
        default, 100 MHz at W = 4, has room to spare; 125 MHz, what ``rnic build --top
        ethernet`` builds, meets timing too, see docs/build.md).
    port : int
        Number of the RGMII resource (the Versa has 0 and 1).
    mac : bytes
        The board's MAC address (6 octets).
    ip : str
        Its IPv4 address, ``prefix`` its network's prefix length.
    """

    def __init__(self, board, *, width=4, freq=100e6, port=0, mac=DEFAULT_NIC_MAC,
                 ip=DEFAULT_NIC_IP, prefix=DEFAULT_PREFIX):
        super().__init__(board, width=width, freq=freq, port=port)
        if not isinstance(mac, (bytes, bytearray)) or len(mac) != 6:
            raise ValueError(f"mac must be 6 octets, not {mac!r}")
        self.mac = int.from_bytes(mac, "big")
        self.ip = int(ipaddress.IPv4Address(ip))
        if not 0 <= prefix <= 32:
            raise ValueError(f"prefix must be 0..32, not {prefix!r}")
        self.prefix = prefix

    def elaborate(self, platform):
        m = Module()
        rx_pins, tx_pins, phy_up, locked, rst_in = self._board(m, platform)
        m.submodules.stack = stack = RgmiiNetStack(
            rx_pins=rx_pins, tx_pins=tx_pins, width=self.width, mac=self.mac, ip=self.ip,
            prefix=self.prefix)
        rx_clock_led, _ = self._eth_rx_domain(m, stack.rx_clk, phy_up, rst_in)
        port, net = stack.port, stack.net
        rx_frame, tx_frame = self._frame_pulses(m, port)
        functions = {
            "heartbeat": self._heartbeat(m), "phy_up": phy_up, "rx_clock": rx_clock_led,
            "rx_frame": self._stretch(m, rx_frame),
            "tx_frame": self._stretch(m, tx_frame),
            "dropped": self._stretch(m, net.drop.valid),
            "tcp_frame": self._stretch(m, net.tcp.valid & net.tcp.payload.last),
            "pll_locked": locked,
        }
        self._leds(m, platform, functions)
        return m
