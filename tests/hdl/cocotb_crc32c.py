"""cocotb side of tests/hdl/test_crc32c.py: CRC32cBeat on Verilator, one beat per cycle."""

import cocotb
import crc32c
from cocotb.triggers import ReadOnly, RisingEdge

from rnic.sim.streams import TB

VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
]


def message_beats(tb, data):
    """(data, words, start, CRC expected after the beat) per beat of ``data`` (a multiple of 4 octets).

    Lanes past the valid words carry random junk, which must not matter.
    """
    W = tb.params["width"]
    out = []
    for i in range(0, len(data), W):
        chunk = data[i:i + W]
        value = int.from_bytes(chunk, "little")
        value |= tb.rng.getrandbits(8 * W) & ~((1 << (8 * len(chunk))) - 1)
        out.append((value, len(chunk) // 4, int(i == 0), crc32c.crc32c(data[:i + W])))
    return out


async def run_beats(tb, beats, idle_prob=0.0):
    """Drive ``beats`` (one per cycle unless idling) and check ``crc`` one cycle after each."""
    dut = tb.dut
    edge, ro = RisingEdge(tb.clk), ReadOnly()
    await edge
    expect = None
    queue = list(beats)
    last = None
    while queue or expect is not None:
        item = None
        if queue and not (idle_prob and tb.rng.random() < idle_prob):
            item = queue.pop(0)
            value, words, start, _ = item
            dut.data.value = value
            dut.words.value = words
            dut.start.value = start
            dut.valid.value = 1
        else:
            dut.valid.value = 0
            dut.start.value = tb.rng.getrandbits(1)     # ignored without valid
        await ro
        if expect is not None:
            assert int(dut.crc_valid.value) == 1
            got = int(dut.crc.value)
            assert got == expect, f"crc {got:#010x} != {expect:#010x}"
            last = expect
        else:
            assert int(dut.crc_valid.value) == 0
            if last is not None:
                assert int(dut.crc.value) == last, "crc must hold while idle"
        expect = None if item is None else item[3]
        await edge
    dut.valid.value = 0


async def start(dut):
    """TB with the inputs idle and the DUT reset (a failed earlier test may have left valid high)."""
    tb = TB(dut)
    dut.valid.value = 0
    dut.start.value = 0
    await tb.reset()
    return tb


@cocotb.test()
async def vectors(dut):
    tb = await start(dut)
    assert int(dut.crc.value) == 0
    for data, crc in VECTORS:
        beats = message_beats(tb, data)
        assert beats[-1][3] == crc
        await run_beats(tb, beats)
        assert int(dut.crc.value) == crc


@cocotb.test()
async def random_back_to_back(dut):
    """Random messages (the last beat with 1..W/4 words), a beat every cycle."""
    tb = await start(dut)
    beats = []
    for _ in range(300):
        beats += message_beats(tb, tb.rng.randbytes(4 * tb.rng.randint(1, 20)))
    await run_beats(tb, beats)


@cocotb.test()
async def random_with_idles(dut):
    """As above with idle cycles between beats: the state holds."""
    tb = await start(dut)
    beats = []
    for _ in range(100):
        beats += message_beats(tb, tb.rng.randbytes(4 * tb.rng.randint(1, 20)))
    await run_beats(tb, beats, idle_prob=0.3)
