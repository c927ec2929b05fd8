"""OctetsToBeats and BeatsToOctets in Amaranth's simulator: random frames, random idles
and back-pressure, framing rules, and one octet per cycle when nothing stalls."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.net.width import BeatsToOctets, OctetsToBeats


def beats(data, width):
    count = (len(data) + width - 1) // width
    return [{"data": int.from_bytes(data[i * width:(i + 1) * width], "little"),
             "n": len(data[i * width:(i + 1) * width]), "first": int(i == 0),
             "last": int(i == count - 1)} for i in range(count)]


def run(dut, in_width, out_width, frames, *, seed, idle=0.0, stall=0.0):
    """Send ``frames`` through ``dut``; return (output frames, cycles from first to last
    output beat)."""
    total = sum(len(f) for f in frames)
    got, cycles = [], []

    async def source(ctx):
        rng = random.Random(seed)
        for frame in frames:
            for beat in beats(frame, in_width):
                while rng.random() < idle:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                ctx.set(dut.i.payload, beat)
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)

    async def sink(ctx):
        rng = random.Random(seed + 1)
        octets, cycle, current = 0, 0, None
        while octets < total:
            ready = rng.random() >= stall
            ctx.set(dut.o.ready, ready)
            _, _, valid, p = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycle += 1
            assert cycle < 100_000
            if not (valid and ready):
                continue
            n = p.n
            assert 1 <= n <= out_width
            assert bool(p.first) == (current is None)
            if not p.last:
                assert n == out_width, "a beat before the last is full"
            if current is None:
                current = bytearray()
            current += (p.data & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
            octets += n
            cycles.append(cycle)
            if p.last:
                got.append(bytes(current))
                current = None
        for _ in range(20):
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            assert not valid, "an extra beat"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    return got, cycles[-1] - cycles[0] + 1


def frames(rng, count):
    return [rng.randbytes(rng.choice([1, 2, 3, rng.randint(1, 80), rng.randint(60, 300)]))
            for _ in range(count)]


@pytest.mark.parametrize("width", [4, 8, 32])
def test_pack_and_unpack(width):
    rng = random.Random(width)
    sent = frames(rng, 60)
    got, _ = run(OctetsToBeats(width=width), 1, width, sent, seed=width, idle=0.3, stall=0.3)
    assert got == sent
    got, _ = run(BeatsToOctets(width=width), width, 1, sent, seed=width, idle=0.3, stall=0.3)
    assert got == sent


@pytest.mark.parametrize("width", [4, 8])
def test_one_octet_per_cycle(width):
    rng = random.Random(3)
    sent = frames(rng, 30)
    total = sum(map(len, sent))
    _, cycles = run(BeatsToOctets(width=width), width, 1, sent, seed=1)
    assert cycles == total
    got, cycles = run(OctetsToBeats(width=width), 1, width, sent, seed=1)
    assert got == sent and cycles <= total


def test_bad_width():
    import gc
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the half-built components are never elaborated
        with pytest.raises(ValueError, match="12"):
            OctetsToBeats(width=12)
        with pytest.raises(ValueError, match="3"):
            BeatsToOctets(width=3)
        gc.collect()
