"""The engine's send path in Amaranth's simulator: FPDU runs of two connections into their
send rings (TcpRingWrite), segments cut at the reported FPDU ends read back
(TcpRingRead) and built (TcpTxFrame), with one AXI4 memory behind both; every packet
byte-identical to the model's segment carrying the octets the core sent, across the
sequence-number wrap and the rings' ends (each connection sends about three rings'
worth, as the ring frees)."""

import ipaddress
import random

from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from rnic.hdl.tcp import TcpRingRead, TcpRingWrite, TcpTxFrame
from rnic.host.model import tcp
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_PEER_IP
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from tests.hdl.tcp.bench import axi_memory, flag_bits

WIDTH, CONNECTIONS, RING_LOG2, BASE, MSS = 4, 2, 11, 0x8000, 1000
NIC = int(ipaddress.IPv4Address(DEFAULT_NIC_IP))
PEER = int(ipaddress.IPv4Address(DEFAULT_PEER_IP))


class SendPath(Elaboratable):
    def __init__(self):
        self.write = TcpRingWrite(width=WIDTH, connections=CONNECTIONS)
        self.read = TcpRingRead(width=WIDTH, connections=CONNECTIONS, max_segment=MSS)
        self.frame = TcpTxFrame(width=WIDTH)

    def elaborate(self, platform):
        m = Module()
        m.submodules.write, m.submodules.read, m.submodules.frame = \
            self.write, self.read, self.frame
        wiring.connect(m, self.read.desc, self.frame.desc)
        wiring.connect(m, self.read.payload, self.frame.payload)
        for block in (self.write, self.read):
            m.d.comb += [block.ring_base.eq(BASE), block.ring_log2.eq(RING_LOG2)]
        m.d.comb += self.frame.ip.eq(NIC)
        return m


def test_segments_carry_what_the_core_sent():
    rng = random.Random(3)
    dut = SendPath()
    memory = bytearray(CONNECTIONS << RING_LOG2)
    starts = [SEQ_MOD - 700, 5]
    fpdus = {c: [4 * rng.randint(4, 240) for _ in range(12)] for c in range(CONNECTIONS)}
    sent = {c: b"" for c in range(CONNECTIONS)}
    reports, packets = [], []
    total = {}

    async def core(ctx):
        w = dut.write
        for conn, seq in enumerate(starts):
            ctx.set(w.start.payload, {"conn": conn, "seq": seq})
            ctx.set(w.start.valid, 1)
            await ctx.tick().until(w.start.ready)
        ctx.set(w.start.valid, 0)
        order = [c for c in range(CONNECTIONS) for _ in fpdus[c]]
        rng.shuffle(order)
        taken = {c: 0 for c in range(CONNECTIONS)}
        for conn in order:
            octets = rng.randbytes(fpdus[conn][taken[conn]])
            taken[conn] += 1
            # the ring holds what is not yet sent: wait for room (the engine's flow control)
            while len(sent[conn]) + len(octets) - sum(
                    total[k][2] for k in range(len(packets)) if total[k][0] == conn) \
                    > 1 << RING_LOG2:
                ctx.set(w.i.valid, 0)
                await ctx.tick()
            sent[conn] += octets
            for k in range(0, len(octets), WIDTH):
                ctx.set(w.i.payload, {"data": int.from_bytes(octets[k:k + WIDTH], "little"),
                                      "n": WIDTH, "first": k == 0,
                                      "last": k + WIDTH >= len(octets), "conn": conn})
                ctx.set(w.i.valid, 1)
                await ctx.tick().until(w.i.ready)
        ctx.set(w.i.valid, 0)

    async def collect_reports(ctx):
        w = dut.write
        ctx.set(w.written.ready, 1)
        ctx.set(w.ended.ready, 1)
        while len(reports) < sum(len(v) for v in fpdus.values()):
            _, _, valid, report = await ctx.tick().sample(w.written.valid, w.written.payload)
            if valid:
                reports.append((report.conn, report.seq))

    async def engine(ctx):
        """Takes the FPDU ends reported, sends each connection's data in segments of
        whole FPDUs up to the MSS."""
        r = dut.read
        nxt = list(starts)
        while any(nxt[c] != (starts[c] + len(sent[c])) % SEQ_MOD or not sent[c]
                  for c in range(CONNECTIONS)) or len(reports) < 24:
            await ctx.tick()
            for conn in range(CONNECTIONS):
                cut = None
                for c, end in reports:
                    if c == conn and 0 < (end - nxt[conn]) % SEQ_MOD <= MSS:
                        cut = end if cut is None or (end - cut) % SEQ_MOD < SEQ_MOD // 2 \
                            else cut
                if cut is None or rng.random() < 0.5:
                    continue
                length = (cut - nxt[conn]) % SEQ_MOD
                ctx.set(r.req.payload, {"conn": conn, "desc": {
                    "dst_ip": PEER, "src_port": 5000 + conn, "dst_port": 40000,
                    "seq": nxt[conn], "ack": 77, "flags": flag_bits(TcpFlag.ACK | TcpFlag.PSH),
                    "window": 4096, "length": length}})
                ctx.set(r.req.valid, 1)
                await ctx.tick().until(r.req.ready)
                ctx.set(r.req.valid, 0)
                total[len(total)] = (conn, nxt[conn], length)
                nxt[conn] = cut

    async def wire(ctx):
        o = dut.frame.o
        frame = b""
        ctx.set(o.ready, 1)
        while len(reports) < 24 or len(packets) < len(total) or any(
                sum(length for c, _, length in total.values() if c == conn) < len(sent[conn])
                for conn in range(CONNECTIONS)):
            _, _, valid, beat = await ctx.tick().sample(o.valid, o.payload)
            if valid:
                frame += int(beat.data).to_bytes(WIDTH, "little")[:beat.n]
                if beat.last:
                    packets.append(frame)
                    frame = b""

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(core)
    sim.add_testbench(engine)
    sim.add_testbench(collect_reports)
    sim.add_testbench(axi_memory(dut.write.m_axi, dut.read.m_axi, memory, BASE, WIDTH, rng),
                      background=True)
    sim.add_testbench(wire)
    sim.run()
    assert len(packets) == len(total) > 2 * CONNECTIONS
    for k, frame in enumerate(packets):
        conn, seq, length = total[k]
        offset = (seq - starts[conn]) % SEQ_MOD
        want = tcp.TcpSegment(src_port=5000 + conn, dst_port=40000, seq=seq, ack=77,
                              flags=TcpFlag.ACK | TcpFlag.PSH, window=4096,
                              payload=sent[conn][offset:offset + length])
        assert frame[34:] == want.build(DEFAULT_NIC_IP, DEFAULT_PEER_IP), k
