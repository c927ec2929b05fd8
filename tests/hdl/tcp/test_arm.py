"""TcpArm in Amaranth's simulator against the model's _arm: which timer runs, its
deadline, the persist backoff and SND.NXT after an event, for connections with and
without octets in their rings, zero and open windows, timers running or not."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.arm import TcpArm
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD
from rnic.host.spec.tcp_engine import TcpState
from tests.hdl.tcp.bench import model_tcb, settle

RTO_MAX, NOW = 60000, 9000


def test_against_model():
    rng = random.Random(15)
    cases = []
    for _ in range(2000):
        snd_una = rng.choice([rng.getrandbits(32), SEQ_MOD - 3])
        snd_max = (snd_una + rng.choice([0, 0, 10, 5000])) % SEQ_MOD
        data_end = (snd_max + rng.choice([0, 0, 100])) % SEQ_MOD
        if rng.random() < 0.1:
            snd_una = snd_max = (data_end + 1) % SEQ_MOD      # a FIN acknowledged
        cases.append(dict(
            state=rng.choice([TcpState.SYN_SENT, TcpState.ESTABLISHED, TcpState.TIME_WAIT,
                              TcpState.FIN_WAIT_1, TcpState.CLOSE_WAIT]),
            snd_wnd=rng.choice([0, 0, 65535]), snd_una=snd_una,
            snd_nxt=(snd_una + rng.randint(0, 5)) % SEQ_MOD, snd_max=snd_max,
            data_end=data_end, rto=rng.choice([200, 3000, 50000]),
            rto_armed=rng.random() < 0.5, rto_at=123, persist_armed=rng.random() < 0.5,
            persist_at=456, persist_backoff=rng.randint(0, 6)))
    dut = TcpArm()
    got = []

    async def bench(ctx):
        ctx.set(dut.now, NOW)
        ctx.set(dut.rto_max, RTO_MAX)
        for state in cases:
            ctx.set(dut.i, state)
            await settle(ctx, dut)
            o = ctx.get(dut.o)
            got.append({k: int(getattr(o, k)) for k in ("snd_nxt", "rto_armed", "rto_at",
                                                         "persist_armed", "persist_at",
                                                         "persist_backoff")})

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    kinds = set()
    for state, mine in zip(cases, got):
        engine = TcpEngine(ip="169.254.7.2", rto_max=RTO_MAX)
        held = (state["data_end"] - state["snd_una"]) % SEQ_MOD
        tcb = model_tcb(state=state["state"], iss=0,
                   snd_una=state["snd_una"], snd_nxt=state["snd_nxt"],
                   snd_max=state["snd_max"], snd_wnd=state["snd_wnd"],
                   ring_seq=state["snd_una"] if held < SEQ_MOD // 2 else state["data_end"],
                   rto=state["rto"], rto_at=123 if state["rto_armed"] else None,
                   persist_at=456 if state["persist_armed"] else None,
                   persist_backoff=state["persist_backoff"])
        tcb.ring = bytearray(held if held < SEQ_MOD // 2 else 0)
        engine._arm(tcb, NOW)
        want = dict(snd_nxt=tcb.snd_nxt, rto_armed=int(tcb.rto_at is not None),
                    rto_at=tcb.rto_at if tcb.rto_at is not None else mine["rto_at"],
                    persist_armed=int(tcb.persist_at is not None),
                    persist_at=tcb.persist_at if tcb.persist_at is not None
                    else mine["persist_at"], persist_backoff=tcb.persist_backoff)
        assert mine == want, (state, {k: (mine[k], want[k]) for k in want if mine[k] != want[k]})
        kinds.add((want["rto_armed"], want["persist_armed"]))
    assert len(kinds) >= 3, kinds
