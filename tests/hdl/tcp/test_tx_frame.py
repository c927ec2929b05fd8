"""TcpTxFrame in Amaranth's simulator against the model's TcpSegment.build: every packet
byte-identical to the model's segment behind 34 octets of room, with its destination,
protocol and length, for SYNs with options, control segments and data of every length,
under random idles on the payload and back-pressure on the output, at every width; the
latency and the gap between packets of the docstring."""

import ipaddress
import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.tx_frame import TcpTxFrame
from rnic.host.model import ipv4, tcp
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_PEER_IP
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from tests.hdl.tcp.bench import beats, flag_bits, send

NIC = int(ipaddress.IPv4Address(DEFAULT_NIC_IP))


def descriptors(rng, count):
    """(descriptor dict, payload, expected segment octets)."""
    out = []
    for k in range(count):
        dst = rng.choice([DEFAULT_PEER_IP, "10.1.2.3", "169.254.7.200"])
        kind = rng.choice(["syn", "control", "data", "data"]) if k >= 4 else \
            ["syn", "control", "data", "data"][k]
        fields = dict(src_port=rng.getrandbits(16), dst_port=rng.getrandbits(16),
                      seq=rng.choice([rng.getrandbits(32), SEQ_MOD - 1]),
                      ack=rng.getrandbits(32), window=rng.getrandbits(16))
        syn = kind == "syn"
        mss, ws = rng.getrandbits(16), rng.randrange(15)
        ws_present = rng.random() < 0.7
        if syn:
            flags = rng.choice([TcpFlag.SYN, TcpFlag.SYN | TcpFlag.ACK])
            payload = b""
            options = tcp.build_options(mss=mss, window_scale=ws if ws_present else None)
        else:
            flags = rng.choice([TcpFlag.ACK, TcpFlag.RST, TcpFlag.RST | TcpFlag.ACK,
                                TcpFlag.FIN | TcpFlag.ACK, TcpFlag.PSH | TcpFlag.ACK])
            size = 0 if kind == "control" else rng.choice(
                [1, 2, 3, 4, 5, 6, 7, 8, 9, rng.randint(10, 100), rng.randint(100, 1460)])
            payload = rng.randbytes(size)
            options = b""
        segment = tcp.TcpSegment(flags=flags, options=options, payload=payload,
                                 **fields).build(DEFAULT_NIC_IP, dst)
        desc = dict(dst_ip=int(ipaddress.IPv4Address(dst)), flags=int(flags),
                    length=len(payload), payload_sum=ipv4.ones_sum(payload),
                    syn_options=int(syn), mss=mss, ws=ws, ws_present=int(ws_present), **fields)
        out.append((desc, payload, segment))
    return out


def run(width, items, *, seed, idle=0.3, backpressure=0.3):
    rng = random.Random(seed)
    dut = TcpTxFrame(width=width)
    packets = []
    cycles = {"desc": [], "first": [], "last": []}

    async def feed_desc(ctx):
        ctx.set(dut.ip, NIC)
        for desc, _, _ in items:
            ctx.set(dut.desc.payload, {**desc, "flags": flag_bits(desc["flags"])})
            ctx.set(dut.desc.valid, 1)
            await ctx.tick().until(dut.desc.ready)
        ctx.set(dut.desc.valid, 0)

    async def feed_payload(ctx):
        await send(ctx, dut.payload, [b for _, payload, _ in items for b in beats(payload, width)],
                   rng, idle=idle)

    async def collect(ctx):
        frame, cycle = b"", 0
        while len(packets) < len(items):
            ctx.set(dut.o.ready, rng.random() >= backpressure)
            _, _, valid, ready, beat, desc_valid = await ctx.tick().sample(
                dut.o.valid, dut.o.ready, dut.o.payload, dut.desc.valid)
            cycle += 1
            if valid and beat.first and not frame:
                meta = (int(beat.dst), int(beat.proto), int(beat.length))
            if valid and ready:
                assert bool(beat.first) == (frame == b"")
                assert beat.n == width or beat.last
                assert (int(beat.dst), int(beat.proto), int(beat.length)) == meta
                frame += int(beat.data).to_bytes(width, "little")[:beat.n]
                if beat.first:
                    cycles["first"].append(cycle)
                if beat.last:
                    cycles["last"].append(cycle)
                    packets.append((meta, frame))
                    frame = b""

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feed_desc)
    sim.add_testbench(feed_payload)
    sim.add_testbench(collect)
    sim.run()
    return packets, cycles


@pytest.mark.parametrize("width", [4, 8, 16, 32])
def test_against_model(width):
    rng = random.Random(width)
    items = descriptors(rng, 60)
    packets, _ = run(width, items, seed=width)
    assert len(packets) == len(items)
    for k, ((desc, _, segment), (meta, frame)) in enumerate(zip(items, packets)):
        assert meta == (desc["dst_ip"], 6, len(segment)), k
        assert frame[:34] == bytes(34), k
        assert frame[34:] == segment, (k, desc)
        assert tcp.checksum_ok(DEFAULT_NIC_IP, str(ipaddress.IPv4Address(desc["dst_ip"])),
                               frame[34:])


def test_latency_and_gap():
    """Without idles or back-pressure: the first beat 3 cycles after the descriptor, and
    2 idle cycles between packets."""
    rng = random.Random(1)
    items = [d for d in descriptors(rng, 12) if d[0]["length"] == 0][:3]
    packets, cycles = run(4, items, seed=1, idle=0, backpressure=0)
    assert len(packets) == 3
    assert cycles["first"][0] - 1 == 3     # (counted from 1: the sample of cycle 0 is 1)
    for last, first in zip(cycles["last"], cycles["first"][1:]):
        assert first - last == 3, cycles
