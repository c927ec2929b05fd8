"""``rnic bench mpa``: throughput of the Verilated MPA TX framer and RX deframer.

(``rnic bench ddp``, end-to-end goodput of two data paths back to back beside the
protocol limit, is at the end of this module: :func:`run_ddp_bench`; docs/bench.md.)

For each datapath width W the benchmark runs long random traffic through the
TX framer alone and through the RX deframer alone, on the C++ Verilator
harness of :mod:`rnic.sim.fast` (through :mod:`rnic.sim.mpa_engine`), with no idle
cycles on the inputs and no back-pressure on the outputs, and checks every
output octet against the reference model (:mod:`rnic.host.model.fpdu`): a benchmark that
computes garbage fast is worthless, so a mismatch fails the run.

Traffic (markers and CRC on for every connection, EMSS 1460, so MULPDU 1442)
----------------------------------------------------------------------------
* ``connections`` connections (default 8) with random marker phases.
* Blocks that alternate between *interleaved* stretches (each unit goes to a
  random connection) and *one-connection runs* (8..64 units of one
  connection back to back).
* TX: units are ULPDUs of random sizes 1..MULPDU, so connections interleave
  at FPDU boundaries. Checked: per connection the octets out equal
  :class:`rnic.host.model.fpdu.FpduEncoder`'s FPDUs of that connection's ULPDUs.
* RX: ULPDUs of random sizes 14..MULPDU (a DDP header at least: the
  deframer checks ULPDU_Length against the header its first octet
  announces) are framed by the model per connection, each connection's
  FPDU stream is cut into TCP segments of EMSS octets (the last one
  shorter), and the units are these segments, so connections interleave at
  segment boundaries, in the middle of FPDUs. Checked: per connection the
  ULPDUs out, all with CRC OK and no error, equal what
  :class:`rnic.host.model.fpdu.FpduDecoder` decodes from that stream.

Figures, per width and unit
---------------------------
``cycles``
    From the first beat on the block's data ports (input or output) to the
    last one, both included (the ``cfg`` writes before are not counted).
``wire_octets``
    Octets on the TCP side: the framer's output, the deframer's input.
``efficiency``
    ``wire_octets / (cycles * W)``; 1.0 means one full wire beat per cycle.
``beats_in``, ``beats_out``
    Beats accepted on ``i`` and on ``o``.
``beat_rate``
    Wire-side beats (TX ``o``, RX ``i``) per cycle. 1.0 means the block never
    left a cycle empty; then ``efficiency`` is below 1 only by the partial
    last beats of the wire-side units (TX runs, RX segments), which the
    interface imposes (a beat never mixes connections or segments).
``cycles_per_s``
    Simulation rate of the harness loop (all simulated cycles / its wall time):
    what a user waits for, so it drops when the machine is shared.
``cycles_per_cpu_s``
    All simulated cycles / CPU seconds of the harness process (its whole
    life: start, reading and writing the beat files, the loop): the rate of
    one unshared core, a lower bound of the loop's own rate.
``build_s``
    Seconds to get the simulator (Verilog conversion, and the Verilator/C++
    build unless ``cached``).
"""

import random
import time
from collections import deque
from dataclasses import dataclass

from rnic.host.spec.limits import WIDTHS

__all__ = ["EMSS", "WIDTHS", "TARGET_EFFICIENCY", "TARGET_CYCLES_PER_S", "BenchMismatch",
           "make_tx_traffic", "make_rx_traffic", "bench_tx", "bench_rx", "run_bench",
           "text_report", "DDP_SIZES", "DDP_COUNTS", "DDP_OPS", "DDP_CLOCKS", "ddp_wire_model",
           "bench_ddp", "run_ddp_bench", "ddp_text_report"]

#: Effective maximum segment size of the traffic (Ethernet, IPv4, TCP timestamps off).
EMSS = 1460
#: The design targets (docs/architecture.md, "Design targets"; reported, not enforced).
#: A row's ``meets_target``: verified, efficiency >= TARGET_EFFICIENCY and cycles_per_cpu_s >=
#: TARGET_CYCLES_PER_S (the CPU rate: the wall rate depends on who else uses the machine).
TARGET_EFFICIENCY = 0.99
TARGET_CYCLES_PER_S = 1_000_000
#: Connections that carry traffic (the simulated blocks have 16 contexts).
DEFAULT_CONNECTIONS = 8
DEFAULT_ULPDUS = 10_000


class BenchMismatch(AssertionError):
    """The hardware's output differs from the model's."""


def _mulpdu():
    from rnic.host.model.fpdu import mulpdu
    return mulpdu(EMSS, markers=True)


def _origin_of(phase):
    return (-phase) % 512


def _configs(rng, connections, mulpdu):
    return [{"conn": c, "markers": 1, "crc": 1, "phase": rng.randrange(0, 512, 4),
             "mulpdu": mulpdu} for c in range(connections)]


def _interleave(rng, queues):
    """Merge per-connection queues: interleaved stretches and one-connection runs.

    Alternates blocks of 8..64 units: in an interleaved block each unit comes from a random
    connection that has units left; in a run block all come from one connection.
    Returns ``[(conn, unit), ...]``; each connection's units keep their order.
    """
    queues = {c: deque(q) for c, q in queues.items()}
    out = []
    interleave = True
    while True:
        live = [c for c, q in queues.items() if q]
        if not live:
            return out
        block = rng.randint(8, 64)
        if interleave:
            for _ in range(block):
                if not live:
                    break
                c = rng.choice(live)
                out.append((c, queues[c].popleft()))
                if not queues[c]:
                    live.remove(c)
        else:
            c = rng.choice(live)
            q = queues[c]
            for _ in range(min(block, len(q))):
                out.append((c, q.popleft()))
        interleave = not interleave


def make_tx_traffic(rng, *, ulpdus, connections=DEFAULT_CONNECTIONS):
    """``(configs, seq)``: cfg writes and ``(conn, ulpdu)`` of sizes 1..MULPDU, interleaved."""
    mp = _mulpdu()
    configs = _configs(rng, connections, mp)
    queues = {c: [] for c in range(connections)}
    for _ in range(ulpdus):
        queues[rng.randrange(connections)].append(rng.randbytes(rng.randint(1, mp)))
    return configs, _interleave(rng, queues)


def _ddp_like(rng, size):
    ctrl = 0xC1 if size < 18 or rng.random() < 0.5 else 0x41   # tagged / untagged, last, DV 1
    return bytes([ctrl]) + rng.randbytes(size - 1)


def make_rx_traffic(rng, *, ulpdus, connections=DEFAULT_CONNECTIONS):
    """``(configs, segments, streams, sent)``.

    ``segments``: ``(conn, octets)`` TCP segments of EMSS octets (a connection's last one
    shorter), interleaved; ``streams[conn]``: the connection's FPDU stream; ``sent[conn]``:
    its ULPDUs in order.
    """
    from rnic.host.model.fpdu import FpduEncoder
    mp = _mulpdu()
    configs = _configs(rng, connections, mp)
    sent = {c: [] for c in range(connections)}
    for _ in range(ulpdus):
        sent[rng.randrange(connections)].append(_ddp_like(rng, rng.randint(14, mp)))
    streams, cuts = {}, {}
    for cfg in configs:
        c = cfg["conn"]
        enc = FpduEncoder(markers=True, crc=True, marker_origin=_origin_of(cfg["phase"]))
        st = b"".join(enc.encode(u) for u in sent[c])
        streams[c] = st
        cuts[c] = [st[k:k + EMSS] for k in range(0, len(st), EMSS)]
    return configs, _interleave(rng, cuts), streams, sent


def _first_diff(a, b):
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return min(len(a), len(b))


@dataclass
class _Row:
    width: int
    unit: str
    ulpdus: int
    cycles: int
    wire_octets: int
    beats_in: int
    beats_out: int
    sim_cycles: int
    sim_wall_s: float
    harness_cpu_s: float
    build_s: float
    cached: bool
    verified: bool
    mismatch: str = ""

    @property
    def efficiency(self):
        return self.wire_octets / (self.cycles * self.width) if self.cycles else 0.0

    @property
    def wire_beats(self):
        return self.beats_out if self.unit == "tx" else self.beats_in

    @property
    def beat_rate(self):
        """Wire-side beats per cycle: 1.0 when the block never leaves a cycle empty."""
        return self.wire_beats / self.cycles if self.cycles else 0.0

    @property
    def cycles_per_s(self):
        return self.sim_cycles / self.sim_wall_s if self.sim_wall_s > 0 else 0.0

    @property
    def cycles_per_cpu_s(self):
        return self.sim_cycles / self.harness_cpu_s if self.harness_cpu_s > 0 else 0.0

    def to_json(self):
        d = {
            "width": self.width, "unit": self.unit, "ulpdus": self.ulpdus,
            "cycles": self.cycles, "wire_octets": self.wire_octets,
            "efficiency": round(self.efficiency, 6), "beat_rate": round(self.beat_rate, 6),
            "beats_in": self.beats_in,
            "beats_out": self.beats_out, "sim_cycles": self.sim_cycles,
            "sim_wall_s": round(self.sim_wall_s, 4),
            "cycles_per_s": round(self.cycles_per_s),
            "harness_cpu_s": round(self.harness_cpu_s, 4),
            "cycles_per_cpu_s": round(self.cycles_per_cpu_s),
            "build_s": round(self.build_s, 2),
            "cached": self.cached, "verified": self.verified,
            "meets_target": (self.verified and self.efficiency >= TARGET_EFFICIENCY
                             and self.cycles_per_cpu_s >= TARGET_CYCLES_PER_S),
        }
        if self.mismatch:
            d["mismatch"] = self.mismatch
        return d


def _engine(kind, width, say):
    from rnic.sim import mpa_engine
    if say:
        say(f"W={width} {kind}: Verilog and Verilator build (cached after the first time)")
    t0 = time.monotonic()
    eng = (mpa_engine.tx_engine if kind == "tx" else mpa_engine.rx_engine)(width)
    return eng, time.monotonic() - t0


def bench_tx(width, configs, seq, *, say=None):
    """Run and check the TX framer; return a result row (``verified`` False on a mismatch)."""
    from rnic.host.model.fpdu import FpduEncoder
    eng, build_s = _engine("tx", width, say)
    if say:
        say(f"W={width} tx: simulating {len(seq)} ULPDUs")
    run = eng.run(configs, seq)
    if say:
        say(f"W={width} tx: {run.result.cycles} cycles at {run.result.cycles_per_s / 1e6:.2f} "
            "M cycles/s; checking against the model")
    mismatch = ""
    per_conn = {}
    for c, u in seq:
        per_conn.setdefault(c, []).append(u)
    for cfg in configs:
        c = cfg["conn"]
        enc = FpduEncoder(markers=bool(cfg["markers"]), crc=bool(cfg["crc"]),
                          marker_origin=_origin_of(cfg["phase"]))
        want = b"".join(enc.encode(u) for u in per_conn.get(c, []))
        got = run.streams.get(c, b"")
        if got != want:
            k = _first_diff(got, want)
            mismatch = (f"TX W={width} connection {c}: {len(got)} octets out, model "
                        f"{len(want)}; first difference at stream offset {k} "
                        f"(got {got[k:k + 8].hex() or '-'}, model {want[k:k + 8].hex() or '-'})")
            break
    extra = set(run.streams) - {cfg["conn"] for cfg in configs}
    if not mismatch and extra:
        mismatch = f"TX W={width}: output on connections {sorted(extra)} that sent nothing"
    return _Row(width=width, unit="tx", ulpdus=len(seq), cycles=run.cycles,
                wire_octets=run.out_octets, beats_in=run.in_beats, beats_out=run.out_beats,
                sim_cycles=run.result.cycles, sim_wall_s=run.result.wall_s,
                harness_cpu_s=run.harness_cpu_s, build_s=build_s,
                cached=not eng.built, verified=not mismatch, mismatch=mismatch)


def bench_rx(width, configs, segments, streams, *, say=None):
    """Run and check the RX deframer; return a result row."""
    from rnic.hdl.mpa_config import CrcStatus, RxError
    from rnic.host.model.fpdu import FpduDecoder, FpduError
    eng, build_s = _engine("rx", width, say)
    if say:
        say(f"W={width} rx: simulating {len(segments)} segments")
    run = eng.run(configs, segments)
    if say:
        say(f"W={width} rx: {run.result.cycles} cycles at {run.result.cycles_per_s / 1e6:.2f} "
            "M cycles/s; checking against the model")
    mismatch = ""
    count = 0
    for cfg in configs:
        c = cfg["conn"]
        dec = FpduDecoder(markers=bool(cfg["markers"]), crc=bool(cfg["crc"]),
                          marker_origin=_origin_of(cfg["phase"]), mulpdu=cfg["mulpdu"])
        want = dec.feed(streams[c])
        tail = dec.close()
        if tail is not None or any(isinstance(w, FpduError) for w in want):
            raise BenchMismatch(f"the model rejects its own stream on connection {c}")
        got = run.units.get(c, [])
        count += len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            if g.kind != "ulpdu" or g.error != RxError.NONE or g.crc != CrcStatus.OK \
                    or g.data != w.ulpdu:
                mismatch = (f"RX W={width} connection {c}, FPDU {k} (offset {w.offset}, "
                            f"ULPDU_Length {w.ulpdu_length}): got {g.kind} of {len(g.data)} "
                            f"octets, crc {CrcStatus(g.crc).name}, error {g.error}"
                            + ("" if g.data == w.ulpdu or len(g.data) != len(w.ulpdu) else
                               f", octets differ from {_first_diff(g.data, w.ulpdu)}"))
                break
        if not mismatch and len(got) != len(want):
            mismatch = (f"RX W={width} connection {c}: {len(got)} ULPDUs out, model "
                        f"{len(want)}")
        if mismatch:
            break
    extra = set(run.units) - {cfg["conn"] for cfg in configs}
    if not mismatch and extra:
        mismatch = f"RX W={width}: output on connections {sorted(extra)} that sent nothing"
    return _Row(width=width, unit="rx", ulpdus=count, cycles=run.cycles,
                wire_octets=run.in_octets, beats_in=run.in_beats, beats_out=run.out_beats,
                sim_cycles=run.result.cycles, sim_wall_s=run.result.wall_s,
                harness_cpu_s=run.harness_cpu_s, build_s=build_s,
                cached=not eng.built, verified=not mismatch, mismatch=mismatch)


def run_bench(widths=WIDTHS, *, ulpdus=DEFAULT_ULPDUS, seed=1, connections=DEFAULT_CONNECTIONS,
              say=None):
    """Benchmark TX and RX at each width; return the JSON-able report (``verified`` inside).

    The same traffic (from ``seed``) is used at every width. Raises
    :class:`rnic.sim.mpa_engine.RtlEngineError` on output that breaks the beat rules.
    """
    rng = random.Random(seed)
    if say:
        say(f"generating traffic: {ulpdus} ULPDUs per direction on {connections} connections")
    tx_cfg, tx_seq = make_tx_traffic(rng, ulpdus=ulpdus, connections=connections)
    rx_cfg, rx_segs, rx_streams, _ = make_rx_traffic(rng, ulpdus=ulpdus,
                                                     connections=connections)
    rows = []
    for w in widths:
        rows.append(bench_tx(w, tx_cfg, tx_seq, say=say))
        rows.append(bench_rx(w, rx_cfg, rx_segs, rx_streams, say=say))
    return {
        "bench": "mpa", "seed": seed, "ulpdus": ulpdus, "connections": connections,
        "emss": EMSS, "mulpdu": _mulpdu(), "markers": True, "crc": True,
        "rx_segments": len(rx_segs),
        "target": {"efficiency": TARGET_EFFICIENCY, "cycles_per_s": TARGET_CYCLES_PER_S},
        "verified": all(r.verified for r in rows),
        "results": [r.to_json() for r in rows],
    }


def _with_mismatches(lines, report):
    """The table ``lines`` and a MISMATCH line per unverified result, as one text."""
    bad = [r for r in report["results"] if not r["verified"]]
    if bad:
        lines.append("")
        lines += [f"MISMATCH: {r['mismatch']}" for r in bad]
    return "\n".join(lines)


def text_report(report):
    """The report as a Markdown table (with a header line and the mismatches, if any)."""
    lines = [
        f"MPA benchmark: {report['ulpdus']} ULPDUs per direction, {report['connections']} "
        f"connections, EMSS {report['emss']} (MULPDU {report['mulpdu']}), markers and CRC on, "
        f"seed {report['seed']}",
        "",
        "| W | unit | cycles | wire octets | efficiency | wire beats/cycle | beats in | beats out "
        "| M cycles/s (wall) | M cycles/CPU-s | build s | verified |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["results"]:
        build = f"{r['build_s']:.1f}" + (" (cached)" if r["cached"] else "")
        lines.append(
            f"| {r['width']} | {r['unit']} | {r['cycles']} | {r['wire_octets']} | "
            f"{r['efficiency']:.5f} | {r['beat_rate']:.5f} | {r['beats_in']} | {r['beats_out']} | "
            f"{r['cycles_per_s'] / 1e6:.2f} | {r['cycles_per_cpu_s'] / 1e6:.2f} | {build} | "
            f"{'yes' if r['verified'] else 'NO'} |")
    return _with_mismatches(lines, report)


# =============================================================================================
# rnic bench ddp: end-to-end goodput of two RNIC data paths back to back
# =============================================================================================

#: Message sizes of ``rnic bench ddp`` and the messages posted per size (64 KiB of 64-octet
#: messages, 256 KiB of 1 KiB ones, 512 KiB of 64 KiB ones: each long against start-up).
DDP_SIZES = (64, 1024, 65536)
DDP_COUNTS = {64: 1024, 1024: 256, 65536: 8}
#: Operations benchmarked, each a line per size.
DDP_OPS = ("write", "send")
#: Clock frequencies the absolute figures are given at (Hz).
DDP_CLOCKS = (125e6, 156.25e6)
_DDP_PHASE = 0          # marker phase of the connection (stream offset 0 = a marker position)
_DDP_STAG = 0x5A5A5A01  # as sim/cocotb_bench_ddp.py
_DDP_BASE = 0x100000
_DDP_SKEW = 0           # tests only: read each message this many octets off (the run must fail)


def ddp_wire_model(op, size, count, *, mulpdu=None, phase=_DDP_PHASE, markers=True, crc=True):
    """Octets of the messages as the RFCs put them on the wire (TCP payload), per phase.

    ``count`` messages of ``size`` payload octets (``op`` "write": RDMA Writes, "send":
    Sends) on a fresh connection (MSNs 1, stream offset 0, marker phase ``phase``), each
    cut by :class:`rnic.host.model.segment.TxStream` into DDP segments of at most ``mulpdu`` octets
    (default: EMSS 1460 with markers, 1442) and framed as by :class:`rnic.host.model.fpdu.FpduEncoder`
    (:func:`rnic.host.model.fpdu.fpdu_layout`: MPA length, pad, CRC, markers). Returns a dict with
    ``payload_octets``, ``ulpdu_octets`` (DDP/RDMAP headers + payload), ``fpdus`` and
    ``wire_octets``; the protocol limit is ``payload_octets / wire_octets``. ``crc`` does
    not change the count (the CRC field is sent, as zeros, when it is off).
    """
    from rnic.host.model.fpdu import fpdu_layout
    from rnic.host.model.segment import TxStream
    if mulpdu is None:
        mulpdu = _mulpdu()
    ts = TxStream(mulpdu=mulpdu)
    origin = (-phase) % 512
    pos = fpdus = ulpdu_octets = 0
    payload = bytes(size)
    for k in range(count):
        addr = _DDP_BASE + k * size
        segs = ts.write(payload, stag=_DDP_STAG, to=addr) if op == "write" else ts.send(payload)
        for u in segs:
            lay = fpdu_layout(len(u), offset=pos, markers=markers, marker_origin=origin)
            pos = lay.end
            fpdus += 1
            ulpdu_octets += len(u)
    return {"payload_octets": size * count, "ulpdu_octets": ulpdu_octets, "fpdus": fpdus,
            "wire_octets": pos}


def _ddp_factory(**p):
    from rnic.hdl.ddp_b2b import DdpBenchTop
    keys = ("width", "connections", "stags", "addr_width", "slots", "slot_bytes", "rq_depth",
            "sq_depth", "rrq_depth", "ord_depth")
    return DdpBenchTop(**{k: v for k, v in p.items() if k in keys})


class _Quiet:
    """Send file descriptors 1 and 2 (the simulator's and cocotb's chatter) to a log file."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        import os
        import sys
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = (os.dup(1), os.dup(2))
        self.f = open(self.path, "wb")
        os.dup2(self.f.fileno(), 1)
        os.dup2(self.f.fileno(), 2)
        return self

    def __exit__(self, *exc):
        import os
        import sys
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        os.close(self.saved[0])
        os.close(self.saved[1])
        self.f.close()
        return False


def _ddp_row(width, ph, model):
    """A result row from the simulator's counters and the model (JSON-able)."""
    cycles = ph["last_w"] - ph["first_w"] + 1 if ph["beats"] else 0
    total_cycles = ph["last_w"] - ph["start"] + 1 if ph["beats"] else 0
    placed = ph["placed"]
    goodput = placed / (cycles * width) if cycles else 0.0
    limit = model["payload_octets"] / model["wire_octets"]
    row = {
        "width": width, "op": ph["op"], "size": ph["size"], "messages": ph["count"],
        "payload_octets": model["payload_octets"], "placed_octets": placed,
        "write_beats": ph["beats"], "cycles": cycles, "cycles_from_post": total_cycles,
        "goodput": round(goodput, 6),
        "goodput_from_post": round(placed / (total_cycles * width), 6) if total_cycles else 0.0,
        "protocol_limit": round(limit, 6),
        "of_limit": round(goodput / limit, 6) if limit else 0.0,
        "wire_octets": ph["wire_octets"], "model_wire_octets": model["wire_octets"],
        "fpdus": model["fpdus"], "tcp_segments": ph["wire_segs"],
        "max_segment_octets": ph["wire_maxseg"], "wire_beats": ph["wire_beats"],
        "wire_beats_per_cycle": round(ph["wire_beats"] / cycles, 6) if cycles else 0.0,
        "wire_stall_cycles": ph["wire_stalls"],
        "ulpdu_octets": model["ulpdu_octets"],
        "octets_per_cycle": round(placed / cycles, 4) if cycles else 0.0,
        "gbps": {f"{f / 1e6:g}MHz": round(placed * 8 * f / cycles / 1e9, 3) if cycles else 0.0
                 for f in DDP_CLOCKS},
        "limit_gbps": {f"{f / 1e6:g}MHz": round(limit * width * 8 * f / 1e9, 3) for f in DDP_CLOCKS},
    }
    problems = list(ph.get("problems", []))
    if ph["wire_octets"] != model["wire_octets"]:
        problems.append(f"{ph['wire_octets']} wire octets out of the framer, the model frames "
                        f"{model['wire_octets']}")
    if placed != model["payload_octets"]:
        problems.append(f"placed {placed} octets of {model['payload_octets']}")
    row["verified"] = not problems
    if problems:
        row["mismatch"] = f"W={width} {ph['op']} {ph['size']}: " + "; ".join(problems)
    return row


def bench_ddp(width, phases, *, models, mulpdu, say=None, timeout_s=900):
    """Simulate ``phases`` (``[{"op", "size", "count"}]``) at width W; return the rows.

    Raises :class:`BenchMismatch` when the run fails (a wrong completion or placement, a
    timeout; the message says which phase and where the simulator's log is).
    """
    import json
    import tempfile
    from pathlib import Path

    from rnic.sim.runner import SimFailure, run
    work = Path(tempfile.mkdtemp(prefix=f"rnic-bench-ddp-w{width}-"))
    out, log = work / "results.json", work / "sim.log"
    params = dict(width=width, connections=1, stags=4, addr_width=24, slots=4, slot_bytes=2048,
                  rq_depth=1024, sq_depth=8, rrq_depth=4, ord_depth=4, phases=phases,
                  mulpdu=mulpdu, phase=_DDP_PHASE, markers=True, crc=True, base=_DDP_BASE,
                  skew=_DDP_SKEW, out=str(out))
    if say:
        say(f"W={width}: Verilog, Verilator build (cached after the first time) and simulation "
            f"of {sum(p['count'] for p in phases)} messages")
    t0 = time.monotonic()
    failure = None
    try:
        with _Quiet(log):
            res = run(_ddp_factory, name=f"bench_ddp_w{width}", params=params,
                      test_module="rnic.sim.cocotb_bench_ddp",
                      seed=1, timeout_s=timeout_s)
    except SimFailure as exc:
        failure = str(exc)
    wall = time.monotonic() - t0
    got = json.loads(out.read_text()) if out.is_file() else []
    if failure is not None:
        bad = [g for g in got if g.get("problems")]
        what = ("; ".join(bad[0]["problems"]) + f" ({bad[0]['op']} {bad[0]['size']})") if bad \
            else failure.splitlines()[0][:500]
        raise BenchMismatch(f"bench ddp W={width}: {what} (simulator log {log})")
    rows = [_ddp_row(width, g, models[(g["op"], g["size"], g["count"])]) for g in got]
    if len(rows) != len(phases):
        raise BenchMismatch(f"bench ddp W={width}: {len(rows)} of {len(phases)} phases reported "
                            f"(simulator log {log})")
    for r in rows:
        r["build_s"] = round(res.build_s, 2)
        r["cached"] = not res.built
        r["sim_s"] = round(res.test_s, 2)
    if say:
        say(f"W={width}: done in {wall:.1f} s (build {res.build_s:.1f} s"
            f"{', cached' if not res.built else ''}, simulation {res.test_s:.1f} s)")
    if all(r["verified"] for r in rows):
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return rows


def run_ddp_bench(widths=(8,), *, ops=DDP_OPS, sizes=DDP_SIZES, messages=None, say=None):
    """``rnic bench ddp``: per width, op and size, goodput beside the protocol limit.

    ``messages``: messages per size (default :data:`DDP_COUNTS`; Sends at most 1024, the
    receive buffers posted ahead). Returns the JSON-able report (``verified`` inside).
    """
    mp = _mulpdu()
    phases = []
    for op in ops:
        for s in sizes:
            n = messages if messages is not None else DDP_COUNTS.get(s, max(1, (256 << 10) // s))
            phases.append({"op": op, "size": s, "count": min(n, 1024) if op == "send" else n})
    models = {}
    for ph in phases:
        key = (ph["op"], ph["size"], ph["count"])
        models[key] = ddp_wire_model(*key, mulpdu=mp)
    rows = []
    for w in widths:
        rows += bench_ddp(w, phases, models=models, mulpdu=mp, say=say)
    return {
        "bench": "ddp", "emss": EMSS, "mulpdu": mp, "markers": True, "crc": True,
        "marker_phase": _DDP_PHASE, "connections": 1,
        "wire": "framer runs straight into the peer's deframer (each run of whole FPDUs one "
                "TCP segment; wire octets = TCP payload)",
        "memory": "never back-pressures (AXI slaves always ready); placement checked in hardware",
        "clocks_hz": list(DDP_CLOCKS),
        "verified": all(r["verified"] for r in rows),
        "results": rows,
    }


def ddp_text_report(report):
    """The ``rnic bench ddp`` report as a Markdown table."""
    lines = [
        f"DDP end-to-end benchmark: node a -> node b, one connection, EMSS {report['emss']} "
        f"(MULPDU {report['mulpdu']}), markers and CRC on; goodput = payload octets placed "
        "per cycle / W (first to last placement write); limit = payload / wire octets",
        "",
        "| W | op | size | messages | goodput/W | protocol limit | of limit | placed octets "
        "| cycles | wire octets | FPDUs | Gb/s @125 MHz | Gb/s @156.25 MHz | verified |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["results"]:
        g = list(r["gbps"].values())
        lines.append(
            f"| {r['width']} | {r['op']} | {r['size']} | {r['messages']} | {r['goodput']:.4f} | "
            f"{r['protocol_limit']:.4f} | {r['of_limit']:.3f} | {r['placed_octets']} | "
            f"{r['cycles']} | {r['wire_octets']} | {r['fpdus']} | {g[0]:.2f} | {g[1]:.2f} | "
            f"{'yes' if r['verified'] else 'NO'} |")
    return _with_mismatches(lines, report)
