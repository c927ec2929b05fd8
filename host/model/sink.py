"""Software data sink of one DDP stream: validation and placement, the golden model.

:class:`Sink` takes the ULPDUs of one connection (after MPA) and returns
events: :class:`Placement` (also applied to its :class:`Memory`),
:class:`SendComplete`, :class:`ReadRequestQueued`,
:class:`ReadResponseComplete`, :class:`TerminateReceived` and :class:`Error`.
RDMA Writes are silent (placements only).

Validation order for each segment (the first failing check wins; nothing of
that segment is placed; the error is recorded with the Terminate this side
sends, and every later segment is silently dropped, ``receive`` returning
``[]``):

1. DDP header present (else DDP 0/0, local catastrophic).
2. DV = 1 (DDP 1/4 tagged, 2/6 untagged).
3. RV = 1 (RDMAP 2/5); opcode 0..7 and its kind matching the T bit (RDMAP 2/6).
4. Tagged, non-zero length only (RFC 5041 5.2: STag and TO of a zero-length
   tagged segment are not checked): STag known and valid (DDP 1/0);
   associated with this stream (DDP 1/2); region has REMOTE_WRITE (RDMAP 1/2:
   DDP has no access code; Read Responses need it too, as iWARP read sinks are
   remotely written); TO + length does not wrap 64 bits (DDP 1/3, checked
   before bounds so that it is reachable); TO..TO+len-1 inside the region
   (DDP 1/1).
5. Untagged: QN 0, 1 or 2 (DDP 2/1); QN matches the opcode (RDMAP 2/6);
   MSN: with ``d = (MSN - oldest undelivered MSN) mod 2**32`` and ``n``
   buffers available, ``d < n`` has a buffer, ``d == n`` is "no buffer
   available" (DDP 2/2) and anything else (behind, or beyond the next
   message) is "MSN range not valid" (DDP 2/3). QN 1 and 2 accept only the
   next expected MSN (a buffer of 28 / 52 octets each). Then, for non-zero
   length: MO inside the buffer (DDP 2/4) and MO + length inside it (DDP 2/5);
   a zero-length last segment whose MO exceeds the buffer is 2/5 too; MO
   consistency: the L segment carries the highest MO and ends the message
   (DDP 2/4 otherwise). Zero-length untagged segments still need their
   buffer: a zero-length Send consumes one receive buffer.
6. RDMAP checks done on the last segment of an untagged message:
   Send with Invalidate: STag unknown or already invalid (RDMAP 2/9), STag
   of another stream (RDMAP 1/9). Read Request: message not 28 octets
   (RDMAP 2/0xFF); IRD requests already queued (RDMAP 2/7, "catastrophic,
   localized to the stream", as Linux siw does); data source STag checks,
   skipped for size 0: unknown/invalid (RDMAP 1/0), other stream (1/3), no
   REMOTE_READ (1/2), TO wrap (1/4), bounds (1/1). Terminate: malformed
   (RDMAP 2/0xFF).

Placement is by MO / TO, so segments are placed independently; untagged
messages complete on L and are delivered in MSN order. A tagged message ends
on L; an RDMA Read Response then gives :class:`ReadResponseComplete` (its STag
and TO are those of its first segment). Read Responses are not matched with
outstanding Read Requests (ORD is the requester's TX business). A received
Terminate ends the stream: later segments are dropped too.
"""

import collections
import enum
from dataclasses import dataclass

from rnic.host.model import ddp, rdmap, segment
from rnic.host.spec.errors import (DdpErrorType, DdpTaggedCode, DdpUntaggedCode, ErrorInfo, ProtocolError,
    RdmapErrorType, RdmapOperationCode, RdmapProtectionCode)
from rnic.host.spec.limits import check_uint
from rnic.host.model.rdmap import Opcode

__all__ = [
    "Access", "Region", "Memory", "Placement", "SendComplete", "ReadRequestQueued",
    "ReadResponseComplete", "TerminateReceived", "Error", "Sink",
]

_MASK32 = 0xFFFFFFFF


class Access(enum.IntFlag):
    """Remote access rights of a region (REMOTE_INV: the peer may invalidate its STag with a
    Send with Invalidate; STAG_ATTR.REMOTE_INV)."""
    NONE = 0
    REMOTE_READ = 1
    REMOTE_WRITE = 2
    REMOTE_INV = 4


@dataclass(frozen=True, kw_only=True)
class Region:
    """A registered memory region, named by its STag.

    Parameters
    ----------
    stag : int
        Steering tag (32 bits).
    base : int
        TO of the region's first octet (0 for zero-based regions, the virtual
        address for VA-based ones).
    length : int
        Octets covered: TOs ``base .. base + length - 1``.
    access : Access
        REMOTE_READ, REMOTE_WRITE and/or REMOTE_INV.
    stream : int
        DDP stream the STag is associated with.
    valid : bool
        False once invalidated.
    addr : int or None
        Host memory address of the first octet (defaults to ``base``).
    """
    stag: int
    base: int
    length: int
    access: Access
    stream: int = 0
    valid: bool = True
    addr: int = None

    def __post_init__(self):
        check_uint("stag", self.stag, 32)
        check_uint("base", self.base, 64)
        check_uint("length", self.length, 64)
        if self.base + self.length > 1 << 64:
            raise ValueError("region extends past the 64-bit TO space")
        object.__setattr__(self, "access", Access(self.access))
        object.__setattr__(self, "valid", bool(self.valid))
        if self.addr is None:
            object.__setattr__(self, "addr", self.base)
        check_uint("addr", self.addr, 64)

    def contains(self, to, length):
        """True when TOs ``to .. to + length - 1`` are all inside the region."""
        return self.base <= to and to + length <= self.base + self.length

    def address(self, to):
        """Host address of TO ``to``."""
        return self.addr + (to - self.base)


class Memory:
    """Sparse byte-addressed host memory (unwritten octets read as zero)."""

    PAGE = 4096

    def __init__(self):
        self._pages = {}

    def write(self, addr, data):
        """Store ``data`` at ``addr``."""
        data = memoryview(bytes(data))
        while data:
            page, off = divmod(addr, self.PAGE)
            n = min(len(data), self.PAGE - off)
            buf = self._pages.setdefault(page, bytearray(self.PAGE))
            buf[off:off + n] = data[:n]
            data = data[n:]
            addr += n

    def read(self, addr, n):
        """Return ``n`` octets from ``addr``."""
        out = bytearray()
        while n > 0:
            page, off = divmod(addr, self.PAGE)
            k = min(n, self.PAGE - off)
            buf = self._pages.get(page)
            out += buf[off:off + k] if buf is not None else bytes(k)
            n -= k
            addr += k
        return bytes(out)


@dataclass(frozen=True)
class Placement:
    """``data`` written at host address ``addr``."""
    addr: int
    data: bytes


@dataclass(frozen=True)
class SendComplete:
    """A Send-type message delivered into posted receive buffer ``buffer_id``."""
    length: int
    msn: int
    buffer_id: object
    inval_stag: object  # int for the Send-with-Invalidate kinds, else None
    solicited: bool


@dataclass(frozen=True)
class ReadRequestQueued:
    """An inbound RDMA Read Request, validated and queued (it holds an IRD slot)."""
    request: rdmap.ReadRequest
    msn: int


@dataclass(frozen=True)
class ReadResponseComplete:
    """Last segment of an RDMA Read Response: ``length`` octets placed from ``stag``/``to``."""
    stag: int
    to: int
    length: int


@dataclass(frozen=True)
class TerminateReceived:
    """The peer's Terminate message."""
    terminate: rdmap.Terminate


@dataclass(frozen=True)
class Error:
    """Validation failure: ``info`` and the Terminate ULPDU this side sends."""
    info: ErrorInfo
    terminate: bytes


class _Untagged:
    """Reassembly state of one untagged message (one buffer)."""

    def __init__(self, msn, capacity, *, addr, buffer_id=None):
        self.msn = msn
        self.capacity = capacity
        self.addr = addr
        self.buffer_id = buffer_id
        self.data = bytearray(capacity) if addr is None else None
        self.max_mo = -1
        self.max_end = 0
        self.l_mo = None
        self.l_end = None
        self.done = None  # SendComplete once L has been placed


def _ddp_untagged(code, text):
    return ErrorInfo.ddp(DdpErrorType.UNTAGGED, code, text)


def _ddp_tagged(code, text):
    return ErrorInfo.ddp(DdpErrorType.TAGGED, code, text)


def _protection(code, text):
    return ErrorInfo.rdmap(RdmapErrorType.REMOTE_PROTECTION, code, text)


def _operation(code, text):
    return ErrorInfo.rdmap(RdmapErrorType.REMOTE_OPERATION, code, text)


class Sink:
    """Data sink of one DDP stream (connection).

    Parameters
    ----------
    memory : Memory or None
        Host memory that placements go to (a new one by default).
    stream : int
        This stream's id, compared with :attr:`Region.stream`.
    ird : int
        Inbound RDMA Read Requests that may be queued at once.
    terminate_msn : int
        MSN of the Terminate this side sends on an error (QN 2; 1 unless
        this side already sent one).
    """

    QN1_CAPACITY = rdmap.ReadRequest.LENGTH
    QN2_CAPACITY = rdmap.TERMINATE_MAX_LEN

    def __init__(self, *, memory=None, stream=0, ird=8, terminate_msn=1):
        if memory is not None and not isinstance(memory, Memory):
            raise TypeError("memory must be a Memory")
        check_uint("ird", ird, 32)
        check_uint("terminate_msn", terminate_msn, 32)
        self.memory = Memory() if memory is None else memory
        self.stream = stream
        self.ird = ird
        self.terminate_msn = terminate_msn
        self.error = None
        self.terminate_sent = None
        self.terminate_received = None
        self._regions = {}
        self._recv = collections.deque()
        self._recv_base = 1      # MSN of the oldest undelivered QN 0 message
        self._next_post = 1      # MSN the next posted buffer gets
        self._q1 = _Untagged(1, self.QN1_CAPACITY, addr=None)
        self._q2 = _Untagged(1, self.QN2_CAPACITY, addr=None)
        self._reads = collections.deque()
        self._tagged_msg = None  # [stag, first TO, octets] of the tagged message in progress

    # -- host side -------------------------------------------------------

    def register_region(self, *, stag, base, length, access, stream=None, addr=None):
        """Register (or replace) the region of ``stag``; ``stream`` defaults to this stream."""
        region = Region(stag=stag, base=base, length=length, access=access,
                        stream=self.stream if stream is None else stream, addr=addr)
        self._regions[stag] = region
        return region

    def region(self, stag):
        """The :class:`Region` of ``stag`` or ``None``."""
        return self._regions.get(stag)

    def invalidate(self, stag):
        """Invalidate ``stag`` locally (``KeyError`` if it was never registered)."""
        region = self._regions[stag]
        self._regions[stag] = Region(stag=region.stag, base=region.base, length=region.length,
                                     access=region.access, stream=region.stream, valid=False,
                                     addr=region.addr)

    def post_receive(self, *, addr, length, buffer_id=None):
        """Post a QN 0 receive buffer; returns the MSN it will take (also the default id)."""
        check_uint("addr", addr, 64)
        check_uint("length", length, 32)
        msn = self._next_post
        self._next_post = (msn + 1) & _MASK32
        self._recv.append(_Untagged(msn, length, addr=addr,
                                    buffer_id=msn if buffer_id is None else buffer_id))
        return msn

    @property
    def posted(self):
        """Number of QN 0 buffers not yet delivered."""
        return len(self._recv)

    @property
    def read_requests(self):
        """Queued inbound Read Requests, oldest first."""
        return tuple(self._reads)

    def pop_read_request(self):
        """Dequeue the oldest Read Request once answered (frees its IRD slot)."""
        return self._reads.popleft()

    # -- wire side -------------------------------------------------------

    def receive(self, ulpdu):
        """Validate and place one ULPDU; returns the list of events."""
        if self.error is not None or self.terminate_received is not None:
            return []
        ulpdu = bytes(ulpdu)
        try:
            return self._receive(ulpdu)
        except ProtocolError as exc:
            return [self._fail(exc.info, ulpdu)]

    def _fail(self, info, ulpdu):
        self.error = info
        term = rdmap.Terminate.for_error(info, ulpdu)
        self.terminate_sent = segment.ulpdu(Opcode.TERMINATE, term, msn=self.terminate_msn)
        return Error(info, self.terminate_sent)

    def _receive(self, ulpdu):
        header, payload = ddp.parse(ulpdu)
        info = ddp.check_version(header) or rdmap.check_header(header)
        if info is not None:
            raise ProtocolError(info)
        if header.tagged:
            return self._tagged(header, payload)
        return self._untagged(header, payload)

    # tagged ----------------------------------------------------------------

    def _tagged(self, header, payload):
        n = len(payload)
        _, _, opcode = rdmap.parse_control(header.rsvd_ulp)
        events = []
        if n:
            region = self._check_tagged(header.stag, header.to, n)
            addr = region.address(header.to)
            self.memory.write(addr, payload)
            events.append(Placement(addr, payload))
        if self._tagged_msg is None:
            self._tagged_msg = [header.stag, header.to, 0]
        self._tagged_msg[2] += n
        if header.last:
            stag, to, length = self._tagged_msg
            self._tagged_msg = None
            if opcode == Opcode.RDMA_READ_RESPONSE:
                events.append(ReadResponseComplete(stag, to, length))
        return events

    def _check_tagged(self, stag, to, n):
        region = self._regions.get(stag)
        if region is None or not region.valid:
            what = "unknown" if region is None else "invalidated"
            raise ProtocolError(_ddp_tagged(DdpTaggedCode.INVALID_STAG, f"STag {stag:#x} is {what}"))
        if region.stream != self.stream:
            raise ProtocolError(_ddp_tagged(
                DdpTaggedCode.STAG_NOT_ASSOCIATED,
                f"STag {stag:#x} belongs to stream {region.stream}, not {self.stream}"))
        if not region.access & Access.REMOTE_WRITE:
            raise ProtocolError(_protection(RdmapProtectionCode.ACCESS_RIGHTS,
                                            f"STag {stag:#x} has no remote write access"))
        if to + n > 1 << 64:
            raise ProtocolError(_ddp_tagged(DdpTaggedCode.TO_WRAP,
                                            f"TO {to:#x} + {n} wraps 64 bits"))
        if not region.contains(to, n):
            raise ProtocolError(_ddp_tagged(
                DdpTaggedCode.BASE_BOUNDS,
                f"TO {to:#x}..{to + n - 1:#x} outside STag {stag:#x} "
                f"({region.base:#x}..{region.base + region.length - 1:#x})"))
        return region

    # untagged --------------------------------------------------------------

    def _untagged(self, header, payload):
        n = len(payload)
        _, _, opcode = rdmap.parse_control(header.rsvd_ulp >> 32)
        opcode = Opcode(opcode)
        if header.qn > 2:
            raise ProtocolError(_ddp_untagged(DdpUntaggedCode.INVALID_QN,
                                              f"QN {header.qn} is not 0, 1 or 2"))
        if rdmap.queue_number(opcode) != header.qn:
            raise ProtocolError(_operation(
                RdmapOperationCode.UNEXPECTED_OPCODE,
                f"opcode {rdmap.OPCODE_NAMES[opcode]} on QN {header.qn}"))
        msg = self._buffer_for(header.qn, header.msn)
        self._check_offsets(msg, header, n)
        if header.qn == 0:
            return self._send(msg, header, opcode, payload)
        return self._control(msg, header, opcode, payload)

    def _buffer_for(self, qn, msn):
        if qn == 0:
            base, avail = self._recv_base, len(self._recv)
        else:
            state = self._q1 if qn == 1 else self._q2
            base, avail = state.msn, 1
        d = (msn - base) & _MASK32
        if d < avail:
            return self._recv[d] if qn == 0 else state
        if d == avail and qn == 0:
            raise ProtocolError(_ddp_untagged(DdpUntaggedCode.INVALID_MSN_NO_BUFFER,
                                              f"no receive buffer posted for MSN {msn} on QN 0"))
        valid = f"{base}..{(base + avail - 1) & _MASK32}" if avail else f"none (next is {base})"
        raise ProtocolError(_ddp_untagged(
            DdpUntaggedCode.INVALID_MSN_RANGE,
            f"MSN {msn} on QN {qn} outside the valid range: {valid}"))

    def _check_offsets(self, msg, header, n):
        mo, end = header.mo, header.mo + n
        if n:
            if mo >= msg.capacity:
                raise ProtocolError(_ddp_untagged(
                    DdpUntaggedCode.INVALID_MO,
                    f"MO {mo} outside the {msg.capacity}-octet buffer of MSN {msg.msn}"))
            if end > msg.capacity:
                raise ProtocolError(_ddp_untagged(
                    DdpUntaggedCode.MESSAGE_TOO_LONG,
                    f"MO {mo} + {n} octets exceeds the {msg.capacity}-octet buffer of MSN {msg.msn}"))
        elif header.last and mo > msg.capacity:
            raise ProtocolError(_ddp_untagged(
                DdpUntaggedCode.MESSAGE_TOO_LONG,
                f"message of {mo} octets exceeds the {msg.capacity}-octet buffer of MSN {msg.msn}"))
        if not (n or header.last):
            return
        if msg.l_end is not None and (mo > msg.l_mo or end > msg.l_end):
            raise ProtocolError(_ddp_untagged(
                DdpUntaggedCode.INVALID_MO,
                f"MO {mo}..{end} beyond the last segment (MO {msg.l_mo}, end {msg.l_end})"))
        if header.last and (msg.max_mo > mo or msg.max_end > end):
            raise ProtocolError(_ddp_untagged(
                DdpUntaggedCode.INVALID_MO,
                f"last segment MO {mo} (end {end}) below earlier data (MO {msg.max_mo}, end {msg.max_end})"))

    def _note(self, msg, header, n):
        if n or header.last:
            msg.max_mo = max(msg.max_mo, header.mo)
            msg.max_end = max(msg.max_end, header.mo + n)
        if header.last:
            msg.l_mo, msg.l_end = header.mo, header.mo + n

    def _send(self, msg, header, opcode, payload):
        n = len(payload)
        inval = None
        if header.last and opcode in rdmap.INVALIDATE_OPCODES:
            inval = header.rsvd_ulp & _MASK32
            region = self._regions.get(inval)
            if region is None or not region.valid:
                raise ProtocolError(_operation(RdmapOperationCode.STAG_CANNOT_INVALIDATE,
                                               f"STag {inval:#x} to invalidate is not valid"))
            if region.stream != self.stream:
                raise ProtocolError(_protection(
                    RdmapProtectionCode.STAG_CANNOT_INVALIDATE,
                    f"STag {inval:#x} to invalidate belongs to stream {region.stream}"))
            if not region.access & Access.REMOTE_INV:
                raise ProtocolError(_protection(
                    RdmapProtectionCode.STAG_CANNOT_INVALIDATE,
                    f"STag {inval:#x} may not be invalidated by the peer (no REMOTE_INV)"))
        events = []
        if n:
            addr = msg.addr + header.mo
            self.memory.write(addr, payload)
            events.append(Placement(addr, payload))
        self._note(msg, header, n)
        if header.last:
            if inval is not None:
                self.invalidate(inval)
            msg.done = SendComplete(msg.l_end, msg.msn, msg.buffer_id, inval,
                                    opcode in rdmap.SOLICITED_OPCODES)
            while self._recv and self._recv[0].done is not None:
                events.append(self._recv.popleft().done)
                self._recv_base = (self._recv_base + 1) & _MASK32
        return events

    def _control(self, msg, header, opcode, payload):
        n = len(payload)
        if not header.last:
            msg.data[header.mo:header.mo + n] = payload
            self._note(msg, header, n)
            return []
        data = bytearray(msg.data)
        data[header.mo:header.mo + n] = payload
        data = bytes(data[:header.mo + n])
        if opcode == Opcode.RDMA_READ_REQUEST:
            request = rdmap.ReadRequest.parse(data)
            if len(self._reads) >= self.ird:
                raise ProtocolError(_operation(
                    RdmapOperationCode.CATASTROPHIC_STREAM,
                    f"RDMA Read Request beyond IRD {self.ird}"))
            self._check_source(request)
            self._reads.append(request)
            event = ReadRequestQueued(request, msg.msn)
        else:
            term = rdmap.Terminate.parse(data)
            self.terminate_received = term
            event = TerminateReceived(term)
        # the message is consumed: next MSN on this queue, fresh buffer
        fresh = _Untagged((msg.msn + 1) & _MASK32, msg.capacity, addr=None)
        if header.qn == 1:
            self._q1 = fresh
        else:
            self._q2 = fresh
        return [event]

    def _check_source(self, request):
        if request.size == 0:
            return
        stag, to, n = request.src_stag, request.src_to, request.size
        region = self._regions.get(stag)
        if region is None or not region.valid:
            what = "unknown" if region is None else "invalidated"
            raise ProtocolError(_protection(RdmapProtectionCode.INVALID_STAG,
                                            f"data source STag {stag:#x} is {what}"))
        if region.stream != self.stream:
            raise ProtocolError(_protection(
                RdmapProtectionCode.STAG_NOT_ASSOCIATED,
                f"data source STag {stag:#x} belongs to stream {region.stream}"))
        if not region.access & Access.REMOTE_READ:
            raise ProtocolError(_protection(RdmapProtectionCode.ACCESS_RIGHTS,
                                            f"data source STag {stag:#x} has no remote read access"))
        if to + n > 1 << 64:
            raise ProtocolError(_protection(RdmapProtectionCode.TO_WRAP,
                                            f"data source TO {to:#x} + {n} wraps 64 bits"))
        if not region.contains(to, n):
            raise ProtocolError(_protection(
                RdmapProtectionCode.BASE_BOUNDS,
                f"data source TO {to:#x}..{to + n - 1:#x} outside STag {stag:#x}"))
