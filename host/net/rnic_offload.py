"""The offloaded data path: DDP and RDMAP of a connection in the device's core, TCP in the host.

:class:`OffloadRnic` is the :class:`~rnic.host.net.rnic_sw.DataPath` of a device whose
core does the whole data path (:class:`rnic.hdl.rnic_core.RnicCore`: MPA framing and
deframing, DDP/RDMAP validation and placement, the send queues, the Read Responder,
Terminates) and has a memory bus of its own (the simulated device,
:class:`rnic.sim.device.SimDevice`). The host does only what the core leaves to it:

* TCP: the octets read from the socket go into the core's ``rx_wire`` as they come; what
  the core sends on ``tx_wire`` for the connection is written to the socket;
* MPA negotiation (:mod:`rnic.host.net.cm`) and the connection context
  (:meth:`rnic.host.driver.device.Device.program_connection`: markers, CRC, marker phases,
  MULPDU each way, IRD/ORD; a responder starts in WAIT_RX, the MPA fence, which the core
  opens itself at the initiator's first good FPDU);
* verbs-level bookkeeping: memory regions become STag table rows, their buffers live in
  the device's memory (:class:`~rnic.host.net.device_memory.DeviceMemory`); receive
  buffers are posted to the RQ, Send / RDMA Write / RDMA Read work requests go through
  SQ doorbells; completions come from the CQ, errors and received Terminates from the
  TERM queue. No DDP or RDMAP header is parsed or built here.

RFC 6581 RTR: the initiator's RTR goes through the core's send queue
(:func:`rnic.host.net.cm.connect` with ``send_rtr=False`` leaves it pending), so that the
core's MSNs and ORD count it: a zero-length unsignaled Send, RDMA Write or RDMA Read. A
responder expecting a Send RTR posts a zero-length receive buffer for it first (its
completion is not reported). The core does not check that the first FPDU is the
negotiated RTR (the software data path does: MPA error 7).

Regions: :meth:`OffloadRnic.register_region` allocates the region's memory in the device
(or takes ``addr``) and writes its STag row with both its TOs and its address (STAG_BASE,
STAG_ADDR): the core maps a TO to ``addr + (TO - base)``, so any 64-bit TO works, and
``to`` None makes the region VA-based (its TOs are its device addresses). ``stag`` None
picks a free STag (the core looks STag ``s`` up in row ``s mod CAPS.STAGS``; an STag
whose row another one holds is refused).

One thread per connection (the pump) moves octets between the socket and the core,
clocks the device while anything is in flight, posts what waits for room in the SQ and
RQ, and takes completions and reports. Every device access is under
:func:`rnic.host.net.transfer.device_lock`: several connections share one device (each
with its own id); completions and reports of other connections are kept for them.
"""

from __future__ import annotations

import collections
import dataclasses
import select
import socket
import threading
import time

from rnic.host.driver.device import QueueFull, WorkRequest
from rnic.host.model.rdmap import Terminate
from rnic.host.net import cm
from rnic.host.net.device_memory import DeviceMemory, StagRows
from rnic.host.net.rnic_sw import DEFAULT_ACCESS, Access, Completion, Event, QueuedDataPath, Region, \
    check_post, error_name, local_address
from rnic.host.net.transfer import device_lock, shared_state
from rnic.host.spec.errors import ErrorInfo, Layer, MpaError, ProtocolError
from rnic.host.spec.regmap import ConnState, CqQueue, CqStatus, SqOpcode
from rnic.host.driver.regs import encode

__all__ = ["OffloadRnic", "offload_datapath"]

_MASK32 = 0xFFFFFFFF
#: Largest TCP segment pushed into ``rx_wire`` at once.
_SEGMENT = 16384
#: Idle cycles to clock after an error report, for the core's Terminate to leave.
_TERM_IDLE = 512
#: Seconds after a push of the peer's octets during which a closed MPA fence is looked up
#: in CTX_STATUS (the core opens it on the peer's first FPDU).
_FENCE_POLL = 0.25
#: Completed internal Read sinks whose memory is kept for :meth:`OffloadRnic.data`.
_KEEP_SINKS = 64


@dataclasses.dataclass
class _Posted:
    """A work request or receive buffer the core has (or will get)."""
    wr_id: int
    opcode: SqOpcode
    length: int
    signaled: bool = True
    addr: int | None = None          # RQ buffer / Read sink address
    own_addr: int | None = None      # RQ buffer allocated here (kept a while after completion)
    payload_addr: int | None = None  # device memory of a Send/Write payload (freed at the end)
    sink_stag: int | None = None     # internal Read sink STag (invalidated at the end)
    rtr: bool = False                # the RTR's work request / receive buffer: never reported
    wr: WorkRequest | None = None    # what the doorbell carries (None: posted)


class OffloadRnic(QueuedDataPath):
    """:class:`~rnic.host.net.rnic_sw.DataPath` done by the device's core (see the module docstring).

    Parameters
    ----------
    negotiated : rnic.host.net.cm.Negotiated
        An accepted connection whose responder has not read the first FPDU yet.
    device : rnic.host.driver.device.Device
        Over a transport with stream and memory access (``push_segment``, ``run``,
        ``take_tx``, ``mem_read``, ``mem_write``, ``mem_size``).
    conn : int
        Connection id on the device.
    rx_mulpdu : int or None
        RX MULPDU of the context (default: the transport's ``ddp_slot_bytes``).
    linger : float
        Seconds :meth:`close` (and an error) waits for the peer's FIN.
    tick : float
        Longest wait for the socket while nothing is in flight.
    """

    def __init__(self, negotiated, device, *, conn=0, rx_mulpdu=None, linger=2.0, tick=0.05,
                 first_fpdu_timeout=None):
        super().__init__()
        dev = device.transport
        for name in self.NEEDS:
            if not callable(getattr(dev, name, None)):
                raise TypeError(f"{device.spec}: the device has no stream and memory access "
                                "(a rnic.sim.device.SimDevice is needed for the offloaded data path)")
        neg = negotiated
        if neg.rejected or neg.closed:
            raise ValueError("the connection is rejected or closed")
        if neg.role == "responder" and neg.first_fpdu is not None:
            raise ValueError("the responder already read the first FPDU in software; the "
                             "offloaded data path must receive it (do not call wait_first_fpdu)")
        if neg.decoder.offset or neg.encoder.offset:
            raise ValueError("FPDUs were already exchanged in software on this connection")
        self.neg = neg
        self.device = device
        self.dev = dev
        self.conn = conn
        self.linger = linger
        self.tick = tick
        self.first_fpdu_timeout = first_fpdu_timeout
        self.ird, self.ord = neg.ird, neg.ord
        depth = device.read_limit
        if depth is not None and (neg.ird is None or neg.ird > depth):
            # the core holds ird_depth Read Requests per connection; a peer allowed more
            # would overrun it (negotiate with ConnParams(ird_max=Device.read_limit))
            if neg.ird is not None:
                raise ValueError(f"the negotiated IRD {neg.ird} exceeds the {depth} inbound RDMA "
                                 "Read Requests the core holds per connection")
            self.ird = depth
        self._lock = device_lock(device)
        self._shared = shared_state(device)
        self._cond = threading.Condition(threading.Lock())
        self._cq = collections.deque()
        self._events = collections.deque()
        self._rq_wait = collections.deque()     # receive buffers the core has no room for yet
        self._sq_wait = collections.deque()     # work requests likewise (each queue in order)
        self._sq = {}                           # hw id -> _Posted (SQ)
        self._rq = {}                           # hw id -> _Posted (RQ)
        self._sinks_done = collections.deque()  # (addr) of completed internal sinks
        self._regions = {}                      # stag -> (Region, allocated address or None)
        self._next_hw = 1
        self._next_wr = 1
        self._out = bytearray()                 # tx_wire octets not yet on the socket
        self._rx_fin = False
        self._fin_sent = False
        self._closing = False
        self._state = "idle"
        self._error = None
        self._end_deadline = None
        self.terminate_sent = None
        self.terminate_received = None
        self._fence_open = neg.role == "initiator"
        # while the fence is closed, CTX_STATUS is read only until this time.monotonic(),
        # _FENCE_POLL after a push of the peer's octets (only they open it; a register read
        # over a board's UART takes milliseconds)
        self._fence_poll_until = 0.0
        self._thread = None
        self._clock0 = self._clock1 = None      # (cycles, time) when the pump started / ended
        # a responder with CRC and no markers looks at the first FPDU before the core does
        self._peeking = (neg.role == "responder" and not neg.fence_open and bool(neg.crc)
                         and not neg.markers_rx)
        self._peek = b""
        self.stats = {"tx_octets": 0, "rx_octets": 0, "tx_work_requests": 0,
                      "rx_buffers": 0, "completions": 0}
        mem = self._shared_memory()
        limit = getattr(dev, "ddp_slot_bytes", None)
        rx_mulpdu = rx_mulpdu or limit or 16384
        with self._lock:
            self._shared.cq.pop(conn, None)
            self._shared.term.pop(conn, None)
            ctx = {**neg.context(), "fence_open": neg.fence_open, "ird": self.ird}
            self.programmed = self._program(conn, ctx, rx_mulpdu)
        self.memory_size = mem.size
        if neg.role == "responder" and neg.p2p and "send" in (neg.rtr_offered if neg.rtr is None
                                                               else {neg.rtr}):
            # a Send RTR takes a receive buffer: the first one posted
            self._rq_wait.append(_Posted(0, SqOpcode.SEND, 0, addr=0, rtr=True))
        if neg.rtr_pending:
            neg.rtr_pending = False
            stag = neg.params.rtr_stag
            kind = {"send": SqOpcode.SEND, "write": SqOpcode.RDMA_WRITE,
                    "read": SqOpcode.RDMA_READ}[neg.rtr]
            wr = WorkRequest(kind, conn=conn, lstag=stag if kind == SqOpcode.RDMA_READ else 0,
                             rstag=0 if kind == SqOpcode.SEND else stag, signaled=True)
            self._sq_wait.append(_Posted(0, kind, 0, rtr=True, wr=wr))

    #: What the device's transport must offer: stream and memory access.
    NEEDS = ("push_segment", "run", "take_tx", "mem_read", "mem_write")

    def _program(self, conn, ctx, rx_mulpdu):
        """Write the connection's context and get the core ready (device lock held); the
        keyword arguments programmed."""
        programmed = self.device.program_connection(conn, ctx, rx_mulpdu=rx_mulpdu)
        self._prepare_core()
        return programmed

    def _prepare_core(self):
        """DDP/RDMAP in the core (DP_CTRL all 0) and the core enabled."""
        regs = self.device.regs
        if regs.read("DP_CTRL") != 0:
            regs.write("DP_CTRL", encode("DP_CTRL"))
        if not regs.field("CTRL", "ENABLE"):
            regs.enable(True)

    def __repr__(self):
        return f"<OffloadRnic {self.neg.role} conn={self.conn} state={self._state} device={self.device.spec}>"

    #: The core places RDMA Writes and answers RDMA Reads without telling the host: no
    #: ``remote_write`` / ``remote_read`` events (see :meth:`wait_quiet`).
    reports_remote_access = False

    # -- state -----------------------------------------------------------------------
    def start(self):
        """Start the pump thread (idempotent)."""
        with self._cond:
            if self._thread is not None:
                return
            if self._state == "idle":
                self._state = "rts"
            self._thread = threading.Thread(target=self._pump, daemon=True,
                                            name=f"rnic-offload-{self.neg.role}-{self.conn}")
        self._thread.start()

    # -- memory ------------------------------------------------------------------------
    def _shared_memory(self):
        with self._lock:
            sh = self._shared
            if sh.memory is None:
                sh.memory = DeviceMemory(self.dev.mem_size)
                sh.stags = StagRows(self.device.identify().stags)
            return sh.memory

    def alloc(self, length, align=64):
        """A fresh range of ``length`` octets of the device's memory; its address."""
        with self._lock:
            return self._shared.memory.alloc(length, align=align)

    def read_memory(self, addr, length):
        with self._lock:
            return self.dev.mem_read(addr, length)

    def write_memory(self, addr, data):
        with self._lock:
            self.dev.mem_write(addr, data)

    def register_region(self, stag, length, *, to=None, addr=None, access=DEFAULT_ACCESS, data=None):
        """Register ``length`` octets of the device memory at ``addr`` (None: allocated here) as
        STag ``stag`` (None: a fresh one) with TOs from ``to`` (None: the address, a VA-based
        region; else any 64-bit TO: the core maps it)."""
        if data is not None and len(data) > length:
            raise ValueError(f"{len(data)} octets of data do not fit a {length}-octet region")
        if addr is not None and (addr < 0 or addr + length > self.memory_size):
            raise ValueError(f"address {addr:#x} + {length} is outside the device's memory "
                             f"(0 .. {self.memory_size:#x})")
        access = Access(access)
        with self._lock:
            sh = self._shared
            old = self._regions.get(stag) if stag is not None else None
            if old is not None:
                self._drop_region(stag)
            if stag is None:
                stag = sh.stags.new()
            else:
                sh.stags.take(stag)
            mine = None
            try:
                where = addr
                if where is None:
                    where = mine = sh.memory.alloc(length, align=4096)
                base = where if to is None else to
                region = Region(stag=stag, base=base, length=length, access=access,
                                stream=self.conn, addr=where)
                self.device.register_stag(stag, base=base, length=length, conn=self.conn, addr=where,
                                          remote_read=bool(access & Access.REMOTE_READ),
                                          remote_write=bool(access & Access.REMOTE_WRITE),
                                          remote_inv=bool(access & Access.REMOTE_INV),
                                          index=sh.stags.row(stag))
                if data:
                    self.dev.mem_write(where, data)
            except Exception:
                sh.stags.release(stag)
                if mine is not None:
                    sh.memory.free(mine)
                raise
            self._regions[stag] = (region, mine)
        return region

    def region(self, stag):
        """The local Region of ``stag`` or None."""
        with self._lock:
            entry = self._regions.get(stag)
            return entry[0] if entry else None

    def invalidate(self, stag):
        with self._lock:
            if stag not in self._regions:
                raise KeyError(stag)
            region, mine = self._regions[stag]
            self.device.invalidate_stag(stag)
            self._regions[stag] = (dataclasses.replace(region, valid=False), mine)

    def _retire_stag(self, stag):
        """``stag``'s row invalid in the core (if the device is still there) and free for
        another STag (device lock held)."""
        try:
            self.device.invalidate_stag(stag)
        except Exception:           # noqa: BLE001 - never registered, or the device is gone
            pass
        self._shared.stags.release(stag)

    def _drop_region(self, stag):
        """Forget ``stag``: its row invalid, its memory back (lock held)."""
        _, mine = self._regions.pop(stag)
        self._retire_stag(stag)
        if mine is not None:
            self._shared.memory.free(mine)

    # -- posting -------------------------------------------------------------------------
    def post_recv(self, length, *, addr=None, wr_id=None):
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= _MASK32:
            raise ValueError(f"receive length must be 0..2**32-1, not {length!r}")
        with self._cond:
            wr_id = self._wr_id(wr_id)
        item = _Posted(wr_id, SqOpcode.SEND, length, addr=addr)
        if addr is None:
            item.addr = item.own_addr = self.alloc(length)
        with self._lock, self._cond:
            if self.closed or self._closing or self._error is not None:
                self._release(item)
                self._complete(item, CqStatus.FLUSHED, length=0, error=self._error, force=True)
                return wr_id
            self._rq_wait.append(item)
        self.start()
        return wr_id

    def post_send(self, opcode, payload=b"", *, wr_id=None, stag=0, to=0, length=None,
                  local_stag=None, local_to=0, inval_stag=None, signaled=True):
        wr = check_post(opcode, payload, wr_id=wr_id, stag=stag, to=to, length=length,
                        inval_stag=inval_stag, signaled=signaled, local_stag=local_stag,
                        local_to=local_to)
        op = wr.opcode
        with self._cond:
            if self._closing:
                raise RuntimeError("post_send() after close()")
            wr.wr_id = self._wr_id(wr.wr_id)
        item = _Posted(wr.wr_id, op, wr.length, signaled=wr.signaled)
        if op == SqOpcode.RDMA_READ:
            if local_stag is None:
                region = self.register_region(None, max(wr.length, 1), access=Access.REMOTE_WRITE)
                local_stag, local_to = region.stag, region.base
                item.sink_stag = local_stag
                item.addr = region.address(local_to)
            else:
                item.addr = local_address(self.region(local_stag), local_stag, local_to,
                                          wr.length, sink=True)
            laddr, lstag = local_to, local_stag
        else:
            laddr, lstag = 0, 0
            if wr.payload is None:        # from registered memory: the core reads it there
                laddr = local_address(self.region(local_stag), local_stag, local_to, wr.length)
            elif wr.payload:              # a copy into device memory, freed at the completion
                laddr = item.payload_addr = self.alloc(len(wr.payload))
                self.write_memory(laddr, wr.payload)
        item.wr = WorkRequest(op, conn=self.conn, laddr=laddr, length=wr.length, lstag=lstag,
                              rstag=wr.stag, rto=wr.to, inv_stag=wr.inval_stag or 0)
        with self._lock, self._cond:
            if self.closed or self._error is not None:
                self._release(item)
                self._complete(item, CqStatus.FLUSHED, length=0, error=self._error, force=True)
                return item.wr_id
            if op == SqOpcode.RDMA_READ and self.ord == 0:
                self._release(item)
                self._complete(item, CqStatus.BAD_REQUEST, force=True, error=ErrorInfo.mpa(
                    MpaError.INSUFFICIENT_IRD, "RDMA Read with ORD 0 (the peer's IRD is 0)"))
                return item.wr_id
            self._sq_wait.append(item)
        self.start()
        return item.wr_id

    # -- completions and events ----------------------------------------------------------
    def _complete(self, item, status, *, length=None, error=None, force=False, inval_stag=None,
                  opcode=None, solicited=False):
        """Report ``item`` (cond held)."""
        if item.rtr or not (item.signaled or force or status != CqStatus.SUCCESS):
            return
        queue = CqQueue.SQ if item.wr is not None else CqQueue.RQ
        self._cq.append(Completion(item.wr_id, status, opcode if opcode is not None else item.opcode,
                                   item.length if length is None else length, queue, self.conn,
                                   item.addr if (queue == CqQueue.RQ or item.opcode == SqOpcode.RDMA_READ)
                                   else None, inval_stag, solicited, error))
        self.stats["completions"] += 1
        self._cond.notify_all()

    def wait_quiet(self, quiet, timeout=10.0):
        """Wait until nothing arrived from the peer for ``quiet`` seconds and nothing is in
        flight (bounded by ``timeout``); True if it got quiet. (The host cannot see the peer's
        RDMA Writes land: this is how it knows that the ones sent so far did.)"""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline and not self.closed:
            with self._cond:
                now = (self.stats["rx_octets"], self._busy())
            if now != last or now[1]:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return True
            time.sleep(0.02)
        return self.closed

    def _cycles(self):
        """The simulation's clock cycles so far (None: not a simulation, or it is gone)."""
        try:
            with self._lock:
                cycles = getattr(self.dev, "cycles", None)
        except Exception:           # noqa: BLE001 - the device may be gone
            return None
        return cycles if isinstance(cycles, int) else None

    def device_status(self):
        """The device's register view (identity, connections, counters, captured error) and,
        for a simulation, the clock cycles it ran while this connection was up (``simulation``:
        cycles, seconds, cycles per second)."""
        with self._lock:
            out = self.device.status()
            cycles = self._cycles()
            if cycles is not None and self._clock0 is not None:
                c0, t0 = self._clock0
                c1, t1 = self._clock1 or (cycles, time.monotonic())
                out["simulation"] = {"cycles": c1 - c0, "seconds": round(t1 - t0, 3),
                                     "cycles_per_second": round((c1 - c0) / max(t1 - t0, 1e-9))}
            return out

    # -- the pump ----------------------------------------------------------------------
    def _busy(self):
        """Work in flight that needs the device clocked (cond held)."""
        return bool(self._rq_wait or self._sq_wait or self._sq or self._out)

    def _pump(self):
        sock = self.neg.sock
        pending = self._first_fpdu(bytes(self.neg._pending))   # came with the MPA frame
        cycles = self._cycles()
        if cycles is not None:
            self._clock0 = (cycles, time.monotonic())
        self.neg._pending = b""
        try:
            sock.setblocking(False)
            while True:
                with self._cond:
                    if self.closed:
                        return
                    busy = self._busy() or bool(pending)
                with self._lock:
                    # the receive buffers posted so far go in before the peer's octets read
                    # so far (a Send must find the buffer posted before it arrived)
                    self._post_backlog()
                    if pending:
                        for pos in range(0, len(pending), _SEGMENT):
                            self.dev.push_segment(self.conn, pending[pos:pos + _SEGMENT])
                        self.stats["rx_octets"] += len(pending)
                        pending = b""
                        self._fence_poll_until = time.monotonic() + _FENCE_POLL
                    self.dev.run()
                    out = self.dev.take_tx(self.conn)
                    self._collect()
                if out:
                    with self._cond:
                        self._out += out
                self._check_end()
                pending = self._first_fpdu(self._socket_io(sock, busy))
        except Exception as exc:        # noqa: BLE001 - report, never die silently
            self._end(ErrorInfo.mpa(MpaError.LOCAL_CATASTROPHIC, f"local error: {exc!r}"))

    def _first_fpdu(self, data):
        """The octets to feed the core: all of them, except that a responder waiting for the
        first FPDU with CRC and no markers holds them until that FPDU is complete, and takes it
        itself if it is a Terminate with a zero CRC field (Linux siw's Terminate of a failed
        MPA setup, sent before siw turns CRC on: :func:`rnic.host.net.cm.zero_crc_terminate`);
        the core would see a CRC error."""
        if not self._peeking:
            return data
        self._peek += data
        n = cm.fpdu_octets(self._peek)
        if (n is None or len(self._peek) < n) and not self._rx_fin:
            return b""
        self._peeking = False
        raw, self._peek = bytes(self._peek), b""
        ulpdu = cm.zero_crc_terminate(raw) if n is not None else None
        if ulpdu is None:
            return raw
        term = cm.terminate_of(ulpdu)
        what = ((term.layer, term.etype, term.ecode) if term is not None
                else (Layer.LLP, 0, MpaError.LOCAL_CATASTROPHIC))
        with self._cond:
            self.neg.zero_crc_terminate = True
            self._terminated(term, *what, received=True)
        return b""

    def _socket_io(self, sock, busy):
        """Send what the core sent, read what the peer sent; returns the octets read."""
        # the initiator's first FPDU waits for ConnParams.first_fpdu_delay after the Reply,
        # as on the software path (the core sends the RTR as soon as it is posted)
        hold = self.neg.earliest_tx - time.monotonic()
        with self._cond:
            out = bytes(self._out) if hold <= 0 else b""
            want_read = not self._rx_fin
        timeout = 0.0005 if busy else self.tick
        if hold > 0:
            timeout = min(timeout, hold)
        try:
            r, w, _ = select.select([sock] if want_read else [], [sock] if out else [], [],
                                    timeout if want_read or out else min(timeout, 0.01))
        except (OSError, ValueError) as e:
            self._lost(f"connection lost: {e}")
            return b""
        if w:
            try:
                n = sock.send(out)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as e:
                self._lost(f"connection lost while sending: {e}")
                return b""
            with self._cond:
                del self._out[:n]
                self.stats["tx_octets"] += n
        if not r:
            return b""
        try:
            data = sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return b""
        except OSError as e:
            self._lost(f"connection lost: {e}")
            return b""
        if not data:
            with self._cond:
                self._rx_fin = True
                if self._end_deadline is None:
                    # the peer's FIN: send what is still going out, then close
                    self._end_deadline = time.monotonic() + min(self.linger, 2.0)
                self._cond.notify_all()
        return data

    def _lost(self, text):
        info = ErrorInfo.mpa(MpaError.TCP_CLOSED, text)
        with self._cond:
            if self._error is None and not self._closing:
                self._error = info
                self._events.append(Event("error", info))
        self._end(self._error)

    def _post_backlog(self, sends=True):
        """Hand waiting receive buffers, then work requests (unless not ``sends``), to the core,
        each queue until the core has no room (device lock held)."""
        queues = ((self._rq_wait, self._rq), (self._sq_wait, self._sq))
        for waiting, table in queues if sends else queues[:1]:
            while True:
                with self._cond:
                    if not waiting or self._error is not None:
                        break
                    item = waiting[0]
                hw = self._next_hw
                try:
                    if item.wr is None:
                        self.device.post_receive(self.conn, item.addr or 0, item.length, hw)
                    else:
                        self.device.post_send(dataclasses.replace(item.wr, wr_id=hw, signaled=True))
                except QueueFull:
                    break
                self._next_hw = (hw + 1) & _MASK32 or 1
                with self._cond:
                    waiting.popleft()
                    table[hw] = item
                    self.stats["rx_buffers" if table is self._rq else "tx_work_requests"] += 1

    def _collect(self):
        """Take the CQ and TERM reports of the device; act on this connection's (device lock held)."""
        sh = self._shared
        for rc in self.device.poll_cq():
            sh.cq[rc.conn].append(rc)
        while True:
            rep = self.device.regs.pop_terminate()
            if rep is None:
                break
            sh.term[rep.conn].append(rep)
        mine = sh.cq.pop(self.conn, ())
        reports = sh.term.pop(self.conn, ())
        if any(not r.received for r in reports):
            self._terminate_out()
        with self._cond:
            for rc in mine:
                self._cq_entry(rc)
            for rep in reports:
                self._report(rep)
            if (not self._fence_open and self._state == "rts"
                    and time.monotonic() <= self._fence_poll_until):
                st = self.device.regs.connection_status(self.conn)["state"]
                if st in (ConnState.RTS, ConnState.CLOSING):
                    self._fence_open = True
                    self._cond.notify_all()

    def _terminate_out(self):
        """The core sends its Terminate as it reports the error: let it come out before
        anything may close the socket (device lock held)."""
        self.dev.run(idle=_TERM_IDLE)
        tx = self.dev.take_tx(self.conn)
        if tx:
            with self._cond:
                self._out += tx

    def _cq_entry(self, rc):
        """One completion of this connection's (cond held)."""
        table = self._sq if rc.queue == CqQueue.SQ else self._rq
        item = table.pop(rc.wr_id, None)
        if item is None:
            return                          # a stale entry of an earlier user of the id
        status = CqStatus(rc.status)
        self._release(item)
        if item.rtr:
            self._fence_open = True
            return
        if rc.queue == CqQueue.RQ:
            self._fence_open = True
            self._complete(item, status, length=rc.length, opcode=SqOpcode(rc.opcode),
                           inval_stag=rc.inv_stag if rc.invalidated else None,
                           solicited=bool(rc.solicited),
                           error=None if status == CqStatus.SUCCESS else self._error)
        else:
            self._complete(item, status, length=rc.length if status == CqStatus.SUCCESS else 0,
                           error=None if status == CqStatus.SUCCESS else self._error)

    def _release(self, item):
        """Give back what a finished work request or buffer held (device lock and cond held).

        The memory of a buffer or Read sink allocated here stays a while (the caller reads
        it through the completion's ``addr``): the oldest is freed once :data:`_KEEP_SINKS`
        newer ones finished."""
        sh = self._shared
        if item.payload_addr is not None:
            sh.memory.free(item.payload_addr)
            item.payload_addr = None
        keep = item.own_addr
        if item.sink_stag is not None:
            region, keep = self._regions.pop(item.sink_stag, (None, None))
            if region is not None:
                self._retire_stag(item.sink_stag)
            item.sink_stag = None
        item.own_addr = None
        if keep is not None:
            self._sinks_done.append(keep)
            while len(self._sinks_done) > _KEEP_SINKS:
                sh.memory.free(self._sinks_done.popleft())

    def _report(self, rep):
        """A TERM report of this connection (cond held): the core sent a Terminate, or got one."""
        try:
            term = Terminate.parse(rep.payload)
        except (ProtocolError, ValueError):
            term = None
        self._terminated(term, rep.layer, rep.etype, rep.ecode, received=rep.received)

    def _terminated(self, term, layer, etype, ecode, *, received):
        """A Terminate was sent or received (cond held): report it, go down."""
        try:
            info = ErrorInfo(Layer(layer), etype, ecode)
        except ValueError:
            info = ErrorInfo.mpa(MpaError.LOCAL_CATASTROPHIC, "a Terminate with an unknown layer")
        if received:
            info = dataclasses.replace(info, text=f"the peer's Terminate: {error_name(info)}")
            self.terminate_received = term
            self._events.append(Event("terminate_received", info, term))
        else:
            info = dataclasses.replace(info, text=f"found by the core: {error_name(info)}")
            self.terminate_sent = term
            self._events.append(Event("terminate_sent", info, term))
        if self._error is None:
            self._error = info
        self._state = "closing"
        if self._end_deadline is None:
            self._end_deadline = time.monotonic() + self.linger
        self._flush_backlog()
        self._cond.notify_all()

    def _flush_backlog(self):
        """Complete what the core never got (cond held)."""
        for waiting in (self._sq_wait, self._rq_wait):
            while waiting:
                item = waiting.popleft()
                self._release(item)
                self._complete(item, CqStatus.FLUSHED, length=0, error=self._error, force=True)

    def _check_end(self):
        """Send FIN and finish when the connection is going down and the core is done."""
        with self._cond:
            if self._end_deadline is None or self.closed:
                return
            drained = not self._out and not any(not p.rtr for p in self._sq.values())
            late = time.monotonic() > self._end_deadline
            if not (drained or late):
                return
            if not self._fin_sent:
                self._fin_sent = True
                try:
                    self.neg.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            if not (self._rx_fin or late):
                return
        self._end(self._error)

    def _end(self, info):
        """The connection is down: the core stops it, everything outstanding completes."""
        with self._cond:
            if self.closed:
                return
            if self._error is None and info is not None:
                self._error = info
        with self._lock:
            try:
                self.device.set_state(self.conn, ConnState.IDLE)
                self._collect()             # what the core completed up to here
            except Exception:               # noqa: BLE001 - the device may be gone
                pass
        self.neg.close()
        with self._lock, self._cond:
            cycles = self._cycles() if self._clock0 else None
            if cycles is not None:
                self._clock1 = (cycles, time.monotonic())
            self._end_regions()
            self._flush_backlog()
            for table in (self._sq, self._rq):
                for item in table.values():
                    self._release(item)
                    status = (CqStatus.REMOTE_ERROR if item.opcode == SqOpcode.RDMA_READ
                              and self.terminate_received is not None and item.wr is not None
                              else CqStatus.FLUSHED)
                    self._complete(item, status, length=0, error=self._error, force=True)
                table.clear()
            self._state = "error" if self._error is not None else "closed"
            self._events.append(Event("closed", self._error))
            self._cond.notify_all()

    def close(self, timeout=None):
        """Graceful close: let the core finish posted work, FIN, wait for the peer's FIN."""
        timeout = self.neg.params.timeout if timeout is None else timeout
        with self._lock, self._cond:
            if self.closed:
                return
            self._closing = True
            started = self._thread is not None
            if not started:
                self._state = "closed"
                self._flush_backlog()
                self._events.append(Event("closed"))
        if not started:
            self.neg.close()
            with self._lock:
                self._end_regions()
            self._free_memory()
            return
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._state == "rts":
                self._state = "closing"
            while (self._fence_open and not self.closed and self._error is None
                   and (self._sq_wait or any(not p.rtr for p in self._sq.values()))):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.05))
            if self._end_deadline is None:
                self._end_deadline = time.monotonic() + self.linger
        self.wait_closed(self.linger + timeout + 1.0)
        self._thread.join(timeout=2.0)
        if not self.closed:
            self._end(None)
        self._free_memory()

    def _end_regions(self):
        """The connection's STags die with it (its id may be given to another connection);
        their memory stays for the caller until :meth:`close` (device lock held)."""
        for stag in list(self._regions):
            region, mine = self._regions[stag]
            self._retire_stag(stag)
            self._regions[stag] = (dataclasses.replace(region, valid=False), mine)

    def _free_memory(self):
        """Give the device memory of the regions and buffers allocated here back."""
        with self._lock:
            mem = self._shared.memory
            for _, mine in self._regions.values():
                if mine is not None:
                    mem.free(mine)
            self._regions.clear()
            while self._sinks_done:
                mem.free(self._sinks_done.popleft())

def offload_datapath(device, negotiated, conn=0, **kw):
    """``Device.datapath_factory`` of devices whose core does DDP/RDMAP: an :class:`OffloadRnic`."""
    return OffloadRnic(negotiated, device, conn=conn, **kw)
