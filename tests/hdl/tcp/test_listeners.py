# amaranth: UnusedElaboratable=no
"""TcpListeners in Amaranth's simulator against a dictionary of slots: lookups one cycle
after the port, slots written, freed and overwritten, a port in two slots answered by the
lowest; bad parameters named."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.listeners import TcpListeners


def test_against_slots():
    rng = random.Random(1)
    entries = 4
    dut = TcpListeners(entries=entries)
    ports = [5000, 7, 4791, 9]
    slots = {}

    async def bench(ctx):
        for _ in range(400):
            write = rng.random() < 0.3
            if write:
                index, valid, port, echo = (rng.randrange(entries), rng.random() < 0.8,
                                            rng.choice(ports), rng.random() < 0.5)
                ctx.set(dut.write.payload, {"index": index, "valid": valid, "port": port,
                                            "echo": echo})
            ctx.set(dut.write.valid, write)
            asked = rng.choice(ports + [1234])
            ctx.set(dut.port, asked)
            # the answer comes one cycle after the port, from the slots of that cycle
            want = [slots[k][1] for k in sorted(slots) if slots[k][0] == asked]
            await ctx.tick()
            ctx.set(dut.write.valid, 0)
            assert ctx.get(dut.hit) == bool(want)
            if want:
                assert ctx.get(dut.echo) == want[0]
            if write:
                if valid:
                    slots[index] = (port, echo)
                else:
                    slots.pop(index, None)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_bad_entries():
    for bad in (0, 65, 2.0, True):
        with pytest.raises(ValueError, match="entries must be an int from 1 to 64"):
            TcpListeners(entries=bad)
