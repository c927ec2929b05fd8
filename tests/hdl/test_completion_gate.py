"""rnic.hdl.ddp_rx.completion_gate.CompletionGate in Amaranth's simulator: a completion leaves
only once the B responses have reached the writes handed over before it, in order, with
random acknowledgement timing and back-pressure, across the counters' wrap."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.ddp_rx.completion_gate import COUNT_BITS, CompletionGate

MASK = (1 << COUNT_BITS) - 1


def test_bad_depth():
    with pytest.raises(ValueError, match="depth must be an integer >= 2, not 1"):
        CompletionGate(connections=2, depth=1)


@pytest.mark.parametrize("seed", [1, 2])
def test_completions_wait_for_their_writes(seed):
    rng = random.Random(seed)
    dut = CompletionGate(connections=4)
    start = MASK - 40                 # the counters wrap during the run
    # (fence, wr_id): each completion waits for the writes handed over before it
    plan, written = [], start
    for k in range(60):
        written = (written + rng.choice([0, 0, 1, 3, 17])) & MASK
        plan.append((written, k))
    final = written
    got = []
    state = {"acked": start}

    async def producer(ctx):
        ctx.set(dut.written, start)
        for fence, wr_id in plan:
            for _ in range(rng.choice([0, 0, 2])):
                await ctx.tick()
            ctx.set(dut.written, fence)
            ctx.set(dut.i.payload.wr_id, wr_id)
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)

    async def acks(ctx):
        ctx.set(dut.acked, start)
        while state["acked"] != final:
            await ctx.tick()
            # B responses trail the writes handed over (never beyond them)
            ahead = (ctx.get(dut.written) - state["acked"]) & MASK
            if ahead and rng.random() < 0.3:
                state["acked"] = (state["acked"] + 1) & MASK
                ctx.set(dut.acked, state["acked"])

    async def consumer(ctx):
        while len(got) < len(plan):
            ready = rng.random() < 0.7
            ctx.set(dut.o.ready, ready)
            # (sampled at the edge: the handshake and ``acked`` as the gate saw them)
            _, _, valid, wr_id, acked = await ctx.tick().sample(
                dut.o.valid, dut.o.payload.wr_id, dut.acked)
            if ready and valid:
                got.append((wr_id, acked))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(acks)
    sim.add_testbench(consumer)
    sim.run_until(20000e-8)

    assert [wr_id for wr_id, _ in got] == [k for _, k in plan]
    for (wr_id, acked), (fence, _) in zip(got, plan):
        assert (acked - fence) & MASK < 1 << (COUNT_BITS - 1), (wr_id, acked, fence)
