"""RGMII PHY adapter (1 Gb/s): the RGMII pins of a PHY to and from the GMII signatures.

RGMII (Reduced Gigabit Media Independent Interface, v2.0) carries a GMII octet on four
data lines and one control line clocked on both edges of a 125 MHz clock: the low nibble
and the data-valid bit on the rising edge, the high nibble and valid XOR error on the
falling edge. :class:`RgmiiRx` and :class:`RgmiiTx` turn this into
:data:`~rnic.hdl.net.gmii.GmiiRx` / :data:`~rnic.hdl.net.gmii.GmiiTx` in the ``eth_rx`` and
``eth_tx`` clock domains with ``amaranth.lib.io`` buffers, which the ECP5 platform maps to
``IDDRX1F`` / ``ODDRX1F`` in the I/O cells.

Clock-to-data skew
------------------
RGMII sends clock and data edge-aligned; the receiver needs the clock about 2 ns later
(a quarter of the 8 ns period) to sample in the middle of each half-cycle. Either the PHY
adds that delay inside (RGMII-ID), or the board's traces do, or the FPGA does (ECP5
``DELAYG`` on the pins). Which side adds it is a property of the board, fixed by how its
PHY is strapped:

* receive: :class:`RgmiiRx` adds no delay. Both supported boards strap their PHYs to
  launch ``rx_clk`` 2 ns after ``rx_data``/``rx_ctl`` (LiteX's targets for both boards
  set their receive delay to zero too).
* transmit: :class:`RgmiiTx` delays its forwarded ``tx_clk`` by ``clk_delay_ps`` in the
  I/O cell's ``DELAYG`` (25 ps per tap). On the Lattice ECP5 Versa the two RTL8211E PHYs
  are strapped with ``TXDLY`` set, so the delay is 0 there (LiteX's Versa target: 0); on
  the ECPIX-5 the PHY adds no transmit delay, so the board top asks for 2000 ps (LiteX's
  ECPIX-5 target keeps LiteEth's 2 ns transmit clock delay). The delay of each board is
  ``rgmii_tx_clk_delay_ps`` in :data:`rnic.hdl.top.boards.BOARDS`.

Adding a delay on both sides would put the sampling edge 4 ns from the data edge, i.e.
on the next transition; adding none leaves it on the transition itself.

Not supported
-------------
* 10 and 100 Mb/s: at those speeds RGMII carries one nibble per clock (2.5/25 MHz,
  the same nibble on both edges), which needs a nibble-to-octet converter and a
  transmit clock that follows the link speed. Only 1000BASE-T works; a PHY that
  negotiates a lower speed sends nibbles that these adapters read as garbage octets
  (the MAC drops them for their FCS).
* In-band status: while ``rx_ctl`` is low on both edges the PHY puts link, speed and
  duplex on ``rx_data``. It is not decoded; it reaches ``gmii.rxd`` with ``rx_dv`` and
  ``rx_er`` low, where the MAC ignores it.
"""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Signal
from amaranth.lib import io, wiring
from amaranth.lib.wiring import In, Out

from .gmii import GmiiRx, GmiiTx

__all__ = ["RgmiiRx", "RgmiiTx", "rgmii_pins", "DELAY_TAP_PS", "MAX_DELAY_PS"]

#: The delay of one tap of the ECP5 I/O cell's ``DELAYG`` (its 7-bit ``DEL_VALUE``).
DELAY_TAP_PS = 25
#: The longest delay a ``DELAYG`` adds.
MAX_DELAY_PS = 127 * DELAY_TAP_PS


def _check_port(name, port, width):
    if not isinstance(port, io.PortLike):
        raise TypeError(f"{name} must be an amaranth.lib.io port (PortLike), not {port!r}")
    if len(port) != width:
        raise ValueError(f"{name} must be {width} pin{'s' if width > 1 else ''} wide, "
                         f"not {len(port)}: {port!r}")
    return port


def rgmii_pins(pins):
    """The ports of an RGMII resource (``platform.request("eth_rgmii", n, dir="-")``) by
    role: ``(rx, tx)`` keyword dictionaries for :class:`RgmiiRx` and :class:`RgmiiTx`.

    Takes ``rx_ctl``/``tx_ctl`` or the spelling ``rx_ctrl``/``tx_ctrl`` (the Versa's
    second port uses it)."""
    def member(name):
        port = getattr(pins, name, None)
        if port is None:
            port = getattr(pins, name.replace("_ctl", "_ctrl"), None)
        if port is None:
            raise ValueError(f"RGMII resource {pins!r} has no subsignal {name!r}")
        return port
    rx = {"clk": member("rx_clk"), "ctl": member("rx_ctl"), "data": member("rx_data")}
    tx = {"clk": member("tx_clk"), "ctl": member("tx_ctl"), "data": member("tx_data")}
    return rx, tx


class RgmiiRx(wiring.Component):
    """Receive half of the RGMII adapter: ``rx_clk``, ``rx_ctl`` and four ``rx_data``
    pins to one GMII octet per cycle of ``eth_rx``.

    ``rx_ctl`` and ``rx_data`` go through input DDR registers (``io.DDRBuffer``, on ECP5
    ``IDDRX1F``) clocked by ``eth_rx``; the octet of one clock period is the nibble
    sampled on the rising edge (``rxd[3:0]``) and the one sampled on the following
    falling edge (``rxd[7:4]``), and ``rx_dv`` is ``rx_ctl`` at the rising edge,
    ``rx_er`` the XOR of its two samples (RGMII 2.0, section 3.4). The PHY's delayed
    clock is expected (module documentation, "Clock-to-data skew").

    The component does not create the ``eth_rx`` clock domain: the design does, with
    ``rx_clk`` (the pin through an input buffer) as its clock, so that its reset stays
    the design's choice. Frame boundaries and errors pass through unchanged: the adapter
    has no state besides its registers; what ``rxd`` carries outside a frame (in-band
    status) is passed on with ``rx_dv`` and ``rx_er`` low.

    Parameters
    ----------
    clk, ctl : io.PortLike
        The ``rx_clk`` and ``rx_ctl`` pins (1 wide).
    data : io.PortLike
        The ``rx_data`` pins (4 wide), bit 0 first.

    Ports
    -----
    rx_clk : Out(1)
        The receive clock from the PHY, for the ``eth_rx`` domain (125 MHz at 1 Gb/s).
    gmii : Out(GmiiRx)
        In ``eth_rx``, from flip-flops.

    Latency: the octet whose low nibble is on the pins at rising edge *k* of ``rx_clk``
    is on ``gmii`` after edge *k* + 2 (the DDR register's output register, then ours).
    Throughput: one octet per cycle; nothing stalls.
    """

    rx_clk: Out(1)
    gmii: Out(GmiiRx)

    def __init__(self, *, clk, ctl, data):
        self._clk = _check_port("clk", clk, 1)
        self._ctl = _check_port("ctl", ctl, 1)
        self._data = _check_port("data", data, 4)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.clk_buffer = clk = io.Buffer("i", self._clk)
        m.submodules.ctl_ddr = ctl = io.DDRBuffer("i", self._ctl, i_domain="eth_rx")
        m.submodules.data_ddr = data = io.DDRBuffer("i", self._data, i_domain="eth_rx")
        m.d.comb += self.rx_clk.eq(clk.i)
        m.d.eth_rx += [
            self.gmii.rxd.eq(Cat(data.i[0], data.i[1])),
            self.gmii.rx_dv.eq(ctl.i[0]),
            self.gmii.rx_er.eq(ctl.i[0] ^ ctl.i[1]),
        ]
        return m


class RgmiiTx(wiring.Component):
    """Transmit half of the RGMII adapter: one GMII octet per cycle of ``eth_tx`` to the
    ``tx_clk``, ``tx_ctl`` and four ``tx_data`` pins.

    ``tx_clk`` is ``eth_tx``'s clock forwarded through an output DDR register
    (``io.DDRBuffer`` driven with 1 on the rising and 0 on the falling edge; on ECP5
    ``ODDRX1F``), so that it leaves the FPGA through the same kind of I/O cell and
    with the same delay as the data. ``tx_data`` carries ``txd[3:0]`` while ``tx_clk`` is
    high and ``txd[7:4]`` while it is low; ``tx_ctl`` carries ``tx_en``, then ``tx_en``
    XOR ``tx_er`` (RGMII 2.0, section 3.4). Clock and data leave edge-aligned, unless
    ``clk_delay_ps`` delays the clock (module documentation, "Clock-to-data skew").

    ``eth_tx`` must run at 125 MHz, from a clock of the design (e.g. a PLL output): it is
    the transmit clock of the link, independent of the PHY's receive clock. Frame
    boundaries and ``tx_er`` pass through unchanged; the adapter has no state besides
    its registers, and while ``eth_tx`` is in reset ``tx_en`` is low, i.e. the line idles.

    Parameters
    ----------
    clk, ctl : io.PortLike
        The ``tx_clk`` and ``tx_ctl`` pins (1 wide).
    data : io.PortLike
        The ``tx_data`` pins (4 wide), bit 0 first.
    clk_delay_ps : int
        Delay of ``tx_clk`` against the data, 0 .. :data:`MAX_DELAY_PS` picoseconds, made
        by the ECP5 I/O cell's ``DELAYG`` in steps of :data:`DELAY_TAP_PS` (rounded to the
        nearest). 0 (the default) for a PHY that delays the clock itself. It takes effect
        on an ECP5 platform; in simulation (no platform) the pins are edge-aligned.

    Ports
    -----
    gmii : In(GmiiTx)
        In ``eth_tx``.

    Latency: an octet on ``gmii`` at rising edge *k* of ``eth_tx`` goes into a register
    at *k*, into the DDR register at *k* + 1 and onto the pins, like the forwarded clock,
    one cycle later (on ECP5 ``ODDRX1F`` adds its own pipeline stages to clock and data
    alike). Throughput: one octet per cycle; ``gmii`` is never stalled.
    """

    gmii: In(GmiiTx)

    def __init__(self, *, clk, ctl, data, clk_delay_ps=0):
        self._clk = _check_port("clk", clk, 1)
        self._ctl = _check_port("ctl", ctl, 1)
        self._data = _check_port("data", data, 4)
        if (not isinstance(clk_delay_ps, int) or isinstance(clk_delay_ps, bool)
                or not 0 <= clk_delay_ps <= MAX_DELAY_PS):
            raise ValueError(f"clk_delay_ps must be an integer 0..{MAX_DELAY_PS}, "
                             f"not {clk_delay_ps!r}")
        self.clk_delay_taps = round(clk_delay_ps / DELAY_TAP_PS)
        super().__init__()

    def _forward_clock(self, m, platform):
        """``tx_clk``: 1 on the rising and 0 on the falling edge of ``eth_tx``, through the
        I/O cell's DDR register and, when asked for, its delay line."""
        if self.clk_delay_taps == 0 or platform is None:
            m.submodules.clk_ddr = clk = io.DDRBuffer("o", self._clk, o_domain="eth_tx")
            m.d.comb += [clk.o[0].eq(1), clk.o[1].eq(0)]
            return
        if getattr(platform, "family", None) != "ecp5":
            raise ValueError(f"clk_delay_ps needs an ECP5 platform's DELAYG, not {platform!r}")
        # io.DDRBuffer has no delay line: the ECP5 primitives it maps to, with the DELAYG
        # between the DDR register and the pin (nextpnr packs all three into the I/O cell)
        ddr_q, delayed = Signal(), Signal()
        m.submodules.clk_ddr = Instance("ODDRX1F", i_SCLK=ClockSignal("eth_tx"),
                                        i_RST=Const(0), i_D0=Const(1), i_D1=Const(0),
                                        o_Q=ddr_q)
        m.submodules.clk_delay = Instance("DELAYG", p_DEL_MODE="USER_DEFINED",
                                          p_DEL_VALUE=self.clk_delay_taps, i_A=ddr_q,
                                          o_Z=delayed)
        m.submodules.clk_pin = pin = io.Buffer("o", self._clk)
        m.d.comb += pin.o.eq(delayed)

    def elaborate(self, platform):
        m = Module()
        self._forward_clock(m, platform)
        m.submodules.ctl_ddr = ctl = io.DDRBuffer("o", self._ctl, o_domain="eth_tx")
        m.submodules.data_ddr = data = io.DDRBuffer("o", self._data, o_domain="eth_tx")

        # A register in the fabric, so that the long route to the I/O cell starts at a
        # flip-flop instead of at the MAC's logic.
        rising = Signal(5)          # txd[3:0], tx_en
        falling = Signal(5)         # txd[7:4], tx_en ^ tx_er
        m.d.eth_tx += [
            rising.eq(Cat(self.gmii.txd[:4], self.gmii.tx_en)),
            falling.eq(Cat(self.gmii.txd[4:], self.gmii.tx_en ^ self.gmii.tx_er)),
        ]
        m.d.comb += [
            data.o[0].eq(rising[:4]), ctl.o[0].eq(rising[4]),
            data.o[1].eq(falling[:4]), ctl.o[1].eq(falling[4]),
        ]
        return m
