"""MacRx in Amaranth's simulator: the corners of frame start and end that the GMII models
of the port test do not produce (short or missing preambles, a broken preamble, frames of
a few octets, back-to-back bursts), the verdicts at their limits, and the latency."""

import struct
import zlib

from amaranth.sim import Simulator

from rnic.hdl.net.layouts import RxDrop
from rnic.hdl.net.mac_rx import MacRx
from rnic.host.spec.net import BROADCAST_MAC, DEFAULT_NIC_MAC, PREAMBLE, SFD

MAC = DEFAULT_NIC_MAC


def with_fcs(frame):
    return frame + struct.pack("<L", zlib.crc32(frame))


def frame_to(dst, length):
    return dst + bytes([2, 0, 0, 0, 0, 1, 8, 0]) + bytes((k * 7) & 0xFF for k in range(length - 14))


def run(bursts, *, max_len=1514, idle=12):
    """Drive each burst (octets, rx_er per octet or None) with ``rx_dv`` high, ``idle``
    cycles apart; return the frames seen on ``o`` as (octets, drop, first cycle, last
    cycle), the verdict pulses, and the cycles at which each burst started and ended."""
    dut = MacRx()
    frames, verdicts, times = [], [], []

    async def drive(ctx):
        ctx.set(dut.mac, int.from_bytes(MAC, "big"))
        ctx.set(dut.max_len, max_len)
        cycle = 0
        for octets, errors in bursts:
            times.append(cycle)
            for k, octet in enumerate(octets):
                ctx.set(dut.gmii.rxd, octet)
                ctx.set(dut.gmii.rx_dv, 1)
                ctx.set(dut.gmii.rx_er, bool(errors and errors[k]))
                await ctx.tick()
                cycle += 1
            times.append(cycle)
            ctx.set(dut.gmii.rx_dv, 0)
            ctx.set(dut.gmii.rx_er, 0)
            await ctx.tick().repeat(idle)
            cycle += idle
        await ctx.tick().repeat(20)

    async def watch(ctx):
        cycle, current = 0, None
        async for _, _, valid, p, v_valid, v in ctx.tick().sample(
                dut.o.valid, dut.o.payload, dut.verdict.valid, dut.verdict.payload):
            cycle += 1
            if v_valid:
                verdicts.append(RxDrop(v))
            if valid:
                assert bool(p.first) == (current is None)
                if current is None:
                    current = (bytearray(), cycle)
                current[0].append(p.data)
                if p.last:
                    frames.append((bytes(current[0]), RxDrop(p.drop), current[1], cycle))
                    current = None

    sim = Simulator(dut)
    sim.add_clock(8e-9)
    sim.add_testbench(drive)
    sim.add_testbench(watch, background=True)
    sim.run()
    return frames, verdicts, times


def wire(frame, preamble=7, errors=None):
    octets = bytes([PREAMBLE] * preamble + [SFD]) + frame
    return octets, errors and [0] * (preamble + 1) + errors


def test_preamble_length_and_broken_preamble():
    good = with_fcs(frame_to(MAC, 60))
    bursts = [wire(good, 7), wire(good, 1), wire(good, 0),
              (bytes([PREAMBLE, PREAMBLE, 0x12, SFD]) + good, None),    # ignored
              wire(good, 3)]
    frames, verdicts, _ = run(bursts)
    assert [(f, d) for f, d, _, _ in frames] == [(good[:-4], RxDrop.NONE)] * 4
    assert verdicts == [RxDrop.NONE] * 4


def test_scraps_are_one_octet_runts():
    bursts = [wire(bytes(range(1, n + 1))) for n in range(0, 6)]
    frames, verdicts, _ = run(bursts)
    assert len(frames) == 6 and verdicts == [RxDrop.RUNT] * 6
    assert all(len(f) == max(1, n - 4) and d == RxDrop.RUNT
               for (f, d, _, _), n in zip(frames, range(0, 6)))


def test_verdicts_at_the_limits():
    cases = [(with_fcs(frame_to(MAC, 60)), RxDrop.NONE),
             (with_fcs(frame_to(MAC, 59)), RxDrop.RUNT),
             (with_fcs(frame_to(MAC, 1514)), RxDrop.NONE),
             (with_fcs(frame_to(MAC, 1515)), RxDrop.GIANT),
             (with_fcs(frame_to(BROADCAST_MAC, 64)), RxDrop.NONE),
             (with_fcs(frame_to(bytes.fromhex("01005e000001"), 64)), RxDrop.OTHER_MAC),
             (with_fcs(frame_to(MAC[:5] + b"\x03", 64)), RxDrop.OTHER_MAC),
             (with_fcs(frame_to(b"\x03" + MAC[1:], 64)), RxDrop.OTHER_MAC),
             (frame_to(MAC, 64) + b"\0\0\0\0", RxDrop.FCS),
             (with_fcs(frame_to(MAC, 40))[:-1], RxDrop.RUNT),            # runt before FCS
             (with_fcs(frame_to(b"\x03" + MAC[1:], 2000)), RxDrop.GIANT)]
    bursts = [wire(f) for f, _ in cases]
    bursts.append(wire(with_fcs(frame_to(MAC, 100)), errors=[0] * 50 + [1] + [0] * 53))
    frames, verdicts, _ = run(bursts)
    expected = [d for _, d in cases] + [RxDrop.FCS]
    assert [d for _, d, _, _ in frames] == expected
    assert verdicts == expected
    assert frames[0][0] == cases[0][0][:-4] and frames[2][0] == cases[2][0][:-4]


def test_max_len_and_back_to_back():
    """A lowered max_len; bursts one idle cycle apart."""
    bursts = [wire(with_fcs(frame_to(MAC, n))) for n in (100, 101, 100)]
    frames, verdicts, _ = run(bursts, max_len=100, idle=1)
    assert verdicts == [RxDrop.NONE, RxDrop.GIANT, RxDrop.NONE]


def test_latency():
    """An octet leaves 7 cycles after it is on gmii; the last one 2 cycles after rx_dv
    falls."""
    frame = with_fcs(frame_to(MAC, 64))
    frames, _, times = run([wire(frame)])
    (_, _, first, last), = frames
    # cycles counted as edges at which a value is seen: the first octet after preamble
    # and SFD is seen on gmii at edge times[0] + 9, rx_dv low at edge times[1] + 1
    assert first - (times[0] + 9) == 7
    assert last - (times[1] + 1) == 2
