"""TcpSynSent in Amaranth's simulator against the model's _syn_sent and _connected: the
verdict and reason for every kind of answer to an active open's SYN, and on a SYN-ACK the
connection's fields (window scaling on only when both SYNs had it, the send MSS, IW)."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.syn_sent import SynSentVerdict, TcpSynSent
from rnic.host.model import tcp
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import TcpDrop, TcpEventKind, TcpState
from tests.hdl.tcp.bench import flag_bits, model_tcb, settle

FIELDS = ("irs", "rcv_nxt", "rcv_adv", "snd_shift", "rcv_shift", "send_mss", "snd_wnd",
          "snd_wl1", "snd_wl2", "snd_una", "cwnd")


def model(params, snd_nxt, info):
    engine = TcpEngine(ip="169.254.7.2", **params)
    tcb = model_tcb(state=TcpState.SYN_SENT, iss=(snd_nxt - 1) % SEQ_MOD,
                    snd_una=(snd_nxt - 1) % SEQ_MOD, snd_nxt=snd_nxt,
               snd_max=snd_nxt, ring_seq=snd_nxt, rto=1000)
    engine._table[0] = tcb
    engine._rtt_ack = lambda *args: None
    out = []
    engine._syn_sent(0, tcb, info, 5, out)
    dropped = [r for r in TcpDrop if engine.counters[r]]
    events = [e.kind for e in engine.events()]
    if events == [TcpEventKind.REFUSED]:
        return SynSentVerdict.REFUSED, None, None
    if events == [TcpEventKind.CONNECTED]:
        return SynSentVerdict.CONNECTED, None, {k: getattr(tcb, k) for k in FIELDS}
    (reason,) = dropped
    return (SynSentVerdict.DROP_RESET if out else SynSentVerdict.DROP), reason, None


def test_against_model():
    rng = random.Random(11)
    dut = TcpSynSent()
    cases = []
    for _ in range(2000):
        scale = rng.choice([0, 7])
        params = dict(mss=rng.choice([1460, 1000]), rcv_scale=scale,
                      rcv_wnd=rng.choice([65535, 1000] + ([200000] if scale else [])))
        snd_nxt = rng.choice([rng.getrandbits(32), 0])
        flags = 0
        for flag, p in ((TcpFlag.SYN, 0.7), (TcpFlag.ACK, 0.7), (TcpFlag.RST, 0.2)):
            if rng.random() < p:
                flags |= flag
        info = tcp.ReceiveInfo(
            src_ip=1, src_port=2, dst_port=3, seq=rng.choice([rng.getrandbits(32), SEQ_MOD - 1]),
            ack=rng.choice([snd_nxt, (snd_nxt + 1) % SEQ_MOD]), flags=int(flags),
            window=rng.getrandbits(16), length=0, mss=rng.choice([0, 536, 1400, 9000]),
            window_scale=rng.choice([None, 0, 14]))
        cases.append((params, snd_nxt, info))
    got = []

    async def bench(ctx):
        for params, snd_nxt, info in cases:
            for name, value in params.items():
                ctx.set(getattr(dut, name), value)
            ctx.set(dut.snd_nxt, snd_nxt)
            ctx.set(dut.seg, {
                "src_ip": 1, "src_port": 2, "dst_port": 3, "seq": info.seq, "ack": info.ack,
                "flags": flag_bits(info.flags), "window": info.window, "length": 0,
                "mss": info.mss, "ws_present": info.window_scale is not None,
                "ws": info.window_scale or 0, "sack_permitted": 0, "bad_options": 0})
            await settle(ctx, dut)
            c = ctx.get(dut.connected)
            got.append((SynSentVerdict(ctx.get(dut.verdict)), int(ctx.get(dut.reason)),
                        {k: int(getattr(c, k)) for k in FIELDS}))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    seen = set()
    for (params, snd_nxt, info), (verdict, reason, fields) in zip(cases, got):
        want_verdict, want_reason, want_fields = model(params, snd_nxt, info)
        assert verdict == want_verdict, (params, snd_nxt, info)
        if want_reason is not None:
            assert reason == want_reason
        if want_fields is not None:
            assert fields == want_fields, {k: (fields[k], want_fields[k]) for k in FIELDS
                                           if fields[k] != want_fields[k]}
        seen.add((want_verdict, want_reason))
    assert len(seen) >= 6, seen
