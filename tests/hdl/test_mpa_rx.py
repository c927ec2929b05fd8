"""MPA RX deframer (hdl/mpa_rx/) against the golden model rnic.host.model.fpdu.FpduDecoder.

(a) Amaranth's Python simulator at W = 4 and 8: random FPDU streams made by
    rnic.host.model.fpdu.FpduEncoder (ULPDUs of 14..1442 octets with a DDP-looking first
    octet, markers and CRC on/off, random marker phases), cut into TCP
    segments at random octet positions, several connections interleaved at
    segment boundaries, random idle cycles and back-pressure; a short stream
    of small FPDUs cut at every octet position; the four corruptions (CRC bit,
    FPDUPTR with a recomputed CRC, ULPDU_Length above MULPDU and below the DDP
    header) and one that must pass (reserved FPDUPTR bits and marker octets
    changed, CRC recomputed), each followed by a cfg reset and clean traffic;
    connections reset in the middle of FPDUs (abort beats); a throughput
    measurement.
(b) Verilator through rnic.sim.runner (cocotb module cocotb_mpa_rx.py): W = 4, 8 by
    default, W = 16, 32 with ``--wide``.
(c) connections=1024 converts to Verilog.

The scenario generator and the scoreboard below are plain Python; the cocotb
module imports them from here.
"""

import os
import random
from dataclasses import dataclass, field

import pytest

from rnic.hdl.mpa_config import CrcStatus, RxError
from rnic.hdl.mpa_rx import RX_ABORTED
from rnic.host.model.crc import crc32c, crc_field
from rnic.host.spec.errors import Layer, MpaError
from rnic.host.model.fpdu import FpduDecoder, FpduEncoder, FpduError, FpduRecord, fpdu_layout

__all__ = ["Scenario", "make_scenario", "split_scenario", "Scoreboard", "expected_units",
           "build_stream"]

# ---------------------------------------------------------------------------
# scenario generation (pure Python)

MAX_MULPDU = 64768


def make_ulpdu(rng, size):
    """A ULPDU whose first octet is a DDP control octet consistent with its length."""
    if size < 18 or rng.random() < 0.5:
        ctrl = 0xC1     # tagged, last, DDP version 1
    else:
        ctrl = 0x41     # untagged, last
    return bytes([ctrl]) + rng.randbytes(size - 1)


def rand_size(rng, lo=14, hi=1442, dist="mixed"):
    """ULPDU size: "mixed" (30 % at most 40 octets, else mostly ~700) or "uniform" (14..1400)."""
    if dist == "uniform":
        return rng.randint(14, 1400)
    r = rng.random()
    if r < 0.3:
        return rng.randint(lo, min(hi, 40))
    if r < 0.4:
        return rng.randint(lo, hi)
    return min(hi, max(lo, int(rng.expovariate(1 / 700))))


@dataclass
class ConnStream:
    """One connection epoch: its configuration and its octet stream."""
    conn: int
    markers: bool
    crc: bool
    offset: int              # stream offset of the first octet (marker origin 0)
    mulpdu: int
    stream: bytes
    corrupt: str = ""

    @property
    def phase(self):
        return self.offset % 512

    def cfg(self):
        return {"conn": self.conn, "markers": int(self.markers), "crc": int(self.crc),
                "phase": self.phase, "mulpdu": self.mulpdu}


def build_stream(rng, *, markers, crc, offset, sizes, corrupt="", mulpdu=MAX_MULPDU):
    """Encode ULPDUs of ``sizes``; apply at most one corruption; return (stream, mulpdu).

    corrupt: "" | "crc" (flip a CRC bit) | "marker" (wrong FPDUPTR, CRC recomputed) |
    "lowbits" (change the reserved FPDUPTR low bits and reserved octets: no error) |
    "long" (ULPDU_Length above MULPDU) | "short" (below the DDP header).
    """
    enc = FpduEncoder(markers=markers, crc=crc, marker_origin=0, offset=offset)
    fpdus = []          # (start in stream, layout, ulpdu)
    out = bytearray()
    for size in sizes:
        ulpdu = make_ulpdu(rng, size)
        lay = enc.layout(size)
        fpdus.append((len(out), lay, ulpdu))
        out += enc.encode(ulpdu)
    if corrupt and fpdus:
        candidates = list(range(len(fpdus)))
        if corrupt in ("marker", "lowbits"):
            candidates = [k for k in candidates if fpdus[k][1].markers]
        if candidates:
            k = rng.choice(candidates)
            start, lay, ulpdu = fpdus[k]
            base = start - lay.offset            # stream index = base + stream offset
            if corrupt == "crc":
                pos = base + lay.crc_offset + rng.randrange(4)
                out[pos] ^= 1 << rng.randrange(8)
            elif corrupt in ("marker", "lowbits"):
                mpos, ptr = rng.choice(lay.markers)
                p = base + mpos
                if corrupt == "marker":
                    new = ptr
                    while (new & ~3) == ptr:
                        new = rng.choice([rng.randrange(0x10000), ptr ^ (4 << rng.randrange(14))])
                else:
                    new = ptr | rng.randrange(1, 4)
                    out[p] = rng.randrange(256)
                    out[p + 1] = rng.randrange(256)
                out[p + 2:p + 4] = (new & 0xFFFF).to_bytes(2, "big")
                if crc:
                    body = bytes(out[base + lay.offset:base + lay.crc_offset])
                    out[base + lay.crc_offset:base + lay.crc_offset + 4] = crc_field(crc32c(body))
            elif corrupt == "long":
                p = base + lay.length_offset
                out[p:p + 2] = rng.randint(mulpdu + 1, 0xFFFF).to_bytes(2, "big")
            elif corrupt == "short":
                p = base + lay.length_offset
                hdr = 14 if out[p + 2] & 0x80 else 18
                out[p:p + 2] = rng.randrange(hdr).to_bytes(2, "big")
            else:
                raise ValueError(corrupt)
    return bytes(out)


def _partial_output_started(cs, cut_at, start, width):
    """Whether the deframer has output a beat of the FPDU at stream index ``start`` that
    the cut at ``cut_at`` leaves incomplete: it holds back the last beat of a ULPDU
    until the CRC, and outputs beat j once it has the FPDU's words up to (j+1)*W/4."""
    k = width // 4
    s_off = cs.offset + start                  # stream offset of the FPDU
    wire_words = (cut_at - start) // 4         # whole words of it received (grid-aligned)
    lay0 = fpdu_layout(0, offset=s_off, markers=cs.markers)
    lp = start + (lay0.length_offset - s_off)  # index of the length field
    if cut_at < lp + 4:
        return False
    n = int.from_bytes(cs.stream[lp:lp + 2], "big")
    lay = fpdu_layout(n, offset=s_off, markers=cs.markers)
    marker_words = sum(1 for m, _ in lay.markers if m + 4 - s_off <= cut_at - start)
    c = wire_words - marker_words              # ULPDU-content words received
    d = -(-(n + 2) // 4)
    return c >= k + 1 and not (c == d and n <= width)


def expected_units(cs, cut_at=None, width=None):
    """Expected output units of one epoch: list of dicts (data or None, crc, error).

    With ``cut_at`` the stream stops there (the connection is then reconfigured): if it
    stops inside an FPDU of which the deframer has output some beats, a final
    ``{"abort": True}`` stands for the abort beat of the next cfg write.
    """
    dec = FpduDecoder(markers=cs.markers, crc=cs.crc, marker_origin=0, offset=cs.offset,
                      mulpdu=cs.mulpdu)
    units = []
    results = dec.feed(cs.stream if cut_at is None else cs.stream[:cut_at])
    if cut_at is not None and not dec.failed and dec.in_fpdu:
        start = sum(r.length for r in results)
        if _partial_output_started(cs, cut_at, start, width):
            results.append("abort")
    for r in results:
        if r == "abort":
            units.append({"abort": True})
            continue
        if isinstance(r, FpduRecord):
            units.append({"data": r.ulpdu,
                          "crc": CrcStatus.OK if r.crc == "ok" else CrcStatus.UNCHECKED,
                          "error": RxError.NONE})
        else:
            assert isinstance(r, FpduError)
            info = r.info
            if info.layer == Layer.LLP and info.ecode == MpaError.CRC:
                units.append({"data": None, "crc": CrcStatus.BAD, "error": RxError.CRC})
            elif info.layer == Layer.LLP and info.ecode == MpaError.MARKER:
                units.append({"data": None,
                              "crc": CrcStatus.OK if cs.crc else CrcStatus.UNCHECKED,
                              "error": RxError.MARKER})
            elif info.layer == Layer.DDP and "exceeds MULPDU" in info.text:
                units.append({"data": b"", "crc": CrcStatus.UNCHECKED, "error": RxError.TOO_LONG})
            elif info.layer == Layer.DDP and "shorter" in info.text:
                units.append({"data": b"", "crc": CrcStatus.UNCHECKED, "error": RxError.TOO_SHORT})
            else:
                raise AssertionError(f"unexpected model error {info}")
    return units


@dataclass
class Scenario:
    """Ordered stimulus: ``items`` of ("cfg", dict) / ("beat", dict); ``expect[conn]`` units."""
    width: int
    items: list = field(default_factory=list)
    expect: dict = field(default_factory=dict)
    octets: int = 0
    beats: int = 0

    def add_cfg(self, cs, *, cut_at=None):
        """Configure ``cs.conn`` and expect ``cs``'s units; the caller sends ``cs.stream``
        (or, with ``cut_at``, only ``cs.stream[:cut_at]``: then the connection must be
        reconfigured before it is used again, which may abort a ULPDU)."""
        self.items.append(("cfg", cs.cfg()))
        units = expected_units(cs, cut_at=cut_at, width=self.width)
        self.expect.setdefault(cs.conn, []).extend(units)

    def add_segment(self, conn, data, rng=None):
        """Beats of one segment: full but the last; with ``rng``, of random sizes."""
        W = self.width
        sizes, left = [], len(data)
        while left:
            n = min(left, W if rng is None else rng.randint(1, W))
            sizes.append(n)
            left -= n
        pos = 0
        for k, n in enumerate(sizes):
            chunk = data[pos:pos + n]
            pos += n
            self.items.append(("beat", {"data": int.from_bytes(chunk, "little"), "n": n,
                                        "first": int(k == 0), "last": int(k == len(sizes) - 1),
                                        "conn": conn}))
        self.octets += len(data)
        self.beats += len(sizes)


def cut_segments(rng, stream, width, *, big=False):
    """Random TCP segment sizes (any octet position)."""
    segs, pos = [], 0
    while pos < len(stream):
        r = rng.random()
        if big:
            n = rng.choice([1460, 1448, 9000, rng.randint(500, 4000)])
        elif r < 0.4:
            n = rng.randint(1, 2 * width + 5)
        elif r < 0.8:
            n = rng.randint(1, 200)
        else:
            n = rng.randint(200, 1600)
        segs.append(stream[pos:pos + n])
        pos += n
    return segs


def interleave(rng, sc, per_conn_segments, *, ragged=False):
    """Append segments of several connections, interleaved at segment boundaries."""
    queues = {c: list(s) for c, s in per_conn_segments.items() if s}
    while queues:
        c = rng.choice(list(queues))
        sc.add_segment(c, queues[c].pop(0), rng if ragged else None)
        if not queues[c]:
            del queues[c]


def random_conn_stream(rng, conn, *, n_fpdus, corrupt="", markers=None, crc=None, sizes=None,
                       offset=None, dist="mixed"):
    markers = rng.random() < 0.6 if markers is None else markers
    crc = rng.random() < 0.7 if crc is None else crc
    if offset is None:
        offset = 4 * rng.randrange(0, 1024)
    if sizes is None:
        sizes = [rand_size(rng, dist=dist) for _ in range(n_fpdus)]
    mulpdu = MAX_MULPDU if rng.random() < 0.5 else max(sizes) + rng.randrange(0, 64)
    if corrupt == "long":
        mulpdu = min(mulpdu, 60000)
    stream = build_stream(rng, markers=markers, crc=crc, offset=offset, sizes=sizes,
                          corrupt=corrupt, mulpdu=mulpdu)
    return ConnStream(conn, markers, crc, offset, mulpdu, stream, corrupt)


def make_scenario(seed, width, *, connections=16, n_conns=4, fpdus_per_conn=8,
                  corrupt_prob=0.0, big_segments=False, markers=None, crc=None, dist="mixed"):
    """Several connections, each a random FPDU stream, segments interleaved."""
    rng = random.Random(seed)
    sc = Scenario(width)
    conns = rng.sample(range(connections), n_conns)
    segs = {}
    for c in conns:
        corrupt = ""
        if rng.random() < corrupt_prob:
            corrupt = rng.choice(["crc", "marker", "lowbits", "long", "short"])
        cs = random_conn_stream(rng, c, n_fpdus=fpdus_per_conn, corrupt=corrupt,
                                markers=markers, crc=crc, dist=dist)
        sc.add_cfg(cs)
        segs[c] = cut_segments(rng, cs.stream, width, big=big_segments)
    interleave(rng, sc, segs)
    return sc


def split_scenario(seed, width, *, connections=16, positions=None,
                   sizes=(14, 15, 17, 18, 19, 21, 30, 16)):
    """A short stream of small FPDUs, cut into 2 segments at every octet position.

    Each cut uses a (re-configured) connection; a second connection's segments
    go between the two halves. Markers on (phase chosen so that markers fall
    at an FPDU start, inside the length word and before a CRC), CRC on/off
    alternating.
    """
    rng = random.Random(seed)
    sc = Scenario(width)
    sizes = list(sizes)
    base = None
    pos_list = None
    for idx in range(10**9):
        markers = idx % 3 != 2
        crcon = idx % 2 == 0
        # offsets chosen so that the 512-octet marker grid cuts the stream at various places
        offset = (512 - 4 * (idx % 40)) % 2048
        cs = random_conn_stream(rng, idx % connections, n_fpdus=0, markers=markers, crc=crcon,
                                sizes=sizes, offset=offset)
        cs.mulpdu = MAX_MULPDU
        if base is None:
            base = len(cs.stream)
            pos_list = list(positions if positions is not None else range(1, base))
        if idx >= len(pos_list):
            break
        p = min(pos_list[idx], len(cs.stream) - 1)
        sc.add_cfg(cs)
        other = (idx + 7) % connections
        oc = random_conn_stream(rng, other, n_fpdus=1, sizes=[rng.randint(14, 60)])
        sc.add_cfg(oc)
        sc.add_segment(cs.conn, cs.stream[:p])
        q = rng.randint(1, len(oc.stream))
        sc.add_segment(other, oc.stream[:q])
        sc.add_segment(cs.conn, cs.stream[p:])
        if q < len(oc.stream):
            sc.add_segment(other, oc.stream[q:])
    return sc


# ---------------------------------------------------------------------------
# scoreboard

class Scoreboard:
    """Checks output beats (dicts of MpaRxBeat fields) against ``expect[conn]``."""

    def __init__(self, width, expect):
        self.width = width
        self.expect = {c: list(u) for c, u in expect.items()}
        self.open = {}           # conn -> bytearray of the unit being received
        self.units = 0
        self.errors = []

    def _fail(self, msg):
        self.errors.append(msg)
        raise AssertionError(msg)

    def beat(self, b):
        W, c = self.width, b["conn"]
        n, first, last = b["n"], b["first"], b["last"]
        if b["error"] == RX_ABORTED:        # abort beat: ends a partly output ULPDU
            if first or not last or n or b["crc"] != CrcStatus.UNCHECKED or c not in self.open:
                self._fail(f"conn {c}: bad abort beat {b} (open: {c in self.open})")
            del self.open[c]
            exp = self.expect.get(c, [])
            if not exp or not exp[0].get("abort"):
                self._fail(f"conn {c}: abort beat, expected {exp[:1]}")
            exp.pop(0)
            return
        if bool(first) == (c in self.open):
            self._fail(f"conn {c}: first={first} but a unit is {'open' if c in self.open else 'not open'}")
        if not last and (n != W or b["crc"] or b["error"]):
            self._fail(f"conn {c}: non-last beat with n={n} crc={b['crc']} error={b['error']}")
        if not 0 <= n <= W or (n == 0 and not (first and last)):
            self._fail(f"conn {c}: bad n={n}")
        buf = self.open.setdefault(c, bytearray())
        buf += (b["data"] & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
        if not last:
            return
        del self.open[c]
        exp = self.expect.get(c, [])
        if not exp:
            self._fail(f"conn {c}: unexpected unit of {len(buf)} octets "
                       f"crc={b['crc']} error={b['error']}")
        e = exp.pop(0)
        if e.get("abort"):
            self._fail(f"conn {c}: expected an abort beat, got a unit of {len(buf)} octets")
        got = (int(b["crc"]), int(b["error"]))
        want = (int(e["crc"]), int(e["error"]))
        if got != want:
            self._fail(f"conn {c} unit {self.units}: (crc, error) {got} != expected {want} "
                       f"({len(buf)} octets)")
        if n == 0 and e["error"] not in (RxError.TOO_LONG, RxError.TOO_SHORT):
            self._fail(f"conn {c}: status beat (n=0) for {e}")
        if e["data"] is not None and bytes(buf) != e["data"]:
            d = e["data"]
            at = next((k for k in range(min(len(d), len(buf))) if d[k] != buf[k]),
                      min(len(d), len(buf)))
            self._fail(f"conn {c} unit {self.units}: data mismatch: got {len(buf)} octets, "
                       f"expected {len(d)}, first difference at {at}")
        self.units += 1

    def pending(self):
        return sum(len(u) for u in self.expect.values())

    def check_done(self):
        left = {c: len(u) for c, u in self.expect.items() if u}
        if left:
            raise AssertionError(f"missing units per conn: {left}")
        if self.open:
            raise AssertionError(f"unfinished units on conns {sorted(self.open)}")


# ---------------------------------------------------------------------------
# (a) Amaranth simulator

def run_amaranth(sc, *, width, connections=16, idle=0.0, backpressure=0.0, seed=0,
                 max_cycles=None):
    """Drive ``sc`` through MpaRxDeframer in amaranth.sim; return stats dict."""
    from amaranth.sim import Simulator

    from rnic.hdl.mpa_rx import MpaRxBeat, MpaRxDeframer
    from rnic.hdl.beat import OctetBeat
    from rnic.hdl.mpa_config import MpaConfig
    from rnic.sim.streams import codec

    dut = MpaRxDeframer(width=width, connections=connections)
    in_codec = codec(OctetBeat(width=width, connections=connections))
    cfg_codec = codec(MpaConfig(connections=connections))
    out_codec = codec(MpaRxBeat(width=width, connections=connections))
    sb = Scoreboard(width, sc.expect)
    rng = random.Random(seed)
    stats = {"cycles": 0, "in_stall": 0, "first_cycle": None, "last_cycle": 0, "beats": 0}
    state = {"done": False}
    if max_cycles is None:
        max_cycles = 20 * (sc.beats + len(sc.items)) + 2000

    async def driver(ctx):
        cyc = 0
        for kind, val in sc.items:
            while idle and rng.random() < idle:
                await ctx.tick()
                cyc += 1
            port = dut.cfg if kind == "cfg" else dut.i
            packed = (cfg_codec if kind == "cfg" else in_codec).pack(val)
            ctx.set(port.payload.as_value(), packed)
            ctx.set(port.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(port.ready)
                cyc += 1
                if ready:
                    break
                if kind == "beat":
                    stats["in_stall"] += 1
                if cyc > max_cycles:
                    raise AssertionError(f"input stuck (item {kind} {val})")
            ctx.set(port.valid, 0)
            if kind == "beat":
                stats["beats"] += 1
                if stats["first_cycle"] is None:
                    stats["first_cycle"] = cyc
                stats["last_cycle"] = cyc
        # drain
        quiet = 0
        while quiet < 40:
            await ctx.tick()
            cyc += 1
            quiet = quiet + 1 if sb.pending() == 0 else 0
            if cyc > max_cycles:
                break
        stats["cycles"] = cyc
        state["done"] = True

    async def sink(ctx):
        while True:
            rdy = not (backpressure and rng.random() < backpressure)
            ctx.set(dut.o.ready, rdy)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload.as_value())
            if valid and rdy:
                sb.beat(out_codec.unpack(payload))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.add_testbench(sink, background=True)
    sim.run()
    sb.check_done()
    return stats


WIDTHS_FAST = [4, 8]
CORRUPTIONS = ["crc", "marker", "lowbits", "long", "short"]


@pytest.mark.parametrize("width", WIDTHS_FAST)
@pytest.mark.parametrize("seed", [1, 2])
def test_random_clean(width, seed):
    sc = make_scenario(100 * seed + width, width, n_conns=4, fpdus_per_conn=6)
    run_amaranth(sc, width=width, idle=0.2, backpressure=0.3, seed=seed)


@pytest.mark.parametrize("width", WIDTHS_FAST)
def test_random_no_stalls(width):
    sc = make_scenario(7 + width, width, n_conns=3, fpdus_per_conn=6)
    run_amaranth(sc, width=width)


def test_ragged_beats():
    """Inner beats of a segment shorter than W (not expected, but handled)."""
    rng = random.Random(77)
    sc = Scenario(8)
    segs = {}
    for c in (1, 5, 9):
        cs = random_conn_stream(rng, c, n_fpdus=4)
        sc.add_cfg(cs)
        segs[c] = cut_segments(rng, cs.stream, 8)
    interleave(rng, sc, segs, ragged=True)
    run_amaranth(sc, width=8, idle=0.1, backpressure=0.2, seed=7)


@pytest.mark.parametrize("width", WIDTHS_FAST)
@pytest.mark.parametrize("corrupt", CORRUPTIONS)
def test_corruptions(width, corrupt):
    rng = random.Random(width * 100 + CORRUPTIONS.index(corrupt))
    sc = Scenario(width)
    segs = {}
    for c in range(4):
        cs = random_conn_stream(rng, c, n_fpdus=5, corrupt=corrupt,
                                markers=True if corrupt in ("marker", "lowbits") else None,
                                crc=True if corrupt == "crc" else None)
        sc.add_cfg(cs)
        segs[c] = cut_segments(rng, cs.stream, width)
    interleave(rng, sc, segs)
    # then reset every connection and send a clean stream: it must come through
    segs = {}
    for c in range(4):
        cs = random_conn_stream(rng, c, n_fpdus=3)
        sc.add_cfg(cs)
        segs[c] = cut_segments(rng, cs.stream, width)
    interleave(rng, sc, segs)
    errs = [u["error"] for units in sc.expect.values() for u in units]
    if corrupt != "lowbits":
        assert any(e != RxError.NONE for e in errs)
    run_amaranth(sc, width=width, idle=0.1, backpressure=0.2, seed=3)


def reset_scenario(seed, width, *, rounds=6, n_conns=4):
    """Connections reset (cfg rewritten) in the middle of their streams, then reused."""
    rng = random.Random(seed)
    sc = Scenario(width)
    conns = rng.sample(range(16), n_conns)
    for _ in range(rounds):
        segs = {}
        for c in conns:
            cs = random_conn_stream(rng, c, n_fpdus=3)
            cut = rng.randrange(1, len(cs.stream) + 1)
            sc.add_cfg(cs, cut_at=cut)
            segs[c] = cut_segments(rng, cs.stream[:cut], width)
        interleave(rng, sc, segs)
    for c in conns:     # a clean stream after the last reset
        cs = random_conn_stream(rng, c, n_fpdus=2)
        sc.add_cfg(cs)
        interleave(rng, sc, {c: cut_segments(rng, cs.stream, width)})
    return sc


@pytest.mark.parametrize("width", WIDTHS_FAST)
def test_reset_midstream(width):
    sc = reset_scenario(width + 40, width)
    assert any(u.get("abort") for us in sc.expect.values() for u in us)
    run_amaranth(sc, width=width, idle=0.1, backpressure=0.3, seed=5)


@pytest.mark.parametrize("width", WIDTHS_FAST)
def test_split_every_position(width):
    # every octet position of 4 small FPDUs (the cocotb test does a longer stream)
    sc = split_scenario(width, width, sizes=(14, 17, 19, 30))
    run_amaranth(sc, width=width, idle=0.05, backpressure=0.1, seed=width)


@pytest.mark.parametrize("width", WIDTHS_FAST)
def test_efficiency(width):
    """Long traffic (ULPDUs of 14..1400 octets, TCP segments of 500..9000), markers and
    CRC on, no idle, no back-pressure: >= 0.99 input beats per cycle, counted from the
    first to the last input beat."""
    sc = make_scenario(55, width, n_conns=2, fpdus_per_conn=12, big_segments=True,
                       markers=True, crc=True, dist="uniform")
    st = run_amaranth(sc, width=width)
    span = st["last_cycle"] - st["first_cycle"] + 1
    eff = st["beats"] / span
    oct_eff = sc.octets / (span * width)
    print(f"W={width}: {st['beats']} beats in {span} cycles: {eff:.4f} beats/cycle, "
          f"{oct_eff:.4f} of W octets/cycle")
    assert eff >= 0.99


# ---------------------------------------------------------------------------
# (b) Verilator

def _run_verilator(width):
    """cocotb_mpa_rx.py on Verilator; seed from $MPA_RX_SEED (default fixed per width)."""
    from rnic.sim.runner import run
    from rnic.hdl.mpa_rx import MpaRxDeframer
    seed = int(os.environ.get("MPA_RX_SEED", 1000 + width))
    run(MpaRxDeframer, name=f"mpa_rx_w{width}", params={"width": width, "connections": 16},
        test_module="cocotb_mpa_rx", seed=seed)


@pytest.mark.parametrize("width", [4, 8])
def test_verilator(width):
    _run_verilator(width)


@pytest.mark.wide
@pytest.mark.parametrize("width", [16, 32])
def test_verilator_wide(width):
    _run_verilator(width)


# ---------------------------------------------------------------------------
# (c) 1024 connections

def test_elaborate_1024():
    from amaranth.back import verilog
    from rnic.hdl.mpa_rx import MpaRxDeframer
    text = verilog.convert(MpaRxDeframer(width=8, connections=1024), name="top", emit_src=False)
    assert "module top" in text
    assert "[1023:0]" in text or "1024" in text


def test_crc_word_model():
    """The deframer's CRC matrices against the crc32c package (through rnic.host.model.crc)."""
    from rnic.hdl.crc32c import CRC32C_INIT, crc32c_power_masks
    from rnic.hdl.mpa_rx import crc32c_word_model
    rng = random.Random(9)
    for _ in range(50):
        data = rng.randbytes(4 * rng.randint(0, 30))
        st = CRC32C_INIT
        for k in range(0, len(data), 4):
            st = crc32c_word_model(st, int.from_bytes(data[k:k + 4], "little"))
        assert st ^ 0xFFFFFFFF == crc32c(data)
    for c in range(9):
        s0 = rng.getrandbits(32)
        v = s0
        for _ in range(c):
            v = crc32c_word_model(v, 0)
        assert sum((bin(s0 & mk).count("1") & 1) << i for i, mk in enumerate(crc32c_power_masks(c))) == v


def test_bad_params():
    import gc
    import warnings
    from rnic.hdl.mpa_rx import MpaRxDeframer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the half-built objects are never elaborated
        for kwargs, exc in [({"width": 12}, ValueError),
                            ({"width": 8, "connections": 0}, TypeError)]:
            try:
                MpaRxDeframer(**kwargs)
            except exc:
                pass
            else:
                raise AssertionError(f"{kwargs} accepted")
        gc.collect()
