"""cocotb side of test_rnic_core.py's pair test: two RnicCores back to back (rnic.hdl.rnic_pair).

Each node has its own register bus (cocotbext-axi AxiLiteMaster) and its own host memory
(one cocotbext-axi memory served by an AxiRamWrite on ``X_m_axi`` and an AxiRamRead on
``X_m_axi_rd``, random pauses). Everything goes through the registers; what the wire
carries comes from rnic.host.model.segment, what the receiving side does from rnic.host.model.sink.
"""

import random

import cocotb
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiRamRead, AxiRamWrite, AxiReadBus, AxiWriteBus

from cocotb_rnic_core import CoreTB
from rnic.host.model import sink as hs
from rnic.host.model.rdmap import ReadRequest
from rnic.host.spec.regmap import ConnState, CqQueue, CqStatus, SqOpcode
from rnic.host.model.segment import TxStream
from rnic.sim.streams import TB

MEM = 1 << 20


class Node:
    """One core of the pair: the register helpers of :class:`cocotb_rnic_core.CoreTB`."""

    rd = CoreTB.rd
    wr = CoreTB.wr
    fields = CoreTB.fields
    wait_field = CoreTB.wait_field
    program = CoreTB.program
    conn_status = CoreTB.conn_status
    stag_write = CoreTB.stag_write
    rq_post = CoreTB.rq_post
    cq_pop = CoreTB.cq_pop
    term_pop = CoreTB.term_pop
    post = CoreTB.post

    def __init__(self, tb, x):
        self.tb, self.x, self.params = tb, x, tb.params
        dut, clk, rst = tb.dut, tb.clk, tb.rst
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, f"{x}_s_axil_"), clk, rst)
        self.ram = AxiRamWrite(AxiWriteBus.from_prefix(dut, f"{x}_m_axi_"), clk, rst, size=MEM)
        self.rram = AxiRamRead(AxiReadBus.from_prefix(dut, f"{x}_m_axi_rd_"), clk, rst, mem=self.ram.mem)
        rng = random.Random(tb.rng.random())

        def pauses():
            while True:
                yield rng.random() < 0.25
        for obj in (self.axil.write_if, self.axil.read_if, self.ram, self.rram):
            obj.log.setLevel("WARNING")
        for ch in (self.ram.aw_channel, self.ram.w_channel, self.ram.b_channel, self.rram.ar_channel,
                   self.rram.r_channel):
            ch.log.setLevel("WARNING")
            ch.set_pause_generator(pauses())

    async def cycles(self, n):
        await self.tb.cycles(n)

    async def cq_all(self, n, limit=2000):
        got = []
        for _ in range(limit):
            c = await self.cq_pop()
            if c is not None:
                got.append(c)
                if len(got) == n:
                    break
        return got


@cocotb.test()
async def pair_send_write_read_terminate(dut):
    """Node a posts two Sends, an RDMA Write and an RDMA Read to node b, b a Send to a; b's
    Read Responder answers the Read; a Send with Invalidate; then a Write to an STag b does not know: b sends a
    Terminate over the wire (b ERROR, a CLOSING with the Terminate in TERM_*). Memories,
    CQ_* of both nodes, TERM_* and TX_FPDUS against rnic.host.model.segment / rnic.host.model.sink."""
    tb = TB(dut)
    await tb.reset()
    a, b = Node(tb, "a"), Node(tb, "b")
    rng = random.Random(tb.rng.getrandbits(32))
    conn = 2
    ab = dict(markers=1, crc=1, phase=128, mulpdu=300)        # a -> b
    ba = dict(markers=0, crc=1, phase=0, mulpdu=260)          # b -> a
    for node, tx, rx in ((a, ab, ba), (b, ba, ab)):
        await node.wait_field("STATUS", "READY", 1)
        await node.wr("DP_CTRL", 0)
        await node.wr("CTRL", enable=1, clear_counters=1)
        await node.wr("CTX_IRD_ORD", ird=2, ord=2)
        await node.program(conn, tx=tx, rx=rx)

    # b: region B (remote read/write) and two receive buffers; a: the Read's sink, one buffer
    stag_b, base_b, stag_a, base_a = 0x0B0B0B02, 0x20000, 0x0A0A0A04, 0x30000
    await b.stag_write(stag=stag_b, base=base_b, length=0x4000, conn=conn, rr=1, rw=1)
    await a.stag_write(stag=stag_a, base=base_a, length=0x1000, conn=conn, rr=0, rw=1)
    mem_b, mem_a = hs.Memory(), hs.Memory()
    sink_b = hs.Sink(memory=mem_b, stream=conn, ird=2)
    sink_a = hs.Sink(memory=mem_a, stream=conn, ird=2)
    sink_b.register_region(stag=stag_b, base=base_b, length=0x4000,
                           access=hs.Access.REMOTE_READ | hs.Access.REMOTE_WRITE)
    sink_a.register_region(stag=stag_a, base=base_a, length=0x1000, access=hs.Access.REMOTE_WRITE)
    for node, model, addr, n, wr_id in ((b, sink_b, 0x40000, 2048, 0xB1), (b, sink_b, 0x40800, 64, 0xB2),
                                        (a, sink_a, 0x60000, 512, 0xA1)):
        await node.rq_post(conn, addr, n, wr_id)
        model.post_receive(addr=addr, length=n, buffer_id=wr_id)

    send1, send2, write, rsrc, bsend = (rng.randbytes(n) for n in (1500, 20, 2000, 1000, 333))
    a.ram.write(0x50000, send1)
    a.ram.write(0x50800, send2)
    a.ram.write(0x51000, write)
    b.ram.write(base_b + 0x2000, rsrc)
    mem_b.write(base_b + 0x2000, rsrc)
    b.ram.write(0x70000, bsend)

    await a.post(conn, SqOpcode.SEND, laddr=0x50000, length=len(send1), wr_id=0x1)
    await b.post(conn, SqOpcode.SEND, laddr=0x70000, length=len(bsend), wr_id=0x11)
    await a.post(conn, SqOpcode.SEND_SE, laddr=0x50800, length=len(send2), wr_id=0x2)
    await a.post(conn, SqOpcode.RDMA_WRITE, laddr=0x51000, length=len(write), rstag=stag_b,
                 rto=base_b + 0x100, wr_id=0x3)
    await a.post(conn, SqOpcode.RDMA_READ, laddr=base_a + 0x40, length=len(rsrc), lstag=stag_a,
                 rstag=stag_b, rto=base_b + 0x2000, wr_id=0x4)

    # the model: a's messages into b, b's Send and Read Response into a
    seg_a, seg_b = TxStream(mulpdu=ab["mulpdu"]), TxStream(mulpdu=ba["mulpdu"])
    req = ReadRequest(sink_stag=stag_a, sink_to=base_a + 0x40, size=len(rsrc), src_stag=stag_b,
                      src_to=base_b + 0x2000)
    a_out = (seg_a.send(send1) + seg_a.send(send2, solicited=True)
             + seg_a.write(write, stag=stag_b, to=base_b + 0x100) + seg_a.read_request(req))
    ev_b = [e for u in a_out for e in sink_b.receive(u)]
    assert [e.request for e in ev_b if isinstance(e, hs.ReadRequestQueued)] == [req]
    b_out = seg_b.send(bsend) + seg_b.read_response(mem_b.read(base_b + 0x2000, len(rsrc)), stag=stag_a,
                                                    to=base_a + 0x40)
    ev_a = [e for u in b_out for e in sink_a.receive(u)]

    got_a = await a.cq_all(5)
    got_b = await b.cq_all(3)
    assert await a.cq_pop() is None and await b.cq_pop() is None

    def sq(got):
        return sorted((c["wr_id"], c["opcode"], c["status"], c["length"]) for c in got if c["queue"] == CqQueue.SQ)

    def rq(got):
        return [(c["wr_id"], c["opcode"], c["length"], c["msn"], c["solicited"]) for c in got
                if c["queue"] == CqQueue.RQ]

    def want_rq(events):
        return [(e.buffer_id, SqOpcode.SEND_SE if e.solicited else SqOpcode.SEND, e.length, e.msn,
                 int(e.solicited)) for e in events if isinstance(e, hs.SendComplete)]
    assert sq(got_a) == [(0x1, SqOpcode.SEND, 0, len(send1)), (0x2, SqOpcode.SEND_SE, 0, len(send2)),
                         (0x3, SqOpcode.RDMA_WRITE, 0, len(write)),
                         (0x4, SqOpcode.RDMA_READ, 0, len(rsrc))], got_a
    assert sq(got_b) == [(0x11, SqOpcode.SEND, 0, len(bsend))], got_b
    assert rq(got_a) == want_rq(ev_a) and len(rq(got_a)) == 1, got_a
    assert rq(got_b) == want_rq(ev_b) and len(rq(got_b)) == 2, got_b
    await tb.cycles(200)
    for node, model, ranges in ((b, mem_b, ((0x40000, 0x1000), (base_b, 0x4000))),
                                (a, mem_a, ((0x60000, 512), (base_a, 0x1000)))):
        for addr, n in ranges:
            assert node.ram.read(addr, n) == model.read(addr, n), (node.x, hex(addr))
    assert a.ram.read(base_a + 0x40, len(rsrc)) == rsrc and b.ram.read(0x40000, len(send1)) == send1
    assert await a.rd("TX_FPDUS") == len(a_out) and await b.rd("RX_FPDUS") == len(a_out)
    assert await b.rd("TX_FPDUS") == len(b_out) and await a.rd("RX_FPDUS") == len(b_out)
    for node in (a, b):
        assert (await node.fields("ERR_STATUS"))["pending"] == 0
        assert (await node.fields("RRQ_STATUS"))["valid"] == 0
        assert (await node.fields("TERM_STATUS"))["valid"] == 0

    # a Send with Invalidate of an STag of b (b's tables, the TX copy included, drop it)
    stag_b2 = 0x0B0B0C07
    await b.stag_write(stag=stag_b2, base=base_b + 0x3000, length=0x100, conn=conn, rr=1, rw=1, ri=1)
    sink_b.register_region(stag=stag_b2, base=base_b + 0x3000, length=0x100,
                           access=hs.Access.REMOTE_READ | hs.Access.REMOTE_WRITE | hs.Access.REMOTE_INV)
    await b.rq_post(conn, 0x41000, 256, 0xB3)
    sink_b.post_receive(addr=0x41000, length=256, buffer_id=0xB3)
    inv = rng.randbytes(50)
    a.ram.write(0x53000, inv)
    await a.post(conn, SqOpcode.SEND_INV, laddr=0x53000, length=len(inv), inv_stag=stag_b2, wr_id=0x7)
    ev_b = [e for u in seg_a.send(inv, inval_stag=stag_b2) for e in sink_b.receive(u)]
    done = [e for e in ev_b if isinstance(e, hs.SendComplete)]
    assert len(done) == 1 and done[0].inval_stag == stag_b2
    got_a, got_b = await a.cq_all(1), await b.cq_all(1)
    assert sq(got_a) == [(0x7, SqOpcode.SEND_INV, 0, len(inv))], got_a
    c = got_b[0]
    assert (c["queue"], c["opcode"], c["wr_id"], c["length"], c["msn"], c["invalidated"], c["inv_stag"]) == \
        (CqQueue.RQ, SqOpcode.SEND_INV, 0xB3, len(inv), done[0].msn, 1, stag_b2), c
    assert b.ram.read(0x41000, len(inv)) == inv
    await b.wait_field("STAG_STATUS", "BUSY", 0)

    # a Write to an STag b does not know: b reports DDP 1/1/0 and sends the Terminate to a
    bad = rng.randbytes(100)
    a.ram.write(0x52000, bad)
    await a.post(conn, SqOpcode.RDMA_WRITE, laddr=0x52000, length=len(bad), rstag=0x0DEAD002, rto=0x1000,
                 wr_id=0x5)
    errs = [e for u in seg_a.write(bad, stag=0x0DEAD002, to=0x1000) for e in sink_b.receive(u)]
    assert len(errs) == 1 and isinstance(errs[0], hs.Error)
    want_term = errs[0].terminate[18:]
    got_a = await a.cq_all(1)
    assert sq(got_a) == [(0x5, SqOpcode.RDMA_WRITE, 0, len(bad))]
    for _ in range(200):
        if (await a.fields("TERM_STATUS"))["valid"]:
            break
    tst, tinfo, payload = await a.term_pop()
    assert (tst["received"], tst["conn"], payload) == (1, conn, want_term), (tst, payload.hex())
    assert tinfo == {"layer": 1, "etype": 1, "ecode": 0}
    tst, tinfo, payload = await b.term_pop()
    assert (tst["received"], tst["conn"], payload) == (0, conn, want_term)
    assert (await a.conn_status(conn))["state"] == ConnState.CLOSING
    assert (await b.conn_status(conn))["state"] == ConnState.ERROR
    # after the Terminate a's work requests are flushed
    await a.post(conn, SqOpcode.SEND, laddr=0x50000, length=10, wr_id=0x6)
    got_a = await a.cq_all(1)
    assert sq(got_a) == [(0x6, SqOpcode.SEND, CqStatus.FLUSHED, 0)], got_a
