"""TcpSendCut in Amaranth's simulator against the model's _cut on the same records: FPDU
ends and byte streams pushed (byte stream after byte stream in one record, as the model's
write keeps them), acknowledged records released, cuts from random points with
random limits, with and without may_split; room per connection; across the sequence
wrap."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.send_cut import TcpSendCut
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD
from rnic.host.spec.tcp_engine import TcpStat, TcpState
from tests.hdl.tcp.bench import model_tcb

CONNECTIONS, DEPTH = 3, 8


def model_cut(records, seq, limit, may_split):
    engine = TcpEngine(ip="169.254.7.2")
    tcb = model_tcb(state=TcpState.ESTABLISHED, iss=0,
               snd_una=0, snd_nxt=0, snd_max=0, ring_seq=0, rto=200, send_mss=1 << 20)
    tcb.records = [list(r) for r in records]
    length = engine._cut(tcb, seq, limit, may_split=may_split)
    return length, engine.stats[TcpStat.WINDOW_CUTS]


def test_against_model():
    rng = random.Random(16)
    dut = TcpSendCut(connections=CONNECTIONS, depth=DEPTH)
    starts = [SEQ_MOD - 300, 1000, rng.getrandbits(32)]
    queues = {c: [] for c in range(CONNECTIONS)}
    written = list(starts)
    una = list(starts)
    checked = {"cuts": 0, "splits": 0, "zero": 0, "merged": 0}

    async def bench(ctx):
        for _ in range(700):
            conn = rng.randrange(CONNECTIONS)
            action = rng.choice(["push", "push", "cut", "cut", "release"])
            room = ctx.get(dut.room)
            assert bool(room >> conn & 1) == (len(queues[conn]) < DEPTH)
            if action == "push" and len(queues[conn]) < DEPTH:
                written[conn] = (written[conn] + 4 * rng.randint(1, 400)) % SEQ_MOD
                record = (written[conn], rng.random() < 0.6)
                if not record[1] and queues[conn] and not queues[conn][-1][1]:
                    queues[conn][-1] = record         # byte stream goes on: one record
                    checked["merged"] += 1
                else:
                    queues[conn].append(record)
                ctx.set(dut.push.payload, {"conn": conn, "end": record[0],
                                           "aligned": record[1]})
                ctx.set(dut.push.valid, 1)
                await ctx.tick().until(dut.push.ready)
                ctx.set(dut.push.valid, 0)
                await ctx.tick()                # (room follows 2 cycles after the push)
            elif action == "release":
                ahead = (written[conn] - una[conn]) % SEQ_MOD
                if queues[conn] and rng.random() < 0.5:       # exactly at an FPDU end
                    una[conn] = rng.choice(queues[conn])[0]
                else:
                    una[conn] = (una[conn] + rng.randint(0, ahead)) % SEQ_MOD
                while queues[conn] and (una[conn] - queues[conn][0][0]) % SEQ_MOD < SEQ_MOD // 2:
                    queues[conn].pop(0)
                ctx.set(dut.release.payload, {"conn": conn, "una": una[conn], "reset": 0})
                ctx.set(dut.release.valid, 1)
                await ctx.tick().until(dut.release.ready)
                ctx.set(dut.release.valid, 0)
                await ctx.tick().repeat(2 * DEPTH + 2)     # (the release walks)
            elif action == "cut":
                ahead = (written[conn] - una[conn]) % SEQ_MOD
                seq = (una[conn] + rng.randint(0, ahead)) % SEQ_MOD
                limit = rng.choice([0, 1, 4, 600, 1460, 65535])
                may_split = rng.random() < 0.5
                want, splits = model_cut(queues[conn], seq, limit, may_split)
                ctx.set(dut.cut.payload, {"conn": conn, "seq": seq, "limit": limit,
                                          "may_split": may_split})
                ctx.set(dut.cut.valid, 1)
                await ctx.tick().until(dut.cut.ready)
                ctx.set(dut.cut.valid, 0)
                ctx.set(dut.answer.ready, 1)
                answer, = await ctx.tick().sample(dut.answer.payload).until(dut.answer.valid)
                ctx.set(dut.answer.ready, 0)
                assert (answer.length, answer.split) == (want, splits), (
                    conn, seq, limit, may_split, queues[conn])
                checked["cuts"] += 1
                checked["splits"] += splits
                checked["zero"] += want == 0

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert checked["cuts"] > 150 and checked["splits"] and checked["zero"] and checked["merged"], \
        checked
