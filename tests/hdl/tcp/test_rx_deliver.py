"""TcpRxDeliver in Amaranth's simulator: for every action, exactly the octets
payload[skip:skip + keep] delivered as one unit with its connection, nothing for a dropped
segment, under random idles on both inputs and back-pressure on the output, at every
width."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.rx_deliver import TcpRxDeliver
from tests.hdl.tcp.bench import beats, receive_units, send

CONNECTIONS = 16


def cases(rng, count):
    """(conn, payload, skip, keep)."""
    out = []
    for _ in range(count):
        length = rng.choice([0, 1, 2, 3, 5, rng.randint(6, 40), rng.randint(40, 1460)])
        skip = rng.choice([0, 0, rng.randint(0, length)])
        keep = rng.choice([length - skip, 0, rng.randint(0, length - skip)])
        out.append((rng.randrange(CONNECTIONS), rng.randbytes(length), skip, keep))
    return out


@pytest.mark.parametrize("width", [4, 8, 16, 32])
def test_delivers_what_each_action_keeps(width):
    rng = random.Random(width)
    items = cases(rng, 120)
    want = [(conn, payload[skip:skip + keep]) for conn, payload, skip, keep in items if keep]
    dut = TcpRxDeliver(width=width, connections=CONNECTIONS)
    got = []

    async def actions(ctx):
        await send(ctx, dut.action, [{"conn": conn, "length": len(payload), "skip": skip,
                                      "keep": keep} for conn, payload, skip, keep in items],
                   rng, idle=0.2)

    async def payloads(ctx):
        await send(ctx, dut.payload, [b for _, payload, _, _ in items
                                      for b in beats(payload, width)], rng, idle=0.2)

    async def collect(ctx):
        units = await receive_units(ctx, dut.o, width, len(want), rng, backpressure=0.3,
                                    fields=("conn",))
        got.extend((fields["conn"], octets) for octets, fields in units)
        ctx.set(dut.o.ready, 1)
        await ctx.tick().repeat(10)
        assert not ctx.get(dut.o.valid), "nothing left over"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(actions)
    sim.add_testbench(payloads)
    sim.add_testbench(collect)
    sim.run()
    assert got == want
    assert any(keep == 0 and payload for _, payload, _, keep in items), "a segment was dropped"
    assert any(skip and keep for _, _, skip, keep in items), "a segment was trimmed"
