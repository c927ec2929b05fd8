# amaranth: UnusedElaboratable=no
"""The stream register slice (rnic.hdl.stream_slice) in Amaranth's simulator: order, no loss,
one beat per cycle, and ready/valid as flip-flop outputs."""

import random

import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from rnic.hdl.stream_slice import StreamSlice

LAYOUT = data.StructLayout({"data": unsigned(16), "last": unsigned(1)})


def _simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _run(p_valid, p_ready, n_beats, seed, full_rate=True):
    dut = StreamSlice(LAYOUT, full_rate=full_rate)
    rng = random.Random(seed)
    sent = [{"data": rng.randrange(1 << 16), "last": rng.randrange(2)} for _ in range(n_beats)]
    got = []
    cycles = [0]

    async def bench(ctx):
        k = 0
        while len(got) < n_beats:
            v = k < n_beats and rng.random() < p_valid
            r = rng.random() < p_ready
            ctx.set(dut.i.valid, v)
            if v:
                ctx.set(dut.i.payload, sent[k])
            ctx.set(dut.o.ready, r)
            i_ready, o_valid, o_payload = ctx.get(dut.i.ready), ctx.get(dut.o.valid), ctx.get(dut.o.payload)
            await ctx.tick()
            if v and i_ready:
                k += 1
            if o_valid and r:
                got.append({"data": o_payload.data, "last": o_payload.last})
            cycles[0] += 1
            assert cycles[0] < 20 * n_beats + 100, "stream stalled"
        ctx.set(dut.i.valid, 0)
        ctx.set(dut.o.ready, 1)
        for _ in range(5):                        # nothing more comes out
            assert ctx.get(dut.o.valid) == 0, "a beat left over"
            await ctx.tick()

    _simulate(dut, bench)
    assert got == sent
    return cycles[0]


@pytest.mark.parametrize("p_valid, p_ready", [(1.0, 0.5), (0.5, 1.0), (0.7, 0.3), (0.3, 0.7)])
def test_order_and_no_loss_under_backpressure(p_valid, p_ready):
    _run(p_valid, p_ready, 400, seed=int(p_valid * 10 + p_ready * 100))


def test_one_beat_per_cycle():
    n = 200
    cycles = _run(1.0, 1.0, n, seed=7)
    assert cycles <= n + 2, f"{n} beats took {cycles} cycles"


@pytest.mark.parametrize("p_valid, p_ready", [(1.0, 1.0), (1.0, 0.5), (0.3, 0.7)])
def test_half_rate_order_and_no_loss(p_valid, p_ready):
    n = 300
    cycles = _run(p_valid, p_ready, n, seed=int(p_valid * 10 + p_ready * 100) + 1, full_rate=False)
    if p_valid == p_ready == 1.0:                 # one beat every two cycles, no slower
        assert 2 * n - 1 <= cycles <= 2 * n + 2, f"{n} beats took {cycles} cycles"


def test_half_rate_ready_is_a_register():
    dut = StreamSlice(LAYOUT, full_rate=False)
    seen = []

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 0)
        await ctx.tick()                          # the beat is taken: ready falls
        seen.append(ctx.get(dut.i.ready))
        ctx.set(dut.o.ready, 1)                   # taken at o: ready rises only after the edge
        seen.append(ctx.get(dut.i.ready))
        await ctx.tick()
        seen.append(ctx.get(dut.i.ready))

    _simulate(dut, bench)
    assert seen == [0, 0, 1]


def test_ready_does_not_depend_on_output_ready_combinationally():
    dut = StreamSlice(LAYOUT)
    seen = []

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 0)
        for _ in range(3):                        # fill output and skid registers
            await ctx.tick()
        assert ctx.get(dut.i.ready) == 0
        ctx.set(dut.o.ready, 1)                   # the stall ends: ready still 0 this cycle
        seen.append(ctx.get(dut.i.ready))
        await ctx.tick()
        seen.append(ctx.get(dut.i.ready))

    _simulate(dut, bench)
    assert seen == [0, 1]


def test_shape_checked():
    with pytest.raises(TypeError):
        StreamSlice("not a shape")
