"""TcpReply in Amaranth's simulator against the model's _reset_answer, _syn_ack and
connect: the RST for a segment with no connection in both of its forms, the SYN-ACK to a
SYN with and without window scale, and an active open's SYN (the peer and ports in the
segment's fields as if the peer had sent it), field for field (the SYN-ACK's ISS is the
cookie given, the SYN's the ISS given)."""

import dataclasses
import ipaddress
import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.reply import ReplyKind, TcpReply
from rnic.host.model import tcp
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from tests.hdl.tcp.bench import flag_bits

MSS, RCV_WND, RCV_SCALE, NOW = 1460, 200000, 7, 1234


def info_of(rng, kind):
    flags = (TcpFlag.SYN if kind == ReplyKind.SYN_ACK else
             rng.choice([TcpFlag.ACK, TcpFlag.SYN, TcpFlag.FIN, TcpFlag.ACK | TcpFlag.FIN,
                         TcpFlag.SYN | TcpFlag.FIN, 0, TcpFlag.PSH | TcpFlag.ACK]))
    return tcp.ReceiveInfo(
        src_ip=rng.getrandbits(32), src_port=rng.getrandbits(16), dst_port=rng.getrandbits(16),
        seq=rng.choice([rng.getrandbits(32), SEQ_MOD - 1]), ack=rng.getrandbits(32),
        flags=int(flags), window=rng.getrandbits(16),
        length=0 if kind == ReplyKind.SYN_ACK else rng.choice([0, 1, 100]),
        mss=rng.choice([0, 1400]), window_scale=rng.choice([None, 3]))


def test_against_model():
    rng = random.Random(6)
    cases = []
    for _ in range(400):
        kind = rng.choice(list(ReplyKind))
        cases.append((kind, info_of(rng, kind)))
    dut = TcpReply()
    got = []

    async def bench(ctx):
        ctx.set(dut.mss, MSS)
        ctx.set(dut.rcv_wnd, RCV_WND)
        ctx.set(dut.rcv_scale, RCV_SCALE)
        for kind, info in cases:
            engine = TcpEngine(ip="169.254.7.2", mss=MSS, rcv_wnd=RCV_WND, rcv_scale=RCV_SCALE)
            engine.listen(info.dst_port)
            if kind == ReplyKind.SYN:
                (out,) = engine.connect(0, remote_ip=str(ipaddress.IPv4Address(info.src_ip)),
                                        remote_port=info.src_port or 1,
                                        local_port=info.dst_port or 1, now=NOW, iss=info.ack)
                info = dataclasses.replace(info, src_port=info.src_port or 1,
                                           dst_port=info.dst_port or 1)
            else:
                out = (engine._syn_ack(info, NOW) if kind == ReplyKind.SYN_ACK
                       else engine._reset_answer(info, info.length)[0])
            want = out.segment
            cases[len(got)] = (kind, info)
            ctx.set(dut.kind, kind)
            ctx.set(dut.cookie, want.seq if kind != ReplyKind.RESET else 0)
            ctx.set(dut.seg, {
                "src_ip": info.src_ip, "src_port": info.src_port, "dst_port": info.dst_port,
                "seq": info.seq, "ack": info.ack, "flags": flag_bits(info.flags),
                "window": info.window, "length": info.length, "mss": info.mss,
                "ws_present": info.window_scale is not None, "ws": info.window_scale or 0,
                "sack_permitted": 0, "bad_options": 0})
            desc = ctx.get(dut.desc)
            got.append((want, desc))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    for (kind, info), (want, desc) in zip(cases, got):
        assert desc.dst_ip == info.src_ip
        assert (desc.src_port, desc.dst_port, desc.seq, desc.ack, desc.window, desc.length) == (
            want.src_port, want.dst_port, want.seq, want.ack, want.window, 0), (kind, info)
        assert desc.flags.as_value().value == want.flags, (kind, info)
        options = tcp.parse_options(want.options)
        assert bool(desc.syn_options) == (options.mss is not None)
        if desc.syn_options:
            assert desc.mss == options.mss
            assert bool(desc.ws_present) == (options.window_scale is not None)
            assert not desc.ws_present or desc.ws == options.window_scale
