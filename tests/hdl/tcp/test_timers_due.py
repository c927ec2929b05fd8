"""TcpTimersDue in Amaranth's simulator against the model's _timers and next_deadline: each
of TIME-WAIT, retransmission, persist and delayed ACK due when the time base is at or past
its deadline (compared with wrap-around, as the timer table does), and the next deadline
the earliest of those that run."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.timers_due import TIMERS, TcpTimersDue
from rnic.host.model import tcp
from rnic.host.spec.tcp import SEQ_MOD
from tests.hdl.tcp.bench import settle


def test_against_model():
    rng = random.Random(23)
    cases = []
    for _ in range(2000):
        now = rng.choice([rng.getrandbits(32), SEQ_MOD - 5, 3])
        case = dict(now=now)
        for name in TIMERS:
            case[f"{name}_armed"] = rng.random() < 0.5
            case[f"{name}_at"] = (now + rng.choice([-1000, -1, 0, 1, 40, 1000])) % SEQ_MOD
        cases.append(case)
    dut = TcpTimersDue()
    got = []

    async def bench(ctx):
        for case in cases:
            for name, value in case.items():
                ctx.set(getattr(dut, name), value)
            await settle(ctx, dut)
            got.append((tuple(bool(ctx.get(getattr(dut, f"{name}_due"))) for name in TIMERS),
                        ctx.get(dut.deadline) if ctx.get(dut.armed) else None))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    kinds = set()
    for case, mine in zip(cases, got):
        now = case["now"]
        running = [case[f"{name}_at"] for name in TIMERS if case[f"{name}_armed"]]
        earliest = None
        for at in running:
            if earliest is None or tcp.seq_lt(at, earliest):
                earliest = at
        due = tuple(case[f"{name}_armed"] and tcp.seq_geq(now, case[f"{name}_at"])
                    for name in TIMERS)
        assert mine == (due, earliest), case
        kinds.add((due, len(running)))
    assert len(kinds) >= 40, kinds
