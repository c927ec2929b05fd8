"""TcpOffload in Amaranth's simulator against the model engine as the peer's TCP, over a
cable that loses, duplicates and reorders segments both ways: the peer opens connections to
the NIC's listening port one after the other, then both ends send on all of them at once
(the core's runs only where ``may_send`` allows, whole FPDUs on half of the connections,
a byte stream on the others; the send rings in an AXI4 memory), then the core closes them
(CLOSE) and the peer after it. Every octet arrives once and in order at both ends, every
segment the NIC sends has a good checksum, on the FPDU connections every data segment
starts and ends at a run's end, and each connection ends at both ends. The echo service
likewise, closed by the peer. And the cycles from a segment in to the ACK it owes at
once."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.tcp.offload import TcpOffload
from rnic.host.model import tcp
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_PEER_IP
from rnic.host.spec.tcp import SEQ_MOD
from rnic.host.spec.tcp_engine import TcpCommand, TcpConnectResult, TcpEventKind
from tests.hdl.tcp.bench import axi_memory, beats, frame, send

CONNECTIONS, PORT, MSS = 4, 7000, 1460
RING_LOG2, RING_BASE = 13, 0x10000
TICK = 16                           # cycles per tick of the time base
# TIME-WAIT outlasts the longest RTO: a FIN sent again because its ACK was lost still
# finds the connection in TIME-WAIT (else a RST answers it, rightly, and the connection
# ends RESET)
TIMERS = dict(delack=10, time_wait=500, rcv_wnd=65535, rto_min=60, rto_max=400,
              rto_initial=200, max_retries=8)
FPDU = 0b0011                       # connections whose runs are whole FPDUs
OCTETS = 6000                       # each way on each connection


class Cable:
    """One direction of the cable: each segment lost, doubled, or held back behind the
    next at the rates of ``loss``; with ``loss``, the fifth segment with payload is lost
    whatever the dice say."""

    def __init__(self, rng, loss):
        self.rng, self.loss = rng, loss
        self.queue = []
        self.lost = 0
        self.carried = 0                # segments with payload

    def put(self, segment):
        self.carried += bool(tcp.TcpSegment.parse(segment).payload)
        if self.rng.random() < self.loss or (self.loss and self.carried == 5):
            self.lost += 1
            return
        self.queue += [segment] * (2 if self.rng.random() < self.loss else 1)
        if len(self.queue) >= 2 and self.rng.random() < self.loss:
            self.queue[-1], self.queue[-2] = self.queue[-2], self.queue[-1]

    def take(self):
        out, self.queue = self.queue, []
        return out


def sent_in_order(edges, segment):
    """No segment the NIC sends on a connection begins past the end of what it sent on it
    before (a pure ACK's SEQ is SND.MAX: it must not overtake the data it counts; a peer
    checking a SYN cookie against SEG.SEQ - 1 resets the connection). ``edges``: per
    connection, one past the last sequence number sent (RSTs are left out: one answering a
    segment carries that segment's ACK)."""
    if segment.flags & 0x04:
        return
    key = (segment.src_port, segment.dst_port)
    if segment.flags & 0x02:
        edges.setdefault(key, segment.seq)
    assert key in edges, f"{key}: a segment before the SYN"
    ahead = (segment.seq - edges[key]) % SEQ_MOD
    assert ahead == 0 or ahead >= SEQ_MOD // 2, f"{key}: SEQ {segment.seq} past {edges[key]}"
    end = (segment.seq + len(segment.payload) + bool(segment.flags & 0x03)) % SEQ_MOD
    if (end - edges[key]) % SEQ_MOD < SEQ_MOD // 2:
        edges[key] = end


def run(width, loss, seed, *, echo=False, active=False):
    """The peer's connections to the NIC, both sending (``echo``: to the echo service,
    which sends everything back, then the peer closes them); with ``active`` the NIC opens
    them (CONNECT, one after the other, each ISS a few KiB below 2**32) to the peer's
    listening port. What came of it."""
    rng = random.Random(seed)
    dut = TcpOffload(width=width, connections=CONNECTIONS, addr_width=32)
    peer = TcpEngine(ip=DEFAULT_PEER_IP, connections=CONNECTIONS, **TIMERS)
    memory = bytearray(CONNECTIONS << RING_LOG2)
    to_nic, to_peer = Cable(rng, loss), Cable(rng, loss)
    answers = {k: rng.randbytes(OCTETS) for k in range(CONNECTIONS)}     # the peer's
    sending = answers if echo else {k: rng.randbytes(OCTETS) for k in range(CONNECTIONS)}
    got = {"rx": {}, "peer": {k: b"" for k in range(CONNECTIONS)}, "runs": {}, "nic": [],
           "accepted": [], "reports": [], "first": {}}
    frames = []                     # to the NIC's input, in order
    commands = []                   # connections the core closes
    connects = []                   # the NIC's active opens
    state = {"now": 0, "done": False, "connecting": False}
    peer_ip = int.from_bytes(bytes(map(int, DEFAULT_PEER_IP.split("."))), "big")

    def drain(port, queue, items):
        """A process: offers ``items(entry)`` on ``port`` for each entry put in ``queue``."""
        async def offer(ctx):
            while True:
                if queue:
                    await send(ctx, port, items(queue.pop(0)), rng)
                else:
                    await ctx.tick()
        return offer

    feed = drain(dut.i, frames, lambda octets: beats(octets, width))
    closer = drain(dut.command, commands,
                   lambda conn: [{"conn": conn, "kind": TcpCommand.CLOSE}])
    opener = drain(dut.connect, connects, lambda request: [request])

    async def wire(ctx):
        packet = b""
        edges = {}
        while True:
            ctx.set(dut.o.ready, rng.random() < 0.8)
            _, _, valid, ready, beat = await ctx.tick().sample(dut.o.valid, dut.o.ready,
                                                               dut.o.payload)
            if valid and ready:
                if beat.first:
                    length = int(beat.length)
                packet += int(beat.data).to_bytes(width, "little")[:beat.n]
                if beat.last:
                    segment = packet[34:]
                    assert len(segment) == length
                    assert tcp.checksum_ok(DEFAULT_NIC_IP, DEFAULT_PEER_IP, segment)
                    got["nic"].append(tcp.TcpSegment.parse(segment))
                    sent_in_order(edges, got["nic"][-1])
                    to_peer.put(segment)
                    packet = b""

    async def delivered(ctx):
        while True:
            ctx.set(dut.rx_wire.ready, rng.random() < 0.8)
            ctx.set(dut.report.ready, 1)
            ctx.set(dut.connect_answer.ready, 1)
            _, _, valid, ready, beat, r_valid, report, a_valid, answer = await ctx.tick().sample(
                dut.rx_wire.valid, dut.rx_wire.ready, dut.rx_wire.payload,
                dut.report.valid, dut.report.payload, dut.connect_answer.valid,
                dut.connect_answer.payload)
            if a_valid:
                assert answer.result == TcpConnectResult.SYN_SENT
                got["accepted"].append(int(answer.conn))
            if valid and ready:
                conn = int(beat.conn)
                octets = int(beat.data).to_bytes(width, "little")[:beat.n]
                got["rx"][conn] = got["rx"].get(conn, b"") + octets
            if r_valid:
                got["reports"].append((int(report.conn), int(report.kind)))
                if report.kind == TcpEventKind.ACCEPTED:
                    got["accepted"].append(int(report.conn))
                if report.kind == TcpEventKind.CONNECTED:
                    state["connecting"] = False

    async def core(ctx):
        """Runs on the accepted connections, where ``may_send`` allows."""
        sent = {}
        while True:
            ready = [k for k, conn in enumerate(got["accepted"])
                     if sent.get(k, 0) < OCTETS and ctx.get(dut.may_send) >> conn & 1]
            if not ready or rng.random() < 0.3:
                await ctx.tick()
                continue
            k = rng.choice(ready)
            conn = got["accepted"][k]
            start = sent.get(k, 0)
            length = min(OCTETS - start, rng.choice([4, 100, 512, 1000, MSS]))
            octets = sending[k][start:start + length]
            for beat in beats(octets, width, conn=conn):
                ctx.set(dut.tx_wire.payload, beat)
                ctx.set(dut.tx_wire.valid, 1)
                await ctx.tick().until(dut.tx_wire.ready)
            ctx.set(dut.tx_wire.valid, 0)
            sent[k] = start + length
            got["runs"].setdefault(k, set()).add(start + length)

    async def peer_side(ctx):
        ctx.set(dut.listen.payload, {"index": 0, "valid": 1, "port": PORT, "echo": echo})
        ctx.set(dut.listen.valid, 1)
        await ctx.tick()
        ctx.set(dut.listen.valid, 0)
        if active:
            peer.listen(PORT)
        written = {k: 0 for k in range(CONNECTIONS)}
        for _ in range(6000):
            await ctx.tick().repeat(TICK)
            now = state["now"] = state["now"] + 1
            ctx.set(dut.now, now)
            outs = peer.poll(now)
            for segment in to_peer.take():
                outs += peer.receive(DEFAULT_NIC_IP, segment, now)
            k = len(got["accepted"])
            if active and k < CONNECTIONS and not state["connecting"]:
                state["connecting"] = True
                connects.append({"remote_ip": peer_ip, "remote_port": PORT,
                                 "local_port": 40000 + k, "iss": SEQ_MOD - 3000 * (k + 1),
                                 "echo": echo})
            elif not active and k < CONNECTIONS and peer.state(k).name == "CLOSED":
                outs += peer.connect(k, remote_ip=DEFAULT_NIC_IP, remote_port=PORT,
                                     local_port=40000 + k, now=now)
            for j in range(CONNECTIONS):
                if peer.state(j).name == "ESTABLISHED":
                    # the NIC's first octet on it
                    got["first"].setdefault(j, (peer._table[j].irs + 1) % SEQ_MOD)
                if peer.state(j).name == "ESTABLISHED" and written[j] < OCTETS:
                    written[j] += peer.write(j, answers[j][written[j]:])
                got["peer"][j] += peer.read(j)
            outs += peer.poll(now)
            for out in outs:
                to_nic.put(out.octets)
            frames.extend(frame(octets) for octets in to_nic.take())
            delivered = all(got["rx"].get(c) == answers[k]
                            for k, c in enumerate(got["accepted"]))
            if all(got["peer"][j] == sending[j] for j in range(CONNECTIONS)) and (
                    echo or delivered) and len(got["accepted"]) == CONNECTIONS:
                closed = [c for c, kind in got["reports"] if kind == TcpEventKind.CLOSED]
                if len(closed) == CONNECTIONS and all(peer.state(j).name == "CLOSED"
                                                      for j in range(CONNECTIONS)):
                    state["done"] = True
                    return
                # the peer closes the echo's connections; the core closes its own, and the
                # peer then closes its side
                for j in range(CONNECTIONS):
                    if peer.state(j).name == ("ESTABLISHED" if echo else "CLOSE_WAIT"):
                        for out in peer.close(j, now):
                            to_nic.put(out.octets)
                if not echo and not commands and not state.get("closing"):
                    state["closing"] = True
                    commands.extend(got["accepted"])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    params = dict(TIMERS, secret=0x5EC2E7, mss=MSS, rcv_scale=0,
                  ip=int.from_bytes(bytes(map(int, DEFAULT_NIC_IP.split("."))), "big"),
                  ring_base=RING_BASE, ring_log2=RING_LOG2, fpdu=FPDU)

    async def setup(ctx):
        for name, value in params.items():
            ctx.set(getattr(dut, name), value)

    sim.add_testbench(setup)
    sim.add_testbench(peer_side)
    for process in (feed, wire, delivered, core, closer, opener,
                    axi_memory(dut.m_axi_w, dut.m_axi_r, memory, RING_BASE, width, rng)):
        sim.add_testbench(process, background=True)
    sim.run()
    return state, got, peer, sending, answers, (to_nic.lost, to_peer.lost)


def test_echo():
    """The echo service on all four connections over the lossy cable, its rings (8 KiB)
    smaller than the peer's window would be: every octet comes back once and in order, and
    no octet reaches the core; when the peer closes, the echo closes after the last octet
    and the connection ends (PEER_CLOSED, then CLOSED) at both ends."""
    state, got, peer, sending, answers, lost = run(4, 0.03, seed="echo", echo=True)
    assert state["done"] and len(got["accepted"]) == CONNECTIONS
    for k in range(CONNECTIONS):
        assert got["peer"][k] == answers[k]
    assert not any(got["rx"].values())
    for conn in got["accepted"]:
        kinds = [kind for c, kind in got["reports"] if c == conn]
        assert kinds == [TcpEventKind.ACCEPTED, TcpEventKind.PEER_CLOSED,
                         TcpEventKind.CLOSED], (conn, kinds)
    assert max(g.window for g in got["nic"] if not g.flags & 0x02) <= 1 << RING_LOG2


@pytest.mark.parametrize("width, loss", [(4, 0.0), (4, 0.05), (8, 0.05)])
def test_both_ways(width, loss):
    state, got, peer, sending, answers, lost = run(width, loss, seed=f"{width}{loss}")
    assert len(got["accepted"]) == CONNECTIONS
    for k, conn in enumerate(got["accepted"]):
        assert got["rx"].get(conn, b"") == answers[k], f"the peer's octets on {conn}"
        assert got["peer"][k] == sending[k], f"the core's octets on {conn}"
    assert state["done"]
    # the core closed each connection, then the peer: ACCEPTED, PEER_CLOSED, then CLOSED
    # once TIME-WAIT is over
    for conn in got["accepted"]:
        kinds = [kind for c, kind in got["reports"] if c == conn]
        assert kinds == [TcpEventKind.ACCEPTED, TcpEventKind.PEER_CLOSED,
                         TcpEventKind.CLOSED], (conn, kinds)
    if loss:
        # segments were lost both ways, and the NIC sent some of its data again
        data = [(g.dst_port, g.seq) for g in got["nic"] if g.payload]
        assert all(lost) and len(data) > len(set(data)), (lost, len(data))
    # the FPDU connections' segments begin and end at the ends of the core's runs
    for k, conn in enumerate(got["accepted"]):
        if not FPDU >> conn & 1:
            continue
        first = got["first"][k]
        ends = got["runs"][k] | {0}
        for segment in got["nic"]:
            if segment.dst_port != 40000 + k or not segment.payload:
                continue
            start = (segment.seq - first) % SEQ_MOD
            assert start in ends and start + len(segment.payload) in ends, (k, start)


def test_active_open():
    """The NIC opens the connections (CONNECT, each ISS below 2**32 so that both ways wrap)
    over the lossy cable, the core writing on each from its SYN on: every octet arrives
    once and in order both ways, and each connection reports CONNECTED, PEER_CLOSED and
    CLOSED. A SYN or its SYN-ACK was lost, and the SYN was sent again."""
    state, got, peer, sending, answers, lost = run(4, 0.05, seed="active", active=True)
    assert state["done"] and len(got["accepted"]) == CONNECTIONS
    for k, conn in enumerate(got["accepted"]):
        assert got["rx"].get(conn, b"") == answers[k], f"the peer's octets on {conn}"
        assert got["peer"][k] == sending[k], f"the core's octets on {conn}"
        assert got["first"][k] == (SEQ_MOD - 3000 * (k + 1) + 1) % SEQ_MOD
        kinds = [kind for c, kind in got["reports"] if c == conn]
        assert kinds == [TcpEventKind.CONNECTED, TcpEventKind.PEER_CLOSED,
                         TcpEventKind.CLOSED], (conn, kinds)
    syns = [g for g in got["nic"] if g.flags == 0x02]
    assert len(syns) > CONNECTIONS and all(lost)


#: Cycles from the first beat of a segment taken at ``i`` to the first beat of the ACK it
#: owes at once on ``o`` (W = 4, nothing else in flight; docs/tcp.md gives the figure).
ACK_LATENCY = 72


def test_ack_latency():
    """A second full segment is ACKed at once, and before its last octet is in: the engine
    decides on the header (the network layer has checked the checksum of the whole
    segment before it passes it up), so the ACK's first beat leaves ``o`` at most
    :data:`ACK_LATENCY` cycles after the segment's first beat was taken at ``i``, while
    its payload still streams in. The ACK covers both segments' octets, which reach
    ``rx_wire`` in order."""
    width = 4
    dut = TcpOffload(width=width, connections=CONNECTIONS, addr_width=32)
    peer = TcpEngine(ip=DEFAULT_PEER_IP, connections=CONNECTIONS, **TIMERS)
    data = random.Random("ack").randbytes(2 * MSS)
    clock = {"cycle": 0}
    out, delivered = [], bytearray()   # (cycle of the first beat, segment); octets

    async def count(ctx):
        while True:
            await ctx.tick()
            clock["cycle"] += 1

    async def collect(ctx):
        packet, start = b"", None
        for port in (dut.o, dut.rx_wire, dut.report):
            ctx.set(port.ready, 1)
        while True:
            _, _, valid, beat, d_valid, d_beat = await ctx.tick().sample(
                dut.o.valid, dut.o.payload, dut.rx_wire.valid, dut.rx_wire.payload)
            if d_valid:
                delivered.extend(int(d_beat.data).to_bytes(width, "little")[:d_beat.n])
            if valid:
                start = clock["cycle"] if beat.first else start
                packet += int(beat.data).to_bytes(width, "little")[:beat.n]
                if beat.last:
                    out.append((start, tcp.TcpSegment.parse(packet[34:]), packet[34:]))
                    packet = b""

    async def offer(ctx, segment):
        """The segment's frame on ``i``, beat after beat; the cycles its first and last
        beats were taken."""
        taken = []
        for item in beats(frame(segment), width):
            ctx.set(dut.i.payload, item)
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
            taken.append(clock["cycle"])
        ctx.set(dut.i.valid, 0)
        return taken[0], taken[-1]

    async def bench(ctx):
        for name, value in dict(TIMERS, secret=0x5EC2E7, mss=MSS, rcv_scale=0,
                                ip=int.from_bytes(bytes(map(int, DEFAULT_NIC_IP.split("."))),
                                                  "big"),
                                ring_base=RING_BASE, ring_log2=RING_LOG2).items():
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.listen.payload, {"index": 0, "valid": 1, "port": PORT, "echo": 0})
        ctx.set(dut.listen.valid, 1)
        await ctx.tick()
        ctx.set(dut.listen.valid, 0)
        (syn,) = peer.connect(0, remote_ip=DEFAULT_NIC_IP, remote_port=PORT,
                              local_port=40000, now=0)
        await offer(ctx, syn.octets)
        await ctx.tick().repeat(100)
        (syn_ack,) = [octets for _, _, octets in out]
        for segment in peer.receive(DEFAULT_NIC_IP, syn_ack, 1):
            await offer(ctx, segment.octets)
        await ctx.tick().repeat(100)
        assert peer.state(0).name == "ESTABLISHED" and len(out) == 1
        peer.write(0, data)
        first, second = peer.poll(2)
        await offer(ctx, first.octets)
        first_in, last_in = await offer(ctx, second.octets)
        await ctx.tick().repeat(200)
        (ack_at, ack, _) = out[1]
        assert ack.ack == (second.segment.seq + MSS) % SEQ_MOD and not ack.payload
        clock["latency"], clock["before_last"] = ack_at - first_in, last_in - ack_at

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    for process in (count, collect):
        sim.add_testbench(process, background=True)
    sim.run()
    assert bytes(delivered) == data
    print(f"\nACK {clock['latency']} cycles after the segment's first beat, "
          f"{clock['before_last']} before its last (W = {width})")
    assert 0 < clock["latency"] <= ACK_LATENCY
