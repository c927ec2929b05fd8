"""Host driver: typed register access to an RNIC over a pluggable transport.

Layers
------
:class:`Transport`
    32-bit reads and writes at byte addresses of the register window, plus
    ``close()``. Implementations here:

    * :class:`ModelTransport` -- an in-process :class:`host.regs.BankModel`
      with a small emulation of the core behind it (:class:`ModelCore`:
      contexts, STag table, queues, completion queue, error capture,
      counters), so that every driver sequence runs without hardware;
    * :class:`SocketTransport` -- a line protocol over TCP to a register
      server (:func:`serve_transport` / :class:`TransportServer`), which is
      how a running simulation (or a model in another process) is driven by
      the ``rnic`` CLI: ``--device tcp:127.0.0.1:PORT``.

:class:`Device`
    The driver: :meth:`~Device.identify`, :meth:`~Device.reset`,
    :meth:`~Device.program_connection` (from a :class:`host.cm.Negotiated`),
    :meth:`~Device.register_stag`, :meth:`~Device.post_receive`,
    :meth:`~Device.post_send` (a :class:`WorkRequest`),
    :meth:`~Device.poll_cq`, :meth:`~Device.read_errors`,
    :meth:`~Device.counters`, :meth:`~Device.status`, and register access by
    name (``REG`` or ``REG.FIELD``) for ``rnic regs``. The sequences are
    those of :class:`host.regs.Registers` (and of ``firmware/rnic.c``).

:func:`open_device`
    A registry of device specs: ``none`` (no device: None), ``model``,
    ``tcp:HOST:PORT`` and ``sim[:width=8,connections=16,...]`` (the Verilated
    RnicCore of :mod:`sim.device`, whose data paths go through the simulated
    hardware, :mod:`host.rnic_hw`); more kinds plug in with
    :func:`register_device_kind`.

Register server protocol (ASCII lines, ``\\n`` terminated)
----------------------------------------------------------
On connect the server sends ``RNIC-REGS 1``. Requests: ``R <addr>`` ->
``OK <value>`` ; ``W <addr> <value>`` -> ``OK`` ; ``Q`` -> the server closes.
Numbers are hexadecimal with ``0x``. A failed access (SLVERR, bad request)
answers ``ERR <text>``. One request at a time per connection; clients are
served concurrently, accesses to the transport are serialised.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import select
import socket
import threading

from . import regs
from .errors import ErrorInfo, Layer
from .regmap import PULSE, REGMAP, RO, ConnState, CqQueue, CqStatus, SqOpcode

__all__ = [
    "Transport", "TransportError", "DeviceError", "DeviceMismatch", "DeviceUnavailable",
    "QueueFull", "ModelCore", "ModelTransport", "SocketTransport", "TransportServer",
    "serve_transport", "Identity", "WorkRequest", "Device", "DEVICE_KINDS",
    "register_device_kind", "parse_device_spec", "open_device", "PROTOCOL_GREETING",
]

PROTOCOL_GREETING = "RNIC-REGS 1"
_MAX_LINE = 256


# -- errors -------------------------------------------------------------------------

class DeviceError(RuntimeError):
    """The device cannot be used (not an RNIC, unreachable, not available)."""


class DeviceMismatch(DeviceError, regs.DeviceMismatch):
    """The device is not an RNIC with a register map major version this driver knows."""


class DeviceUnavailable(DeviceError):
    """The device kind exists but cannot be opened here (yet)."""


class TransportError(OSError):
    """A register access failed (SLVERR, lost connection, bad answer)."""


class QueueFull(RuntimeError):
    """The receive or send queue of the device had no room: nothing was posted."""


# -- transports -----------------------------------------------------------------------

class Transport(regs.Transport, abc.ABC):
    """32-bit register access at byte addresses of the window, and ``close()``."""

    #: A short description for status output (e.g. ``model``, ``tcp:127.0.0.1:7000``).
    name = "transport"

    @abc.abstractmethod
    def read32(self, addr: int) -> int:
        """The 32-bit value at byte address ``addr``; TransportError on failure."""

    @abc.abstractmethod
    def write32(self, addr: int, value: int) -> None:
        """Write ``value`` at byte address ``addr``; TransportError on failure."""

    def close(self) -> None:
        """Release the transport (idempotent)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclasses.dataclass
class _Context:
    tx: regs.MpaDirection
    rx: regs.MpaDirection
    ird: int
    ord: int
    state: int
    error: tuple | None = None      # (layer, etype, ecode)


_COUNTER_NAMES = ("rx_fpdus", "rx_crc_errors", "rx_marker_errors", "rx_length_errors",
                  "rx_octets", "tx_fpdus", "tx_markers", "tx_octets")
_COUNTER_64 = {"rx_octets", "tx_octets"}


class ModelCore:
    """Register-visible behaviour of the RNIC core behind a :class:`~host.regs.BankModel`.

    It reacts to the bank's pulses (context COMMIT/SET_STATE, STag COMMIT,
    RQ POST, SQ DOORBELL, CQ POP, SOFT_RESET, CLEAR_COUNTERS) and drives the
    bank's read-only inputs (STATUS.READY, CTX_STATUS/CTX_ERROR of the
    selected connection, queue FULL flags, the completion queue head, the
    captured error, counters). It moves no data: a data path (the software
    RNIC of :mod:`host.rnic_sw`, through :mod:`host.transfer`) reports what
    happened with :meth:`complete`, :meth:`report_error`,
    :meth:`set_counters` and :meth:`set_state`, and the driver reads it back
    through the registers like it would from the gateware.

    Parameters
    ----------
    rq_depth, sq_depth : int
        Entries per connection before RQ_STATUS/SQ_STATUS.FULL.
    cq_depth : int
        Completion queue entries before CQ_STATUS.OVERFLOW.
    """

    def __init__(self, *, rq_depth=64, sq_depth=64, cq_depth=256):
        self.rq_depth, self.sq_depth, self.cq_depth = rq_depth, sq_depth, cq_depth
        self.contexts = {}
        self.stags = {}
        self.rq = collections.defaultdict(collections.deque)
        self.sq = collections.defaultdict(collections.deque)
        self.cq = collections.deque()
        self.counters = dict.fromkeys(_COUNTER_NAMES, 0)
        self.err_count = 0
        self.captured = None         # (conn, tx, layer, etype, ecode)
        self.bank = None

    # -- reactions to the bus side
    def on_pulse(self, bank, register, field, value):
        out = bank.out
        if (register, field) == ("ctrl", "soft_reset"):
            self.contexts.clear()
            self.rq.clear()
            self.sq.clear()
            self.cq.clear()
            self._clear_counters()
            self.captured = None
            bank.state[("err_status", "pending")] = 0
            bank.state[("err_status", "overflow")] = 0
            bank.state[("cq_status", "overflow")] = 0
        elif (register, field) == ("ctrl", "clear_counters"):
            self._clear_counters()
        elif register == "ctx_cmd":
            conn = out("conn_sel", "conn")
            if field == "commit":
                def d(name):
                    return regs.MpaDirection(bool(out(name, "markers")), bool(out(name, "crc")),
                                             out(name, "phase") & ~3, out(name, "mulpdu"))
                self.contexts[conn] = _Context(d("ctx_tx"), d("ctx_rx"), out("ctx_ird_ord", "ird"),
                                               out("ctx_ird_ord", "ord"), out("ctx_state", "state"))
            elif field == "set_state":
                ctx = self.contexts.get(conn)
                if ctx is not None:
                    ctx.state = out("ctx_state", "state")
        elif (register, field) == ("stag_cmd", "commit"):
            index = out("stag_index", "index")
            if index < bank.params["stags"]:
                self.stags[index] = {
                    "stag": out("stag_key", "stag"),
                    "base": out("stag_base_hi", "addr") << 32 | out("stag_base_lo", "addr"),
                    "length": out("stag_length", "length"),
                    "valid": bool(out("stag_attr", "valid")),
                    "remote_read": bool(out("stag_attr", "remote_read")),
                    "remote_write": bool(out("stag_attr", "remote_write")),
                    "remote_inv": bool(out("stag_attr", "remote_inv")),
                    "conn": out("stag_attr", "conn"),
                }
        elif (register, field) == ("rq_cmd", "post"):
            conn = out("rq_conn", "conn")
            if len(self.rq[conn]) < self.rq_depth:
                self.rq[conn].append({
                    "addr": out("rq_addr_hi", "addr") << 32 | out("rq_addr_lo", "addr"),
                    "length": out("rq_length", "length"), "wr_id": out("rq_id", "wr_id")})
        elif (register, field) == ("sq_cmd", "doorbell"):
            conn = out("sq_wr", "conn")
            if len(self.sq[conn]) < self.sq_depth:
                self.sq[conn].append({
                    "opcode": out("sq_wr", "opcode"), "signaled": bool(out("sq_wr", "signaled")),
                    "laddr": out("sq_laddr_hi", "addr") << 32 | out("sq_laddr_lo", "addr"),
                    "length": out("sq_length", "length"), "lstag": out("sq_lstag", "stag"),
                    "rstag": out("sq_rstag", "stag"),
                    "rto": out("sq_rto_hi", "to") << 32 | out("sq_rto_lo", "to"),
                    "inv_stag": out("sq_inv_stag", "stag"), "wr_id": out("sq_id", "wr_id")})
        elif (register, field) == ("cq_cmd", "pop"):
            if self.cq:
                self.cq.popleft()

    def _clear_counters(self):
        self.counters = dict.fromkeys(_COUNTER_NAMES, 0)
        self.err_count = 0

    def sync(self, bank):
        """Drive the bank's RO inputs from the core state (before every bus read)."""
        si = bank.set_input
        si("STATUS", "READY", 1)
        ctx = self.contexts.get(bank.out("conn_sel", "conn"))
        si("CTX_STATUS", "STATE", ConnState.IDLE if ctx is None else ctx.state)
        si("CTX_STATUS", "BUSY", 0)
        err = None if ctx is None else ctx.error
        si("CTX_STATUS", "ERROR", int(err is not None))
        layer, etype, ecode = err or (0, 0, 0)
        si("CTX_ERROR", "LAYER", layer)
        si("CTX_ERROR", "ETYPE", etype)
        si("CTX_ERROR", "ECODE", ecode)
        si("RQ_STATUS", "FULL", int(len(self.rq[bank.out("rq_conn", "conn")]) >= self.rq_depth))
        si("SQ_STATUS", "FULL", int(len(self.sq[bank.out("sq_wr", "conn")]) >= self.sq_depth))
        head = self.cq[0] if self.cq else None
        si("CQ_STATUS", "VALID", int(head is not None))
        if head is not None:
            si("CQ_WR_ID", "WR_ID", head.wr_id)
            si("CQ_INFO", "OPCODE", head.opcode)
            si("CQ_INFO", "QUEUE", head.queue)
            si("CQ_INFO", "INVALIDATED", int(head.invalidated))
            si("CQ_INFO", "STATUS", head.status)
            si("CQ_INFO", "CONN", head.conn)
            si("CQ_LENGTH", "LENGTH", head.length)
            si("CQ_INV_STAG", "STAG", head.inv_stag)
            si("CQ_INFO", "SOLICITED", int(head.solicited))
            si("CQ_MSN", "MSN", head.msn)
            si("CQ_STAG", "STAG", head.stag)
            si("CQ_TO_LO", "TO", head.to & 0xFFFFFFFF)
            si("CQ_TO_HI", "TO", head.to >> 32)
        cap = self.captured or (0, 0, 0, 0, 0)
        si("ERR_CONN", "CONN", cap[0])
        si("ERR_CONN", "TX", int(cap[1]))
        si("ERR_INFO", "LAYER", cap[2])
        si("ERR_INFO", "ETYPE", cap[3])
        si("ERR_INFO", "ECODE", cap[4])
        si("ERR_COUNT", "COUNT", self.err_count & 0xFFFFFFFF)
        for name, value in self.counters.items():
            if name in _COUNTER_64:
                si(name.upper() + "_LO", "COUNT", value & 0xFFFFFFFF)
                si(name.upper() + "_HI", "COUNT", (value >> 32) & 0xFFFFFFFF)
            else:
                si(name.upper(), "COUNT", value & 0xFFFFFFFF)

    # -- the core side, for a data path
    def complete(self, *, conn=0, wr_id, opcode, queue, status=CqStatus.SUCCESS, length=0,
                 invalidated=False, inv_stag=0, msn=0, solicited=False, stag=0, to=0):
        """Queue a completion; the matching posted RQ buffer / SQ work request is retired."""
        wr_id &= 0xFFFFFFFF
        q = self.rq[conn] if queue == CqQueue.RQ else self.sq[conn]
        for i, entry in enumerate(q):
            if entry["wr_id"] == wr_id:
                del q[i]
                break
        if len(self.cq) >= self.cq_depth:
            if self.bank is not None:
                self.bank.set_w1c("CQ_STATUS", "OVERFLOW", 1)
            return
        self.cq.append(regs.Completion(wr_id, int(opcode), int(queue), int(status), conn,
                                       length & 0xFFFFFFFF, bool(invalidated), inv_stag & 0xFFFFFFFF,
                                       msn=msn & 0xFFFFFFFF, solicited=bool(solicited),
                                       stag=stag & 0xFFFFFFFF, to=to & ((1 << 64) - 1)))

    def report_error(self, conn, info, *, tx=False, state=ConnState.ERROR):
        """Capture a protocol error (``ErrorInfo`` or ``(layer, etype, ecode)``) of ``conn``."""
        if isinstance(info, ErrorInfo):
            info = (int(info.layer), int(info.etype), int(info.ecode))
        self.err_count += 1
        ctx = self.contexts.get(conn)
        if ctx is not None:
            if ctx.error is None:
                ctx.error = tuple(info)
            if state is not None:
                ctx.state = state
        if self.bank is None:
            return
        if self.bank.out("err_status", "pending"):
            self.bank.set_w1c("ERR_STATUS", "OVERFLOW", 1)
        else:
            self.captured = (conn, bool(tx), *info)
            self.bank.set_w1c("ERR_STATUS", "PENDING", 1)

    def set_state(self, conn, state):
        ctx = self.contexts.get(conn)
        if ctx is not None:
            ctx.state = ConnState(state)

    def set_counters(self, **values):
        for name, value in values.items():
            if name not in self.counters:
                raise KeyError(f"no counter {name!r} (counters: {', '.join(self.counters)})")
            self.counters[name] = value

    def add_counters(self, **deltas):
        for name, value in deltas.items():
            self.set_counters(**{name: self.counters[name] + value})


class ModelTransport(Transport):
    """An in-process device: :class:`~host.regs.BankModel` plus :class:`ModelCore`.

    Parameters are the bank's build parameters (``width``, ``connections``,
    ``stags``) and the core's queue depths.
    """

    name = "model"

    def __init__(self, *, width=8, connections=16, stags=256, rq_depth=64, sq_depth=64,
                 cq_depth=256):
        self.core = ModelCore(rq_depth=rq_depth, sq_depth=sq_depth, cq_depth=cq_depth)
        self.bank = regs.BankModel(width=width, connections=connections, stags=stags,
                                   on_pulse=self.core.on_pulse)
        self.core.bank = self.bank
        self._lock = threading.RLock()
        self.closed = False

    def read32(self, addr):
        with self._lock:
            self.core.sync(self.bank)
            try:
                return self.bank.read32(addr)
            except OSError as e:
                raise TransportError(str(e)) from None

    def write32(self, addr, value):
        with self._lock:
            try:
                self.bank.write32(addr, value & 0xFFFFFFFF)
            except OSError as e:
                raise TransportError(str(e)) from None

    def close(self):
        self.closed = True


class SocketTransport(Transport):
    """Register access through a register server (:func:`serve_transport`) over TCP.

    Parameters
    ----------
    host, port : str, int
        Where the server listens (normally 127.0.0.1).
    timeout : float
        Seconds allowed for connecting and for each answer.
    """

    def __init__(self, host="127.0.0.1", port=0, *, timeout=5.0):
        self.name = f"tcp:{host}:{port}"
        self.timeout = timeout
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise DeviceError(f"cannot reach the register server at {host}:{port}: {e}") from None
        self._buf = b""
        self._lock = threading.Lock()
        try:
            greeting = self._line()
        except TransportError as e:
            self.close()
            raise DeviceError(f"{host}:{port} is not a register server: {e}") from None
        if greeting != PROTOCOL_GREETING:
            self.close()
            raise DeviceError(f"{host}:{port} is not a register server (it greets "
                              f"{greeting[:40]!r}, expected {PROTOCOL_GREETING!r})")

    def _line(self):
        while b"\n" not in self._buf:
            if len(self._buf) > _MAX_LINE:
                raise TransportError("answer line too long")
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                raise TransportError(f"no answer within {self.timeout} s") from None
            except OSError as e:
                raise TransportError(f"connection lost: {e}") from None
            if not data:
                raise TransportError("the register server closed the connection")
            self._buf += data
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("ascii", "replace").strip()

    def _request(self, text):
        with self._lock:
            if self.sock is None:
                raise TransportError("transport closed")
            try:
                self.sock.sendall(text.encode("ascii") + b"\n")
            except OSError as e:
                raise TransportError(f"connection lost: {e}") from None
            answer = self._line()
        if answer == "OK" or answer.startswith("OK "):
            return answer[3:].strip()
        if answer.startswith("ERR"):
            raise TransportError(answer[3:].strip() or "error")
        raise TransportError(f"unexpected answer {answer[:40]!r}")

    def read32(self, addr):
        value = self._request(f"R {addr:#x}")
        try:
            return int(value, 16) & 0xFFFFFFFF
        except ValueError:
            raise TransportError(f"bad read answer {value[:40]!r}") from None

    def write32(self, addr, value):
        self._request(f"W {addr:#x} {value & 0xFFFFFFFF:#010x}")

    def close(self):
        sock, self.sock = getattr(self, "sock", None), None
        if sock is not None:
            try:
                sock.sendall(b"Q\n")
            except OSError:
                pass
            sock.close()


class TransportServer:
    """Serve a :class:`Transport` to :class:`SocketTransport` clients over TCP.

    Parameters
    ----------
    transport : Transport
        What the clients' reads and writes go to (accesses are serialised).
    port : int
        TCP port (0: any free port; see :attr:`port`).
    host : str
        Address to bind (127.0.0.1 by default: the protocol has no access control).
    """

    def __init__(self, transport, port=0, host="127.0.0.1"):
        self.transport = transport
        self._sock = socket.create_server((host, port))
        self._sock.settimeout(0.2)
        self.host, self.port = self._sock.getsockname()[:2]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._clients = set()
        self.served = 0

    @property
    def address(self):
        return f"tcp:{self.host}:{self.port}"

    def serve(self, *, once=False):
        """Accept and serve clients until :meth:`close` (or after one client with ``once``)."""
        workers = []
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = self._sock.accept()
                except socket.timeout:
                    continue
                except OSError:
                    break
                if once:
                    self._client(conn)
                    break
                t = threading.Thread(target=self._client, args=(conn,), daemon=True)
                t.start()
                workers.append(t)
        finally:
            for t in workers:
                t.join(timeout=1.0)

    def start(self):
        """Serve in a background thread; returns self."""
        self._thread = threading.Thread(target=self.serve, daemon=True, name="rnic-regs-server")
        self._thread.start()
        return self

    def close(self):
        self._stop.set()
        for c in list(self._clients):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _answer(self, line):
        parts = line.split()
        if not parts:
            return "ERR empty request"
        try:
            if parts[0] == "R" and len(parts) == 2:
                with self._lock:
                    return f"OK {self.transport.read32(int(parts[1], 16)) & 0xFFFFFFFF:#010x}"
            if parts[0] == "W" and len(parts) == 3:
                addr, value = int(parts[1], 16), int(parts[2], 16)
                if not 0 <= value <= 0xFFFFFFFF:
                    return "ERR value does not fit 32 bits"
                with self._lock:
                    self.transport.write32(addr, value)
                return "OK"
        except ValueError:
            return f"ERR bad number in {line[:40]!r}"
        except OSError as e:
            return f"ERR {e}"
        return f"ERR unknown request {line[:40]!r} (R ADDR | W ADDR VALUE | Q)"

    def _client(self, conn):
        self._clients.add(conn)
        buf = b""
        try:
            conn.sendall(PROTOCOL_GREETING.encode() + b"\n")
            while not self._stop.is_set():
                r, _, _ = select.select([conn], [], [], 0.2)
                if not r:
                    continue
                data = conn.recv(4096)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    raw, _, buf = buf.partition(b"\n")
                    line = raw.decode("ascii", "replace").strip()
                    if line == "Q":
                        return
                    conn.sendall(self._answer(line).encode() + b"\n")
                if len(buf) > _MAX_LINE:
                    conn.sendall(b"ERR request line too long\n")
                    return
        except OSError:
            return
        finally:
            self._clients.discard(conn)
            self.served += 1
            conn.close()


def serve_transport(transport, port=0, *, host="127.0.0.1", once=False, ready=None):
    """Serve ``transport`` on ``host:port`` until interrupted (or after one client with ``once``).

    ``ready(server)`` is called once the socket listens (it can read
    ``server.port`` when ``port`` is 0). Blocks; use :class:`TransportServer`
    ``.start()`` for a background server.
    """
    server = TransportServer(transport, port, host)
    try:
        if ready is not None:
            ready(server)
        server.serve(once=once)
    finally:
        server.close()
    return server


# -- the driver ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Identity:
    """What :meth:`Device.identify` found."""
    magic: int
    major: int
    minor: int
    width: int
    connections: int
    stags: int

    def to_json(self):
        return {"magic": f"{self.magic:#010x}", "version": f"{self.major}.{self.minor}",
                "width": self.width, "connections": self.connections, "stags": self.stags}


@dataclasses.dataclass(frozen=True)
class WorkRequest:
    """A send queue work request (the SQ_* registers).

    ``opcode`` is a :class:`~host.regmap.SqOpcode` (or its name). ``laddr`` is
    the local address of Send/Write data or the sink TO of an RDMA Read
    (with ``lstag`` its sink STag); ``rstag``/``rto`` the remote STag and TO
    of a Write or Read; ``inv_stag`` the STag the peer invalidates.
    """
    opcode: SqOpcode
    conn: int = 0
    laddr: int = 0
    length: int = 0
    lstag: int = 0
    rstag: int = 0
    rto: int = 0
    inv_stag: int = 0
    wr_id: int = 0
    signaled: bool = True

    def __post_init__(self):
        op = self.opcode
        if isinstance(op, str):
            try:
                op = SqOpcode[op.upper()]
            except KeyError:
                raise ValueError(f"unknown work request opcode {self.opcode!r} (known: "
                                 f"{', '.join(m.name.lower() for m in SqOpcode)})") from None
        object.__setattr__(self, "opcode", SqOpcode(op))
        for name, bits in (("conn", 16), ("laddr", 64), ("length", 32), ("lstag", 32),
                           ("rstag", 32), ("rto", 64), ("inv_stag", 32), ("wr_id", 32)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << bits:
                raise ValueError(f"{name} = {v!r} does not fit {bits} bits")


def _state_name(v):
    return ConnState(v).name if v in ConnState._value2member_map_ else int(v)


class Device:
    """The RNIC driver over a :class:`Transport`.

    Parameters
    ----------
    transport : Transport
    polls : int
        Bound of every busy-wait (reads before TimeoutError).
    spec : str
        How the device was opened (for status output).
    """

    #: Set by a device kind whose hardware moves data itself: a callable
    #: ``factory(device, negotiated, conn) -> host.rnic_sw.DataPath``. None:
    #: the software RNIC moves the data and the device is kept in step
    #: (:mod:`host.transfer`).
    datapath_factory = None

    def __init__(self, transport, *, polls=1000, spec=None):
        self.transport = transport
        self.regs = regs.Registers(transport, polls=polls)
        self.spec = spec or getattr(transport, "name", "device")
        self.identity = None
        self._stag_index = {}

    # -- identification and control
    def identify(self):
        """Read ID, VERSION and CAPS; raise :class:`DeviceMismatch` with a clear text on mismatch."""
        try:
            magic = self.regs.read("ID")
        except OSError as e:
            raise DeviceError(f"{self.spec}: reading the ID register failed: {e}") from None
        if magic != regs.MAGIC:
            raise DeviceMismatch(
                f"{self.spec}: not an RNIC: the ID register reads {magic:#010x}, the RNIC magic "
                f"is {regs.MAGIC:#010x} (ASCII 'iWRP')")
        v = self.regs.fields("VERSION")
        major = regs.CONSTANTS["VERSION_MAJOR_RESET"]
        if v["major"] != major:
            raise DeviceMismatch(
                f"{self.spec}: register map version {v['major']}.{v['minor']} on the device, this "
                f"driver knows major version {major} (update the driver or the bitstream)")
        self.regs.probe()
        caps = self.regs.fields("CAPS")
        self.identity = Identity(magic, v["major"], v["minor"], v["width"], caps["connections"],
                                 caps["stags"])
        return self.identity

    def _ident(self):
        return self.identity or self.identify()

    def reset(self):
        """Soft reset (wait for READY) and enable the data path."""
        self._ident()
        self.regs.soft_reset()
        self.regs.enable(True)

    def enable(self, on=True):
        self.regs.enable(on)

    # -- connections
    def program_connection(self, conn, negotiated, *, rx_mulpdu=64768):
        """Write connection ``conn``'s context from the MPA negotiation and commit it.

        ``negotiated`` is a :class:`host.cm.Negotiated`, its ``context()``
        dict, or the keyword arguments of
        :meth:`host.regs.Registers.program_connection`. Returns those keyword
        arguments (tx, rx, ird, ord, state).
        """
        self._ident()
        if hasattr(negotiated, "context") and callable(negotiated.context):
            ctx = {**negotiated.context(), "fence_open": negotiated.fence_open}
            kw = regs.context_from_negotiated(ctx, rx_mulpdu=rx_mulpdu)
        elif isinstance(negotiated, dict) and "tx" in negotiated:
            kw = dict(negotiated)
        elif isinstance(negotiated, dict):
            kw = regs.context_from_negotiated(negotiated, rx_mulpdu=rx_mulpdu)
        else:
            raise TypeError("negotiated must be a host.cm.Negotiated or a context dict")
        self.regs.program_connection(conn, **kw)
        return kw

    def set_state(self, conn, state):
        if isinstance(state, str):
            state = ConnState[state.upper()]
        self.regs.set_state(conn, state)

    def connection(self, conn):
        """``{"conn", "state", "busy", "error"}`` of one connection (error: layer/etype/ecode or None)."""
        st = self.regs.connection_status(conn)
        err = ({"layer": st["layer"], "etype": st["etype"], "ecode": st["ecode"]}
               if st["error"] else None)
        return {"conn": conn, "state": _state_name(st["state"]), "busy": bool(st["busy"]),
                "error": err}

    # -- memory registration and queues
    def register_stag(self, stag, *, base, length, conn=0, remote_read=False, remote_write=False,
                      remote_inv=False, index=None):
        """Write an STag table row (a free one, or the row already holding ``stag``); returns the row."""
        ident = self._ident()
        if index is None:
            index = self._stag_index.get(stag)
        if index is None:
            used = set(self._stag_index.values())
            index = next((i for i in range(ident.stags) if i not in used), None)
            if index is None:
                raise QueueFull(f"STag table full ({ident.stags} rows)")
        if not 0 <= index < ident.stags:
            raise ValueError(f"STag row {index} out of range 0..{ident.stags - 1}")
        self.regs.write_stag(index, stag=stag, base=base, length=length, conn=conn,
                             remote_read=remote_read, remote_write=remote_write,
                             remote_inv=remote_inv, valid=True)
        self._stag_index[stag] = index
        return index

    def invalidate_stag(self, stag):
        """Clear VALID of ``stag``'s row (KeyError if this driver never registered it)."""
        index = self._stag_index.pop(stag)
        self.regs.write_stag(index, stag=stag, base=0, length=0, conn=0, valid=False)

    def post_receive(self, conn, addr, length, wr_id):
        """Post a receive buffer; :class:`QueueFull` if the receive queue has no room."""
        if not self.regs.post_recv(conn, addr, length, wr_id & 0xFFFFFFFF):
            raise QueueFull(f"receive queue of connection {conn} is full")

    def post_send(self, wr):
        """Post a :class:`WorkRequest`; :class:`QueueFull` if the send queue has no room."""
        if not isinstance(wr, WorkRequest):
            raise TypeError("wr must be a WorkRequest")
        if not self.regs.post_send(wr.conn, wr.opcode, laddr=wr.laddr, length=wr.length,
                                   lstag=wr.lstag, rstag=wr.rstag, rto=wr.rto,
                                   inv_stag=wr.inv_stag, wr_id=wr.wr_id, signaled=wr.signaled):
            raise QueueFull(f"send queue of connection {wr.conn} is full")

    def poll_cq(self, max_entries=64):
        """Pop up to ``max_entries`` completions (:class:`host.regs.Completion`), oldest first."""
        out = []
        while len(out) < max_entries:
            c = self.regs.poll_cq()
            if c is None:
                break
            out.append(c)
        return out

    # -- errors, counters, status
    def read_errors(self, max_entries=64):
        """Pop captured errors (:class:`host.regs.ErrorReport`) until none is pending."""
        out = []
        while len(out) < max_entries:
            e = self.regs.pop_error()
            if e is None:
                break
            out.append(e)
        return out

    def last_error(self):
        """The captured error without clearing it (a dict), or None."""
        st = self.regs.fields("ERR_STATUS")
        if not st["pending"]:
            return None
        where, info = self.regs.fields("ERR_CONN"), self.regs.fields("ERR_INFO")
        return {"conn": where["conn"], "tx": bool(where["tx"]), "layer": info["layer"],
                "etype": info["etype"], "ecode": info["ecode"], "overflow": bool(st["overflow"])}

    def counters(self):
        """Every counter by lower-case name (64-bit pairs joined), plus ``err_count``."""
        out = self.regs.counters()
        out["err_count"] = self.regs.read("ERR_COUNT")
        return out

    def status(self, *, max_connections=1024):
        """Identity, enable/ready, non-idle connections, counters and the captured error."""
        ident = self._ident()
        conns = []
        for conn in range(min(ident.connections, max_connections)):
            c = self.connection(conn)
            if c["state"] != "IDLE" or c["error"]:
                conns.append(c)
        return {"device": self.spec, "identity": ident.to_json(),
                "enabled": bool(self.regs.field("CTRL", "ENABLE")),
                "ready": bool(self.regs.field("STATUS", "READY")),
                "connections": conns, "counters": self.counters(),
                "last_error": self.last_error()}

    # -- registers by name (rnic regs)
    @staticmethod
    def lookup(name):
        """``(Register, Field or None)`` for ``REG`` or ``REG.FIELD`` (KeyError with the choices)."""
        reg_name, _, field_name = name.partition(".")
        r = REGMAP[reg_name]
        return r, (r.field(field_name) if field_name else None)

    def read_register(self, name):
        """``{"name", "addr", "value", "fields"}`` for ``REG``; ``{"name", "value"}`` for ``REG.FIELD``."""
        r, f = self.lookup(name)
        value = self.regs.read(r)
        if f is not None:
            return {"name": f"{r.name}.{f.name}", "addr": r.addr,
                    "value": (value & f.mask) >> f.offset}
        return {"name": r.name, "addr": r.addr, "value": value,
                "fields": regs.decode(r, value)}

    def write_register(self, name, value):
        """Write ``REG`` (whole word) or ``REG.FIELD`` (read-modify-write of the RW bits:
        W1C/pulse bits of other fields are written as 0). Returns the word written."""
        r, f = self.lookup(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("value must be an int")
        if f is None:
            if not 0 <= value <= 0xFFFFFFFF:
                raise ValueError(f"{r.name}: {value:#x} does not fit 32 bits")
            if all(x.access is RO for x in r.fields):
                raise ValueError(f"{r.name} is read-only")
            word = value
        else:
            if f.access is RO:
                raise ValueError(f"{r.name}.{f.name} is read-only")
            if not 0 <= value <= f.max:
                raise ValueError(f"{r.name}.{f.name}: {value:#x} does not fit {f.width} bits")
            old = self.regs.read(r) if r.rw_mask else 0
            word = regs.merge(r, old, **{f.name: value})
        self.transport.write32(r.addr, word)
        return word

    def dump(self):
        """Every readable register: list of ``{"name", "addr", "access", "value", "fields"}``."""
        out = []
        for r in REGMAP:
            if all(f.access is PULSE for f in r.fields):
                continue
            value = self.regs.read(r)
            out.append({"name": r.name, "addr": r.addr, "access": r.access_summary,
                        "value": value, "fields": regs.decode(r, value)})
        return out

    def close(self):
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- device registry -------------------------------------------------------------------

def _open_model(arg, **kw):
    params = {}
    if arg:
        for item in arg.split(","):
            key, _, val = item.partition("=")
            if key not in ("width", "connections", "stags") or not val.isdigit():
                raise ValueError(f"bad model parameter {item!r} (model:width=8,connections=16,"
                                 "stags=256)")
            params[key] = int(val)
    params.update(kw)
    return ModelTransport(**params)


def _open_tcp(arg, **kw):
    host, port = _host_port(arg)
    return SocketTransport(host, port, **kw)


def _open_sim(arg, **kw):
    """The Verilated RnicCore (:mod:`sim.device`; built on first use): ``sim`` or
    ``sim:width=8,connections=16,stags=256,dp_depth=512``. Returns a :class:`Device` whose
    ``datapath_factory`` runs connections through the simulated MPA layer (:mod:`host.rnic_hw`)."""
    try:
        from sim.device import open_sim
    except ImportError as e:
        raise DeviceUnavailable(f"device 'sim' needs the sim package of the repository "
                                f"(and Amaranth, Verilator): {e}") from None
    return open_sim(arg, **kw)


def _host_port(arg):
    host, sep, port = (arg or "").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {arg!r}")
    return host, int(port)


#: kind -> opener(arg, **kw) returning a Transport or a Device. ``none`` is built in.
DEVICE_KINDS = {"model": _open_model, "tcp": _open_tcp, "sim": _open_sim}


def register_device_kind(kind, opener):
    """Add (or replace) a device kind: ``opener(arg, **kw)`` returns a Transport or a Device.

    ``arg`` is what follows ``kind:`` in the spec (None without a colon).
    """
    if kind == "none" or not kind.isidentifier():
        raise ValueError(f"bad device kind {kind!r}")
    DEVICE_KINDS[kind] = opener


def parse_device_spec(spec):
    """``(kind, arg)`` of a device spec; ValueError naming the known kinds for a bad one."""
    if not isinstance(spec, str) or not spec:
        raise ValueError("empty device spec")
    kind, sep, arg = spec.partition(":")
    if kind == "none" and not sep:
        return "none", None
    if kind not in DEVICE_KINDS:
        raise ValueError(f"unknown device {spec!r} (known: none, "
                         + ", ".join("tcp:HOST:PORT" if k == "tcp" else k for k in DEVICE_KINDS)
                         + ")")
    if kind == "tcp":
        _host_port(arg)
    return kind, (arg if sep else None)


def open_device(spec, *, identify=True, **kw):
    """Open the device named by ``spec``: ``none`` (returns None), ``model``, ``tcp:HOST:PORT``, ``sim``.

    With ``identify`` the device's identity is checked (DeviceMismatch).
    Raises ValueError for a malformed spec, DeviceUnavailable / DeviceError
    when it cannot be opened.
    """
    kind, arg = parse_device_spec(spec)
    if kind == "none":
        return None
    opened = DEVICE_KINDS[kind](arg, **kw)
    dev = opened if isinstance(opened, Device) else Device(opened, spec=spec)
    if identify:
        try:
            dev.identify()
        except Exception:
            dev.close()
            raise
    return dev


def describe_layer(layer):
    """Name of a Terminate layer number."""
    return Layer(layer).name if layer in Layer._value2member_map_ else str(layer)


__all__.append("describe_layer")
