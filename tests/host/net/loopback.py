"""Helpers of the data-path tests: two endpoints negotiated over loopback TCP, a simulated
device with a given data path, and waits for completions and events."""

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from rnic.host.driver.device import Device
from rnic.host.net import cm
from rnic.host.spec.regmap import CqQueue

#: seconds a test waits for a connection step, a completion or an event
T = 5.0


def tcp_pair():
    """A connected pair of loopback TCP sockets (client, server side)."""
    with socket.create_server(("127.0.0.1", 0)) as lst:
        c = socket.create_connection(lst.getsockname(), timeout=T)
        s, _ = lst.accept()
    return c, s


def negotiate(pi=None, pr=None, *, reject=False, **connect):
    """MPA negotiation of a fresh loopback connection: ``(initiator, responder)``
    :class:`~rnic.host.net.cm.Negotiated` (``connect``: keywords of :func:`cm.connect`)."""
    c, s = tcp_pair()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(cm.accept, s, pr or cm.ConnParams(timeout=T), reject=reject)
        ni = cm.connect(c, pi or cm.ConnParams(timeout=T), **connect)
        nr = fut.result(timeout=T)
    return ni, nr


def rq_completions(rnic, n, timeout=T, *, ok=False):
    """Up to ``n`` receive completions of ``rnic`` (only successful ones with ``ok``),
    waiting at most ``timeout`` seconds for them."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += [c for c in rnic.poll(timeout=0.2) if c.queue == CqQueue.RQ and (c.ok or not ok)]
    return out


def events(rnic, kind, timeout=T):
    """The events of ``kind`` among those ``rnic`` reported until the first of them;
    AssertionError (with all it reported) after ``timeout`` without one."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        seen += rnic.poll_events()
        hits = [e for e in seen if e.kind == kind]
        if hits:
            return hits
        time.sleep(0.02)
    raise AssertionError(f"no {kind} event; saw {seen}")


@contextmanager
def sim_device(datapath_factory):
    """A simulated device (W = 8, 16 connections), reset, whose connections get data paths
    from ``datapath_factory``."""
    from rnic.sim.device import SimDevice
    dev = Device(SimDevice(width=8, connections=16), spec="sim")
    dev.datapath_factory = datapath_factory
    try:
        dev.identify()
        dev.reset()
        yield dev
    finally:
        dev.close()
