"""The simulator's build phases as ``rnic`` shows them on stderr: a live line with the phase
and the elapsed time on a terminal, one plain line per phase of a build that compiles
otherwise, nothing for a cached start, never anything on stdout.

Most tests feed phase sequences (a first build of even the smallest design takes 10-20 s
here): to the renderer directly, and through the simulator's hook
(:func:`rnic.sim.runner.report_phase`) from a fake device kind, a fake RTL engine and a fake
demo, so that each command's wiring is checked. One test builds the W = 4 TX framer in a
fresh build directory.
"""

import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from rnic.host import cli
from rnic.host.cli.progress import PLAIN_LINE, BuildView
from rnic.sim.runner import PHASES, build_progress, report_phase

BUILD = ["converting to Verilog", "verilating", "compiling C++", "ready"]
CACHED = ["converting to Verilog", "ready"]
START = ["starting", "ready"]
STAMP = r"\[\s*\d+\.\d s\]"


def feed(view, what, phases):
    for phase in phases:
        view.phase(phase, what)


def test_the_sim_layer_names_the_phases_the_cli_shows():
    assert PHASES == ("converting to Verilog", "verilating", "compiling C++", "starting",
                      "ready")


# -- the renderer -------------------------------------------------------------------------------

def test_plain_lines_show_a_compiling_build_one_line_per_phase():
    out = io.StringIO()
    view = BuildView("rnic demo", out, live=False)
    feed(view, "device_w8_c16", CACHED + START)             # cached: nothing in a log
    assert out.getvalue() == ""
    feed(view, "device_w8_c16", BUILD + START)
    view.close()
    lines = out.getvalue().splitlines()
    assert [re.sub(STAMP, "[T]", x) for x in lines] == [
        f"rnic demo: [T] device_w8_c16: {p}" for p in BUILD + START]
    assert all(PLAIN_LINE.match(x) for x in lines)          # what log filters look for


def test_a_live_line_shows_phase_and_elapsed_time_then_goes():
    out = io.StringIO()
    view = BuildView("rnic demo", out, live=True)
    feed(view, "device_w8_c16", CACHED)
    assert "built in" not in out.getvalue()                  # cached: the line just goes
    feed(view, "device_w8_c16", BUILD + START)
    view.close()
    text = out.getvalue()
    for phase in ("converting to Verilog", "verilating", "compiling C++", "starting"):
        assert f"rnic demo: device_w8_c16: {phase}" in text
    assert re.search(r"0:00:0\d", text)                      # rich's elapsed time column
    assert re.search(r"rnic demo: device_w8_c16: built in \d+\.\d s\n", text)


def test_say_prints_the_commands_own_lines_above_the_live_line():
    out = io.StringIO()
    view = BuildView("rnic bench mpa", out, live=True)
    view.phase("verilating", "mpa_engine_tx_w4_c16")
    view.say("W=4 tx: simulating 10 ULPDUs")
    view.phase("ready", "mpa_engine_tx_w4_c16")
    view.close()
    assert re.search(rf"rnic bench mpa: {STAMP} W=4 tx: simulating 10 ULPDUs", out.getvalue())


def test_a_view_whose_stderr_went_away_lets_the_build_go_on():
    class Gone(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    view = BuildView("rnic demo", Gone(), live=False)
    feed(view, "x", BUILD + START)                            # no exception
    view.close()


# -- the commands, through the simulator's hook -------------------------------------------------

def run_in_process(args, *, tty=False):
    """``rnic ARGS`` in this process: (status, stdout, stderr); stderr a terminal if ``tty``."""
    runner = CliRunner()
    with runner.isolation() as streams:
        if tty:
            sys.stderr.isatty = lambda: True
        try:
            cli.main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
        sys.stdout.flush()
        sys.stderr.flush()
        return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()


@pytest.fixture
def building_device(monkeypatch):
    """A device kind ``fake`` whose opening reports a compiling build, then a start."""
    from rnic.host.driver import device as driver
    from rnic.host.driver.model import ModelTransport

    def opener(arg, **kw):
        for phase in BUILD + START:
            report_phase(phase, "fake_w8")
        return ModelTransport()

    monkeypatch.setitem(driver.device_kinds(), "fake",
                        driver.DeviceKind("fake", "fake", "a device that builds", open=opener))


@pytest.mark.parametrize("args", [("status", "--json"), ("regs", "read", "ID"),
                                  ("connect", "127.0.0.1:1", "--timeout", "1")])
def test_every_device_open_shows_the_build_piped(building_device, args):
    code, out, err = run_in_process([*args, "--device", "fake"])
    assert code in (0, 1), err
    lines = [x for x in err.splitlines() if re.search(STAMP, x)]
    path = "rnic " + " ".join(a for a in args[:2] if not a.startswith(("-", "1")))
    assert [re.sub(STAMP, "[T]", x) for x in lines] == [
        f"{path}: [T] fake_w8: {p}" for p in BUILD + START]
    assert "fake_w8" not in out


def test_a_device_open_shows_a_live_line_on_a_terminal(building_device):
    code, out, err = run_in_process(["status", "--device", "fake"], tty=True)
    assert code == 0, err
    assert "rnic status: fake_w8: verilating" in err and re.search(r"0:00:0\d", err)
    assert re.search(r"rnic status: fake_w8: built in \d+\.\d s", err)
    assert "fake_w8" not in out and out.startswith("device fake:")


def test_encode_rtl_shows_the_engine_build(monkeypatch, tmp_path):
    from rnic.sim import mpa_engine
    real = mpa_engine.tx_engine
    real(4)                                     # converted once in this process, beforehand

    def tx_engine(width):
        for phase in BUILD:
            report_phase(phase, f"mpa_engine_tx_w{width}_c16")
        return real(width)

    monkeypatch.setattr(mpa_engine, "tx_engine", tx_engine)
    src = tmp_path / "in.jsonl"
    src.write_text('{"ddp": {"t": 0, "l": 1, "dv": 1, "qn": 0, "msn": 1, "mo": 0}, '
                   '"rdmap": {"rv": 1, "opcode": 3}, "payload": "68656c6c6f"}\n')
    code, out, err = run_in_process(["encode", src, "--engine", "rtl", "--width", "4",
                                     "-o", tmp_path / "rtl.bin"])
    assert code == 0, err
    assert [re.sub(STAMP, "[T]", x) for x in err.splitlines()] == [
        f"rnic encode: [T] mpa_engine_tx_w4_c16: {p}" for p in BUILD]
    assert run_in_process(["encode", src, "-o", tmp_path / "model.bin"])[0] == 0
    assert (tmp_path / "rtl.bin").read_bytes() == (tmp_path / "model.bin").read_bytes()


def test_demo_shows_the_device_build(monkeypatch):
    from rnic.host.apps import demo as demo_app
    real = demo_app.run_tcp_demo

    def run_tcp_demo(*, device):
        for phase in BUILD + START:
            report_phase(phase, "device_w8_c16")
        return real(device="none")

    monkeypatch.setattr(demo_app, "run_tcp_demo", run_tcp_demo)
    code, out, err = run_in_process(["demo", "--device", "sim", "--json"])
    assert code == 0, err
    assert [re.sub(STAMP, "[T]", x) for x in err.splitlines()] == [
        f"rnic demo: [T] device_w8_c16: {p}" for p in BUILD + START]
    assert json.loads(out)["ok"]


def test_a_cached_engine_reports_conversion_then_ready():
    """The simulator layer's side, on a real (cached) FastSim: no compile phases."""
    from rnic.sim import mpa_engine
    mpa_engine.tx_engine(4)                                   # built (once) and cached
    seen = []
    with build_progress(lambda phase, what: seen.append((phase, what))):
        mpa_engine.tx_engine.__wrapped__(4)
    assert seen == [("converting to Verilog", "mpa_engine_tx_w4_c16"),
                    ("ready", "mpa_engine_tx_w4_c16")]


def test_a_first_build_in_a_fresh_directory_shows_each_phase(tmp_path):
    """``rnic encode --engine rtl --width 4`` building the TX framer from nothing (the
    Verilator run-time objects copied from the usual cache when it has them)."""
    from rnic.sim.fast import _runtime_cache
    from rnic.sim.runner import build_root
    runtime = _runtime_cache(build_root())
    if runtime.is_dir():
        shutil.copytree(runtime, tmp_path / runtime.name)
    line = ('{"ddp": {"t": 1, "l": 1, "dv": 1, "stag": 4096, "to": 0}, '
            '"rdmap": {"rv": 1, "name": "write"}, "payload": "0badcafe"}\n').encode()
    cmd = [sys.executable, "-m", "rnic.host.cli", "encode", "--engine", "rtl", "--width", "4"]
    env = {**os.environ, "RNIC_SIM_BUILD": str(tmp_path)}
    env.pop("RNIC_SIM_REBUILD", None)
    proc = subprocess.run(cmd, input=line, capture_output=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stderr.decode().splitlines()
    assert [re.sub(STAMP, "[T]", x) for x in lines] == [
        f"rnic encode: [T] mpa_engine_tx_w4_c16: {p}" for p in BUILD]
    model = subprocess.run(cmd[:4], input=line, capture_output=True, timeout=60)
    assert proc.stdout == model.stdout
    again = subprocess.run(cmd, input=line, capture_output=True, timeout=120, env=env)
    assert (again.returncode, again.stderr, again.stdout) == (0, b"", model.stdout)
