"""TcpRxCheck in Amaranth's simulator against the model's own checks
(TcpEngine._synchronized up to the ACK field's effects, reached through the model with its
later steps stubbed): the verdict, the drop reason and the TIME-WAIT restart for random
connections and segments around the windows' edges and the sequence-number wrap."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.rx_check import RxVerdict, TcpRxCheck
from rnic.host.model import tcp
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import TcpDrop, TcpEventKind, TcpState
from tests.hdl.tcp.bench import flag_bits, model_tcb, settle

SYNCHRONIZED = [s for s in TcpState if s not in (TcpState.CLOSED, TcpState.SYN_SENT)]


def near(rng, base, spread):
    return (base + rng.randint(-spread, spread)) % SEQ_MOD


def case(rng):
    rcv_nxt = rng.choice([rng.getrandbits(32), SEQ_MOD - 3])
    window = rng.choice([0, 1, 100, 65535, 1 << 20])
    rcv_adv = rng.choice([(rcv_nxt + window) % SEQ_MOD, near(rng, rcv_nxt, 50)])
    snd_una = rng.choice([rng.getrandbits(32), SEQ_MOD - 2])
    snd_max = (snd_una + rng.choice([0, 1, 1000, 70000])) % SEQ_MOD
    tcb = dict(state=rng.choice(SYNCHRONIZED), rcv_nxt=rcv_nxt, rcv_adv=rcv_adv,
               snd_una=snd_una, snd_max=snd_max, max_snd_wnd=rng.choice([0, 100, 65535]))
    flags = TcpFlag.ACK if rng.random() < 0.7 else 0
    for flag in (TcpFlag.SYN, TcpFlag.RST, TcpFlag.FIN):
        if rng.random() < 0.15:
            flags |= flag
    seg = dict(seq=rng.choice([rcv_nxt, near(rng, rcv_nxt, 3), near(rng, rcv_nxt, 200),
                               (rcv_adv + rng.randint(-2, 2)) % SEQ_MOD,
                               rng.getrandbits(32)]),
               ack=rng.choice([snd_una, snd_max, near(rng, snd_max, 2),
                               near(rng, snd_una - tcb["max_snd_wnd"], 2),
                               rng.getrandbits(32)]),
               flags=int(flags), length=rng.choice([0, 0, 1, 5, 1460]))
    return tcb, seg


def model_verdict(tcb, seg):
    """(verdict, reason, restart) the model gives."""
    engine = TcpEngine(ip="169.254.7.2")
    entry = model_tcb(state=TcpState(tcb["state"]), iss=0, snd_una=tcb["snd_una"],
                      snd_nxt=tcb["snd_max"],
                 snd_max=tcb["snd_max"], ring_seq=tcb["snd_una"], rto=200,
                 rcv_nxt=tcb["rcv_nxt"], rcv_adv=tcb["rcv_adv"],
                 max_snd_wnd=tcb["max_snd_wnd"], time_wait_at=5)
    engine._table[0] = entry
    reached = []
    engine._fin_acked = lambda *args: reached.append(True) or False
    engine._acked = engine._duplicate_ack = lambda *args: None
    info = tcp.ReceiveInfo(src_ip=1, src_port=2, dst_port=3, seq=seg["seq"], ack=seg["ack"],
                           flags=seg["flags"], window=100, length=seg["length"])
    before = dict(engine.counters)
    engine._synchronized(0, entry, info, bytes(seg["length"]), 1000, [])
    dropped = [r for r in TcpDrop if engine.counters[r] != before[r]]
    restart = entry.time_wait_at != 5
    if reached:
        return RxVerdict.ACCEPT, None, restart
    if engine._table[0] is None:
        assert [e.kind for e in engine.events()] == [TcpEventKind.RESET]
        return RxVerdict.RESET, None, restart
    (reason,) = dropped
    return (RxVerdict.DROP_ACK if entry.dup_ack else RxVerdict.DROP), reason, restart


def test_against_model():
    rng = random.Random(5)
    cases = [case(rng) for _ in range(3000)]
    dut = TcpRxCheck()
    got = []

    async def bench(ctx):
        for tcb, seg in cases:
            ctx.set(dut.tcb, tcb)
            ctx.set(dut.seg, dict(seg, flags=flag_bits(seg["flags"])))
            await settle(ctx, dut)
            got.append((ctx.get(dut.verdict), ctx.get(dut.reason),
                        ctx.get(dut.restart_time_wait)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    seen = set()
    for (tcb, seg), (verdict, reason, restart) in zip(cases, got):
        want_verdict, want_reason, want_restart = model_verdict(tcb, seg)
        verdict = RxVerdict(verdict)
        assert verdict == want_verdict, (tcb, seg, want_reason)
        if want_reason is not None:
            assert int(reason) == want_reason, (tcb, seg)
        assert bool(restart) == want_restart, (tcb, seg)
        seen.add((verdict, want_reason))
    assert len(seen) >= 9, seen
