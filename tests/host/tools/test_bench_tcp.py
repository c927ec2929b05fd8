"""``rnic bench tcp`` (host/tools/bench_tcp.py): the echo of the simulated NIC's TCP with the
model as a lock-step peer. A short run: every octet back, a goodput that fits the line and
TCP's limit on it, no drop on a clean cable; over a lossy cable the peer and the NIC send
again and the echo still comes back whole; the CLI's report and usage errors."""

import json
import subprocess
import sys

import pytest

from rnic.host.tools.bench_tcp import PAYLOAD_LIMIT, LossyLink, run_tcp_bench


def test_clean_run():
    report = run_tcp_bench(octets=96 * 1024, step=256)
    assert report["verified"] and report["octets"] == 96 * 1024
    assert 0 < report["octets_per_cycle"] <= PAYLOAD_LIMIT
    assert report["limit_share"] == pytest.approx(report["octets_per_cycle"] / PAYLOAD_LIMIT)
    assert report["nic_drops"] == {} and report["peer_retransmits"] == 0
    assert report["nic_retransmits"] == 0
    # at least a segment per 1460 octets echoed
    assert report["nic_segments"] >= 96 * 1024 // 1460


def test_lossy_run():
    report = run_tcp_bench(octets=16 * 1024, loss=0.04, seed=6)
    assert report["verified"] and report["peer_retransmits"] > 0 and report["nic_retransmits"] > 0
    assert sum(report["link"]["to_nic"].values()) > 0


def test_lossy_link_counts():
    import random
    link = LossyLink(random.Random(1), 0.1)
    frames = [bytes([k]) for k in range(200)]
    out = []
    for k in range(0, 200, 10):
        out += link.carry(frames[k:k + 10])
    out += link.carry([])
    out += link.carry([]) + link.carry([])
    c = link.counts
    assert len(out) + len(link.held) == 200 - c["lost"] + c["duplicated"]
    assert 0 < c["lost"] and 0 < c["duplicated"] and 0 < c["reordered"]


def test_cli():
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", "bench", "tcp", "--octets",
                           "16384", "--json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["verified"] and report["octets"] == 16384 and "line_share" in report
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", "bench", "tcp", "--loss",
                           "0.5"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--loss" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
