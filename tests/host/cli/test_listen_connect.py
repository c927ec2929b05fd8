"""``rnic listen`` / ``rnic connect`` / ``rnic regs`` / ``rnic status`` / ``rnic serve`` as a user runs them.

The listener runs in a subprocess on 127.0.0.1 (port 0, read from its first
JSON line); ``rnic connect`` runs in another. Usage errors are checked
in-process through ``rnic.host.cli.main`` (same code path, faster).
"""

import json
import os
import select
import subprocess
import socket
import sys
import threading
import time

import pytest

from rnic.host import cli
from rnic.host.driver.model import ModelTransport
from rnic.host.driver.transport import TransportServer
from rnic.host.net import cm

TIMEOUT = 30


def run(*args):
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", *args], capture_output=True,
                          timeout=TIMEOUT)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


class Listener:
    """``rnic listen --port 0 --once --json ...`` in a subprocess (``once=False``: no --once)."""

    def __init__(self, *args, once=True):
        self.proc = subprocess.Popen([sys.executable, "-m", "rnic.host.cli", "listen", "--port", "0",
                                      *(["--once"] if once else []), "--json", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        r, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT)
        assert r, "the listener printed nothing"
        first = json.loads(self.proc.stdout.readline())
        assert first["event"] == "listening" and first["host"] == "127.0.0.1"
        self.port = first["port"]
        self.address = f"127.0.0.1:{self.port}"
        self._buf = b""

    def next_event(self, kind, timeout=TIMEOUT):
        """Read JSON lines until one of event ``kind``; returns it. (Reads the pipe itself:
        select() does not see lines a buffered reader has already taken in.)"""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" not in self._buf:
                r, _, _ = select.select([fd], [], [], max(0, deadline - time.monotonic()))
                assert r, f"no {kind} event"
                data = os.read(fd, 65536)
                assert data, f"the listener ended before a {kind} event"
                self._buf += data
            line, self._buf = self._buf.split(b"\n", 1)
            obj = json.loads(line)
            if obj["event"] == kind:
                return obj

    def finish(self):
        out, err = self.proc.communicate(timeout=TIMEOUT)
        return self.proc.returncode, [json.loads(line) for line in out.decode().splitlines()], \
            err.decode()

    def stop(self):
        """Kill a listener without --once: its JSON lines not read yet, and its stderr."""
        self.proc.kill()
        out, err = self.proc.communicate(timeout=TIMEOUT)
        out = self._buf + out
        return [json.loads(line) for line in out.decode().splitlines()], err.decode()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def listener():
    made = []

    def start(*args, **kw):
        lst = Listener(*args, **kw)
        made.append(lst)
        return lst

    yield start
    for lst in made:
        lst.kill()


def by_event(lines, kind):
    return [x for x in lines if x["event"] == kind]


def in_process(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


# -- transfers end to end ------------------------------------------------------------------

def test_send_write_read_end_to_end(listener):
    lst = listener("--region-data", "00112233", "--stag", "0x1000", "--region-size", "4096")
    code, out, err = run("connect", lst.address, "--send", "68656c6c6f",
                         "--write", "deadbeef", "--stag", "0x1000", "--to", "16",
                         "--read", "4", "--stag", "0x1000", "--to", "16",
                         "--read", "4", "--stag", "0x1000",
                         "--send", "", "--json")
    assert code == 0, err
    assert err == ""
    res = json.loads(out)
    assert res["ok"] is True and res["error"] is None and res["events"] == []
    neg = res["negotiated"]
    assert (neg["role"], neg["rev"], neg["enhanced"], neg["crc"]) == ("initiator", 2, True, True)
    assert (neg["markers_tx"], neg["markers_rx"], neg["p2p"], neg["rtr"]) == (False, False, False, None)
    assert (neg["ird"], neg["ord"]) == (4, 4)
    assert [(t["op"], t["status"], t["length"]) for t in res["transfers"]] == [
        ("send", "success", 5), ("write", "success", 4), ("read", "success", 4),
        ("read", "success", 4), ("send", "success", 0)]
    assert res["transfers"][1]["stag"] == 0x1000 and res["transfers"][1]["to"] == 16
    assert res["transfers"][2]["data"] == "deadbeef"       # what the Write put there
    assert res["transfers"][3]["data"] == "00112233"       # the region's initial contents

    code, lines, lerr = lst.finish()
    assert code == 0, lerr
    (conn,) = by_event(lines, "connected")
    assert conn["negotiated"]["role"] == "responder" and conn["region"] == {
        "stag": 0x1000, "to": 0, "length": 4096}
    comps = by_event(lines, "completion")
    assert [(c["queue"], c["opcode"], c["status"], c["length"], c.get("data")) for c in comps] == [
        ("rq", "send", "success", 5, "68656c6c6f"), ("rq", "send", "success", 0, "")]
    (w,) = by_event(lines, "remote_write")
    assert (w["stag"], w["to"], w["length"], w["data"]) == (0x1000, 16, 4, "deadbeef")
    assert [(r["to"], r["length"]) for r in by_event(lines, "remote_read")] == [(16, 4), (0, 4)]
    (closed,) = by_event(lines, "closed")
    assert closed["error"] is None and closed["stats"]["rx_fpdus"] == 5
    assert lines[-1] is closed


def test_markers_p2p_private_data_and_model_device(listener):
    lst = listener("--markers", "--no-crc", "--ird", "2", "--private-data", "6c69",
                   "--device", "model", "--region-data", "cafe")
    code, out, err = run("connect", lst.address, "--p2p", "--rtr", "read", "--markers",
                         "--no-crc", "--ord", "8", "--private-data", "636f", "--device", "model",
                         "--stag", "0x1000", "--read", "2", "--send", "01", "--json")
    assert code == 0, err
    res = json.loads(out)
    neg = res["negotiated"]
    assert (neg["markers_tx"], neg["markers_rx"], neg["crc"]) == (True, True, False)
    assert (neg["p2p"], neg["rtr"], neg["ord"], neg["peer_ird"]) == (True, "read", 2, 2)
    assert neg["peer_private_data"] == "6c69" and neg["private_data"] == "636f"
    assert res["transfers"][0]["data"] == "cafe"           # default --stag, --to 0
    dev = res["device"]
    assert dev["identity"]["magic"] == "0x69575250"
    assert dev["counters"]["tx_fpdus"] >= 2 and dev["counters"]["rx_fpdus"] >= 2
    assert dev["connections"] == [] and dev["last_error"] is None      # closed cleanly: IDLE

    code, lines, lerr = lst.finish()
    assert code == 0, lerr
    (conn,) = by_event(lines, "connected")
    n = conn["negotiated"]
    assert (n["p2p"], n["rtr"], n["ird"], n["peer_private_data"]) == (True, "read", 2, "636f")
    assert conn["device"]["connection"]["state"] == "WAIT_RX"   # programmed behind the MPA fence
    (c,) = by_event(lines, "completion")
    assert c["data"] == "01"
    (closed,) = by_event(lines, "closed")
    assert closed["device"]["counters"]["rx_fpdus"] == 3        # RTR, Read Request, Send


def test_invalid_stag_write_reports_the_terminate(listener):
    lst = listener()
    code, out, err = run("connect", lst.address, "--send", "aa", "--write", "beef",
                         "--stag", "0x9999", "--to", "0")
    assert code == 1
    assert err.count("\n") == 1
    assert err.startswith("rnic connect: error: Terminate received: DDP error type 1 code 0x00")
    assert "send 1 octets: success" in out
    assert "Terminate received: DDP error type 1 code 0x00" in out
    code, lines, _ = lst.finish()
    assert code == 1
    (t,) = by_event(lines, "terminate_sent")
    assert (t["error"]["layer"], t["error"]["etype"], t["error"]["ecode"]) == (1, 1, 0)
    assert t["terminate"]["ddp_header"].startswith("c1")
    assert "STag 0x9999 is unknown" in t["error"]["text"]
    assert by_event(lines, "closed")[0]["error"]["ecode"] == 0


def test_read_failure_json_and_text_listener():
    proc = subprocess.Popen([sys.executable, "-m", "rnic.host.cli", "listen", "--port", "0", "--once",
                             "--region-size", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        r, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
        assert r
        first = proc.stdout.readline().decode()
        assert first.startswith("listening on 127.0.0.1:")
        port = first.strip().rsplit(":", 1)[1]
        code, out, err = run("connect", f"127.0.0.1:{port}", "--read", "4", "--stag", "0x1000",
                             "--json")
        assert code == 1
        res = json.loads(out)
        assert res["ok"] is False
        assert res["transfers"][0]["status"] == "remote_error"
        assert (res["error"]["layer"], res["error"]["etype"], res["error"]["ecode"]) == (0, 1, 0)
        assert err.startswith("rnic connect: error: Terminate received: RDMAP error type 1 code")
        out, lerr = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 1
        text = out.decode()
        assert "connection from 127.0.0.1:" in text and "p2p no" in text
        assert "Terminate sent: RDMAP error type 1 code 0x00" in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_reject(listener):
    lst = listener("--reject", "--private-data", "6e6f")
    code, out, err = run("connect", lst.address, "--send", "00", "--private-data", "6869")
    assert code == 1
    assert out == f"rejected by {lst.address}, peer private data 6e6f\n"
    assert err == f"rnic connect: error: rejected by {lst.address} (MPA error 1: the responder " \
                  "rejected the connection (R=1))\n"
    code, lines, _ = lst.finish()
    assert code == 0
    (rej,) = by_event(lines, "rejected")
    assert rej["peer_private_data"] == "6869"


def test_pcap_of_listen_and_connect(listener, tmp_path):
    """--pcap on both ends: each file reassembles to the same two byte streams, MPA
    Request and Reply first, and the Send's payload is in the initiator's stream."""
    from rnic.host.net import pcap
    lst = listener("--pcap", str(tmp_path / "l.pcap"))
    code, out, err = run("connect", lst.address, "--send", "68656c6c6f2070636170",
                         "--pcap", str(tmp_path / "c.pcap"))
    assert code == 0, err
    assert lst.finish()[0] == 0
    c, s = pcap.streams(tmp_path / "c.pcap"), pcap.streams(tmp_path / "l.pcap")
    assert c == s and len(c) == 2
    req = next(v for v in c.values() if v.startswith(b"MPA ID Req Frame"))
    rep = next(v for v in c.values() if v.startswith(b"MPA ID Rep Frame"))
    assert b"hello pcap" in req and b"hello pcap" not in rep
    _, frames = pcap.read_pcap(tmp_path / "c.pcap")
    assert all(pcap.parse_frame(f)["tcp_ok"] for _, f in frames)


def test_connection_refused(capsys):
    import socket
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    code, out, err = in_process(capsys, "connect", f"127.0.0.1:{port}", "--send", "00", "--json")
    assert code == 1
    assert json.loads(out)["error"]["ecode"] == 1
    assert err.startswith("rnic connect: error: MPA setup with 127.0.0.1:") and err.count("\n") == 1


# -- usage errors ----------------------------------------------------------------------------

USAGE = [
    (["connect", "localhost"], "is not HOST:PORT"),
    (["connect", "127.0.0.1:70000"], "is not HOST:PORT"),
    (["connect", "127.0.0.1:7", "--send", "xyz"], "is not hex octets"),
    (["connect", "127.0.0.1:7", "--write", "aa"], "--write needs --stag"),
    (["connect", "127.0.0.1:7", "--read", "4", "--to", "1"], "--read needs --stag"),
    (["connect", "127.0.0.1:7", "--read", "4", "--stag", "1", "--stag", "2"], "--stag given twice"),
    (["connect", "127.0.0.1:7", "--read", "-1", "--stag", "1"], "does not fit 32 bits"),
    (["connect", "127.0.0.1:7", "--stag", "0x1g"], "is not a number"),
    (["connect", "127.0.0.1:7", "--rtr", "send,fax"], "give a comma list"),
    (["connect", "127.0.0.1:7", "--p2p", "--rev", "1"], "p2p needs rev 2"),
    (["connect", "127.0.0.1:7", "--ird", "20000"], "20000"),
    (["connect", "127.0.0.1:7", "--device", "pci"], "unknown device 'pci'"),
    (["connect", "127.0.0.1:7", "--frobnicate"], "No such option"),
    (["listen"], "Missing option '--port'"),
    (["listen", "--port", "0", "--region-size", "2", "--region-data", "010203"], "--region-data"),
    (["regs", "read", "NOPE"], "no register 'NOPE'"),
    (["regs", "read", "CTRL.NOPE"], "has no field"),
    (["regs", "read", "ID", "--device", "none"], "needs a device"),
    (["regs", "write", "ID", "1"], "ID is read-only"),
    (["regs", "write", "CTX_TX.PHASE", "0x1000"], "does not fit 9 bits"),
    (["regs", "write", "SCRATCH", "1" + "0" * 12], "does not fit 32 bits"),
    (["status", "--device", "tcp:nowhere"], "expected HOST:PORT"),
]


@pytest.mark.parametrize("argv,text", USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_usage_errors_are_one_line_and_exit_2(capsys, argv, text):
    code, out, err = in_process(capsys, *argv)
    assert code == 2, (out, err)
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("rnic ") and ": error: " in err
    assert text in err


def test_usage_error_in_a_subprocess():
    code, out, err = run("connect", "127.0.0.1:7", "--write", "00")
    assert (code, out) == (2, "")
    assert err == "rnic connect: error: --write needs --stag (the peer's STag)\n"


def test_help_has_examples(capsys):
    for cmd in (["listen"], ["connect"], ["regs"], ["regs", "write"], ["status"], ["serve"]):
        code, out, _ = in_process(capsys, *cmd, "--help")
        assert code == 0 and "Examples:" in out, cmd


# -- registers and status ----------------------------------------------------------------------

def test_regs_and_status_on_the_model(capsys):
    code, out, _ = in_process(capsys, "regs", "read", "ID", "--json")
    assert code == 0 and json.loads(out)["value"] == 0x69575250
    code, out, _ = in_process(capsys, "regs", "read", "VERSION.WIDTH")
    assert (code, out) == (0, "VERSION.WIDTH = 0x8\n")
    code, out, _ = in_process(capsys, "regs", "dump", "--json")
    regs = json.loads(out)["registers"]
    assert regs[0]["name"] == "ID" and any(r["name"] == "CQ_STATUS" for r in regs)
    code, out, _ = in_process(capsys, "status", "--json")
    st = json.loads(out)
    assert st["identity"]["version"].startswith("0.") and st["connections"] == []
    code, out, _ = in_process(capsys, "status")
    assert out.startswith("device model: RNIC map 0.") and "last error: none" in out
    code, out, err = in_process(capsys, "status", "--device", "sim")
    assert code == 0 and out.startswith("device sim:"), err


def test_regs_and_status_over_tcp(capsys):
    model = ModelTransport(connections=4)
    with TransportServer(model, 0).start() as server:
        dev = server.address
        code, out, _ = in_process(capsys, "regs", "write", "SCRATCH", "0x1234", "--device", dev)
        assert code == 0 and "SCRATCH = 0x00001234" in out
        code, out, _ = in_process(capsys, "regs", "write", "CTRL.ENABLE", "1", "--device", dev,
                                  "--json")
        assert json.loads(out)["readback"]["fields"]["enable"] == 1
        model.core.report_error(0, (1, 2, 3))
        code, out, err = run("status", "--device", dev, "--json")     # another process
        assert code == 0, err
        st = json.loads(out)
        assert st["enabled"] is True and st["identity"]["connections"] == 4
        assert st["last_error"] == {"conn": 0, "tx": False, "layer": 1, "etype": 2, "ecode": 3,
                                    "overflow": False}
        code, out, _ = in_process(capsys, "regs", "write", "ERR_STATUS.PENDING", "1", "--device", dev)
        assert code == 0 and model.bank.out("err_status", "pending") == 0
        code, out, _ = in_process(capsys, "regs", "read", "SCRATCH", "--device", dev, "--json")
        assert json.loads(out)["value"] == 0x1234
    code, out, err = in_process(capsys, "status", "--device", dev)
    assert code == 1 and "cannot reach the register server" in err


def test_serve_command(capsys):
    proc = subprocess.Popen([sys.executable, "-m", "rnic.host.cli", "serve", "--port", "0", "--once",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        r, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
        assert r
        info = json.loads(proc.stdout.readline())
        assert info["event"] == "serving" and info["address"].startswith("tcp:127.0.0.1:")
        code, out, _ = in_process(capsys, "regs", "read", "CAPS.CONNECTIONS", "--device",
                                  info["address"])
        assert (code, out) == (0, "CAPS.CONNECTIONS = 0x10\n")
        proc.communicate(timeout=TIMEOUT)           # --once: exits after that client
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_listener_serves_connections_one_after_another():
    """Without --once the listener keeps serving; each connection gets its own region copy."""
    proc = subprocess.Popen([sys.executable, "-m", "rnic.host.cli", "listen", "--port", "0", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        r, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
        assert r
        port = json.loads(proc.stdout.readline())["port"]
        results = []

        def client(data):
            results.append(run("connect", f"127.0.0.1:{port}", "--write", data, "--stag",
                               "0x1000", "--read", "2", "--stag", "0x1000", "--json"))

        for data in ("0102", "0304"):
            th = threading.Thread(target=client, args=(data,))
            th.start()
            th.join(TIMEOUT)
        assert [json.loads(out)["transfers"][1]["data"] for _, out, _ in results] == ["0102", "0304"]
        assert all(code == 0 for code, _, _ in results)
    finally:
        proc.kill()
        proc.communicate()


# -- concurrent connection setup -------------------------------------------------------------

def timed_run(*args):
    t = time.monotonic()
    code, out, err = run(*args)
    return time.monotonic() - t, code, out, err


def test_silent_and_idle_peers_do_not_delay_connect(listener):
    """The issue's scenario: 20 sockets that connect and say nothing plus 5 peers that complete
    MPA and idle delay a valid ``rnic connect`` by less than a second (the silent ones would
    hold a one-at-a-time listener for --timeout each)."""
    lst = listener("--timeout", "10", once=False)
    addr = ("127.0.0.1", lst.port)
    connect = ("connect", lst.address, "--send", "68656c6c6f", "--write", "0badcafe",
               "--stag", "0x1000", "--json")
    timed_run(*connect)                                      # warm-up (imports, caches)
    base, code, out, err = timed_run(*connect)
    assert code == 0, err
    silent = [socket.create_connection(addr) for _ in range(20)]
    idle = [cm.connect(addr, cm.ConnParams(timeout=TIMEOUT)) for _ in range(5)]
    try:
        loaded, code, out, err = timed_run(*connect)
        assert code == 0, err
        res = json.loads(out)
        assert [t["status"] for t in res["transfers"]] == ["success", "success"]
        assert loaded < base + 1.0, (base, loaded)
        for s in silent:                                     # still negotiating: not timed out
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
    finally:
        for s in silent:
            s.close()
        for n in idle:
            n.close()
    lines, _ = lst.stop()
    assert len(by_event(lines, "connected")) == 8
    assert all("peer" in x for x in lines if x["event"] != "listening")


def test_half_open_cap_refuses_with_a_line(listener):
    lst = listener("--max-half-open", "2", "--timeout", "5", once=False)
    addr = ("127.0.0.1", lst.port)
    silent = [socket.create_connection(addr) for _ in range(2)]
    try:
        over = socket.create_connection(addr)
        over_peer = f"127.0.0.1:{over.getsockname()[1]}"
        over.settimeout(TIMEOUT)
        t = time.monotonic()
        try:
            assert over.recv(100) == b""                     # closed at once, unread
        except ConnectionResetError:
            pass
        assert time.monotonic() - t < 2.0
        over.close()
        ev = lst.next_event("refused")
        assert ev == {"event": "refused", "peer": over_peer, "reason": "half_open", "limit": 2}
    finally:
        for s in silent:
            s.close()
    for _ in silent:                                         # they gave up: room again
        assert lst.next_event("setup_failed")["error"]["ecode"] == 1
    code, out, err = run("connect", lst.address, "--send", "00")
    assert code == 0, err
    _, err = lst.stop()
    assert err.splitlines() == [f"rnic listen: refused {over_peer}: 2 MPA negotiations already "
                                "in progress; closed (--max-half-open 2)"]


def test_device_connection_ids_and_max_connections(listener):
    """With --device each live connection has its own id on the device; over
    --max-connections a Request gets an MPA Reject and a line on stderr."""
    lst = listener("--device", "model", "--max-connections", "2", once=False)
    addr = ("127.0.0.1", lst.port)
    a = cm.connect(addr, cm.ConnParams(timeout=TIMEOUT))
    b = cm.connect(addr, cm.ConnParams(timeout=TIMEOUT))
    conns = [lst.next_event("connected") for _ in range(2)]
    assert sorted(c["device"]["connection"]["conn"] for c in conns) == [0, 1]
    assert {c["device"]["connection"]["state"] for c in conns} == {"WAIT_RX"}
    by_peer = {c["peer"]: c["device"]["connection"]["conn"] for c in conns}
    code, out, err = run("connect", lst.address, "--send", "00")
    assert code == 1 and "rejected by" in err
    ev = lst.next_event("refused")
    assert (ev["reason"], ev["limit"]) == ("connections", 2)
    a_peer = f"127.0.0.1:{a.sock.getsockname()[1]}"
    freed = by_peer[a_peer]
    a.close()
    assert lst.next_event("closed")["peer"] == a_peer
    for _ in range(10):                # the id is released just after the closed line
        code, out, err = run("connect", lst.address, "--send", "01", "--json")
        if code == 0:
            break
        time.sleep(0.2)
    assert code == 0, err
    third = lst.next_event("connected")
    assert third["device"]["connection"]["conn"] == freed
    b.close()
    _, err = lst.stop()
    assert err.splitlines()[0].startswith("rnic listen: refused 127.0.0.1:")
    assert err.splitlines()[0].endswith(": all 2 connection contexts in use; MPA Reject sent "
                                        "(--max-connections 2)")


def test_listen_cap_default_is_the_library_default(capsys):
    from rnic.host.cli import conn
    from rnic.host.net.listener import DEFAULT_MAX_HALF_OPEN
    assert conn._MAX_HALF_OPEN == DEFAULT_MAX_HALF_OPEN
    code, out, _ = in_process(capsys, "listen", "--help")
    assert code == 0 and "--max-half-open" in out and "--max-connections" in out
