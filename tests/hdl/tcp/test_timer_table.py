"""TcpTimerTable in Amaranth's simulator against its contract: every armed connection whose
deadline passes is reported within 2 * connections + 3 cycles (a cycle per report ahead of
it), none twice without an arm in between, none that was never due (but just after a
re-arm, which the engine tolerates); the time base wraps; a report waits while fired is
not taken."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.timer_table import TcpTimerTable


@pytest.mark.parametrize("connections", [1, 5, 16])
def test_reports_what_is_due(connections):
    rng = random.Random(connections)
    dut = TcpTimerTable(connections=connections)
    now0 = (1 << 32) - 300                       # the time base wraps during the run
    state = {k: {"armed": False, "deadline": 0, "pending": False, "armed_at": -99}
             for k in range(connections)}
    cycle = {"n": 0}
    late = []

    async def bench(ctx):
        now = now0
        shown = None
        for n in range(3000):
            cycle["n"] = n
            if n % 3 == 0:
                now = (now + 1) % (1 << 32)
            ctx.set(dut.now, now)
            arm = n < 2500 and rng.random() < 0.1
            if arm:
                conn = rng.randrange(connections)
                armed = rng.random() < 0.8
                deadline = (now + rng.randint(-5, 60)) % (1 << 32)
                ctx.set(dut.arm.payload, {"conn": conn, "armed": armed, "deadline": deadline})
            ctx.set(dut.arm.valid, arm)
            ctx.set(dut.fired.ready, rng.random() < 0.7)
            _, _, valid, ready, fired = await ctx.tick().sample(
                dut.fired.valid, dut.fired.ready, dut.fired.payload)
            if valid and shown is None:
                shown = n                       # the report became valid in this cycle
            if valid and ready:
                s = state[fired]
                assert not s["pending"], f"connection {fired} reported twice"
                # the entry was read two cycles before the report showed: an arm since
                # may have changed what it read
                stale = s["armed_at"] >= shown - 2
                due = s["armed"] and ((now - s["deadline"]) % (1 << 32)) < (1 << 31)
                assert due or stale, (f"connection {fired} reported before its deadline: "
                                      f"{s} now {now} n {n}")
                # an arm after the cycle the report was made (while it waited to be
                # taken) makes the connection reportable again
                s["pending"] = s["armed_at"] < shown
                shown = None
            if arm:
                state[conn].update(armed=armed, deadline=deadline, pending=False, armed_at=n)
            for k, s in state.items():
                due = s["armed"] and ((now - s["deadline"]) % (1 << 32)) < (1 << 31)
                if due and not s["pending"]:
                    s.setdefault("due_since", n)
                else:
                    s.pop("due_since", None)
                if "due_since" in s and n - s["due_since"] > 4 * (connections + 3):
                    late.append((k, n))
        ctx.set(dut.fired.ready, 1)
        await ctx.tick().repeat(connections + 5)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not late, late[:5]
    assert sum(1 for s in state.values() if s["pending"]) or connections == 1
