# amaranth: UnusedElaboratable=no
"""AxiRam (hdl/axi_ram.py): random write bursts (single beats among them, address and data
offered independently, byte strobes) and read bursts with random back-pressure, against a
bytearray; every write answered once, every read beat the memory's octets, ``rlast`` on
each burst's last beat, and a write beat a cycle when the master keeps both channels full."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.axi_ram import AxiRam
from tests.hdl.axi_master import read_burst, write_burst

W = 4
DEPTH = 64


async def _write(ctx, dut, rng, memory, bursts):
    for addr, data in bursts:
        beats = [data[k:k + W] for k in range(0, len(data), W)]
        strobes = [rng.getrandbits(W) for _ in beats]
        await write_burst(ctx, dut.w, addr=addr, beats=beats, strobes=strobes, rng=rng)
        for k, beat in enumerate(beats):
            word = (addr // W + k) % DEPTH
            for lane in range(W):
                if strobes[k] >> lane & 1:
                    memory[word * W + lane] = beat[lane]


async def _responses(ctx, dut, rng, count):
    got = 0
    while got < count:
        ctx.set(dut.w.bready, rng.random() < 0.6)
        _, _, bv, br = await ctx.tick().sample(dut.w.bvalid, dut.w.bready)
        got += bool(bv and br)
    ctx.set(dut.w.bready, 0)
    for _ in range(8):                         # no response more than the writes
        _, _, bv = await ctx.tick().sample(dut.w.bvalid)
        assert not bv


async def _read(ctx, dut, rng, memory, addr, beats):
    got = await read_burst(ctx, dut.r, addr=addr, beats=beats, width=W, rng=rng)
    word = addr // W
    want = b"".join(bytes(memory[((word + k) % DEPTH) * W:][:W]) for k in range(beats))
    assert got == want


@pytest.mark.parametrize("seed", [1, 2])
def test_random_bursts(seed):
    dut = AxiRam(data_width=8 * W, addr_width=16, depth=DEPTH)
    rng = random.Random(seed)
    memory = bytearray(DEPTH * W)
    bursts = [(rng.randrange(0, 4 * DEPTH * W, W), rng.randbytes(W * rng.choice([1, 1, 3, 9])))
              for _ in range(40)]

    async def bench(ctx):
        await _write(ctx, dut, rng, memory, bursts)
        for _ in range(20):
            await _read(ctx, dut, rng, memory, rng.randrange(0, 2 * DEPTH * W, W),
                        rng.choice([1, 2, 16]))

    async def responses(ctx):
        await _responses(ctx, dut, random.Random(seed + 10), len(bursts))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_testbench(responses)
    sim.run()


def test_single_beats_at_full_rate():
    """Single-beat writes with address and data offered together go at a beat a cycle."""
    dut = AxiRam(data_width=8 * W, addr_width=16, depth=DEPTH)

    async def bench(ctx):
        w = dut.w
        ctx.set(w.bready, 1)
        taken = 0
        for k in range(32):
            ctx.set(w.awaddr, k * W)
            ctx.set(w.wdata, k)
            ctx.set(w.wstrb, 0xF)
            for name in ("awvalid", "wvalid", "wlast"):
                ctx.set(getattr(w, name), 1)
            _, _, awr, wr = await ctx.tick().sample(w.awready, w.wready)
            assert awr and wr, k
            taken += 1
        assert taken == 32

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_parameters_checked():
    with pytest.raises(ValueError, match="depth must be a power of 2"):
        AxiRam(data_width=32, addr_width=16, depth=48)
    with pytest.raises(ValueError, match="multiple of 8"):
        AxiRam(data_width=12, addr_width=16, depth=16)
