"""The software RNIC: the data path of one MPA connection, in host memory.

After MPA setup (:func:`rnic.host.net.cm.connect` / :func:`rnic.host.net.cm.accept` give a
:class:`rnic.host.net.cm.Negotiated`), a :class:`DataPath` moves RDMAP messages on
that connection: work requests in, completions out. :class:`SoftwareRnic`
is the implementation done entirely by the reference model: framing with the
negotiated markers/CRC (:class:`rnic.host.model.fpdu.FpduEncoder`, the Negotiated's
encoder, so stream offsets and marker phases continue from the setup),
deframing (the Negotiated's decoder, including octets that arrived with the
peer's frame), validation and placement by :class:`rnic.host.model.sink.Sink` into a
:class:`rnic.host.model.sink.Memory`. The simulated-hardware data path plugs in as
another :class:`DataPath` (see :mod:`rnic.host.net.transfer`).

Work requests and completions
-----------------------------
``post_send(opcode, ...)``: Send kinds (``send``, ``send_se``, ``send_inv``,
``send_se_inv``), ``write`` (RDMA Write to the peer's ``stag``/``to``) and
``read`` (RDMA Read of ``length`` octets from the peer's ``stag``/``to`` into
a local sink region; one is made when ``local_stag`` is not given). A Send or
Write carries ``length`` octets of registered memory at ``local_stag``/``local_to``
(as a verbs work request's scatter/gather entry: the data path reads them there,
the application leaves them alone until the completion), or a ``payload`` the
data path copies (a convenience for small messages: a data path whose memory
is the device's allocates device memory for each such work request). Work
requests run in order on one send queue. A Send or Write completes when its
last FPDU has been handed to TCP; a Read when its last Read Response segment
has been placed. At most ORD Reads are outstanding: a Read beyond that waits
at the head of the queue (the queue behind it waits too, as in hardware),
while Read Responses to the peer keep flowing.

``post_recv(length)``: a receive buffer for one inbound Send (untagged
queue 0, consumed in order). Inbound RDMA Read Requests (at most IRD queued,
else RDMAP 2/7) are answered with Read Responses from the registered
region; inbound RDMA Writes are placed silently (and reported as a
``remote_write`` :class:`Event`, which hardware would not do: it helps
tools and tests).

:class:`Completion`: ``wr_id``, ``status`` (:class:`rnic.host.spec.regmap.CqStatus`),
``opcode`` (:class:`rnic.host.spec.regmap.SqOpcode`: the work request's, or the
received Send kind), ``length``, ``queue`` (SQ or RQ), plus ``addr`` (where
the data is in local memory), ``inval_stag``, ``solicited`` and ``error``
(an :class:`~rnic.host.spec.errors.ErrorInfo` when not SUCCESS).

Errors and closing
------------------
* A segment that fails validation: the sink's error and its Terminate
  (already built by the sink) are sent, then FIN; nothing more is
  delivered; outstanding work is flushed (FLUSHED). Event ``terminate_sent``.
* A bad FPDU (CRC, marker, length): Terminate for that MPA/DDP error, FIN.
* A Terminate from the peer: event ``terminate_received``; outstanding Reads
  complete with REMOTE_ERROR, the rest is flushed; FIN.
* The peer's FIN at an FPDU boundary is a clean close (event ``closed``
  with no error); a FIN inside an FPDU is MPA error 1 (event ``error``);
  so is a reset.
* :meth:`SoftwareRnic.close` drains the send queue and outstanding Reads
  (bounded), sends FIN, waits (``linger`` seconds) for the peer's FIN while
  still receiving (a late Terminate is reported), then closes.
After any end, posted receive buffers complete with FLUSHED.

Threads: a receive thread (blocking reads with a short timeout, so it also
notices :meth:`close`) and a transmit thread (the only writer of the
socket after start; a Read Response never waits behind a send that waits
for the peer). Both start at the first :meth:`~SoftwareRnic.post_send`,
:meth:`~SoftwareRnic.poll` or :meth:`~SoftwareRnic.start`, so that regions
and receive buffers set up before that are in place when the first FPDU is
processed (the responder's receive buffers are held back until the
initiator's first FPDU, the RFC 6581 RTR, has been consumed).
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import select
import socket
import threading
import time

from rnic.host.net import cm
from rnic.host.model import ddp, rdmap, segment
from rnic.host.spec.errors import DdpErrorType, DdpTaggedCode, DdpUntaggedCode, ErrorInfo, Layer, MpaError, \
    ProtocolError, RdmapErrorType, RdmapOperationCode, RdmapProtectionCode
from rnic.host.model.mpa_frames import IRD_ORD_ULP
from rnic.host.model.rdmap import Opcode, ReadRequest, Terminate
from rnic.host.spec.regmap import CqQueue, CqStatus, SqOpcode
from rnic.host.model.sink import Access, Error, Memory, Placement, ReadRequestQueued, \
    ReadResponseComplete, Region, SendComplete, Sink, TerminateReceived

__all__ = [
    "Completion", "Event", "DataPath", "SoftwareRnic", "OPCODE_NAMES", "opcode_from", "error_name",
    "check_post", "local_address", "SendBuffer", "QueuedDataPath",
    "Access", "DEFAULT_ACCESS", "Memory", "Region",
]

_MASK32 = 0xFFFFFFFF

#: The rights a region gets unless the caller says otherwise: the peer may read, write and
#: invalidate it (as Linux, where any memory region of the connection's protection domain
#: may be invalidated by a Send with Invalidate).
DEFAULT_ACCESS = Access.REMOTE_READ | Access.REMOTE_WRITE | Access.REMOTE_INV

#: Names of work request / completion opcodes (CLI and JSON).
OPCODE_NAMES = {
    SqOpcode.RDMA_WRITE: "write", SqOpcode.RDMA_READ: "read", SqOpcode.SEND: "send",
    SqOpcode.SEND_INV: "send_inv", SqOpcode.SEND_SE: "send_se",
    SqOpcode.SEND_SE_INV: "send_se_inv",
}
_BY_NAME = {v: k for k, v in OPCODE_NAMES.items()}
_SEND_KINDS = frozenset({SqOpcode.SEND, SqOpcode.SEND_INV, SqOpcode.SEND_SE, SqOpcode.SEND_SE_INV})


def opcode_from(opcode):
    """A :class:`SqOpcode` from a name (``send``, ``write``, ``read``, ...), int or enum."""
    if isinstance(opcode, str):
        try:
            return _BY_NAME[opcode.lower()]
        except KeyError:
            raise ValueError(f"unknown opcode {opcode!r} (known: {', '.join(_BY_NAME)})") from None
    if isinstance(opcode, bool) or not isinstance(opcode, int):
        raise TypeError(f"opcode must be a name or an int, not {type(opcode).__name__}")
    try:
        return SqOpcode(opcode)
    except ValueError:
        raise ValueError(f"opcode {opcode} is not a work request opcode "
                         f"({', '.join(f'{int(k)} {v}' for k, v in OPCODE_NAMES.items())})") from None


def error_name(info):
    """Names of an error's type and code, e.g. ``DDP tagged buffer: invalid STag``."""
    keep = {"STAG": "STag", "MSN": "MSN", "QN": "QN", "MO": "MO", "TO": "TO", "CRC": "CRC",
            "IRD": "IRD", "RTR": "RTR", "TCP": "TCP", "RDMAP": "RDMAP"}

    def name(enum_cls, v):
        try:
            words = enum_cls(v).name.split("_")
        except ValueError:
            return f"code {v:#04x}"
        return " ".join(keep.get(w, w.lower()) for w in words)
    layer = Layer(info.layer)
    if layer == Layer.LLP:
        return f"MPA: {name(MpaError, info.ecode)}"
    if layer == Layer.DDP:
        kinds = {DdpErrorType.CATASTROPHIC: ("local catastrophic", None),
                 DdpErrorType.TAGGED: ("tagged buffer", DdpTaggedCode),
                 DdpErrorType.UNTAGGED: ("untagged buffer", DdpUntaggedCode)}
    else:
        kinds = {RdmapErrorType.LOCAL_CATASTROPHIC: ("local catastrophic", None),
                 RdmapErrorType.REMOTE_PROTECTION: ("remote protection", RdmapProtectionCode),
                 RdmapErrorType.REMOTE_OPERATION: ("remote operation", RdmapOperationCode)}
    kind, codes = kinds.get(info.etype, (f"type {info.etype}", None))
    return f"{layer.name} {kind}" + (f": {name(codes, info.ecode)}" if codes else "")


@dataclasses.dataclass(frozen=True)
class Completion:
    """A finished work request (SQ) or filled receive buffer (RQ)."""
    wr_id: int
    status: CqStatus
    opcode: SqOpcode
    length: int
    queue: CqQueue = CqQueue.SQ
    conn: int = 0
    addr: int | None = None
    inval_stag: int | None = None
    solicited: bool = False
    error: ErrorInfo | None = None

    @property
    def ok(self):
        return self.status == CqStatus.SUCCESS

    def to_json(self):
        obj = {"wr_id": self.wr_id, "queue": self.queue.name.lower(),
               "opcode": OPCODE_NAMES.get(self.opcode, int(self.opcode)),
               "status": self.status.name.lower(), "length": self.length}
        if self.inval_stag is not None:
            obj["inval_stag"] = self.inval_stag
        if self.solicited:
            obj["solicited"] = True
        if self.error is not None:
            obj["error"] = self.error.to_json()
        return obj

    @classmethod
    def from_regs(cls, c):
        """From a :class:`rnic.host.driver.regs.Completion` read from a device's CQ registers."""
        return cls(wr_id=c.wr_id, status=CqStatus(c.status), opcode=SqOpcode(c.opcode),
                   length=c.length, queue=CqQueue(c.queue), conn=c.conn,
                   inval_stag=c.inv_stag if c.invalidated else None)


@dataclasses.dataclass(frozen=True)
class Event:
    """Something that happened on the connection besides a completion.

    ``kind``: ``remote_write`` (an inbound RDMA Write message was placed:
    ``stag``, ``to``, ``length``, ``addr``), ``remote_read`` (an inbound Read
    Request was answered: source ``stag``/``to``/``length``),
    ``terminate_sent`` / ``terminate_received`` (``info``, ``terminate``),
    ``error`` (the connection was lost or cut: ``info``), ``closed`` (the
    connection is down; ``info`` is what ended it, None for a clean close).
    """
    kind: str
    info: ErrorInfo | None = None
    terminate: Terminate | None = None
    stag: int | None = None
    to: int | None = None
    length: int | None = None
    addr: int | None = None

    def to_json(self):
        obj = {"event": self.kind}
        for name in ("stag", "to", "length"):
            v = getattr(self, name)
            if v is not None:
                obj[name] = v
        if self.info is not None:
            obj["error"] = self.info.to_json()
        elif self.kind == "closed":
            obj["error"] = None
        if self.terminate is not None:
            obj["terminate"] = self.terminate.to_json()
        return obj


class DataPath(abc.ABC):
    """What moves RDMAP messages on one connection (software model or hardware).

    Concrete: :meth:`wait`, :meth:`send`, :meth:`write`, :meth:`read` and the
    completion stash that lets :meth:`wait` pick one completion without
    losing others.
    """

    def __init__(self):
        self._stash = collections.deque()

    @abc.abstractmethod
    def register_region(self, stag, length, *, to=0, addr=None,
                        access=DEFAULT_ACCESS, data=None):
        """Register ``length`` octets of local memory under ``stag`` (TOs ``to ..``); returns the Region.

        ``stag`` None: the data path picks one (``Region.stag``); ``to`` None: the region is
        VA-based, its TOs are its addresses (``Region.base``, what librdmacm applications
        advertise); ``addr`` None: the data path allocates the memory.
        """

    @abc.abstractmethod
    def invalidate(self, stag):
        """Invalidate a local STag."""

    @abc.abstractmethod
    def post_recv(self, length, *, addr=None, wr_id=None):
        """Post a receive buffer (allocated when ``addr`` is None); returns its wr_id."""

    @abc.abstractmethod
    def post_send(self, opcode, payload=b"", *, wr_id=None, stag=0, to=0, length=None,
                  local_stag=None, local_to=0, inval_stag=None, signaled=True):
        """Post a work request; returns its wr_id (see the module docstring)."""

    @abc.abstractmethod
    def _poll(self, timeout, max_entries):
        """Completions from the implementation (see :meth:`poll`)."""

    @abc.abstractmethod
    def poll_events(self):
        """Events since the last call (list of :class:`Event`)."""

    @abc.abstractmethod
    def read_memory(self, addr, length):
        """Octets of local memory."""

    @abc.abstractmethod
    def write_memory(self, addr, data):
        """Store octets in local memory."""

    @abc.abstractmethod
    def close(self, timeout=None):
        """Graceful close (see the module docstring); idempotent."""

    @property
    @abc.abstractmethod
    def closed(self):
        """True once the connection is down (nothing more will complete)."""

    @property
    @abc.abstractmethod
    def error(self):
        """The ErrorInfo that ended the connection, or None."""

    def poll(self, timeout=0.0, max_entries=None):
        """Completions, oldest first; waits up to ``timeout`` seconds for the first one."""
        out = []
        while self._stash and (max_entries is None or len(out) < max_entries):
            out.append(self._stash.popleft())
        if out and timeout:
            timeout = 0.0
        if max_entries is None or len(out) < max_entries:
            out += self._poll(timeout, None if max_entries is None else max_entries - len(out))
        return out

    def wait(self, wr_ids, timeout=5.0):
        """Wait for the completions of ``wr_ids`` (one id or an iterable); others stay for :meth:`poll`.

        Returns one Completion (for one id) or a dict id -> Completion.
        TimeoutError (with what is missing) after ``timeout`` seconds.
        """
        single = isinstance(wr_ids, int)
        want = {wr_ids} if single else set(wr_ids)
        got = {}
        deadline = time.monotonic() + timeout
        keep = collections.deque()
        for c in self._stash:
            if c.queue == CqQueue.SQ and c.wr_id in want and c.wr_id not in got:
                got[c.wr_id] = c
            else:
                keep.append(c)
        self._stash = keep
        while len(got) < len(want):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no completion for wr_id {sorted(want - set(got))} "
                                   f"within {timeout} s")
            for c in self._poll(min(remaining, 0.2), None):
                if c.queue == CqQueue.SQ and c.wr_id in want and c.wr_id not in got:
                    got[c.wr_id] = c
                else:
                    self._stash.append(c)
            if self.closed and len(got) < len(want):
                for c in self._poll(0.0, None):
                    if c.queue == CqQueue.SQ and c.wr_id in want:
                        got[c.wr_id] = c
                    else:
                        self._stash.append(c)
                if len(got) < len(want):
                    raise ProtocolError(self.error or ErrorInfo.mpa(
                        MpaError.TCP_CLOSED, "the connection closed before the work completed"))
        return got[wr_ids] if single else got

    # conveniences
    def send(self, payload=b"", **kw):
        return self.post_send("send", payload, **kw)

    def write(self, payload=b"", *, stag, to=0, **kw):
        return self.post_send("write", payload, stag=stag, to=to, **kw)

    def read(self, length, *, stag, to=0, **kw):
        return self.post_send("read", length=length, stag=stag, to=to, **kw)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_FINAL = ("closed", "error")


class QueuedDataPath(DataPath):
    """A :class:`DataPath` whose completions (``_cq``) and events (``_events``) wait in deques
    guarded by the condition ``_cond``, filled by its own threads; ``start()`` starts them.
    Its state is ``_state``, ``_error`` and ``_fence_open``."""

    @property
    def state(self):
        """``idle`` (not started), ``rts``, ``closing`` (going down: a Terminate was sent or
        received, or :meth:`close` is running), then ``closed`` (clean) or ``error``."""
        return self._state

    @property
    def closed(self):
        return self._state in _FINAL

    @property
    def error(self):
        return self._error

    @property
    def fence_open(self):
        """True once this side may send FPDUs (responder: after the initiator's first FPDU)."""
        return self._fence_open

    def _wr_id(self, wr_id):
        """``wr_id`` checked, or the next of ``_next_wr`` (32 bits, never 0) when None."""
        if wr_id is None:
            wr_id = self._next_wr
            self._next_wr = (self._next_wr + 1) & _MASK32 or 1
            return wr_id
        if isinstance(wr_id, bool) or not isinstance(wr_id, int) or not 0 <= wr_id <= _MASK32:
            raise ValueError(f"wr_id must be a 32-bit int, not {wr_id!r}")
        return wr_id

    def _poll(self, timeout, max_entries):
        self.start()
        deadline = time.monotonic() + (timeout or 0.0)
        with self._cond:
            while not self._cq and not self.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            out = []
            while self._cq and (max_entries is None or len(out) < max_entries):
                out.append(self._cq.popleft())
            return out

    def poll_events(self):
        with self._cond:
            out = list(self._events)
            self._events.clear()
            return out

    def data(self, completion):
        """The octets a completion refers to (received message / Read data), else b""."""
        if completion.addr is None:
            return b""
        return self.read_memory(completion.addr, completion.length)

    def wait_closed(self, timeout=None):
        """Wait until the connection is down; True if it is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self.closed:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(0.2 if remaining is None else min(remaining, 0.2))
        return True


# -- the software RNIC -----------------------------------------------------------------

@dataclasses.dataclass
class _WR:
    wr_id: int
    opcode: SqOpcode
    payload: bytes | None = b""     # None: ``length`` octets at ``local_stag``/``local_to``
    stag: int = 0
    to: int = 0
    length: int = 0
    local_stag: int = 0
    local_to: int = 0
    local_addr: int | None = None
    inval_stag: int | None = None
    signaled: bool = True
    internal_sink: bool = False


def check_post(opcode, payload=b"", *, wr_id=None, stag=0, to=0, length=None, inval_stag=None,
               signaled=True, local_stag=None, local_to=0):
    """The arguments of :meth:`DataPath.post_send` checked (ValueError naming the bad one), as a
    work request record (``opcode``, ``payload``, ``length``, ``stag``/``to`` of a Write or
    Read, ``inval_stag``, ``signaled``, ``local_stag``/``local_to``; ``wr_id`` as given, None
    included). A Send or Write from registered memory (``local_stag`` given) has ``payload``
    None: the data path gathers its ``length`` octets from the region."""
    op = opcode_from(opcode)
    payload = bytes(payload)
    for name, v, bits in (("stag", stag, 32), ("to", to, 64), ("local_to", local_to, 64)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << bits:
            raise ValueError(f"{name} = {v!r} does not fit {bits} bits")
    if local_stag is not None and (isinstance(local_stag, bool) or not isinstance(local_stag, int)
                                   or not 0 <= local_stag <= _MASK32):
        raise ValueError(f"local_stag = {local_stag!r} does not fit 32 bits")
    if wr_id is not None and (isinstance(wr_id, bool) or not isinstance(wr_id, int)
                              or not 0 <= wr_id <= _MASK32):
        raise ValueError(f"wr_id must be a 32-bit int, not {wr_id!r}")
    wr = _WR(wr_id, op, signaled=bool(signaled))
    wr.local_to = local_to
    if op == SqOpcode.RDMA_READ or local_stag is not None:
        if payload:
            raise ValueError("an RDMA Read carries no payload: give length=" if op ==
                             SqOpcode.RDMA_READ else "give either the payload or local_stag= "
                             "and length= of registered memory, not both")
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= _MASK32:
            raise ValueError(f"length must be 0..2**32-1, not {length!r}")
        wr.length, wr.payload, wr.local_stag = length, None, local_stag
        if op == SqOpcode.RDMA_READ:
            wr.stag, wr.to = stag, to
            return wr
    else:
        if length is not None and length != len(payload):
            raise ValueError("length= is for RDMA Reads and data in registered memory "
                             "(local_stag=); otherwise the payload's length is sent")
        wr.payload, wr.length = payload, len(payload)
    if op == SqOpcode.RDMA_WRITE:
        wr.stag, wr.to = stag, to
        if wr.length and to + wr.length > 1 << 64:
            raise ValueError("TO + length wraps 64 bits")
    elif op in (SqOpcode.SEND_INV, SqOpcode.SEND_SE_INV):
        if inval_stag is None:
            raise ValueError(f"{OPCODE_NAMES[op]} needs inval_stag=")
        if isinstance(inval_stag, bool) or not isinstance(inval_stag, int) \
                or not 0 <= inval_stag <= _MASK32:
            raise ValueError("inval_stag does not fit 32 bits")
        wr.inval_stag = inval_stag
    elif inval_stag is not None:
        raise ValueError("inval_stag= is for send_inv / send_se_inv")
    return wr


def local_address(region, stag, to, length, *, sink=False):
    """The local memory address of ``length`` octets at ``stag``/``to`` of the registered
    ``region`` (``region`` None: ``stag`` is not registered): the source of a Send or Write
    from registered memory, or (``sink``) an RDMA Read's sink. ValueError when they are not
    all inside it."""
    if region is None or not region.valid or not region.contains(to, length):
        raise ValueError(f"local {'sink' if sink else 'source'} STag {stag:#x} TO {to:#x} + "
                         f"{length} is not inside a registered region")
    return region.address(to)


class SendBuffer:
    """A registered buffer of ``length`` octets of ``dp`` (a verbs application's send
    buffer) that each message is written into and then posted from: for messages sent one
    at a time, or values of which a later one may replace one not yet sent."""

    def __init__(self, dp, length, *, stag=None, access=Access.NONE):
        self.dp = dp
        self.region = dp.register_region(stag, length, to=None, access=access)

    def post(self, opcode, data, **kw):
        """Post ``data`` as a Send or Write (``kw``: of :meth:`DataPath.post_send`); its wr_id."""
        if len(data) > self.region.length:
            raise ValueError(f"{len(data)} octets do not fit the {self.region.length}-octet "
                             f"send buffer")
        self.dp.write_memory(self.region.addr, data)
        return self.dp.post_send(opcode, length=len(data), local_stag=self.region.stag,
                                 local_to=self.region.base, **kw)


_RTR = object()              # buffer id / read marker of the RFC 6581 RTR


def _lost(info):
    """True when a TCP_CLOSED error is a lost connection (reset), not the peer's FIN."""
    return "connection lost" in (info.text or "")


class SoftwareRnic(QueuedDataPath):
    """:class:`DataPath` done in software over the Negotiated connection's socket.

    Parameters
    ----------
    negotiated : rnic.host.net.cm.Negotiated
        An accepted (not rejected, not closed) connection. The responder may
        or may not have called ``wait_first_fpdu`` already.
    memory : Memory or None
        Host memory for placement and Read Responses (a new one by default).
    conn : int
        Connection / DDP stream id (in completions and region ownership).
    ird, ord : int or None
        Inbound / outbound RDMA Read limits; default the negotiated values
        (0x3FFF, "left to the ULP", when the connection is not enhanced).
    first_fpdu_timeout : float or None
        Responder: how long to wait for the initiator's first FPDU (None:
        until it arrives, the peer closes or :meth:`close` is called).
    linger : float
        Seconds :meth:`close` (and an error) waits for the peer's FIN.
    tick : float
        Receive poll interval (how soon the threads notice a close).
    """

    def __init__(self, negotiated, *, memory=None, conn=0, ird=None, ord=None,
                 first_fpdu_timeout=None, linger=2.0, tick=0.05):
        super().__init__()
        if not isinstance(negotiated, cm.Negotiated):
            raise TypeError("negotiated must be a rnic.host.net.cm.Negotiated")
        if negotiated.rejected or negotiated.closed:
            raise ValueError("the connection is rejected or closed")
        self.neg = negotiated
        self.conn = conn
        self.memory = Memory() if memory is None else memory
        self.ird = self._limit(negotiated.ird if ird is None else ird, "ird")
        self.ord = self._limit(negotiated.ord if ord is None else ord, "ord")
        self.sink = Sink(memory=self.memory, stream=conn, ird=self.ird,
                         terminate_msn=negotiated.tx.next_msn(2))
        self.first_fpdu_timeout = first_fpdu_timeout
        self.linger = linger
        self.tick = tick
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._cq = collections.deque()
        self._events = collections.deque()
        self._sq = collections.deque()
        self._urgent = collections.deque()      # ("response", ReadRequest, internal) | ("terminate", ulpdu) | ("fin",)
        self._reads = collections.deque()       # outstanding Reads: _WR or _RTR
        self._posted = {}                       # wr_id -> (addr, length) of receive buffers
        self._pending_posts = []
        self._rx_ready = False
        self._fence_open = negotiated.role == "initiator"
        self._rtr_read = None                   # "answer" | "skip": how to treat the RTR Read Request
        self._sending = None
        self._tx_stop = False
        self._fin_sent = False
        self._rx_stop = False
        self._rx_dead = False                   # deliver nothing more
        self._closing = False
        self._linger_deadline = None            # stop receiving after this (going down)
        self._state = "idle"
        self._error = None
        self.terminate_sent = None
        self.terminate_received = None
        self._wmsg = None                       # [stag, to, length] of the inbound Write in progress
        self._next_wr = 1
        self._next_addr = 0x10000
        self._next_stag = 0x7F000001
        self._threads = []
        self._started = False
        self.stats = {"tx_fpdus": 0, "tx_octets": 0, "tx_markers": 0, "rx_fpdus": 0,
                      "rx_octets": 0, "rx_markers": 0, "rx_crc_errors": 0,
                      "rx_marker_errors": 0, "rx_length_errors": 0,
                      "max_outstanding_reads": 0}
        if negotiated.role == "initiator" and negotiated.p2p and negotiated.rtr == "read":
            self._reads.append(_RTR)            # the zero-length Read RTR awaits its Response
        if negotiated.rtr_pending:
            negotiated.send_rtr()               # connect(send_rtr=False) left it to us

    @staticmethod
    def _limit(v, name):
        if v is None:
            return IRD_ORD_ULP
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative int")
        return v

    def __repr__(self):
        return (f"<SoftwareRnic {self.neg.role} conn={self.conn} state={self._state} "
                f"ird={self.ird} ord={self.ord}>")

    # -- state ---------------------------------------------------------------------
    def start(self):
        """Start the receive and transmit threads (idempotent)."""
        with self._lock:
            if self._started:
                return
            self._started = True
            if self._state == "idle":
                self._state = "rts"
        for target, name in ((self._rx_main, "rx"), (self._tx_main, "tx")):
            t = threading.Thread(target=target, daemon=True,
                                 name=f"rnic-sw-{self.neg.role}-{name}")
            self._threads.append(t)
            t.start()

    # -- memory --------------------------------------------------------------------
    def alloc(self, length, align=64):
        """A fresh range of ``length`` octets of :attr:`memory` (bump allocator); its address."""
        with self._lock:
            addr = -(-self._next_addr // align) * align
            self._next_addr = addr + max(length, 1)
            return addr

    def read_memory(self, addr, length):
        with self._lock:
            return self.memory.read(addr, length)

    def write_memory(self, addr, data):
        with self._lock:
            self.memory.write(addr, data)

    def register_region(self, stag, length, *, to=0, addr=None,
                        access=DEFAULT_ACCESS, data=None):
        if data is not None and len(data) > length:
            raise ValueError(f"{len(data)} octets of data do not fit a {length}-octet region")
        if addr is None:
            addr = self.alloc(length, 4096)
        if to is None:
            to = addr                       # VA-based: the TO is the address
        with self._lock:
            if stag is None:
                stag = self._next_stag
                self._next_stag = (self._next_stag + 1) & _MASK32 or 1
            region = self.sink.register_region(stag=stag, base=to, length=length,
                                               access=access, addr=addr)
            if data:
                self.memory.write(addr, data)
        return region

    def region(self, stag):
        """The local Region of ``stag`` or None."""
        with self._lock:
            return self.sink.region(stag)

    def invalidate(self, stag):
        with self._lock:
            self.sink.invalidate(stag)

    # -- posting -------------------------------------------------------------------
    def post_recv(self, length, *, addr=None, wr_id=None):
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= _MASK32:
            raise ValueError(f"receive length must be 0..2**32-1, not {length!r}")
        if addr is None:
            addr = self.alloc(length)
        with self._lock:
            wr_id = self._wr_id(wr_id)
            if wr_id in self._posted:
                raise ValueError(f"a receive buffer with wr_id {wr_id} is already posted")
            if self.closed or self._closing or self._rx_dead:
                self._cq.append(Completion(wr_id, CqStatus.FLUSHED, SqOpcode.SEND, 0,
                                           CqQueue.RQ, self.conn, addr,
                                           error=self._error))
                self._cond.notify_all()
                return wr_id
            self._posted[wr_id] = (addr, length)
            if self._rx_ready:
                self.sink.post_receive(addr=addr, length=length, buffer_id=wr_id)
            else:
                self._pending_posts.append((addr, length, wr_id))
        return wr_id

    def post_send(self, opcode, payload=b"", *, wr_id=None, stag=0, to=0, length=None,
                  local_stag=None, local_to=0, inval_stag=None, signaled=True):
        wr = check_post(opcode, payload, wr_id=None, stag=stag, to=to, length=length,
                        inval_stag=inval_stag, signaled=signaled, local_stag=local_stag,
                        local_to=local_to)
        op, length = wr.opcode, wr.length
        if wr.payload is None and op != SqOpcode.RDMA_READ:
            # (read now: the data must not change until the completion, as in verbs)
            wr.payload = self.read_memory(
                local_address(self.region(local_stag), local_stag, local_to, length), length)
        if op == SqOpcode.RDMA_READ:
            if local_stag is None:
                addr = self.alloc(length)
                with self._lock:
                    local_stag = self._next_stag
                    self._next_stag = (self._next_stag + 1) & _MASK32 or 1
                    self.sink.register_region(stag=local_stag, base=0, length=max(length, 1),
                                              access=Access.REMOTE_WRITE, addr=addr)
                wr.local_to, wr.local_addr, wr.internal_sink = 0, addr, True
            else:
                wr.local_addr = local_address(self.region(local_stag), local_stag, local_to,
                                              length, sink=True)
            wr.local_stag = local_stag
        with self._lock:
            if self._closing:
                raise RuntimeError("post_send() after close()")
            wr.wr_id = self._wr_id(wr_id)
            if self.closed or self._rx_dead:
                self._complete(wr, CqStatus.FLUSHED, error=self._error, force=True)
                return wr.wr_id
            if op == SqOpcode.RDMA_READ and self.ord == 0:
                self._complete(wr, CqStatus.BAD_REQUEST, force=True, error=ErrorInfo.mpa(
                    MpaError.INSUFFICIENT_IRD, "RDMA Read with ORD 0 (the peer's IRD is 0)"))
                return wr.wr_id
            self._sq.append(wr)
            self._cond.notify_all()
        self.start()
        return wr.wr_id

    # -- completions and events ----------------------------------------------------
    def _complete(self, wr, status, *, length=None, error=None, force=False):
        if not (wr.signaled or force or status != CqStatus.SUCCESS):
            return
        if wr.internal_sink:
            try:
                self.sink.invalidate(wr.local_stag)
            except KeyError:
                pass
        self._cq.append(Completion(wr.wr_id, status, wr.opcode,
                                   wr.length if length is None else length, CqQueue.SQ,
                                   self.conn, wr.local_addr if wr.opcode == SqOpcode.RDMA_READ
                                   else None, error=error))
        self._cond.notify_all()

    # -- receive side --------------------------------------------------------------
    def _flush_pending_posts(self):
        for addr, length, wr_id in self._pending_posts:
            self.sink.post_receive(addr=addr, length=length, buffer_id=wr_id)
        self._pending_posts.clear()
        self._rx_ready = True

    def _rx_main(self):
        neg = self.neg
        try:
            if neg.role == "responder":
                if not self._rx_first():
                    return
            else:
                with self._lock:
                    self._flush_pending_posts()
                    self._cond.notify_all()
            while True:
                with self._lock:
                    stop = self._rx_stop or (self._linger_deadline is not None
                                             and time.monotonic() > self._linger_deadline)
                if stop:
                    self._end(None)
                    return
                try:
                    rec = neg.recv_fpdu(timeout=self.tick)
                except TimeoutError:
                    continue
                except ProtocolError as e:
                    self._rx_failure(e.info)
                    return
                except (RuntimeError, OSError) as e:       # socket closed under us
                    self._end(None if self._closing else ErrorInfo.mpa(
                        MpaError.TCP_CLOSED, f"connection lost: {e}"))
                    return
                with self._lock:
                    self._count_rx(rec)
                    if not self._rx_dead:
                        self._deliver(rec.ulpdu)
        except Exception as exc:            # noqa: BLE001 - report, never die silently
            info = ErrorInfo.mpa(MpaError.LOCAL_CATASTROPHIC, f"local error: {exc!r}")
            with self._lock:
                if self._state not in _FINAL and not self._rx_dead:
                    self._fail_local(info, None)
            self._end(info)

    def _rx_first(self):
        """Responder: consume the initiator's first FPDU, then open the fence. False: ended."""
        neg = self.neg
        try:
            if neg.first_fpdu is None:
                timeout = 1e9 if self.first_fpdu_timeout is None else self.first_fpdu_timeout
                rec = neg.wait_first_fpdu(timeout=timeout, answer_read_rtr=False)
                answered = False
            else:
                rec = neg.first_fpdu
                answered = neg.read_rtr_response is not None
        except cm.MpaSetupError as e:
            with self._lock:
                if neg.decoder.error is not None and not neg.zero_crc_terminate:
                    self._count_decoder_error(e.info)
                if e.terminate is not None:
                    self._got_terminate(e.terminate)
                elif e.term_sent is not None:
                    self.terminate_sent = e.term_sent
                    self._events.append(Event("terminate_sent", e.info, e.term_sent))
                    self._error = e.info
                    self._state = "closing"
            info = e.info
            if e.terminate is None and e.term_sent is None:
                if self._closing or (info.ecode == MpaError.TCP_CLOSED
                                     and neg.decoder.error is None and not _lost(info)
                                     and "timeout" not in info.text):
                    info = None          # a FIN (ours or the peer's) before any FPDU
                else:
                    with self._lock:
                        self._events.append(Event("error", info))
            self._end(info)
            return False
        except (RuntimeError, OSError) as e:
            self._end(None if self._closing else ErrorInfo.mpa(MpaError.TCP_CLOSED, str(e)))
            return False
        with self._lock:
            self._count_rx(rec)
            if neg.p2p and neg.rtr is not None and rec.ulpdu == neg.rtr_ulpdu:
                if neg.rtr == "send":
                    self.sink.post_receive(addr=0, length=0, buffer_id=_RTR)
                elif neg.rtr == "read":
                    self._rtr_read = "skip" if answered else "answer"
                self._deliver(rec.ulpdu)
                self._flush_pending_posts()
            else:
                self._flush_pending_posts()
                self._deliver(rec.ulpdu)
            self._fence_open = True
            self._cond.notify_all()
        return True

    def _count_decoder_error(self, info):
        if info.layer == Layer.LLP and info.ecode == MpaError.TCP_CLOSED:
            return
        key = {MpaError.CRC: "rx_crc_errors", MpaError.MARKER: "rx_marker_errors"}.get(
            info.ecode if info.layer == Layer.LLP else None, "rx_length_errors")
        self.stats[key] += 1

    def _count_rx(self, rec):
        self.stats["rx_fpdus"] += 1
        self.stats["rx_octets"] += rec.length
        self.stats["rx_markers"] += len(rec.markers)

    def _deliver(self, ulpdu):
        """Validate and place one ULPDU (lock held)."""
        write = None
        if ulpdu and ulpdu[0] & ddp.T_FLAG:
            try:
                header, payload = ddp.parse(ulpdu)
                if rdmap.parse_control(header.rsvd_ulp)[2] == Opcode.RDMA_WRITE:
                    write = (header, len(payload))
            except ProtocolError:
                pass
        for ev in self.sink.receive(ulpdu):
            if isinstance(ev, Placement):
                continue
            if isinstance(ev, SendComplete):
                self._recv_done(ev)
            elif isinstance(ev, ReadRequestQueued):
                mode, self._rtr_read = self._rtr_read, None
                if mode == "skip":
                    self.sink.pop_read_request()
                else:
                    self._urgent.append(("response", ev.request, mode == "answer"))
                    self._cond.notify_all()
            elif isinstance(ev, ReadResponseComplete):
                self._read_done(ev, ulpdu)
            elif isinstance(ev, TerminateReceived):
                self._got_terminate(ev.terminate)
            elif isinstance(ev, Error):
                self._fail_local(ev.info, ev.terminate)
                return
        if write is not None and self.sink.error is None:
            header, n = write
            if self._wmsg is None:
                self._wmsg = [header.stag, header.to, 0]
            self._wmsg[2] += n
            if header.last:
                stag, to, length = self._wmsg
                self._wmsg = None
                if length:
                    region = self.sink.region(stag)
                    self._events.append(Event("remote_write", stag=stag, to=to, length=length,
                                              addr=region.address(to)))
                    self._cond.notify_all()

    def _recv_done(self, ev):
        if ev.buffer_id is _RTR:
            return
        addr, _ = self._posted.pop(ev.buffer_id, (None, 0))
        if ev.inval_stag is not None:
            op = SqOpcode.SEND_SE_INV if ev.solicited else SqOpcode.SEND_INV
        else:
            op = SqOpcode.SEND_SE if ev.solicited else SqOpcode.SEND
        self._cq.append(Completion(ev.buffer_id, CqStatus.SUCCESS, op, ev.length, CqQueue.RQ,
                                   self.conn, addr, ev.inval_stag, ev.solicited))
        self._cond.notify_all()

    def _read_done(self, ev, ulpdu):
        if not self._reads:
            info = ErrorInfo.rdmap(RdmapErrorType.REMOTE_OPERATION,
                                   RdmapOperationCode.UNEXPECTED_OPCODE,
                                   "RDMA Read Response without an outstanding RDMA Read Request")
            term = Terminate.for_error(info, ulpdu)
            self._fail_local(info, segment.ulpdu(Opcode.TERMINATE, term,
                                                 msn=self.neg.tx.next_msn(2)))
            return
        wr = self._reads.popleft()
        if wr is not _RTR:
            if ev.length == wr.length:
                self._complete(wr, CqStatus.SUCCESS)
            else:
                self._complete(wr, CqStatus.LOCAL_LENGTH, length=ev.length, error=ErrorInfo.rdmap(
                    RdmapErrorType.REMOTE_OPERATION, RdmapOperationCode.UNSPECIFIED,
                    f"Read Response of {ev.length} octets for a Read of {wr.length}"))
        self._cond.notify_all()

    def _flush(self, *, reads_status=CqStatus.FLUSHED, info=None):
        """Complete everything outstanding (lock held)."""
        while self._reads:
            wr = self._reads.popleft()
            if wr is not _RTR:
                self._complete(wr, reads_status, length=0, error=info, force=True)
        while self._sq:
            self._complete(self._sq.popleft(), CqStatus.FLUSHED, length=0, error=info, force=True)
        self._urgent = collections.deque(j for j in self._urgent if j[0] != "response")
        self._pending_posts.clear()
        for wr_id, (addr, _) in list(self._posted.items()):
            self._cq.append(Completion(wr_id, CqStatus.FLUSHED, SqOpcode.SEND, 0, CqQueue.RQ,
                                       self.conn, addr, error=info))
        self._posted.clear()
        self._cond.notify_all()

    def _fail_local(self, info, term_ulpdu):
        """A local protocol error: send the Terminate, flush, FIN (lock held)."""
        self._rx_dead = True
        self._error = info
        self._state = "closing"
        if term_ulpdu is None:
            term = Terminate.for_error(info)
            term_ulpdu = segment.ulpdu(Opcode.TERMINATE, term, msn=self.neg.tx.next_msn(2))
        else:
            term = Terminate.parse(ddp.parse(term_ulpdu)[1])
        self.terminate_sent = term
        self._events.append(Event("terminate_sent", info, term))
        self._flush(info=info)
        self._urgent.appendleft(("terminate", term_ulpdu))
        self._urgent.append(("fin",))
        self._linger_deadline = time.monotonic() + self.linger
        self._cond.notify_all()

    def _got_terminate(self, term):
        """The peer's Terminate (lock held)."""
        self._rx_dead = True
        try:
            info = term.info
        except ValueError:
            info = ErrorInfo.mpa(MpaError.LOCAL_CATASTROPHIC, "Terminate with an unknown layer")
        info = dataclasses.replace(info, text=f"the peer's Terminate: {error_name(info)}")
        self._error = info
        self._state = "closing"
        self.terminate_received = term
        self._events.append(Event("terminate_received", info, term))
        self._flush(reads_status=CqStatus.REMOTE_ERROR, info=info)
        self._urgent.append(("fin",))
        self._linger_deadline = time.monotonic() + self.linger
        self._cond.notify_all()

    def _rx_failure(self, info):
        """recv_fpdu failed: a bad FPDU, a cut FPDU, a FIN or a reset."""
        dec_err = self.neg.decoder.error
        closed = info.layer == Layer.LLP and info.ecode == MpaError.TCP_CLOSED
        bad_fpdu = dec_err is not None and not closed
        with self._lock:
            if bad_fpdu:
                # CRC, marker, length: report with a Terminate, then FIN (RFC 5044 section 8)
                self._count_decoder_error(info)
                if self._state not in _FINAL and not self._rx_dead:
                    self._fail_local(info, None)
                end = info
            elif closed and (dec_err is not None or _lost(info)):
                # a FIN inside an FPDU, or a reset: MPA error 1
                self._events.append(Event("error", info))
                end = info
            else:
                end = None          # the peer's FIN at an FPDU boundary: a clean close
        if bad_fpdu:
            self._drain()
        self._end(end)

    def _drain(self):
        """After a decoder error: wait for our Terminate+FIN to go, then for the peer's FIN."""
        deadline = time.monotonic() + self.linger
        with self._cond:
            while not self._fin_sent and not self._tx_stop and time.monotonic() < deadline:
                self._cond.wait(0.05)
        sock = self.neg.sock
        while time.monotonic() < deadline:
            try:
                r, _, _ = select.select([sock], [], [], 0.05)
                if r and not sock.recv(65536):
                    return
            except (OSError, ValueError):
                return

    def _end(self, info):
        """The connection is down (called by the receive thread): stop TX, close, flush."""
        with self._lock:
            if self._state in _FINAL:
                return
            if self._error is None and info is not None:
                self._error = info
            if not self._fin_sent and not self._tx_stop:
                self._urgent.append(("fin",))
            self._cond.notify_all()
        # let the transmit thread send what must go (Terminate, FIN), bounded
        deadline = time.monotonic() + min(self.linger, 2.0)
        with self._cond:
            while (not self._fin_sent and not self._tx_stop and self._fence_open
                   and time.monotonic() < deadline):
                self._cond.wait(0.05)
            self._tx_stop = True
            self._cond.notify_all()
        self.neg.close()
        with self._lock:
            final = "error" if self._error is not None else "closed"
            self._flush(info=self._error)
            self._state = final
            self._events.append(Event("closed", self._error))
            self._cond.notify_all()

    # -- transmit side -------------------------------------------------------------
    def _next_job(self):
        """The next thing to send, or None to stop (lock held)."""
        while True:
            if self._tx_stop:
                return None
            if self._urgent:
                head = self._urgent[0]
                if self._fence_open or head[0] in ("terminate", "fin"):
                    return self._urgent.popleft()
            if (self._fence_open and self._sq and not self._rx_dead
                    and self._state not in _FINAL):
                wr = self._sq[0]
                if wr.opcode != SqOpcode.RDMA_READ or len(self._reads) < self.ord:
                    self._sq.popleft()
                    if wr.opcode == SqOpcode.RDMA_READ:
                        self._reads.append(wr)
                        self.stats["max_outstanding_reads"] = max(
                            self.stats["max_outstanding_reads"],
                            sum(1 for r in self._reads if r is not _RTR))
                    self._sending = wr
                    return ("wr", wr)
            self._cond.wait(0.5)

    def _tx_main(self):
        neg = self.neg
        while True:
            with self._cond:
                job = self._next_job()
            if job is None:
                return
            kind = job[0]
            try:
                if kind == "fin":
                    try:
                        neg.sock.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    with self._cond:
                        self._fin_sent = True
                        self._tx_stop = True
                        self._cond.notify_all()
                    return
                if kind == "terminate":
                    self._transmit([job[1]])
                    continue
                if kind == "response":
                    _, req, internal = job
                    with self._lock:
                        data = b""
                        if req.size:
                            region = self.sink.region(req.src_stag)
                            data = self.memory.read(region.address(req.src_to), req.size)
                        # Free the IRD slot before the Response leaves: once its last
                        # segment is on the socket the requester may complete the Read
                        # and send its next Read Request, which the receive thread could
                        # otherwise check against IRD before this thread frees the slot.
                        self.sink.pop_read_request()
                    self._transmit(neg.tx.read_response(data, stag=req.sink_stag, to=req.sink_to))
                    with self._lock:
                        if not internal and req.size:
                            self._events.append(Event("remote_read", stag=req.src_stag,
                                                      to=req.src_to, length=req.size))
                        self._cond.notify_all()
                    continue
                wr = job[1]
                self._transmit(self._ulpdus(wr))
                with self._lock:
                    self._sending = None
                    if wr.opcode != SqOpcode.RDMA_READ:
                        self._complete(wr, CqStatus.SUCCESS)
            except (OSError, TimeoutError) as e:
                info = ErrorInfo.mpa(MpaError.TCP_CLOSED, f"connection lost while sending: {e}")
                with self._lock:
                    if kind == "wr":
                        wr = job[1]
                        if wr in self._reads:
                            self._reads.remove(wr)
                        self._complete(wr, CqStatus.FLUSHED, length=0, error=info, force=True)
                    if self._error is None:
                        self._error = info
                        self._events.append(Event("error", info))
                    self._flush(info=info)
                    self._tx_stop = True
                    self._rx_stop = True
                    self._cond.notify_all()
                return
            except Exception as e:          # noqa: BLE001 - a local failure: Terminate, FIN
                info = ErrorInfo.rdmap(RdmapErrorType.LOCAL_CATASTROPHIC, 0,
                                       f"local error while sending: {e!r}")
                with self._lock:
                    if kind == "wr":
                        wr = job[1]
                        if wr in self._reads:
                            self._reads.remove(wr)
                        self._sending = None
                        self._complete(wr, CqStatus.FLUSHED, length=0, error=info, force=True)
                    if self._state not in _FINAL and not self._rx_dead:
                        self._fail_local(info, None)

    def _ulpdus(self, wr):
        tx = self.neg.tx
        if wr.opcode == SqOpcode.RDMA_WRITE:
            return tx.write(wr.payload, stag=wr.stag, to=wr.to)
        if wr.opcode == SqOpcode.RDMA_READ:
            return tx.read_request(ReadRequest(sink_stag=wr.local_stag, sink_to=wr.local_to,
                                               size=wr.length, src_stag=wr.stag, src_to=wr.to))
        return tx.send(wr.payload, solicited=wr.opcode in (SqOpcode.SEND_SE, SqOpcode.SEND_SE_INV),
                       inval_stag=wr.inval_stag)

    def _transmit(self, ulpdus):
        """Frame and send ULPDUs (transmit thread only)."""
        neg = self.neg
        delay = neg.earliest_tx - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        for u in ulpdus:
            markers = len(neg.encoder.layout(len(u)).markers)
            wire = neg.encoder.encode(u)
            self._send_all(wire)
            with self._lock:
                self.stats["tx_fpdus"] += 1
                self.stats["tx_octets"] += len(wire)
                self.stats["tx_markers"] += markers

    def _send_all(self, data):
        """sendall that does not depend on the socket's timeout (the receive thread sets it)."""
        sock = self.neg.sock
        view = memoryview(data)
        deadline = time.monotonic() + self.neg.params.timeout
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the peer took no data for {self.neg.params.timeout} s")
            _, w, _ = select.select([], [sock], [], min(remaining, 0.2))
            if self._tx_stop and not w:
                raise OSError("transmit stopped")
            if not w:
                continue
            try:
                n = sock.send(view)
            except (BlockingIOError, socket.timeout, InterruptedError):
                continue
            view = view[n:]

    # -- closing -------------------------------------------------------------------
    def close(self, timeout=None):
        """Graceful close: finish the send queue and outstanding Reads, FIN, wait for the peer's FIN.

        ``timeout`` bounds the wait for outstanding work (default: the MPA
        timeout); ``linger`` bounds the wait for the peer's FIN.
        """
        timeout = self.neg.params.timeout if timeout is None else timeout
        with self._lock:
            if self.closed:
                return
            if not self._started:
                self._closing = True
                self._state = "closed"
                self._flush()
                self._events.append(Event("closed"))
                self.neg.close()
                return
            self._closing = True
            if self._state == "rts":
                self._state = "closing"
            deadline = time.monotonic() + timeout
            while ((self._sq or self._sending or any(j[0] == "response" for j in self._urgent)
                    or any(r is not _RTR for r in self._reads))
                   and not self.closed and not self._tx_stop and self._fence_open):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.1))
            if not self.closed:
                self._urgent.append(("fin",))
                if self._linger_deadline is None:
                    self._linger_deadline = time.monotonic() + self.linger
                self._cond.notify_all()
        # the receive thread ends at the peer's FIN or at the linger deadline ...
        self.wait_closed(self.linger + 0.5)
        if not self.closed:
            # ... unless it waits for the responder's first FPDU: unblock it
            try:
                self.neg.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(timeout=2.0)
        if not self.closed:
            self._end(None)
