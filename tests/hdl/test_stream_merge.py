# amaranth: UnusedElaboratable=no
"""The registered stream merge (rnic.hdl.stream_merge) in Amaranth's simulator: every item of
every input out once, each input's items in order, the output held still while it waits,
the lowest waiting input first, under random idles and back-pressure."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.stream_merge import StreamMerge
from tests.hdl.tcp.bench import send

INPUTS = 3


def test_merge():
    rng = random.Random(7)
    dut = StreamMerge(16, inputs=INPUTS)
    items = [[(k << 12) | n for n in range(150)] for k in range(INPUTS)]
    got = []

    def source(k):
        async def offer(ctx):
            await send(ctx, dut.i[k], items[k], rng, idle=0.4)
        return offer

    async def sink(ctx):
        held = None
        while len(got) < INPUTS * 150:
            ctx.set(dut.o.ready, rng.random() < 0.6)
            _, _, valid, ready, payload, *offered = await ctx.tick().sample(
                dut.o.valid, dut.o.ready, dut.o.payload,
                *(p for port in dut.i for p in (port.valid, port.ready)))
            if valid and held is not None:
                assert payload == held, "the output holds still until taken"
            held = payload if valid and not ready else None
            if valid and ready:
                got.append(payload)
            takers = [k for k in range(INPUTS) if offered[2 * k] and offered[2 * k + 1]]
            assert len(takers) <= 1
            for k in takers:
                assert not any(offered[2 * j] for j in range(k)), "the lowest input first"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for k in range(INPUTS):
        sim.add_testbench(source(k))
    sim.add_testbench(sink)
    sim.run()
    for k in range(INPUTS):
        assert [item for item in got if item >> 12 == k] == items[k]


def test_bad_inputs():
    with pytest.raises(ValueError, match="inputs must be an integer of at least 2, not 1"):
        StreamMerge(8, inputs=1)
