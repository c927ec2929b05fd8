"""TcpSendStep in Amaranth's simulator against the first turn of the model's _send_window:
whether a segment may go from SND.NXT, with which limit and whether it may split an FPDU,
or the FIN alone, for every state, windows smaller and larger than the flight, nothing or
a FIN still unsent, near the sequence-number wrap; and against its _send_first: the limit
of the first segment again, or the FIN alone."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.send_step import TcpSendStep
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD
from rnic.host.spec.tcp_engine import TcpState
from tests.hdl.tcp.bench import model_tcb, settle


class _Sent(Exception):
    """What the model did first: ("cut", seq, limit, may_split) or ("fin", seq, length)."""


def case(rng):
    mss = rng.choice([536, 1460])
    snd_una = rng.choice([rng.getrandbits(32), SEQ_MOD - 700])
    sent = rng.choice([0, 0, 100, mss, 5000])
    written = sent + rng.choice([0, 0, 1, 100, 3000])
    fin_pending = rng.random() < 0.3
    snd_nxt = snd_una + sent
    if fin_pending and written == sent and rng.random() < 0.5:
        snd_nxt += 1                                    # the FIN is out
    snd_max = max(snd_nxt, snd_una + rng.choice([sent, written, written + fin_pending]))
    return dict(
        state=rng.choice(list(TcpState)), snd_una=snd_una, snd_nxt=snd_nxt % SEQ_MOD,
        snd_max=snd_max % SEQ_MOD,
        snd_wnd=rng.choice([0, 1000, 65535, sent, sent + 1]),
        cwnd=rng.choice([mss, 4 * mss, sent, sent + 7, 1 << 20]), send_mss=mss,
        data_end=(snd_una + written) % SEQ_MOD, fin_pending=fin_pending,
        fin_seq=(snd_una + written) % SEQ_MOD if fin_pending else 0)


def model_engine(state):
    engine = TcpEngine(ip="169.254.7.2")
    written = (state["data_end"] - state["snd_una"]) % SEQ_MOD
    tcb = model_tcb(ring_seq=state["snd_una"], ring=bytearray(written), **{
        k: state[k] for k in ("state", "snd_una", "snd_nxt", "snd_max", "snd_wnd", "cwnd",
                              "send_mss", "fin_pending", "fin_seq")})
    return engine, tcb


def model_first(state):
    """What the model's _send_first does first (its cut with a limit of 0 or less finds
    nothing)."""
    engine, tcb = model_engine(state)

    def cut(tcb, seq, limit, *, may_split):
        if limit <= 0:
            return 0
        raise _Sent(("cut", seq, limit, may_split))

    def send_data(tcb, seq, length, now, out):
        raise _Sent(("fin", seq, length))

    engine._cut, engine._send_data = cut, send_data
    try:
        engine._send_first(tcb, 0, [])
    except _Sent as sent:
        return sent.args[0]
    return None


def model(state):
    engine, tcb = model_engine(state)

    def cut(tcb, seq, limit, *, may_split):
        raise _Sent(("cut", seq, limit, may_split))

    def send_data(tcb, seq, length, now, out):
        raise _Sent(("fin", seq, length))

    engine._cut, engine._send_data = cut, send_data
    if tcb.state not in (TcpState.ESTABLISHED, TcpState.CLOSE_WAIT, TcpState.FIN_WAIT_1,
                         TcpState.CLOSING, TcpState.LAST_ACK):
        return None                                     # (_flush sends only in these)
    try:
        engine._send_window(tcb, 0, [])
    except _Sent as sent:
        return sent.args[0]
    return None


def test_against_model():
    rng = random.Random(17)
    cases = [case(rng) for _ in range(3000)]
    dut = TcpSendStep()
    got, firsts = [], []

    async def bench(ctx):
        for state in cases:
            ctx.set(dut.i, state)
            await settle(ctx, dut)
            first = ctx.get(dut.first_limit)
            firsts.append(("cut", state["snd_una"], first, True) if first else
                          ("fin", state["snd_una"], 0) if ctx.get(dut.first_fin) else None)
            if ctx.get(dut.cut):
                got.append(("cut", state["snd_nxt"], ctx.get(dut.limit),
                            bool(ctx.get(dut.may_split))))
            elif ctx.get(dut.fin):
                got.append(("fin", state["snd_nxt"], 0))
            else:
                got.append(None)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    kinds = set()
    for state, mine in zip(cases, got):
        want = model(state)
        assert mine == want, (state, mine, want)
        kinds.add(want and (want[0], want[2] == state["send_mss"], want[-1]))
    assert len(kinds) >= 5, kinds
    kinds = set()
    for state, mine in zip(cases, firsts):
        want = model_first(state)
        assert mine == want, (state, mine, want)
        kinds.add(want and want[0])
    assert kinds == {"cut", "fin", None}, kinds
