"""What the ECP5 board tops share: clocks, resets, the RGMII PHY's pins and reset, the
``eth_rx`` domain, the UART pins and the LEDs.

:class:`RgmiiBoard` is the base of the tops with an RGMII port
(:class:`~rnic.hdl.top.ethernet.EthernetBoardTop`, :class:`~rnic.hdl.top.nic.NicBoardTop`);
the functions are its pieces, which the core top (:class:`~rnic.hdl.top.core.CoreBoardTop`)
and the harness (:class:`~rnic.hdl.top.harness.CoreHarness`) use too.
"""

import math

from amaranth.hdl import ClockDomain, ClockSignal, Const, Elaboratable, ResetSignal, Signal
from amaranth.lib import io
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer

from rnic.host.spec.limits import check_width

from ..ecp5_pll import ECP5PLL, ecp5_pll
from ..global_buffer import on_global_network
from ..net.rgmii import RgmiiRx, RgmiiTx, rgmii_pins

__all__ = [
    "RgmiiBoard", "ETH_FREQ", "PHY_RESET_S", "board_clocks", "rgmii_port", "rgmii_adapters",
    "eth_rx_domain", "toggle_seen", "uart_buffers", "heartbeat", "stretch", "drive_leds",
]

#: The RGMII clock at 1 Gb/s (``eth_tx``, and what the PHY's ``rx_clk`` runs at).
ETH_FREQ = 125e6
#: How long the PHY's reset pin is held after the design leaves reset: the RTL8211E needs
#: at least 10 ms.
PHY_RESET_S = 0.02


def board_clocks(m, platform, board, freq, *, eth_tx, reset_button=True):
    """The board clock through an EHXPLLL: domain ``sync`` at ``freq`` (CLKOP) and, with
    ``eth_tx``, domain ``eth_tx`` at :data:`ETH_FREQ` (CLKOS, same VCO). Each domain leaves
    reset through a ResetSynchronizer once the PLL locks and (with ``reset_button``, on a
    board that has one) the reset button is released.

    Returns ``(pll, locked, rst_in)``: the :class:`~rnic.hdl.ecp5_pll.PllConfig`, the PLL's
    lock and the reset button (``Const(0)`` without one).
    """
    f_in = platform.lookup(board.clock, 0).clock.frequency
    m.submodules.clk_buf = clk_buf = io.Buffer("i", platform.request(board.clock, 0, dir="-"))
    cfg = ecp5_pll(f_in, freq, ETH_FREQ if eth_tx else None)
    m.submodules.pll = pll = ECP5PLL(cfg, aux_domain="eth_tx" if eth_tx else None)
    m.d.comb += pll.clk_in.eq(clk_buf.i)
    rst_in = Const(0)
    held = ~pll.locked
    if reset_button and board.reset is not None:
        m.submodules.rst_buf = rst_buf = io.Buffer("i", platform.request(board.reset, 0,
                                                                         dir="-"))
        rst_in = rst_buf.i
        held = held | rst_in
    # no add_clock_constraint for the PLL outputs: nextpnr derives their constraints from
    # the board clock's ("Derived frequency constraint"); a FREQUENCY NET on an Amaranth
    # name may not match the net name Yosys keeps.
    m.domains.sync = ClockDomain("sync")
    m.d.comb += ClockSignal("sync").eq(pll.clk_out)
    # sync's reset goes to most of the design's slices: the synchronizer runs in a domain
    # of its own on the same clock, and its output reaches sync through a global network
    m.domains.sync_reset = cd_reset = ClockDomain("sync_reset", local=True)
    m.d.comb += cd_reset.clk.eq(pll.clk_out)
    m.submodules.sync_reset = ResetSynchronizer(held, domain="sync_reset")
    reset = on_global_network(m, cd_reset.rst, name="sync_reset_net")
    m.d.comb += ResetSignal("sync").eq(reset)
    if eth_tx:
        m.domains.eth_tx = ClockDomain("eth_tx")
        m.d.comb += ClockSignal("eth_tx").eq(pll.clk_aux)
        m.submodules.eth_tx_reset = ResetSynchronizer(held, domain="eth_tx")
    return cfg, pll.locked, rst_in


def rgmii_port(m, platform, board, number, f_sync):
    """RGMII resource ``number`` of ``board``: the PHY's reset pin (active low on the board;
    the port says so) held for :data:`PHY_RESET_S` after ``sync`` (at ``f_sync`` Hz) leaves
    reset, MDC low and MDIO floating (the PHY runs on its strapped defaults), the receive
    clock constrained to :data:`ETH_FREQ`.

    Returns ``(rx_pins, tx_pins, phy_up)``: the data pins by role
    (:func:`~rnic.hdl.net.rgmii.rgmii_pins`) and the "PHY is out of reset" flag.
    """
    pins = platform.request(board.eth[0], number, dir="-")
    m.submodules.phy_rst = phy_rst = io.Buffer("o", pins.rst)
    hold_cycles = int(f_sync * PHY_RESET_S)
    hold = Signal(range(hold_cycles + 1))
    phy_up = Signal()
    with m.If(~phy_up):
        m.d.sync += hold.eq(hold + 1)
        with m.If(hold == hold_cycles):
            m.d.sync += phy_up.eq(1)
    m.d.comb += phy_rst.o.eq(~phy_up)
    rx_pins, tx_pins = rgmii_pins(pins)
    platform.add_clock_constraint(rx_pins["clk"].io, ETH_FREQ)
    m.submodules.mdc = mdc = io.Buffer("o", pins.mdc)
    m.submodules.mdio = mdio = io.Buffer("io", pins.mdio)
    m.d.comb += [mdc.o.eq(0), mdio.oe.eq(0), mdio.o.eq(0)]
    return rx_pins, tx_pins, phy_up


def rgmii_adapters(board, rx_pins, tx_pins):
    """``(RgmiiRx, RgmiiTx)`` on the pins of :func:`rgmii_port`, the transmit clock delayed
    as ``board`` needs (``board.rgmii_tx_clk_delay_ps``)."""
    return RgmiiRx(**rx_pins), RgmiiTx(**tx_pins, clk_delay_ps=board.rgmii_tx_clk_delay_ps)


def eth_rx_domain(m, rx_clk, phy_up, rst_in):
    """The ``eth_rx`` domain on the PHY's receive clock, in reset while the PHY is (or the
    reset button is pressed). Returns two bits of a counter on it, synchronized into
    ``sync``: one that blinks (2**24 cycles a period) for an LED and one that toggles every
    1024 cycles (for :func:`toggle_seen`)."""
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


def uart_buffers(m, platform, board):
    """The UART's rx and tx pins through input and output buffers."""
    uart = platform.request(*board.uart, dir="-")
    m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
    m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
    return rx, tx


def heartbeat(m, f_sync):
    """A bit of ``sync`` (at ``f_sync`` Hz) that is a square wave of 1 to 2 s period."""
    count = Signal(max(1, math.ceil(math.log2(f_sync))), name="heartbeat", reset_less=True)
    m.d.sync += count.eq(count + 1)
    return count[-1]


def stretch(m, pulse, cycles):
    """1 for ``cycles`` cycles after each cycle ``pulse`` is high (a short event made
    visible on an LED). The pulse is registered first: it may come combinationally from
    logic the placer puts far from the LED logic (timing)."""
    # (no reset: an LED's timer needs none, and the reset's net reaches the pins' corner
    # late)
    pulse_q = Signal(reset_less=True)
    m.d.sync += pulse_q.eq(pulse)
    timer = Signal(range(cycles + 1), reset_less=True)
    with m.If(pulse_q):
        m.d.sync += timer.eq(cycles)
    with m.Elif(timer != 0):
        m.d.sync += timer.eq(timer - 1)
    return timer != 0


def drive_leds(m, platform, board, names, functions):
    """The board's LEDs (``board.leds``, in order) show ``functions[name]`` for the names in
    ``names``, in order (a board with fewer LEDs shows the first ones)."""
    requested = {}
    for i, ((res, num, sub), name) in enumerate(zip(board.leds, names)):
        if (res, num) not in requested:
            requested[(res, num)] = platform.request(res, num, dir="-")
        port = requested[(res, num)]
        if sub is not None:
            port = getattr(port, sub)
        m.submodules[f"led_{i}"] = led = io.Buffer("o", port)
        # registered: an LED pin is far from most of the logic that drives it
        m.d.sync += led.o.eq(functions[name])


class RgmiiBoard(Elaboratable):
    """What every ECP5 board top with an RGMII port has: the clocks, the PHY's reset, the
    RGMII pins and the LEDs::

        board clock -> EHXPLLL -> sync (core clock, ``freq``) and eth_tx (125 MHz)
        PHY rx_clk  -> eth_rx (out of reset once the PHY is)

    The PHY's reset pin is held for :data:`PHY_RESET_S` after the PLL locks (and the
    reset button is released); ``eth_rx`` leaves reset once the PHY is out of reset and
    its receive clock runs. MDC is held low and MDIO left floating: the PHY runs on its
    strapped defaults (auto-negotiation, its RGMII delays). The transmit clock is delayed
    by the board's ``rgmii_tx_clk_delay_ps`` (:mod:`rnic.hdl.top.boards`). The link
    partner must negotiate 1000BASE-T.

    Parameters: ``board`` (an entry of :data:`~rnic.hdl.top.boards.BOARDS` with an RGMII
    resource), ``width`` (octets per beat of the core side), ``freq`` (``sync`` in Hz,
    10..200 MHz; line rate needs at least 125 MHz / ``width``), ``port`` (number of the
    RGMII resource: the Versa has 0 and 1). Attributes (after elaboration): ``pll`` (the
    :class:`~rnic.hdl.ecp5_pll.PllConfig`), ``domains`` (for the build report).
    Subclasses name their LEDs in ``LED_FUNCTIONS``.
    """

    LED_FUNCTIONS = ()

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
        status bits. The caller creates ``eth_rx`` with :func:`eth_rx_domain`."""
        self.pll, locked, rst_in = board_clocks(m, platform, self.board, self.freq, eth_tx=True)
        if abs(self.pll.f_aux - ETH_FREQ) > ETH_FREQ * 1e-4:
            raise ValueError(f"no EHXPLLL setting makes {self.freq / 1e6:g} MHz and 125 MHz "
                             f"together (125 MHz output would be {self.pll.f_aux / 1e6:g} MHz)")
        rx_pins, tx_pins, phy_up = rgmii_port(m, platform, self.board, self.port,
                                              self.pll.f_out)
        return rx_pins, tx_pins, phy_up, locked, rst_in

    def _heartbeat(self, m):
        return heartbeat(m, self.pll.f_out)

    @staticmethod
    def _frame_pulses(m, port):
        """Pulses in ``sync`` for a frame received good and a frame sent by ``port`` (an
        :class:`~rnic.hdl.net.ethernet_port.EthernetPort`): its counters changed."""
        good = Signal.like(port.rx_counts[0])
        sent = Signal.like(port.tx_frames)
        m.d.sync += [good.eq(port.rx_counts[0]), sent.eq(port.tx_frames)]
        return good != port.rx_counts[0], sent != port.tx_frames

    def _stretch(self, m, pulse, seconds=0.05):
        return stretch(m, pulse, int(self.pll.f_out * seconds))

    def _leds(self, m, platform, functions):
        drive_leds(m, platform, self.board, self.LED_FUNCTIONS, functions)
