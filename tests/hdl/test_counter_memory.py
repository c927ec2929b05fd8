# amaranth: UnusedElaboratable=no
"""The event counters in a memory (rnic.hdl.counter_memory) in Amaranth's simulator against a
plain count per counter: exact once the events stop for a sweep, never ahead of the events
nor more than a sweep behind them, one event per counter per cycle, clear and reset."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.counter_memory import CounterMemory


class TB:
    """Drives ``events``/``clear``, reads a counter every cycle and keeps the model: the
    count of every counter after each cycle (``history``)."""

    def __init__(self, dut, ctx, rng):
        self.dut, self.ctx, self.rng = dut, ctx, rng
        self.n = dut.counters
        self.counts = [0] * self.n
        self.history = []               # (counts after cycle t, cleared in cycle t)
        self.reads = 0

    async def cycle(self, events=0, clear=False, addr=None):
        """One clock: ``events`` (a bit mask) and ``clear`` this cycle, counter ``addr`` read.
        Returns the data read for the address of the cycle before."""
        ctx, dut = self.ctx, self.dut
        addr = self.rng.randrange(self.n) if addr is None else addr
        ctx.set(dut.events, events)
        ctx.set(dut.clear, clear)
        ctx.set(dut.addr, addr)
        await ctx.tick()
        data = ctx.get(dut.data)        # the word of ``addr``, read in this cycle
        if clear:
            self.counts = [0] * self.n
        else:
            for k in range(self.n):
                self.counts[k] += events >> k & 1
        self.history.append((list(self.counts), clear))
        self.check(addr, data)
        return data

    def check(self, addr, data):
        """A read is between the count a sweep and three cycles ago and the count now, or
        since the last clear (0 at first)."""
        t = len(self.history) - 1
        lag = self.n + 3
        window = self.history[max(0, t - lag - 1):t + 1]
        cleared = [k for k, (_, c) in enumerate(window) if c]
        low = 0 if cleared or t < lag + 1 else window[0][0][addr]
        high = window[-1][0][addr]
        assert low <= data <= high, (addr, data, low, high)
        self.reads += 1

    async def settle(self):
        """A sweep without events; then every counter reads exactly its count."""
        for _ in range(self.n + 4):
            await self.cycle()
        for k in range(self.n):
            await self.cycle(addr=k)
            data = await self.cycle(addr=k)
            assert data == self.counts[k], (k, data, self.counts[k])


def _run(n, bench):
    dut = CounterMemory(counters=n)
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def testbench(ctx):
        await bench(TB(dut, ctx, random.Random(n)))
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("n", [2, 5, 32])
def test_random_events_exact_after_a_sweep(n):
    async def bench(tb):
        for density in (0.1, 0.5, 0.9):
            for _ in range(20 * n):
                await tb.cycle(sum((tb.rng.random() < density) << k for k in range(n)))
            await tb.settle()
        assert tb.reads > 30 * n
    _run(n, bench)


@pytest.mark.parametrize("n", [2, 7])
def test_every_counter_every_cycle(n):
    """The pending counts' largest value: an event of every counter in every cycle."""
    async def bench(tb):
        for _ in range(10 * n + 3):
            await tb.cycle((1 << n) - 1)
        await tb.settle()
        assert tb.counts == [10 * n + 3] * n
    _run(n, bench)


def test_clear_and_reset():
    """Zero after the reset; after ``clear`` only the events that follow it count, events
    in the clearing sweep included."""
    n = 6

    async def bench(tb):
        await tb.settle()
        assert tb.counts == [0] * n
        for _ in range(50):
            await tb.cycle(tb.rng.randrange(1 << n))
        await tb.cycle(tb.rng.randrange(1 << n), clear=True)
        for _ in range(n):              # events while the clearing sweep runs
            await tb.cycle(tb.rng.randrange(1 << n))
        await tb.settle()
        assert any(tb.counts)
    _run(n, bench)


@pytest.mark.parametrize("bad", [1, 513, True, 4.0])
def test_bad_counters(bad):
    with pytest.raises(ValueError, match=f"counters must be .*not {bad!r}"):
        CounterMemory(counters=bad)
