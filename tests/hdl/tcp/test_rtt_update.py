"""TcpRttUpdate in Amaranth's simulator against the model's _rtt_ack and
_rto_from_estimate: the timing, the estimate and the RTO after random ACKs of new data,
first samples and later ones, samples across the time base's wrap, the RTO's limits."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.rtt_update import TcpRttUpdate
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD
from rnic.host.spec.tcp_engine import TcpState
from tests.hdl.tcp.bench import model_tcb, settle

RTO_MIN, RTO_MAX, RTO_INITIAL = 200, 60000, 1000


def case(rng):
    now = rng.choice([rng.getrandbits(32), rng.randint(0, 50)])
    rtt_seq = rng.getrandbits(32)
    state = dict(
        timing=rng.random() < 0.8, rtt_seq=rtt_seq,
        rtt_time=(now - rng.choice([0, 1, 5, 40, 300, 5000, 100000])) % SEQ_MOD,
        estimated=rng.random() < 0.7, srtt8=rng.choice([0, 8, 80, 1600, 400000]),
        rttvar4=rng.choice([0, 1, 4, 100, 3000, 200000]), rto=rng.choice([200, 1000, 3000]))
    ack = rng.choice([rtt_seq, (rtt_seq + rng.randint(1, 3000)) % SEQ_MOD,
                      (rtt_seq - rng.randint(1, 3000)) % SEQ_MOD])
    return state, ack, now


def model(state, ack, now):
    engine = TcpEngine(ip="169.254.7.2", rto_min=RTO_MIN, rto_max=RTO_MAX,
                       rto_initial=RTO_INITIAL)
    tcb = model_tcb(state=TcpState.ESTABLISHED, iss=0,
               snd_una=0, snd_nxt=0, snd_max=0, ring_seq=0, rto=state["rto"],
               srtt8=state["srtt8"] if state["estimated"] else None,
               rttvar4=state["rttvar4"] if state["estimated"] else None,
               rtt_seq=state["rtt_seq"] if state["timing"] else None,
               rtt_time=state["rtt_time"])
    engine._rtt_ack(tcb, ack, now)
    engine._rto_from_estimate(tcb)
    return dict(timing=tcb.rtt_seq is not None, estimated=tcb.srtt8 is not None,
                srtt8=tcb.srtt8, rttvar4=tcb.rttvar4, rto=tcb.rto)


def test_against_model():
    rng = random.Random(2)
    cases = [case(rng) for _ in range(2000)]
    dut = TcpRttUpdate()
    got = []

    async def bench(ctx):
        ctx.set(dut.rto_min, RTO_MIN)
        ctx.set(dut.rto_max, RTO_MAX)
        ctx.set(dut.rto_initial, RTO_INITIAL)
        for state, ack, now in cases:
            ctx.set(dut.i, state)
            ctx.set(dut.ack, ack)
            ctx.set(dut.now, now)
            await settle(ctx, dut)
            o = ctx.get(dut.o)
            got.append(dict(timing=bool(o.timing), estimated=bool(o.estimated),
                            srtt8=o.srtt8, rttvar4=o.rttvar4, rto=o.rto))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    kinds = set()
    for (state, ack, now), mine in zip(cases, got):
        want = model(state, ack, now)
        if not want["estimated"]:
            mine.update(srtt8=None, rttvar4=None)   # (the model keeps none)
        assert mine == want, (state, ack, now)
        kinds.add((state["timing"] and not want["timing"], state["estimated"],
                   want["rto"] in (RTO_MIN, RTO_MAX)))
    assert len(kinds) >= 6, kinds
