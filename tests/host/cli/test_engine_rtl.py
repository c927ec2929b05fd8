"""``rnic decode/encode --engine rtl`` and ``rnic bench mpa``, as a user runs them.

The RTL engine must print exactly what the model prints: same JSON lines (offsets,
lengths, markers, CRC strings, DDP/RDMAP fields, payload), same error line (layer,
etype, ecode and text) and exit status; ``encode`` must write the same octets.
Most runs are in-process (``rnic.host.cli.main``), so that each Verilated engine is
converted and loaded once per width for the whole module; one test runs the
installed ``rnic`` script. The benchmark test checks the report's schema and its
``verified`` flag, not timings.
"""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from rnic.host.cli import ENGINES
from rnic.host.cli.progress import PLAIN_LINE
from rnic.host.model.crc import crc32c, crc_field
from rnic.host.model.dissect import ulpdu_to_json
from rnic.host.model.fpdu import FpduEncoder
from tests.host.cli.in_process import run_rnic

WIDTHS = [4, 8]


def rnic(*args, stdin=b""):
    """Run ``rnic ARGS`` in this process: (exit status, stdout bytes, stderr text without the
    progress lines of a simulation build, which only a fresh cache prints)."""
    code, out, err = run_rnic(*args, stdin=stdin)
    text = "".join(line for line in err.decode().splitlines(keepends=True)
                   if not PLAIN_LINE.match(line.rstrip("\n")))
    return code, out, text


def ulpdu(rng, i, size):
    """A Send (untagged, QN 0, MSN i) or an RDMA Write (tagged) of ``size`` payload octets."""
    payload = rng.randbytes(size)
    if rng.random() < 0.5:
        header = bytes([0x41, 0x43]) + bytes(4) + (0).to_bytes(4, "big") + \
            i.to_bytes(4, "big") + bytes(4)
    else:
        header = bytes([0xC1, 0x40]) + (0x1000 + i).to_bytes(4, "big") + \
            rng.getrandbits(64).to_bytes(8, "big")
    return header + payload


def stream_of(rng, count, *, markers, crc, origin):
    enc = FpduEncoder(markers=markers, crc=crc, marker_origin=origin)
    lays, parts = [], []
    for i in range(1, count + 1):
        u = ulpdu(rng, i, rng.choice([0, rng.randint(0, 40), rng.randint(0, 1500)]))
        lays.append(enc.layout(len(u)))
        parts.append(enc.encode(u))
    return bytearray(b"".join(parts)), lays


def options(markers, crc, origin):
    opts = ["--marker-origin", str(origin)]
    if markers:
        opts.append("--markers")
    if not crc:
        opts.append("--no-crc")
    return opts


def same_decode(tmp_path, data, opts, width):
    path = tmp_path / "in.bin"
    path.write_bytes(bytes(data))
    want = rnic("decode", path, *opts, "--engine", "model")
    got = rnic("decode", path, *opts, "--engine", "rtl", "--width", width)
    assert got[2] == want[2]
    assert got[0] == want[0], (got, want)
    wl, gl = want[1].decode().splitlines(), got[1].decode().splitlines()
    for k, (w, g) in enumerate(zip(wl, gl)):
        assert g == w, f"line {k + 1}:\n model: {w[:400]}\n rtl:   {g[:400]}"
    assert len(gl) == len(wl)
    return want


@pytest.fixture(scope="module", params=WIDTHS)
def width(request):
    return request.param


def test_rtl_is_an_engine():
    assert ENGINES == ("model", "rtl")
    code, out, _ = rnic("decode", "--help")
    assert code == 0 and b"rtl" in out and b"--width" in out


def test_width_needs_the_rtl_engine(tmp_path):
    (tmp_path / "e.bin").write_bytes(b"")
    code, out, err = rnic("decode", tmp_path / "e.bin", "--width", "4")
    assert code == 2 and out == b""
    assert err == "rnic decode: error: --width applies to --engine rtl only, not --engine model\n"
    code, _, err = rnic("encode", tmp_path / "e.bin", "--engine", "model", "--width", "8")
    assert code == 2 and "--width applies to --engine rtl only" in err
    code, _, err = rnic("decode", tmp_path / "e.bin", "--engine", "rtl", "--width", "5")
    assert code == 2 and "'5' is not one of" in err


def test_decode_clean_streams(tmp_path, width):
    rng = random.Random(width)
    for case in range(4):
        markers, crc = bool(case & 1), bool(case & 2)
        origin = rng.randrange(0, 2048, 4)
        data, _ = stream_of(rng, rng.randint(1, 15), markers=markers, crc=crc, origin=origin)
        code, out, _ = same_decode(tmp_path, data, options(markers, crc, origin), width)
        assert code == 0 and out.count(b"\n") >= 1


@pytest.mark.parametrize("kind", ["crc", "fpduptr", "too_long", "too_short", "truncated",
                                  "strict"])
def test_decode_errors(tmp_path, width, kind):
    rng = random.Random(f"{kind}{width}")
    markers, crc = True, True
    origin = rng.randrange(0, 512, 4)
    data, lays = stream_of(rng, 8, markers=markers, crc=crc, origin=origin)
    lay = lays[rng.randrange(1, len(lays))]
    opts = options(markers, crc, origin)
    if kind == "crc":
        data[lay.crc_offset] ^= 0x01
    elif kind == "fpduptr":
        lay = next(x for x in lays if x.markers)
        m, ptr = lay.markers[-1]
        data[m + 2:m + 4] = (ptr + 8).to_bytes(2, "big")
        data[lay.crc_offset:lay.crc_offset + 4] = crc_field(
            crc32c(bytes(data[lay.offset:lay.crc_offset])))
    elif kind == "too_long":
        opts += ["--mulpdu", "200"]
    elif kind == "too_short":
        data[lay.length_offset:lay.length_offset + 2] = (9).to_bytes(2, "big")
    elif kind == "truncated":
        data = data[:lay.length_offset + 3]
    elif kind == "strict":
        data = bytearray(FpduEncoder(markers=markers, crc=crc, marker_origin=origin).encode(
            bytes([0x41, 0x4C]) + bytes(16)))          # opcode 12: not an RDMAP opcode
        opts.append("--strict")
    code, out, _ = same_decode(tmp_path, data, opts, width)
    assert code == 3
    last = json.loads(out.decode().splitlines()[-1])
    assert set(last) == {"offset", "error"} and last["error"]["text"]


def test_decode_strict_through_the_receive_path(tmp_path, width):
    """--strict --engine rtl: the header verdicts of the Verilated DDP/RDMAP receive path, with
    the model's lines (clean messages of every kind pass; each header error stops the decode
    with the model's error line)."""
    from rnic.host.model.rdmap import Opcode
    from rnic.host.model.segment import ulpdu as mk
    rng = random.Random(f"strict{width}")
    good = [mk(Opcode.SEND, rng.randbytes(30)), mk(Opcode.RDMA_WRITE, rng.randbytes(100), stag=7, to=9),
            mk(Opcode.RDMA_READ_REQUEST, bytes(28), qn=1), mk(Opcode.SEND_SE_INVALIDATE, b"", inval_stag=3),
            mk(Opcode.RDMA_READ_RESPONSE, b"", stag=1), mk(Opcode.TERMINATE, bytes(4), qn=2)]
    enc = FpduEncoder(markers=True, crc=True, marker_origin=0)
    clean = b"".join(enc.encode(u) for u in good)
    code, out, _ = same_decode(tmp_path, clean, ["--markers", "--strict"], width)
    assert code == 0 and out.count(b"\n") == len(good)
    send = mk(Opcode.SEND, b"hello")
    bads = [bytes([0x42]) + send[1:],                        # DDP version 2 (untagged)
            bytes([0xC0]) + good[1][1:],                     # DDP version 0 (tagged)
            send[:1] + bytes([0x83]) + send[2:],             # RDMAP version 2
            send[:1] + bytes([0x40]) + send[2:],             # RDMA Write on an untagged segment
            mk(Opcode.SEND, b"x", qn=5),                     # queue number 5
            mk(Opcode.SEND, b"x", qn=1)]                     # Send on queue 1
    for bad in bads:
        enc = FpduEncoder(markers=True, crc=True, marker_origin=0)
        data = enc.encode(good[0]) + enc.encode(bad) + enc.encode(good[1])
        code, out, _ = same_decode(tmp_path, data, ["--markers", "--strict"], width)
        assert code == 3
        last = json.loads(out.decode().splitlines()[-1])
        assert set(last) == {"offset", "error"} and last["error"]["text"]


def test_decode_stdin_and_empty(width):
    data, _ = stream_of(random.Random(3), 3, markers=False, crc=True, origin=0)
    want = rnic("decode", stdin=bytes(data))
    assert rnic("decode", "--engine", "rtl", "--width", width, stdin=bytes(data)) == want
    assert rnic("decode", "--engine", "rtl", "--width", width, stdin=b"") == (0, b"", "")


def test_encode_same_octets(tmp_path, width):
    rng = random.Random(10 + width)
    lines = [json.dumps(ulpdu_to_json(ulpdu(rng, i, rng.randint(0, 2000))))
             for i in range(1, 25)]
    src = tmp_path / "msgs.jsonl"
    src.write_text("\n".join(lines) + "\n")
    for markers, crc in ((False, True), (True, True), (True, False)):
        origin = rng.randrange(0, 512, 4)
        opts = options(markers, crc, origin)
        want = rnic("encode", src, *opts, "-o", tmp_path / "m.bin")
        got = rnic("encode", src, *opts, "--engine", "rtl", "--width", width,
                   "-o", tmp_path / "r.bin")
        assert want == got == (0, b"", "")
        assert (tmp_path / "r.bin").read_bytes() == (tmp_path / "m.bin").read_bytes()
    # to standard output, and a round trip through decode
    want = rnic("encode", src, "--markers")
    got = rnic("encode", src, "--markers", "--engine", "rtl", "--width", width)
    assert got == want
    assert rnic("decode", "--markers", "--engine", "rtl", "--width", width, stdin=got[1]) \
        == rnic("decode", "--markers", stdin=want[1])


def test_encode_bad_line_after_good_ones(tmp_path, width):
    rng = random.Random(5)
    good = [json.dumps(ulpdu_to_json(ulpdu(rng, i, 30))) for i in range(1, 4)]
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(good + ['{"ddp": {"t": 0}}', good[0]]) + "\n")
    want = rnic("encode", src)
    got = rnic("encode", src, "--engine", "rtl", "--width", width)
    assert want[0] == 2 and got == want      # the FPDUs before the bad line, then the error
    assert len(want[1]) > 0 and "line 4" in want[2]


def test_installed_script(tmp_path, progress_only):
    """The console script end to end (a fresh process: converts the design, cached build)."""
    data, _ = stream_of(random.Random(8), 4, markers=True, crc=True, origin=12)
    path = tmp_path / "s.bin"
    path.write_bytes(bytes(data[:-3]))                 # truncated: exit 3 and an error line
    exe = Path(sys.executable).with_name("rnic")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "rnic.host.cli"]
    env = dict(os.environ)
    runs = [subprocess.run(cmd + ["decode", str(path), "--markers", "--marker-origin", "12",
                                  *extra], capture_output=True, timeout=600, env=env)
            for extra in ([], ["--engine", "rtl", "--width", "4"])]
    assert runs[0].returncode == runs[1].returncode == 3
    assert runs[1].stdout == runs[0].stdout
    progress_only(runs[1].stderr)                      # piped: progress lines of a build only


def test_bench_mpa_json(progress_only):
    code, out, err = rnic("bench", "mpa", "--width", "4", "--ulpdus", "50", "--json")
    assert code == 0, err
    progress_only(err)                                 # not a terminal: quiet but for a build
    report = json.loads(out)
    assert report["bench"] == "mpa" and report["verified"] is True
    assert report["ulpdus"] == 50 and report["emss"] == 1460 and report["mulpdu"] == 1442
    assert report["markers"] is True and report["crc"] is True
    assert report["target"] == {"efficiency": 0.99, "cycles_per_s": 1_000_000}
    rows = report["results"]
    assert [(r["width"], r["unit"]) for r in rows] == [(4, "tx"), (4, "rx")]
    keys = {"width", "unit", "ulpdus", "cycles", "wire_octets", "efficiency", "beat_rate",
            "beats_in",
            "beats_out", "sim_cycles", "sim_wall_s", "cycles_per_s", "harness_cpu_s",
            "cycles_per_cpu_s", "build_s", "cached",
            "verified", "meets_target"}
    for r in rows:
        assert set(r) == keys
        assert r["verified"] is True
        assert r["cycles"] > 0 and r["wire_octets"] > 0 and r["beats_in"] > 0
        assert 0 < r["efficiency"] <= 1
        assert r["efficiency"] == pytest.approx(r["wire_octets"] / (r["cycles"] * 4), abs=1e-6)
        assert r["sim_cycles"] >= r["cycles"]
        wire_beats = r["beats_out"] if r["unit"] == "tx" else r["beats_in"]
        assert r["beat_rate"] == pytest.approx(wire_beats / r["cycles"], abs=1e-6)
    tx, rx = rows
    assert tx["ulpdus"] == 50 and rx["ulpdus"] == 50
    assert tx["beats_out"] * 4 >= tx["wire_octets"] and rx["beats_in"] * 4 >= rx["wire_octets"]


def test_bench_mpa_text_and_widths():
    code, out, err = rnic("bench", "mpa", "--width", "4", "--width", "4", "--ulpdus", "5",
                          "--seed", "3")
    assert code == 0, err
    text = out.decode()
    assert "| 4 | tx |" in text and "| 4 | rx |" in text and "NO" not in text
    code, _, err = rnic("bench", "mpa", "--width", "12")
    assert code == 2 and "'12' is not one of" in err


def test_bench_mpa_fails_on_a_mismatch(monkeypatch):
    """A wrong octet out of the framer must fail the benchmark (exit 1), not be timed."""
    from rnic.sim import mpa_engine
    real_run = mpa_engine.TxEngine.run

    def corrupted(self, *args, **kwargs):
        run = real_run(self, *args, **kwargs)
        conn = min(run.streams)
        s = bytearray(run.streams[conn])
        s[len(s) // 2] ^= 0x40
        run.streams[conn] = bytes(s)
        return run
    monkeypatch.setattr(mpa_engine.TxEngine, "run", corrupted)
    code, out, err = rnic("bench", "mpa", "--width", "4", "--ulpdus", "20", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["verified"] is False
    tx, rx = report["results"]
    assert tx["verified"] is False and "first difference" in tx["mismatch"]
    assert rx["verified"] is True
    assert "rnic bench mpa: error: TX W=4 connection" in err
