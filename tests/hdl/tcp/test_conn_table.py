"""TcpConnTable in Amaranth's simulator against a dictionary of buckets built on the spec's
conn_hash: lookups, inserts (a third key in a bucket refused), removes, with keys chosen to
collide, under random idle cycles and back-pressure; the latency of the docstring."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.conn_table import WAYS, ConnTableOp, TcpConnTable
from rnic.host.spec.tcp import conn_hash


class Reference:
    """The table's contract: buckets of WAYS entries by conn_hash."""

    def __init__(self, connections):
        self.bits = max(1, (2 * connections - 1).bit_length())
        self.buckets = {}

    def run(self, op, key, conn):
        ways = self.buckets.setdefault(conn_hash(*key, self.bits), [None] * WAYS)
        held = [k for k, way in enumerate(ways) if way and way[0] == key]
        if op == ConnTableOp.LOOKUP:
            return (1, ways[held[0]][1]) if held else (0, 0)
        if op == ConnTableOp.REMOVE:
            if not held:
                return 0, 0
            old = ways[held[0]][1]
            ways[held[0]] = None
            return 1, old
        free = [k for k, way in enumerate(ways) if way is None]
        if held:
            old = ways[held[0]][1]
            ways[held[0]] = (key, conn)
            return 1, old
        if not free:
            return 0, 0
        ways[free[0]] = (key, conn)
        return 1, 0


def colliding_keys(rng, bits, count):
    """``count`` distinct keys that share one bucket."""
    target = rng.getrandbits(bits)
    keys = set()
    while len(keys) < count:
        key = (rng.getrandbits(32), rng.getrandbits(16), rng.choice([5000, 7]))
        if conn_hash(*key, bits) == target:
            keys.add(key)
    return sorted(keys)


def commands(rng, connections, count):
    bits = max(1, (2 * connections - 1).bit_length())
    pool = colliding_keys(rng, bits, 4) + [
        (rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(16)) for _ in range(12)]
    return [(rng.choice(list(ConnTableOp)), rng.choice(pool), rng.randrange(connections))
            for _ in range(count)]


def run(connections, cmds, *, seed, idle=0.3, backpressure=0.3):
    rng = random.Random(seed)
    dut = TcpConnTable(connections=connections)
    answers = []

    async def drive(ctx):
        for op, (ip, rport, lport), conn in cmds:
            while rng.random() < idle:
                ctx.set(dut.cmd.valid, 0)
                await ctx.tick()
            ctx.set(dut.cmd.payload, {"op": op, "conn": conn, "key": {
                "remote_ip": ip, "remote_port": rport, "local_port": lport}})
            ctx.set(dut.cmd.valid, 1)
            await ctx.tick().until(dut.cmd.ready)
        ctx.set(dut.cmd.valid, 0)

    async def collect(ctx):
        while len(answers) < len(cmds):
            ctx.set(dut.resp.ready, rng.random() >= backpressure)
            _, _, valid, ready, resp = await ctx.tick().sample(dut.resp.valid, dut.resp.ready,
                                                              dut.resp.payload)
            if valid and ready:
                answers.append((ConnTableOp(resp.op), resp.hit, resp.conn))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(drive)
    sim.add_testbench(collect)
    sim.run()
    return answers


@pytest.mark.parametrize("connections", [1, 16, 256])
def test_against_reference(connections):
    rng = random.Random(connections)
    cmds = commands(rng, connections, 400)
    ref = Reference(connections)
    want = []
    for op, key, conn in cmds:
        hit, old = ref.run(op, key, conn)
        want.append((op, hit, old if hit and op != ConnTableOp.INSERT else 0))
    got = [(op, hit, conn if hit and op != ConnTableOp.INSERT else 0) for op, hit, conn in
           run(connections, cmds, seed=connections)]
    assert got == want
    refused = sum(1 for (op, hit, _) in want if op == ConnTableOp.INSERT and not hit)
    assert refused > 0, "a third key in a bucket was tried"


def test_latency_and_rate():
    """Without idles or back-pressure: each answer 3 cycles after its command was taken,
    one command every 3 cycles."""
    dut = TcpConnTable(connections=16)
    taken, valid_at = [], []

    async def tb(ctx):
        ctx.set(dut.resp.ready, 1)
        ctx.set(dut.cmd.valid, 1)
        for cycle in range(12):
            ctx.set(dut.cmd.payload, {"op": ConnTableOp.INSERT, "conn": cycle % 16,
                                      "key": {"remote_ip": cycle, "remote_port": 1,
                                              "local_port": 2}})
            if ctx.get(dut.cmd.ready):
                taken.append(cycle)
            if ctx.get(dut.resp.valid):
                valid_at.append(cycle)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert taken[:4] == [0, 3, 6, 9]
    assert valid_at[:3] == [t + 3 for t in taken[:3]]
