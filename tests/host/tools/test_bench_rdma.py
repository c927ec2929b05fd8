"""``rnic bench rdma`` (host/tools/bench_rdma.py): RDMA Writes of the simulated NIC's core
over its own TCP, the models as a lock-step peer. A short run each way: every octet placed
where it was written, every Write completed (out) or the closing Send after them (in), a
goodput within the line and within what RDMA Writes can carry on it; over a lossy cable
the NIC sends again and the Writes still arrive whole; the CLI's report and usage
errors."""

import json
import subprocess
import sys

import pytest

from rnic.host.tools.bench_rdma import run_rdma_bench


def test_clean_run():
    report = run_rdma_bench(octets=128 * 1024, size=32 * 1024)
    assert report["verified"] and report["writes"] == 4 and report["mss"] == 1460
    assert 0 < report["octets_per_cycle"] <= report["limit"] < 1
    assert report["limit_share"] == pytest.approx(report["octets_per_cycle"] / report["limit"])
    assert report["nic_retransmits"] == 0 and report["peer_retransmits"] == 0
    # a segment per MULPDU of payload at least
    assert report["nic_segments"] >= 128 * 1024 // 1460


def test_inbound_run():
    """The peer's Writes land in the NIC's region, in place, before its Send completes."""
    report = run_rdma_bench(octets=64 * 1024, size=16 * 1024, direction="in")
    assert report["verified"] and report["direction"] == "in"
    assert 0 < report["octets_per_cycle"] <= report["limit"]
    assert report["peer_retransmits"] == 0


def test_lossy_run():
    report = run_rdma_bench(octets=32 * 1024, size=8 * 1024, loss=0.04, seed=3)
    assert report["verified"] and report["nic_retransmits"] > 0
    assert sum(report["link"]["to_peer"].values()) > 0


def test_cli():
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", "bench", "rdma", "--octets",
                           "16384", "--size", "4096", "--json"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["verified"] and report["writes"] == 4 and "line_share" in report
    for args, word in ((["--octets", "10000", "--size", "4096"], "multiple"),
                       (["--loss", "0.5"], "--loss"), (["--direction", "up"], "--direction")):
        proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", "bench", "rdma", *args],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and word in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
