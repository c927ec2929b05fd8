"""TX side: build RDMAP/DDP ULPDUs and cut messages into DDP segments (RFC 5041 section 5.2).

:func:`ulpdu` builds one segment of any opcode; :func:`segment` cuts a whole
message so that every ULPDU (header included) is at most MULPDU octets: the
MO (untagged) or TO (tagged) advances by the payload carried so far, only the
last segment has L set, and a zero-length message is one segment.
:class:`TxStream` adds the per-connection MSN counters of the untagged
queues 0, 1 and 2 (each starts at 1 and wraps modulo 2**32).
"""

from rnic.host.model import ddp, rdmap
from rnic.host.model.rdmap import Opcode
from rnic.host.spec.limits import check_uint

__all__ = ["ulpdu", "segment", "TxStream"]


def _payload_bytes(payload):
    if isinstance(payload, (rdmap.ReadRequest, rdmap.Terminate)):
        return payload.build()
    return bytes(payload)


def _header(opcode, *, last, stag, to, qn, msn, mo, inval_stag):
    opcode = Opcode(opcode)
    control = rdmap.control_byte(opcode)
    if opcode in rdmap.TAGGED_OPCODES:
        if inval_stag:
            raise ValueError(f"inval_stag is for the Send-with-Invalidate kinds, not {opcode.name}")
        return ddp.TaggedHeader(last=last, stag=stag, to=to, rsvd_ulp=control)
    if inval_stag and opcode not in rdmap.INVALIDATE_OPCODES:
        raise ValueError(f"inval_stag is for the Send-with-Invalidate kinds, not {opcode.name}")
    check_uint("inval_stag", inval_stag, 32)
    if qn is None:
        qn = rdmap.queue_number(opcode)
    return ddp.UntaggedHeader(last=last, qn=qn, msn=msn, mo=mo,
                              rsvd_ulp=(control << 32) | inval_stag)


def ulpdu(opcode, payload=b"", *, last=True, stag=0, to=0, qn=None, msn=1, mo=0, inval_stag=0):
    """Build one ULPDU (DDP header, RDMAP fields, payload).

    Parameters
    ----------
    opcode : Opcode or int
        RDMAP opcode 0..7; it decides tagged (Write, Read Response) or untagged.
    payload : bytes-like, ReadRequest or Terminate
        DDP payload of this segment.
    last : bool
        L flag.
    stag, to : int
        Tagged only.
    qn, msn, mo : int
        Untagged only; ``qn`` defaults to the opcode's queue.
    inval_stag : int
        STag to invalidate (Send with Invalidate kinds only).
    """
    header = _header(opcode, last=last, stag=stag, to=to, qn=qn, msn=msn, mo=mo,
                     inval_stag=inval_stag)
    return ddp.build(header, _payload_bytes(payload))


def segment(opcode, payload=b"", *, mulpdu, stag=0, to=0, qn=None, msn=1, inval_stag=0):
    """Cut one message into DDP segments of at most ``mulpdu`` octets each.

    Parameters are those of :func:`ulpdu`; ``to`` is the TO of the first
    octet (tagged), the MO starts at 0 (untagged). ``mulpdu`` must leave room
    for at least one payload octet after the header.

    Returns
    -------
    list of bytes
        The ULPDUs in order; L is set on the last one only.
    """
    opcode = Opcode(opcode)
    payload = _payload_bytes(payload)
    tagged = opcode in rdmap.TAGGED_OPCODES
    hlen = ddp.TAGGED_HEADER_LEN if tagged else ddp.UNTAGGED_HEADER_LEN
    check_uint("mulpdu", mulpdu, 32)
    if mulpdu <= hlen:
        raise ValueError(f"mulpdu {mulpdu} leaves no room after the {hlen}-octet DDP header")
    check_uint("to", to, 64)
    if tagged and payload and to + len(payload) > 1 << 64:
        raise ValueError("TO + message length wraps 64 bits")
    if not tagged and len(payload) > 1 << 32:
        raise ValueError("untagged message longer than 2**32 octets: MO would wrap")
    room = mulpdu - hlen
    out = []
    offset = 0
    while True:
        chunk = payload[offset:offset + room]
        last = offset + len(chunk) >= len(payload)
        out.append(ddp.build(_header(opcode, last=last, stag=stag, to=to + offset if tagged else 0,
                                     qn=qn, msn=msn, mo=0 if tagged else offset,
                                     inval_stag=inval_stag), chunk))
        offset += len(chunk)
        if last:
            return out


class TxStream:
    """Transmit side of one DDP stream: MULPDU and the MSN counter of each untagged queue.

    Parameters
    ----------
    mulpdu : int
        Current MULPDU (may be changed later through the attribute).
    """

    def __init__(self, *, mulpdu):
        self.mulpdu = mulpdu
        self._msn = {0: 1, 1: 1, 2: 1}

    @property
    def mulpdu(self):
        return self._mulpdu

    @mulpdu.setter
    def mulpdu(self, value):
        check_uint("mulpdu", value, 32)
        if value <= ddp.UNTAGGED_HEADER_LEN:
            raise ValueError(f"mulpdu {value} leaves no room after an 18-octet untagged DDP header")
        self._mulpdu = value

    def next_msn(self, qn):
        """MSN the next message on queue ``qn`` (0, 1 or 2) will carry."""
        return self._msn[qn]

    def message(self, opcode, payload=b"", *, stag=0, to=0, inval_stag=0):
        """Segment one message of any opcode; untagged ones take and advance their queue's MSN."""
        opcode = Opcode(opcode)
        qn = rdmap.queue_number(opcode)
        if qn is None:
            return segment(opcode, payload, mulpdu=self._mulpdu, stag=stag, to=to)
        out = segment(opcode, payload, mulpdu=self._mulpdu, msn=self._msn[qn], inval_stag=inval_stag)
        self._msn[qn] = (self._msn[qn] + 1) & 0xFFFFFFFF
        return out

    def send(self, payload=b"", *, solicited=False, inval_stag=None):
        """Send / Send with SE / with Invalidate (when ``inval_stag`` is not None)."""
        if inval_stag is None:
            opcode = Opcode.SEND_SE if solicited else Opcode.SEND
            return self.message(opcode, payload)
        opcode = Opcode.SEND_SE_INVALIDATE if solicited else Opcode.SEND_INVALIDATE
        return self.message(opcode, payload, inval_stag=inval_stag)

    def write(self, payload, *, stag, to):
        """RDMA Write of ``payload`` to ``stag`` at ``to``."""
        return self.message(Opcode.RDMA_WRITE, payload, stag=stag, to=to)

    def read_request(self, request):
        """RDMA Read Request (QN 1) carrying ``request`` (a :class:`~rnic.host.model.rdmap.ReadRequest`)."""
        if not isinstance(request, rdmap.ReadRequest):
            raise TypeError("request must be a ReadRequest")
        return self.message(Opcode.RDMA_READ_REQUEST, request)

    def read_response(self, payload, *, stag, to):
        """RDMA Read Response of ``payload`` to the requester's sink ``stag``/``to``."""
        return self.message(Opcode.RDMA_READ_RESPONSE, payload, stag=stag, to=to)

    def terminate(self, terminate):
        """Terminate (QN 2) carrying ``terminate`` (a :class:`~rnic.host.model.rdmap.Terminate`)."""
        if not isinstance(terminate, rdmap.Terminate):
            raise TypeError("terminate must be a Terminate")
        return self.message(Opcode.TERMINATE, terminate)
