"""cocotb side of tests/hdl/net/test_network_layer.py: NetworkLayer on Verilator against
NicNetModel. Params (``$RNIC_PARAMS``): ``width``, ``arp_entries``. Traffic and scoreboard
come from test_network_layer.py."""

import ipaddress

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from rnic.hdl.net.ipv4_tx import HEADERS_LEN
from rnic.hdl.net.l3_layouts import ArpWrite, Ipv4TxBeat
from rnic.hdl.net.layouts import FrameBeat
from rnic.host.model.ipv4 import header_checksum_ok
from rnic.host.spec.net import (DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX, MAX_FRAME_LEN,
                                TxDrop)
from rnic.sim.streams import TB, assert_drained, bytes_to_beats
from test_network_layer import (arp_frame, bad_frames, check, new_model, pad, ping, scenario,
                                static_writes)


def frame_beats(frame, width):
    """The FrameBeat dicts of ``frame``."""
    return [{k: v for k, v in beat.items() if k != "conn"} for beat in bytes_to_beats(frame, width)]


class NetTB(TB):
    def __init__(self, dut, *, idle=0.0, tx_bp=0.0, tcp_bp=0.0):
        super().__init__(dut)
        self.W = self.params["width"]
        self.layout = FrameBeat(width=self.W)
        dut.mac.value = int.from_bytes(DEFAULT_NIC_MAC, "big")
        dut.ip.value = int(ipaddress.IPv4Address(DEFAULT_NIC_IP))
        dut.prefix.value = DEFAULT_PREFIX
        dut.gateway.value = 0
        dut.arp_lookup_ip.value = 0
        self.rx = self.source("rx", self.layout, idle_prob=idle)
        self.ip_tx = self.source("ip_tx", Ipv4TxBeat(width=self.W))
        self.arp_request = self.source("arp_request", None)
        self.arp_write = self.source("arp_write", ArpWrite(entries=self.params["arp_entries"]))
        self.tx_frames, self.tcp_frames, self.drops, self.tx_drops = [], [], [], []
        self.tx_times = []
        self._open = {"tx": None, "tcp": None}
        self.tx = self.sink("tx", self.layout, backpressure_prob=tx_bp,
                            callback=lambda beat: self._beat("tx", beat, self.tx_frames))
        self.tcp = self.sink("tcp", self.layout, backpressure_prob=tcp_bp,
                             callback=lambda beat: self._beat("tcp", beat, self.tcp_frames))
        cocotb.start_soon(self._watch_drops())

    def _beat(self, port, beat, frames):
        """Framing rules of a frame stream, then collect the frame."""
        n, W = beat["n"], self.W
        assert 1 <= n <= W, f"{port}: beat with n = {n}"
        is_open = self._open[port] is not None
        assert bool(beat["first"]) != is_open, f"{port}: first = {beat['first']} with " \
            f"{'a' if is_open else 'no'} frame open"
        if not is_open:
            self._open[port] = bytearray()
        if not beat["last"]:
            assert n == W, f"{port}: a beat that is not the last has n = {n}"
        self._open[port] += (beat["data"] & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
        if beat["last"]:
            frames.append(bytes(self._open[port]))
            self._open[port] = None
            if port == "tx":
                self.tx_times.append(self.cycle())

    async def _watch_drops(self):
        edge, settle = RisingEdge(self.clk), ReadOnly()
        while True:
            await edge
            await settle
            if int(self.dut.drop__valid.value):
                self.drops.append(int(self.dut.drop__reason.value))
            if int(self.dut.tx_drop__valid.value):
                self.tx_drops.append(TxDrop(int(self.dut.tx_drop__reason.value)))

    async def start(self):
        await self.reset()
        self.arp_write.extend(static_writes())
        await self.arp_write.wait_idle()

    async def run(self, frames, *, timeout_cycles=400_000):
        """Send ``frames`` (label, octets) and wait until the layer is quiet; check."""
        for _, frame in frames:
            self.rx.extend(frame_beats(frame, self.W))
        start = self.cycle()
        await self.rx.wait_idle()
        # quiet: no frame finished for longer than the longest one takes under the
        # back-pressure of its output (a 1514-octet frame, W octets a beat)
        bp = max(self.tx.backpressure_prob, self.tcp.backpressure_prob)
        window = max(500, round(2 * MAX_FRAME_LEN / self.W / (1 - bp)))
        quiet = 0
        last = None
        while quiet < 4:
            await self.cycles(window)
            state = (len(self.tx_frames), len(self.tcp_frames), len(self.drops))
            quiet = quiet + 1 if state == last else 0
            last = state
            assert self.cycle() - start < timeout_cycles, "timeout"
        return check(frames, self.tx_frames, self.tcp_frames, self.drops)

    async def check_cache(self, model):
        """Every address the model's cache holds, and some it does not: the same lookup."""
        probes = [entry.ip for entry in model.arp_cache.slots if entry is not None]
        probes += [ipaddress.IPv4Address(f"169.254.7.{k}") for k in range(1, 40)]
        for ip in probes:
            self.dut.arp_lookup_ip.value = int(ip)
            await self.cycles(1)
            for _ in range(2 * self.params["arp_entries"] + 1):
                await ReadOnly()
                if self.dut.arp_lookup_done.value:
                    break
                await RisingEdge(self.clk)
            assert self.dut.arp_lookup_done.value, f"the lookup of {ip} never got done"
            want = model.arp_cache.lookup(ip)
            assert int(self.dut.arp_lookup_hit.value) == (want is not None), ip
            if want is not None:
                assert int(self.dut.arp_lookup_mac.value) == int.from_bytes(want, "big"), ip
            await RisingEdge(self.clk)

    def finish(self):
        assert self._open == {"tx": None, "tcp": None}, "a frame was never closed"
        assert_drained(self.rx, self.tx, self.tcp, self.arp_write, self.ip_tx, self.arp_request)


@cocotb.test()
async def directed_with_idles_and_backpressure(dut):
    """Every drop reason and the odd frames, each followed by a good ping; ARP for us and
    learning; pings of 0, 56, 1472 and a random sweep; TCP frames; idles on rx and random
    back-pressure on tx and tcp."""
    tb = NetTB(dut, idle=0.3, tx_bp=0.3, tcp_bp=0.3)
    await tb.start()
    model = await tb.run(scenario(tb.rng))
    await tb.check_cache(model)
    tb.log.info("W=%d: %d replies, %d tcp frames, %d drops", tb.W, len(tb.tx_frames),
                len(tb.tcp_frames), len(tb.drops))
    tb.finish()


@cocotb.test()
async def back_to_back(dut):
    """The same traffic at one beat per cycle, no back-pressure; then the latency of an ARP
    reply and of a ping on an idle layer."""
    tb = NetTB(dut)
    await tb.start()
    model = await tb.run(scenario(tb.rng, sweep=8))
    await tb.check_cache(model)
    for label, frame in (("arp", arp_frame(1)), ("ping 56", ping(56, tb.rng))):
        tb.tx_times.clear()
        count = len(tb.tx_frames)
        beats = frame_beats(frame, tb.W)
        tb.rx.extend(beats)
        await tb.rx.wait_idle()
        sent = tb.cycle()
        while len(tb.tx_frames) == count:
            await tb.cycles(1)
        reply_beats = (len(tb.tx_frames[-1]) + tb.W - 1) // tb.W
        tb.log.info("W=%d: %s: %d request beats, reply's last beat %d cycles after the "
                    "request's last (first beat about %d)", tb.W, label, len(beats),
                    tb.tx_times[-1] - sent, tb.tx_times[-1] - sent - reply_beats + 1)
    tb.finish()


@cocotb.test()
async def heavy_backpressure(dut):
    """Bad frames and pings while tx and tcp are stalled most of the time."""
    tb = NetTB(dut, idle=0.1, tx_bp=0.8, tcp_bp=0.8)
    await tb.start()
    frames = []
    for label, frame in bad_frames(tb.rng):
        frames += [(label, frame), ("ping", ping(tb.rng.randint(0, 1472), tb.rng))]
    await tb.run(frames)
    tb.finish()


def packet_beats(dst, proto, payload, width):
    """The Ipv4TxBeat dicts of a packet: room for the headers, then ``payload``."""
    beats = frame_beats(bytes(HEADERS_LEN) + payload, width)
    for beat in beats:
        beat.update(dst=int(ipaddress.IPv4Address(dst)), proto=proto, length=len(payload))
    return beats


def without_ident(frame):
    """An IPv4 frame with its identification and header checksum zeroed (they depend on
    the order in which echo replies and packets take identifications)."""
    return frame[:18] + bytes(2) + frame[20:24] + bytes(2) + frame[26:]


@cocotb.test()
async def send_side_ports(dut):
    """Packets on ip_tx leave on tx as the model's send_ipv4 builds them; one to an unknown
    neighbour is dropped (ARP_MISS, on tx_drop) and the model's ARP request sent in its
    place; host ARP requests go out too; all interleaved with echo replies under
    back-pressure; every IPv4 frame sent has its own identification and a good header
    checksum."""
    tb = NetTB(dut, idle=0.2, tx_bp=0.4)
    await tb.start()
    model = new_model()
    pings = [ping(tb.rng.randint(0, 1472), tb.rng) for _ in range(6)]
    packets = [(tb.rng.choice(["169.254.7.200", "169.254.7.200", "169.254.7.99"]), 6,
                tb.rng.randbytes(tb.rng.choice([0, 1, 20, tb.rng.randint(0, 1480)])))
               for _ in range(10)]
    targets = ["169.254.7.1", "169.254.7.77"]
    for dst, proto, payload in packets:
        tb.ip_tx.extend(packet_beats(dst, proto, payload, tb.W))
    for target in targets:
        tb.arp_request.append(int(ipaddress.IPv4Address(target)))
    for frame in pings:
        tb.rx.extend(frame_beats(frame, tb.W))
    want_echo = [r for f in pings for r in model.receive(f).replies]
    want_arp = [model.arp_request(t) for t in targets]
    want_ip, want_drops = [], []
    for dst, proto, payload in packets:
        result = model.send_ipv4(dst, proto, payload)
        (want_ip if result.drop == TxDrop.NONE else want_arp).extend(result.frames)
        if result.drop != TxDrop.NONE:
            want_drops.append(result.drop)
    assert want_drops and want_ip
    total = len(want_echo) + len(want_arp) + len(want_ip)
    for _ in range(2000):
        if len(tb.tx_frames) >= total:
            break
        await tb.cycles(50)
    await tb.cycles(500)
    got = [pad(f) for f in tb.tx_frames]
    assert len(got) == total, f"{len(got)} frames on tx, {total} expected"
    arp = [f for f in got if f[12:14] == b"\x08\x06"]
    ip = [f for f in got if f[12:14] == b"\x08\x00"]
    assert sorted(arp) == sorted(want_arp)
    assert [without_ident(f) for f in ip if f[23] == 1] == [without_ident(f) for f in want_echo]
    assert [without_ident(f) for f in ip if f[23] == 6] == [without_ident(f) for f in want_ip]
    assert sorted(int.from_bytes(f[18:20], "big") for f in ip) == list(range(len(ip)))
    assert all(header_checksum_ok(f[14:]) for f in ip)
    assert tb.tx_drops == want_drops
    tb.finish()
