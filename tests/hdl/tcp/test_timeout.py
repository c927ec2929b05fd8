"""TcpTimeout in Amaranth's simulator against the model's _timeout: giving up after the
retries (with a RST only from a synchronized state), RTO doubling to its maximum, the SYN
sent again from SYN-SENT, and the congestion state and SND.NXT of going back."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.timeout import TcpTimeout
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import TcpEventKind, TcpState
from tests.hdl.tcp.bench import model_tcb, settle

FIELDS = ("retries", "rto", "snd_nxt", "cwnd", "ssthresh", "ca_acked", "dupacks",
          "in_recovery", "recover")
RTO_MAX, MAX_RETRIES, NOW = 60000, 5, 7000


def test_against_model():
    rng = random.Random(14)
    cases = []
    for _ in range(1500):
        snd_una = rng.choice([rng.getrandbits(32), SEQ_MOD - 10])
        snd_max = (snd_una + rng.choice([0, 1, 3000, 100000])) % SEQ_MOD
        cases.append(dict(
            state=rng.choice([TcpState.SYN_SENT, TcpState.ESTABLISHED, TcpState.CLOSE_WAIT,
                              TcpState.FIN_WAIT_1, TcpState.LAST_ACK]),
            retries=rng.randint(0, MAX_RETRIES), rto=rng.choice([200, 1000, 40000, 60000]),
            rto_armed=1, rto_at=NOW, timing=rng.random() < 0.5, snd_una=snd_una,
            snd_nxt=snd_max, snd_max=snd_max, send_mss=rng.choice([536, 1460]),
            cwnd=rng.choice([1460, 30000]), ssthresh=rng.choice([3000, 1 << 30]),
            ca_acked=rng.randint(0, 1000), dupacks=rng.randint(0, 4),
            in_recovery=rng.random() < 0.3, recover=snd_una))
    dut = TcpTimeout()
    got = []

    async def bench(ctx):
        ctx.set(dut.now, NOW)
        ctx.set(dut.rto_max, RTO_MAX)
        ctx.set(dut.max_retries, MAX_RETRIES)
        for state in cases:
            ctx.set(dut.i, state)
            await settle(ctx, dut)
            o = ctx.get(dut.o)
            got.append(({k: int(getattr(o, k)) for k in FIELDS + ("timing", "rto_at")},
                        {k: bool(ctx.get(getattr(dut, k)))
                         for k in ("give_up", "reset", "resend_syn", "go_back")}))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    for state, (fields, flags) in zip(cases, got):
        engine = TcpEngine(ip="169.254.7.2", rto_max=RTO_MAX, max_retries=MAX_RETRIES)
        tcb = model_tcb(state=state["state"], iss=0,
                   ring_seq=state["snd_una"], rtt_seq=1 if state["timing"] else None,
                   **{k: state[k] for k in FIELDS if k != "in_recovery"},
                   snd_una=state["snd_una"], snd_max=state["snd_max"],
                   send_mss=state["send_mss"], in_recovery=bool(state["in_recovery"]),
                   rto_at=NOW)
        engine._table[0] = tcb
        sent = []
        engine._send_window = lambda *args: sent.append("window")
        engine._syn = lambda *args, **kwargs: sent.append("syn") or "syn"
        out = []
        alive = engine._timeout(0, tcb, NOW, out)
        assert flags["give_up"] == (not alive), state
        if not alive:
            assert [e.kind for e in engine.events()] == [TcpEventKind.LOST]
            assert flags["reset"] == bool(out and out[0].segment.flags & TcpFlag.RST)
            continue
        assert flags["resend_syn"] == ("syn" in out)
        assert flags["go_back"] == (state["state"] != TcpState.SYN_SENT)
        want = {k: int(getattr(tcb, k)) for k in FIELDS}
        want.update(timing=int(tcb.rtt_seq is not None), rto_at=tcb.rto_at)
        assert fields == want, {k: (fields[k], want[k]) for k in want if fields[k] != want[k]}
