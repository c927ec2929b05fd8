"""TcpAckUpdate in Amaranth's simulator against the model's _ack_field (with its RTT and
sending steps stubbed: they are other blocks' rules): SND.UNA and SND.NXT, the window and
its update rule, slow start, congestion avoidance by byte counting, duplicate ACKs, fast
retransmit and NewReno's full and partial ACKs, for random connections and ACKs around
the sequence-number wrap."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.ack_update import TcpAckUpdate
from rnic.host.model import tcp
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import DUPACK_THRESHOLD, MAX_WINDOW, TcpState
from tests.hdl.tcp.bench import flag_bits, model_tcb, settle

FIELDS = ("snd_una", "snd_nxt", "snd_max", "snd_wnd", "snd_wl1", "snd_wl2", "max_snd_wnd",
          "snd_shift", "send_mss", "cwnd", "ssthresh", "ca_acked", "dupacks", "in_recovery",
          "recover", "retries")


def case(rng):
    mss = rng.choice([536, 1460])
    snd_una = rng.choice([rng.getrandbits(32), SEQ_MOD - 100])
    flight = rng.choice([0, mss, 10 * mss, 50000])
    snd_max = (snd_una + flight) % SEQ_MOD
    snd_wnd = rng.choice([0, 65535, 1 << 20])
    state = dict(
        snd_una=snd_una, snd_nxt=(snd_una + rng.randint(0, flight)) % SEQ_MOD,
        snd_max=snd_max, snd_wnd=snd_wnd, snd_wl1=rng.getrandbits(32),
        snd_wl2=(snd_una - rng.randint(0, 10)) % SEQ_MOD,
        max_snd_wnd=rng.choice([snd_wnd, 1 << 20]), snd_shift=rng.choice([0, 4]),
        send_mss=mss, cwnd=rng.choice([mss, 4 * mss, 30000, MAX_WINDOW - 10]),
        ssthresh=rng.choice([2 * mss, 20000, MAX_WINDOW]), ca_acked=rng.randint(0, 30000),
        dupacks=rng.randint(0, DUPACK_THRESHOLD + 1), in_recovery=rng.random() < 0.3,
        recover=(snd_una + rng.randint(-5, flight + 5)) % SEQ_MOD, retries=rng.randint(0, 5))
    window = rng.choice([snd_wnd >> state["snd_shift"], 0, rng.getrandbits(16)]) & 0xFFFF
    if rng.random() < 0.5:
        window = (snd_wnd >> state["snd_shift"]) & 0xFFFF
    ack = rng.choice([snd_una, snd_max, (snd_una + rng.randint(1, max(flight, 1))) % SEQ_MOD,
                      (snd_una - rng.randint(1, 100)) % SEQ_MOD])
    seq = rng.choice([state["snd_wl1"], (state["snd_wl1"] + 1) % SEQ_MOD,
                      (state["snd_wl1"] - 1) % SEQ_MOD])
    flags = TcpFlag.ACK | (TcpFlag.FIN if rng.random() < 0.1 else 0)
    seg = dict(seq=seq, ack=ack, window=window, flags=int(flags),
               length=rng.choice([0, 0, 0, 100]))
    acked = (ack - snd_una) % SEQ_MOD
    if rng.random() < 0.2 and 0 < acked <= state["cwnd"]:
        # congestion avoidance's edge: the octets counted reach cwnd exactly
        state.update(ca_acked=state["cwnd"] - acked, ssthresh=state["cwnd"],
                     in_recovery=False)
    return state, seg


def model(state, seg):
    engine = TcpEngine(ip="169.254.7.2")
    tcb = model_tcb(state=TcpState.ESTABLISHED, iss=0,
               ring_seq=state["snd_una"], rto=200,
               **{k: state[k] for k in FIELDS if k != "in_recovery"},
               in_recovery=bool(state["in_recovery"]))
    sent = []
    engine._send_first = lambda *args: sent.append(True)
    engine._rtt_ack = engine._rto_from_estimate = lambda *args: None
    engine._fin_acked = lambda *args: True
    info = tcp.ReceiveInfo(src_ip=1, src_port=2, dst_port=3, seq=seg["seq"], ack=seg["ack"],
                           flags=seg["flags"], window=seg["window"], length=seg["length"])
    assert engine._ack_field(0, tcb, info, seg["length"], 0, [])
    out = {k: getattr(tcb, k) for k in FIELDS}
    out["dupacks"] = min(out["dupacks"], DUPACK_THRESHOLD + 1)   # (saturates in gateware)
    out["in_recovery"] = int(out["in_recovery"])
    return out, bool(sent)


def test_against_model():
    rng = random.Random(4)
    cases = []
    while len(cases) < 3000:
        state, seg = case(rng)
        # only what passes the range checks (TcpRxCheck) reaches these rules
        if tcp.seq_gt(seg["ack"], state["snd_max"]) or tcp.seq_lt(
                seg["ack"], (state["snd_una"] - state["max_snd_wnd"]) % SEQ_MOD):
            continue
        cases.append((state, seg))
    dut = TcpAckUpdate()
    got = []

    async def bench(ctx):
        for state, seg in cases:
            ctx.set(dut.i, state)
            ctx.set(dut.seg, dict(seg, flags=flag_bits(seg["flags"])))
            await settle(ctx, dut)
            o = ctx.get(dut.o)
            got.append(({k: int(getattr(o, k)) for k in FIELDS}, bool(ctx.get(dut.send_first))))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    seen = set()
    for (state, seg), (mine, sent) in zip(cases, got):
        want, want_sent = model(state, seg)
        assert mine == want, {k: (mine[k], want[k]) for k in FIELDS if mine[k] != want[k]}
        assert sent == want_sent, (state, seg)
        seen.add((want_sent, want["in_recovery"], want["cwnd"] > state["cwnd"],
                  want["snd_wnd"] != state["snd_wnd"]))
    assert len(seen) >= 8, seen
