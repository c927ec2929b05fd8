"""CRC32c gateware: the word-wise functions and the CRC32cBeat component.

(a) pure Python: the XOR matrices and the word model against the ``crc32c`` package;
(b) Amaranth's Python simulator: crc32c_step chained, CRC32cBeat at W = 4, 8;
(c) CRC32cBeat at W = 8 on Verilator through rnic.sim.runner (cocotb module cocotb_crc32c.py).
"""

import random

import crc32c
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from rnic.hdl.crc32c import CRC32C_INIT, CRC32cBeat, crc32c_matrix, crc32c_step, crc32c_words_model

# Known CRC32c values (RFC 3720 B.4 / iSCSI); the MPA draft's figures are in tests/host/model/test_crc.py.
VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


def words_of(data):
    assert len(data) % 4 == 0
    return [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]


def matrix_step(state, word):
    bits = state | word << 32
    return sum((bin(bits & mask).count("1") & 1) << i for i, mask in enumerate(crc32c_matrix()))


# -- (a) ---------------------------------------------------------------------

@pytest.mark.parametrize("data,crc", VECTORS)
def test_vectors_model(data, crc):
    assert crc32c.crc32c(data) == crc
    assert crc32c_words_model(CRC32C_INIT, words_of(data)) ^ 0xFFFFFFFF == crc


def test_model_and_matrix_random():
    rng = random.Random(1)
    for _ in range(200):
        data = rng.randbytes(4 * rng.randint(0, 40))
        state = CRC32C_INIT
        for w in words_of(data):
            state = matrix_step(state, w)
        assert state ^ 0xFFFFFFFF == crc32c.crc32c(data)
        assert crc32c_words_model(CRC32C_INIT, words_of(data)) ^ 0xFFFFFFFF == crc32c.crc32c(data)
    for _ in range(200):
        s, w = rng.getrandbits(32), rng.getrandbits(32)
        assert matrix_step(s, w) == crc32c_words_model(s, [w])


def test_bad_width():
    with pytest.raises(ValueError):
        CRC32cBeat(width=12)
    with pytest.raises(TypeError):
        CRC32cBeat(8)


# -- (b) ---------------------------------------------------------------------

def test_step_chained_sim():
    m = Module()
    state = Signal(32)
    words = [Signal(32, name=f"w{i}") for i in range(3)]
    # Chained through named signals: the Python simulator does not share
    # subexpressions, so a directly nested chain grows exponentially.
    res = [Signal(32, name=f"r{i}") for i in range(3)]
    prev = state
    for w, r in zip(words, res):
        m.d.comb += r.eq(crc32c_step(prev, w))
        prev = r

    async def tb(ctx):
        rng = random.Random(2)
        for _ in range(100):
            s = rng.getrandbits(32)
            ws = [rng.getrandbits(32) for _ in words]
            ctx.set(state, s)
            for sig, v in zip(words, ws):
                ctx.set(sig, v)
            for k in range(3):
                assert ctx.get(res[k]) == crc32c_words_model(s, ws[:k + 1])
        # a known vector: 3 words of 0x00..0x0B from the initial state
        data = bytes(range(12))
        ctx.set(state, CRC32C_INIT)
        for sig, v in zip(words, words_of(data)):
            ctx.set(sig, v)
        assert ctx.get(res[2]) ^ 0xFFFFFFFF == crc32c.crc32c(data)

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()


def beats_for(data, width, rng):
    """(data, words) per beat: full beats, the last one with 1..width/4 words; random 0-word beats."""
    per = width // 4
    ws = words_of(data)
    beats = []
    while ws:
        if rng.random() < 0.1:
            beats.append((rng.getrandbits(8 * width), 0))   # junk lanes, no words
        chunk, ws = ws[:per], ws[per:]
        value = sum(w << (32 * i) for i, w in enumerate(chunk))
        value |= rng.getrandbits(8 * width) & ~((1 << (32 * len(chunk))) - 1)  # junk in unused lanes
        beats.append((value, len(chunk)))
    return beats


@pytest.mark.parametrize("width", [4, 8])
def test_crc32c_beat_sim(width):
    dut = CRC32cBeat(width=width)
    rng = random.Random(width)
    messages = [data for data, _ in VECTORS]
    messages += [rng.randbytes(4 * rng.randint(1, 30)) for _ in range(40)]
    messages += [rng.randbytes(width * rng.randint(1, 6)) for _ in range(10)]   # all beats full

    async def tb(ctx):
        assert ctx.get(dut.crc) == 0 and ctx.get(dut.state) == CRC32C_INIT
        for data in messages:
            beats = beats_for(data, width, rng)
            for i, (value, nwords) in enumerate(beats):
                while rng.random() < 0.2:                      # idle cycles (state must hold)
                    ctx.set(dut.valid, 0)
                    ctx.set(dut.start, rng.getrandbits(1))     # ignored without valid
                    ctx.set(dut.data, rng.getrandbits(8 * width))
                    await ctx.tick()
                    assert ctx.get(dut.crc_valid) == 0
                ctx.set(dut.data, value)
                ctx.set(dut.words, nwords)
                ctx.set(dut.start, int(i == 0))
                ctx.set(dut.valid, 1)
                await ctx.tick()
                assert ctx.get(dut.crc_valid) == 1
                done = data[:4 * sum(n for _, n in beats[:i + 1])]
                assert ctx.get(dut.crc) == crc32c.crc32c(done), (data.hex(), i)
                assert ctx.get(dut.state) == crc32c.crc32c(done) ^ 0xFFFFFFFF
            ctx.set(dut.valid, 0)
            await ctx.tick()
            assert ctx.get(dut.crc) == crc32c.crc32c(data)   # holds
        # start with no words: CRC of nothing
        ctx.set(dut.start, 1)
        ctx.set(dut.valid, 1)
        ctx.set(dut.words, 0)
        await ctx.tick()
        assert ctx.get(dut.crc) == 0

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


# -- (c) ---------------------------------------------------------------------

def test_crc32c_beat_verilator():
    from rnic.sim.runner import run
    run(CRC32cBeat, name="crc32c_beat", params={"width": 8}, test_module="cocotb_crc32c",
        timeout_s=600)
