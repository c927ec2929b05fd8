"""The ``rnic`` command line as a user runs it: exit codes, JSON lines, spec vectors."""

import json
import subprocess
import sys

import pytest

from rnic.host.model.crc import crc32c, crc_field

# Figure 5 of the MPA draft (spec 002): the first FPDU of a stream, leading marker.
FIG5 = bytes.fromhex(
    "00000000" "002a" "4003" "00000000" "00000000" "00000001" "00000000") + bytes(24) \
    + bytes.fromhex("4C86B384")
# Figure 6: an FPDU at offset 0x1ec whose ULPDU holds the marker at 0x200 (FPDUPTR 0x14).
FIG6 = bytes.fromhex("002a" "4003" "00000000" "00000000" "00000002" "00000000"
                     "00000014") + bytes(24) + bytes.fromhex("A19CD103")


def _first_fpdu_of_fig6():
    """The 492-octet Send FPDU that precedes Figure 6 (leading marker, MSN 1)."""
    ulpdu = bytes.fromhex("4003" "00000000" "00000000" "00000001" "00000000") + bytes(482 - 18)
    body = bytes(4) + len(ulpdu).to_bytes(2, "big") + ulpdu
    assert len(body) % 4 == 0
    return body + crc_field(crc32c(body))


def rnic(*args, stdin=b""):
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", *args], input=stdin,
                          capture_output=True, timeout=60)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def lines(out):
    return [json.loads(line) for line in out.splitlines()]


def test_decode_figure5_reproduces_crc_and_fields(tmp_path):
    path = tmp_path / "fig5.bin"
    path.write_bytes(FIG5)
    code, out, err = rnic("decode", str(path), "--markers")
    assert code == 0, err
    (rec,) = lines(out)
    assert rec["offset"] == 0 and rec["length"] == 52 and rec["ulpdu_length"] == 42
    assert rec["crc"] == "ok"
    assert rec["markers"] == [{"offset": 0, "fpduptr": 0}]
    assert rec["ddp"] == {"t": 0, "l": 1, "dv": 0, "qn": 0, "msn": 1, "mo": 0}
    assert rec["rdmap"]["opcode"] == 3 and rec["rdmap"]["name"] == "send"
    assert rec["payload"] == "00" * 24


def test_decode_figure6_reproduces_crc_and_fields():
    stream = _first_fpdu_of_fig6() + FIG6
    assert len(stream) == 0x1ec + 52
    code, out, err = rnic("decode", "--markers", stdin=stream)
    assert code == 0, err
    first, fig6 = lines(out)
    assert first["length"] == 492 and first["ddp"]["msn"] == 1
    assert fig6["offset"] == 0x1ec and fig6["length"] == 52 and fig6["crc"] == "ok"
    assert fig6["markers"] == [{"offset": 0x200, "fpduptr": 0x14}]
    assert fig6["ddp"]["msn"] == 2 and fig6["ddp"]["mo"] == 0
    assert fig6["payload"] == "00" * 24


def test_decode_crc_error_stops_with_status_3():
    bad = bytearray(FIG5)
    bad[30] ^= 0x04
    code, out, _ = rnic("decode", "--markers", stdin=bytes(bad) + FIG5)
    assert code == 3
    (rec,) = lines(out)
    assert rec["offset"] == 0
    assert rec["error"]["layer"] == 2 and rec["error"]["etype"] == 0 and rec["error"]["ecode"] == 2


def test_decode_without_crc_ignores_the_field():
    bad = bytearray(FIG5)
    bad[-1] ^= 0xFF
    code, out, _ = rnic("decode", "--markers", "--no-crc", stdin=bytes(bad))
    assert code == 0 and lines(out)[0]["crc"] == "unchecked"


def test_decode_strict_rejects_old_revision_ddp():
    code, out, _ = rnic("decode", "--markers", "--strict", stdin=FIG5)
    assert code == 3
    err = lines(out)[0]["error"]
    assert (err["layer"], err["etype"], err["ecode"]) == (1, 2, 6)


def test_decode_truncated_stream_is_mpa_error_1():
    code, out, _ = rnic("decode", "--markers", stdin=FIG5[:-3])
    assert code == 3 and lines(out)[0]["error"]["ecode"] == 1


@pytest.mark.parametrize("args", [
    ("decode", "/nonexistent/file"),
    ("decode", "--marker-origin", "2"),
    ("decode", "--mulpdu", "0"),
    ("decode", "--no-such-option"),
    ("encode", "--marker-origin", "x"),
    ("frobnicate",),
])
def test_usage_errors_are_one_line_and_status_2(args):
    code, out, err = rnic(*args)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "error" in err


def test_encode_rejects_bad_json_line_with_its_number():
    code, _, err = rnic("encode", stdin=b'{"ddp": {}}\nnot json\n')
    assert code == 2 and "line 1" in err and len(err.strip().splitlines()) == 1


def test_encode_decode_round_trip_with_markers(tmp_path):
    msgs = [
        {"ddp": {"t": 0, "l": 1, "dv": 1, "qn": 0, "msn": 1, "mo": 0},
         "rdmap": {"rv": 1, "opcode": 3}, "payload": "68656c6c6f"},
        {"ddp": {"t": 1, "l": 1, "dv": 1, "stag": 0x1234, "to": 4096},
         "rdmap": {"rv": 1, "opcode": 0}, "payload": "ab" * 1000},
        {"ddp": {"t": 0, "l": 1, "dv": 1, "qn": 1, "msn": 1, "mo": 0},
         "rdmap": {"rv": 1, "opcode": 1},
         "read_request_unused": True, "payload": (bytes(range(28))).hex()},
    ]
    src = "".join(json.dumps(m) + "\n" for m in msgs).encode()
    out_path = tmp_path / "s.bin"
    assert rnic("encode", "--markers", "--marker-origin", "64", "-o", str(out_path),
                stdin=src)[0] == 0
    code, out, err = rnic("decode", str(out_path), "--markers", "--marker-origin", "64",
                          "--strict")
    assert code == 0, err
    recs = lines(out)
    assert [r["payload"] for r in recs] == [m["payload"] for m in msgs]
    assert recs[1]["ddp"]["stag"] == 0x1234 and recs[1]["ddp"]["to"] == 4096
    assert recs[2]["rdmap"]["read_request"]["size"] == int.from_bytes(bytes(range(28))[12:16], "big")
    assert any(r["markers"] for r in recs)
    # and the stream re-encodes to the same octets
    again = "".join(json.dumps(r) + "\n" for r in recs).encode()
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", "encode", "--markers",
                           "--marker-origin", "64"], input=again, capture_output=True)
    assert proc.returncode == 0 and proc.stdout == out_path.read_bytes()


@pytest.mark.parametrize("device", ["sim", "none"])
def test_demo_over_tcp_moves_and_checks_every_octet(device):
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", "demo", "--device", device, "--json"],
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()
    result = json.loads(proc.stdout)
    assert result["ok"] and len(result["checks"]) >= 11 and all(c["ok"] for c in result["checks"])
    n = result["negotiated"]
    assert (n["rev"], n["p2p"], n["rtr"], n["crc"]) == (2, True, "write", True)
    assert n["markers_a_to_b"] and n["markers_b_to_a"]
    assert set(result["moved"]) == {"A->B", "B->A"}
    if device == "sim":
        hc = result["hardware_counters"]
        assert hc["tx_fpdus"] > 0 and hc["rx_fpdus"] > 0 and hc["err_count"] == 0


def test_model_demo_passes_its_checks():
    code, out, err = rnic("demo", "--device", "model", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["ok"] and all(c["ok"] for c in result["checks"])
    assert result["negotiated"]["crc"] and result["negotiated"]["markers_a_to_b"]
    assert result["terminate"]["layer"] == 1 and result["terminate"]["ecode"] == 0
    assert 0.9 < result["traffic"]["payload_per_wire_octet"] < 1.0


def test_help_has_examples():
    for cmd in ((), ("decode",), ("encode",), ("demo",), ("listen",), ("connect",)):
        code, out, _ = rnic(*cmd, "--help")
        assert code == 0 and "Examples" in out
