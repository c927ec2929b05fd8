"""MPA TX framer (hdl/mpa_tx/) against the golden model rnic.host.model.fpdu.FpduEncoder.

(a) Amaranth's Python simulator at W = 4 and 8: several connections interleaved
    at ULPDU granularity with independent random phases, markers and CRC on/off,
    random ULPDU sizes (1..1442, many 1..40), phases chosen so that markers fall
    at an FPDU boundary and right before a CRC, random input idles and output
    back-pressure; per connection the output octets must equal the model's
    FPDUs byte for byte, and the run framing (first/last/n/conn) is checked.
    Corner cases: one connection with every length around a marker period and
    phases near 0; many tiny ULPDUs (several FPDUs per beat); the closed-form
    lane CRC against the bit-serial model; latency (6 cycles).
(b) Throughput: one connection, markers and CRC on, no idles, no back-pressure:
    wire octets / (cycles * W) >= 0.99.
(c) Elaboration: connections=1024 converts to Verilog, the context is a memory.
(d) The same scoreboard on Verilator through rnic.sim.runner (cocotb module
    cocotb_mpa_tx.py: 16 connections with idles and back-pressure, reconfiguration,
    the longest ULPDUs, throughput), W = 4 and 8 by default, W = 16 and 32 with --wide.

The helpers below (traffic, model, checker) are shared with cocotb_mpa_tx.py.
"""

import bisect
import random

from rnic.host.model.fpdu import FpduEncoder, fpdu_layout


# -- shared helpers (also imported by cocotb_mpa_tx.py) ---------------------------

def origin_of(phase):
    """Marker origin for a connection whose next octet (stream offset 0) has ``phase``."""
    return (-phase) % 512


def pick_phase(rng, length, want):
    """A phase (multiple of 4) that puts a marker where ``want`` says in an FPDU of ``length``
    starting at offset 0: "crc" right before the CRC, "next" right after it (the next FPDU's
    leading marker), "lead" at its first octet, "any" random."""
    phases = list(range(0, 512, 4))
    rng.shuffle(phases)
    if want == "any":
        return phases[0]
    for phase in phases:
        lay = fpdu_layout(length, offset=0, markers=True, marker_origin=origin_of(phase))
        offs = [mo for mo, _ in lay.markers]
        if want == "crc" and lay.crc_offset - 4 in offs:
            return phase
        if want == "next" and (lay.end - origin_of(phase)) % 512 == 0:
            return phase
        if want == "lead" and 0 in offs:
            return phase
    raise AssertionError(f"no phase for {want} with length {length}")


def make_traffic(rng, *, conns, count, max_len=1442, small_prob=0.3, markers=None, crc=None,
                 same_run_prob=0.5):
    """Random configs and an interleaved ULPDU sequence.

    Returns ``(configs, seq)``: ``configs[conn] = dict(markers=, crc=, phase=)`` and ``seq`` a
    list of ``(conn, ulpdu)``. Consecutive ULPDUs stay on one connection with probability
    ``same_run_prob`` (so runs of several FPDUs form). The first ULPDU of every connection has
    a directed phase (marker before the CRC / at the next FPDU boundary / leading / random).
    """
    def length():
        if rng.random() < small_prob:
            return rng.randint(1, 40)
        return rng.randint(1, max_len)

    seq = []
    conn = rng.randrange(len(conns))
    for _ in range(count):
        if rng.random() >= same_run_prob:
            conn = rng.randrange(len(conns))
        n = length()
        seq.append((conns[conn], rng.randbytes(n)))
    configs = {}
    wants = ["crc", "next", "lead", "any"]
    for k, c in enumerate(conns):
        first = next((u for cc, u in seq if cc == c), None)
        mk = bool(rng.getrandbits(1)) if markers is None else markers
        cr = bool(rng.getrandbits(1)) if crc is None else crc
        if first is not None and mk:
            phase = pick_phase(rng, len(first), wants[k % len(wants)])
        else:
            phase = 4 * rng.randrange(128)
        configs[c] = dict(markers=mk, crc=cr, phase=phase)
    return configs, seq


def model(configs, seq):
    """Per connection: (expected octets, FPDU end offsets, FpduLayouts) from rnic.host.model.fpdu."""
    enc = {c: FpduEncoder(markers=cfg["markers"], crc=cfg["crc"], marker_origin=origin_of(cfg["phase"]))
           for c, cfg in configs.items()}
    out = {c: bytearray() for c in configs}
    ends = {c: set() for c in configs}
    lays = {c: [] for c in configs}
    for c, ulpdu in seq:
        lays[c].append(enc[c].layout(len(ulpdu)))
        out[c] += enc[c].encode(ulpdu)
        ends[c].add(len(out[c]))
    return {c: bytes(v) for c, v in out.items()}, ends, lays


def input_beats(width, conn, ulpdu):
    """Input beats (dicts of MpaTxBeat fields) of one ULPDU."""
    beats = []
    count = (len(ulpdu) + width - 1) // width
    for i in range(count):
        chunk = ulpdu[i * width:(i + 1) * width]
        beats.append({"data": int.from_bytes(chunk, "little"), "n": len(chunk),
                      "first": int(i == 0), "last": int(i == count - 1), "conn": conn,
                      "length": len(ulpdu) if i == 0 else 0})
    return beats


def _first_diff(a, b):
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return min(len(a), len(b))


def check_output(width, beats, configs, seq):
    """Check the framer's output beats against the model; return coverage counts.

    Rules: n a multiple of 4 in 4..W; every beat but a run's last is full; ``first`` exactly
    on a run's first beat; one ``conn`` per run; a run ends at an FPDU boundary of its
    connection; per connection the octets equal the model's; nothing missing or extra.
    """
    exp, ends, lays = model(configs, seq)
    got = {c: bytearray() for c in configs}
    starts = {c: [] for c in configs}        # (stream offset, ) of each output beat per conn
    run_conn = None
    runs = 0
    fpdus_per_run = []
    for i, b in enumerate(beats):
        n, c = b["n"], b["conn"]
        assert c in configs, f"beat {i}: unknown conn {c}"
        assert n % 4 == 0 and 4 <= n <= width, f"beat {i}: n={n}"
        if run_conn is None:
            assert b["first"], f"beat {i}: first=0 at the start of a run"
            run_conn = c
            run_start = len(got[c])
        else:
            assert not b["first"], f"beat {i}: first=1 inside a run"
            assert c == run_conn, f"beat {i}: conn {c} inside a run of conn {run_conn}"
        if not b["last"]:
            assert n == width, f"beat {i}: partial beat (n={n}) without last"
        starts[c].append(len(got[c]))
        got[c] += (b["data"] & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
        if b["last"]:
            assert len(got[c]) in ends[c], (
                f"beat {i}: run of conn {c} ends at offset {len(got[c])}, not at an FPDU end")
            runs += 1
            fpdus_per_run.append(sum(1 for e in ends[c] if run_start < e <= len(got[c])))
            run_conn = None
    assert run_conn is None, f"run of conn {run_conn} not closed"
    for c in configs:
        g, e = bytes(got[c]), exp[c]
        if g != e:
            k = _first_diff(g, e)
            raise AssertionError(
                f"conn {c} ({configs[c]}): {len(g)} octets out, {len(e)} expected; first "
                f"difference at offset {k}: got {g[k:k + 16].hex()} want {e[k:k + 16].hex()}")
    # coverage of the interesting marker positions
    cov = {"lead_in_run": 0, "lead_at_run_start": 0, "before_crc": 0, "runs": runs,
           "multi_fpdu_runs": sum(1 for k in fpdus_per_run if k > 1), "lanes": set()}
    for c in configs:
        if not configs[c]["markers"]:
            continue
        for lay in lays[c]:
            for mo, _ in lay.markers:
                k = bisect.bisect_right(starts[c], mo) - 1
                cov["lanes"].add((mo - starts[c][k]) // 4)
                if mo == lay.offset:
                    if mo == starts[c][k] and _is_run_start(beats, c, starts[c], k):
                        cov["lead_at_run_start"] += 1
                    else:
                        cov["lead_in_run"] += 1
                if mo == lay.crc_offset - 4:
                    cov["before_crc"] += 1
    return cov


def _is_run_start(beats, conn, conn_starts, k):
    """Whether the k-th output beat of ``conn`` is the first beat of a run."""
    seen = -1
    for b in beats:
        if b["conn"] == conn:
            seen += 1
            if seen == k:
                return bool(b["first"])
    return False


# -- (a), (b): Amaranth simulator -------------------------------------------------

import pytest  # noqa: E402

from amaranth.back import verilog  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

from rnic.hdl.mpa_config import MpaConfig
from rnic.hdl.mpa_tx import MpaTxBeat, MpaTxFramer


def run_pysim(width, connections, configs, seq, *, seed, idle_prob=0.0, bp_prob=0.0,
              max_cycles=1_000_000, fpdu_runs=False):
    """Run the framer in Amaranth's simulator; return (output beats, stats)."""
    dut = MpaTxFramer(width=width, connections=connections, fpdu_runs=fpdu_runs)
    in_layout = MpaTxBeat(width=width, connections=connections)
    cfg_layout = MpaConfig(connections=connections)
    exp, _, _ = model(configs, seq)
    total = sum(len(v) for v in exp.values())
    out = []
    stats = {}

    async def driver(ctx):
        rng = random.Random(seed)
        configured = set()
        for conn, ulpdu in seq:
            if conn not in configured:       # configure lazily: other traffic is in flight
                configured.add(conn)
                ctx.set(dut.i.valid, 0)
                cfg = configs[conn]
                ctx.set(dut.cfg.payload, cfg_layout.const({
                    "conn": conn, "markers": int(cfg["markers"]), "crc": int(cfg["crc"]),
                    "phase": cfg["phase"], "mulpdu": rng.getrandbits(16)}))
                ctx.set(dut.cfg.valid, 1)
                await ctx.tick().until(dut.cfg.ready)
                ctx.set(dut.cfg.valid, 0)
            for beat in input_beats(width, conn, ulpdu):
                while idle_prob and rng.random() < idle_prob:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                ctx.set(dut.i.payload, in_layout.const(beat))
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)

    async def monitor(ctx):
        rng = random.Random(seed + 1)
        got = cycles = 0
        first_cycle = last_cycle = None
        held = None
        while got < total:
            rdy = not (bp_prob and rng.random() < bp_prob)
            ctx.set(dut.o.ready, rdy)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycles += 1
            assert cycles < max_cycles, f"timeout: {got} of {total} octets after {cycles} cycles"
            p = payload.as_value().value if hasattr(payload, "as_value") else payload
            if held is not None:
                assert valid and p == held, "output changed while stalled"
            held = None
            if valid and rdy:
                beat = {k: getattr(payload, k) for k in ("data", "n", "first", "last", "conn")}
                out.append(beat)
                got += beat["n"]
                if first_cycle is None:
                    first_cycle = cycles
                last_cycle = cycles
            elif valid:
                held = p
        ctx.set(dut.o.ready, 1)
        for _ in range(30):     # nothing more may come: check_output sees any extra beat
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid:
                out.append({k: getattr(payload, k) for k in ("data", "n", "first", "last", "conn")})
        stats.update(cycles=last_cycle - first_cycle + 1, octets=got,
                     beats=len(out), first_cycle=first_cycle)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(driver, background=True)
    sim.add_testbench(monitor)
    sim.run()
    return out, stats


CASES = [
    # (seed, conns, count, idle, bp, markers, crc)
    (1, 1, 40, 0.0, 0.0, True, True),
    (2, 3, 60, 0.2, 0.3, None, None),
    (3, 4, 60, 0.0, 0.5, True, None),
    (4, 2, 60, 0.5, 0.0, True, True),
    (5, 5, 80, 0.1, 0.1, None, None),
]


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"seed{c[0]}")
def test_framer_random(width, case):
    seed, nconn, count, idle, bp, mk, cr = case
    rng = random.Random(seed * 100 + width)
    conns = rng.sample(range(16), nconn)
    configs, seq = make_traffic(rng, conns=conns, count=count, markers=mk, crc=cr)
    beats, stats = run_pysim(width, 16, configs, seq, seed=seed, idle_prob=idle, bp_prob=bp)
    check_output(width, beats, configs, seq)


@pytest.mark.parametrize("width", [4, 8])
def test_framer_marker_corners(width):
    """Markers on everywhere, phases picked so that markers fall right before a CRC, at an
    FPDU boundary inside a run and at the start of a run, and in every lane of a beat."""
    rng = random.Random(31 + width)
    configs, seq = make_traffic(rng, conns=[0, 5, 10, 15, 2, 7, 12, 1], count=90, markers=True,
                                same_run_prob=0.7)
    beats, _ = run_pysim(width, 16, configs, seq, seed=3, idle_prob=0.1, bp_prob=0.2)
    cov = check_output(width, beats, configs, seq)
    assert cov["before_crc"] > 0, cov
    assert cov["lead_in_run"] > 0, cov
    assert cov["lead_at_run_start"] > 0, cov
    assert cov["lanes"] == set(range(width // 4)), cov


@pytest.mark.parametrize("width", [4, 8])
def test_framer_small_ulpdus(width):
    """Many tiny ULPDUs back to back (several FPDUs per beat), two connections, markers on."""
    rng = random.Random(77 + width)
    configs, seq = make_traffic(rng, conns=[3, 9], count=150, max_len=40, small_prob=1.0,
                                markers=True, crc=True, same_run_prob=0.8)
    beats, _ = run_pysim(width, 16, configs, seq, seed=7, idle_prob=0.05, bp_prob=0.2)
    cov = check_output(width, beats, configs, seq)
    assert cov["multi_fpdu_runs"] > 0
    assert cov["lanes"] == set(range(width // 4))


@pytest.mark.parametrize("width", [4, 8, 16])
def test_framer_fpdu_runs(width):
    """With fpdu_runs, the traffic that makes multi-FPDU runs (tiny ULPDUs of two
    connections back to back, markers on) leaves one FPDU per run, every octet as
    without it; at W = 4 in exactly as many beats."""
    rng = random.Random(91 + width)
    configs, seq = make_traffic(rng, conns=[3, 9], count=120, max_len=40, small_prob=1.0,
                                markers=True, crc=True, same_run_prob=0.8)
    beats, _ = run_pysim(width, 16, configs, seq, seed=9, idle_prob=0.05, bp_prob=0.2,
                         fpdu_runs=True)
    cov = check_output(width, beats, configs, seq)
    assert cov["multi_fpdu_runs"] == 0 and cov["runs"] == len(seq), cov
    if width == 4:
        merged, _ = run_pysim(width, 16, configs, seq, seed=9, fpdu_runs=False)
        assert len(beats) == len(merged)


def test_framer_one_connection_and_phases():
    """connections=1, every 4th phase, markers and CRC on; exact length corner cases."""
    rng = random.Random(5)
    lens = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 502, 503, 504, 505, 506, 507, 508, 509, 510,
            1020, 1021, 1022, 1023, 1024]
    seq = [(0, rng.randbytes(n)) for n in lens]
    for phase in (0, 4, 8, 500, 504, 508):
        configs = {0: dict(markers=True, crc=True, phase=phase)}
        beats, _ = run_pysim(8, 1, configs, seq, seed=phase, bp_prob=0.3)
        check_output(8, beats, configs, seq)


def test_latency():
    """A beat accepted on i at a clock edge can leave on o at the 6th edge after it."""
    W = 8
    dut = MpaTxFramer(width=W, connections=4)
    layout = MpaTxBeat(width=W, connections=4)
    seen = []

    async def tb(ctx):
        ctx.set(dut.o.ready, 1)
        await ctx.tick().repeat(3)
        ctx.set(dut.i.payload, layout.const(input_beats(W, 1, bytes(range(20)))[0]))
        ctx.set(dut.i.valid, 1)
        await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)
        for cycle in range(1, 10):
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            if valid:
                seen.append(cycle)
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert seen == [6]


@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_crc_lanes(lanes):
    """crc32c_lanes (closed form and chained) against a bit-serial CRC32c register."""
    from amaranth.hdl import Module, Signal

    from rnic.hdl.crc32c import crc32c_lanes

    def crc32c_word_model(state, word):      # reflected Castagnoli, one 32-bit word
        state ^= word
        for _ in range(32):
            state = (state >> 1) ^ (0x82F63B78 if state & 1 else 0)
        return state

    import crc32c
    assert crc32c_word_model(0xFFFFFFFF, 0x04030201) ^ 0xFFFFFFFF == crc32c.crc32c(b"\x01\x02\x03\x04")
    m = Module()
    state = Signal(32)
    words = [Signal(32, name=f"w{k}") for k in range(lanes)]
    starts = [Signal(name=f"s{k}") for k in range(lanes)]
    outs = {}
    for unroll in (False, True):
        cins, after = crc32c_lanes(m, state, words, starts, unroll=unroll)
        sigs = [Signal(32, name=f"cin{k}_{unroll}") for k in range(lanes)]
        aft = Signal(32, name=f"after_{unroll}")
        m.d.comb += [sg.eq(c) for sg, c in zip(sigs, cins)] + [aft.eq(after)]
        outs[unroll] = (sigs, aft)

    async def tb(ctx):
        rng = random.Random(lanes)
        for _ in range(300):
            st = rng.getrandbits(32)
            ws = [rng.getrandbits(32) for _ in range(lanes)]
            ss = [int(rng.random() < 0.3) for _ in range(lanes)]
            ctx.set(state, st)
            for sig, v in zip(words, ws):
                ctx.set(sig, v)
            for sig, v in zip(starts, ss):
                ctx.set(sig, v)
            x, want_cins = st, []
            for w, restart in zip(ws, ss):
                x = 0xFFFFFFFF if restart else x
                want_cins.append(x)
                x = crc32c_word_model(x, w)
            for unroll, (sigs, aft) in outs.items():
                assert [ctx.get(sg) for sg in sigs] == want_cins, unroll
                assert ctx.get(aft) == x, unroll

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()


def efficiency(width, count=150, seed=11):
    """Wire octets / (cycles * W) for one connection, markers and CRC on, random lengths
    1..1400, input always valid, output always ready (cycles from the first output beat
    to the last)."""
    rng = random.Random(seed)
    seq = [(0, rng.randbytes(rng.randint(1, 1400))) for _ in range(count)]
    configs = {0: dict(markers=True, crc=True, phase=4 * rng.randrange(128))}
    beats, stats = run_pysim(width, 16, configs, seq, seed=seed)
    check_output(width, beats, configs, seq)
    return stats["octets"] / (stats["cycles"] * width), stats


@pytest.mark.parametrize("width", [4, 8])
def test_framer_throughput(width):
    eff, stats = efficiency(width, count=60)
    print(f"W={width}: efficiency {eff:.4f} ({stats})")
    assert eff >= 0.99


# -- (c) elaboration ----------------------------------------------------------------

def test_convert_1024_connections():
    dut = MpaTxFramer(width=8, connections=1024)
    text = verilog.convert(dut, name="mpa_tx_1024", emit_src=False)
    # the context is one memory array (1024 rows of 9 bits), not 1024 sets of flops
    assert "reg [8:0] ctx [1023:0];" in text
    assert "o__payload" in text and "cfg__ready" in text


def test_bad_parameters():
    import gc
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the half-built components are never elaborated
        with pytest.raises(ValueError):
            MpaTxFramer(width=12)
        with pytest.raises(TypeError):
            MpaTxFramer(width=8, connections=0)
        gc.collect()


# -- (d) Verilator ------------------------------------------------------------------

def _verilator(width, seed):
    from rnic.sim.runner import run
    run(MpaTxFramer, name=f"mpa_tx_w{width}", params={"width": width, "connections": 16},
        test_module="cocotb_mpa_tx", seed=seed, timeout_s=600)


@pytest.mark.parametrize("width", [4, 8])
def test_framer_verilator(width):
    _verilator(width, seed=width)


@pytest.mark.wide
@pytest.mark.parametrize("width", [16, 32])
def test_framer_verilator_wide(width):
    _verilator(width, seed=width)
