"""perftest's bandwidth tests over rdma_cm (``ib_send_bw -R``, ``ib_write_bw -R``, ``ib_read_bw -R``).

``rnic perftest send|write|read [SERVER]`` runs either side of a perftest
bandwidth test against the real perftest (checked with perftest 4.5-0.17,
internal version "6.06", on Linux siw in the siw VM) or against itself.

The protocol with ``-R``, as perftest 6.06 runs it (read from perftest's
sources -- ``perftest_communication.c``, ``perftest_resources.c``,
``send_bw.c``, ``write_bw.c`` -- and checked octet by octet in captures of
perftest against perftest on siw):

* **Two MPA connections** to the same port. The first (perftest's
  "communication" context, ``use_rdma_cm``) carries only the parameter
  exchange; the second (the "rdma_cm QP", ``work_rdma_cm``) carries the test
  traffic. Both are rdma_cm connections: MPA Rev 2 (RFC 6581, siw's
  default) with no ULP private data, so the MPA private data is just the
  4-octet IRD/ORD word: 0/0 on the exchange connection and on the test
  connection of send and write; ``-o`` (outstanding reads, default the
  device maximum: 128 on siw) both ways for read. No markers; CRC as the
  two sides negotiate (siw-to-siw: none).
* **Exchange messages**: every message is one Send on the first
  connection; each side keeps exactly one receive buffer of
  ``sizeof(struct pingpong_dest)`` = 56 octets posted, so the exchange is
  lock-step: in every step the client sends first and then receives, the
  server receives first and then sends (``ctx_xchg_data``,
  ``ctx_hand_shake``). Messages, in order:

  1. version: 16 octets, the NUL-padded string (``"6.06"``);
  2. if the peer's version is >= 5.32, ``check_sys_data``: the cycle buffer
     (page size, 4096) and then the cache line size (64), each a 4-octet
     big-endian int in its own message; both sides use the larger value;
  3. ``check_mtu``: 2 octets, the ibv_mtu enum as a decimal string and a
     NUL (``"3\\0"`` = 1024);
  4. ``create_rdma_cm_connection``: a handshake with an all-zero
     ``pingpong_dest`` (the server is listening for the test connection),
     the client connects the test connection, another all-zero handshake;
  5. three ``pingpong_dest`` handshakes with the real values (per-QP
     exchange, "after moving QP to RTR", per-QP again for printing);
  6. send only: the server posts its receive buffers, one more handshake,
     then the client sends (with ``-a``: per size a handshake before and one
     after the run);
  7. write/read: after its run the client does one handshake (the server
     waits in it during the test), then ``xchg_bw_reports``: five 8-octet
     messages -- message size (big-endian u64), iterations (big-endian u64;
     a 4-octet int if the peer's version is below 5.33), BW peak, BW average
     and message rate (big-endian IEEE doubles, MB/s or Gb/s as the client
     reports them, Mpps). The server prints the client's numbers (it sends
     back whatever is in its never-filled report: stack garbage in perftest,
     zeros here). Send has no report exchange (each side measures itself);
  8. ``ctx_close_connection``: a last handshake; then both sides disconnect.

  ``struct pingpong_dest`` on the wire (:data:`DEST`, 56 octets, perftest's
  ``HAVE_ENDIAN`` path): lid, out_reads, qpn, psn, rkey (big-endian 32-bit
  each), 4 octets of padding (uninitialised in perftest), vaddr (big-endian
  64-bit), gid (16 octets), srqn and gid_index (big-endian 32-bit; the
  receiver ignores both). ``rkey``/``vaddr`` are the STag and TO of the
  side's buffer: the target of the peer's RDMA Writes (write), the source
  of its RDMA Reads (read), the credit word (send, see below).
* **Test traffic**: write: RDMA Writes of ``-s`` octets to the server's
  rkey at ``vaddr + k*INC`` (INC = size rounded up to the cache line,
  wrapping every cycle buffer; always ``vaddr`` when the size exceeds half
  the cycle buffer: perftest's ``increase_rem_addr``); read: RDMA Read
  Requests of the same addresses; send: Sends of ``-s`` octets into the
  server's receive buffers. Completions are signalled every ``-Q``
  (cq_mod) work requests and on the last one; at most ``-t`` (tx_depth)
  work requests are outstanding -- all local matters, invisible on the
  wire.
* **Send credits (iWARP only)**: iWARP has no RNR retry, so ib_send_bw on
  an iWARP device (``send_rcredit``) advertises, in its ``pingpong_dest``,
  a 4-octet credit word (rkey, vaddr). The server RDMA-Writes its running
  count of received messages into the client's credit word -- a
  *little-endian* (host order) 32-bit value -- whenever ``rcnt % rx_depth``
  is a multiple of ``rx_depth // 3``; the client posts Send ``s`` only
  while ``s + 1 - credit < rx_depth``. Both sides derive ``rx_depth`` from
  their own options (``-r``, default 512, at most ``-n``).

Notes on this implementation:

* The exchange connection always runs on the software RNIC; ``--device``
  puts only the test connection on a device's data path (``sim``: the
  Verilated RNIC core does the MPA framing/deframing).
* The active side waits :data:`FIRST_FPDU_DELAY` after the MPA Reply of the
  test connection before the measured run (siw 6.1 can miss an FPDU that
  follows its Reply at once); a client waits :data:`CLOSE_PAUSE`
  after the close handshake before closing; a server waits (at most
  :data:`PEER_CLOSE_WAIT`) for the client to close the exchange connection first.
* perftest's GID, LID, QPN and PSN mean nothing on iWARP with rdma_cm; they
  are exchanged and printed, not used.

Bandwidth is reported as perftest does (``print_report_bw``): BW average =
size x iterations / (last completion - first post), BW peak = the best
size x (j - i + 1) / (tcompleted[j] - tposted[i]) over the moderated
completion points, MB = 2^20 octets (``--report_gbits``: Gb = 10^9 bits),
MsgRate in millions of messages per second. A send server measures from
its first receive to its last (no peak).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import random
import socket
import struct
import time
import zlib

from rnic.host.net import cm, nic_tcp
from rnic.host.spec.errors import ErrorInfo, MpaError
from rnic.host.spec.regmap import CqQueue, CqStatus
from rnic.host.net.rnic_sw import Access, SendBuffer, SoftwareRnic

__all__ = [
    "VERSION", "DEST", "Dest", "BwReport", "TestParams", "PerftestError",
    "encode_version", "decode_version", "encode_int", "decode_int", "encode_mtu", "decode_mtu",
    "encode_report", "decode_report", "encode_credit", "decode_credit",
    "inc", "remote_offsets", "compute_report", "format_report_line", "result_header",
    "RESULT_LINE", "run_client", "run_server",
]

#: The perftest version this implementation speaks (perftest 4.5-0.17 = "6.06").
VERSION = "6.06"
VERSION_LEN = 16
#: ``struct pingpong_dest`` as rdma_write_keys() sends it (HAVE_ENDIAN): 56 octets.
DEST = struct.Struct(">iiiiI4xQ16sIi")
#: Size of the receive buffer perftest posts for each exchange message.
EXCHANGE_RECV = DEST.size
DEFAULT_PORT = 18515
DEFAULT_SIZE = 65536
DEFAULT_ITERS = {"send": 1000, "write": 5000, "read": 5000}
DEF_TX_BW = 128
DEF_RX_SEND = 512
DEF_CQ_MOD = 100
#: perftest's defaults when the device does not say otherwise (siw's max_qp_rd_atom is 128).
DEF_OUT_READS = 128
DEF_CYCLE_BUFFER = 4096
DEF_CACHE_LINE = 64
#: IBV_MTU_1024 (what perftest/siw exchange for an iWARP device on a 1500-octet link).
DEF_MTU_ENUM = 3
MAX_SIZE = 1 << 23
MIN_ITERS = 5
MSG_SIZE_CQ_MOD_LIMIT = 8192
NO_PEAK_ABOVE = 20000
MBS = 0x100000                     # perftest's MB: 2^20 octets
GBITS = 125000000                  # perftest's Gb: 10^9 bits
RESULT_LINE = "-" * 87

#: The STags this side exposes (the TOs are the buffers' addresses, as perftest's pointers),
#: and the exchange connection's local send buffer (its Sends are gathered there); each in
#: its own row of a device's STag table (row s mod 256), as they share a device.
BUF_STAG = 0x00A1B200
CREDIT_STAG = 0x00A1C301
EXCHANGE_STAG = 0x00A1D402
EXCHANGE_SEND = 4096
#: Seconds without a received octet after which an offloaded data path is taken as done.
QUIET = 0.3
#: Extra receive buffers a send server posts beyond its rx_depth (the peer's may be larger).
RX_MARGIN = 16
#: Pause between siw's MPA Reply and our first FPDU (see tools/siw-vm/README.md).
FIRST_FPDU_DELAY = 0.1
#: Pause of a client between the close handshake and closing its connections.
CLOSE_PAUSE = 0.2
#: Longest wait of a server, after the close handshake, for the client to close the exchange
#: connection before it closes its connections itself.
PEER_CLOSE_WAIT = 10.0


class PerftestError(Exception):
    """The test failed; ``info`` is the connection's ErrorInfo when there is one."""

    def __init__(self, text, info=None):
        super().__init__(text)
        self.info = info


# -- codecs ----------------------------------------------------------------------------------

def encode_version(version=VERSION):
    """The 16-octet version message (NUL padded)."""
    raw = version.encode("ascii")
    if len(raw) >= VERSION_LEN:
        raise ValueError(f"version {version!r} does not fit {VERSION_LEN - 1} characters")
    return raw.ljust(VERSION_LEN, b"\0")


def decode_version(data):
    """The version string of a version message (up to the first NUL)."""
    return bytes(data[:VERSION_LEN]).split(b"\0", 1)[0].decode("ascii", "replace")


def version_number(version):
    """``atof()`` of a version string (0.0 when it does not start with a number)."""
    num = ""
    for ch in version:
        if ch.isdigit() or (ch == "." and "." not in num):
            num += ch
        else:
            break
    try:
        return float(num)
    except ValueError:
        return 0.0


def encode_int(v):
    """A 4-octet big-endian int message (cycle buffer, cache line size)."""
    return struct.pack(">i", v)


def decode_int(data):
    if len(data) < 4:
        raise PerftestError(f"expected a 4-octet int, got {len(data)} octets")
    return struct.unpack(">i", bytes(data[:4]))[0]


def encode_mtu(mtu_enum=DEF_MTU_ENUM):
    """The 2-octet MTU message: the ibv_mtu enum (1..5) in decimal and a NUL."""
    if not 1 <= mtu_enum <= 9:
        raise ValueError(f"ibv_mtu enum {mtu_enum} is not 1..9")
    return f"{mtu_enum}".encode() + b"\0"


def decode_mtu(data):
    text = bytes(data).split(b"\0", 1)[0].decode("ascii", "replace")
    if not text.isdigit():
        raise PerftestError(f"bad MTU message {bytes(data).hex()}")
    return int(text)


def mtu_octets(mtu_enum):
    return 128 << mtu_enum


@dataclasses.dataclass(frozen=True)
class Dest:
    """``struct pingpong_dest``."""
    lid: int = 0
    out_reads: int = 0
    qpn: int = 0
    psn: int = 0
    rkey: int = 0
    vaddr: int = 0
    gid: bytes = bytes(16)
    srqn: int = 0
    gid_index: int = 0

    def pack(self):
        return DEST.pack(self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr,
                         bytes(self.gid).ljust(16, b"\0")[:16], self.srqn, self.gid_index)

    @classmethod
    def unpack(cls, data):
        if len(data) < DEST.size:
            raise PerftestError(f"expected a {DEST.size}-octet pingpong_dest, got {len(data)} "
                                "octets")
        lid, out_reads, qpn, psn, rkey, vaddr, gid, srqn, gid_index = DEST.unpack(
            bytes(data[:DEST.size]))
        return cls(lid, out_reads, qpn, psn, rkey, vaddr, gid, srqn, gid_index)

    def to_json(self):
        return {"lid": self.lid, "out_reads": self.out_reads, "qpn": self.qpn, "psn": self.psn,
                "rkey": self.rkey, "vaddr": self.vaddr, "gid": self.gid.hex()}

    def text(self, side):
        gid = ":".join(f"{b:02d}" for b in self.gid)
        return (f" {side} address: LID {self.lid:04x} QPN {self.qpn:#06x} PSN {self.psn:#08x}\n"
                f" GID: {gid}")


ZERO_DEST = Dest()


@dataclasses.dataclass(frozen=True)
class BwReport:
    """``struct bw_report_data`` as exchanged (size, iters, peak, average, message rate)."""
    size: int
    iters: int
    bw_peak: float
    bw_avg: float
    msg_rate: float

    def to_json(self):
        return {"bytes": self.size, "iterations": self.iters, "bw_peak": self.bw_peak,
                "bw_average": self.bw_avg, "msg_rate_mpps": self.msg_rate}


def encode_report(rep, peer_version=VERSION):
    """The five report messages of ``xchg_bw_reports`` (iters is 4 octets before 5.33)."""
    iters = (struct.pack(">Q", rep.iters & (2**64 - 1)) if version_number(peer_version) >= 5.33
             else struct.pack(">i", rep.iters))
    return [struct.pack(">Q", rep.size), iters, struct.pack(">d", rep.bw_peak),
            struct.pack(">d", rep.bw_avg), struct.pack(">d", rep.msg_rate)]


def decode_report(msgs, peer_version=VERSION):
    if len(msgs) != 5:
        raise PerftestError(f"a bw report is 5 messages, not {len(msgs)}")
    wide = version_number(peer_version) >= 5.33
    for m, n in zip(msgs, (8, 8 if wide else 4, 8, 8, 8)):
        if len(m) < n:
            raise PerftestError(f"bw report message of {len(m)} octets, expected {n}")
    size = struct.unpack(">Q", msgs[0][:8])[0]
    iters = struct.unpack(">Q", msgs[1][:8])[0] if wide else struct.unpack(">i", msgs[1][:4])[0]
    peak, avg, rate = (struct.unpack(">d", m[:8])[0] for m in msgs[2:])
    return BwReport(size, iters, peak, avg, rate)


def encode_credit(count):
    """A send credit: the receive count as a little-endian 32-bit word (perftest's host order)."""
    return struct.pack("<I", count & 0xFFFFFFFF)


def decode_credit(data):
    return struct.unpack("<I", bytes(data[:4]))[0]


# -- parameters -----------------------------------------------------------------------------

def inc(size, cache_line):
    """perftest's INC(): the size rounded up to the cache line."""
    return -(-size // cache_line) * cache_line


def remote_offsets(size, count, cache_line=DEF_CACHE_LINE, cycle_buffer=DEF_CYCLE_BUFFER):
    """Offsets from the peer's vaddr (and our buffer) of messages 0..count-1 (increase_rem_addr)."""
    if size > cycle_buffer // 2:
        return [0] * count
    step = inc(size, cache_line)
    slots = max(cycle_buffer // step, 1)
    return [(k % slots) * step for k in range(count)]


def buffer_span(size, cache_line=DEF_CACHE_LINE, cycle_buffer=DEF_CYCLE_BUFFER):
    """Octets of a buffer that every message of ``size`` fits in (perftest's BUFF_SIZE)."""
    return max(size, cycle_buffer, inc(size, cache_line))


@dataclasses.dataclass
class TestParams:
    """The options of a perftest run and perftest's derived values (``force_dependecies``)."""
    test: str
    size: int = DEFAULT_SIZE
    iters: int | None = None
    tx_depth: int = DEF_TX_BW
    rx_depth: int = DEF_RX_SEND
    cq_mod: int | None = None
    out_reads: int = DEF_OUT_READS
    run_all: bool = False
    report_gbits: bool = False
    no_peak: bool = False
    cycle_buffer: int = DEF_CYCLE_BUFFER
    cache_line: int = DEF_CACHE_LINE
    mtu: int = DEF_MTU_ENUM

    def __post_init__(self):
        if self.test not in ("send", "write", "read"):
            raise ValueError(f"test must be send, write or read, not {self.test!r}")
        if self.iters is None:
            self.iters = DEFAULT_ITERS[self.test]
        if self.iters < MIN_ITERS:
            raise ValueError(f"iterations must be at least {MIN_ITERS}")
        if not 1 <= self.size <= MAX_SIZE:
            raise ValueError(f"size must be 1..{MAX_SIZE}")
        if self.tx_depth < 1 or self.rx_depth < 1:
            raise ValueError("tx/rx depth must be at least 1")
        if self.out_reads < 1:
            raise ValueError("outstanding reads must be at least 1")
        req_cq_mod = self.cq_mod is not None
        if self.cq_mod is None:
            self.cq_mod = DEF_CQ_MOD
        if self.cq_mod < 1:
            raise ValueError("cq_mod must be at least 1")
        self.tx_depth = min(self.tx_depth, self.iters)
        if self.test == "send":
            self.rx_depth = min(self.rx_depth, self.iters)
        if (self.size > MSG_SIZE_CQ_MOD_LIMIT and not self.run_all and not req_cq_mod):
            self.cq_mod = 1
        self.cq_mod = min(self.cq_mod, self.tx_depth)
        if self.iters > NO_PEAK_ABOVE:
            self.no_peak = True
        if self.run_all:
            self.size = MAX_SIZE

    @property
    def sizes(self):
        return [1 << i for i in range(1, 24)] if self.run_all else [self.size]

    @property
    def credit_cnt(self):
        return max(self.rx_depth // 3, 1)

    @property
    def format_factor(self):
        return GBITS if self.report_gbits else MBS

    def to_json(self):
        return {"test": self.test, "size": self.size, "iterations": self.iters,
                "tx_depth": self.tx_depth, "rx_depth": self.rx_depth, "cq_mod": self.cq_mod,
                "out_reads": self.out_reads, "all": self.run_all,
                "units": "Gb/sec" if self.report_gbits else "MB/sec", "no_peak": self.no_peak,
                "cycle_buffer": self.cycle_buffer, "cache_line": self.cache_line,
                "mtu": mtu_octets(self.mtu)}


# -- reports --------------------------------------------------------------------------------

def compute_report(size, iters, tposted, tcompleted, *, format_factor=MBS, no_peak=False):
    """perftest's ``print_report_bw`` numbers.

    ``tposted[i]``: time (s) work request i was posted; ``tcompleted``: dict
    index -> time of the moderated completion points (perftest fills
    ``tcompleted[totccnt-1]`` at each completion). The average runs from
    ``tposted[0]`` to the last completion.
    """
    if not tcompleted:
        raise ValueError("no completion times")
    last = tcompleted[max(tcompleted)]
    total = max(last - tposted[0], 1e-9)
    bw_avg = size * iters / total / format_factor
    msg_rate = iters / total / 1e6
    bw_peak = 0.0
    if not no_peak:
        points = sorted(tcompleted)
        best = None
        # perftest compares every (posted i, completed j >= i) pair; bounded here
        stride = max(1, (len(tposted) * len(points)) // 4_000_000)
        for i in range(0, len(tposted), stride):
            tp = tposted[i]
            for j in points:
                if j < i:
                    continue
                t = (tcompleted[j] - tp) / (j - i + 1)
                if t > 0 and (best is None or t < best):
                    best = t
        if best:
            bw_peak = size / best / format_factor
    return BwReport(size, iters, bw_peak, bw_avg, msg_rate)


def result_header(gbits=False):
    unit = "Gb/sec" if gbits else "MB/sec"
    return f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]"


def format_report_line(rep):
    """One result line exactly as perftest prints it (REPORT_FMT)."""
    return (f" {rep.size:<7d}    {rep.iters:<10d}       {rep.bw_peak:<7.2f}            "
            f"{rep.bw_avg:<7.2f}\t\t   {rep.msg_rate:<7.6f}")


def parse_report_lines(text):
    """The result lines of perftest output (ours or perftest's): list of BwReport."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0].isdigit() and parts[1].isdigit():
            try:
                out.append(BwReport(int(parts[0]), int(parts[1]), float(parts[2]),
                                    float(parts[3]), float(parts[4])))
            except ValueError:
                continue
    return out


# -- the exchange connection ----------------------------------------------------------------

class _Comm:
    """perftest's exchange connection: lock-step Send/Receive of small messages."""

    RECV_BUFFERS = 2

    def __init__(self, dp, role, timeout):
        self.dp = dp
        self.role = role
        self.timeout = timeout
        self.rq = collections.deque()
        self.sq = {}
        self.sent = self.received = 0
        for _ in range(self.RECV_BUFFERS):
            dp.post_recv(EXCHANGE_RECV)
        self.send_buf = SendBuffer(dp, EXCHANGE_SEND, stag=EXCHANGE_STAG)
        dp.start()

    def _fail(self, what):
        err = self.dp.error
        if err is not None:
            from rnic.host.net.transfer import describe_error
            raise PerftestError(f"exchange connection failed while waiting for {what}: "
                                f"{describe_error(err)}", err)
        raise PerftestError(f"the peer closed the exchange connection while waiting for {what}")

    def _pump(self, deadline, what):
        if deadline is not None and time.monotonic() > deadline:
            raise PerftestError(f"timeout after {self.timeout} s waiting for {what}")
        for c in self.dp.poll(timeout=0.2):
            if c.queue == CqQueue.RQ:
                self.rq.append(c)
            else:
                self.sq[c.wr_id] = c
        if self.dp.closed and not self.rq:
            for c in self.dp.poll():
                (self.rq.append(c) if c.queue == CqQueue.RQ else self.sq.__setitem__(c.wr_id, c))
            if not self.rq:
                self._fail(what)

    def send(self, data, what):
        wr = self.send_buf.post("send", data)     # (lock-step: the one before completed)
        deadline = time.monotonic() + self.timeout
        while wr not in self.sq:
            if self.dp.closed:
                for c in self.dp.poll():
                    (self.rq.append(c) if c.queue == CqQueue.RQ
                     else self.sq.__setitem__(c.wr_id, c))
                if wr not in self.sq:
                    self._fail(f"the Send of {what}")
                break
            self._pump(deadline, f"the Send of {what}")
        c = self.sq.pop(wr)
        if c.status != CqStatus.SUCCESS:
            raise PerftestError(f"Send of {what} completed with {c.status.name.lower()}",
                                c.error or self.dp.error)
        self.sent += 1

    def recv(self, what, *, timeout="default"):
        limit = self.timeout if timeout == "default" else timeout
        deadline = None if limit is None else time.monotonic() + limit
        while not self.rq:
            self._pump(deadline, what)
        c = self.rq.popleft()
        if c.status == CqStatus.FLUSHED and self.dp.closed and self.dp.error is None:
            raise PerftestError(f"the peer closed the exchange connection while waiting for "
                                f"{what} (did perftest fail on its side?)")
        if c.status != CqStatus.SUCCESS:
            raise PerftestError(f"receive of {what} completed with {c.status.name.lower()}",
                                c.error or self.dp.error)
        data = self.dp.read_memory(c.addr, c.length)
        if not self.dp.closed:
            self.dp.post_recv(EXCHANGE_RECV)
        self.received += 1
        return data

    def xchg(self, data, what, *, timeout="default"):
        """Client: send, then receive; server: receive, then send. Returns the peer's message."""
        if self.role == "client":
            self.send(data, what)
            return self.recv(what, timeout=timeout)
        got = self.recv(what, timeout=timeout)
        self.send(data, what)
        return got

    def handshake(self, dest, what, *, timeout="default"):
        return Dest.unpack(self.xchg(dest.pack(), what, timeout=timeout))


# -- connection helpers ---------------------------------------------------------------------

def _conn_params(*, crc, timeout, ird=0, ord_=0, device=None):
    """The connection parameters; a device's data path may hold fewer inbound Read Requests
    than perftest's peers ask for (``Device.read_limit``): IRD is raised at most to that."""
    limit = getattr(device, "read_limit", None) or 0x3FFE
    return cm.ConnParams(rev=2, markers=False, crc=crc, ird=min(ird, limit), ord=ord_,
                         ird_max=max(min(ird, limit), limit), timeout=timeout,
                         first_fpdu_delay=FIRST_FPDU_DELAY)


def connect_retry(address, params, *, retry=0.0, send_rtr=True):
    """:func:`rnic.host.net.cm.connect`, retried for ``retry`` seconds while the connection is refused
    or closed before the MPA Reply (a peer not listening yet, e.g. behind qemu's forwarding)."""
    deadline = time.monotonic() + retry
    while True:
        try:
            sock = socket.create_connection(address, timeout=params.timeout)
        except OSError as e:
            if time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            raise cm.MpaSetupError(ErrorInfo.mpa(
                MpaError.TCP_CLOSED, f"TCP connection to {address[0]}:{address[1]} failed: "
                f"{e}")) from None
        try:
            return cm.connect(sock, params, send_rtr=send_rtr)
        except cm.MpaRejected:
            raise
        except cm.MpaSetupError as e:
            if e.frame is None and e.info.ecode == MpaError.TCP_CLOSED \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            raise


def _accept(srv, params, timeout, what):
    if isinstance(srv, nic_tcp.NicListening):
        try:
            return srv.accept_mpa(params, timeout)
        except nic_tcp.NicTcpError as e:
            raise PerftestError(f"no {what}: {e}") from None
    srv.settimeout(timeout)
    try:
        sock, addr = srv.accept()
    except socket.timeout:
        raise PerftestError(f"no {what} within {timeout} s") from None
    return cm.accept(sock, params), f"{addr[0]}:{addr[1]}"


def _connect(address, params, *, device, retry, send_rtr=True):
    """The Negotiated of a connection to ``address``: over the host's TCP, or the NIC's own
    on a device whose TCP is in gateware."""
    if nic_tcp.has_tcp(device):
        try:
            neg, _ = nic_tcp.nic_connect_retry(device, *address, params, retry=retry)
        except nic_tcp.NicTcpError as e:
            raise cm.MpaSetupError(ErrorInfo.mpa(MpaError.TCP_CLOSED, str(e))) from None
        return neg
    return connect_retry(address, params, retry=retry, send_rtr=send_rtr)


def _exchange_datapath(neg, device):
    """The exchange connection's data path: the software RNIC over the host's TCP, the NIC's
    (a second connection of its core) over the NIC's own."""
    if isinstance(neg.sock, nic_tcp.NicStream):
        from rnic.host.net.transfer import make_datapath
        return make_datapath(neg, device)
    return SoftwareRnic(neg, linger=0.5)


def _close_all(*dps):
    for dp in dps:
        if dp is None:
            continue
        try:
            dp.close(timeout=2.0)
        except Exception:
            pass


# -- the test ------------------------------------------------------------------------------

class _Run:
    """One side of one test: setup through the exchange, the traffic, the report."""

    def __init__(self, p, role, *, timeout, emit, device=None):
        self.p = p
        self.role = role
        self.timeout = timeout
        self.emit = emit
        self.device = device
        self.comm = None
        self.dp = None
        self.peer_version = None
        self.local = None
        self.remote = None
        self.results = []
        self.remote_report = None
        self.traffic = {"messages": 0, "octets": 0}
        self.negotiated = {}
        self._digests = []

    # -- setup
    def exchange_setup(self):
        p, comm = self.p, self.comm
        self.peer_version = decode_version(comm.xchg(encode_version(), "the version"))
        if version_number(self.peer_version) >= 5.32:
            rc = decode_int(comm.xchg(encode_int(p.cycle_buffer), "the cycle buffer size"))
            rl = decode_int(comm.xchg(encode_int(p.cache_line), "the cache line size"))
            p.cycle_buffer = max(p.cycle_buffer, rc)
            p.cache_line = max(p.cache_line, rl)
        p.mtu = min(p.mtu, decode_mtu(comm.xchg(encode_mtu(p.mtu), "the MTU")))

    def make_datapath(self, neg):
        from rnic.host.net.transfer import make_datapath, negotiated_json
        self.negotiated["test"] = negotiated_json(neg)
        if self.device is None:
            return SoftwareRnic(neg, linger=0.5)
        dp = make_datapath(neg, self.device)
        if isinstance(neg.sock, nic_tcp.NicStream):
            # a NIC's Reply waits for its data path's first receive buffer or its start
            # (rnic.host.net.nic_tcp): the handshakes come first here, and the peer sends
            # nothing on the test QP before them
            dp.start()
        return dp

    def setup_buffers(self):
        """Register this side's buffer (write/read) or credit word (send); returns my Dest."""
        p, dp = self.p, self.dp
        psn = random.getrandbits(24)
        if p.test == "send":
            # the credit word: the client's is where the server's credit Writes land, the
            # server's the source of those Writes
            self.credit = SendBuffer(dp, 8, stag=CREDIT_STAG, access=Access.REMOTE_WRITE)
            self.credit_addr = self.credit.region.addr
            rkey, vaddr = CREDIT_STAG, self.credit.region.base
            self.span = buffer_span(max(p.sizes), p.cache_line, p.cycle_buffer)
            self.pattern = _pattern(self.span, 0x5E)
            if self.role == "client":                   # the Sends' source
                region = dp.register_region(BUF_STAG, self.span, to=None, access=Access.NONE,
                                            data=self.pattern)
                self.buf_addr, self.buf_to = region.addr, region.base
        else:
            self.span = buffer_span(max(p.sizes), p.cache_line, p.cycle_buffer)
            access = Access.REMOTE_WRITE if p.test == "write" else Access.REMOTE_READ
            if self.role == "client":
                access = Access.REMOTE_WRITE if p.test == "read" else Access.NONE
            # the server's buffer: a known pattern (what a read client gets); the client's:
            # its own pattern (what a write server receives).
            self.pattern = _pattern(self.span, 0xA5 if self.role == "server" else 0x3C)
            fill = self.pattern if (self.role == "server" and p.test == "read") or \
                (self.role == "client" and p.test == "write") else None
            region = dp.register_region(BUF_STAG, self.span, to=None, access=access, data=fill)
            self.buf_addr, self.buf_to = region.addr, region.base
            rkey, vaddr = BUF_STAG, region.base
        out_reads = p.out_reads if p.test == "read" else 1
        self.local = Dest(lid=0, out_reads=out_reads, qpn=1 if self.role == "client" else 2,
                          psn=psn, rkey=rkey, vaddr=vaddr)
        dp.start()
        return self.local

    def dest_handshakes(self):
        rem = None
        for what in ("the QP data", "the handshake after RTR", "the QP data (again)"):
            rem = self.comm.handshake(self.local, what)
        self.remote = rem
        self.emit("dest", local=self.local, remote=rem)

    # -- traffic
    def check_dp(self, what):
        if self.dp.closed:
            from rnic.host.net.transfer import describe_error
            err = self.dp.error
            raise PerftestError(f"test connection down during {what}"
                                + (f": {describe_error(err)}" if err else ""), err)

    def client_run(self, size):
        """run_iter_bw: post the work requests of one size; returns the BwReport."""
        p, dp, rem = self.p, self.dp, self.remote
        n = p.iters
        offs = remote_offsets(size, n, p.cache_line, p.cycle_buffer)
        if p.test == "send":
            dp.write_memory(self.credit_addr, bytes(4))
        tposted = [0.0] * n
        tcompleted = {}
        scnt = ccnt = 0
        cq = p.cq_mod
        last_progress = time.monotonic()
        while scnt < n or ccnt < n:
            blocked_by_credit = False
            while scnt < n and scnt + 1 <= p.tx_depth + ccnt:
                if p.test == "send":
                    credit = decode_credit(dp.read_memory(self.credit_addr, 4))
                    if ((scnt + 1 - credit) & 0xFFFFFFFF) >= p.rx_depth:
                        blocked_by_credit = True
                        break
                signaled = cq == 1 or scnt % cq == cq - 1 or scnt == n - 1
                tposted[scnt] = time.perf_counter()
                o = offs[scnt]
                # (every work request names its octets in the registered buffer)
                if p.test == "send":
                    dp.post_send("send", length=size, local_stag=BUF_STAG,
                                 local_to=self.buf_to + o, signaled=signaled)
                elif p.test == "write":
                    dp.post_send("write", length=size, stag=rem.rkey, to=rem.vaddr + o,
                                 local_stag=BUF_STAG, local_to=self.buf_to + o,
                                 signaled=signaled)
                else:
                    dp.post_send("read", length=size, stag=rem.rkey, to=rem.vaddr + o,
                                 local_stag=BUF_STAG, local_to=self.buf_to + o, signaled=signaled)
                scnt += 1
                last_progress = time.monotonic()
            if ccnt < n or blocked_by_credit:
                wait = 0.002 if blocked_by_credit else 0.05
                for c in dp.poll(timeout=wait):
                    if c.queue != CqQueue.SQ:
                        continue
                    if c.status != CqStatus.SUCCESS:
                        from rnic.host.net.transfer import describe_error
                        err = c.error or dp.error
                        raise PerftestError(
                            f"{p.test} completed with {c.status.name.lower()} after {ccnt} of "
                            f"{n}" + (f": {describe_error(err)}" if err else ""), err)
                    ccnt += cq
                    tcompleted[min(ccnt, n) - 1] = time.perf_counter()
                    last_progress = time.monotonic()
                self.check_dp(f"the {p.test} test")
                if time.monotonic() - last_progress > self.timeout:
                    raise PerftestError(f"no progress for {self.timeout} s ({scnt} posted, "
                                        f"{ccnt} completed of {n}"
                                        + (", waiting for send credits" if blocked_by_credit
                                           else "") + ")")
        rep = compute_report(size, n, tposted, tcompleted, format_factor=p.format_factor,
                             no_peak=p.no_peak)
        self.traffic["messages"] += n
        self.traffic["octets"] += n * size
        if p.test == "read":
            span = max(offs) + size
            data = dp.read_memory(self.buf_addr, span)
            self._digests.append(hashlib.sha256(data).hexdigest())
            self.traffic["nonzero"] = any(data)
        return rep

    def send_server_post(self, size):
        """Post the receive buffers of one size (ctx_set_recv_wqes) before the handshake."""
        p, dp = self.p, self.dp
        n = p.iters
        nslots = min(n, p.rx_depth + RX_MARGIN)
        alloc = getattr(dp, "alloc", None) or dp.rnic.alloc
        base = alloc(nslots * size)
        self._slots = [base + i * size for i in range(nslots)]
        self._slot_of = {}
        self._posted = 0
        for i in range(nslots):
            self._post_slot(i, size)

    def _post_slot(self, i, size):
        wr = self.dp.post_recv(size, addr=self._slots[i])
        self._slot_of[wr] = i
        self._posted += 1

    def send_server_run(self, size):
        """run_iter_bw_server with iWARP credits; returns the server's own BwReport."""
        p, dp, rem = self.p, self.dp, self.remote
        n = p.iters
        rcnt = 0
        t_first = None
        digests = collections.Counter()
        octets = 0
        credit_wrs = set()
        last_progress = time.monotonic()
        while rcnt < n:
            got = dp.poll(timeout=0.05)
            for c in got:
                if c.queue == CqQueue.SQ:
                    credit_wrs.discard(c.wr_id)
                    if c.status != CqStatus.SUCCESS:
                        raise PerftestError(f"credit RDMA Write completed with "
                                            f"{c.status.name.lower()}", c.error or dp.error)
                    continue
                if c.status != CqStatus.SUCCESS:
                    from rnic.host.net.transfer import describe_error
                    err = c.error or dp.error
                    raise PerftestError(f"receive {rcnt} completed with {c.status.name.lower()}"
                                        + (f": {describe_error(err)}" if err else ""), err)
                if t_first is None:
                    t_first = time.perf_counter()
                rcnt += 1
                last_progress = time.monotonic()
                if c.length != size:
                    raise PerftestError(f"message {rcnt} has {c.length} octets, expected {size}")
                octets += c.length
                digests[zlib.crc32(dp.read_memory(c.addr, c.length))] += 1
                slot = self._slot_of.pop(c.wr_id)
                if self._posted < n:
                    self._post_slot(slot, size)
                if (rcnt % p.rx_depth) % p.credit_cnt == 0 or rcnt == n:
                    # (a newer count may overwrite one not yet sent: credits only grow)
                    wr = self.credit.post("write", encode_credit(rcnt), stag=rem.rkey,
                                          to=rem.vaddr)
                    credit_wrs.add(wr)
            if rcnt < n:
                self.check_dp("the send test")
                if time.monotonic() - last_progress > self.timeout:
                    raise PerftestError(f"no Send for {self.timeout} s ({rcnt} of {n} received)")
        t_end = time.perf_counter()
        deadline = time.monotonic() + self.timeout
        while credit_wrs and time.monotonic() < deadline and not dp.closed:
            for c in dp.poll(timeout=0.05):
                if c.queue == CqQueue.SQ:
                    credit_wrs.discard(c.wr_id)
        self.traffic["messages"] += rcnt
        self.traffic["octets"] += octets
        self.traffic.setdefault("distinct_payloads", 0)
        self.traffic["distinct_payloads"] = max(self.traffic["distinct_payloads"], len(digests))
        return compute_report(size, n, [t_first], {0: t_end}, format_factor=p.format_factor,
                              no_peak=True)

    def server_events(self):
        """Inbound RDMA Writes / Reads seen by a write/read server."""
        evs = self.dp.poll_events()
        kinds = collections.Counter(e.kind for e in evs)
        octets = sum(e.length or 0 for e in evs if e.kind in ("remote_write", "remote_read"))
        return kinds, octets

    # -- flows
    def client_flow(self):
        p, comm = self.p, self.comm
        for size in p.sizes:
            if p.test == "send":
                comm.handshake(self.local, "the go-ahead before the test")
            rep = self.client_run(size)
            self.results.append(rep)
            self.emit("result", report=rep)
            if p.test == "send" and p.run_all:
                comm.handshake(self.local, "the handshake after the test")
        if p.test != "send":
            comm.handshake(self.local, "the end of the test", timeout=None)
            msgs = encode_report(self.results[-1], self.peer_version)
            got = [comm.xchg(m, f"bw report field {i}") for i, m in enumerate(msgs)]
            self.peer_report_raw = got
        comm.handshake(self.local, "the close handshake")
        # let the server finish its last Send before our FINs arrive (seen once with siw
        # and -a: its close-handshake Send completed with LOC_QP_OP_ERR)
        time.sleep(CLOSE_PAUSE)

    def server_flow(self):
        p, comm = self.p, self.comm
        if p.test == "send":
            for size in p.sizes:
                self.send_server_post(size)
                comm.handshake(self.local, "the go-ahead before the test")
                rep = self.send_server_run(size)
                self.results.append(rep)
                self.emit("result", report=rep)
                if p.run_all:
                    comm.handshake(self.local, "the handshake after the test", timeout=None)
        else:
            comm.handshake(self.local, "the end of the client's test", timeout=None)
            mine = encode_report(BwReport(0, 0, 0.0, 0.0, 0.0), self.peer_version)
            got = [comm.xchg(m, f"bw report field {i}") for i, m in enumerate(mine)]
            self.remote_report = decode_report(got, self.peer_version)
            self.results.append(self.remote_report)
            self.emit("result", report=self.remote_report)
            # a write client's Writes complete when they are in its socket: the last ones can
            # still be on their way through this side's data path (the simulated hardware is
            # slow); wait for them (bounded) so that the counts and the buffer are complete
            if getattr(self.dp, "reports_remote_access", True):
                kind = "remote_write" if p.test == "write" else "remote_read"
                want = p.iters * len(p.sizes)
                n = octets = 0
                deadline = time.monotonic() + self.timeout
                while True:
                    kinds, got = self.server_events()
                    n += kinds.get(kind, 0)
                    octets += got
                    if n >= want or time.monotonic() > deadline or self.dp.closed:
                        break
                    time.sleep(0.02)
                self.traffic["messages"] += n
                self.traffic["octets"] += octets
            else:
                # an offloaded data path places Writes and answers Reads without telling the
                # host (as an RNIC does): no counts; wait until its receive side is quiet
                self.dp.wait_quiet(QUIET, timeout=self.timeout)
                self.traffic["messages"] = self.traffic["octets"] = None
            if p.test == "write":
                span = max(remote_offsets(self.remote_report.size or 1, p.iters, p.cache_line,
                                          p.cycle_buffer)) + (self.remote_report.size or 0)
                data = self.dp.read_memory(self.buf_addr, min(span, self.span))
                self._digests.append(hashlib.sha256(data).hexdigest())
                self.traffic["nonzero"] = any(data)
        comm.handshake(self.local, "the close handshake")
        # perftest's client disconnects once it has our close message. Closing first raced a
        # client slowed down by a busy machine: our socket was gone before the client's
        # stack had finished its last Send, so the client saw a reset ("Bad wc status 2",
        # LOC_QP_OP_ERR, "Failed to close connection"). Let the client go first.
        comm.dp.wait_closed(min(self.timeout, PEER_CLOSE_WAIT))

    def run_test_qp(self, tneg):
        """On the negotiated test QP connection: the data path, the handshakes, this role's
        flow; returns the result dict."""
        self.dp = self.make_datapath(tneg)
        self.comm.handshake(ZERO_DEST, "the handshake after the test QP connected")
        self.setup_buffers()
        self.dest_handshakes()
        (self.client_flow if self.role == "client" else self.server_flow)()
        return self.result()

    def result(self, ok=True, error=None):
        out = {"ok": ok, "test": self.p.test, "role": self.role,
               "peer_version": self.peer_version, "params": self.p.to_json(),
               "local": self.local.to_json() if self.local else None,
               "remote": self.remote.to_json() if self.remote else None,
               "results": [r.to_json() for r in self.results],
               "traffic": dict(self.traffic, digests=self._digests),
               "negotiated": self.negotiated,
               "exchange_messages": {"sent": self.comm.sent if self.comm else 0,
                                     "received": self.comm.received if self.comm else 0}}
        if self.remote_report is not None:
            out["remote_report"] = self.remote_report.to_json()
        if self.device is not None and self.dp is not None:
            out["device"] = {"spec": self.device.spec, "datapath": type(self.dp).__name__}
            status = getattr(self.dp, "device_status", None)
            if status is not None:
                try:
                    out["device"]["status"] = status()
                except Exception as e:          # noqa: BLE001 - informational only
                    out["device"]["status_error"] = repr(e)
        if error is not None:
            out["error"] = error
        return out


def _pattern(n, seed):
    """``n`` octets of a cheap deterministic pattern (a 251-octet cycle, so it does not align
    with 2^k message slots)."""
    block = bytes((i * 7 + seed) & 0xFF for i in range(251))
    reps = -(-n // len(block)) + 1
    return (block * reps)[:n]


def expected_pattern(role_of_owner, n):
    """The buffer content a peer of this implementation sees (tests): a read server's buffer
    (``"server"``) or a write client's buffer (``"client"``)."""
    return _pattern(n, 0xA5 if role_of_owner == "server" else 0x3C)


def run_client(server, port, p, *, device=None, crc=True, timeout=30.0, retry=30.0,
               emit=None):
    """Client side of ``ib_<test>_bw -R SERVER``; returns the result dict (raises PerftestError).

    ``emit(kind, **kw)`` gets what a front end prints (``rnic perftest``: perftest's table):
    ``"dest"`` (``local``, ``remote``: the two :class:`Dest`) once the QPs are exchanged,
    ``"result"`` (``report``: a :class:`BwReport`) per size."""
    emit = emit or (lambda kind, **kw: None)
    r = _Run(p, "client", timeout=timeout, emit=emit, device=device)
    cdp = None
    try:
        cneg = _connect((server, port), _conn_params(crc=crc, timeout=timeout), device=device,
                        retry=retry)
        from rnic.host.net.transfer import negotiated_json
        r.negotiated["exchange"] = negotiated_json(cneg)
        cdp = _exchange_datapath(cneg, device)
        r.comm = _Comm(cdp, "client", timeout)
        r.exchange_setup()
        r.comm.handshake(ZERO_DEST, "the go-ahead to connect the test QP")
        reads = p.out_reads if p.test == "read" else 0
        tneg = _connect((server, port), _conn_params(crc=crc, timeout=timeout, ird=reads,
                                                     ord_=reads, device=device),
                        device=device, retry=max(retry, 5.0), send_rtr=False)
        # siw may miss an FPDU that follows its Reply at once (cm.ConnParams.first_fpdu_delay):
        # let that pause pass here, not inside the measured run
        time.sleep(FIRST_FPDU_DELAY)
        return r.run_test_qp(tneg)
    except (cm.MpaSetupError, OSError) as e:
        info = getattr(e, "info", None)
        raise PerftestError(f"connection setup failed: {e}", info) from None
    finally:
        _close_all(r.dp, cdp)


def run_server(host, port, p, *, device=None, crc=True, timeout=30.0, accept_timeout=None,
               emit=None, on_listening=None):
    """Server side of ``ib_<test>_bw -R`` (one client); returns the result dict.

    ``emit`` as for :func:`run_client`; ``on_listening(port)`` once the socket listens."""
    emit = emit or (lambda kind, **kw: None)
    r = _Run(p, "server", timeout=timeout, emit=emit, device=device)
    cdp = None
    try:
        srv = (nic_tcp.NicListening(device, port) if nic_tcp.has_tcp(device)
               else socket.create_server((host, port)))
    except OSError as e:
        raise PerftestError(f"cannot listen on {host}:{port}: {e}") from None
    try:
        with srv:
            if on_listening is not None:
                on_listening(port if isinstance(srv, nic_tcp.NicListening)
                             else srv.getsockname()[1])
            reads = p.out_reads if p.test == "read" else 0
            cneg, peer = _accept(srv, _conn_params(crc=crc, timeout=timeout),
                                 accept_timeout, "client")
            from rnic.host.net.transfer import negotiated_json
            r.negotiated["exchange"] = negotiated_json(cneg)
            r.peer = peer
            cdp = _exchange_datapath(cneg, device)
            r.comm = _Comm(cdp, "server", timeout)
            r.exchange_setup()
            r.comm.handshake(ZERO_DEST, "the go-ahead to connect the test QP")
            tneg, _ = _accept(srv, _conn_params(crc=crc, timeout=timeout, ird=reads,
                                                ord_=reads, device=device),
                              timeout, "test QP connection")
            return r.run_test_qp(tneg)
    except (cm.MpaSetupError, OSError) as e:
        info = getattr(e, "info", None)
        raise PerftestError(f"connection setup failed: {e}", info) from None
    finally:
        _close_all(r.dp, cdp)
