"""WireJoin in Amaranth's simulator: what TCP delivers goes to the core or to the stream port
by the connection's mode; the core's permission to send falls as soon as it starts a run and
stays down until TCP takes that run's first beat; a stream send waits for its connection's
permission, goes out as it is and holds the core back on that connection meanwhile; CANCEL
drops a stream send that waits, and so does the opening of a new connection on its id; runs
reach TCP whole, one at a time."""

import random

from amaranth.sim import Simulator

from rnic.hdl.wire_join import WireJoin
from tests.hdl.tcp.bench import beats, receive_units, send

WIDTH, CONNECTIONS = 4, 4


async def pulse(ctx, field):
    ctx.set(field, 1)
    await ctx.tick()
    ctx.set(field, 0)


async def stream_send(ctx, dut, conn, octets):
    """TCP_STREAM_TX_DATA writes, then CONN, LEN and SEND."""
    padded = octets + bytes(-len(octets) % 4)
    for k in range(0, len(padded), 4):
        ctx.set(dut.push.payload, int.from_bytes(padded[k:k + 4], "little"))
        ctx.set(dut.push.valid, 1)
        await ctx.tick()
    ctx.set(dut.push.valid, 0)
    ctx.set(dut.regs.tcp_stream_tx_conn.conn, conn)
    ctx.set(dut.regs.tcp_stream_tx_len.len, len(octets))
    await ctx.tick()
    await pulse(ctx, dut.regs.tcp_stream_tx_cmd.send)


def test_receive_split():
    rng = random.Random(1)
    dut = WireJoin(width=WIDTH, connections=CONNECTIONS, rx_octets=256)
    runs = [(rng.randrange(CONNECTIONS), rng.randbytes(rng.randint(1, 30))) for _ in range(20)]
    fpdu = 0b0101
    got = {}

    async def tcp(ctx):
        ctx.set(dut.fpdu, fpdu)
        for conn, octets in runs:
            await send(ctx, dut.tcp_rx, beats(octets, WIDTH, conn=conn), rng, idle=0.2)

    async def core(ctx):
        want = sum(fpdu >> conn & 1 for conn, _ in runs)
        got["core"] = await receive_units(ctx, dut.core_rx, WIDTH, want, rng,
                                          backpressure=0.3, fields=("conn",))

    async def host(ctx):
        got["stream"] = []
        want = sum(1 - (fpdu >> conn & 1) for conn, _ in runs)
        while len(got["stream"]) < want:
            await ctx.tick()
            if not ctx.get(dut.regs.tcp_stream_rx_status.valid):
                continue
            n = ctx.get(dut.regs.tcp_stream_rx_status.len)
            conn = ctx.get(dut.regs.tcp_stream_rx_conn.conn)
            data = b""
            for _ in range(-(-n // 4)):
                data += ctx.get(dut.regs.tcp_stream_rx_data.data).to_bytes(4, "little")
                await pulse(ctx, dut.regs.tcp_stream_rx_cmd.next)
                await ctx.tick()
            await pulse(ctx, dut.regs.tcp_stream_rx_cmd.pop)
            await ctx.tick().repeat(3)
            got["stream"].append((conn, data[:n]))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for bench in (tcp, core, host):
        sim.add_testbench(bench)
    sim.run_until(1e-3)
    assert got["core"] == [(o, {"conn": c}) for c, o in runs if fpdu >> c & 1]
    assert got["stream"] == [(c, o) for c, o in runs if not fpdu >> c & 1]


def test_permission_and_stream_sends():
    rng = random.Random(2)
    dut = WireJoin(width=WIDTH, connections=CONNECTIONS)
    reply = rng.randbytes(27)
    seen = {}

    async def bench(ctx):
        ctx.set(dut.may_send, 0b1011)
        assert ctx.get(dut.core_may_send) == 0, "TCP's bits reach the core at the next edge"
        await ctx.tick()
        assert ctx.get(dut.core_may_send) == 0b1011
        # the core starts a run on connection 1: its bit falls until TCP takes the first beat
        ctx.set(dut.core_started.payload, 1)
        ctx.set(dut.core_started.valid, 1)
        await ctx.tick()
        ctx.set(dut.core_started.valid, 0)
        for _ in range(5):
            assert ctx.get(dut.core_may_send) == 0b1001
            await ctx.tick()
        ctx.set(dut.may_send, 0b1001)             # TCP's own bit falls as it takes the beat
        await send(ctx, dut.core_tx, beats(b"\x00" * 9, WIDTH, conn=1), rng)
        assert ctx.get(dut.core_may_send) == 0b1001
        ctx.set(dut.may_send, 0b1011)             # TCP counted the run's end
        await ctx.tick()
        assert ctx.get(dut.core_may_send) == 0b1011, "the run is no longer under way"
        # a stream send on connection 2, which may not send: it waits
        await stream_send(ctx, dut, 2, reply)
        await ctx.tick().repeat(10)
        assert ctx.get(dut.regs.tcp_stream_tx_status.busy)
        seen["early"] = ctx.get(dut.tcp_tx.valid)
        ctx.set(dut.may_send, 0b1111)
        await ctx.tick().until(dut.tcp_tx.valid)      # (TCP does not take it yet)
        for _ in range(3):
            assert ctx.get(dut.core_may_send) == 0b1011, "held for the stream's run"
            await ctx.tick()
        seen["release"] = True
        await ctx.tick().until(~dut.regs.tcp_stream_tx_status.busy)
        # a stream send on connection 3, which never may send again: CANCEL drops it
        ctx.set(dut.may_send, 0b0111)
        await stream_send(ctx, dut, 3, b"late")
        await ctx.tick().repeat(5)
        await pulse(ctx, dut.regs.tcp_stream_tx_cmd.cancel)
        await ctx.tick().until(~dut.regs.tcp_stream_tx_status.busy)
        # a stream send that waits on connection 3 when a new connection takes the id: it
        # was the old one's, and is dropped, though the new one may send from the next
        # cycle on (TCP's bit comes up no sooner)
        await stream_send(ctx, dut, 3, b"old connection's")
        await ctx.tick().repeat(5)
        ctx.set(dut.opened.payload, 3)
        await pulse(ctx, dut.opened.valid)
        ctx.set(dut.may_send, 0b1111)
        await ctx.tick().until(~dut.regs.tcp_stream_tx_status.busy)
        await ctx.tick().repeat(5)
        seen["done"] = True

    async def tcp(ctx):
        seen["runs"] = await receive_units(ctx, dut.tcp_tx, WIDTH, 1, rng, fields=("conn",))
        while "release" not in seen:
            await ctx.tick()
        seen["runs"] += await receive_units(ctx, dut.tcp_tx, WIDTH, 1, rng, fields=("conn",))
        while "done" not in seen:
            assert not ctx.get(dut.tcp_tx.valid), "the cancelled run reached TCP"
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_testbench(tcp)
    sim.run_until(1e-3)
    assert seen["done"] and not seen["early"]
    assert seen["runs"] == [(b"\x00" * 9, {"conn": 1}), (reply, {"conn": 2})]
