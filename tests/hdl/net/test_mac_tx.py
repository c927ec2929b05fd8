"""MacTx in Amaranth's simulator: a source that stalls inside a frame gets the frame cut
short with tx_er, an octet outside a frame is thrown away, and the next frame is sent as
usual (the wire format itself is checked by the port test against cocotbext-eth)."""

import struct
import zlib

from amaranth.sim import Simulator

from rnic.hdl.net.mac_tx import MacTx
from rnic.host.spec.net import IFG_LEN, PREAMBLE, PREAMBLE_LEN, SFD


def run(items):
    """``items``: ("octets", data, first, last) to offer back to back, or ("idle", n)
    cycles with valid low. Returns the bursts on gmii as (octets, tx_er seen, start
    cycle, end cycle)."""
    dut = MacTx()
    bursts = []

    async def drive(ctx):
        for item in items:
            if item[0] == "idle":
                ctx.set(dut.i.valid, 0)
                await ctx.tick().repeat(item[1])
                continue
            _, data, first, last = item
            for k, octet in enumerate(data):
                ctx.set(dut.i.payload, {"data": octet, "n": 1, "first": first and k == 0,
                                        "last": last and k == len(data) - 1})
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)
        await ctx.tick().repeat(200)

    async def watch(ctx):
        cycle, burst = 0, None
        async for _, _, en, er, txd in ctx.tick().sample(dut.gmii.tx_en, dut.gmii.tx_er,
                                                         dut.gmii.txd):
            cycle += 1
            if en:
                burst = burst or [bytearray(), False, cycle]
                burst[0].append(txd)
                burst[1] |= bool(er)
            elif burst:
                bursts.append((bytes(burst[0]), burst[1], burst[2], cycle))
                burst = None

    sim = Simulator(dut)
    sim.add_clock(8e-9)
    sim.add_testbench(drive)
    sim.add_testbench(watch, background=True)
    sim.run()
    return bursts


def on_wire(frame):
    padded = frame + bytes(max(0, 60 - len(frame)))
    return bytes([PREAMBLE] * PREAMBLE_LEN + [SFD]) + padded + struct.pack(
        "<L", zlib.crc32(padded))


def test_stall_inside_a_frame_ends_it_with_tx_er():
    good = bytes(range(70))
    bursts = run([("octets", good[:30], True, False), ("idle", 5),
                  ("octets", good[30:], False, True),
                  ("octets", b"\x99\x98", False, True),        # no first: thrown away
                  ("octets", good, True, True)])
    assert len(bursts) == 2
    cut, er, _, end = bursts[0]
    assert er and cut[:8 + 30] == on_wire(good)[:8 + 30] and len(cut) == 8 + 31
    assert bursts[1][0] == on_wire(good) and not bursts[1][1]
    assert bursts[1][2] - end >= IFG_LEN


def test_minimum_gap_and_padding():
    frames = [bytes([k]) * n for k, n in enumerate((1, 60, 59, 100))]
    bursts = run([("octets", f, True, True) for f in frames])
    assert [b[0] for b in bursts] == [on_wire(f) for f in frames]
    assert not any(b[1] for b in bursts)
    assert [b[2] - a[3] for a, b in zip(bursts, bursts[1:])] == [IFG_LEN] * 3
