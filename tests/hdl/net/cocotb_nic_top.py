"""cocotb side of tests/hdl/net/test_nic_top.py: NicTop on Verilator.

GMII through cocotbext-eth's ``GmiiSource``/``GmiiSink``, the registers through cocotbext-axi's
``AxiLiteMaster`` (by name, from the register map), frames built with scapy (helpers shared
with test_network_layer.py), replies and counters checked against
:class:`rnic.host.model.network_layer.NicNetModel`. Params (``$RNIC_PARAMS``): ``width``,
``connections``, ``arp_entries``.
"""

import ipaddress
import struct
import zlib

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Timer
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp
from cocotbext.eth import GmiiFrame, GmiiSink, GmiiSource
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_NOP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from rnic.host.driver import regs
from rnic.host.model.network_layer import NicNetModel
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX, RxDrop
from rnic.host.spec.regmap import NET_RX_COUNTERS
from rnic.sim.streams import TB
from test_network_layer import arp_frame, pad, tcp_checksum, with_tcp_checksum

ETH_NS = 8            # 125 MHz GMII
CORE_NS = 10          # 100 MHz core
#: What the test programs over the bus (not the reset values, so that the registers matter).
NIC_MAC = bytes.fromhex("02000a0700a5")
NIC_IP = "10.7.0.2"
PEER_MAC = "02:00:0a:07:00:01"
PEER_IP = "10.7.0.1"
STATIC_IP, STATIC_MAC = "10.7.0.200", bytes.fromhex("02000a0700c8")


def text(mac):
    return ":".join(f"{b:02x}" for b in mac)


class NicTB(TB):
    def __init__(self, dut):
        super().__init__(dut, period_ns=CORE_NS)
        for name in ("eth_rx_rst", "eth_tx_rst"):
            getattr(dut, name).value = 0
        Clock(dut.eth_rx_clk, ETH_NS, unit="ns").start(start_high=False)
        Clock(dut.eth_tx_clk, ETH_NS, unit="ns").start(start_high=True)
        self.gmii_src = GmiiSource(dut.gmii_rx__rxd, dut.gmii_rx__rx_er, dut.gmii_rx__rx_dv,
                                   dut.eth_rx_clk, dut.eth_rx_rst)
        self.gmii_snk = GmiiSink(dut.gmii_tx__txd, dut.gmii_tx__tx_er, dut.gmii_tx__tx_en,
                                 dut.eth_tx_clk, dut.eth_tx_rst)
        self.gmii_src.log.setLevel("WARNING")
        self.gmii_snk.log.setLevel("WARNING")

    async def start(self):
        dut = self.dut
        for name in ("rst", "eth_rx_rst", "eth_tx_rst"):
            getattr(dut, name).value = 1
        await Timer(8 * CORE_NS, unit="ns")
        for name in ("rst", "eth_rx_rst", "eth_tx_rst"):
            getattr(dut, name).value = 0
        await self.cycles(8)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), self.clk, self.rst)
        self.axil.write_if.log.setLevel("WARNING")
        self.axil.read_if.log.setLevel("WARNING")

    # -- registers by name
    async def rd(self, name):
        r = await self.axil.read(regs.reg(name).addr, 4)
        assert r.resp == AxiResp.OKAY, name
        return int.from_bytes(r.data, "little")

    async def wr(self, name, value=0, /, **fields):
        r = await self.axil.write(regs.reg(name).addr, regs.encode(name, value, **fields).to_bytes(4, "little"))
        assert r.resp == AxiResp.OKAY, name

    async def fields(self, name):
        return regs.decode(name, await self.rd(name))

    async def mac(self, prefix):
        return ((await self.rd(f"{prefix}_HI")) << 32 | await self.rd(f"{prefix}_LO")).to_bytes(6, "big")

    async def set_mac(self, prefix, mac):
        value = int.from_bytes(mac, "big")
        await self.wr(f"{prefix}_HI", mac=value >> 32)
        await self.wr(f"{prefix}_LO", mac=value & 0xFFFFFFFF)

    async def lookup(self, ip):
        await self.wr("NET_ARP_LOOKUP_IP", ip=int(ipaddress.IPv4Address(ip)))
        for _ in range(20):             # (the cache is searched one slot a cycle)
            fields = await self.fields("NET_ARP_LOOKUP")
            if fields["done"]:
                break
        assert fields["done"], f"the lookup of {ip} never got DONE"
        if not fields["hit"]:
            return None
        return await self.mac("NET_ARP_LOOKUP_MAC")

    async def counters(self):
        rx = {reason: await self.rd(name) for reason, name in NET_RX_COUNTERS}
        return rx, {name: await self.rd(name) for name in ("NET_RX_TCP", "NET_TX_FRAMES", "NET_TX_DROPPED")}

    # -- GMII
    def send(self, frame, *, fcs=None):
        frame = bytes(frame)
        if fcs is None:            # (no padding here: the frames are as the peer's MAC sends them)
            self.gmii_src.send_nowait(GmiiFrame.from_payload(frame, min_len=0))
        else:
            self.gmii_src.send_nowait(GmiiFrame.from_raw_payload(frame + fcs))

    async def quiet(self, *, limit_cycles=200_000):
        """Wait until everything sent went in and nothing came out for a while."""
        await self.gmii_src.wait()
        last, still, waited = -1, 0, 0
        while still < 3:
            await self.cycles(1000)
            waited += 1000
            count = self.gmii_snk.count()
            still = still + 1 if count == last else 0
            last = count
            assert waited < limit_cycles, "timeout"

    def received(self):
        out = []
        while not self.gmii_snk.empty():
            f = self.gmii_snk.recv_nowait()
            assert f.error is None or not any(f.error), "tx_er on gmii_tx"
            assert f.check_fcs(), "bad FCS on gmii_tx"
            out.append(bytes(f.get_payload()))
        return out


def to_nic():
    return Ether(dst=text(NIC_MAC), src=PEER_MAC)


def ping(rng, size, **ip_fields):
    return pad(to_nic() / IP(src=PEER_IP, dst=NIC_IP, id=rng.getrandbits(16), **ip_fields)
               / ICMP(type=8, id=rng.getrandbits(16), seq=rng.getrandbits(16)) / Raw(rng.randbytes(size)))


def traffic(rng):
    """(label, frame, fcs or None, the MAC's verdict) of the directed test, in order."""
    arp_for_us = arp_frame(1, psrc=PEER_IP, pdst=NIC_IP)
    tcp = TCP(sport=4000, dport=5000, flags="A", seq=rng.getrandbits(32))
    good = ping(rng, 56)
    good_tcp = pad(to_nic() / IP(src=PEER_IP, dst=NIC_IP) / tcp / Raw(rng.randbytes(100)))
    out = [
        ("arp request for us", arp_for_us, None, RxDrop.NONE),
        ("ping 0", ping(rng, 0), None, RxDrop.NONE),
        ("ping 56", ping(rng, 56), None, RxDrop.NONE),
        ("ping 1472", ping(rng, 1472), None, RxDrop.NONE),
        ("bad fcs", good, struct.pack("<L", zlib.crc32(good) ^ 1), RxDrop.FCS),
        ("runt", bytes(to_nic() / Raw(rng.randbytes(30))), None, RxDrop.RUNT),
        ("giant", bytes(to_nic() / Raw(rng.randbytes(1501))), None, RxDrop.GIANT),
        ("other mac", pad(Ether(dst="02:00:0a:07:00:ee", src=PEER_MAC) / IP(src=PEER_IP, dst=NIC_IP)
                          / ICMP(type=8)), None, RxDrop.OTHER_MAC),
        ("ping for the old (reset) ip", pad(to_nic() / IP(src=PEER_IP, dst=DEFAULT_NIC_IP) / ICMP(type=8)
                                           / Raw(b"old")), None, RxDrop.NONE),
        ("wrong ip", pad(to_nic() / IP(src=PEER_IP, dst="10.7.0.99") / ICMP(type=8)), None, RxDrop.NONE),
        ("udp", pad(to_nic() / IP(src=PEER_IP, dst=NIC_IP) / UDP(sport=1, dport=2) / Raw(b"u" * 20)),
         None, RxDrop.NONE),
        ("ip options", pad(to_nic() / IP(src=PEER_IP, dst=NIC_IP, options=[IPOption_NOP()] * 4)
                           / ICMP(type=8)), None, RxDrop.NONE),
        ("ip bad checksum", pad(to_nic() / IP(src=PEER_IP, dst=NIC_IP, chksum=0x1234) / ICMP(type=8)),
         None, RxDrop.NONE),
        ("tcp", good_tcp, None, RxDrop.NONE),
        ("tcp bad checksum", with_tcp_checksum(good_tcp, tcp_checksum(good_tcp) ^ 0x0010), None,
         RxDrop.NONE),
        ("tcp data offset 4", pad(to_nic() / IP(src=PEER_IP, dst=NIC_IP)
                                  / TCP(sport=4000, dport=5000, dataofs=4) / Raw(b"t" * 20)), None,
         RxDrop.NONE),
        ("ping after the bad ones", ping(rng, 100), None, RxDrop.NONE),
        ("arp reply for the static entry (not learned)",
         arp_frame(2, psrc=STATIC_IP, hwsrc="02:00:00:00:00:34", pdst=NIC_IP, dst=text(NIC_MAC)),
         None, RxDrop.NONE),
        ("arp request from a new host (learned)",
         arp_frame(1, psrc="10.7.0.9", hwsrc="02:00:00:00:00:09", pdst=NIC_IP), None, RxDrop.NONE),
    ]
    return out


def tcp_segment(frame):
    """The TCP segment of a frame to the NIC (without the Ethernet padding)."""
    ip = Ether(frame)[IP]
    return bytes(ip)[4 * ip.ihl:ip.len]


@cocotb.test()
async def registers_frames_and_counters(dut):
    """MAC/IP programmed over the bus; ARP, pings of 0/56/1472 and bad frames on GMII, the
    replies byte-identical to the model's; every counter read back over the bus; a static ARP
    entry written over the bus and seen in the lookup window and in behaviour; a REQUEST."""
    tb = NicTB(dut)
    await tb.start()
    p = tb.params

    # identity and reset values
    caps = await tb.fields("NET_CAPS")
    assert caps == {"network": 1, "arp_entries": p["arp_entries"]}, caps
    assert await tb.mac("NET_MAC") == DEFAULT_NIC_MAC
    assert await tb.rd("NET_IP") == int(ipaddress.IPv4Address(DEFAULT_NIC_IP))
    assert (await tb.fields("NET_PREFIX"))["prefix"] == DEFAULT_PREFIX
    assert (await tb.fields("NET_MAX_LEN"))["len"] == 1514
    rx, other = await tb.counters()
    assert not any(rx.values()) and not any(other.values()), (rx, other)

    # program the NIC and a static ARP entry (slot 0, where the model puts its static entry)
    await tb.set_mac("NET_MAC", NIC_MAC)
    await tb.wr("NET_IP", ip=int(ipaddress.IPv4Address(NIC_IP)))
    await tb.wr("NET_PREFIX", prefix=16)
    assert await tb.mac("NET_MAC") == NIC_MAC and (await tb.fields("NET_PREFIX"))["prefix"] == 16
    await tb.wr("NET_ARP_IP", ip=int(ipaddress.IPv4Address(STATIC_IP)))
    await tb.set_mac("NET_ARP_MAC", STATIC_MAC)
    await tb.wr("NET_ARP_ENTRY", index=0, valid=1, static=1)
    await tb.wr("NET_ARP_CMD", write=1)
    assert await tb.lookup(STATIC_IP) == STATIC_MAC
    assert await tb.lookup(PEER_IP) is None

    model = NicNetModel(mac=NIC_MAC, ip=NIC_IP, prefix=16, arp_cache_size=p["arp_entries"],
                        static_arp={STATIC_IP: STATIC_MAC})
    frames = traffic(tb.rng)
    want_tx, want_tcp = [], 0
    mac_counts = {reason: 0 for reason in RxDrop}
    for label, frame, fcs, mac_verdict in frames:
        tb.send(frame, fcs=fcs)
        mac_counts[mac_verdict] += 1
        if mac_verdict != RxDrop.NONE:
            continue
        result = model.receive(frame)
        want_tx += [(reply, label) for reply in result.replies]
        want_tcp += result.delivered is not None
        if result.delivered is not None:
            # the TCP engine answers a segment for no connection with a RST (RFC 9293
            # section 3.10.7.1) through the send path, to the peer it learned
            for rst in TcpEngine(ip=NIC_IP).receive(PEER_IP, tcp_segment(frame), 0):
                want_tx += [(f, "rst") for f in model.send_ipv4(PEER_IP, 6, rst.octets).frames]
    await tb.quiet()
    got = tb.received()
    # in order per kind; an ARP reply may pass an echo reply (the echo takes the next
    # request while it sends a reply, and the ARP request behind that one goes on)
    for kind, is_arp in (("ARP", True), ("echo", False)):
        mine = [f for f in got if (f[12:14] == b"\x08\x06") == is_arp]
        want = [(f, label) for f, label in want_tx if (f[12:14] == b"\x08\x06") == is_arp]
        for k, ((frame, label), m) in enumerate(zip(want, mine)):
            assert m == frame, f"{kind} reply {k} ({label}) differs:\n got {m.hex()}\nwant {frame.hex()}"
        assert len(mine) == len(want), f"{len(mine)} {kind} frames sent, the model sends {len(want)}"
    assert len(got) == len(want_tx) == 7, "two ARP replies, four echo replies and a RST"

    # the ARP cache: the static entry kept its MAC, the new host and the peer were learned
    for ip in (STATIC_IP, PEER_IP, "10.7.0.9", "10.7.0.77"):
        want = model.arp_cache.lookup(ipaddress.IPv4Address(ip))
        assert await tb.lookup(ip) == want, ip
    assert await tb.lookup(STATIC_IP) == STATIC_MAC

    # NET_MAX_LEN is the MAC's limit: a 1042-octet ping is a giant below 1000
    await tb.wr("NET_MAX_LEN", len=1000)
    tb.send(ping(tb.rng, 1000))
    mac_counts[RxDrop.GIANT] += 1
    await tb.quiet()
    await tb.wr("NET_MAX_LEN", len=1514)

    # an ARP request sent on command, as the model builds it
    await tb.wr("NET_ARP_IP", ip=int(ipaddress.IPv4Address("10.7.0.55")))
    await tb.wr("NET_ARP_CMD", request=1)
    await tb.quiet()
    assert not (await tb.fields("NET_ARP_STATUS"))["request_busy"]
    got = tb.received()
    assert got == [model.arp_request(ipaddress.IPv4Address("10.7.0.55"))], [g.hex() for g in got]

    # every counter over the bus
    rx, other = await tb.counters()
    want_rx = {reason: mac_counts[reason] for reason in RxDrop}
    for reason, n in model.counters.items():
        if reason not in (RxDrop.FCS, RxDrop.RUNT, RxDrop.GIANT, RxDrop.OTHER_MAC, RxDrop.OVERFLOW):
            want_rx[reason] = n
    assert rx == want_rx, {r.name: (rx[r], want_rx[r]) for r in RxDrop if rx[r] != want_rx[r]}
    assert want_rx[RxDrop.IP_OTHER] == 2 and want_rx[RxDrop.IP_PROTOCOL] == 1
    assert want_rx[RxDrop.IP_HEADER] == 1 and want_rx[RxDrop.IP_CHECKSUM] == 1
    assert want_rx[RxDrop.TCP_CHECKSUM] == 1 and want_rx[RxDrop.TCP_HEADER] == 1
    # sent: the replies, the RST and the ARP request
    assert other == {"NET_RX_TCP": want_tcp, "NET_TX_FRAMES": len(want_tx) + 1, "NET_TX_DROPPED": 0}, other
    assert want_tcp == 1
    assert await tb.rd("TCP_DROP_NO_CONNECTION") == 1 and await tb.rd("TCP_TX_SEGMENTS") == 1
    tb.log.info("counters: %s; %s", {r.name: n for r, n in rx.items() if n}, other)
    assert tb.gmii_snk.empty() and tb.gmii_snk.idle()
