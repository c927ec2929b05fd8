"""Glue between MPA connections, data paths and devices, for ``rnic listen`` / ``rnic connect``.

* :func:`make_datapath` picks the :class:`~rnic.host.net.rnic_sw.DataPath` of a
  connection: the device's own (``Device.datapath_factory``, set by a
  device kind whose hardware moves the data: the simulated core,
  :mod:`rnic.host.net.rnic_offload`), else the software RNIC; with a device but no
  hardware data path, the software RNIC runs and the device is kept in step
  (:class:`MirroredDataPath`).
* :class:`MirroredDataPath` runs every driver sequence against the device
  for what the software RNIC does: the connection context is programmed from
  the negotiation, STags go into the STag table, receive buffers and work
  requests are posted to the RQ/SQ registers, and -- on a device with a
  :class:`~rnic.host.driver.device.ModelCore` -- completions, errors, state changes and
  counters are reported through the core and read back through the CQ,
  ERR and counter registers, so what the caller sees went through them.
* :func:`negotiated_json`, :func:`describe_error`, :class:`Transfer`,
  :func:`run_transfers` and :func:`serve_connection` are the pieces of the two
  CLI commands, usable from Python.

Several connections may share one device, each on its own connection id and
in its own thread (:class:`rnic.host.net.listener.Listener`): every driver
sequence of a data path runs under :func:`device_lock` (a register sequence
selects a connection, then writes its fields: two of them must not
interleave), completions popped from the device's one completion queue are
handed to the data path of their connection, and counters are added, not set.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
import weakref

from rnic.host.driver.device import WorkRequest
from rnic.host.spec.errors import Layer
from rnic.host.spec.regmap import ConnState, CqQueue, CqStatus, SqOpcode
from rnic.host.net.rnic_sw import DEFAULT_ACCESS, Access, DataPath, SoftwareRnic, opcode_from

__all__ = [
    "make_datapath", "MirroredDataPath", "device_lock", "shared_state", "negotiated_json", "describe_error", "Transfer",
    "run_transfers", "serve_connection", "MAX_SHOWN",
]

#: Octets of data shown (hex) per completion or event.
MAX_SHOWN = 4096
_MASK32 = 0xFFFFFFFF


def negotiated_json(neg):
    """What MPA setup agreed on, as a JSON object."""
    return {
        "role": neg.role, "rev": neg.rev, "enhanced": neg.enhanced,
        "markers_tx": neg.markers_tx, "markers_rx": neg.markers_rx, "crc": neg.crc,
        "ird": neg.ird, "ord": neg.ord, "peer_ird": neg.peer_ird, "peer_ord": neg.peer_ord,
        "p2p": neg.p2p, "rtr": neg.rtr, "mulpdu": neg.mulpdu,
        "private_data": neg.private_data.hex(), "peer_private_data": neg.peer_private_data.hex(),
    }


def describe_error(info):
    """One line for an ErrorInfo: ``MPA error 1: ...``, ``DDP error type 1 code 0x00: ...``."""
    if info is None:
        return "no error"
    layer = Layer(info.layer)
    if layer == Layer.LLP:
        head = f"MPA error {info.ecode}"
    else:
        head = f"{layer.name} error type {info.etype} code {info.ecode:#04x}"
    return f"{head}: {info.text}" if info.text else head


# -- data path selection and the device mirror ------------------------------------------

class _Shared:
    """What the data paths on one device share: its lock and the completions
    popped from its CQ for another connection than the one that popped them."""

    def __init__(self, device):
        # A transport with its own re-entrant lock (the simulated device) lends it, so
        # that its stream exchanges and the register sequences exclude each other too.
        lock = getattr(device.transport, "lock", None)
        self.lock = lock if hasattr(lock, "acquire") else threading.RLock()
        self.cq = collections.defaultdict(collections.deque)    # conn -> Completions
        self.term = collections.defaultdict(collections.deque)  # conn -> TERM reports
        self.memory = None      # the device memory's allocator (offloaded data paths)
        self.stags = None       # its STag table rows (offloaded data paths)
        self.tcp = None         # the NIC's TCP events and stream runs (rnic.host.net.nic_tcp)


_SHARED = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def _shared(device):
    with _SHARED_LOCK:
        sh = _SHARED.get(device)
        if sh is None:
            sh = _SHARED[device] = _Shared(device)
        return sh


def device_lock(device):
    """The re-entrant lock every driver sequence on ``device`` runs under."""
    return _shared(device).lock


def shared_state(device):
    """What the data paths on ``device`` share (lock, completions and reports popped for other
    connections, the device memory's books); use it under :func:`device_lock`."""
    return _shared(device)


def make_datapath(neg, device=None, *, conn=0, **kw):
    """The DataPath for connection ``neg`` (see the module docstring; a connection of the
    NIC's own TCP, :class:`rnic.host.net.nic_tcp.NicStream`, gets its own)."""
    own = getattr(neg.sock, "datapath", None)
    if callable(own):
        return own(neg, **kw)
    if device is not None and device.datapath_factory is not None:
        with device_lock(device):
            return device.datapath_factory(device, neg, conn)
    rnic = SoftwareRnic(neg, conn=conn, **kw)
    if device is None:
        return rnic
    return MirroredDataPath(rnic, device, conn=conn)


class MirroredDataPath(DataPath):
    """The software RNIC moves the data; ``device`` sees every driver sequence of it.

    Parameters
    ----------
    rnic : SoftwareRnic
    device : rnic.host.driver.device.Device
        Identified device; connection ``conn``'s context is programmed now.
    """

    def __init__(self, rnic, device, *, conn=0):
        super().__init__()
        self.rnic = rnic
        self.device = device
        self.conn = conn
        self.core = getattr(device.transport, "core", None)
        self._shared = _shared(device)
        self._lock = self._shared.lock
        with self._lock:
            self._shared.cq.pop(conn, None)     # left by an earlier user of this id
            self.programmed = device.program_connection(conn, rnic.neg)
        self._counted = {}               # counter -> value already added to the device's
        self._waiting_fence = self.programmed["state"] == ConnState.WAIT_RX
        self._pending = collections.defaultdict(collections.deque)   # (queue, wr_id) -> completions
        self._sinks = {}                 # wr_id -> STag of a sink region made for a Read
        self._next_stag = 0x7E000001

    # -- delegation
    @property
    def neg(self):
        return self.rnic.neg

    @property
    def closed(self):
        return self.rnic.closed

    @property
    def error(self):
        return self.rnic.error

    @property
    def stats(self):
        return self.rnic.stats

    def read_memory(self, addr, length):
        return self.rnic.read_memory(addr, length)

    def write_memory(self, addr, data):
        self.rnic.write_memory(addr, data)

    def data(self, completion):
        return self.rnic.data(completion)

    def start(self):
        self.rnic.start()

    # -- mirrored operations
    def register_region(self, stag, length, *, to=0, addr=None,
                        access=DEFAULT_ACCESS, data=None):
        region = self.rnic.register_region(stag, length, to=to, addr=addr, access=access, data=data)
        with self._lock:
            self.device.register_stag(region.stag, base=region.base, length=length, conn=self.conn,
                                      addr=region.addr,
                                      remote_read=bool(access & Access.REMOTE_READ),
                                      remote_write=bool(access & Access.REMOTE_WRITE),
                                      remote_inv=bool(access & Access.REMOTE_INV))
        return region

    def invalidate(self, stag):
        self.rnic.invalidate(stag)
        try:
            with self._lock:
                self.device.invalidate_stag(stag)
        except KeyError:
            pass

    def post_recv(self, length, *, addr=None, wr_id=None):
        if addr is None:
            addr = self.rnic.alloc(length)
        wr_id = self.rnic.post_recv(length, addr=addr, wr_id=wr_id)
        with self._lock:
            self.device.post_receive(self.conn, addr, length, wr_id)
        return wr_id

    def post_send(self, opcode, payload=b"", *, wr_id=None, stag=0, to=0, length=None,
                  local_stag=None, local_to=0, inval_stag=None, signaled=True):
        op = opcode_from(opcode)
        payload = bytes(payload)
        laddr = 0
        made = None
        if op == SqOpcode.RDMA_READ:
            if local_stag is None and isinstance(length, int) and not isinstance(length, bool) \
                    and 0 <= length <= _MASK32:
                local_stag = made = self._next_stag
                self._next_stag += 1
                self.register_region(local_stag, max(length, 1), to=0,
                                     access=Access.REMOTE_WRITE)
                local_to = 0
            laddr = local_to            # SQ_LADDR of a Read: the sink TO
            n = length
        elif local_stag is None:
            if payload:                 # SQ_LADDR of a Send/Write: where the data is
                laddr = self.rnic.alloc(len(payload))
                self.rnic.write_memory(laddr, payload)
            n = len(payload)
        else:                           # from registered memory (checked by the model's post)
            n = length
        try:
            wr_id = self.rnic.post_send(op, payload, wr_id=wr_id, stag=stag, to=to, length=length,
                                        local_stag=local_stag, local_to=local_to,
                                        inval_stag=inval_stag, signaled=signaled)
        except Exception:
            if made is not None:
                self.invalidate(made)
            raise
        if made is not None:
            self._sinks[wr_id] = made
        if op != SqOpcode.RDMA_READ and local_stag is not None:
            laddr = self.rnic.region(local_stag).address(local_to)
        tagged = op in (SqOpcode.RDMA_WRITE, SqOpcode.RDMA_READ)
        wr = WorkRequest(
            op, conn=self.conn, laddr=laddr, length=n or 0,
            lstag=(local_stag or 0) if op == SqOpcode.RDMA_READ else 0,
            rstag=stag if tagged else 0, rto=to if tagged else 0,
            inv_stag=inval_stag or 0, wr_id=wr_id, signaled=bool(signaled))
        with self._lock:
            self.device.post_send(wr)
        return wr_id

    # -- completions, events, counters through the device
    _COUNTERS = ("rx_fpdus", "rx_octets", "rx_crc_errors", "rx_marker_errors",
                 "rx_length_errors", "tx_fpdus", "tx_octets", "tx_markers")

    def _sync_counters(self):
        """Add what this connection counted since the last call (the device's
        counters are the sum over its connections). Call under the lock."""
        if self.core is None:
            return
        s = self.rnic.stats
        delta = {k: s[k] - self._counted.get(k, 0) for k in self._COUNTERS}
        self._counted = {k: s[k] for k in self._COUNTERS}
        self.core.add_counters(**{k: v for k, v in delta.items() if v})

    def _poll(self, timeout, max_entries):
        comps = self.rnic.poll(timeout, max_entries)        # blocks: not under the lock
        for c in comps:
            if c.wr_id in self._sinks and c.queue == CqQueue.SQ:
                self.invalidate(self._sinks.pop(c.wr_id))
        if self.core is None:
            return comps
        with self._lock:
            if self._waiting_fence and self.rnic.fence_open:
                self._waiting_fence = False
                self.core.set_state(self.conn, ConnState.RTS)   # the core leaves the MPA fence
            for c in comps:
                self.core.complete(conn=self.conn, wr_id=c.wr_id, opcode=c.opcode,
                                   queue=c.queue, status=c.status, length=c.length,
                                   invalidated=c.inval_stag is not None,
                                   inv_stag=c.inval_stag or 0)
                self._pending[(int(c.queue), c.wr_id & _MASK32)].append(c)
            self._sync_counters()
            # The CQ is the device's, not the connection's: what belongs to another
            # connection waits for that connection's data path.
            for rc in self.device.poll_cq(max_entries=len(comps) + 64):
                self._shared.cq[rc.conn].append(rc)
            mine = self._shared.cq.pop(self.conn, ())
        out = []
        for rc in mine:
            q = self._pending.get((rc.queue, rc.wr_id))
            if q:
                out.append(q.popleft())
            else:
                out.append(_from_regs(rc))
        for key in [k for k, q in self._pending.items() if not q]:
            del self._pending[key]
        return out

    def poll_events(self):
        events = self.rnic.poll_events()
        if self.core is not None:
            with self._lock:
                for ev in events:
                    if ev.kind in ("terminate_sent", "error"):
                        self.core.report_error(self.conn, ev.info)
                    elif ev.kind == "terminate_received":
                        self.core.report_error(self.conn, ev.info, state=ConnState.CLOSING)
                    elif ev.kind == "closed":
                        self.core.set_state(self.conn, ConnState.IDLE if ev.info is None
                                            else ConnState.ERROR)
                self._sync_counters()
        return events

    def close(self, timeout=None):
        self.rnic.close(timeout)
        with self._lock:
            self._sync_counters()
            self._shared.cq.pop(self.conn, None)    # the id may be given to another connection

    def device_status(self):
        with self._lock:
            return self.device.status()


def _from_regs(rc):
    from rnic.host.net.rnic_sw import Completion
    return Completion.from_regs(rc)


# -- the transfers of rnic connect ---------------------------------------------------------

@dataclasses.dataclass
class Transfer:
    """One transfer of ``rnic connect``: ``send`` (data), ``write`` (data to stag/to),
    ``read`` (length from stag/to)."""
    op: str
    data: bytes = b""
    length: int = 0
    stag: int | None = None
    to: int = 0

    def describe(self):
        if self.op == "send":
            return f"send {len(self.data)} octets"
        if self.op == "write":
            return f"write {len(self.data)} octets to STag {self.stag:#x} TO {self.to:#x}"
        return f"read {self.length} octets from STag {self.stag:#x} TO {self.to:#x}"


def run_transfers(dp, transfers, *, timeout=5.0):
    """Post ``transfers`` in order on ``dp`` and wait for their completions.

    Returns a list of result dicts (op, wr_id, status, length, stag, to,
    data (hex, Reads), error), in the order given; a transfer that did not
    complete within ``timeout`` (or before the connection went down) has
    status ``timeout`` / ``flushed``.
    """
    ids = []
    for t in transfers:
        if t.op == "send":
            ids.append(dp.post_send("send", t.data))
        elif t.op == "write":
            ids.append(dp.post_send("write", t.data, stag=t.stag, to=t.to))
        elif t.op == "read":
            ids.append(dp.post_send("read", length=t.length, stag=t.stag, to=t.to))
        else:
            raise ValueError(f"unknown transfer {t.op!r}")
    done = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(ids):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        for c in dp.poll(timeout=min(remaining, 0.2)):
            if c.queue == CqQueue.SQ:
                done[c.wr_id] = c
        if dp.closed:
            for c in dp.poll():
                if c.queue == CqQueue.SQ:
                    done[c.wr_id] = c
            break
    results = []
    for t, wr_id in zip(transfers, ids):
        r = {"op": t.op, "wr_id": wr_id}
        if t.op != "send":
            r.update(stag=t.stag, to=t.to)
        c = done.get(wr_id)
        if c is None:
            r.update(status="timeout" if not dp.closed else "flushed",
                     length=0, error=(dp.error.to_json() if dp.error else None))
        else:
            r.update(status=c.status.name.lower(), length=c.length,
                     error=c.error.to_json() if c.error else None)
            if t.op == "read" and c.ok:
                r["data"] = dp.data(c).hex()
        results.append(r)
    return results


# -- the service loop of rnic listen -----------------------------------------------------

def serve_connection(dp, emit, *, recv_size=65536, recv_count=16, idle_timeout=None,
                     tick=0.1):
    """Service one connection until it is down: post receive buffers (reposted as
    they fill), and ``emit(dict)`` every completion (with its data) and event.

    ``idle_timeout`` (seconds without a completion or event) closes the
    connection gracefully. Returns the ErrorInfo that ended it, or None.
    """
    for _ in range(recv_count):
        dp.post_recv(recv_size)
    dp.start()
    last = time.monotonic()
    while True:
        busy = False
        for c in dp.poll(timeout=tick):
            busy = True
            if c.queue == CqQueue.RQ and c.status == CqStatus.FLUSHED:
                continue            # our own buffers, flushed at the end
            obj = {"event": "completion", **c.to_json()}
            if c.ok and c.addr is not None:
                data = dp.read_memory(c.addr, min(c.length, MAX_SHOWN))
                obj["data"] = data.hex()
                if c.length > MAX_SHOWN:
                    obj["truncated"] = True
            emit(obj)
            if c.queue == CqQueue.RQ and not dp.closed:
                dp.post_recv(recv_size)
        for ev in dp.poll_events():
            busy = True
            obj = ev.to_json()
            if ev.kind == "remote_write" and ev.addr is not None:
                obj["data"] = dp.read_memory(ev.addr, min(ev.length, MAX_SHOWN)).hex()
                if ev.length > MAX_SHOWN:
                    obj["truncated"] = True
            if ev.kind == "closed":
                obj["stats"] = dict(getattr(dp, "stats", {}))
            emit(obj)
        if dp.closed and not busy:
            return dp.error
        now = time.monotonic()
        if busy:
            last = now
        elif idle_timeout is not None and now - last > idle_timeout:
            dp.close()
            last = now

