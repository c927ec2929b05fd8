"""Ipv4Tx (with a real ArpCache) in Amaranth's simulator against NicNetModel.send_ipv4:
every frame byte-identical to the model's, every drop with the model's reason in order, an
ARP request for the model's next hop on each miss, under random idle cycles and
back-pressure, at W = 4 and 8; the latency of the docstring."""

import ipaddress
import random

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.sim import Simulator

from rnic.hdl.net.arp_cache import ArpCache
from rnic.hdl.net.ipv4_tx import HEADERS_LEN, Ipv4Tx
from rnic.host.model.network_layer import NicNetModel
from rnic.host.spec.net import (DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX, MIN_FRAME_LEN,
                                MTU, IPV4_HEADER_LEN, TxDrop)

NIC_IP = int(ipaddress.IPv4Address(DEFAULT_NIC_IP))
#: Neighbours with a static ARP entry (one of them the gateway of the routed runs).
KNOWN = {"169.254.7.1": bytes.fromhex("02000a070001"), "169.254.7.200": bytes.fromhex("02000a0700c8")}
GATEWAY = "169.254.7.1"
#: Destinations: known neighbours, an unknown one, and addresses beyond the prefix.
DESTINATIONS = [*KNOWN, "169.254.7.99", "10.1.2.3", "192.0.2.77"]


class Harness(Elaboratable):
    """Ipv4Tx on an ArpCache, with the identification counter of NetworkLayer."""

    def __init__(self, width):
        self.tx = Ipv4Tx(width=width)
        self.cache = ArpCache(entries=4)
        self.ident = Signal(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx = tx = self.tx
        m.submodules.cache = cache = self.cache
        m.d.comb += [cache.tx_lookup_ip.eq(tx.lookup_ip), tx.lookup_hit.eq(cache.tx_lookup_hit),
                     tx.lookup_mac.eq(cache.tx_lookup_mac), tx.ident.eq(self.ident),
                     cache.learn.valid.eq(0)]
        with m.If(tx.ident_take):
            m.d.sync += self.ident.eq(self.ident + 1)
        return m


def packets(rng, count):
    """(destination, protocol, payload) of ``count`` packets."""
    sizes = [0, 1, 5, 6, 26, MTU - IPV4_HEADER_LEN]
    return [(rng.choice(DESTINATIONS), rng.choice([6, 17, 1]),
             rng.randbytes(sizes[k] if k < len(sizes) else rng.randint(0, 300)))
            for k in range(count)]


def beats(frame, width, dst, proto, length):
    out = []
    for k in range(0, len(frame), width):
        chunk = frame[k:k + width]
        out.append({"data": int.from_bytes(chunk, "little"), "n": len(chunk), "first": k == 0,
                    "last": k + width >= len(frame), "dst": int(ipaddress.IPv4Address(dst)),
                    "proto": proto, "length": length})
    return out


def run(width, items, *, gateway, seed, idle=0.3, backpressure=0.3):
    """Send ``items`` through the harness; returns (frames, drops, ARP requests, first-beat
    latencies in cycles)."""
    rng = random.Random(seed)
    dut = Harness(width)
    tx = dut.tx
    frames, drops, requests, latencies = [], [], [], []
    offered = []

    async def setup_and_drive(ctx):
        ctx.set(tx.mac, int.from_bytes(DEFAULT_NIC_MAC, "big"))
        ctx.set(tx.ip, NIC_IP)
        ctx.set(tx.prefix, DEFAULT_PREFIX)
        ctx.set(tx.gateway, int(ipaddress.IPv4Address(gateway)) if gateway else 0)
        for k, (ip, mac) in enumerate(KNOWN.items()):
            ctx.set(dut.cache.write.payload, {"index": k, "valid": 1, "static": 1,
                                              "ip": int(ipaddress.IPv4Address(ip)),
                                              "mac": int.from_bytes(mac, "big")})
            ctx.set(dut.cache.write.valid, 1)
            await ctx.tick()
        ctx.set(dut.cache.write.valid, 0)
        # a stray beat without a packet is thrown away
        ctx.set(tx.i.payload, {"data": 0xEE, "n": 1, "first": 0, "last": 1})
        ctx.set(tx.i.valid, 1)
        await ctx.tick().until(tx.i.ready)
        for dst, proto, payload in items:
            frame = bytes(HEADERS_LEN) + payload
            for beat in beats(frame, width, dst, proto, len(payload)):
                while rng.random() < idle:
                    ctx.set(tx.i.valid, 0)
                    await ctx.tick()
                ctx.set(tx.i.payload, beat)
                ctx.set(tx.i.valid, 1)
                if beat["first"]:
                    offered.append(None)
                await ctx.tick().until(tx.i.ready)
        ctx.set(tx.i.valid, 0)
        await ctx.tick().repeat(300)

    async def collect(ctx):
        cycle, frame, waiting_since = 0, None, None
        async for _, _, valid, ready, payload, i_valid, i_first, d_valid, d_reason, a_valid, \
                a_ip in ctx.tick().sample(tx.o.valid, tx.o.ready, tx.o.payload, tx.i.valid,
                                          tx.i.payload.first, tx.drop.valid, tx.drop.reason,
                                          tx.arp_request.valid, tx.arp_request.payload):
            if i_valid and i_first and waiting_since is None and frame is None:
                waiting_since = cycle
            if valid and waiting_since is not None and payload.first:
                latencies.append(cycle - waiting_since)
                waiting_since = None
            if d_valid:
                drops.append(TxDrop(int(d_reason)))
                waiting_since = None
            if a_valid:
                requests.append(str(ipaddress.IPv4Address(a_ip)))
            if valid and ready:
                n = payload.n
                frame = (frame or b"") + (payload.data & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
                if payload.last:
                    frames.append(frame)
                    frame = None
            ctx.set(tx.o.ready, rng.random() >= backpressure)
            cycle += 1

    async def arp_sink(ctx):
        ctx.set(tx.arp_request.ready, 1)

    sim = Simulator(dut)
    sim.add_clock(8e-9)
    sim.add_testbench(setup_and_drive)
    sim.add_testbench(collect, background=True)
    sim.add_testbench(arp_sink)
    sim.run()
    return frames, drops, requests, latencies


def pad(frame):
    return frame + bytes(max(0, MIN_FRAME_LEN - len(frame)))


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("gateway", [GATEWAY, None])
def test_against_model(width, gateway):
    rng = random.Random(width * 7 + bool(gateway))
    items = packets(rng, 40)
    model = NicNetModel(mac=DEFAULT_NIC_MAC, ip=DEFAULT_NIC_IP, prefix=DEFAULT_PREFIX,
                        static_arp=KNOWN, gateway=gateway)
    want_frames, want_drops, want_requests = [], [], []
    for dst, proto, payload in items:
        result = model.send_ipv4(dst, proto, payload)
        if result.drop == TxDrop.NONE:
            want_frames.append(result.frames[0])
        else:
            want_drops.append(result.drop)
            if result.drop == TxDrop.ARP_MISS:
                want_requests.append(str(ipaddress.IPv4Address(result.frames[0][38:42])))
    frames, drops, requests, _ = run(width, items, gateway=gateway, seed=width)
    assert want_drops and want_frames, "the traffic exercises both outcomes"
    assert [pad(f) for f in frames] == want_frames
    assert drops == want_drops
    assert requests == want_requests
    if gateway is None:
        assert TxDrop.NO_ROUTE in drops
    else:
        assert TxDrop.NO_ROUTE not in drops


def test_latency_and_back_to_back():
    """Without idles or back-pressure: the first beat leaves 4 cycles after it is offered,
    and each frame keeps every octet."""
    items = [("169.254.7.200", 6, bytes(range(n))) for n in (0, 40, 100)]
    frames, drops, _, latencies = run(4, items, gateway=None, seed=1, idle=0, backpressure=0)
    assert len(frames) == 3 and not drops
    assert latencies == [4, 4, 4]
    assert [len(f) for f in frames] == [HEADERS_LEN + n for n in (0, 40, 100)]
