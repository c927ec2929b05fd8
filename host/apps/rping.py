"""rping's application protocol (librdmacm ``examples/rping.c``) over a :class:`~rnic.host.net.rnic_sw.DataPath`.

``rnic rping`` runs either side against a real ``rping`` (e.g. Linux siw in
the siw VM) or against itself. The protocol, as rping.c implements it:

* Every control message is one Send of a ``struct rping_rdma_info``:
  ``{__be64 buf; __be32 rkey; __be32 size}`` -- 16 octets, network byte
  order (:data:`INFO`). A receiver that gets another length fails ("Received
  bogus data, size N").
* Client, for each ping ``n`` (``-C`` pings; 0 = forever): fill its *start*
  buffer (``-S`` octets, default 64) with :func:`ping_buffer` (the text
  ``"rdma-ping-<n>: "`` followed by the letters ``A``..``z`` (65..122)
  cycling from a start letter that moves on by one per ping, last octet
  NUL); Send ``{start buf, rkey, size}``; wait for the server's "go ahead"
  Send; Send ``{rdma buf, rkey, size}`` of its *rdma* buffer; wait for the
  second "go ahead"; with ``-V`` compare the two buffers (``data
  mismatch!``); with ``-v`` print ``ping data: <rdma buf as a C string>``.
  After the last ping it disconnects.
* Server, per ping: receive the start info, RDMA Read ``size`` octets of
  the client's start buffer into its own rdma buffer, (``-v``: ``server ping
  data: <string>``), Send "go ahead" (rping's server sends its zeroed send
  buffer: 16 zero octets), receive the rdma info, RDMA Write ``strlen+1``
  octets of its buffer to it, Send "go ahead" again. It serves until the
  client disconnects (rping's server ignores ``-C``; so does this one).
  Extension: ``-V`` on the server checks the data it read against the
  pattern of ping ``n`` (rping's server does not validate).

Valid sizes are those of rping: :data:`MIN_SIZE` (26: ``sizeof("2147483647")
+ sizeof("rdma-ping-%d: ")``) .. :data:`MAX_SIZE` (65535).
"""

from __future__ import annotations

import collections
import socket
import struct
import time

from rnic.host.net import cm
from rnic.host.spec.errors import ErrorInfo, MpaError
from rnic.host.spec.regmap import CqQueue, CqStatus
from rnic.host.net.rnic_sw import Access, SendBuffer

__all__ = [
    "INFO", "MIN_SIZE", "MAX_SIZE", "DEFAULT_SIZE", "DEFAULT_PORT", "GO_AHEAD",
    "ping_buffer", "ping_text", "RpingError", "run_client", "run_server", "connect_retry",
]

#: ``struct rping_rdma_info`` {buf, rkey, size}, network byte order.
INFO = struct.Struct(">QII")
MIN_SIZE = 26
MAX_SIZE = 65535
DEFAULT_SIZE = 64
DEFAULT_PORT = 7174
#: What rping's server sends as "go ahead": its never-filled send buffer.
GO_AHEAD = bytes(INFO.size)


def ping_buffer(ping, size):
    """The client's start buffer for ping ``ping`` (0-based) of ``size`` octets (rping.c)."""
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"size {size} outside {MIN_SIZE}..{MAX_SIZE}")
    head = f"rdma-ping-{ping}: ".encode()[:size - 1]
    buf = bytearray(head)
    c = 65 + ping % 58               # start: 65, +1 per ping, 'z' (122) wraps to 'A'
    while len(buf) < size:
        buf.append(c)
        c = 65 if c >= 122 else c + 1
    buf[size - 1] = 0
    return bytes(buf)


def ping_text(buf):
    """``buf`` as rping's ``printf("%s")`` shows it: up to the first NUL."""
    end = buf.find(0)
    return bytes(buf if end < 0 else buf[:end]).decode("latin-1")


class RpingError(Exception):
    """The rping exchange failed; ``info`` is the connection's ErrorInfo if there is one."""

    def __init__(self, text, info=None):
        super().__init__(text)
        self.info = info


class _Disconnected(Exception):
    pass


class _Queues:
    """Completions of one data path, sorted into SQ (by wr_id) and RQ (in order)."""

    def __init__(self, dp, timeout):
        self.dp = dp
        self.timeout = timeout
        self.sq = {}
        self.rq = collections.deque()

    def _pump(self, deadline, what):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RpingError(f"timeout after {self.timeout} s waiting for {what}")
        for c in self.dp.poll(timeout=min(remaining, 0.2)):
            if c.queue == CqQueue.RQ:
                if c.status == CqStatus.FLUSHED and self.dp.closed:
                    continue
                self.rq.append(c)
            else:
                self.sq[c.wr_id] = c

    def _down(self, what):
        if self.dp.error is not None:
            from rnic.host.net.transfer import describe_error
            raise RpingError(f"connection failed while waiting for {what}: "
                             f"{describe_error(self.dp.error)}", self.dp.error)
        raise _Disconnected(what)

    def recv(self, what):
        deadline = time.monotonic() + self.timeout
        while not self.rq:
            if self.dp.closed:
                for c in self.dp.poll():
                    if c.queue == CqQueue.RQ and c.status != CqStatus.FLUSHED:
                        self.rq.append(c)
                    elif c.queue == CqQueue.SQ:
                        self.sq[c.wr_id] = c
                if not self.rq:
                    self._down(what)
                break
            self._pump(deadline, what)
        c = self.rq.popleft()
        if c.status != CqStatus.SUCCESS:
            raise RpingError(f"receive for {what} completed with {c.status.name.lower()}",
                             c.error or self.dp.error)
        data = self.dp.read_memory(c.addr, c.length)
        if c.length != INFO.size:
            raise RpingError(f"Received bogus data, size {c.length} (waiting for {what})")
        if not self.dp.closed:
            self.dp.post_recv(INFO.size)
        return data

    def done(self, wr_id, what):
        deadline = time.monotonic() + self.timeout
        while wr_id not in self.sq:
            if self.dp.closed:
                for c in self.dp.poll():
                    if c.queue == CqQueue.SQ:
                        self.sq[c.wr_id] = c
                if wr_id not in self.sq:
                    self._down(what)
                break
            self._pump(deadline, what)
        c = self.sq.pop(wr_id)
        if c.status != CqStatus.SUCCESS:
            from rnic.host.net.transfer import describe_error
            err = c.error or self.dp.error
            raise RpingError(f"{what} completed with {c.status.name.lower()}"
                             + (f" ({describe_error(err)})" if err else ""), err)
        return c


def _check_size(size):
    if isinstance(size, bool) or not isinstance(size, int) or not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"Invalid size {size} (valid range is {MIN_SIZE} to {MAX_SIZE})")


def run_client(dp, *, count=1, size=DEFAULT_SIZE, validate=False, on_ping=None, timeout=10.0,
               recv_depth=2):
    """rping client over ``dp``; returns the ping data strings (one per ping).

    ``count`` 0 pings forever. ``on_ping(n, text)`` is called after each
    ping. Raises :class:`RpingError` (the connection's error in ``info``).
    The caller closes ``dp``.
    """
    _check_size(size)
    if count < 0:
        raise ValueError(f"Invalid count {count}")
    access = Access.REMOTE_READ | Access.REMOTE_WRITE
    # VA-based regions, as librdmacm's rping: the TO advertised is the buffer's address; the
    # STags are the data path's (as an MR's keys), so rping connections can share a device
    start = dp.register_region(None, size, to=None, access=access)
    rdma = dp.register_region(None, size, to=None, access=access)
    start_addr, rdma_addr = start.addr, rdma.addr
    sends = SendBuffer(dp, INFO.size)       # rping's send_buf (each Send completes first)
    for _ in range(recv_depth):
        dp.post_recv(INFO.size)
    q = _Queues(dp, timeout)
    pings = []
    ping = 0
    try:
        while not count or ping < count:
            buf = ping_buffer(ping, size)
            dp.write_memory(start_addr, buf)
            q.done(sends.post("send", INFO.pack(start.base, start.stag, size)),
                   f"ping {ping}: start info Send")
            q.recv(f"ping {ping}: the server's go-ahead after its RDMA Read")
            q.done(sends.post("send", INFO.pack(rdma.base, rdma.stag, size)),
                   f"ping {ping}: rdma info Send")
            q.recv(f"ping {ping}: the server's go-ahead after its RDMA Write")
            got = dp.read_memory(rdma_addr, size)
            if validate and got != buf:
                raise RpingError(f"data mismatch! (ping {ping}: "
                                 f"{_first_diff(buf, got)})")
            text = ping_text(got)
            pings.append(text)
            if on_ping is not None:
                on_ping(ping, text)
            ping += 1
    except _Disconnected as d:
        raise RpingError(f"the server disconnected while waiting for {d}") from None
    return pings


def run_server(dp, *, size=DEFAULT_SIZE, validate=False, on_ping=None, timeout=10.0,
               recv_depth=2):
    """rping server over ``dp`` until the client disconnects; returns the ping data strings.

    ``on_ping(n, text)`` after each RDMA Read. ``validate`` checks the read
    data against :func:`ping_buffer`. Raises :class:`RpingError`.
    """
    _check_size(size)
    rdma = dp.register_region(None, size, to=None,
                              access=Access.REMOTE_READ | Access.REMOTE_WRITE)
    rdma_addr = rdma.addr
    sends = SendBuffer(dp, INFO.size)
    for _ in range(recv_depth):
        dp.post_recv(INFO.size)
    q = _Queues(dp, timeout)
    pings = []
    ping = 0
    while True:
        try:
            info = q.recv("the client's start info")
        except _Disconnected:
            return pings            # rping's server: the client's disconnect ends it (status 0)
        except RpingError:
            if ping and dp.closed and dp.error is not None and _peer_teardown(dp.error):
                return pings
            raise
        try:
            addr, rkey, rlen = INFO.unpack(info)
            if rlen > size:
                raise RpingError(f"ping {ping}: the client's buffer of {rlen} octets exceeds "
                                 f"this side's -S {size}")
            wr = dp.read(rlen, stag=rkey, to=addr, local_stag=rdma.stag, local_to=rdma.base)
            q.done(wr, f"ping {ping}: RDMA Read of {rlen} octets (STag {rkey:#x} TO {addr:#x})")
            got = dp.read_memory(rdma_addr, rlen)
            if validate:
                want = ping_buffer(ping, rlen) if rlen >= MIN_SIZE else None
                if got != want:
                    raise RpingError(f"data mismatch! (ping {ping}: "
                                     f"{_first_diff(want or b'', got)})")
            text = ping_text(got)
            pings.append(text)
            if on_ping is not None:
                on_ping(ping, text)
            q.done(sends.post("send", GO_AHEAD), f"ping {ping}: go-ahead Send after the RDMA Read")
            info = q.recv(f"ping {ping}: the client's rdma info")
            addr, rkey, wlen = INFO.unpack(info)
            n = min(len(text) + 1, size)
            if n > wlen:
                raise RpingError(f"ping {ping}: the client's rdma buffer of {wlen} octets is "
                                 f"smaller than the {n} octets to write")
            # (the Write's source: what the Read placed in the rdma buffer)
            q.done(dp.write(length=n, stag=rkey, to=addr, local_stag=rdma.stag,
                            local_to=rdma.base),
                   f"ping {ping}: RDMA Write of {n} octets (STag {rkey:#x} TO {addr:#x})")
            q.done(sends.post("send", GO_AHEAD), f"ping {ping}: go-ahead Send after the RDMA Write")
        except _Disconnected as d:
            raise RpingError(f"the client disconnected in the middle of ping {ping} "
                             f"(waiting for {d})") from None
        ping += 1


def _peer_teardown(info):
    """True for a connection loss that a disconnecting peer causes (reset / FIN mid-FPDU)."""
    return info.layer == 2 and info.ecode == MpaError.TCP_CLOSED


def _first_diff(want, got):
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return f"first difference at octet {i}: expected {a:#04x}, got {b:#04x}"
    if len(want) != len(got):
        return f"{len(got)} octets, expected {len(want)}"
    return "equal"


def connect_retry(address, params, *, retry=0.0, wrap=None, on_retry=None, send_rtr=True):
    """:func:`rnic.host.net.cm.connect` to ``address``, retried for ``retry`` seconds while the
    TCP connection is refused or closed before the MPA Reply (a peer not listening yet,
    e.g. a VM still booting behind a forwarded port). Each attempt waits up to
    ``params.timeout`` for the Reply: an attempt must not be abandoned early,
    because qemu's user-mode network may deliver its Request to the guest
    seconds later (it retries its SYN to a booting guest with TCP backoff), and
    a single-connection server such as ``rping -s`` would then see it reset.

    ``wrap(sock)`` may replace the connected socket (e.g. a pcap recorder)
    before MPA setup; ``on_retry(text)`` is told about each failed attempt.
    Returns the :class:`rnic.host.net.cm.Negotiated`.
    """
    deadline = time.monotonic() + retry
    while True:
        try:
            sock = socket.create_connection(address, timeout=params.timeout)
        except OSError as e:
            if time.monotonic() < deadline:
                if on_retry is not None:
                    on_retry(f"TCP connect: {e}")
                time.sleep(0.2)
                continue
            raise cm.MpaSetupError(ErrorInfo.mpa(
                MpaError.TCP_CLOSED, f"TCP connection to {address[0]}:{address[1]} failed: "
                f"{e}")) from None
        if wrap is not None:
            sock = wrap(sock)
        try:
            return cm.connect(sock, params, send_rtr=send_rtr)
        except cm.MpaRejected:
            raise
        except cm.MpaSetupError as e:
            if (e.frame is None and e.info.ecode == MpaError.TCP_CLOSED
                    and time.monotonic() < deadline):
                if on_retry is not None:
                    on_retry(e.info.text)
                time.sleep(0.2)
                continue
            raise
