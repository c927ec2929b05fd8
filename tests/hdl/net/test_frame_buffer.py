"""FrameBuffer in Amaranth's simulator: frames with a drop verdict vanish, frames that do
not fit are dropped whole (``drop`` mode) or wait (``wait`` mode), the rest leave whole,
in order, back to back."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.net.frame_buffer import FrameBuffer
from rnic.hdl.net.layouts import RxDrop


def run(dut, frames, *, seed, idle=0.0, stall=0.0, stall_until=0, expect):
    """Send ``frames`` ((octets, drop) pairs); collect ``expect`` frames from ``o`` and all
    verdict pulses. ``stall_until``: ``o.ready`` is low for that many cycles first."""
    got, verdicts = [], []
    stats = {}

    async def source(ctx):
        rng = random.Random(seed)
        for data, drop in frames:
            for k, octet in enumerate(data):
                while idle and rng.random() < idle:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                ctx.set(dut.i.payload, {"data": octet, "first": k == 0,
                                        "last": k == len(data) - 1, "drop": drop})
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)

    async def verdict(ctx):
        async for _, _, valid, reason in ctx.tick().sample(dut.verdict.valid,
                                                           dut.verdict.payload):
            if valid:
                verdicts.append(RxDrop(reason))

    async def sink(ctx):
        rng = random.Random(seed + 1)
        current, cycle, first = None, 0, None
        while len(got) < expect:
            ready = cycle >= stall_until and rng.random() >= stall
            ctx.set(dut.o.ready, ready)
            _, _, valid, p = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycle += 1
            assert cycle < 200_000
            if valid and ready:
                first = cycle if first is None else first
                assert bool(p.first) == (current is None)
                current = (current or bytearray()) + bytes([p.data])
                if p.last:
                    got.append(bytes(current))
                    current = None
        stats["cycles"] = cycle - first + 1
        for _ in range(50):
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            assert not valid, "an extra octet"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source, background=True)
    sim.add_testbench(verdict, background=True)
    sim.add_testbench(sink)
    sim.run()
    return got, verdicts, stats


def test_drop_mode_discards_bad_frames():
    rng = random.Random(1)
    reasons = [RxDrop.NONE] * 3 + [RxDrop.FCS, RxDrop.RUNT, RxDrop.GIANT, RxDrop.OTHER_MAC]
    frames = [(rng.randbytes(rng.randint(1, 200)), rng.choice(reasons)) for _ in range(80)]
    good = [d for d, r in frames if r == RxDrop.NONE]
    got, verdicts, _ = run(FrameBuffer(depth=1024), frames, seed=1, idle=0.3, stall=0.3,
                           expect=len(good))
    assert got == good
    assert verdicts == [r for _, r in frames]


def test_drop_mode_overflow_drops_whole_frames():
    """``o`` stalled: the first frames fill the 256-octet ring, the others are OVERFLOW;
    a frame longer than the ring never fits; later frames pass again."""
    frames = [(bytes([k]) * 100, RxDrop.NONE) for k in range(5)] + [(bytes(300), RxDrop.NONE)]
    got, verdicts, _ = run(FrameBuffer(depth=256), frames, seed=2, stall_until=2000, expect=2)
    assert got == [bytes([0]) * 100, bytes([1]) * 100]
    assert verdicts == [RxDrop.NONE] * 2 + [RxDrop.OVERFLOW] * 4


def test_drop_mode_length_queue_full():
    """Room in the ring but not in the length queue: 4 queued frames and the one whose
    first octet already waits on ``o`` are kept, the rest are OVERFLOW."""
    frames = [(bytes([k]) * 3, RxDrop.NONE) for k in range(7)]
    got, verdicts, _ = run(FrameBuffer(depth=64, frames=4), frames, seed=3, stall_until=500,
                           expect=5)
    assert got == [bytes([k]) * 3 for k in range(5)]
    assert verdicts == [RxDrop.NONE] * 5 + [RxDrop.OVERFLOW] * 2


def test_wait_mode_waits_and_throws_away_only_too_long():
    rng = random.Random(4)
    frames = [(rng.randbytes(rng.randint(1, 256)), RxDrop.NONE) for _ in range(40)]
    frames.insert(7, (rng.randbytes(257), RxDrop.NONE))
    expect = [d for d, _ in frames if len(d) <= 256]
    got, verdicts, _ = run(FrameBuffer(depth=256, overflow="wait"), frames, seed=4,
                           idle=0.2, stall=0.5, expect=len(expect))
    assert got == expect
    assert verdicts == [RxDrop.OVERFLOW if len(d) > 256 else RxDrop.NONE for d, _ in frames]


def test_back_to_back_output():
    frames = [(bytes(range(n)), RxDrop.NONE) for n in (60, 1, 2, 61, 100)]
    got, _, stats = run(FrameBuffer(depth=512), frames, seed=5, stall_until=400, expect=5)
    assert got == [d for d, _ in frames]
    assert stats["cycles"] == sum(len(d) for d, _ in frames)


def test_bad_parameters():
    import gc
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kwargs, text in [({"depth": 1000}, "1000"), ({"depth": 32}, "32"),
                             ({"frames": 3}, "3"), ({"overflow": "block"}, "block")]:
            with pytest.raises(ValueError, match=text):
                FrameBuffer(**kwargs)
        gc.collect()
