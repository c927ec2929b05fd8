"""TcpRxText in Amaranth's simulator against the model's _text and _peer_fin: what is
delivered (skip, keep), RCV.NXT, the ACK owed at once or delayed, out-of-order drops, the
peer's FIN and the close states, for random connections and segments around RCV.NXT, the
window's edge and the sequence-number wrap."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.rx_text import TcpRxText
from rnic.host.model import tcp
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import TcpDrop, TcpEventKind, TcpState
from tests.hdl.tcp.bench import flag_bits, model_tcb, settle

DELACK, TIME_WAIT, NOW = 40, 1000, 5000
STATES = [TcpState.ESTABLISHED, TcpState.FIN_WAIT_1, TcpState.FIN_WAIT_2,
          TcpState.CLOSE_WAIT, TcpState.LAST_ACK]


def case(rng):
    rcv_nxt = rng.choice([rng.getrandbits(32), SEQ_MOD - 10])
    rcv_adv = (rcv_nxt + rng.choice([0, 5, 1000, 65535, -3])) % SEQ_MOD
    mss = rng.choice([536, 1460])
    state = dict(state=rng.choice(STATES), rcv_nxt=rcv_nxt, rcv_adv=rcv_adv,
                 rcv_unacked=rng.choice([0, mss, 2 * mss - 1, 5000]), send_mss=mss,
                 ack_now=0, dup_ack=0, delack_armed=rng.random() < 0.3, delack_at=77,
                 fin_acked=rng.random() < 0.5)
    length = rng.choice([0, 1, 3, mss, 2000])
    seq = rng.choice([rcv_nxt, (rcv_nxt - rng.randint(1, length + 2)) % SEQ_MOD,
                      (rcv_nxt + rng.randint(1, 5)) % SEQ_MOD])
    flags = TcpFlag.ACK | (TcpFlag.FIN if rng.random() < 0.3 else 0)
    return state, dict(seq=seq, flags=int(flags), length=length)


def model(state, seg):
    engine = TcpEngine(ip="169.254.7.2", delack=DELACK, time_wait=TIME_WAIT)
    snd_una = 100
    tcb = model_tcb(state=TcpState(state["state"]), iss=0, snd_una=snd_una, snd_nxt=snd_una,
                    snd_max=snd_una, ring_seq=snd_una,
               rto=200, rcv_nxt=state["rcv_nxt"], rcv_adv=state["rcv_adv"],
               rcv_unacked=state["rcv_unacked"], send_mss=state["send_mss"],
               delack_at=77 if state["delack_armed"] else None,
               fin_pending=True, fin_seq=snd_una - 1 if state["fin_acked"] else snd_una)
    engine._table[0] = tcb
    info = tcp.ReceiveInfo(src_ip=1, src_port=2, dst_port=3, seq=seg["seq"], ack=snd_una,
                           flags=seg["flags"], window=100, length=seg["length"])
    payload = bytes(k % 251 for k in range(seg["length"]))
    engine._text(0, tcb, info, payload, NOW)
    delivered = engine.read(0)
    keep = len(delivered)
    skip = (state["rcv_nxt"] - seg["seq"]) % SEQ_MOD if keep else None
    assert not keep or delivered == payload[skip:skip + keep]
    events = [e.kind for e in engine.events()]
    return dict(state=int(tcb.state), rcv_nxt=tcb.rcv_nxt, rcv_unacked=tcb.rcv_unacked,
                ack_now=int(tcb.ack_now), dup_ack=int(tcb.dup_ack),
                delack_armed=int(tcb.delack_at is not None),
                delack_at=tcb.delack_at if tcb.delack_at is not None else 77,
                keep=keep, skip=skip,
                out_of_order=int(engine.counters[TcpDrop.OUT_OF_ORDER] == 1),
                peer_closed=int(events == [TcpEventKind.PEER_CLOSED]),
                time_wait=int(tcb.time_wait_at is not None))


def test_against_model():
    rng = random.Random(8)
    cases = [case(rng) for _ in range(3000)]
    dut = TcpRxText()
    got = []

    async def bench(ctx):
        ctx.set(dut.now, NOW)
        ctx.set(dut.delack, DELACK)
        for state, seg in cases:
            ctx.set(dut.i, state)
            ctx.set(dut.seg, dict(seg, flags=flag_bits(seg["flags"])))
            await settle(ctx, dut)
            o = ctx.get(dut.o)
            got.append(dict(state=int(o.state), rcv_nxt=o.rcv_nxt, rcv_unacked=o.rcv_unacked,
                            ack_now=o.ack_now, dup_ack=o.dup_ack, delack_armed=o.delack_armed,
                            delack_at=o.delack_at, keep=ctx.get(dut.keep),
                            skip=ctx.get(dut.skip), out_of_order=ctx.get(dut.out_of_order),
                            peer_closed=ctx.get(dut.peer_closed),
                            time_wait=ctx.get(dut.time_wait)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    seen = set()
    for (state, seg), mine in zip(cases, got):
        want = model(state, seg)
        if want["skip"] is None:            # nothing delivered: where it starts is moot
            mine["skip"] = None
        assert mine == want, {k: (mine[k], want[k]) for k in want if mine[k] != want[k]}
        seen.add((want["keep"] > 0, want["out_of_order"], want["peer_closed"],
                  want["time_wait"], want["ack_now"]))
    assert len(seen) >= 7, seen
