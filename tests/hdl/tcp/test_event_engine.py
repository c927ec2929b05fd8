"""TcpEventEngine in Amaranth's simulator against the model engine, segment by segment: a
connection accepted by the model (its entry copied into the table; in some runs closed by
us first, or by the peer first and then by us, so that FIN-WAIT-1, FIN-WAIT-2, CLOSING,
TIME-WAIT and LAST-ACK are met), then a peer's mix of in-order, overlapping, out-of-order
and out-of-window data, window probes, RSTs and SYNs in and out of the window, ACKs of
nothing sent, segments without ACK, and FINs, near the sequence-number wrap. Every pure
ACK equal to the model's, every octet the model delivers delivered, every drop with the
model's reason, the connection's end reported, and the entry's receive fields equal to
the model's after each segment. Timer reports: the delayed ACK and the end of TIME-WAIT
as the model's poll, before and at their deadlines, with the timer table armed and
disarmed."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.event_engine import TcpEventEngine
from rnic.host.model import tcp
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import TcpCommand, TcpDrop, TcpEventKind, TcpState
from tests.hdl.tcp.bench import flag_bits

NIC, PEER = "169.254.7.2", "169.254.7.1"
NIC_IP, PEER_IP = 0xA9FE0702, 0xA9FE0701
PARAMS = dict(delack=40, time_wait=1000, rcv_wnd=65535, rto_min=200, rto_max=60000,
              rto_initial=1000, max_retries=3)


def accepted(seed):
    """A model engine with connection 0 accepted from PEER:40000 at port 7000."""
    engine = TcpEngine(ip=NIC, cookie_secret=seed, **PARAMS)
    engine.listen(7000)
    isn = SEQ_MOD - 3000
    syn = tcp.TcpSegment(src_port=40000, dst_port=7000, seq=isn, flags=TcpFlag.SYN,
                         window=65535, options=tcp.build_options(mss=1460))
    (syn_ack,) = engine.receive(PEER, syn.build(PEER, NIC), 0)
    ack = tcp.TcpSegment(src_port=40000, dst_port=7000, seq=isn + 1,
                         ack=(syn_ack.segment.seq + 1) % SEQ_MOD, flags=TcpFlag.ACK,
                         window=65535)
    engine.receive(PEER, ack.build(PEER, NIC), 0)
    engine.events()
    return engine, (isn + 1) % SEQ_MOD


def tcb_fields(t):
    """The gateware entry of the model's TCB ``t``."""
    return {
        "state": int(t.state), "remote_ip": t.remote_ip, "remote_port": t.remote_port,
        "local_port": t.local_port, "iss": t.iss, "irs": t.irs, "data_end": t.data_end,
        "fin_pending": t.fin_pending, "fin_seq": t.fin_seq,
        "send": {k: int(getattr(t, k)) for k in (
            "snd_una", "snd_nxt", "snd_max", "snd_wnd", "snd_wl1", "snd_wl2", "max_snd_wnd",
            "snd_shift", "send_mss", "cwnd", "ssthresh", "ca_acked", "dupacks", "in_recovery",
            "recover", "retries")},
        "rtt": {"timing": t.rtt_seq is not None, "rtt_seq": t.rtt_seq or 0,
                "rtt_time": t.rtt_time, "estimated": t.srtt8 is not None,
                "srtt8": t.srtt8 or 0, "rttvar4": t.rttvar4 or 0, "rto": t.rto},
        "recv": {"rcv_nxt": t.rcv_nxt, "rcv_adv": t.rcv_adv, "rcv_unacked": t.rcv_unacked,
                 "rcv_shift": t.rcv_shift, "ack_now": t.ack_now, "dup_ack": t.dup_ack,
                 "delack_armed": t.delack_at is not None, "delack_at": t.delack_at or 0},
        "timers": {"rto_armed": t.rto_at is not None, "rto_at": t.rto_at or 0,
                   "persist_armed": t.persist_at is not None, "persist_at": t.persist_at or 0,
                   "persist_backoff": t.persist_backoff,
                   "tw_armed": t.time_wait_at is not None, "tw_at": t.time_wait_at or 0},
    }


def peer_segments(rng, rcv_nxt, una, count, fin_ack=None, fin_ack_from=None):
    """(flags, seq, ack, payload) of a peer's segments; ``rcv_nxt`` the model's next
    expected octet, followed as in-order data goes in; with ``fin_ack`` (the ACK of our
    FIN) the ACKs take our FIN from some point on."""
    out = []
    nxt = rcv_nxt
    for k in range(count):
        ends = ["fin", "rst_exact"] if k >= 20 else []      # (a connection's end comes late)
        # (with our FIN out, empty segments would be duplicate ACKs, and the third sends
        # the FIN again: the send scheduler's)
        probes = ["probe"] if fin_ack is None else []
        kind = rng.choice(["data"] * 12 + ["old", "hole", "rst", "syn", "noack", "bad_ack",
                                           "far", *probes] * 2 + ends)
        size = rng.choice([1, 100, 1460])
        flags, seq, ack = TcpFlag.ACK, nxt, una
        if kind == "old":
            seq = (nxt - rng.randint(1, 200)) % SEQ_MOD
        elif kind == "hole":
            seq = (nxt + rng.randint(1, 3000)) % SEQ_MOD
        elif kind in ("rst", "rst_exact"):
            flags = TcpFlag.RST
            seq = nxt if kind == "rst_exact" else (nxt + rng.randint(1, 5000)) % SEQ_MOD
            size = 0
        elif kind == "syn":
            flags |= TcpFlag.SYN
        elif kind == "noack":
            flags = TcpFlag.PSH
        elif kind == "bad_ack":
            ack = (una + rng.randint(1, 100)) % SEQ_MOD
        elif kind == "probe":
            size = 0
        elif kind == "far":
            seq = (nxt + 100000) % SEQ_MOD
        elif kind == "fin":
            flags |= TcpFlag.FIN
        if fin_ack is not None and k >= fin_ack_from and kind != "bad_ack" \
                and rng.random() < 0.5:
            ack = fin_ack
        payload = rng.randbytes(size)
        out.append((int(flags), seq, ack, payload))
        if kind in ("data", "fin"):
            nxt = (nxt + size + (kind == "fin")) % SEQ_MOD
    return out


@pytest.mark.parametrize("seed, closed", [(21, None), (22, None), (23, None), (24, None),
                                          (31, 10), (33, 60), (34, 60), (38, 40),
                                          (41, "last_ack")])
def test_against_model(seed, closed):
    """``closed``: we close first (our FIN sent, the model's), and the peer's ACKs take it
    from about that segment on: FIN-WAIT-1, FIN-WAIT-2, CLOSING, TIME-WAIT."""
    rng = random.Random(seed)
    engine, peer_seq = accepted(seed)
    conn = 0
    una = engine._table[conn].snd_una
    if closed == "last_ack":
        # the peer closes first; our close then leaves the connection in LAST-ACK
        fin = tcp.TcpSegment(src_port=40000, dst_port=7000, seq=peer_seq, ack=una,
                             flags=TcpFlag.FIN | TcpFlag.ACK, window=65535)
        engine.receive(PEER, fin.build(PEER, NIC), 0)
        engine.events()
        peer_seq = (peer_seq + 1) % SEQ_MOD
        engine.close(conn, 0)
        assert engine._table[conn].state == TcpState.LAST_ACK
        closed = 5
    elif closed:
        (fin,) = engine.close(conn, 0)
        assert fin.segment.flags & TcpFlag.FIN
    segments = peer_segments(rng, peer_seq, una, 120,
                             fin_ack=engine._table[conn].snd_max if closed else None,
                             fin_ack_from=closed)
    dut = TcpEventEngine(connections=4)
    results = []

    async def bench(ctx):
        for name, value in PARAMS.items():
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.write.payload, {"conn": conn, "tcb": tcb_fields(engine._table[conn])})
        ctx.set(dut.write.valid, 1)
        await ctx.tick().until(dut.write.ready)
        ctx.set(dut.write.valid, 0)
        ctx.set(dut.action.ready, 1)
        ctx.set(dut.ack.ready, 1)
        for port in (dut.report, dut.free, dut.send, dut.release, dut.cut):
            ctx.set(port.ready, 1)
        for k, (flags, seq, ack, payload) in enumerate(segments):
            now = 100 + 3 * k
            ctx.set(dut.now, now)
            info = dict(src_ip=PEER_IP, src_port=40000, dst_port=7000, seq=seq, ack=ack,
                        flags=flag_bits(flags), window=65535, length=len(payload), mss=0,
                        ws_present=0, ws=0, sack_permitted=0, bad_options=0)
            ctx.set(dut.event.payload, {"conn": conn, "seg": info})
            ctx.set(dut.event.valid, 1)
            for _ in range(100):
                _, _, taken = await ctx.tick().sample(dut.event.ready)
                if taken:
                    break
            assert taken, f"segment {k} not taken: the engine is stuck"
            ctx.set(dut.event.valid, 0)
            step = {"acks": [], "action": None, "reports": [], "drops": []}
            for _ in range(60):
                _, _, av, a, kv, kd, rv, r, dv, dr = await ctx.tick().sample(
                    dut.action.valid, dut.action.payload, dut.ack.valid, dut.ack.payload,
                    dut.report.valid, dut.report.payload, dut.drop.valid, dut.drop.reason)
                if av:
                    step["action"] = (int(a.skip), int(a.keep))
                if kv:
                    step["acks"].append((int(kd.seq), int(kd.ack), int(kd.window),
                                         kd.flags.as_value().value))
                if rv:
                    step["reports"].append(int(r.kind))
                if dv:
                    step["drops"].append(int(dr))
            ctx.set(dut.read_conn, conn)
            await ctx.tick()
            step["tcb"] = ctx.get(dut.read_tcb)
            results.append(step)
            if step["reports"] and step["reports"][-1] in (TcpEventKind.RESET,
                                                           TcpEventKind.CLOSED):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_testbench(no_octets(dut), background=True)
    sim.run()

    kinds = set()
    for k, step in enumerate(results):
        flags, seq, ack, payload = segments[k]
        now = 100 + 3 * k
        before = dict(engine.counters)
        segment = tcp.TcpSegment(src_port=40000, dst_port=7000, seq=seq, ack=ack, flags=flags,
                                 window=65535, payload=payload).build(PEER, NIC)
        outs = engine.receive(PEER, segment, now)
        if any(o.segment.flags & TcpFlag.FIN for o in outs):
            # our FIN sent again (a third duplicate ACK): the send scheduler's, not this
            # block's; from here on the model's state holds what that sending did
            break
        want_acks = [(o.segment.seq, o.segment.ack, o.segment.window, o.segment.flags)
                     for o in outs]
        assert step["acks"] == want_acks, (k, segments[k])
        delivered = engine.read(conn)
        skip, keep = step["action"]
        assert payload[skip:skip + keep] == delivered, k
        want_drops = [r for r in TcpDrop if engine.counters[r] != before[r]]
        assert step["drops"] == [int(r) for r in want_drops], (k, want_drops)
        events = [int(e.kind) for e in engine.events()]
        assert step["reports"] == events, k
        kinds.update(want_drops)
        if engine._table[conn] is None:
            assert TcpState(step["tcb"].state) == TcpState.CLOSED
            break
        t = engine._table[conn]
        mine = step["tcb"]
        assert (TcpState(mine.state), mine.recv.rcv_nxt, mine.recv.rcv_adv,
                bool(mine.recv.delack_armed)) == (
            t.state, t.rcv_nxt, t.rcv_adv, t.delack_at is not None), k
    ended = engine._table[conn] is None
    assert ended or (k > 12 and len(kinds) >= 3), (k, kinds)


def no_octets(dut):
    """A cut that finds nothing to send (the runs here write no octets): every request
    answered with length 0."""
    async def answer(ctx):
        ctx.set(dut.answer.payload, {"length": 0, "split": 0})
        async for _, _, asked in ctx.tick().sample(dut.cut.valid & dut.cut.ready):
            ctx.set(dut.answer.valid, asked)
    return answer


def run_steps(fields, steps):
    """Runs a TcpEventEngine whose connection 0 starts as ``fields`` (:func:`tcb_fields`), through
    ``steps``: ``("segment", now, (flags, seq, ack, payload))``, ``("fired", now)`` or
    ``("command", now, TcpCommand)``; per
    step the pure ACKs (with their flags), segments sent, reports, frees and timer arms it
    gave."""
    dut = TcpEventEngine(connections=4)
    results = []

    async def bench(ctx):
        for name, value in PARAMS.items():
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.write.payload, {"conn": 0, "tcb": fields})
        ctx.set(dut.write.valid, 1)
        await ctx.tick().until(dut.write.ready)
        ctx.set(dut.write.valid, 0)
        for port in (dut.action, dut.ack, dut.report, dut.free, dut.send, dut.release,
                     dut.cut):
            ctx.set(port.ready, 1)
        for kind, now, *segment in steps:
            ctx.set(dut.now, now)
            if kind == "segment":
                flags, seq, ack, payload = segment[0]
                info = dict(src_ip=PEER_IP, src_port=40000, dst_port=7000, seq=seq, ack=ack,
                            flags=flag_bits(flags), window=65535, length=len(payload), mss=0,
                            ws_present=0, ws=0, sack_permitted=0, bad_options=0)
                port, value = dut.event, {"conn": 0, "seg": info}
            elif kind == "command":
                port, value = dut.command, {"conn": 0, "kind": segment[0]}
            else:
                port, value = dut.fired, 0
            ctx.set(port.payload, value)
            ctx.set(port.valid, 1)
            await ctx.tick().until(port.ready)
            ctx.set(port.valid, 0)
            step = {"acks": [], "reports": [], "frees": [], "arms": [], "drops": [],
                    "actions": [], "sends": []}
            for _ in range(80):
                _, _, kv, kd, rv, r, fv, f, av, a, dv, dr, xv, x, sv, sd = \
                    await ctx.tick().sample(
                        dut.ack.valid, dut.ack.payload, dut.report.valid, dut.report.payload,
                        dut.free.valid, dut.free.payload, dut.arm.valid, dut.arm.payload,
                        dut.drop.valid, dut.drop.reason, dut.action.valid,
                        dut.action.payload, dut.send.valid, dut.send.payload.desc)
                if sv:
                    step["sends"].append((int(sd.seq), int(sd.length),
                                          sd.flags.as_value().value))
                if dv:
                    step["drops"].append(int(dr))
                if xv:
                    step["actions"].append((int(x.length), int(x.keep)))
                if kv:
                    step["acks"].append((int(kd.seq), int(kd.ack), int(kd.window),
                                         kd.flags.as_value().value))
                if rv:
                    step["reports"].append(int(r.kind))
                if fv:
                    step["frees"].append((int(f.conn), int(f.key.remote_ip),
                                          int(f.key.remote_port), int(f.key.local_port)))
                if av:
                    step["arms"].append((int(a.conn), int(a.armed),
                                         int(a.deadline) if a.armed else None))
            results.append(step)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_testbench(no_octets(dut), background=True)
    sim.run()
    return results


def test_delayed_ack():
    """A small segment arms the delayed ACK at now + delack; a report before then sends
    nothing and arms it again; one at the deadline sends the model's ACK and disarms."""
    engine, peer_seq = accepted(5)
    una = engine._table[0].snd_una
    segment = (int(TcpFlag.ACK | TcpFlag.PSH), peer_seq, una, b"hello")
    start = tcb_fields(engine._table[0])
    want = [engine.receive(PEER, tcp.TcpSegment(
        src_port=40000, dst_port=7000, seq=peer_seq, ack=una, flags=segment[0], window=65535,
        payload=segment[3]).build(PEER, NIC), 100)]
    deadline = 100 + PARAMS["delack"]
    assert engine._table[0].delack_at == deadline
    want += [engine.poll(deadline - 1), engine.poll(deadline)]
    assert [len(w) for w in want] == [0, 0, 1]
    got = run_steps(start, [("segment", 100, segment), ("fired", deadline - 1),
                            ("fired", deadline)])
    assert [s["arms"] for s in got] == [[(0, 1, deadline)], [(0, 1, deadline)],
                                        [(0, 0, None)]]
    assert got[2]["acks"] == [sent(o) for o in want[2]]
    assert not got[0]["acks"] and not got[1]["acks"]


def test_time_wait_over():
    """A connection in TIME-WAIT: a report before the wait is over changes nothing; the
    one after frees it (CLOSED, its key) and disarms its timer, as the model's poll."""
    engine, peer_seq = accepted(6)
    (fin,) = engine.close(0, 0)
    fin_ack = tcp.TcpSegment(src_port=40000, dst_port=7000, seq=peer_seq,
                             ack=(fin.segment.seq + 1) % SEQ_MOD,
                             flags=TcpFlag.FIN | TcpFlag.ACK, window=65535)
    engine.receive(PEER, fin_ack.build(PEER, NIC), 10)
    engine.events()
    t = engine._table[0]
    assert t.state == TcpState.TIME_WAIT
    over = t.time_wait_at
    fields = tcb_fields(t)
    assert engine.poll(over - 1) == [] and engine.events() == []
    assert engine.poll(over) == [] and [e.kind for e in engine.events()] == [
        TcpEventKind.CLOSED]
    got = run_steps(fields, [("fired", over - 1), ("fired", over)])
    assert got[0]["reports"] == [] and got[0]["arms"] == [(0, 1, over)]
    assert got[1]["reports"] == [TcpEventKind.CLOSED]
    assert got[1]["frees"] == [(0, PEER_IP, 40000, 7000)]
    assert got[1]["arms"] == [(0, 0, None)]


def test_segment_after_the_end():
    """A segment the front found for a connection whose TIME-WAIT ended before the engine
    took it: dropped as for no connection, nothing sent, nothing written or armed."""
    engine, peer_seq = accepted(7)
    fields = tcb_fields(engine._table[0])
    fields["state"] = int(TcpState.CLOSED)
    una = engine._table[0].snd_una
    got = run_steps(fields, [("segment", 50, (int(TcpFlag.ACK), peer_seq, una, b"late")),
                             ("fired", 60)])
    assert got[0]["drops"] == [TcpDrop.NO_CONNECTION]
    assert got[0]["actions"] == [(4, 0)]
    assert got[0]["acks"] == got[0]["reports"] == got[0]["frees"] == got[0]["arms"] == []
    assert got[1] == {k: [] for k in got[1]}


def sent(out):
    """(seq, ack, window, flags) of the model's segment ``out``."""
    return (out.segment.seq, out.segment.ack, out.segment.window, out.segment.flags)


def test_retransmission_timeout():
    """Our FIN unacknowledged: a report before the retransmission deadline changes nothing;
    at each deadline the FIN goes again and the timer backs off (1, 2, 4 RTOs), as the
    model's poll; past max_retries the connection gives up: a RST at SND.NXT, LOST, freed,
    disarmed."""
    engine, _ = accepted(8)
    (fin,) = engine.close(0, 0)
    fields = tcb_fields(engine._table[0])
    deadline = engine._table[0].rto_at
    steps, want = [("fired", deadline - 1)], [(engine.poll(deadline - 1), engine.events())]
    while engine._table[0] is not None:
        steps.append(("fired", deadline))
        want.append((engine.poll(deadline), engine.events()))
        if engine._table[0] is not None:
            deadline = engine._table[0].rto_at
    assert len(steps) == 2 + PARAMS["max_retries"]
    got = run_steps(fields, steps)
    assert got[0]["sends"] == got[0]["acks"] == [] and got[0]["arms"] == [(0, 1, steps[1][1])]
    for k, ((outs, events), step) in enumerate(zip(want[1:-1], got[1:-1])):
        assert step["sends"] == [(fin.segment.seq, 0, fin.segment.flags)] == [
            (o.segment.seq, len(o.segment.payload), o.segment.flags) for o in outs], k
        # (the connection sent: its next event, finding nothing more, arms again)
        assert set(step["arms"]) == {(0, 1, steps[k + 2][1])} and not events, k
    outs, events = want[-1]
    assert got[-1]["sends"] == [] and got[-1]["acks"] == [sent(o) for o in outs]
    assert [o.segment.flags for o in outs] == [TcpFlag.RST]
    assert got[-1]["reports"] == [int(e.kind) for e in events] == [TcpEventKind.LOST]
    assert got[-1]["frees"] == [(0, PEER_IP, 40000, 7000)]
    assert got[-1]["arms"] == [(0, 0, None)]


def test_persist_probe():
    """The peer's window closes with octets in our ring: the persist timer runs instead of
    the retransmission timer; at each deadline a one-octet probe from SND.UNA goes and the
    timer backs off (RTO, 2 RTO, 4 RTO), as the model's poll."""
    engine, peer_seq = accepted(9)
    una = engine._table[0].snd_una
    closing = tcp.TcpSegment(src_port=40000, dst_port=7000, seq=peer_seq, ack=una,
                             flags=TcpFlag.ACK, window=0)
    engine.receive(PEER, closing.build(PEER, NIC), 10)
    engine.write(0, bytes(range(100)))
    assert engine.poll(20) == []
    t = engine._table[0]
    assert t.persist_at is not None and t.rto_at is None
    fields = tcb_fields(t)
    steps, want = [], []
    for _ in range(3):
        deadline = engine._table[0].persist_at
        steps.append(("fired", deadline))
        want.append(engine.poll(deadline))
    got = run_steps(fields, steps)
    for k, (outs, step) in enumerate(zip(want, got)):
        assert step["sends"] == [(una, 1, int(TcpFlag.ACK))] == [
            (o.segment.seq, len(o.segment.payload), o.segment.flags) for o in outs], k
        following = steps[k + 1][1] if k + 1 < len(steps) else engine._table[0].persist_at
        assert set(step["arms"]) == {(0, 1, following)}, k
    assert [s[1] for s in steps] == [20 + 1000, 1020 + 2000, 3020 + 4000]


def descs(outs):
    """(seq, length, flags) of the model's segments ``outs``."""
    return [(o.segment.seq, len(o.segment.payload), o.segment.flags) for o in outs]


@pytest.mark.parametrize("peer_first", [False, True])
def test_close(peer_first):
    """CLOSE from ESTABLISHED (FIN-WAIT-1) or, after the peer's FIN, from CLOSE-WAIT
    (LAST-ACK): our FIN goes, as the model's close sends it; a second CLOSE changes
    nothing."""
    engine, peer_seq = accepted(10)
    if peer_first:
        fin = tcp.TcpSegment(src_port=40000, dst_port=7000, seq=peer_seq,
                             ack=engine._table[0].snd_una, flags=TcpFlag.FIN | TcpFlag.ACK,
                             window=65535)
        engine.receive(PEER, fin.build(PEER, NIC), 0)
        engine.events()
    fields = tcb_fields(engine._table[0])
    want = engine.close(0, 50)
    state = engine._table[0].state
    assert state == (TcpState.LAST_ACK if peer_first else TcpState.FIN_WAIT_1)
    got = run_steps(fields, [("command", 50, TcpCommand.CLOSE),
                             ("command", 60, TcpCommand.CLOSE)])
    assert got[0]["sends"] == descs(want) and want[0].segment.flags & TcpFlag.FIN
    assert got[0]["reports"] == got[0]["frees"] == []
    assert got[1]["sends"] == got[1]["acks"] == got[1]["reports"] == []
    assert got[0]["arms"][-1] == (0, 1, engine._table[0].rto_at)


def test_abort():
    """ABORT: a RST at SND.NXT, the connection freed with its key and nothing reported,
    as the model's abort; a command for the freed connection does nothing."""
    engine, _ = accepted(11)
    fields = tcb_fields(engine._table[0])
    want = engine.abort(0, 50)
    assert engine.events() == [] and engine._table[0] is None
    got = run_steps(fields, [("command", 50, TcpCommand.ABORT),
                             ("command", 60, TcpCommand.CLOSE)])
    assert [(a[0], a[3]) for a in got[0]["acks"]] == [(d[0], d[2]) for d in descs(want)]
    assert [o.segment.flags for o in want] == [TcpFlag.RST]
    assert got[0]["frees"] == [(0, PEER_IP, 40000, 7000)] and got[0]["reports"] == []
    assert got[0]["arms"] == [(0, 0, None)]
    assert got[1] == {k: [] for k in got[1]}
