"""Static timing of a routed design from nextpnr's SDF: every failing path, grouped.

nextpnr's report names one critical path per clock; closing timing on a design with
hundreds of failing endpoints needs all of them at once. nextpnr writes the routed
delays of every arc with ``--sdf FILE`` (SDF 3.0: an ``IOPATH`` per cell arc, an
``INTERCONNECT`` per routed net arc, a ``SETUPHOLD`` per register input). This module
reads that file and does what a static timing analyser does for one clock: arrival
times by longest path from every register's clock-to-output arc, required time at
every register input (period minus setup), slack per endpoint, the path behind each.

Paths are grouped by the names of their start and end registers (the RTL signal
names Yosys kept: ``core.ddp.row_q_TRELLIS_FF_Q_12`` -> ``core.ddp.row_q``), so one
line stands for all the bits of a bus. Delays are the SDF's maximum corner, as
nextpnr's own report uses (:func:`analyse`'s worst path equals nextpnr's critical
path; ``tests/host/test_build.py`` checks this on a real build).

Why not an existing tool: OpenSTA and the like are not on PyPI; the SDF nextpnr
writes uses a small, regular subset of the format that a line parser reads.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict, deque
from pathlib import Path

__all__ = ["Timing", "Endpoint", "PathGroup", "parse_sdf", "analyse", "group", "signal_name",
           "format_groups"]

# pins that clock a cell: arcs from them launch paths, nets into them are the clock tree
_CLOCK_PINS = {"CLK", "CLKA", "CLKB", "WCK", "CLKI", "CLKO", "CLKOP", "CLKOS"}

_TRIPLE = r"\((-?[\d.]*):(-?[\d.]*):(-?[\d.]*)\)"
_RE_INSTANCE = re.compile(r"\(INSTANCE\s*((?:\\.|[^)\\])*)\)")
_RE_IOPATH = re.compile(r"^\s*\(IOPATH\s+(\S+)\s+(\S+)\s+" + _TRIPLE)
_RE_INTERCONNECT = re.compile(r"^\s*\(INTERCONNECT\s+(\S+)\s+(\S+)\s+" + _TRIPLE)
_RE_SETUP = re.compile(r"^\s*\(SETUP(?:HOLD)?\s+\((?:posedge|negedge)\s+(\S+)\)\s+\((posedge|negedge)\s+(\S+)\)\s+"
                       + _TRIPLE)
_RE_SUFFIX = re.compile(r"(_TRELLIS_FF_Q(_\d+)?|_DP16KD.*|\$.*)$")


def _unescape(name):
    return re.sub(r"\\(.)", r"\1", name)


def _split_pin(ref):
    """``inst/pin`` (SDF divider ``/``, escaped ``\\/`` inside names) -> (inst, pin)."""
    i = len(ref) - 1
    while i >= 0:
        if ref[i] == "/" and (i == 0 or ref[i - 1] != "\\"):
            return _unescape(ref[:i]), ref[i + 1:]
        i -= 1
    return "", ref


def _ps(triple):
    # the maximum corner (nextpnr's timing report uses it); SDF values are integers in ps
    return float(triple[2] or triple[1] or triple[0] or 0)


def signal_name(cell):
    """The RTL signal behind a cell name: ``core.a_cnt_TRELLIS_FF_Q_3`` -> ``core.a_cnt``,
    ``core.ctx.0.0$DPRAM_COMB3`` -> ``core.ctx.0.0``."""
    return _RE_SUFFIX.sub("", cell) or cell


@dataclasses.dataclass
class Timing:
    """The arcs of one routed design (delays in ps)."""
    arcs: dict              # node -> list of (next node, delay); nodes are "inst/pin"
    launches: dict          # output node -> list of (clock pin node, clock-to-output delay)
    checks: dict            # input node -> (clock pin node, setup)
    clock_driver: dict      # clock pin node -> the node driving it (the clock net's driver)


def parse_sdf(path):
    """Read nextpnr's SDF into a :class:`Timing`."""
    arcs = defaultdict(list)
    launches = defaultdict(list)
    checks = {}
    clock_driver = {}
    inst = None
    with open(path, errors="replace") as f:
        for line in f:
            if "(INSTANCE" in line:
                m = _RE_INSTANCE.search(line)
                inst = _unescape(m.group(1).strip()) if m else None
            elif "(IOPATH" in line:
                m = _RE_IOPATH.match(line)
                if not m:
                    continue
                a, b = m.group(1), m.group(2)
                delay = _ps(m.groups()[2:5])
                if a in _CLOCK_PINS:
                    launches[f"{inst}/{b}"].append((f"{inst}/{a}", delay))
                else:
                    arcs[f"{inst}/{a}"].append((f"{inst}/{b}", delay))
            elif "(INTERCONNECT" in line:
                m = _RE_INTERCONNECT.match(line)
                if not m:
                    continue
                si, sp = _split_pin(m.group(1))
                di, dp = _split_pin(m.group(2))
                src, dst = f"{si}/{sp}", f"{di}/{dp}"
                if dp in _CLOCK_PINS:
                    clock_driver[dst] = src
                else:
                    arcs[src].append((dst, _ps(m.groups()[2:5])))
            elif "(SETUP" in line:
                m = _RE_SETUP.match(line)
                if not m:
                    continue
                pin, clk = m.group(1), m.group(3)
                setup = _ps(m.groups()[3:6])
                node = f"{inst}/{pin}"
                if node not in checks or checks[node][1] < setup:
                    checks[node] = (f"{inst}/{clk}", setup)
    return Timing(dict(arcs), dict(launches), checks, clock_driver)


@dataclasses.dataclass
class Endpoint:
    node: str               # register input "inst/pin"
    start: str              # launching register output "inst/pin"
    arrival_ps: float
    setup_ps: float
    slack_ps: float
    path: list              # [(node, arrival ps)] from the launching output to the endpoint


@dataclasses.dataclass
class PathGroup:
    """All failing (or worst) endpoints between one start signal and one end signal."""
    start: str
    end: str
    endpoints: int
    worst: Endpoint

    def to_json(self):
        w = self.worst
        return {"from": self.start, "to": self.end, "endpoints": self.endpoints,
                "slack_ns": round(w.slack_ps / 1000, 3),
                "delay_ns": round((w.arrival_ps + w.setup_ps) / 1000, 3),
                "path": [{"node": n, "at_ns": round(t / 1000, 3)} for n, t in w.path]}


def _main_clock(timing):
    """The clock net driver with the most register pins."""
    count = defaultdict(int)
    for drv in timing.clock_driver.values():
        count[drv] += 1
    return max(count, key=count.get) if count else None


def analyse(timing, period_ns, *, clock=None):
    """Endpoints of the clock driven by ``clock`` (a driver node; default: the clock with
    the most registers), worst slack first. Returns ``(endpoints, clock)``."""
    if isinstance(timing, (str, Path)):
        timing = parse_sdf(timing)
    clock = clock or _main_clock(timing)
    in_domain = lambda clk_node: timing.clock_driver.get(clk_node) == clock  # noqa: E731
    arrival = {}
    pred = {}
    origin = {}
    for out, arcs in timing.launches.items():
        for clk_node, delay in arcs:
            if in_domain(clk_node) and delay > arrival.get(out, -1.0):
                arrival[out] = delay
                pred[out] = None
                origin[out] = out
    # longest path over the combinational arcs (a DAG: Kahn's order from the sources)
    indeg = defaultdict(int)
    for src, outs in timing.arcs.items():
        for dst, _ in outs:
            indeg[dst] += 1
    queue = deque(n for n in timing.arcs if indeg[n] == 0)
    while queue:
        n = queue.popleft()
        t = arrival.get(n)
        for dst, d in timing.arcs.get(n, ()):
            if t is not None and t + d > arrival.get(dst, -1.0):
                arrival[dst] = t + d
                pred[dst] = n
                origin[dst] = origin[n]
            indeg[dst] -= 1
            if indeg[dst] == 0:
                queue.append(dst)
    period = period_ns * 1000.0
    result = []
    for node, (clk_node, setup) in timing.checks.items():
        if node not in arrival or not in_domain(clk_node):
            continue
        t = arrival[node]
        path = []
        n = node
        while n is not None:
            path.append((n, arrival[n]))
            n = pred.get(n)
        path.reverse()
        result.append(Endpoint(node=node, start=origin[node], arrival_ps=t, setup_ps=setup,
                               slack_ps=period - t - setup, path=path))
    result.sort(key=lambda e: e.slack_ps)
    return result, clock


def group(endpoints, *, failing_only=True):
    """:class:`PathGroup` per (start signal, end signal), worst first."""
    groups = {}
    for e in endpoints:
        if failing_only and e.slack_ps >= 0:
            continue
        key = (signal_name(e.start.rsplit("/", 1)[0]), signal_name(e.node.rsplit("/", 1)[0]))
        g = groups.get(key)
        if g is None:
            groups[key] = PathGroup(key[0], key[1], 1, e)
        else:
            g.endpoints += 1
    return sorted(groups.values(), key=lambda g: g.worst.slack_ps)


def format_groups(groups, limit=20, *, verbose=False):
    """Text lines: one per path group (slack, endpoints, from -> to), and with ``verbose``
    the cells of its worst path."""
    lines = []
    for g in groups[:limit]:
        w = g.worst
        lines.append(f"  {w.slack_ps / 1000:7.2f} ns  {g.endpoints:5d} x  {g.start} -> {g.end}")
        if verbose:
            for node, t in w.path:
                lines.append(f"        {t / 1000:6.2f}  {node}")
    if len(groups) > limit:
        lines.append(f"  ... {len(groups) - limit} more groups")
    return lines
