"""TcpRxParse in Amaranth's simulator against the model's receive_info: every report equal
to the model's, every payload octet delivered aligned, under random idle cycles and
back-pressure on both outputs, at every width; malformed options reported and their payload
still delivered; frames the network layer never passes (cut inside the header, a data offset
below 5) reported as bad without stalling what follows; the latency of the docstring."""

import random

import pytest
from amaranth.sim import Simulator
from scapy.layers.inet import IP, TCP

from rnic.hdl.tcp import LaneShift, TcpRxParse
from rnic.host.model import tcp
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_PEER_IP
from rnic.host.spec.tcp import SEQ_MOD
from tests.hdl.tcp.bench import beats, frame, receive_units, send

FIELDS = ("src_ip", "src_port", "dst_port", "seq", "ack", "window", "length", "mss",
          "sack_permitted", "bad_options")


def scapy_tcp(rng, options, payload, flags="PA"):
    layer = TCP(sport=rng.getrandbits(16), dport=rng.choice([5000, 7, 4791]),
                seq=rng.choice([rng.getrandbits(32), SEQ_MOD - 1]), ack=rng.getrandbits(32),
                flags=flags, window=rng.getrandbits(16), options=options)
    return bytes(IP(bytes(IP(src=DEFAULT_PEER_IP, dst=DEFAULT_NIC_IP) / layer / payload))[TCP])


def raw_tcp(rng, options, payload):
    return tcp.TcpSegment(src_port=rng.getrandbits(16), dst_port=5000, seq=rng.getrandbits(32),
                          ack=rng.getrandbits(32), flags=0x18, window=rng.getrandbits(16),
                          options=options, payload=payload).build(DEFAULT_PEER_IP, DEFAULT_NIC_IP)


def segments(rng, count):
    """(label, segment octets): handshakes, data with timestamps, odd and malformed options,
    payloads of every length class."""
    linux_syn = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (7, 0)), ("NOP", None),
                 ("WScale", 7)]
    fixed = [
        ("syn", scapy_tcp(rng, linux_syn, b"", flags="S")),
        ("syn-ack", scapy_tcp(rng, linux_syn, b"", flags="SA")),
        ("pure ack", scapy_tcp(rng, [], b"", flags="A")),
        ("one octet", scapy_tcp(rng, [], b"x")),
        ("full segment", scapy_tcp(rng, [("NOP", None), ("NOP", None), ("Timestamp", (1, 2))],
                                   rng.randbytes(1448))),
        ("ws 20", raw_tcp(rng, bytes([3, 3, 20, 0]), b"abc")),
        ("eol then junk", raw_tcp(rng, bytes([0, 2, 4, 9, 9, 9, 9, 9]), b"defg")),
        ("unknown kind", raw_tcp(rng, bytes([30, 6, 1, 2, 3, 4, 2, 4, 2, 0, 1, 0]), b"hi")),
        ("mss of length 3", raw_tcp(rng, bytes([2, 3, 9, 1]), rng.randbytes(9))),
        ("40 nops", raw_tcp(rng, bytes([1] * 40), rng.randbytes(33))),
        ("length 0", raw_tcp(rng, bytes([8, 0, 1, 1]), rng.randbytes(17))),
        ("length 1", raw_tcp(rng, bytes([2, 4, 5, 0xB4, 30, 1, 0, 0]), b"")),
        ("past the end", raw_tcp(rng, bytes([1, 30, 4, 1]), rng.randbytes(100))),
        ("no length octet", raw_tcp(rng, bytes([1, 1, 1, 3]), rng.randbytes(5))),
    ]
    out = list(fixed)
    while len(out) < count:
        options = rng.choice([b"", tcp.build_options(timestamps=(rng.getrandbits(32), 1)),
                              rng.randbytes(4 * rng.randint(1, 10))])
        size = rng.choice([0, 1, 2, 3, rng.randint(4, 64), rng.randint(65, 1400)])
        out.append(("random", raw_tcp(rng, options, rng.randbytes(size))))
    return out


def run(width, frames, *, seed, idle=0.3, backpressure=0.3):
    """Drive ``frames`` through the parser; returns the reports (dicts) and the payloads,
    and the cycles from each frame's first beat offered to its report valid."""
    rng = random.Random(seed)
    dut = TcpRxParse(width=width)
    reports, payloads = [], []
    offered = []

    async def drive(ctx):
        await send(ctx, dut.i, [b for octets in frames for b in beats(octets, width)], rng,
                   idle=idle)

    async def consume(ctx):
        for _ in frames:
            while rng.random() < backpressure:
                await ctx.tick()
            ctx.set(dut.seg.ready, 1)
            seg, = await ctx.tick().sample(dut.seg.payload).until(dut.seg.valid)
            ctx.set(dut.seg.ready, 0)
            report = {name: int(getattr(seg, name)) for name in FIELDS}
            report["flags"] = seg.flags.as_value().value
            report["window_scale"] = int(seg.ws) if seg.ws_present else None
            reports.append(report)
            octets = b""
            while len(octets) < report["length"]:
                ctx.set(dut.payload.ready, rng.random() >= backpressure)
                _, _, valid, ready, beat = await ctx.tick().sample(
                    dut.payload.valid, dut.payload.ready, dut.payload.payload)
                if valid and ready:
                    assert bool(beat.first) == (octets == b""), "first marks the first beat"
                    octets += int(beat.data).to_bytes(width, "little")[:beat.n]
                    assert beat.n == width or beat.last, "a beat before the last is full"
                    assert bool(beat.last) == (len(octets) >= report["length"])
            ctx.set(dut.payload.ready, 0)
            payloads.append(octets)
        await ctx.tick().repeat(20)
        assert not ctx.get(dut.seg.valid) and not ctx.get(dut.payload.valid), "nothing left over"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(drive)
    sim.add_testbench(consume)
    sim.run()
    return reports, payloads


def want(segment):
    info, payload = tcp.receive_info(DEFAULT_PEER_IP, segment)
    report = {name: int(getattr(info, name)) for name in FIELDS}
    report["flags"] = info.flags
    report["window_scale"] = info.window_scale
    return report, payload


@pytest.mark.parametrize("width", [4, 8, 16, 32])
def test_against_model(width):
    rng = random.Random(width)
    cases = segments(rng, 60)
    reports, payloads = run(width, [frame(s) for _, s in cases], seed=width)
    assert len(reports) == len(cases)
    for (label, segment), report, payload in zip(cases, reports, payloads):
        report_want, payload_want = want(segment)
        assert report == report_want, label
        assert payload == payload_want, label
    assert sum(r["bad_options"] for r in reports) >= 4, "malformed options were sent"


@pytest.mark.parametrize("width", [4, 32])
def test_frames_the_network_layer_never_passes(width):
    """A frame cut inside its TCP header, and one whose data offset is below 5, are reported
    with bad_options and no payload; the frames after them are parsed as usual."""
    rng = random.Random(3)
    good = raw_tcp(rng, b"", b"after")
    short = frame(good)[:34 + 15]
    low_offset = good[:12] + bytes([0x40]) + good[13:]
    frames = [short, frame(low_offset), frame(good)]
    reports, payloads = run(width, frames, seed=5)
    assert [(r["bad_options"], r["length"]) for r in reports[:2]] == [(1, 0), (1, 0)]
    assert reports[2] == want(good)[0] and payloads[2] == b"after"


def test_report_latency():
    """Without idles or back-pressure: the report of a segment with k options, j of them
    with a length octet, is valid k + j + 3 cycles after the beat ending its header was
    taken; 43 at most (40 NOPs, or 20 options of two octets)."""
    rng = random.Random(9)
    width = 4
    for options, cycles in ((b"", 3), (bytes([1, 1, 1, 0]), 7),
                            (tcp.build_options(mss=1460), 5),
                            (bytes([1, 3, 3, 7]), 6), (bytes([3, 3, 7, 1]), 6),
                            (bytes([1] * 40), 43), (bytes([4, 2] * 20), 43)):
        octets = frame(raw_tcp(rng, options, b"pay"))
        header_end_beat = (34 + 20 + len(options) - 1) // width
        dut = TcpRxParse(width=width)
        seen = {}

        async def tb(ctx):
            ctx.set(dut.seg.ready, 1)
            ctx.set(dut.payload.ready, 1)
            todo = beats(octets, width)
            index = cycle = 0
            while "report" not in seen and cycle < 200:
                ctx.set(dut.i.valid, index < len(todo))
                if index < len(todo):
                    ctx.set(dut.i.payload, todo[index])
                taken = index < len(todo) and ctx.get(dut.i.ready)
                if taken and index == header_end_beat:
                    seen["end"] = cycle
                index += taken
                await ctx.tick()
                cycle += 1
                if "end" in seen and ctx.get(dut.seg.valid):
                    seen["report"] = cycle - seen["end"]

        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(tb)
        sim.run()
        assert seen.get("report") == cycles, options


@pytest.mark.parametrize("width", [4, 8, 32])
def test_lane_shift(width):
    """LaneShift alone: packets of every length with every skip, realigned, under
    back-pressure; one beat per cycle when nothing stalls."""
    rng = random.Random(width + 100)
    packets = [(rng.randrange(width), rng.randbytes(rng.randint(1, 5 * width)))
               for _ in range(80)]
    dut = LaneShift(width=width)
    got = []

    async def drive(ctx):
        await send(ctx, dut.i, [b for skip, octets in packets
                                for b in beats(rng.randbytes(skip) + octets, width, skip=skip)],
                   rng, idle=0.2)

    async def consume(ctx):
        units = await receive_units(ctx, dut.o, width, len(packets), rng, backpressure=0.3)
        got.extend(octets for octets, _ in units)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(drive)
    sim.add_testbench(consume)
    sim.run()
    assert got == [octets for _, octets in packets]
