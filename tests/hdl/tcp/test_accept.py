"""TcpAccept in Amaranth's simulator against the model's _accept: the fields of the
connection a good cookie opens, for every MSS index and window shift code, near the
sequence-number wrap."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.accept import TcpAccept
from rnic.host.model import tcp
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import COOKIE_NO_WSCALE
from tests.hdl.tcp.bench import flag_bits, settle

FIELDS = ("iss", "irs", "snd_una", "rcv_nxt", "rcv_adv", "snd_wl1", "snd_wl2", "snd_shift",
          "rcv_shift", "send_mss", "recover", "cwnd")


def test_against_model():
    rng = random.Random(12)
    cases = []
    for _ in range(1000):
        scale = rng.choice([0, 7])
        params = dict(mss=rng.choice([1460, 1200, 8000]), rcv_scale=scale,
                      rcv_wnd=rng.choice([65535, 1000] + ([300000] if scale else [])))
        info = tcp.ReceiveInfo(src_ip=1, src_port=2, dst_port=3,
                               seq=rng.choice([rng.getrandbits(32), 0]),
                               ack=rng.choice([rng.getrandbits(32), 0]),
                               flags=int(TcpFlag.ACK), window=100, length=0)
        cases.append((params, info, rng.randrange(8), rng.choice([0, 5, 14, COOKIE_NO_WSCALE])))
    dut = TcpAccept()
    got = []

    async def bench(ctx):
        for params, info, index, code in cases:
            for name, value in params.items():
                ctx.set(getattr(dut, name), value)
            ctx.set(dut.cookie, {"ok": 1, "mss_index": index, "wscale_code": code})
            ctx.set(dut.seg, {"src_ip": 1, "src_port": 2, "dst_port": 3, "seq": info.seq,
                              "ack": info.ack, "flags": flag_bits(info.flags), "window": 100,
                              "length": 0, "mss": 0, "ws_present": 0, "ws": 0,
                              "sack_permitted": 0, "bad_options": 0})
            await settle(ctx, dut)
            o = ctx.get(dut.o)
            got.append({k: int(getattr(o, k)) for k in FIELDS + ("echo_delta",)})

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    for (params, info, index, code), mine in zip(cases, got):
        engine = TcpEngine(ip="169.254.7.2", **params)
        engine.listen(3)
        engine._accept(0, info, index, code)
        tcb = engine._table[0]
        want = {k: getattr(tcb, k) % SEQ_MOD for k in FIELDS}
        want["echo_delta"] = (tcb.irs - tcb.iss) % SEQ_MOD
        assert mine == want, {k: (mine[k], want[k]) for k in want if mine[k] != want[k]}
        assert tcb.snd_nxt == tcb.snd_max == tcb.snd_una
