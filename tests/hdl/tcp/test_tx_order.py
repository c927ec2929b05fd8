"""TcpTxOrder in Amaranth's simulator beside a model of the engine's send port and the ring
reader (requests taken at random, each descriptor out after a random load, in order): no
segment without payload leaves before a data segment the engine offered before it, none
is lost or doubled, and one with nothing ahead of it leaves the next cycle."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.tx_order import TcpTxOrder

READER_DEPTH = 5                    # the request slice's one and the descriptor FIFO's four


def test_order_against_reader_model():
    rng = random.Random(7)
    dut = TcpTxOrder()
    seen = {"acks": [], "data": [], "waited": 0, "at_once": 0}

    async def bench(ctx):
        serial = 0
        data_port = None            # the serial the engine's send port offers
        ack_port = None             # (serial, cycle offered) on ``i``
        reader = []                 # [serial, cycle its descriptor is loaded]
        for cycle in range(20000):
            busy = cycle % 4000 < 3000      # stretches of idle let the reader drain
            if data_port is None and busy and rng.random() < 0.15:
                data_port, serial = serial, serial + 1
            if ack_port is None and rng.random() < 0.1:
                ack_port, serial = (serial, cycle), serial + 1
            sent = data_port is not None and len(reader) < READER_DEPTH and rng.random() < 0.5
            left = bool(reader) and reader[0][1] <= cycle and rng.random() < 0.7
            ctx.set(dut.queued, data_port is not None)
            ctx.set(dut.sent, sent)
            ctx.set(dut.left, left)
            ctx.set(dut.i.valid, ack_port is not None)
            ctx.set(dut.i.payload.seq, 0 if ack_port is None else ack_port[0])
            ctx.set(dut.o.ready, rng.random() < 0.7)
            taken = ack_port is not None and ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                ack = ctx.get(dut.o.payload.seq)
                ahead = [s for s in [data_port] + [s for s, _ in reader]
                         if s is not None and s < ack]
                assert not ahead, f"segment {ack} left before data segments {ahead}"
                seen["acks"].append(ack)
            if left:
                seen["data"].append(reader.pop(0)[0])
            if sent:
                start = max([cycle + 1] + [end for _, end in reader[-1:]])
                reader.append([data_port, start + rng.randint(0, 40)])
                data_port = None
            if taken:
                if not reader and data_port is None:
                    seen["at_once"] += 1
                    ctx.set(dut.o.ready, 1)
                    await ctx.tick()
                    assert ctx.get(dut.o.valid), "nothing ahead: out the next cycle"
                    assert ctx.get(dut.o.payload.seq) == ack_port[0]
                    ctx.set(dut.queued, 0)
                    ctx.set(dut.sent, 0)
                    ctx.set(dut.left, 0)
                    ctx.set(dut.i.valid, 0)
                    seen["acks"].append(ack_port[0])
                else:
                    seen["waited"] += 1
                ack_port = None
            await ctx.tick()
        offered = set(seen["acks"]) | set(seen["data"])
        assert len(seen["acks"]) == len(set(seen["acks"])), "an ACK left twice"
        assert offered >= set(range(serial - 10)), "lost segments"
        assert seen["waited"] > 100 and seen["at_once"] > 100, seen

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
