"""TcpWindowField in Amaranth's simulator against the model's _window_field and _emit: the
window advertised and the right edge after it, with and without scaling, an edge already
advertised further than the offer, an echo connection's ring with room, nearly full and
over, and across the sequence-number wrap."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.window_field import TcpWindowField
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import TcpState
from tests.hdl.tcp.bench import model_tcb, settle


def test_against_model():
    rng = random.Random(13)
    cases = []
    for _ in range(2000):
        shift = rng.choice([0, 3, 7, 14])
        rcv_wnd = rng.choice([max(1000, 1 << shift), 65535, min(65535 << shift, 1 << 30)])
        rcv_nxt = rng.choice([rng.getrandbits(32), SEQ_MOD - 5])
        rcv_adv = (rcv_nxt + rng.choice([0, 1, 999, rcv_wnd, rcv_wnd + 4000, -7])) % SEQ_MOD
        ring = rng.choice([4096, 65536, 1 << 20])
        echo = rng.random() < 0.5
        iss, irs = rng.getrandbits(32), (rcv_nxt - rng.randint(1, 1 << 22)) % SEQ_MOD
        received = (rcv_nxt - irs - 1) % SEQ_MOD
        held = min(received, rng.choice([0, 1, ring // 2, ring - 1, ring, ring + 3]))
        snd_una = (iss + 1 + received - held) % SEQ_MOD
        cases.append((rcv_wnd, shift, rcv_nxt, rcv_adv, echo, ring, iss, irs, snd_una))
    dut = TcpWindowField()
    got = []

    async def bench(ctx):
        for rcv_wnd, shift, rcv_nxt, rcv_adv, echo, ring, iss, irs, snd_una in cases:
            ctx.set(dut.rcv_wnd, rcv_wnd)
            ctx.set(dut.rcv_shift, shift)
            ctx.set(dut.rcv_nxt, rcv_nxt)
            ctx.set(dut.rcv_adv, rcv_adv)
            ctx.set(dut.echo, echo)
            ctx.set(dut.echo_delta, (irs - iss) % SEQ_MOD)
            ctx.set(dut.snd_una, snd_una)
            ctx.set(dut.tx_ring, ring)
            await settle(ctx, dut)
            got.append((ctx.get(dut.window), ctx.get(dut.new_adv)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    kinds = set()
    for case, mine in zip(cases, got):
        rcv_wnd, shift, rcv_nxt, rcv_adv, echo, ring, iss, irs, snd_una = case
        engine = TcpEngine(ip="169.254.7.2", rcv_wnd=rcv_wnd, rcv_scale=shift, tx_ring=ring)
        tcb = model_tcb(state=TcpState.ESTABLISHED, iss=iss, snd_una=snd_una,
                        snd_nxt=snd_una, snd_max=snd_una, ring_seq=snd_una, rto=200,
                        irs=irs, rcv_nxt=rcv_nxt, rcv_adv=rcv_adv, rcv_shift=shift, echo=echo)
        segment = engine._emit(tcb, seq=0, flags=TcpFlag.ACK).segment
        assert mine == (segment.window, tcb.rcv_adv), case
        kinds.add((echo, segment.window == 0, segment.window == 65535))
    assert len(kinds) >= 5, kinds
