"""rnic.host.apps.rping and ``rnic rping``: rping's protocol between two software RNICs."""

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rnic.host.net import cm, pcap
from rnic.host.apps import rping as rp
from rnic.host.net.rnic_sw import SoftwareRnic

ROOT = Path(__file__).resolve().parents[2]


def test_ping_buffer_is_rpings_pattern():
    b = rp.ping_buffer(0, 64)
    assert len(b) == 64 and b[-1] == 0
    assert rp.ping_text(b) == "rdma-ping-0: " + "".join(map(chr, range(65, 65 + 50)))
    # the start letter moves on by one per ping and wraps from 'z' (122) to 'A'
    assert rp.ping_text(rp.ping_buffer(1, 26)) == "rdma-ping-1: BCDEFGHIJKLM"
    assert rp.ping_text(rp.ping_buffer(57, 40))[14] == "z"
    assert rp.ping_text(rp.ping_buffer(58, 40))[14] == "A"
    text = rp.ping_text(rp.ping_buffer(2, 200))
    after = text[len("rdma-ping-2: "):]
    assert after[0] == "C" and after[after.index("z") + 1] == "A"
    with pytest.raises(ValueError):
        rp.ping_buffer(0, 25)


def test_info_message_layout():
    assert rp.INFO.size == 16
    assert rp.INFO.pack(0x0102030405060708, 0x0A0B0C0D, 64) == bytes.fromhex(
        "0102030405060708" "0a0b0c0d" "00000040")


def _pair(client_params=None, server_params=None):
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    box = {}

    def accept():
        s, _ = srv.accept()
        box["neg"] = cm.accept(s, server_params or cm.ConnParams())
    t = threading.Thread(target=accept)
    t.start()
    cneg = cm.connect(("127.0.0.1", port), client_params or cm.ConnParams())
    t.join(10)
    srv.close()
    return SoftwareRnic(cneg), SoftwareRnic(box["neg"], first_fpdu_timeout=None)


@pytest.mark.parametrize("p2p", [False, True])
def test_client_and_server_over_software_rnics(p2p):
    cdp, sdp = _pair(cm.ConnParams(p2p=p2p, rtr={"read"}) if p2p else None)
    seen = {}

    def serve():
        try:
            seen["server"] = rp.run_server(sdp, size=100, validate=True)
        finally:
            sdp.close()
    t = threading.Thread(target=serve)
    t.start()
    lines = []
    pings = rp.run_client(cdp, count=4, size=100, validate=True,
                          on_ping=lambda n, text: lines.append((n, text)))
    cdp.close()
    t.join(10)
    want = [rp.ping_text(rp.ping_buffer(i, 100)) for i in range(4)]
    assert pings == want and seen["server"] == want
    assert [n for n, _ in lines] == [0, 1, 2, 3]


def test_server_with_smaller_buffer_fails_clearly():
    cdp, sdp = _pair()
    box = {}

    def serve():
        try:
            rp.run_server(sdp, size=32, timeout=5)
        except rp.RpingError as e:
            box["err"] = str(e)
        finally:
            sdp.close()
    t = threading.Thread(target=serve)
    t.start()
    with pytest.raises(rp.RpingError):
        rp.run_client(cdp, count=1, size=64, timeout=5)
    cdp.close()
    t.join(10)
    assert "exceeds this side's -S 32" in box["err"]


def _cli(args, **kw):
    return subprocess.run([sys.executable, "-m", "rnic.host.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, **kw)


def test_cli_both_roles_verbose_output_and_pcap(tmp_path):
    server = subprocess.Popen([sys.executable, "-m", "rnic.host.cli", "rping", "-s", "-a", "127.0.0.1",
                               "-p", "0", "-v", "-V", "--json", "--pcap", tmp_path / "s.pcap"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        listening = json.loads(server.stdout.readline())
        assert listening["event"] == "listening"
        r = _cli(["rping", "-c", "-a", "127.0.0.1", "-p", listening["port"], "-C", 3, "-v", "-V",
                  "--pcap", tmp_path / "c.pcap"])
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    want = [rp.ping_text(rp.ping_buffer(i, 64)) for i in range(3)]
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"ping data: {w}" for w in want]
    assert server.returncode == 0, err
    result = json.loads(out.splitlines()[-1])
    assert result["event"] == "result" and result["ok"] and result["pings"] == want
    assert result["negotiated"]["role"] == "responder"
    # both captures hold the same connection, MPA Request first
    c, s = pcap.streams(tmp_path / "c.pcap"), pcap.streams(tmp_path / "s.pcap")
    assert c == s and any(v.startswith(b"MPA ID Req Frame") for v in c.values())


@pytest.mark.parametrize("args", [
    ["rping"], ["rping", "-s", "-c"], ["rping", "-c"], ["rping", "-c", "-a", "x", "-S", "25"],
    ["rping", "-c", "-a", "x", "-S", "65536"], ["rping", "-s", "--p2p"],
])
def test_cli_usage_errors_exit_2(args):
    r = _cli(args)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "error" in r.stderr


def test_cli_client_connection_refused_exit_1():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _cli(["rping", "-c", "-a", "127.0.0.1", "-p", port, "-C", 1, "--json"])
    assert r.returncode == 1
    assert "MPA setup with 127.0.0.1" in r.stderr and r.stderr.count("\n") == 1
    assert json.loads(r.stdout)["ok"] is False
