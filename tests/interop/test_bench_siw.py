"""``rnic bench siw``: Linux siw against the software RNIC and the simulated NIC, side by side
(rnic.host.tools.bench_siw). One run with small parameters, both columns: what a user reads
off it (the bandwidth perftest printed, the time per ping) and that the data was checked;
and the one-line error when siw-vm is missing. Skips, with the reason, when the siw VM is
not prepared (tests/interop/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rnic.host.cli.progress import PLAIN_LINE

SIZE, ITERS, PINGS = 4096, 10, 4


@pytest.mark.slow
def test_bench_siw_both_columns(siw_vm, rnic, monkeypatch):
    siw_vm.require("default")
    monkeypatch.setenv("SIW_VM", str(siw_vm.tool))      # the tool the fixture found
    rc, out, err = rnic.run(["bench", "siw", "--size", SIZE, "--iters", ITERS, "--pings", PINGS,
                             "--json"], timeout=600)
    assert rc == 0, err
    # off a terminal, stderr shows at most the phases of a simulation build
    assert all(PLAIN_LINE.match(line) for line in err.splitlines()), err
    report = json.loads(out)
    assert report["verified"] and report["bench"] == "siw"
    assert (report["params"]["size"], report["params"]["iters"],
            report["params"]["pings"]) == (SIZE, ITERS, PINGS)
    assert set(report["measures"]) == {"perftest", "rping"}
    assert list(report["columns"]) == ["software", "nic"]
    for name, col in report["columns"].items():
        perftest, rping = col["perftest"], col["rping"]
        assert perftest["ok"] and perftest["bw_average_mb_s"] > 0, (name, perftest)
        assert perftest["measures"] and perftest["crc"], (name, perftest)
        assert rping["ok"] and rping["mean_ms"] > 0, (name, rping)
        assert (rping["pings"], rping["timed_pings"]) == (PINGS, PINGS - 1), (name, rping)
        assert rping["span_s"] == pytest.approx(rping["mean_ms"] * (PINGS - 1) / 1e3, rel=1e-2)
        print(f"\n{name}: ib_write_bw -s {SIZE} -n {ITERS} {perftest['bw_average_mb_s']} MB/s, "
              f"rping {rping['mean_ms']} ms per ping")
    # the simulated NIC is slower than the software RNIC, and says how much
    assert 0 < report["columns"]["nic"]["simulation"]["realtime"] < 1


def test_bench_siw_without_siw_vm():
    """A siw-vm that is not there: one error line and status 1, before anything starts."""
    env = dict(os.environ, SIW_VM="/nonexistent/siw-vm")
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", "bench", "siw"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "rnic bench siw: error: siw-vm not found: $SIW_VM is /nonexistent/siw-vm, which is "
        "not a file"], proc.stderr
