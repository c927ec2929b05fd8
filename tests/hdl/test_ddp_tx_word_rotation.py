# amaranth: UnusedElaboratable=no
"""The emitter's word rotation (rnic.hdl.ddp_tx.word_rotation) in Amaranth's simulator: every
memory word taken is rotated by its own segment's rotation, with segments of one word and of
many, a segment's words arriving while the one before it is still taken, and idle gaps."""

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from rnic.hdl.ddp_tx.word_rotation import WordRotation


def _run(width, seed, n_segments, p_push, p_take, max_words):
    dut = WordRotation(width=width)
    rng = random.Random(seed)
    segments = [(rng.randrange(width), rng.choice([1, 1, 2, rng.randint(1, max_words)]))
                for _ in range(n_segments)]
    taken = []                               # (rotation seen, rotation wanted) per word

    async def bench(ctx):
        waiting = deque()                    # pushed segments with words to take: [rot, left, ready]
        k = 0
        cycles = 0
        while k < n_segments or waiting:
            # the emitter's rule: a segment starts only when at most one has words left, and
            # its first word comes at the earliest in the cycle after its start
            push = k < n_segments and len(waiting) <= 1 and rng.random() < p_push
            take = bool(waiting) and waiting[0][2] and rng.random() < p_take
            ctx.set(dut.push.valid, push)
            if push:
                ctx.set(dut.push.payload, {"rot": segments[k][0], "words": segments[k][1]})
            ctx.set(dut.take, take)
            if take:
                taken.append(([ctx.get(dut.rot[b]) for b in range(width)], waiting[0][0]))
            await ctx.tick()
            if take:
                waiting[0][1] -= 1
                if waiting[0][1] == 0:
                    waiting.popleft()
            for w in waiting:
                w[2] = True
            if push:
                waiting.append([segments[k][0], segments[k][1], False])
                k += 1
            cycles += 1
            assert cycles < 100 * n_segments * max_words, "stalled"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(taken) == sum(n for _, n in segments)
    for k, (seen, want) in enumerate(taken):
        assert seen == [want] * width, f"word {k}: rotation {seen}, its segment's is {want}"


@pytest.mark.parametrize("width", [4, 8, 32])
@pytest.mark.parametrize("p_push, p_take", [(1.0, 1.0), (0.5, 0.9), (0.9, 0.3), (0.2, 0.5)])
def test_each_word_gets_its_segments_rotation(width, p_push, p_take):
    _run(width, seed=width * 100 + int(10 * p_push + 100 * p_take), n_segments=150,
         p_push=p_push, p_take=p_take, max_words=6)


def test_long_segments():
    _run(8, seed=3, n_segments=20, p_push=1.0, p_take=1.0, max_words=300)


def test_bad_width():
    with pytest.raises(ValueError):
        WordRotation(width=6)
