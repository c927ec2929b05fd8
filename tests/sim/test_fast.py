"""rnic.sim.fast: the generated C++ stream harness, on a component made here.

One component (one Verilator build, cached in the simulation build cache) carries every
case: a FIFO lane per payload width class of Verilator (VlWide above 64 bits,
QData for 33..64, CData/SData/IData up to 32), a stream inside a nested
interface, an always-ready output, a plain input (``hold``) and a plain output
(``count``).
"""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.hdl.beat import OctetBeat
from rnic.sim.fast import FastResult, FastSim, FastSimError, pack, unpack

WIDE = OctetBeat(width=32, connections=16)                      # 256 + 6 + 1 + 1 + 4 = 268 bits
MID = data.StructLayout({"a": 32, "b": 8})                      # 40 bits (QData)
NARROW = data.StructLayout({"x": 12, "tag": 4, "flag": 1})      # 17 bits (IData)


class Lanes(wiring.Component):
    """Independent stream FIFOs of three payload widths, plus odds and ends.

    wide_i -> wide_o, mid.s -> mid_o (``mid`` is a nested interface),
    narrow_i -> narrow_o; ``ev`` (always ready) pulses with the low byte of
    every narrow beat accepted; ``count`` counts narrow beats accepted;
    ``hold`` = 1 stops the narrow output.
    """

    def __init__(self, *, depth=4):
        self.depth = depth
        super().__init__({
            "wide_i": In(stream.Signature(WIDE)),
            "wide_o": Out(stream.Signature(WIDE)),
            "mid": In(wiring.Signature({"s": Out(stream.Signature(MID))})),
            "mid_o": Out(stream.Signature(MID)),
            "narrow_i": In(stream.Signature(NARROW)),
            "narrow_o": Out(stream.Signature(NARROW)),
            "ev": Out(stream.Signature(8, always_ready=True)),
            "hold": In(1),
            "count": Out(32),
        })

    def elaborate(self, platform):
        m = Module()

        def lane(name, i, o, width, hold=None):
            m.submodules[name] = f = fifo.SyncFIFOBuffered(width=width, depth=self.depth)
            go = ~hold if hold is not None else 1
            m.d.comb += [
                f.w_data.eq(i.payload), f.w_en.eq(i.valid), i.ready.eq(f.w_rdy),
                o.payload.eq(f.r_data), o.valid.eq(f.r_rdy & go), f.r_en.eq(o.ready & go),
            ]

        lane("wide", self.wide_i, self.wide_o, WIDE.size)
        lane("mid", self.mid.s, self.mid_o, MID.size)
        lane("narrow", self.narrow_i, self.narrow_o, NARROW.size, hold=self.hold)
        took = self.narrow_i.valid & self.narrow_i.ready
        m.d.sync += self.ev.valid.eq(took)
        with m.If(took):
            m.d.sync += [self.ev.payload.eq(self.narrow_i.payload.as_value()[:8]),
                         self.count.eq(self.count + 1)]
        return m


@pytest.fixture(scope="module")
def sim():
    s = FastSim(Lanes, name="test_fast_lanes", params={"depth": 4},
                inputs=["wide_i", "mid.s", "narrow_i"], outputs=["wide_o", "mid_o", "narrow_o", "ev"])
    print(f"\nFastSim build: built={s.built} {s.build_s:.1f} s ({s.build_dir})")
    return s


def _beats(rng, n):
    wide = [rng.getrandbits(WIDE.size) for _ in range(n)]
    mid = [rng.getrandbits(MID.size) for _ in range(n)]
    narrow = [rng.getrandbits(NARROW.size) for _ in range(n)]
    return wide, mid, narrow


def test_ports(sim):
    assert sim.inputs == ["wide_i", "mid.s", "narrow_i"]
    assert sim.outputs == ["wide_o", "mid_o", "narrow_o", "ev"]
    assert sim.widths == {"wide_i": 268, "wide_o": 268, "mid.s": 40, "mid_o": 40,
                          "narrow_i": 17, "narrow_o": 17, "ev": 8}
    assert sim.plain_inputs == ["hold"] and sim.plain_outputs == ["count"]
    assert sim.layouts["wide_o"] is WIDE


@pytest.mark.parametrize("idle,bp,seed", [(0.3, 0.4, 1), (0.7, 0.1, 2), (0.05, 0.8, 3)])
def test_random_traffic_in_order(sim, idle, bp, seed):
    rng = random.Random(seed)
    wide, mid, narrow = _beats(rng, 3000)
    res = sim.run({"wide_i": wide, "mid__s": mid, "narrow_i": narrow},
                  idle_prob=idle, backpressure_prob=bp, seed=seed)
    res.check()
    assert res.outputs["wide_o"] == wide
    assert res.outputs["mid_o"] == mid
    assert res.outputs["narrow_o"] == narrow
    assert res.outputs["ev"] == [v & 0xFF for v in narrow]
    assert res.final == {"count": len(narrow)}
    assert res.input_beats == res.input_offered == {"wide_i": 3000, "mid.s": 3000, "narrow_i": 3000}
    assert res.output_beats == {"wide_o": 3000, "mid_o": 3000, "narrow_o": 3000, "ev": 3000}
    for port in ("wide_o", "mid_o", "narrow_o"):
        cyc = res.output_cycles[port]
        assert all(a < b for a, b in zip(cyc, cyc[1:]))
        # idles and back-pressure did happen: fewer beats than cycles
        assert cyc[-1] - cyc[0] > 3000
    # the FIFO never hands a beat out before it was taken in
    assert all(o > i for i, o in zip(res.input_cycles["wide_i"], res.output_cycles["wide_o"]))
    print(f"\nrandom traffic idle={idle} bp={bp}: {res.cycles} cycles, "
          f"{res.cycles_per_s / 1e6:.2f} M cycles/s (run() total {res.total_s:.3f} s)")


def test_full_rate(sim):
    n = 200_000
    rng = random.Random(5)
    wide, mid, narrow = _beats(rng, n)
    res = sim.run({"wide_i": wide, "mid.s": mid, "narrow_i": narrow}, idle_cycles=16).check()
    assert res.outputs["wide_o"] == wide and res.outputs["mid_o"] == mid
    assert res.outputs["narrow_o"] == narrow
    for port in ("wide_i", "mid.s", "narrow_i"):
        cyc = res.input_cycles[port]
        assert cyc[0] == 0 and cyc[-1] == n - 1           # one beat per cycle from cycle 0
    for port in ("wide_o", "mid_o", "narrow_o"):
        cyc = res.output_cycles[port]
        assert cyc[-1] - cyc[0] == n - 1 and cyc[0] <= 3
    assert n + 16 <= res.cycles <= n + 16 + 8
    print(f"\nfull rate, 3 lanes (268/40/17 bits): {res.cycles} cycles in {res.wall_s:.3f} s = "
          f"{res.cycles_per_s / 1e6:.2f} M cycles/s (run() total {res.total_s:.2f} s)")
    assert res.cycles_per_s > 1e5      # a loose floor: the target is >= 1M (see the print)


def test_speed_one_lane(sim):
    n = 1_000_000
    narrow = [k & 0x1FFFF for k in range(n)]
    res = sim.run({"narrow_i": narrow}, idle_cycles=16).check()
    assert res.outputs["narrow_o"] == narrow
    print(f"\nfull rate, narrow lane only: {res.cycles} cycles in {res.wall_s:.3f} s = "
          f"{res.cycles_per_s / 1e6:.2f} M cycles/s (run() total {res.total_s:.2f} s)")
    assert res.cycles_per_s > 1e5


def test_order(sim):
    rng = random.Random(9)
    wide, mid, narrow = _beats(rng, 500)
    res = sim.run({"wide_i": wide, "mid.s": mid, "narrow_i": narrow},
                  order=[["narrow_i"], ["mid.s"], ["wide_i"]],
                  idle_prob=0.2, backpressure_prob=0.2, seed=4).check()
    ic = res.input_cycles
    assert ic["narrow_i"][-1] < ic["mid.s"][0]
    assert ic["mid.s"][-1] < ic["wide_i"][0]
    assert res.outputs["wide_o"] == wide and res.outputs["mid_o"] == mid
    assert res.outputs["narrow_o"] == narrow
    # without order the lanes run side by side
    res = sim.run({"wide_i": wide, "mid.s": mid, "narrow_i": narrow}).check()
    assert res.input_cycles["wide_i"][0] == res.input_cycles["narrow_i"][0] == 0
    # streams in no group belong to the first one
    res = sim.run({"wide_i": wide, "narrow_i": narrow}, order=[["wide_i"]]).check()
    assert res.input_cycles["narrow_i"][0] == 0 and res.input_cycles["wide_i"][0] == 0
    res = sim.run({"wide_i": wide, "narrow_i": narrow}, order=[[], ["wide_i"]]).check()
    assert res.input_cycles["wide_i"][0] == len(narrow)
    res = sim.run({"wide_i": wide, "narrow_i": narrow}, order=[["wide_i"], ["narrow_i"]]).check()
    assert res.input_cycles["narrow_i"][0] == len(wide)


def test_per_stream_probabilities_and_seed(sim):
    narrow = list(range(2000))
    a = sim.run({"narrow_i": narrow}, idle_prob={"narrow_i": 0.5}, backpressure_prob={"narrow_o": 0.5},
                seed=11).check()
    b = sim.run({"narrow_i": narrow}, idle_prob={"narrow_i": 0.5}, backpressure_prob={"narrow_o": 0.5},
                seed=11).check()
    c = sim.run({"narrow_i": narrow}, idle_prob={"narrow_i": 0.5}, backpressure_prob={"narrow_o": 0.5},
                seed=12).check()
    assert a.outputs["narrow_o"] == narrow
    assert a.output_cycles == b.output_cycles and a.cycles == b.cycles     # reproducible
    assert a.output_cycles != c.output_cycles
    assert 3000 < a.cycles < 6000                                         # ~1/(0.5) and ~1/(0.5) overlap
    with pytest.raises(ValueError):
        sim.run({"narrow_i": narrow}, idle_prob=1.0)


def test_dict_payloads_pack_unpack(sim):
    beats = [{"data": int.from_bytes(bytes(range(k, k + 32)), "little"), "n": 32, "first": k == 0,
              "last": k == 9, "conn": k} for k in range(10)]
    res = sim.run({"wide_i": beats, "narrow_i": [{"x": 0xABC, "tag": 5, "flag": 1}]}).check()
    got = res.unpacked("wide_o")
    assert got == [{k: int(v) for k, v in b.items()} for b in beats]
    assert res.unpacked("narrow_o") == [{"x": 0xABC, "tag": 5, "flag": 1}]
    word = pack(NARROW, x=0x123, tag=0xF)
    assert word == 0x123 | (0xF << 12)
    assert pack(NARROW, {"x": 0x123, "tag": 0xF}) == word
    assert unpack(NARROW, word) == {"x": 0x123, "tag": 0xF, "flag": 0}
    with pytest.raises(ValueError):
        sim.run({"narrow_i": [1 << 17]})
    with pytest.raises(KeyError):
        sim.run({"nope": [1]})


def test_consts_stall_and_max_cycles(sim):
    narrow = list(range(100))
    res = sim.run({"narrow_i": narrow}, consts={"hold": 1}, stall_cycles=500)
    assert res.reason == "stall" and not res.ok
    assert res.output_beats["narrow_o"] == 0
    assert 0 < res.input_beats["narrow_i"] < 100 and res.final["count"] == res.input_beats["narrow_i"]
    with pytest.raises(FastSimError, match="stall"):
        res.check()
    res = sim.run({"narrow_i": narrow}, max_cycles=50)
    assert res.reason == "max_cycles" and res.cycles == 50 and res.output_beats["narrow_o"] < 50
    assert res.outputs["narrow_o"] == narrow[:res.output_beats["narrow_o"]]
    res = sim.run({}).check()                                # nothing to do
    assert res.cycles == 64 and res.outputs["narrow_o"] == []


def test_cache_reuse(sim):
    builds = FastSim.builds
    again = FastSim(Lanes, name="test_fast_lanes", params={"depth": 4},
                    inputs=["wide_i", "mid.s", "narrow_i"], outputs=["wide_o", "mid_o", "narrow_o", "ev"])
    assert not again.built and FastSim.builds == builds
    assert again.build_dir == sim.build_dir and again.build_s < 5
    assert isinstance(again.run({"narrow_i": [1, 2, 3]}), FastResult)


def test_raw_bytes_and_drain_limit(sim):
    narrow = [k & 0x1FFFF for k in range(1000)]
    raw = b"".join(v.to_bytes(4, "little") for v in narrow)
    assert sim.record_bytes["narrow_i"] == 4 and sim.record_bytes["wide_i"] == 36
    res = sim.run({"narrow_i": raw}, decode=False).check()
    assert res.outputs["narrow_o"] == raw
    cyc = res.output_cycles["narrow_o"]
    assert cyc[0] <= 3 and list(cyc) == list(range(cyc[0], cyc[0] + 1000))
    # heavy back-pressure: the FIFO still holds beats drain_limit cycles after the last input beat
    wide = [k for k in range(50)]
    res = sim.run({"wide_i": wide}, backpressure_prob=0.9, drain_limit=5, seed=1)
    assert res.reason == "drain_limit" and not res.ok and res.input_beats["wide_i"] == 50
    assert 0 < res.output_beats["wide_o"] < 50 and res.outputs["wide_o"] == wide[:res.output_beats["wide_o"]]
    with pytest.raises(ValueError):
        sim.run({"narrow_i": raw[:-1]})
