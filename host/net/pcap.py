"""pcap capture of one TCP connection's byte streams, for Wireshark's iWARP dissectors.

The host terminates TCP itself, so there are no packets to capture; this
module synthesizes them from the bytes the connection carried:
:class:`TcpRecorder` turns "sent these octets" / "received these octets" /
FIN / reset into Ethernet + IPv4 + TCP packets (classic pcap, linktype 1)
with the real addresses and ports of the connection, a three-way handshake
first, consistent sequence and acknowledgement numbers and valid IPv4 and
TCP checksums. :class:`RecordingSocket` is a :class:`socket.socket` that
records everything sent and received through it (``send``, ``sendall``,
``recv``, ``shutdown``, ``close``), so it can be handed to
:func:`rnic.host.net.cm.connect` / :func:`rnic.host.net.cm.accept` and the data paths
unchanged; :func:`record` wraps a connected socket.

Segmentation: every send or receive becomes one or more segments, and as
long as the stream has no markers each segment is additionally cut at MPA
boundaries (the Request/Reply frame, then each FPDU: 2 + ULPDU_Length +
pad + 4 octets), so every TCP segment starts with an FPDU as RFC 5044
intends and Wireshark's ``iwarp_mpa`` heuristic dissector (it starts on the
"MPA ID Req Frame" / "MPA ID Rep Frame" keys) decodes MPA, DDP and RDMAP
without TCP reassembly. Segments are at most :data:`MAX_SEGMENT` octets.
IPv6 connections are written with the IPv4 placeholders 10.0.0.1 (this
side) and 10.0.0.2 (the peer).

:func:`read_pcap`, :func:`parse_frame` and :func:`streams` read such a file
back (tests, tools): the frames, the decoded headers with checksum
verdicts, and the reassembled byte stream of each direction. :class:`FrameWriter` writes
real frames as they pass a cable (the simulated NIC's, whose TCP is in gateware).
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
import time

__all__ = [
    "LINKTYPE_ETHERNET", "LINKTYPE_RAW", "MAX_SEGMENT", "FrameWriter", "TcpRecorder",
    "RecordingSocket",
    "record", "read_pcap", "parse_frame", "streams", "checksum",
]

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101              # raw IP (LINKTYPE_RAW)
#: Largest TCP payload per synthesized segment (IPv4 total length <= 65535).
MAX_SEGMENT = 65000
_PCAP_MAGIC = 0xA1B2C3D4
_SNAPLEN = 262144
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
_MAC_LOCAL = bytes.fromhex("020000000001")
_MAC_REMOTE = bytes.fromhex("020000000002")
_ISN_LOCAL, _ISN_REMOTE = 0x10000000, 0x20000000
_MPA_KEY_PREFIX = b"MPA ID Re"


def checksum(data):
    """The Internet checksum (RFC 1071) of ``data``."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _ipv4(addr, fallback):
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return ipaddress.IPv4Address(fallback).packed
    if ip.version == 4:
        return ip.packed
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.packed
    return ipaddress.IPv4Address(fallback).packed


def _tcp_ip(src, dst, sport, dport, seq, ack, flags, payload, ip_id):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      5 << 4, flags, 0xFFFF, 0, 0) + payload
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
    csum = checksum(pseudo + tcp)
    tcp = tcp[:16] + struct.pack("!H", csum) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), ip_id & 0xFFFF, 0x4000, 64, 6, 0,
                     src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return ip + tcp


class _MpaCutter:
    """MPA unit boundaries of one direction: the Request/Reply frame, then FPDUs (no markers)."""

    def __init__(self):
        self.enabled = True
        self.peer = None
        self.frame = True
        self.hdr = b""
        self.start = 0              # stream offset of the current unit
        self.end = None             # its end, once its header is complete
        self.base = 0               # stream offset of the next octet fed

    def cuts(self, data):
        """Offsets inside ``data`` (excluding 0 and len) where an MPA unit ends."""
        out = []
        i, n = 0, len(data)
        while self.enabled and i < n:
            if self.end is None:
                want = (20 if self.frame else 2) - len(self.hdr)
                take = data[i:i + want]
                self.hdr += take
                i += len(take)
                if len(self.hdr) < (20 if self.frame else 2):
                    break
                if self.frame:
                    if not self.hdr.startswith(_MPA_KEY_PREFIX):
                        self.enabled = False
                        break
                    flags = self.hdr[16]
                    if flags & 0x80 and self.peer is not None:
                        self.peer.enabled = False      # M: the other direction carries markers
                    if flags & 0x20:
                        self.enabled = False           # a Reject: no FPDUs follow
                    length = 20 + struct.unpack("!H", self.hdr[18:20])[0]
                else:
                    ulen = struct.unpack("!H", self.hdr)[0]
                    length = 2 + ulen + (-(2 + ulen) % 4) + 4
                self.end = self.start + length
            if self.end <= self.base + n:
                i = self.end - self.base
                if 0 < i < n:
                    out.append(i)
                self.start, self.end, self.hdr, self.frame = self.end, None, b"", False
                if i >= n:
                    break
            else:
                i = n
        self.base += n
        return out


def _write_header(f, linktype):
    f.write(struct.pack("<IHHiIII", _PCAP_MAGIC, 2, 4, 0, 0, _SNAPLEN, linktype))


def _write_record(f, t, frame):
    sec = int(t)
    usec = min(int(round((t - sec) * 1e6)), 999999)
    f.write(struct.pack("<IIII", sec, usec, len(frame), len(frame)) + bytes(frame))


class FrameWriter:
    """Whole Ethernet frames to a pcap file (linktype 1) as they pass a cable, each with
    the time it passed; written and flushed at once, from any thread (``rnic nic-sim
    --pcap``). ``file``: a path (truncated) or a binary file object."""

    def __init__(self, file, *, clock=time.time):
        self._own = not hasattr(file, "write")
        self._f = open(file, "wb") if self._own else file
        self.clock = clock
        self.frames = 0
        self._lock = threading.Lock()
        _write_header(self._f, LINKTYPE_ETHERNET)
        self._f.flush()

    def write(self, frame):
        with self._lock:
            if self._f is None:
                return
            _write_record(self._f, self.clock(), frame)
            self._f.flush()
            self.frames += 1

    def close(self):
        with self._lock:
            if self._f is not None and self._own:
                self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TcpRecorder:
    """Writes the packets of one TCP connection to a pcap file as it happens.

    Parameters
    ----------
    file : str, path or binary file object
        Opened (truncated) for writing when a path; written and flushed per packet.
    local, remote : (host, port)
        This side's and the peer's socket addresses.
    active : bool
        This side opened the connection (its SYN comes first).
    linktype : int
        :data:`LINKTYPE_ETHERNET` (default) or :data:`LINKTYPE_RAW`.
    cut_mpa : bool
        Cut segments at MPA frame/FPDU boundaries (see the module docstring).
    """

    def __init__(self, file, *, local, remote, active=True, linktype=LINKTYPE_ETHERNET,
                 cut_mpa=True, clock=time.time):
        if linktype not in (LINKTYPE_ETHERNET, LINKTYPE_RAW):
            raise ValueError(f"linktype must be {LINKTYPE_ETHERNET} or {LINKTYPE_RAW}")
        self._own = not hasattr(file, "write")
        self._f = open(file, "wb") if self._own else file
        self.linktype = linktype
        self.clock = clock
        self._lock = threading.Lock()
        self.local_ip = _ipv4(local[0], "10.0.0.1")
        self.remote_ip = _ipv4(remote[0], "10.0.0.2")
        self.local_port, self.remote_port = int(local[1]), int(remote[1])
        self.tx_next = _ISN_LOCAL
        self.rx_next = _ISN_REMOTE
        self._ip_id = {True: 1, False: 1}
        self.fin_sent = self.fin_received = False
        self.closed = False
        self.packets = 0
        self.tx_octets = self.rx_octets = 0
        self._cut = {True: _MpaCutter(), False: _MpaCutter()}
        self._cut[True].peer, self._cut[False].peer = self._cut[False], self._cut[True]
        if not cut_mpa:
            for c in self._cut.values():
                c.enabled = False
        _write_header(self._f, linktype)
        # three-way handshake (ISNs consume one sequence number each)
        if active:
            self._packet(True, SYN, seq=self.tx_next - 1, ack=0)
            self._packet(False, SYN | ACK, seq=self.rx_next - 1, ack=self.tx_next)
            self._packet(True, ACK)
        else:
            self._packet(False, SYN, seq=self.rx_next - 1, ack=0)
            self._packet(True, SYN | ACK, seq=self.tx_next - 1, ack=self.rx_next)
            self._packet(False, ACK)
        self._f.flush()

    # -- packets ---------------------------------------------------------------------
    def _packet(self, outbound, flags, payload=b"", *, seq=None, ack=None):
        if outbound:
            src, dst, sport, dport = self.local_ip, self.remote_ip, self.local_port, self.remote_port
            seq = self.tx_next if seq is None else seq
            ack = self.rx_next if ack is None else ack
        else:
            src, dst, sport, dport = self.remote_ip, self.local_ip, self.remote_port, self.local_port
            seq = self.rx_next if seq is None else seq
            ack = self.tx_next if ack is None else ack
        ip_id = self._ip_id[outbound]
        self._ip_id[outbound] = (ip_id + 1) & 0xFFFF
        frame = _tcp_ip(src, dst, sport, dport, seq, ack, flags, payload, ip_id)
        if self.linktype == LINKTYPE_ETHERNET:
            macs = (_MAC_REMOTE + _MAC_LOCAL) if outbound else (_MAC_LOCAL + _MAC_REMOTE)
            frame = macs + b"\x08\x00" + frame
        _write_record(self._f, self.clock(), frame)
        self.packets += 1

    def _data(self, outbound, data):
        data = bytes(data)
        if not data:
            return
        with self._lock:
            if self.closed:
                return
            cuts = self._cut[outbound].cuts(data)
            bounds = [0] + cuts + [len(data)]
            for a, b in zip(bounds, bounds[1:]):
                for s in range(a, b, MAX_SEGMENT):
                    seg = data[s:min(b, s + MAX_SEGMENT)]
                    self._packet(outbound, PSH | ACK, seg)
                    if outbound:
                        self.tx_next += len(seg)
                    else:
                        self.rx_next += len(seg)
            if outbound:
                self.tx_octets += len(data)
            else:
                self.rx_octets += len(data)
            self._f.flush()

    def sent(self, data):
        """This side sent ``data``."""
        self._data(True, data)

    def received(self, data):
        """This side received ``data``."""
        self._data(False, data)

    def _fin(self, outbound):
        with self._lock:
            if self.closed or (self.fin_sent if outbound else self.fin_received):
                return
            self._packet(outbound, FIN | ACK)
            if outbound:
                self.fin_sent = True
                self.tx_next += 1
            else:
                self.fin_received = True
                self.rx_next += 1
            self._packet(not outbound, ACK)          # the other end acknowledges the FIN
            self._f.flush()

    def sent_fin(self):
        """This side half-closed (FIN)."""
        self._fin(True)

    def received_fin(self):
        """The peer half-closed (recv returned EOF)."""
        self._fin(False)

    def received_reset(self):
        """The peer reset the connection."""
        with self._lock:
            if self.closed:
                return
            self._packet(False, RST | ACK)
            self._f.flush()

    def close(self):
        """Stop recording and close the file (when it was opened here); idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._f.flush()
            if self._own:
                self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RecordingSocket(socket.socket):
    """A connected TCP socket whose traffic goes to a :class:`TcpRecorder` too.

    Made from a connected socket (which it takes over: ``sock`` is detached).
    """

    def __init__(self, sock, recorder):
        timeout = sock.gettimeout()
        super().__init__(sock.family, sock.type, sock.proto, fileno=sock.detach())
        self.settimeout(timeout)
        self.recorder = recorder

    def send(self, data, flags=0):
        n = super().send(data, flags)
        self.recorder.sent(memoryview(data)[:n])
        return n

    def sendall(self, data, flags=0):
        super().sendall(data, flags)
        self.recorder.sent(data)

    def recv(self, bufsize, flags=0):
        try:
            data = super().recv(bufsize, flags)
        except ConnectionResetError:
            self.recorder.received_reset()
            raise
        if not flags & socket.MSG_PEEK:
            if data:
                self.recorder.received(data)
            elif bufsize:
                self.recorder.received_fin()
        return data

    def shutdown(self, how):
        super().shutdown(how)
        if how in (socket.SHUT_WR, socket.SHUT_RDWR):
            self.recorder.sent_fin()

    def close(self):
        if self.fileno() != -1:
            self.recorder.sent_fin()
        super().close()
        self.recorder.close()


def record(sock, file, *, active, linktype=LINKTYPE_ETHERNET):
    """Wrap the connected ``sock`` in a :class:`RecordingSocket` writing to ``file``."""
    rec = TcpRecorder(file, local=sock.getsockname()[:2], remote=sock.getpeername()[:2],
                      active=active, linktype=linktype)
    return RecordingSocket(sock, rec)


# -- reading back ----------------------------------------------------------------------

def read_pcap(file):
    """``(linktype, [(timestamp, frame octets), ...])`` of a classic pcap file."""
    data = file.read() if hasattr(file, "read") else open(file, "rb").read()
    if len(data) < 24:
        raise ValueError("not a pcap file: shorter than its header")
    magic = struct.unpack("<I", data[:4])[0]
    if magic == _PCAP_MAGIC:
        e = "<"
    elif magic == 0xD4C3B2A1:
        e = ">"
    else:
        raise ValueError(f"not a classic pcap file (magic {magic:#010x})")
    linktype = struct.unpack(e + "I", data[20:24])[0]
    out, off = [], 24
    while off + 16 <= len(data):
        sec, usec, incl, _ = struct.unpack(e + "IIII", data[off:off + 16])
        off += 16
        if off + incl > len(data):
            raise ValueError(f"truncated packet record at offset {off - 16}")
        out.append((sec + usec / 1e6, data[off:off + incl]))
        off += incl
    return linktype, out


def parse_frame(frame, linktype=LINKTYPE_ETHERNET):
    """The IPv4/TCP fields of one frame, with ``ip_ok`` / ``tcp_ok`` checksum verdicts."""
    if linktype == LINKTYPE_ETHERNET:
        if frame[12:14] != b"\x08\x00":
            raise ValueError("not an IPv4 frame")
        frame = frame[14:]
    ihl = (frame[0] & 0x0F) * 4
    total = struct.unpack("!H", frame[2:4])[0]
    ip, seg = frame[:ihl], frame[ihl:total]
    if frame[9] != 6:
        raise ValueError("not TCP")
    src, dst = ip[12:16], ip[16:20]
    sport, dport, seq, ack, off, flags = struct.unpack("!HHIIBB", seg[:14])
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(seg))
    return {
        "src": str(ipaddress.IPv4Address(src)), "dst": str(ipaddress.IPv4Address(dst)),
        "sport": sport, "dport": dport, "seq": seq, "ack": ack, "flags": flags,
        "payload": bytes(seg[(off >> 4) * 4:]), "ip_ok": checksum(ip) == 0,
        "tcp_ok": checksum(pseudo + seg) == 0, "length": total,
    }


def streams(file):
    """Reassembled TCP payload per direction: ``{(src, sport, dst, dport): bytes}``.

    Segments are placed by sequence number (relative to each direction's
    SYN); a gap or an overlap that disagrees raises ValueError.
    """
    linktype, frames = read_pcap(file)
    isn, out = {}, {}
    for _, frame in frames:
        p = parse_frame(frame, linktype)
        key = (p["src"], p["sport"], p["dst"], p["dport"])
        if p["flags"] & SYN:
            isn[key] = p["seq"] + 1
            out.setdefault(key, bytearray())
            continue
        if not p["payload"]:
            continue
        if key not in isn:
            raise ValueError(f"data of {key} before its SYN")
        pos = (p["seq"] - isn[key]) & 0xFFFFFFFF
        buf = out[key]
        if pos > len(buf):
            raise ValueError(f"gap in {key} at {len(buf)} (segment at {pos})")
        overlap = buf[pos:pos + len(p["payload"])]
        if overlap != p["payload"][:len(overlap)]:
            raise ValueError(f"inconsistent retransmission in {key} at {pos}")
        buf[pos:pos + len(p["payload"])] = p["payload"]
    return {k: bytes(v) for k, v in out.items()}
