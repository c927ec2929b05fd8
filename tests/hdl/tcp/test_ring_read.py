"""TcpRingRead in Amaranth's simulator with an AXI4 memory that stalls and delays at
random: every segment's payload read from its connection's ring at its sequence numbers
(wrapping at the ring's end), its sum equal to the model's one's complement sum, the
descriptors in request order with their fields intact, bursts of at most 16 words that
never cross a multiple of 16 words; at every width."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.ring_read import BURST_WORDS, TcpRingRead
from rnic.host.model import ipv4
from rnic.host.spec.tcp import SEQ_MOD
from tests.hdl.tcp.bench import flag_bits, receive_units

CONNECTIONS = 4
BASE = 0x40000
FIELDS = ("dst_ip", "src_port", "dst_port", "seq", "ack", "window", "length")


@pytest.mark.parametrize("width, ring_log2", [(4, 10), (8, 9), (16, 10), (32, 9)])
def test_segments_come_from_the_ring(width, ring_log2):
    rng = random.Random(width)
    ring = 1 << ring_log2
    memory = bytearray(rng.randbytes(CONNECTIONS * ring))
    requests = []
    for _ in range(50):
        conn = rng.randrange(CONNECTIONS)
        length = rng.choice([0, 1, 2, 3, 5, rng.randint(6, 80), rng.randint(80, 500)])
        seq = rng.choice([rng.getrandbits(32), SEQ_MOD - 3, ring - 2])
        requests.append({"conn": conn, "desc": {
            "dst_ip": rng.getrandbits(32), "src_port": rng.getrandbits(16),
            "dst_port": rng.getrandbits(16), "seq": seq, "ack": rng.getrandbits(32),
            "flags": flag_bits(rng.getrandbits(8)), "window": rng.getrandbits(16),
            "length": length, "payload_sum": 0, "syn_options": 0, "mss": 0, "ws": 0}})

    def octets(request):
        conn, desc = request["conn"], request["desc"]
        return bytes(memory[BASE - BASE + conn * ring + (desc["seq"] + j) % SEQ_MOD % ring]
                     for j in range(desc["length"]))

    dut = TcpRingRead(width=width, connections=CONNECTIONS, max_segment=500)
    axi = dut.m_axi
    got_descs, got_payloads = [], []

    async def drive(ctx):
        ctx.set(dut.ring_base, BASE)
        ctx.set(dut.ring_log2, ring_log2)
        for request in requests:
            ctx.set(dut.req.payload, request)
            ctx.set(dut.req.valid, 1)
            await ctx.tick().until(dut.req.ready)
        ctx.set(dut.req.valid, 0)

    async def memory_slave(ctx):
        bursts, beats = [], []
        while True:
            ctx.set(axi.arready, rng.random() < 0.6)
            if beats and rng.random() < 0.7:
                address, last = beats[0]
                offset = address - BASE
                ctx.set(axi.rdata, int.from_bytes(memory[offset:offset + width], "little"))
                ctx.set(axi.rlast, last)
                ctx.set(axi.rvalid, 1)
            else:
                ctx.set(axi.rvalid, 0)
            _, _, arv, arr, araddr, arlen, rv, rr = await ctx.tick().sample(
                axi.arvalid, axi.arready, axi.araddr, axi.arlen, axi.rvalid, axi.rready)
            if rv and rr:
                beats.pop(0)
            if arv and arr:
                count = arlen + 1
                assert araddr % width == 0 and count <= BURST_WORDS
                first_word = (araddr - BASE) // width
                assert first_word // BURST_WORDS == (first_word + count - 1) // BURST_WORDS
                beats += [(araddr + k * width, k == count - 1) for k in range(count)]

    async def collect_descs(ctx):
        while len(got_descs) < len(requests):
            ctx.set(dut.desc.ready, rng.random() < 0.5)
            _, _, valid, ready, desc = await ctx.tick().sample(
                dut.desc.valid, dut.desc.ready, dut.desc.payload)
            if valid and ready:
                got_descs.append(desc)

    async def collect_payload(ctx):
        units = await receive_units(ctx, dut.payload, width,
                                    sum(1 for r in requests if r["desc"]["length"]), rng,
                                    backpressure=0.3)
        got_payloads.extend(octets for octets, _ in units)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(drive)
    sim.add_testbench(memory_slave, background=True)
    sim.add_testbench(collect_descs)
    sim.add_testbench(collect_payload)
    sim.run()
    want_payloads = [octets(r) for r in requests if r["desc"]["length"]]
    assert got_payloads == want_payloads
    for request, desc in zip(requests, got_descs):
        for name in FIELDS:
            assert getattr(desc, name) == request["desc"][name], name
        assert desc.payload_sum == ipv4.ones_sum(octets(request))
