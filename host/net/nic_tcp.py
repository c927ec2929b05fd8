"""MPA connections over the NIC's own TCP: the host negotiates through the stream port, then
the RNIC core moves every payload octet.

A device whose TCP is in gateware (TCP_CAPS.TCP: :class:`rnic.hdl.nic_top.NicTop`, the
simulated NIC or a board) opens and accepts TCP connections itself (TCP_CMD.CONNECT, the
listening slots). Each connection starts as a byte stream that the host reads and writes
through the stream port (TCP_STREAM_*), which is all MPA's negotiation needs:

* :class:`NicStream` is a socket-like object over one such connection (``recv``,
  ``sendall``, ``shutdown``, ``settimeout``; ``getsockopt(TCP_MAXSEG)`` is the
  connection's send MSS), so :func:`rnic.host.net.cm.connect` and
  :func:`rnic.host.net.cm.accept` run unchanged over it;
* :func:`nic_connect` opens a connection from the NIC and negotiates as the initiator;
  :func:`nic_accept` takes a connection the NIC accepted on a listening port and
  negotiates as the responder. Either commits the connection to FPDUs
  (:func:`commit`: TCP_CMD.MODE and the core's context) between two octets nobody has
  sent yet: the responder before its Reply goes out, the initiator once the Reply is in;
* :class:`NicRnic` is the :class:`~rnic.host.net.rnic_sw.DataPath` of such a connection:
  :class:`~rnic.host.net.rnic_offload.OffloadRnic` without its socket pump (the core's
  FPDUs go to and come from TCP in the NIC); its thread posts what waits for room in the
  SQ and RQ, takes completions and reports, and watches the connection's TCP events
  (the peer's FIN, a reset, a lost connection).

The connection events and the stream port's runs of all connections come out of one
queue each; :class:`TcpMux` (one per device, in its shared state) keeps them per
connection. Every register sequence runs under the device's lock.
"""

from __future__ import annotations

import collections
import math
import secrets
import socket
import time

from rnic.host.driver.tcp_regs import STREAM_SEND_MAX
from rnic.host.net import cm
from rnic.host.net.rnic_offload import OffloadRnic
from rnic.host.net.transfer import device_lock, shared_state
from rnic.host.spec.errors import ErrorInfo, MpaError
from rnic.host.spec.tcp_engine import TcpEventKind

__all__ = ["TcpMux", "NicStream", "NicRnic", "NicListening", "nic_connect", "nic_connect_retry",
           "nic_accept", "nic_listen", "wait_accepted", "commit", "has_tcp", "ephemeral_port",
           "NicTcpError", "tcp_mux"]

#: Events after which a connection receives nothing more.
_ENDS = {TcpEventKind.PEER_CLOSED, TcpEventKind.CLOSED, TcpEventKind.RESET,
         TcpEventKind.LOST, TcpEventKind.REFUSED}
#: Events that end a connection abnormally.
_FAILS = {TcpEventKind.RESET, TcpEventKind.LOST, TcpEventKind.REFUSED}
#: Events after which a connection sends nothing more.
_SEND_ENDS = _FAILS | {TcpEventKind.CLOSED}
#: Seconds between looks at the registers while waiting.
_POLL = 0.002


class NicTcpError(ConnectionError):
    """The NIC's TCP connection failed (refused, reset, lost, or its stream broken)."""


class TcpMux:
    """The NIC's connection events and stream-port runs, kept per connection (the device's
    lock held for every method)."""

    def __init__(self, device):
        self.regs = device.regs
        self.events = collections.defaultdict(collections.deque)     # conn -> kinds
        self.octets = collections.defaultdict(bytearray)             # conn -> stream octets
        self.broken = set()                                          # conns with lost octets

    def poll(self):
        """Take what the registers hold now."""
        for conn, data, truncated in self.regs.tcp_stream_runs():
            self.octets[conn] += data
            if truncated:
                self.broken.add(conn)
        for event in self.regs.tcp_events():
            self.events[event.conn].append(event.kind)

    def ended(self, conn):
        """Whether the last connection on id ``conn`` is over for sending (reset, lost,
        refused or closed)."""
        for kind in reversed(self.events[conn]):
            if kind in _SEND_ENDS:
                return True
            if kind in (TcpEventKind.ACCEPTED, TcpEventKind.CONNECTED):
                return False
        return False

    def cancel_stale_send(self):
        """Drop a stream send that waits for a connection that is over, by the events
        :meth:`poll` took: it would hold the port, and every other connection's
        negotiation, for ever (a peer may reset a connection while the host answers it).
        True when one was dropped."""
        regs = self.regs
        if not regs.field("TCP_STREAM_TX_STATUS", "BUSY"):
            return False
        if not self.ended(regs.field("TCP_STREAM_TX_CONN", "CONN")):
            return False
        return regs.tcp_stream_cancel()

    def forget(self, conn):
        """A connection id is reused: drop what is kept for its previous connection."""
        self.events.pop(conn, None)
        self.octets.pop(conn, None)
        self.broken.discard(conn)


def tcp_mux(device):
    """The device's :class:`TcpMux` (one per device)."""
    sh = shared_state(device)
    if sh.tcp is None:
        sh.tcp = TcpMux(device)
    return sh.tcp


class NicStream:
    """One NIC connection's byte stream as a blocking socket (the part of the socket API MPA
    setup uses). ``recv`` returns b"" after the peer's FIN and raises
    :class:`NicTcpError` after a reset, a lost connection or dropped octets; ``sendall``
    raises it on a connection that is over, and first drops a stream send still waiting
    for another connection that is over (:meth:`TcpMux.cancel_stale_send`)."""

    family = socket.AF_INET

    def __init__(self, device, conn):
        self.device, self.conn = device, conn
        self._lock = device_lock(device)
        self._mux = tcp_mux(device)
        self._timeout = None
        self._shut = False
        self._held = None           # octets sent while held (None: not held)
        self.ended = None           # the event that ended the stream

    def settimeout(self, timeout):
        self._timeout = timeout

    def setblocking(self, flag):
        self._timeout = None if flag else 0.0

    def setsockopt(self, *args):
        pass                        # (TCP_NODELAY: the NIC sends each run at once)

    def getsockopt(self, level, name, *args):
        if (level, name) != (socket.IPPROTO_TCP, socket.TCP_MAXSEG):
            raise OSError(f"NicStream has no socket option {level}/{name}")
        with self._lock:
            return self.device.regs.tcp_connection(self.conn).mss

    def _events(self):
        """The stream's end, if an event ended it (lock held)."""
        for kind in self._mux.events[self.conn]:
            if kind in _ENDS and self.ended is None:
                self.ended = kind
        return self.ended

    def recv(self, n):
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            with self._lock:
                self._mux.poll()
                if self.conn in self._mux.broken:
                    raise NicTcpError(f"connection {self.conn}: the stream port dropped "
                                      "octets of it")
                buf = self._mux.octets[self.conn]
                if buf:
                    out = bytes(buf[:n])
                    del buf[:n]
                    return out
                ended = self._events()
            if ended in _FAILS:
                raise NicTcpError(f"connection {self.conn}: {ended.name.lower()}")
            if ended is not None:
                return b""
            if deadline is not None and time.monotonic() >= deadline:
                if self._timeout == 0:
                    raise BlockingIOError("no octets yet")
                raise socket.timeout("timed out")
            time.sleep(_POLL)

    def hold(self):
        """Keep what is sent from now on until :meth:`release`."""
        if self._held is None:
            self._held = bytearray()

    def release(self):
        """Send what was held, and from now on send at once."""
        held, self._held = self._held, None
        if held:
            self.sendall(held)

    def sendall(self, data):
        data = bytes(data)
        if self._held is not None:
            self._held += data
            return
        for pos in range(0, len(data), STREAM_SEND_MAX):
            with self._lock:
                self._mux.poll()
                ended = self._events()
                if ended in _SEND_ENDS:
                    raise NicTcpError(f"connection {self.conn}: {ended.name.lower()}")
                self._mux.cancel_stale_send()
                self.device.regs.tcp_stream_send(self.conn, data[pos:pos + STREAM_SEND_MAX])

    def send(self, data):
        self.sendall(data)
        return len(data)

    def shutdown(self, how):
        """A FIN after what was sent (any ``how``: the NIC's TCP has no half-close of reads)."""
        with self._lock:
            if not self._shut:
                self._shut = True
                self.device.regs.tcp_close(self.conn)

    def close(self):
        self.shutdown(socket.SHUT_RDWR)

    def mpa_accept(self, params=None, *, reject=False, rx_mulpdu=2048):
        """:func:`nic_accept` on this connection."""
        return nic_accept(self.device, self.conn, params, reject=reject, rx_mulpdu=rx_mulpdu)

    def datapath(self, neg, **kw):
        """The data path of the connection negotiated over this stream
        (:func:`rnic.host.net.transfer.make_datapath` asks for it)."""
        kw.pop("conn", None)
        return NicRnic(neg, self.device, conn=self.conn, **kw)

    def peer(self):
        """``ip:port`` of the peer."""
        with self._lock:
            tcb = self.device.regs.tcp_connection(self.conn)
        return f"{tcb.remote_ip}:{tcb.remote_port}"


def commit(device, conn, neg, *, rx_mulpdu):
    """Connection ``conn`` carries FPDUs from now on: TCP_CMD.MODE, then the core's context
    from the negotiation (markers from its first FPDU each way; a responder waits in WAIT_RX
    for the initiator's first FPDU)."""
    with device_lock(device):
        regs = device.regs
        regs.tcp_set_mode(conn, fpdu=True)
        ctx = {**neg.context(), "fence_open": neg.fence_open}
        device.program_connection(conn, ctx, rx_mulpdu=rx_mulpdu)


def _wait_open(device, conn, kind, timeout):
    """Wait for ``kind`` (CONNECTED, ACCEPTED) on ``conn``; NicTcpError on its failure."""
    lock, mux = device_lock(device), tcp_mux(device)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with lock:
            mux.poll()
            events = mux.events[conn]
            while events:
                got = events.popleft()
                if got == kind:
                    return
                if got in _ENDS:
                    raise NicTcpError(f"connection {conn}: {got.name.lower()}")
        time.sleep(_POLL)
    raise NicTcpError(f"connection {conn}: no {kind.name} within {timeout} s")


def has_tcp(device):
    """Whether ``device`` (a :class:`~rnic.host.driver.device.Device`, or None) terminates TCP
    itself (TCP_CAPS.TCP): its connections are the NIC's, not the host's sockets."""
    if device is None:
        return False
    with device_lock(device):
        return device.regs.tcp_caps().tcp


def ephemeral_port():
    """A local port for an active open (RFC 6335's dynamic range)."""
    return secrets.randbelow(65536 - 49152) + 49152


def nic_listen(device, port, *, slot=0):
    """The NIC listens on ``port`` (listening slot ``slot``) for MPA connections."""
    with device_lock(device):
        device.regs.tcp_listen(slot, port)


def wait_accepted(device, timeout):
    """The id of the next connection the NIC accepted on a listening port (its ACCEPTED
    event taken); NicTcpError after ``timeout`` seconds."""
    lock, mux = device_lock(device), tcp_mux(device)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with lock:
            mux.poll()
            for conn, events in mux.events.items():
                if events and events[0] == TcpEventKind.ACCEPTED:
                    events.popleft()
                    return conn
        time.sleep(_POLL)
    raise NicTcpError(f"no connection accepted within {timeout} s")


def nic_connect(device, address, port, params=None, *, local_port=None, rx_mulpdu=2048):
    """Open a TCP connection from the NIC to ``address``:``port`` and negotiate MPA as the
    initiator over it: ``(Negotiated, conn)``, the connection committed to FPDUs and its RTR
    (if any) left to the data path (:class:`NicRnic`)."""
    params = cm.ConnParams() if params is None else params
    with device_lock(device):
        conn = device.regs.tcp_connect(address, port, local_port or ephemeral_port())
        tcp_mux(device).forget(conn)
    _wait_open(device, conn, TcpEventKind.CONNECTED, params.timeout or 30.0)
    neg = cm.connect(NicStream(device, conn), params, send_rtr=False)
    commit(device, conn, neg, rx_mulpdu=rx_mulpdu)
    return neg, conn


def nic_connect_retry(device, address, port, params=None, *, retry=0.0, **kw):
    """:func:`nic_connect`, retried for ``retry`` seconds while the peer refuses the
    connection (it does not listen yet)."""
    deadline = time.monotonic() + retry
    while True:
        try:
            return nic_connect(device, address, port, params, **kw)
        except NicTcpError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


class NicListening:
    """The NIC listens on ``port`` (a listening slot) for MPA connections, as a listening
    socket would: :meth:`accept` negotiates each as the responder."""

    def __init__(self, device, port, *, slot=0):
        self.device, self.port, self.slot = device, port, slot
        nic_listen(device, port, slot=slot)

    def accept_mpa(self, params=None, timeout=None):
        """``(Negotiated, "ip:port" of the peer)`` of the next connection."""
        conn = wait_accepted(self.device, 10 ** 9 if timeout is None else timeout)
        peer = NicStream(self.device, conn).peer()
        return nic_accept(self.device, conn, params), peer

    # the part of a listening socket's API :class:`rnic.host.net.listener.Listener` uses
    def settimeout(self, timeout):
        self._timeout = timeout

    def accept(self):
        """``(NicStream, (ip, port))`` of the next connection the NIC accepted (its MPA
        negotiation is the caller's: :meth:`NicStream.mpa_accept`)."""
        try:
            conn = wait_accepted(self.device, getattr(self, "_timeout", None) or 10 ** 9)
        except NicTcpError:
            raise socket.timeout("no connection accepted") from None
        stream = NicStream(self.device, conn)
        ip, _, port = stream.peer().rpartition(":")
        return stream, (ip, int(port))

    def getsockname(self):
        return ("0.0.0.0", self.port)

    def close(self):
        with device_lock(self.device):
            self.device.regs.tcp_listen(self.slot, self.port, valid=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def nic_accept(device, conn, params=None, *, rx_mulpdu=2048, reject=False):
    """Negotiate MPA as the responder on connection ``conn``, which the NIC accepted (its
    ACCEPTED event taken): the Negotiated, the connection committed to FPDUs.

    The Reply waits in the stream (:meth:`NicStream.hold`) until the data path
    (:class:`NicRnic`) has its first receive buffer in the core, or its thread starts (a
    work request posted, a poll, ``start``): the initiator may send its first Send as soon
    as the Reply is in, and the core places it at once, so an application posts its first
    receive buffers first (as verbs applications do before ``rdma_accept``); registering a
    region does not send the Reply. A Reject goes out at once.
    """
    stream = NicStream(device, conn)

    def before_reply(neg):
        commit(device, conn, neg, rx_mulpdu=rx_mulpdu)
        stream.hold()
    neg = cm.accept(stream, params, reject=reject, before_reply=before_reply)
    return neg


class NicRnic(OffloadRnic):
    """:class:`~rnic.host.net.rnic_offload.OffloadRnic` over the NIC's own TCP: the
    connection was committed by :func:`nic_connect` / :func:`nic_accept`; no octet of it
    passes through the host. Parameters as OffloadRnic's (``rx_mulpdu`` is unused: the
    context is programmed already)."""

    #: What the device's transport must offer: host memory (the core's AXI4 masters).
    NEEDS = ("mem_read", "mem_write")

    def __init__(self, negotiated, device, **kw):
        super().__init__(negotiated, device, **kw)
        self._peeking = False                   # the peer's octets never reach the host
        self._fence_poll_until = math.inf       # the core opens the fence: ask it each turn

    def _program(self, conn, ctx, rx_mulpdu):
        """The context was committed with the connection's mode: only the data path's
        routing and the core's enable."""
        self._prepare_core()
        return None

    def _terminate_out(self):
        pass                                    # (the core's Terminate goes out through TCP)

    def _release_reply(self):
        """A responder's Reply goes out (held until the data path's first receive buffer is
        in the core, or its thread starts: a work request posted, a poll, ``start``)."""
        with self._lock:
            self.neg.sock.release()

    def post_recv(self, length, **kw):
        """As OffloadRnic's, the buffer in the core when this returns (while its receive
        queue has room): the peer's Send reaches the core without the host."""
        wr_id = super().post_recv(length, **kw)
        with self._lock:
            self._post_backlog(sends=False)
        self._release_reply()
        return wr_id


    def __repr__(self):
        return f"<NicRnic {self.neg.role} conn={self.conn} state={self._state} device={self.device.spec}>"

    def _pump(self):
        cycles = self._cycles()
        if cycles is not None:
            self._clock0 = (cycles, time.monotonic())
        try:
            while True:
                with self._cond:
                    if self.closed:
                        return
                    busy = self._busy()
                with self._lock:
                    # (the initiator's first FPDU waits for ConnParams.first_fpdu_delay after
                    # the Reply, as on the other data paths: Linux siw needs a moment)
                    self._post_backlog(sends=time.monotonic() >= self.neg.earliest_tx)
                    self.neg.sock.release()     # a responder's Reply, if still held
                    self._collect()
                    ended = self._watch()
                if ended in _FAILS:
                    self._lost(f"TCP connection {ended.name.lower()}")
                self._check_end()
                time.sleep(_POLL if busy else self.tick)
        except Exception as exc:        # noqa: BLE001 - report, never die silently
            self._end(ErrorInfo.mpa(MpaError.LOCAL_CATASTROPHIC, f"local error: {exc!r}"))

    def _watch(self):
        """The connection's TCP events (device lock held): the peer's FIN starts the end; the
        event that ended it, if any."""
        stream = self.neg.sock
        stream._mux.poll()
        ended = stream._events()
        if ended is not None and ended not in _FAILS:
            with self._cond:
                if not self._rx_fin:
                    self._rx_fin = True
                    if self._end_deadline is None:
                        self._end_deadline = time.monotonic() + min(self.linger, 2.0)
                    self._cond.notify_all()
        return ended
