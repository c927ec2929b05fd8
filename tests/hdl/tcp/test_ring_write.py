"""TcpRingWrite in Amaranth's simulator with an AXI4 memory that stalls its channels and
delays its responses at random: every octet of every run at its connection's ring offset
(its sequence number modulo the ring size, wrapping), nothing else written, each run
reported in order with the sequence number after it as its last beat is taken (ended),
then again once its writes are acknowledged (written); at every width."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.ring_write import TcpRingWrite
from rnic.host.spec.tcp import SEQ_MOD
from tests.hdl.tcp.bench import beats, send

CONNECTIONS = 4
BASE = 0x10000


def runs(rng, count, ring):
    """(conn, octets) of runs; each connection's octets continue its sequence space."""
    return [(rng.randrange(CONNECTIONS),
             rng.randbytes(rng.choice([1, 3, 4, 8, 9, rng.randint(10, 60), ring // 2])))
            for _ in range(count)]


@pytest.mark.parametrize("width, ring_log2", [(4, 8), (8, 7), (16, 9), (32, 8)])
def test_runs_land_in_their_rings(width, ring_log2):
    rng = random.Random(width + ring_log2)
    ring = 1 << ring_log2
    starts = [rng.choice([rng.getrandbits(32), SEQ_MOD - 5]) for _ in range(CONNECTIONS)]
    items = runs(rng, 60, ring)
    dut = TcpRingWrite(width=width, connections=CONNECTIONS, addr_width=32)
    memory = {}                 # address -> octet
    acked_writes = []           # addresses written, in the order their responses went out
    reports, ends = [], []
    axi = dut.m_axi

    # the expected reports and the octets each report vouches for
    position = list(starts)
    want_reports, vouched = [], []
    for conn, octets in items:
        first = position[conn]
        position[conn] = (first + len(octets)) % SEQ_MOD
        want_reports.append((conn, position[conn]))
        vouched.append({BASE + conn * ring + (first + j) % SEQ_MOD % ring: octets[j]
                        for j in range(len(octets))})

    async def setup_and_drive(ctx):
        ctx.set(dut.ring_base, BASE)
        ctx.set(dut.ring_log2, ring_log2)
        for conn, seq in enumerate(starts):
            ctx.set(dut.start.payload, {"conn": conn, "seq": seq})
            ctx.set(dut.start.valid, 1)
            await ctx.tick().until(dut.start.ready)
        ctx.set(dut.start.valid, 0)
        await send(ctx, dut.i, [b for conn, octets in items
                                for b in beats(octets, width, conn=conn)], rng, idle=0.2)

    async def memory_slave(ctx):
        addresses, datas, responses = [], [], []
        while True:
            ctx.set(axi.awready, rng.random() < 0.7)
            ctx.set(axi.wready, rng.random() < 0.7)
            ctx.set(axi.bvalid, bool(responses) and rng.random() < 0.5)
            _, _, awv, awr, awaddr, wv, wr, wdata, wstrb, bv, br = await ctx.tick().sample(
                axi.awvalid, axi.awready, axi.awaddr, axi.wvalid, axi.wready, axi.wdata,
                axi.wstrb, axi.bvalid, axi.bready)
            if bv and br:
                acked_writes.append(responses.pop(0))
            if awv and awr:
                assert awaddr % width == 0
                addresses.append(awaddr)
            if wv and wr:
                datas.append((wdata, wstrb))
            while addresses and datas:
                address, (value, strobes) = addresses.pop(0), datas.pop(0)
                assert strobes, "a write with no octet"
                for lane in range(width):
                    if strobes >> lane & 1:
                        memory[address + lane] = (value >> (8 * lane)) & 0xFF
                responses.append(address)

    async def collect(ctx):
        ctx.set(dut.written.ready, 1)
        while len(reports) < len(items):
            ctx.set(dut.ended.ready, rng.random() < 0.7)
            _, _, valid, ready, report, e_valid, e_ready, end = await ctx.tick().sample(
                dut.written.valid, dut.written.ready, dut.written.payload,
                dut.ended.valid, dut.ended.ready, dut.ended.payload)
            if e_valid and e_ready:
                ends.append((end.conn, end.seq))
            if valid and ready:
                assert len(ends) > len(reports), "a run written before its end was taken"
                k = len(reports)
                for address, octet in vouched[k].items():
                    assert memory.get(address) == octet, (k, hex(address))
                reports.append((report.conn, report.seq))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(setup_and_drive)
    sim.add_testbench(memory_slave, background=True)
    sim.add_testbench(collect)
    sim.run()
    assert reports == want_reports == ends
    final = {}
    for k in range(len(items)):
        final.update(vouched[k])
    assert memory == final, "every octet in place and nothing else written"
