"""TcpRxDeliver in Amaranth's simulator: for every action, exactly the octets
payload[skip:skip + keep] delivered as one unit with its connection, nothing for a dropped
segment, under random idles on both inputs and back-pressure on the output, at every
width."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.rx_deliver import TcpRxDeliver

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


def beats(octets, width):
    return [{"data": int.from_bytes(octets[k:k + width], "little"),
             "n": len(octets[k:k + width]), "first": k == 0, "last": k + width >= len(octets)}
            for k in range(0, len(octets), width)]


@pytest.mark.parametrize("width", [4, 8, 16, 32])
def test_delivers_what_each_action_keeps(width):
    rng = random.Random(width)
    items = cases(rng, 120)
    want = [(conn, payload[skip:skip + keep]) for conn, payload, skip, keep in items if keep]
    dut = TcpRxDeliver(width=width, connections=CONNECTIONS)
    got = []

    async def actions(ctx):
        for conn, payload, skip, keep in items:
            while rng.random() < 0.2:
                ctx.set(dut.action.valid, 0)
                await ctx.tick()
            ctx.set(dut.action.payload, {"conn": conn, "length": len(payload), "skip": skip,
                                         "keep": keep})
            ctx.set(dut.action.valid, 1)
            await ctx.tick().until(dut.action.ready)
        ctx.set(dut.action.valid, 0)

    async def payloads(ctx):
        for _, payload, _, _ in items:
            for beat in beats(payload, width):
                while rng.random() < 0.2:
                    ctx.set(dut.payload.valid, 0)
                    await ctx.tick()
                ctx.set(dut.payload.payload, beat)
                ctx.set(dut.payload.valid, 1)
                await ctx.tick().until(dut.payload.ready)
        ctx.set(dut.payload.valid, 0)

    async def collect(ctx):
        octets, conn = b"", None
        while len(got) < len(want):
            ctx.set(dut.o.ready, rng.random() >= 0.3)
            _, _, valid, ready, beat = await ctx.tick().sample(dut.o.valid, dut.o.ready,
                                                              dut.o.payload)
            if valid and ready:
                assert bool(beat.first) == (octets == b"")
                assert beat.n == width or beat.last
                assert conn is None or beat.conn == conn
                conn = beat.conn
                octets += int(beat.data).to_bytes(width, "little")[:beat.n]
                if beat.last:
                    got.append((conn, octets))
                    octets, conn = b"", None
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
