"""``rnic bench ddp``: the report's shape, goodput against the protocol limit, and failure.

Runs in-process (the ``rnic_in_process`` fixture) at W = 8 with few messages per size (the
hidden ``--messages``), on the Verilated :class:`rnic.hdl.ddp_b2b.DdpBenchTop` (built once, then
cached in the simulation build cache). The model side (:func:`rnic.host.tools.bench.ddp_wire_model`) is checked
against hand-computed wire octets. A run whose placement is wrong (messages read one
octet off) must exit 1, not be timed.
"""

import json

import pytest

from rnic.host.tools import bench



def test_wire_model_by_hand():
    # one 64-octet RDMA Write: 14-octet tagged header, FPDU 2 + 78 + 0 pad + 4 CRC = 84,
    # plus the marker at stream offset 0 (phase 0): 88 octets
    m = bench.ddp_wire_model("write", 64, 1)
    assert m == {"payload_octets": 64, "ulpdu_octets": 78, "fpdus": 1, "wire_octets": 88}
    # a Send: 18-octet header, 2 + 82 + 0 pad + 4 = 88, + marker = 92
    assert bench.ddp_wire_model("send", 64, 1)["wire_octets"] == 92
    # the second Write starts at offset 88: 2 + 78 + 4 = 84, no marker (next one at 512)
    assert bench.ddp_wire_model("write", 64, 2)["wire_octets"] == 88 + 84
    # 64 KiB Write: ceil(65536 / 1428) = 46 segments of at most 1442 octets
    big = bench.ddp_wire_model("write", 65536, 1)
    assert big["fpdus"] == 46 and big["ulpdu_octets"] == 65536 + 46 * 14
    # every FPDU of a full segment fits one 1460-octet TCP segment (markers included)
    assert big["wire_octets"] <= 46 * 1460
    assert 0.97 < big["payload_octets"] / big["wire_octets"] < 0.99


def test_bench_ddp_json(progress_only, rnic_in_process):
    code, out, err = rnic_in_process("bench", "ddp", "--width", "8", "--messages", "3", "--json")
    assert code == 0, err
    progress_only(err)                                 # not a terminal: quiet but for a build
    report = json.loads(out)
    assert report["bench"] == "ddp" and report["verified"] is True
    assert report["emss"] == 1460 and report["mulpdu"] == 1442
    assert report["markers"] is True and report["crc"] is True
    rows = report["results"]
    assert [(r["width"], r["op"], r["size"], r["messages"]) for r in rows] == [
        (8, op, s, 3) for op in ("write", "send") for s in (64, 1024, 65536)]
    for r in rows:
        assert r["verified"] is True, r
        assert r["placed_octets"] == r["payload_octets"] == 3 * r["size"]
        assert r["wire_octets"] == r["model_wire_octets"]
        # the framer's runs (TCP segments) hold whole FPDUs; back-to-back FPDUs of the
        # connection share a run (DdpTx leaves no gap between segments), so a run is at
        # least one FPDU long
        assert 1 <= r["tcp_segments"] <= r["fpdus"]
        if r["size"] >= 1024:
            assert r["max_segment_octets"] >= r["wire_octets"] // r["fpdus"]
        # (the window runs from the first placement write: the first message's beats
        # came in before it, so a short run may show more wire beats than cycles, never
        # more than one message's worth)
        per_message = -(-r["wire_octets"] // (8 * r["messages"]))
        assert r["wire_beats"] * 8 >= r["wire_octets"] and 0 < r["wire_beats_per_cycle"]
        assert r["wire_beats"] <= r["cycles"] + per_message + 2, r
        assert r["cycles"] > 0 and r["write_beats"] > 0
        assert r["goodput"] == pytest.approx(r["placed_octets"] / (r["cycles"] * 8), abs=1e-6)
        assert r["protocol_limit"] == pytest.approx(r["payload_octets"] / r["wire_octets"], abs=1e-6)
        # the wire carries at most W octets a cycle: goodput cannot beat the protocol limit
        # (but for the first message, which came in before the window, and the partial
        # first and last beats)
        edge = (r["cycles"] + per_message + 2) / r["cycles"]
        assert r["goodput"] <= r["protocol_limit"] * edge
        floor = 0.2 if r["size"] == 64 else 0.6
        assert r["goodput"] > floor, r
        assert r["cycles_from_post"] >= r["cycles"]
        assert set(r["gbps"]) == {"125MHz", "156.25MHz"} == set(r["limit_gbps"])
        assert r["gbps"]["125MHz"] == pytest.approx(r["goodput"] * 8 * 8 * 0.125, rel=1e-3)


def test_bench_ddp_text_and_op(rnic_in_process):
    code, out, err = rnic_in_process("bench", "ddp", "--width", "8", "--op", "write", "--messages", "2")
    assert code == 0, err
    assert "| 8 | write | 65536 | 2 |" in out and "| send |" not in out and "NO" not in out


def test_bench_ddp_fails_on_bad_placement(monkeypatch, tmp_path, rnic_in_process):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))       # the kept simulator log
    monkeypatch.setattr(bench, "_DDP_SKEW", 1)
    code, out, err = rnic_in_process("bench", "ddp", "--width", "8", "--op", "write", "--messages",
                                     "2", "--json")
    assert code == 1 and out == ""
    assert "rnic bench ddp: error: bench ddp W=8:" in err and "placement errors" in err
    assert "(write 64)" in err and str(tmp_path) in err
