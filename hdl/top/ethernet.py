"""The Ethernet bring-up top (``rnic build --top ethernet``): RGMII PHY, MAC and the network
layer; the board answers ARP and ping in gateware."""

import ipaddress

from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring

from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX

from ..net.ethernet_port import EthernetPort
from ..net.network_layer import NetworkLayer
from ..net.rgmii import RgmiiRx, RgmiiTx
from .rgmii_board import RgmiiBoard, eth_rx_domain

__all__ = ["EthernetBoardTop", "RgmiiNetStack"]


class RgmiiNetStack(Elaboratable):
    """RGMII pins <-> :class:`~rnic.hdl.net.rgmii.RgmiiRx` /
    :class:`~rnic.hdl.net.rgmii.RgmiiTx` <-> :class:`~rnic.hdl.net.ethernet_port.EthernetPort`
    <-> :class:`~rnic.hdl.net.network_layer.NetworkLayer` with constant addresses:
    everything of :class:`EthernetBoardTop` but its clocks, resets and LEDs (so that it
    runs in the simulator).

    Clock domains: ``sync`` (core), ``eth_tx`` (125 MHz) from the design; ``eth_rx``
    defined by the design with :attr:`rx_clk` as its clock. TCP frames are taken and
    thrown away; nothing but ARP replies and echo replies is sent.

    Parameters: ``rx_pins``, ``tx_pins`` (keyword dictionaries of
    :func:`~rnic.hdl.net.rgmii.rgmii_pins`), ``width``, ``mac`` (48-bit int), ``ip``
    (32-bit int), ``prefix``, ``tx_clk_delay_ps`` (the transmit clock's delay,
    :class:`~rnic.hdl.net.rgmii.RgmiiTx` ``clk_delay_ps``; default 0). Attributes:
    ``rx_clk`` (the PHY's receive clock), ``port`` and ``net`` (the two blocks, for
    counters).
    """

    def __init__(self, *, rx_pins, tx_pins, width, mac, ip, prefix, tx_clk_delay_ps=0):
        self.rgmii_rx = RgmiiRx(**rx_pins)
        self.rgmii_tx = RgmiiTx(**tx_pins, clk_delay_ps=tx_clk_delay_ps)
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


class EthernetBoardTop(RgmiiBoard):
    """An ECP5 board whose RGMII port answers ARP and ping (IPv4 echo) in gateware::

        board clock -> EHXPLLL -> sync (core clock, ``freq``) and eth_tx (125 MHz)
        PHY rx_clk  -> eth_rx
        RGMII pins <-> RgmiiRx / RgmiiTx <-> EthernetPort <-> NetworkLayer

    Clocks, PHY reset and pins as :class:`~rnic.hdl.top.rgmii_board.RgmiiBoard`. The MAC
    and IPv4 address are constants (default those of :mod:`rnic.host.spec.net`,
    ``02:00:0a:07:00:02`` and ``169.254.7.2/24``). Frames for TCP are taken and thrown
    away; nothing else is sent. LEDs, in order: :attr:`LED_FUNCTIONS` (the ``*_frame`` and
    ``dropped`` ones light for 50 ms per event).

    Parameters
    ----------
    board : rnic.hdl.top.boards.Board
        An entry of ``BOARDS`` with an RGMII resource (``board.eth``).
    width : int
        Octets per beat of the core side (:data:`rnic.host.spec.limits.WIDTHS`).
    freq : float
        Core clock (``sync``) in Hz; line rate needs at least 125 MHz / ``width``
        (default 100 MHz).
    port : int
        Number of the RGMII resource (the Versa has 0 and 1).
    mac : bytes
        The board's MAC address (6 octets).
    ip : str
        Its IPv4 address, ``prefix`` its network's prefix length.
    """

    #: What the LEDs show, in order (a board with fewer LEDs shows the first ones).
    LED_FUNCTIONS = ("heartbeat", "phy_up", "rx_clock", "rx_frame", "tx_frame", "dropped",
                     "tcp_frame", "pll_locked")

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
            prefix=self.prefix, tx_clk_delay_ps=self.board.rgmii_tx_clk_delay_ps)
        rx_clock_led, _ = eth_rx_domain(m, stack.rx_clk, phy_up, rst_in)
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
