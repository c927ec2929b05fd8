"""rnic.host.apps.perftest: perftest's -R exchange codec (against octets captured from perftest 6.06 on
siw), perftest's derived parameters and report format, and both sides of each test against
each other over loopback TCP (no VM; tests/interop/test_perftest.py runs them against siw)."""

from __future__ import annotations

import hashlib
import struct
import threading

import pytest
from click.testing import CliRunner

from rnic.host.apps import perftest as pt
from rnic.host.cli.perftest import perftest

# Octets of perftest 6.06 (ib_write_bw -R -s 4096 -n 5, both ends siw) captured between
# the two: the client's pingpong_dest (4 octets of uninitialised padding after rkey), ...
CAPTURED_DEST = bytes.fromhex(
    "00000000" "00000001" "00000003" "00f81c90" "ee4d1500" "577f0000" "00005599a3675000"
    "52540012345600000000000000000000" "00000000" "00000000")
# ... and the client's bw report (size, iters, BW peak 29.10, BW average 2.16, 0.000552 Mpps).
CAPTURED_REPORT = [bytes.fromhex(h) for h in (
    "0000000000001000", "0000000000000005", "403d1a60af0193fe", "4001427664f45f98",
    "3f421917fd764641")]
# What the siw server printed for that report.
CAPTURED_LINE = " 4096       5                29.10              2.16   \t\t   0.000552"


def test_version_message():
    msg = pt.encode_version()
    assert msg == b"6.06" + bytes(12) and len(msg) == 16
    assert pt.decode_version(bytes.fromhex("362e3036000000000000000000000000")) == "6.06"
    assert pt.version_number("6.06") == pytest.approx(6.06)
    assert pt.version_number("5.32abc") == pytest.approx(5.32)
    assert pt.version_number("x") == 0.0


def test_sys_data_and_mtu_messages():
    assert pt.encode_int(4096) == bytes.fromhex("00001000")
    assert pt.encode_int(64) == bytes.fromhex("00000040")
    assert pt.decode_int(bytes.fromhex("00000040")) == 64
    assert pt.encode_mtu(3) == bytes.fromhex("3300")
    assert pt.decode_mtu(bytes.fromhex("3300")) == 3
    assert pt.mtu_octets(3) == 1024
    with pytest.raises(pt.PerftestError):
        pt.decode_mtu(b"x\0")


def test_dest_layout_matches_perftest():
    assert pt.DEST.size == 56
    d = pt.Dest.unpack(CAPTURED_DEST)
    assert (d.lid, d.out_reads, d.qpn, d.psn) == (0, 1, 3, 0xF81C90)
    assert d.rkey == 0xEE4D1500 and d.vaddr == 0x5599A3675000
    assert d.gid[:6] == bytes.fromhex("525400123456")
    # we send zero padding; everything else round-trips
    again = d.pack()
    assert again[:20] == CAPTURED_DEST[:20] and again[24:] == CAPTURED_DEST[24:]
    assert again[20:24] == bytes(4)
    assert pt.Dest.unpack(again) == d
    assert pt.ZERO_DEST.pack() == bytes(56)
    with pytest.raises(pt.PerftestError):
        pt.Dest.unpack(bytes(40))


def test_report_messages_match_perftest():
    rep = pt.decode_report(CAPTURED_REPORT, "6.06")
    assert (rep.size, rep.iters) == (4096, 5)
    assert pt.format_report_line(rep) == CAPTURED_LINE
    assert pt.encode_report(rep, "6.06") == CAPTURED_REPORT
    # before 5.33 the iteration count is a 4-octet int
    old = pt.encode_report(rep, "5.32")
    assert old[1] == struct.pack(">i", 5)
    assert pt.decode_report(old, "5.32") == rep
    assert pt.parse_report_lines("junk\n" + CAPTURED_LINE + "\n") == [
        pt.BwReport(4096, 5, 29.10, 2.16, 0.000552)]


def test_credit_is_little_endian():
    # siw's ib_send_bw server wrote these credit words (2 and 4 receives) to its client
    assert pt.encode_credit(2) == bytes.fromhex("02000000")
    assert pt.decode_credit(bytes.fromhex("04000000")) == 4


def test_remote_offsets_follow_increase_rem_addr():
    # size > cycle/2: always the same address
    assert pt.remote_offsets(4096, 3) == [0, 0, 0]
    assert pt.remote_offsets(2049, 2) == [0, 0]
    # 100 octets -> 128-octet steps, 32 slots in the 4096-octet cycle buffer
    offs = pt.remote_offsets(100, 70)
    assert offs[:3] == [0, 128, 256] and offs[31] == 31 * 128 and offs[32] == 0
    assert max(offs) + 100 <= pt.buffer_span(100)
    assert pt.buffer_span(65536) == 65536 and pt.buffer_span(10) == 4096


def test_params_follow_perftest():
    p = pt.TestParams("write")
    assert (p.iters, p.tx_depth, p.cq_mod, p.size) == (5000, 128, 1, 65536)   # > 8 KiB: cq_mod 1
    p = pt.TestParams("send", size=4096, iters=5)
    assert (p.iters, p.tx_depth, p.rx_depth, p.cq_mod) == (5, 5, 5, 5)
    p = pt.TestParams("send", size=64)
    assert (p.iters, p.rx_depth, p.cq_mod, p.credit_cnt) == (1000, 512, 100, 170)
    p = pt.TestParams("write", size=65536, cq_mod=10)
    assert p.cq_mod == 10
    p = pt.TestParams("read", iters=30000, size=64)
    assert p.no_peak
    p = pt.TestParams("write", run_all=True, iters=5)
    assert p.sizes[0] == 2 and p.sizes[-1] == 1 << 23 and len(p.sizes) == 23
    for bad in (dict(iters=4), dict(size=0), dict(cq_mod=0)):
        with pytest.raises(ValueError):
            pt.TestParams("write", **bad)
    with pytest.raises(ValueError):
        pt.TestParams("atomic")


def test_compute_report():
    # 4 messages of 1 MiB posted at 0, 1, 2, 3 s; completions (cq_mod 2) at 2 s and 4 s
    rep = pt.compute_report(1 << 20, 4, [0.0, 1.0, 2.0, 3.0], {1: 2.0, 3: 4.0})
    assert rep.bw_avg == pytest.approx(1.0)           # 4 MiB in 4 s
    assert rep.msg_rate == pytest.approx(1e-6)
    assert rep.bw_peak == pytest.approx(1.0)          # best: 2 messages in 2 s
    gb = pt.compute_report(125_000_000, 1, [0.0], {0: 8.0}, format_factor=pt.GBITS, no_peak=True)
    assert gb.bw_avg == pytest.approx(0.125) and gb.bw_peak == 0.0
    assert pt.result_header() == (" #bytes     #iterations    BW peak[MB/sec]    "
                                  "BW average[MB/sec]   MsgRate[Mpps]")
    assert "Gb/sec" in pt.result_header(True)


def _loopback(test, *, client_kw=None, server_kw=None, **params):
    """Our server and our client on 127.0.0.1; returns (server result, client result)."""
    ready = threading.Event()
    port = []
    out = {}

    def serve():
        try:
            out["server"] = pt.run_server("127.0.0.1", 0, pt.TestParams(test, **params),
                                          timeout=20, accept_timeout=20,
                                          on_listening=lambda p: (port.append(p), ready.set()),
                                          **(server_kw or {}))
        except Exception as e:          # reported by the assertion below
            out["server_error"] = e
            ready.set()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    assert ready.wait(10)
    assert "server_error" not in out, out.get("server_error")
    client = pt.run_client("127.0.0.1", port[0], pt.TestParams(test, **params), timeout=20,
                           retry=5, **(client_kw or {}))
    th.join(30)
    assert "server_error" not in out, out.get("server_error")
    return out["server"], client


def _placed(owner, size, iters):
    """The buffer after ``iters`` messages of ``size`` copied from ``owner``'s pattern at
    perftest's offsets (the octets between message slots stay zero)."""
    offs = pt.remote_offsets(size, iters)
    src = pt.expected_pattern(owner, pt.buffer_span(size))
    buf = bytearray(max(offs) + size)
    for o in offs:
        buf[o:o + size] = src[o:o + size]
    return bytes(buf)


@pytest.mark.parametrize("size,iters", [(4096, 20), (100, 40), (70000, 6)])
def test_loopback_write(size, iters):
    srv, cli = _loopback("write", size=size, iters=iters)
    assert srv["ok"] and cli["ok"]
    assert srv["peer_version"] == cli["peer_version"] == pt.VERSION
    assert cli["results"][0]["bytes"] == size and cli["results"][0]["iterations"] == iters
    # the server prints the client's numbers
    assert srv["remote_report"] == cli["results"][0] == srv["results"][0]
    assert srv["traffic"]["messages"] == iters and srv["traffic"]["octets"] == iters * size
    # every octet the client wrote is in the server's buffer
    want = _placed("client", size, iters)
    assert srv["traffic"]["digests"] == [hashlib.sha256(want).hexdigest()]
    # VA-based regions: the TO advertised is the buffer's address in the server's memory
    assert cli["remote"]["rkey"] == pt.BUF_STAG and cli["remote"]["vaddr"] >= 0x10000
    assert srv["negotiated"]["test"]["ird"] == 0 and srv["negotiated"]["exchange"]["rev"] == 2
    # as perftest 6.06 on the wire: version, 2 sys data, MTU, 2 zero handshakes, 3 QP data
    # handshakes, the end-of-test handshake, 5 report fields, the close handshake
    assert srv["exchange_messages"] == cli["exchange_messages"] == {"sent": 16, "received": 16}


@pytest.mark.parametrize("size,iters", [(4096, 20), (100, 40)])
def test_loopback_read(size, iters):
    srv, cli = _loopback("read", size=size, iters=iters, out_reads=4)
    assert srv["ok"] and cli["ok"]
    assert srv["remote_report"] == cli["results"][0]
    assert srv["traffic"]["messages"] == iters and srv["traffic"]["octets"] == iters * size
    want = _placed("server", size, iters)
    assert cli["traffic"]["digests"] == [hashlib.sha256(want).hexdigest()]
    assert cli["remote"]["out_reads"] == 4
    assert cli["negotiated"]["test"]["ord"] == 4


@pytest.mark.parametrize("size,iters,rx", [(4096, 20, 512), (100, 60, 6), (64, 50, 3)])
def test_loopback_send_with_credits(size, iters, rx):
    srv, cli = _loopback("send", size=size, iters=iters, rx_depth=rx)
    assert srv["ok"] and cli["ok"]
    assert "remote_report" not in srv                     # send: each side measures itself
    assert srv["results"][0]["bytes"] == size and srv["results"][0]["bw_peak"] == 0.0
    assert srv["traffic"]["messages"] == iters and srv["traffic"]["octets"] == iters * size
    slots = len(set(pt.remote_offsets(size, iters)))
    assert srv["traffic"]["distinct_payloads"] == slots
    # the credit word is the send side's buffer
    assert srv["remote"]["rkey"] == pt.CREDIT_STAG
    # as perftest 6.06 on the wire: version, 2 sys data, MTU, 2 zero handshakes, 3 QP data
    # handshakes, the go-ahead, the close handshake
    assert cli["exchange_messages"] == {"sent": 11, "received": 11}


@pytest.mark.parametrize("test", ["write", "send"])
def test_full_depth_64k_from_the_device(test):
    """The client on the simulated core at perftest's defaults (64 KiB, 128 work requests
    outstanding: twice the device's 4 MiB were each copied into it): the work requests
    name the registered buffer, so nothing is allocated per request and every octet
    arrives."""
    from rnic.host.net.rnic_offload import offload_datapath
    from tests.host.net.loopback import sim_device
    iters = 140
    with sim_device(offload_datapath) as dev:
        srv, cli = _loopback(test, size=65536, iters=iters, client_kw=dict(device=dev))
    assert srv["ok"] and cli["ok"]
    assert (cli["params"]["tx_depth"], cli["results"][0]["iterations"]) == (128, iters)
    assert srv["traffic"]["messages"] == iters and srv["traffic"]["octets"] == iters * 65536
    if test == "write":
        want = _placed("client", 65536, iters)
        assert srv["traffic"]["digests"] == [hashlib.sha256(want).hexdigest()]
    else:
        assert srv["traffic"]["distinct_payloads"] == len(set(pt.remote_offsets(65536, iters)))


def test_loopback_run_all_sizes(monkeypatch):
    monkeypatch.setattr(pt.TestParams, "sizes", property(lambda self: [2, 64, 5000]))
    srv, cli = _loopback("send", iters=5, run_all=True)
    assert [r["bytes"] for r in srv["results"]] == [2, 64, 5000]
    assert [r["bytes"] for r in cli["results"]] == [2, 64, 5000]
    srv, cli = _loopback("write", iters=5, run_all=True)
    assert [r["bytes"] for r in cli["results"]] == [2, 64, 5000]
    assert srv["remote_report"]["bytes"] == 5000               # the last size's report


def test_cli_usage_and_failure():
    runner = CliRunner()
    res = runner.invoke(perftest, ["write", "-n", "3"], standalone_mode=False)
    assert res.exception is not None
    res = runner.invoke(perftest, ["write", "127.0.0.1", "-p", "1", "--retry", "0",
                                   "--json", "-n", "5"], standalone_mode=False)
    assert res.return_value == 1
    assert '"ok": false' in res.output


def test_cli_loopback_text_output():
    ready = threading.Event()
    port = []
    out = {}

    def serve():
        out["srv"] = pt.run_server("127.0.0.1", 0, pt.TestParams("write", size=256, iters=10),
                                   timeout=20, accept_timeout=20,
                                   on_listening=lambda p: (port.append(p), ready.set()))
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    assert ready.wait(10)
    res = CliRunner().invoke(perftest, ["write", "127.0.0.1", "-p", str(port[0]), "-s", "256",
                                        "-n", "10", "-F", "-R", "--report_gbits"],
                             standalone_mode=False)
    th.join(30)
    assert res.return_value == 0, res.output
    assert pt.result_header(True) in res.output
    lines = pt.parse_report_lines(res.output)
    assert len(lines) == 1 and (lines[0].size, lines[0].iters) == (256, 10)
    assert out["srv"]["remote_report"]["bytes"] == 256
