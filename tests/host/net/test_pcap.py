"""rnic.host.net.pcap: synthesized TCP captures read back byte-exact, with valid headers."""

import io
import socket
import struct
import threading

import pytest

from rnic.host.net import cm, pcap
from rnic.host.model.fpdu import FpduEncoder
from rnic.host.model.mpa_frames import MpaFrame, build as build_frame
from rnic.host.net.rnic_sw import SoftwareRnic


def _recorder(buf, **kw):
    return pcap.TcpRecorder(buf, local=("127.0.0.1", 40000), remote=("127.0.0.1", 7174), **kw)


def _flags(frames, linktype=pcap.LINKTYPE_ETHERNET):
    return [pcap.parse_frame(f, linktype)["flags"] for _, f in frames]


def test_checksum_rfc1071_example():
    # RFC 1071 section 3 example: 00 01 f2 03 f4 f5 f6 f7 -> sum ddf2, checksum 220d
    assert pcap.checksum(bytes.fromhex("0001f203f4f5f6f7")) == 0x220D


@pytest.mark.parametrize("linktype", [pcap.LINKTYPE_ETHERNET, pcap.LINKTYPE_RAW])
def test_round_trip_both_directions(linktype):
    buf = io.BytesIO()
    rec = _recorder(buf, linktype=linktype)
    rec.sent(b"hello")
    rec.received(b"world, longer")
    rec.sent(b"!" * 70000)                      # more than one segment
    rec.received_fin()
    rec.sent_fin()
    rec.close()
    buf.seek(0)
    lt, frames = pcap.read_pcap(buf)
    assert lt == linktype
    for _, f in frames:
        p = pcap.parse_frame(f, linktype)
        assert p["ip_ok"] and p["tcp_ok"]
        assert len(p["payload"]) <= pcap.MAX_SEGMENT
    fl = _flags(frames, linktype)
    assert fl[:3] == [pcap.SYN, pcap.SYN | pcap.ACK, pcap.ACK]
    assert sum(1 for f in fl if f & pcap.FIN) == 2
    buf.seek(0)
    st = pcap.streams(buf)
    assert st[("127.0.0.1", 40000, "127.0.0.1", 7174)] == b"hello" + b"!" * 70000
    assert st[("127.0.0.1", 7174, "127.0.0.1", 40000)] == b"world, longer"


def test_seq_and_ack_numbers_are_consistent():
    buf = io.BytesIO()
    rec = _recorder(buf)
    rec.sent(b"abc")
    rec.received(b"defg")
    rec.sent(b"h")
    rec.close()
    buf.seek(0)
    _, frames = pcap.read_pcap(buf)
    pk = [pcap.parse_frame(f) for _, f in frames]
    syn, synack = pk[0], pk[1]
    data = [p for p in pk if p["payload"]]
    a, b, c = data
    assert a["seq"] == syn["seq"] + 1 and a["ack"] == synack["seq"] + 1
    assert b["seq"] == synack["seq"] + 1 and b["ack"] == a["seq"] + 3
    assert c["seq"] == a["seq"] + 3 and c["ack"] == b["seq"] + 4


def test_passive_side_handshake_starts_with_the_peer():
    buf = io.BytesIO()
    _recorder(buf, active=False).close()
    buf.seek(0)
    _, frames = pcap.read_pcap(buf)
    first = pcap.parse_frame(frames[0][1])
    assert first["flags"] == pcap.SYN and first["sport"] == 7174


def test_segments_cut_at_mpa_boundaries():
    """One recv holding a frame and two FPDUs becomes three segments, each starting a unit."""
    req = build_frame(MpaFrame(kind="request", crc=True, rev=2, enhanced=True, ird=4, ord=4))
    enc = FpduEncoder(markers=False, crc=True)
    f1, f2 = enc.encode(b"\x41" * 18), enc.encode(b"\x42" * 31)
    buf = io.BytesIO()
    rec = _recorder(buf)
    rec.received(req + f1[:5])                  # a unit split over two reads
    rec.received(f1[5:] + f2)
    rec.close()
    buf.seek(0)
    _, frames = pcap.read_pcap(buf)
    payloads = [pcap.parse_frame(f)["payload"] for _, f in frames if pcap.parse_frame(f)["payload"]]
    assert payloads == [req, f1[:5], f1[5:], f2]


def test_markers_disable_cutting_for_that_direction():
    req = build_frame(MpaFrame(kind="request", markers=True, crc=True, rev=1))
    buf = io.BytesIO()
    rec = _recorder(buf)
    rec.sent(req)
    rep = build_frame(MpaFrame(kind="reply", crc=True, rev=1))
    rec.received(rep + b"\0" * 40)              # the responder sends markers: no cuts
    rec.close()
    buf.seek(0)
    _, frames = pcap.read_pcap(buf)
    payloads = [pcap.parse_frame(f)["payload"] for _, f in frames if pcap.parse_frame(f)["payload"]]
    assert payloads == [req, rep + b"\0" * 40]


def test_read_pcap_rejects_other_files():
    with pytest.raises(ValueError):
        pcap.read_pcap(io.BytesIO(b"\0" * 30))


def test_recording_socket_captures_an_mpa_connection(tmp_path):
    """A whole connection (MPA setup, Sends, FIN) recorded on both ends: each file
    reassembles to exactly the bytes each side sent and received."""
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    got = {}

    def server():
        s, _ = srv.accept()
        s = pcap.record(s, tmp_path / "srv.pcap", active=False)
        neg = cm.accept(s, cm.ConnParams())
        dp = SoftwareRnic(neg)
        dp.post_recv(100)
        (c,) = dp.poll(timeout=10)
        got["data"] = dp.data(c)
        dp.close()

    t = threading.Thread(target=server)
    t.start()
    s = socket.create_connection(("127.0.0.1", port))
    s = pcap.record(s, tmp_path / "cli.pcap", active=True)
    sent, received = bytearray(), bytearray()
    rec = s.recorder
    orig_sent, orig_received = rec.sent, rec.received
    rec.sent = lambda d: (sent.extend(bytes(d)), orig_sent(d))
    rec.received = lambda d: (received.extend(bytes(d)), orig_received(d))
    neg = cm.connect(s, cm.ConnParams())
    dp = SoftwareRnic(neg)
    dp.wait(dp.send(b"ping over pcap"), timeout=10)
    dp.close()
    t.join(10)
    srv.close()
    assert got["data"] == b"ping over pcap"
    cli = pcap.streams(tmp_path / "cli.pcap")
    srvs = pcap.streams(tmp_path / "srv.pcap")
    local = s.recorder
    out_key = ("127.0.0.1", local.local_port, "127.0.0.1", port)
    in_key = ("127.0.0.1", port, "127.0.0.1", local.local_port)
    assert cli[out_key] == bytes(sent) and cli[in_key] == bytes(received)
    assert srvs == cli                           # the same connection seen from the other end
    assert cli[out_key].startswith(b"MPA ID Req Frame")
    assert cli[in_key].startswith(b"MPA ID Rep Frame")
    _, frames = pcap.read_pcap(tmp_path / "cli.pcap")
    fl = _flags(frames)
    assert sum(1 for f in fl if f & pcap.FIN) == 2
    # every data segment starts at an MPA unit: the frames, then FPDUs
    for _, f in frames:
        p = pcap.parse_frame(f)
        assert p["ip_ok"] and p["tcp_ok"]
        if p["payload"] and not p["payload"].startswith(b"MPA ID"):
            ulen = struct.unpack("!H", p["payload"][:2])[0]
            assert len(p["payload"]) == 2 + ulen + (-(2 + ulen) % 4) + 4
