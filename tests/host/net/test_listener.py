"""Concurrent MPA setup (rnic.host.net.listener) over 127.0.0.1, and data paths sharing a device.

Bounds are generous (the suite runs on loaded 2-core machines) but meaningful: a
negotiation that waited for another one would take a whole timeout (seconds),
a concurrent one takes milliseconds.
"""

import socket
import threading
import time

import pytest

from rnic.host.driver.device import Device
from rnic.host.driver.model import ModelTransport
from rnic.host.model.mpa_frames import build
from rnic.host.net import cm
from rnic.host.net.listener import DEFAULT_MAX_HALF_OPEN, ContextPool, Listener, Refusal
from rnic.host.net.transfer import make_datapath

T = 3.0


class Harness:
    """A started Listener whose handler records every outcome (with the time it
    was handed over) and holds connected ones until the peer closes."""

    def __init__(self, params=None, **kw):
        self.outcomes = []
        self.refusals = []
        self.cond = threading.Condition()
        self.lst = Listener(("127.0.0.1", 0), params or cm.ConnParams(timeout=T),
                            handler=self._handle, on_refused=self._refused, **kw).start()
        self.address = self.lst.address

    def _handle(self, acc):
        with self.cond:
            self.outcomes.append((time.monotonic(), acc))
            self.cond.notify_all()
        if acc.outcome == "connected":
            sock = acc.neg.sock
            sock.settimeout(0.1)
            while not self.lst.stopped:             # hold it, as an idle connection
                try:
                    if not sock.recv(4096):
                        return
                except socket.timeout:
                    continue
                except OSError:
                    return

    def _refused(self, r):
        with self.cond:
            self.refusals.append((time.monotonic(), r))
            self.cond.notify_all()

    def wait(self, pred, timeout=10):
        with self.cond:
            assert self.cond.wait_for(pred, timeout), (self.outcomes, self.refusals)

    def by_port(self, port):
        return [(t, a) for t, a in self.outcomes if a.peer.endswith(f":{port}")]

    def close(self):
        self.lst.close()
        assert self.lst.join(10)


@pytest.fixture
def harness():
    made = []

    def start(*args, **kw):
        h = Harness(*args, **kw)
        made.append(h)
        return h

    yield start
    for h in made:
        h.close()


def timed_connect(address, **kw):
    t = time.monotonic()
    neg = cm.connect(address, cm.ConnParams(timeout=T, **kw))
    return time.monotonic() - t, neg


def request_header(pd_length):
    """The 20 header octets of a Rev 1 MPA Request claiming ``pd_length`` octets of private data."""
    raw = build(cm.request_frame(cm.ConnParams(rev=1)))[:20]
    return raw[:18] + pd_length.to_bytes(2, "big")


# -- the scenario ----------------------------------------------------------------

def test_silent_and_idle_peers_do_not_delay_a_setup(harness):
    h = harness()
    base, neg = timed_connect(h.address)
    neg.close()
    silent = [socket.create_connection(h.address) for _ in range(20)]
    idle = [cm.connect(h.address, cm.ConnParams(timeout=T)) for _ in range(5)]
    loaded, neg = timed_connect(h.address)
    try:
        assert h.lst.half_open >= 20                # the silent ones are still negotiating
        assert loaded < base + 1.0, (base, loaded)
        assert loaded < T / 2                       # not one timeout of a silent peer
    finally:
        for s in silent:
            s.close()
        for n in (*idle, neg):
            n.close()
    h.wait(lambda: len(h.outcomes) == 27)
    kinds = [a.outcome for _, a in h.outcomes]
    assert kinds.count("connected") == 7 and kinds.count("failed") == 20


def test_hostile_peers_end_at_their_own_timeout(harness):
    """Silent, slowloris (one octet every 0.2 s), a PD_Length 512 claim then silence, and
    garbage: each ends by itself (garbage at once, the others at their own timeout after
    their own start) while a valid setup in the middle of it goes through at once."""
    # Were the peers served one after another, the second would end a whole timeout late.
    timeout = 1.5
    h = harness(cm.ConnParams(timeout=timeout))
    request = build(cm.request_frame(cm.ConnParams(rev=1)))
    stop = threading.Event()

    def slowloris(sock):
        for octet in request:
            if stop.wait(0.2):
                return
            try:
                sock.send(bytes([octet]))
            except OSError:
                return

    start = {}
    peers = {}
    start["silent"], peers["silent"] = time.monotonic(), socket.create_connection(h.address)
    time.sleep(0.25)
    start["pd512"], peers["pd512"] = time.monotonic(), socket.create_connection(h.address)
    peers["pd512"].sendall(request_header(512))
    time.sleep(0.25)
    start["slow"], peers["slow"] = time.monotonic(), socket.create_connection(h.address)
    th = threading.Thread(target=slowloris, args=(peers["slow"],), daemon=True)
    th.start()
    start["garbage"], peers["garbage"] = time.monotonic(), socket.create_connection(h.address)
    peers["garbage"].sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    took, neg = timed_connect(h.address)
    neg.close()
    ports = {name: s.getsockname()[1] for name, s in peers.items()}
    try:
        assert took < 0.5
        h.wait(lambda: len(h.outcomes) == 5, timeout=10)
    finally:
        stop.set()
        th.join(5)
        for s in peers.values():
            s.close()
    for name, port in ports.items():
        ((t, acc),) = h.by_port(port)
        assert acc.outcome == "failed", name
        ended = t - start[name]
        if name == "garbage":
            assert acc.error.code == 4 and ended < 0.5, (name, ended)
        else:
            # its own timeout, from its own start (not after the one before it)
            assert acc.error.code == 1 and "timeout" in acc.error.info.text, name
            assert timeout - 0.05 < ended < timeout + 0.8, (name, ended)


def test_half_open_cap_refuses_at_once(harness):
    h = harness(max_half_open=2)
    silent = [socket.create_connection(h.address) for _ in range(2)]
    try:
        over = socket.create_connection(h.address)
        over_peer = f"127.0.0.1:{over.getsockname()[1]}"
        over.settimeout(T)
        t = time.monotonic()
        try:
            assert over.recv(100) == b""              # closed unread, at once
        except ConnectionResetError:
            pass
        assert time.monotonic() - t < 1.0
        over.close()
        h.wait(lambda: len(h.refusals) == 1)
        (_, r), = h.refusals
        assert r == Refusal(over_peer, "half_open", 2)
        assert r.text.startswith("refused 127.0.0.1:") and "2 MPA negotiations" in r.text
        assert r.to_json() == {"event": "refused", "peer": r.peer, "reason": "half_open",
                               "limit": 2}
        with pytest.raises(cm.MpaSetupError):           # still full
            cm.connect(h.address, cm.ConnParams(timeout=T))
    finally:
        for s in silent:
            s.close()
    h.wait(lambda: len(h.outcomes) == 2)                # the silent ones gave up: room again
    _, neg = timed_connect(h.address)
    neg.close()
    assert len(h.refusals) == 2


def test_context_cap_rejects_and_ids_are_distinct(harness):
    h = harness(contexts=2)
    a = cm.connect(h.address, cm.ConnParams(timeout=T))
    b = cm.connect(h.address, cm.ConnParams(timeout=T))
    h.wait(lambda: len(h.outcomes) == 2)
    assert sorted(acc.conn for _, acc in h.outcomes) == [0, 1]
    with pytest.raises(cm.MpaRejected):
        cm.connect(h.address, cm.ConnParams(timeout=T))
    h.wait(lambda: len(h.refusals) == 1)
    assert h.refusals[0][1].reason == "connections" and "all 2 connection contexts" in \
        h.refusals[0][1].text
    a.close()                                       # its handler returns: id 0 is free again
    deadline = time.monotonic() + 5
    while h.lst.contexts.in_use != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    c = cm.connect(h.address, cm.ConnParams(timeout=T))
    h.wait(lambda: len(h.outcomes) == 3)
    assert h.outcomes[-1][1].conn == 0
    b.close()
    c.close()


def test_reject_and_once(harness):
    h = harness(reject=True, once=True)
    silent = socket.create_connection(h.address)
    with pytest.raises(cm.MpaRejected):
        cm.connect(h.address, cm.ConnParams(timeout=T))
    h.wait(lambda: len(h.outcomes) == 1)
    assert h.outcomes[0][1].outcome == "rejected" and h.outcomes[0][1].conn is None
    silent.settimeout(T)
    assert silent.recv(100) == b""                  # aborted: --once handled its one outcome
    silent.close()
    assert h.lst.join(5) and h.lst.stopped and len(h.outcomes) == 1
    assert h.lst.contexts.in_use == 0


def test_context_pool():
    pool = ContextPool(3)
    assert [pool.acquire() for _ in range(4)] == [0, 1, 2, None]
    pool.release(1)
    assert pool.acquire() == 1 and pool.in_use == 3
    unbounded = ContextPool()
    assert [unbounded.acquire() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError):
        ContextPool(0)
    with pytest.raises(ValueError):
        Listener(("127.0.0.1", 0), handler=print, max_half_open=0)
    assert DEFAULT_MAX_HALF_OPEN == 64


# -- several connections on one device ----------------------------------------------------

def test_two_connections_on_one_model_device():
    """Each connection's completions come back through the device's one CQ to its own data
    path, and the device counters are the sum over the connections."""
    server = Device(ModelTransport(connections=4), spec="model")
    client = Device(ModelTransport(connections=4), spec="model")
    for dev in (server, client):
        dev.reset()
    paths = []
    done = threading.Event()

    def handler(acc):
        paths.append(make_datapath(acc.neg, server, conn=acc.conn))
        done.wait(20)               # the connection lives as long as its handler

    with Listener(("127.0.0.1", 0), cm.ConnParams(timeout=T), handler=handler,
                  contexts=4) as lst:
        lst.start()
        clients = [make_datapath(cm.connect(lst.address, cm.ConnParams(timeout=T)), client,
                                 conn=i) for i in range(2)]
        deadline = time.monotonic() + 10
        while len(paths) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(dp.conn for dp in paths) == [0, 1]
        for dp in paths:
            for _ in range(4):
                dp.post_recv(64)
            dp.start()
        for c in clients:
            c.start()
        for i, c in enumerate(clients):
            for k in range(3):
                c.post_send("send", bytes([i, k]))
        got = {0: [], 1: []}

        def drain(dp):
            end = time.monotonic() + 10
            while len(got[dp.conn]) < 3 and time.monotonic() < end:
                got[dp.conn] += [dp.data(x) for x in dp.poll(timeout=0.05)]

        threads = [threading.Thread(target=drain, args=(dp,)) for dp in paths]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        by_conn = {dp.conn: dp for dp in paths}
        # which client landed on which id depends on accept order: match by payload
        for conn, data in got.items():
            assert len(data) == 3 and len({d[0] for d in data}) == 1, got
        assert sorted(got[0] + got[1]) == sorted(bytes([i, k]) for i in range(2)
                                                 for k in range(3))
        for dp in (*clients, *paths):
            dp.close()
        done.set()
        assert server.counters()["rx_fpdus"] == sum(dp.stats["rx_fpdus"]
                                                    for dp in by_conn.values())


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_listener_survives_a_failing_handler_and_descriptor_exhaustion():
    """A handler that raises ends its connection only; EMFILE from accept() (a flood used up
    the descriptors) makes the listener wait and go on, not die."""
    import errno

    class Flaky(socket.socket):
        failures = 2

        def accept(self):
            if Flaky.failures:
                Flaky.failures -= 1
                raise OSError(errno.EMFILE, "Too many open files")
            return super().accept()

    srv = Flaky(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    seen = []

    def handler(acc):
        seen.append(acc.conn)
        if len(seen) == 1:
            raise RuntimeError("handler failed (expected by the test)")

    with Listener(srv, cm.ConnParams(timeout=T), handler=handler, contexts=1) as lst:
        lst.start()
        for _ in range(2):
            cm.connect(lst.address, cm.ConnParams(timeout=T)).close()
            deadline = time.monotonic() + 5
            while lst.contexts.in_use and time.monotonic() < deadline:
                time.sleep(0.02)
    assert seen == [0, 0] and Flaky.failures == 0
