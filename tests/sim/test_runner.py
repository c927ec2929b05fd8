"""The Verilator runner and the stream BFMs, on a small stream FIFO of OctetBeats."""

import pytest
from amaranth.hdl import Module
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.hdl.beat import OctetBeat
from rnic.sim.runner import SimFailure, run, verilog
from rnic.sim.streams import beats_to_bytes, beats_to_units, bytes_to_beats, pack, unpack


class BeatFifo(wiring.Component):
    """Stream FIFO of OctetBeats (test fixture)."""

    def __init__(self, *, width, connections, depth, marker=None):
        self.layout = OctetBeat(width=width, connections=connections)
        self.depth = depth
        super().__init__({
            "i": In(stream.Signature(self.layout)),
            "o": Out(stream.Signature(self.layout)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = f = fifo.SyncFIFOBuffered(width=self.layout.size, depth=self.depth)
        m.d.comb += [
            f.w_data.eq(self.i.payload), f.w_en.eq(self.i.valid), self.i.ready.eq(f.w_rdy),
            self.o.payload.eq(f.r_data), self.o.valid.eq(f.r_rdy), f.r_en.eq(self.o.ready),
        ]
        return m


PARAMS = {"width": 8, "connections": 4, "depth": 4, "marker": "smoke"}


def test_port_naming():
    text = verilog(BeatFifo, PARAMS)
    for port in ("input i__valid", "output i__ready", "input [71:0] i__payload",
                 "output o__valid", "input o__ready", "output [71:0] o__payload",
                 "input clk", "input rst"):
        assert port in text, port


def test_pack_and_beats():
    layout = OctetBeat(width=8, connections=4)
    beat = {"data": 0x0807060504030201, "n": 8, "first": 1, "last": 0, "conn": 3}
    word = pack(layout, beat)
    assert word == 0x0807060504030201 | 8 << 64 | 1 << 68 | 3 << 70
    assert unpack(layout, word) == beat
    assert pack(layout.members if hasattr(layout, "members") else dict(
        (k, f.shape) for k, f in layout), beat) == word
    with pytest.raises(KeyError):
        pack(layout, {"datta": 1})
    with pytest.raises(ValueError):
        pack(layout, {"n": 16})
    data = bytes(range(19))
    beats = bytes_to_beats(data, 8, conn=2)
    assert [b["n"] for b in beats] == [8, 8, 3]
    assert [(b["first"], b["last"]) for b in beats] == [(1, 0), (0, 0), (0, 1)]
    assert beats_to_bytes(beats) == data
    assert beats_to_units(beats + bytes_to_beats(b"x", 8, conn=1)) == [(2, data), (1, b"x")]
    with pytest.raises(AssertionError):
        beats_to_units(beats[1:])


def test_fifo_roundtrip_and_cache():
    first = run(BeatFifo, name="smoke_fifo", params=PARAMS, test_module="cocotb_runner_smoke",
                testcase=["random_traffic", "full_rate", "sees_params"], seed=1234, timeout_s=300)
    assert first.tests == 3 and first.failed == 0
    again = run(BeatFifo, name="smoke_fifo", params=PARAMS, test_module="cocotb_runner_smoke",
                testcase="sees_params", timeout_s=120)
    assert not again.built, "second run must reuse the build"
    assert again.build_dir == first.build_dir
    assert again.build_s < 5


def test_a_cached_model_runs_after_the_environment_that_built_it_is_gone(tmp_path, monkeypatch):
    """The build cache is shared by every virtual environment of the user; a model built in one
    that was removed since (a CI run's temporary venv) must still run in another."""
    import shutil
    built = run(BeatFifo, name="smoke_fifo", params=PARAMS, test_module="cocotb_runner_smoke",
                testcase="sees_params", timeout_s=300)
    root = tmp_path / "cache"
    shutil.copytree(built.build_dir, root / built.build_dir.name, symlinks=True,
                    ignore=shutil.ignore_patterns("runs"))
    exe = root / built.build_dir.name / "top"
    binary = exe.read_bytes()
    import re
    # the RUNPATH names cocotb's library directory in whichever environment built the model
    runpaths = set(re.findall(rb"/[^\0]*/cocotb/libs(?=\0)", binary))
    assert len(runpaths) == 1, runpaths
    libs = runpaths.pop()
    gone = b"/gone" + b"x" * (len(libs) - len(b"/gone"))    # same length: the ELF stays valid
    exe.write_bytes(binary.replace(libs, gone))
    monkeypatch.setenv("RNIC_SIM_BUILD", str(root))
    again = run(BeatFifo, name="smoke_fifo", params=PARAMS, test_module="cocotb_runner_smoke",
                testcase="sees_params", timeout_s=120)
    assert not again.built and again.tests == 1 and again.failed == 0


def test_a_new_model_builds_on_runtime_objects_of_an_environment_that_is_gone(tmp_path,
                                                                             monkeypatch):
    """The compiled Verilator runtime is shared as well: a new model builds on objects that an
    environment removed since compiled, whatever their make dependency files named."""
    from rnic.sim import runner
    monkeypatch.setenv("RNIC_SIM_BUILD", str(tmp_path / "cache"))
    first = run(BeatFifo, name="smoke_fifo", params=PARAMS, test_module="cocotb_runner_smoke",
                testcase="sees_params", timeout_s=300)
    cache = runner._runtime_cache_dir(False)
    assert first.built and (cache / "stamp").is_file()
    for obj in cache.glob("verilated*.o"):      # as such an environment left them
        obj.with_suffix(".d").write_text(f"{obj.name}: /gone/verilator/include/{obj.stem}.cpp\n")
    again = run(BeatFifo, name="smoke_fifo", params=dict(PARAMS, depth=8),
                test_module="cocotb_runner_smoke", testcase="sees_params", timeout_s=300)
    assert again.built and again.tests == 1 and again.failed == 0
    assert not list(again.build_dir.glob("verilated*.d"))


def test_failure_is_reported(tmp_path):
    with pytest.raises(SimFailure, match=r"(?s)1 of 1 cocotb tests failed.*fails_on_request.*deliberate failure"):
        run(BeatFifo, name="smoke_fifo", params=PARAMS, test_module="cocotb_runner_smoke",
            testcase="fails_on_request", extra_env={"SMOKE_FAIL": "1"}, timeout_s=120,
            test_dir=tmp_path)


def test_internals_build():
    res = run(BeatFifo, name="smoke_fifo", params=PARAMS, test_module="cocotb_runner_smoke",
              testcase="internals_visible", internals=True, timeout_s=120)
    assert res.tests == 1
    plain = run(BeatFifo, name="smoke_fifo", params=PARAMS, test_module="cocotb_runner_smoke",
                testcase="sees_params", timeout_s=120)
    assert plain.build_dir != res.build_dir
