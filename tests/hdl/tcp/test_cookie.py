"""TcpCookie in Amaranth's simulator against the model's syn_cookie and check_cookie: the
cookies it makes are the model's, and its verdict on good, aged, forged and implausible
cookies and on cookies returned at another sequence number is the model's, at times near
the start of the time base and near its wrap."""

import random

from amaranth.sim import Simulator

from rnic.hdl.tcp.cookie import TcpCookie
from rnic.host.model.tcp_engine import check_cookie, syn_cookie
from rnic.host.spec.tcp_engine import COOKIE_NO_WSCALE, COOKIE_TIME_SHIFT

COUNTER = 1 << COOKIE_TIME_SHIFT        # ticks of a cookie time counter


def test_against_model():
    rng = random.Random(7)
    secret = rng.getrandbits(32)
    cases = []
    for k in range(120):
        now = rng.choice([rng.getrandbits(32), rng.randint(0, 200), (1 << 32) - 100])
        peer = dict(remote_ip=rng.getrandbits(32), remote_port=rng.getrandbits(16),
                    local_port=rng.choice([5000, 7]), peer_isn=rng.getrandbits(32))
        make = dict(peer, mss_index=rng.randrange(8),
                    wscale_code=rng.choice([0, 7, 14, COOKIE_NO_WSCALE]))
        made_at = max(0, now - rng.choice([0, 1, COUNTER, 2 * COUNTER + 2, 3 * COUNTER,
                                           6 * COUNTER]))
        cookie = syn_cookie(secret, peer["remote_ip"], peer["remote_port"],
                            peer["local_port"], peer["peer_isn"], made_at, make["mss_index"],
                            make["wscale_code"])
        cookie = rng.choice([cookie, cookie, cookie ^ (1 << rng.randrange(32))])
        # (a later segment of the peer: another sequence number)
        isn = rng.choice([peer["peer_isn"]] * 4 + [(peer["peer_isn"] + 1460) % (1 << 32)])
        cases.append((now, make, made_at, dict(peer, cookie=cookie, peer_isn=isn)))
    dut = TcpCookie()
    results = []

    async def bench(ctx):
        ctx.set(dut.secret, secret)
        ctx.set(dut.cookie.ready, 1)
        ctx.set(dut.verdict.ready, 1)
        for now, make, made_at, check in cases:
            ctx.set(dut.now, made_at)
            ctx.set(dut.make.payload, make)
            ctx.set(dut.make.valid, 1)
            await ctx.tick().until(dut.make.ready)
            ctx.set(dut.make.valid, 0)
            made, = await ctx.tick().sample(dut.cookie.payload).until(dut.cookie.valid)
            ctx.set(dut.now, now)
            ctx.set(dut.check.payload, check)
            ctx.set(dut.check.valid, 1)
            await ctx.tick().until(dut.check.ready)
            ctx.set(dut.check.valid, 0)
            verdict, = await ctx.tick().sample(dut.verdict.payload).until(dut.verdict.valid)
            results.append((made, verdict.ok, verdict.mss_index, verdict.wscale_code))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    goods = 0
    for (now, make, made_at, check), (made, ok, mss_index, wscale) in zip(cases, results):
        assert made == syn_cookie(secret, make["remote_ip"], make["remote_port"],
                                  make["local_port"], make["peer_isn"], made_at,
                                  make["mss_index"], make["wscale_code"])
        want = check_cookie(secret, check["remote_ip"], check["remote_port"],
                            check["local_port"], check["peer_isn"], now, check["cookie"])
        assert bool(ok) == (want is not None), (now, made_at)
        if want:
            goods += 1
            assert (mss_index, wscale) == want
    assert 20 < goods < len(cases), "good and bad cookies were checked"
