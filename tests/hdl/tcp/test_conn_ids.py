"""TcpConnIds in Amaranth's simulator against a set of ids in use: the lowest free id
after random takes and releases (both in one cycle too), none when all are taken, at
sizes that are and are not powers of 2."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.conn_ids import TcpConnIds


@pytest.mark.parametrize("connections", [1, 5, 16, 256])
def test_lowest_free(connections):
    rng = random.Random(connections)
    dut = TcpConnIds(connections=connections)
    checked = []

    async def bench(ctx):
        used = set()
        await ctx.tick().repeat(2)
        for _ in range(4 * connections + 50):
            free = sorted(set(range(connections)) - used)
            assert ctx.get(dut.any_free) == bool(free)
            if free:
                assert ctx.get(dut.free_id) == free[0]
            take = bool(free) and rng.random() < 0.6
            release = bool(used) and rng.random() < 0.5
            gone = rng.choice(sorted(used)) if release else 0
            ctx.set(dut.take, take)
            ctx.set(dut.release, release)
            ctx.set(dut.release_id, gone)
            if release:
                used.discard(gone)
            if take:
                used.add(free[0])
            await ctx.tick()
            ctx.set(dut.take, 0)
            ctx.set(dut.release, 0)
            await ctx.tick()
            checked.append(len(used))
        assert max(checked) == connections or connections > 16

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
