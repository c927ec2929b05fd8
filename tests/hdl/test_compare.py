"""The comparisons of rnic.hdl.compare against Python's, exhaustively on narrow values and at
the edges of wide ones."""

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from rnic.hdl.compare import above, wide_less


def _check(inputs, outputs, cases):
    """Drive ``inputs`` with each case's values; every output equals its expected value."""
    m = Module()
    probes = [Signal(len(o), name=f"o{k}") for k, o in enumerate(outputs)]
    m.d.comb += [p.eq(o) for p, o in zip(probes, outputs)]
    sim = Simulator(m)

    async def bench(ctx):
        for values, want in cases:
            for sig, v in zip(inputs, values):
                ctx.set(sig, v)
            assert [ctx.get(p) for p in probes] == want, (values, want)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("n", [1, 3, 4, 5, 7, 9])
def test_above_every_value(n):
    v = Signal(n)
    constants = sorted({-1, 0, 1, 2, 5, 7, 15, 16, 17, 33, 51, 52, (1 << n) - 2, (1 << n) - 1,
                        1 << n, 300})
    cases = [((x,), [int(x > c) for c in constants]) for x in range(1 << n)]
    _check([v], [above(v, c) for c in constants], cases)


def test_above_wide():
    """A 17-bit value (the emitter's octets left) near its constants' high and low parts."""
    v = Signal(17)
    constants = [0, 4, 8, 15, 16, 31, 32, 100, 4095, 65535]
    rng = random.Random(1)
    xs = {c + d for c in constants for d in (-1, 0, 1)} | {rng.randrange(1 << 17) for _ in range(200)}
    xs = sorted(x for x in xs if 0 <= x < 1 << 17)
    _check([v], [above(v, c) for c in constants], [((x,), [int(x > c) for c in constants]) for x in xs])


@pytest.mark.parametrize("n", [17, 33, 65])
def test_above_powers_and_dense_constants(n):
    """Powers of two (a bus's address space), their neighbours, and constants with many set
    bits (Amaranth's compare), on values around them."""
    v = Signal(n)
    constants = sorted({c for k in (8, 16, 32, n - 1) if k < n for c in ((1 << k) - 1, 1 << k, (1 << k) + 1)}
                       | {0x5A5A & ((1 << n) - 1), (1 << n) - 2, 0xF0F1 & ((1 << n) - 1)})
    rng = random.Random(n)
    xs = {c + d for c in constants for d in (-2, -1, 0, 1, 2)} | {rng.randrange(1 << n) for _ in range(100)}
    xs = sorted(x for x in xs if 0 <= x < 1 << n)
    _check([v], [above(v, c) for c in constants], [((x,), [int(x > c) for c in constants]) for x in xs])


def test_wide_less():
    a, b = Signal(64), Signal(64)
    rng = random.Random(2)
    pairs = [(rng.randrange(1 << 64), rng.randrange(1 << 64)) for _ in range(200)]
    pairs += [(x, x) for x, _ in pairs[:20]] + [(x, x + 1) for x, _ in pairs[:20] if x + 1 < 1 << 64]
    pairs += [((h << 32) | lo1, (h << 32) | lo2) for h, lo1, lo2 in [(5, 1, 2), (5, 2, 1), (0, 0, 0)]]
    _check([a, b], [wide_less(a, b)], [((x, y), [int(x < y)]) for x, y in pairs])
