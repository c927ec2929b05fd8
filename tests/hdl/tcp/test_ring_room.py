"""TcpRingRoom in Amaranth's simulator against a reference of each connection's ring: runs
begin only where the room bit allows, the bit falls as a run begins and comes back once its
end is counted when the ring still has room for a run, releases give room back, a freed
connection has none until it is opened again; across the sequence-number wrap."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.ring_room import TcpRingRoom
from rnic.host.spec.tcp import SEQ_MOD
from tests.hdl.tcp.bench import send

CONNECTIONS, RING_LOG2, MAX_RUN = 4, 12, 1000


class Rings:
    """The reference: per connection whether it is open, its ring's start and end."""

    def __init__(self):
        self.live = [False] * CONNECTIONS
        self.start = [0] * CONNECTIONS
        self.end = [0] * CONNECTIONS

    def room(self):
        return sum(1 << c for c in range(CONNECTIONS) if self.live[c]
                   and (self.end[c] - self.start[c]) % SEQ_MOD + MAX_RUN <= 1 << RING_LOG2)


def test_against_reference():
    rng = random.Random(5)
    dut = TcpRingRoom(connections=CONNECTIONS)
    rings = Rings()
    seen = {"runs": 0, "full": 0, "released": 0, "reset": 0}

    async def bench(ctx):
        ctx.set(dut.ring_log2, RING_LOG2)
        ctx.set(dut.max_run, MAX_RUN)
        await ctx.tick().repeat(2)
        for _ in range(600):
            c = rng.randrange(CONNECTIONS)
            action = rng.choice(["run"] * 5 + ["release"] * 3 + ["open", "reset"])
            if action == "open" or (not rings.live[c] and action != "reset"):
                seq = rng.choice([rng.getrandbits(32), SEQ_MOD - 100])
                await send(ctx, dut.opened, [{"conn": c, "seq": seq}], rng)
                rings.live[c], rings.start[c], rings.end[c] = True, seq, seq
            elif action == "run":
                if not ctx.get(dut.room) >> c & 1:
                    seen["full"] += 1
                    continue
                ctx.set(dut.began.valid, 1)
                ctx.set(dut.began.conn, c)
                assert not ctx.get(dut.room) >> c & 1, "the bit falls as the run begins"
                await ctx.tick()
                ctx.set(dut.began.valid, 0)
                for _ in range(rng.randint(0, 5)):
                    assert not ctx.get(dut.room) >> c & 1, "no room while a run is under way"
                    await ctx.tick()
                rings.end[c] = (rings.end[c] + rng.randint(1, MAX_RUN)) % SEQ_MOD
                await send(ctx, dut.ended, [{"conn": c, "seq": rings.end[c]}], rng)
                seen["runs"] += 1
            elif action == "release":
                held = (rings.end[c] - rings.start[c]) % SEQ_MOD
                rings.start[c] = (rings.start[c] + rng.randint(0, held)) % SEQ_MOD
                await send(ctx, dut.released, [{"conn": c, "una": rings.start[c],
                                                "reset": 0}], rng)
                seen["released"] += 1
            else:
                await send(ctx, dut.released, [{"conn": c, "una": 0, "reset": 1}], rng)
                rings.live[c] = False
                seen["reset"] += 1
            await ctx.tick().repeat(4)
            assert ctx.get(dut.room) == rings.room(), (action, c)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["runs"] > 100 and seen["full"] > 5 and seen["reset"] > 10, seen
