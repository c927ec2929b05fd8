"""TcpStreamRx in Amaranth's simulator: runs of several connections arrive a beat a cycle
and never wait; the host reads each run whole through the head view (NEXT, POP), in order;
a POP in the middle of a run drops the rest of it; a run that meets a full beat FIFO is kept
up to where it was full and marked truncated, one that finds the records full is dropped
whole and LOST is set; nothing is left over."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.stream_rx import TcpStreamRx
from tests.hdl.tcp.bench import beats

CONNECTIONS = 4


async def read_run(ctx, head, *, words=None):
    """The head run as ``(conn, octets, truncated)`` (its first ``words`` words only, then
    POP), or None when there is none."""
    await ctx.tick()
    if not ctx.get(head.valid):
        return None
    conn, length, truncated = ctx.get(head.conn), ctx.get(head.len), ctx.get(head.truncated)
    n = -(-length // 4)
    data = b""
    for k in range(n if words is None else min(words, n)):
        data += ctx.get(head.data).to_bytes(4, "little")
        if k < n - 1:
            ctx.set(head.next, 1)
            await ctx.tick()
            ctx.set(head.next, 0)
            await ctx.tick()
    ctx.set(head.pop, 1)
    await ctx.tick()
    ctx.set(head.pop, 0)
    for _ in range(3):
        await ctx.tick()
    return conn, data[:length] if words is None else data, bool(truncated)


async def offer(ctx, port, runs, rng, *, idle):
    """The beats of ``runs`` (``(conn, octets)``) on ``port``, which never waits."""
    for conn, octets in runs:
        for beat in beats(octets, len(port.payload.data) // 8, conn=conn):
            while rng.random() < idle:
                ctx.set(port.valid, 0)
                await ctx.tick()
            ctx.set(port.payload, beat)
            ctx.set(port.valid, 1)
            await ctx.tick()
    ctx.set(port.valid, 0)


@pytest.mark.parametrize("width", [4, 8])
def test_runs_in_order(width):
    rng = random.Random(width)
    dut = TcpStreamRx(width=width, connections=CONNECTIONS, octets=1024, records=8)
    runs = [(rng.randrange(CONNECTIONS), rng.randbytes(rng.randint(1, 60)))
            for _ in range(40)]
    got = []

    async def writer(ctx):
        for k in range(0, len(runs), 4):        # in groups the FIFOs always hold
            await offer(ctx, dut.i, runs[k:k + 4], rng, idle=0.3)
            while len(got) < k + 4:
                await ctx.tick()

    async def reader(ctx):
        while len(got) < len(runs):
            run = await read_run(ctx, dut.head)
            if run is not None:
                got.append(run)
        assert await read_run(ctx, dut.head) is None and not ctx.get(dut.head.lost)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.run_until(1e-3)
    assert got == [(conn, octets, False) for conn, octets in runs]


def test_pop_mid_run_and_overflow():
    rng = random.Random(1)
    dut = TcpStreamRx(width=4, connections=CONNECTIONS, octets=64, records=2)
    long = rng.randbytes(100)                    # over the 64-octet FIFO
    other = [rng.randbytes(8) for _ in range(3)]
    results = {}

    async def bench(ctx):
        await offer(ctx, dut.i, [(1, b"abcdefgh" * 3)], rng, idle=0)
        await ctx.tick().repeat(4)               # (a run shows 3 cycles after its end)
        results["partial"] = await read_run(ctx, dut.head, words=2)    # POP after 2 words
        await offer(ctx, dut.i, [(2, long)], rng, idle=0)
        await ctx.tick().repeat(4)
        results["truncated"] = await read_run(ctx, dut.head)
        # the records fill: a run is dropped whole
        await offer(ctx, dut.i, [(3, o) for o in other], rng, idle=0)
        await ctx.tick().repeat(4)
        results["lost"] = ctx.get(dut.head.lost)
        results["kept"] = [await read_run(ctx, dut.head) for _ in range(3)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert results["partial"] == (1, b"abcdefgh", False)
    conn, data, truncated = results["truncated"]
    assert (conn, truncated) == (2, True) and data == long[:len(data)] and 0 < len(data) < 100
    assert results["lost"]
    kept = [run for run in results["kept"] if run is not None]
    assert 1 <= len(kept) < 3 and results["kept"][-1] is None
    assert all(run[0] == 3 and not run[2] for run in kept)
    assert [other.index(run[1]) for run in kept] == sorted(other.index(run[1]) for run in kept)
