"""Concurrent MPA connection setup: every accepted TCP connection negotiates in its own thread.

A connection manager that answers one MPA Request at a time can be stopped by
one peer that opens a socket and says nothing. :class:`Listener` accepts TCP
connections in one thread and runs :func:`rnic.host.net.cm.accept` on each in a
thread of its own, with the socket's own deadline (``ConnParams.timeout``), so a
silent, slow (one octet a second) or lying (a PD_Length of 512 and then
silence) peer ends at its own timeout and delays nobody else. The same thread
then calls the handler, which serves the established connection for as long as
it likes.

Two caps keep what hostile peers cost bounded:

* ``max_half_open``: negotiations in progress at once (accepted, no Reply or
  Reject sent yet). A connection over it is closed at once, unread, and
  reported through ``on_refused``.
* ``contexts``: established connections at once, e.g. the connection contexts
  of a device. Each established connection holds a :class:`ContextPool` id
  (distinct among the live ones: the device connection id); a valid Request
  that finds no free id is answered with an MPA Reject (R=1, RFC 5044 section
  7.1.2) and reported through ``on_refused``. The id is taken when the Request
  arrives, not when the socket is accepted, so silent sockets hold none.
"""

from __future__ import annotations

import dataclasses
import errno
import socket
import threading
import time

from rnic.host.net import cm
from rnic.host.spec.errors import ErrorInfo, MpaError

__all__ = ["DEFAULT_MAX_HALF_OPEN", "Accepted", "Refusal", "ContextPool", "Listener"]

#: Default cap on negotiations in progress at once. A legitimate setup takes one
#: round trip, so even a busy host has a handful in flight; a stalled one holds a
#: thread and a socket for at most ``ConnParams.timeout`` seconds. 64 leaves room
#: for 64 peers setting up within one timeout while a flood of silent sockets
#: costs at most 64 threads.
DEFAULT_MAX_HALF_OPEN = 64

_TRANSIENT = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


@dataclasses.dataclass
class Accepted:
    """The outcome of one accepted connection's MPA setup, handed to the handler.

    Attributes
    ----------
    peer : str
        ``host:port`` of the initiator.
    index : int
        1-based order in which the socket was admitted to negotiation.
    neg : rnic.host.net.cm.Negotiated or None
        The connection (``rejected`` True after a Reject); None when setup failed.
    error : rnic.host.net.cm.MpaSetupError or None
        Why setup failed.
    conn : int or None
        The :class:`ContextPool` id held while the handler runs (connected only).
    """

    peer: str
    index: int
    neg: cm.Negotiated | None = None
    error: cm.MpaSetupError | None = None
    conn: int | None = None

    @property
    def outcome(self):
        """``connected``, ``rejected`` or ``failed``."""
        if self.neg is None:
            return "failed"
        return "rejected" if self.neg.rejected else "connected"


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A connection turned away by a cap: ``reason`` is ``half_open`` (closed
    unread) or ``connections`` (MPA Reject sent); ``limit`` the cap."""

    peer: str
    reason: str
    limit: int

    @property
    def text(self):
        if self.reason == "half_open":
            return (f"refused {self.peer}: {self.limit} MPA negotiations already in progress; "
                    "closed")
        return (f"refused {self.peer}: all {self.limit} connection contexts in use; "
                "MPA Reject sent")

    def to_json(self):
        return {"event": "refused", "peer": self.peer, "reason": self.reason,
                "limit": self.limit}


class ContextPool:
    """Connection ids ``0..size-1`` (unbounded when ``size`` is None), lowest free first."""

    def __init__(self, size=None):
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ValueError(f"size must be a positive int or None, not {size!r}")
        self.size = size
        self._used = set()
        self._lock = threading.Lock()

    def acquire(self):
        """A free id, now in use; None when all ``size`` are."""
        with self._lock:
            if self.size is not None and len(self._used) >= self.size:
                return None
            n = next(i for i in range(len(self._used) + 1) if i not in self._used)
            self._used.add(n)
            return n

    def release(self, n):
        with self._lock:
            self._used.discard(n)

    @property
    def in_use(self):
        with self._lock:
            return len(self._used)


def _peer(addr):
    return f"[{addr[0]}]:{addr[1]}" if ":" in addr[0] else f"{addr[0]}:{addr[1]}"


class Listener:
    """Accept MPA connections and negotiate each concurrently.

    Parameters
    ----------
    sock : socket.socket or (host, port)
        A listening stream socket, or the address to listen on (or a NIC's listening
        port, :class:`rnic.host.net.nic_tcp.NicListening`: the connections are the NIC's
        own, negotiated through its stream port; ``wrap`` does not apply).
    params : rnic.host.net.cm.ConnParams
        The responder's parameters; ``timeout`` bounds each negotiation.
    handler : callable
        ``handler(accepted)`` for every finished negotiation (an :class:`Accepted`),
        in that connection's own thread; for a connected one it serves the
        connection and returns when done (the connection is closed and its
        context id released after it returns). Its return value is ignored.
    reject : bool or callable
        As :func:`rnic.host.net.cm.accept`: answer (matching) Requests with a Reject.
    max_half_open : int or None
        Cap on negotiations in progress (None: no cap).
    contexts : ContextPool, int or None
        Ids for established connections; an int is the size of a new pool.
        None: an unbounded pool (ids still distinct).
    wrap : callable or None
        ``wrap(sock, index)`` returns the socket to negotiate on (e.g. a pcap
        recorder); called in the connection's thread.
    on_refused : callable or None
        ``on_refused(refusal)`` (a :class:`Refusal`) when a cap turns a peer away.
    once : bool
        Handle only the first negotiation that finishes (whatever its outcome),
        then stop accepting and abort the others.
    """

    def __init__(self, sock, params=None, *, handler, reject=False,
                 max_half_open=DEFAULT_MAX_HALF_OPEN, contexts=None, wrap=None,
                 on_refused=None, once=False):
        if max_half_open is not None and (isinstance(max_half_open, bool)
                                          or not isinstance(max_half_open, int)
                                          or max_half_open < 1):
            raise ValueError(f"max_half_open must be a positive int or None, not {max_half_open!r}")
        self.params = cm.ConnParams() if params is None else params
        self.sock = (sock if isinstance(sock, socket.socket) or hasattr(sock, "accept")
                     else socket.create_server(sock))
        self.handler = handler
        self.reject = reject
        self.max_half_open = max_half_open
        self.contexts = contexts if isinstance(contexts, ContextPool) else ContextPool(contexts)
        self.wrap = wrap
        self.on_refused = on_refused
        self.once = once
        self._lock = threading.Lock()
        self._pending = set()          # raw sockets still negotiating (aborted by stop())
        self._threads = set()
        self._admitted = 0
        self._stop = threading.Event()
        self._acceptor = None

    # -- state
    @property
    def address(self):
        """``(host, port)`` the listening socket is bound to."""
        return self.sock.getsockname()[:2]

    @property
    def half_open(self):
        """Negotiations in progress."""
        with self._lock:
            return len(self._pending)

    @property
    def stopped(self):
        return self._stop.is_set()

    # -- accepting
    def serve(self, poll=0.2):
        """Accept connections in this thread until :meth:`stop`."""
        self.sock.settimeout(poll)        # wake up now and then to see stop()
        while not self._stop.is_set():
            try:
                sock, addr = self.sock.accept()
            except (socket.timeout, BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue                # (aborted: the peer reset before we took it)
            except OSError as e:
                if self._stop.is_set():
                    break
                if e.errno not in _TRANSIENT:
                    raise
                # Out of descriptors or memory: the peers holding them will go at their
                # timeouts; keep listening rather than die (a flood must not end the server).
                self._stop.wait(0.1)
                continue
            self._admit(sock, _peer(addr))

    def start(self):
        """Run :meth:`serve` in a background thread; returns self."""
        self._acceptor = threading.Thread(target=self.serve, daemon=True, name="rnic-mpa-accept")
        self._acceptor.start()
        return self

    def _admit(self, sock, peer):
        with self._lock:
            if self._stop.is_set():
                refused = None
            elif self.max_half_open is not None and len(self._pending) >= self.max_half_open:
                refused = Refusal(peer, "half_open", self.max_half_open)
            else:
                self._pending.add(sock)
                self._admitted += 1
                index = self._admitted
                t = threading.Thread(target=self._run, args=(sock, peer, index), daemon=True,
                                     name=f"rnic-mpa-{peer}")
                try:
                    t.start()
                except RuntimeError:       # no thread to be had: as if over the cap
                    self._pending.discard(sock)
                    refused = Refusal(peer, "half_open", len(self._pending))
                else:
                    self._threads.add(t)
                    return
        # Closed unread at once: a refused peer gets nothing and costs nothing more.
        sock.close()
        if refused is not None and self.on_refused is not None:
            self.on_refused(refused)

    # -- one connection, in its own thread
    def _run(self, raw, peer, index):
        acc = Accepted(peer, index)
        no_context = False

        nic = getattr(raw, "mpa_accept", None)   # a NIC's own connection (nic_tcp)
        slot = None                               # the context pool's id it holds

        def decide(request):
            # Called by cm.accept once a valid Request is in: the context is taken
            # here so that sockets that never send one hold none.
            nonlocal no_context, slot
            if self.reject(request) if callable(self.reject) else self.reject:
                return True
            slot = self.contexts.acquire()
            no_context = slot is None
            # (a NIC's connection id is its context's: the pool only counts it)
            acc.conn = slot if nic is None or no_context else raw.conn
            return no_context

        try:
            if nic is not None:
                acc.neg = nic(self.params, reject=decide)
            else:
                sock = raw if self.wrap is None else self.wrap(raw, index)
                acc.neg = cm.accept(sock, self.params, reject=decide)
        except cm.MpaSetupError as e:
            acc.error = e
        except Exception as e:          # e.g. the pcap file cannot be written
            raw.close()
            acc.error = cm.MpaSetupError(ErrorInfo.mpa(MpaError.LOCAL_CATASTROPHIC,
                                                       f"local error: {e!r}"))
        try:
            if acc.error is not None and slot is not None:
                self.contexts.release(slot)           # the Reply could not be sent
                acc.conn = slot = None
            with self._lock:
                self._pending.discard(raw)
                # After stop() (or once the first outcome is claimed) nothing more is handled.
                handle = not no_context and not self._stop.is_set()
                if handle and self.once:
                    self._stop.set()
            if no_context:
                if self.on_refused is not None:
                    self.on_refused(Refusal(peer, "connections", self.contexts.size))
                return
            if not handle:
                return
            if self.once:
                self.stop()                           # abort the other negotiations
            self.handler(acc)
        finally:
            if acc.neg is not None:
                acc.neg.close()
            if slot is not None:
                self.contexts.release(slot)
            with self._lock:
                self._threads.discard(threading.current_thread())

    # -- stopping
    def stop(self):
        """Stop accepting and abort the negotiations in progress (established
        connections go on; :meth:`join` waits for them)."""
        self._stop.set()
        with self._lock:
            pending = list(self._pending)
        for s in pending:
            try:
                s.shutdown(socket.SHUT_RDWR)      # wakes the thread blocked in recv
            except OSError:
                pass

    def join(self, timeout=None):
        """Wait for the acceptor and every connection thread; True if all ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                threads = list(self._threads)
            if self._acceptor is not None and self._acceptor is not threading.current_thread():
                threads.append(self._acceptor)
            threads = [t for t in threads if t.is_alive()]
            if not threads:
                return True
            for t in threads:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                t.join(left)

    def close(self):
        """Stop and close the listening socket."""
        self.stop()
        if self._acceptor is not None and self._acceptor is not threading.current_thread():
            self._acceptor.join()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
