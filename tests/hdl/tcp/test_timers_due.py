"""TcpTimersDue in Amaranth's simulator against the model's _timers for TIME-WAIT and the
delayed ACK: each due when the time base is at or past its deadline (compared with
wrap-around, as the timer table does), and the next deadline the earlier of those that
run."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.timers_due import TcpTimersDue
from rnic.host.model import tcp
from rnic.host.spec.tcp import SEQ_MOD
from tests.hdl.tcp.bench import settle


def test_against_model():
    rng = random.Random(23)
    cases = []
    for _ in range(2000):
        now = rng.choice([rng.getrandbits(32), SEQ_MOD - 5, 3])
        tw_at, delack_at = ((now + rng.choice([-1000, -1, 0, 1, 40, 1000])) % SEQ_MOD
                            for _ in range(2))
        cases.append(dict(now=now, tw_armed=rng.random() < 0.5, tw_at=tw_at,
                          delack_armed=rng.random() < 0.5, delack_at=delack_at))
    dut = TcpTimersDue()
    got = []

    async def bench(ctx):
        for case in cases:
            for name, value in case.items():
                ctx.set(getattr(dut, name), value)
            await settle(ctx, dut)
            got.append((bool(ctx.get(dut.tw_due)), bool(ctx.get(dut.delack_due)),
                        ctx.get(dut.deadline) if ctx.get(dut.armed) else None))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    kinds = set()
    for case, mine in zip(cases, got):
        now = case["now"]
        running = [at for armed, at in ((case["tw_armed"], case["tw_at"]),
                                        (case["delack_armed"], case["delack_at"])) if armed]
        earliest = None
        for at in running:
            if earliest is None or tcp.seq_lt(at, earliest):
                earliest = at
        want = (case["tw_armed"] and tcp.seq_geq(now, case["tw_at"]),
                case["delack_armed"] and tcp.seq_geq(now, case["delack_at"]), earliest)
        assert mine == want, case
        kinds.add(want[:2] + (len(running),))
    assert len(kinds) >= 8, kinds
