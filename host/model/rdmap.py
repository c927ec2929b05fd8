"""RDMAP (RFC 5040): control octet, opcodes, RDMA Read Request and Terminate.

The RDMAP control octet is the first octet of DDP's RsvdULP: ``RV`` (2 bits,
1 today), 2 reserved bits, ``opcode`` (4 bits). For the two
Send-with-Invalidate kinds the next 32 bits of the untagged RsvdULP carry the
STag to invalidate.

RDMA Read Request payload (28 octets): Data Sink STag (32), Data Sink TO (64),
RDMA Read Message Size (32), Data Source STag (32), Data Source TO (64).

Terminate payload, as this module reads RFC 5040 section 4.8::

    | Layer(4) | EType(4) | Error Code(8) | M | D | R | Reserved(13) |
    | DDP Segment Length (16), present if M or D | ...
    | Terminated DDP Header (14 or 18 octets), present if D           |
    | Terminated RDMA Header (28 octets), present if R                |

* ``M`` "DDP Segment Length valid": the 16-bit length field holds the length
  of the offending DDP segment (the MPA ULPDU_Length). The field sits right
  before the terminated DDP header, so it is on the wire whenever M or D is
  set; with D alone its value is not meaningful.
* ``D`` "DDP Header Included": the full DDP header of the offending segment;
  its own T bit says whether it is 14 (tagged) or 18 (untagged) octets.
* ``R`` "RDMAP Header Included": the 28-octet RDMA Read Request header, the
  only RDMAP header that does not live inside the DDP header's RsvdULP.

Nothing may follow what the flags announce. A Read Request or Terminate
payload of the wrong length raises :class:`~rnic.host.spec.errors.ProtocolError` with
RDMAP Remote Operation Error, Unspecified (layer 0, type 2, code 0xFF): the
peer sent a malformed RDMAP message and no table names a closer code.
"""

import struct
from dataclasses import dataclass

from rnic.host.model import ddp
from rnic.host.spec.errors import ErrorInfo, Layer, ProtocolError, RdmapErrorType, RdmapOperationCode
from rnic.host.spec.protocol import (
    QN_READ_REQUEST, QN_SEND, QN_TERMINATE, RDMAP_VERSION, READ_REQUEST_LEN, TERMINATE_MAX_LEN,
    RdmapOpcode,
)
from rnic.host.spec.limits import check_uint

__all__ = [
    "RDMAP_VERSION", "Opcode", "OPCODE_NAMES", "TAGGED_OPCODES", "INVALIDATE_OPCODES",
    "SOLICITED_OPCODES", "opcode_name",
    "opcode_from_name", "queue_number", "control_byte", "parse_control",
    "check_header", "ReadRequest", "Terminate", "TERMINATE_MAX_LEN",
]

#: The RDMAP opcodes (RFC 5040 section 4.2); defined once in the spec layer.
Opcode = RdmapOpcode


OPCODE_NAMES = {
    Opcode.RDMA_WRITE: "write",
    Opcode.RDMA_READ_REQUEST: "read_request",
    Opcode.RDMA_READ_RESPONSE: "read_response",
    Opcode.SEND: "send",
    Opcode.SEND_INVALIDATE: "send_inv",
    Opcode.SEND_SE: "send_se",
    Opcode.SEND_SE_INVALIDATE: "send_se_inv",
    Opcode.TERMINATE: "terminate",
}
_NAME_TO_OPCODE = {name: op for op, name in OPCODE_NAMES.items()}

TAGGED_OPCODES = frozenset({Opcode.RDMA_WRITE, Opcode.RDMA_READ_RESPONSE})
INVALIDATE_OPCODES = frozenset({Opcode.SEND_INVALIDATE, Opcode.SEND_SE_INVALIDATE})
SOLICITED_OPCODES = frozenset({Opcode.SEND_SE, Opcode.SEND_SE_INVALIDATE})
_QN = {
    Opcode.RDMA_READ_REQUEST: QN_READ_REQUEST,
    Opcode.SEND: QN_SEND, Opcode.SEND_INVALIDATE: QN_SEND, Opcode.SEND_SE: QN_SEND,
    Opcode.SEND_SE_INVALIDATE: QN_SEND,
    Opcode.TERMINATE: QN_TERMINATE,
}


def opcode_name(opcode):
    """JSON name of an opcode value ("unknown" outside 0..7)."""
    try:
        return OPCODE_NAMES[Opcode(opcode)]
    except ValueError:
        return "unknown"


def opcode_from_name(name):
    """Inverse of :func:`opcode_name`; ``ValueError`` for an unknown name."""
    try:
        return _NAME_TO_OPCODE[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown RDMAP opcode name {name!r}; known: "
                         + ", ".join(sorted(_NAME_TO_OPCODE))) from None


def queue_number(opcode):
    """Untagged queue number an opcode uses, or ``None`` for the tagged ones."""
    return _QN.get(Opcode(opcode))


def control_byte(opcode, *, rv=RDMAP_VERSION, rsvd=0):
    """RDMAP control octet: RV(2) rsvd(2) opcode(4)."""
    for name, value, bits in (("opcode", opcode, 4), ("rv", rv, 2), ("rsvd", rsvd, 2)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << bits):
            raise ValueError(f"{name} = {value!r} does not fit {bits} bits")
    return (rv << 6) | (rsvd << 4) | int(opcode)


def parse_control(octet):
    """Split an RDMAP control octet into ``(rv, rsvd, opcode)`` ints."""
    return (octet >> 6) & 0x3, (octet >> 4) & 0x3, octet & 0xF


def _rdmap_control_of(header):
    return header.rsvd_ulp if header.tagged else header.rsvd_ulp >> 32


def check_header(header):
    """RDMAP checks of a DDP header: ``None`` or the :class:`ErrorInfo`.

    In order: RV must be 1 (Remote Operation Error, code 5 "Invalid RDMAP
    version"); the opcode must be one of 0..7 and its tagged/untagged kind
    must match the DDP T bit (Remote Operation Error, code 6 "Unexpected
    OpCode"). The queue number is DDP's business and is not looked at here.
    """
    rv, _, opcode = parse_control(_rdmap_control_of(header))
    if rv != RDMAP_VERSION:
        return ErrorInfo.rdmap(RdmapErrorType.REMOTE_OPERATION, RdmapOperationCode.INVALID_VERSION,
                               f"RDMAP version {rv}, expected {RDMAP_VERSION}")
    if opcode > max(Opcode):
        return ErrorInfo.rdmap(RdmapErrorType.REMOTE_OPERATION, RdmapOperationCode.UNEXPECTED_OPCODE,
                               f"undefined RDMAP opcode {opcode}")
    if (Opcode(opcode) in TAGGED_OPCODES) != header.tagged:
        kind = "tagged" if header.tagged else "untagged"
        return ErrorInfo.rdmap(RdmapErrorType.REMOTE_OPERATION, RdmapOperationCode.UNEXPECTED_OPCODE,
                               f"opcode {OPCODE_NAMES[Opcode(opcode)]} in a {kind} DDP segment")
    return None


def _malformed(text):
    return ProtocolError(ErrorInfo.rdmap(RdmapErrorType.REMOTE_OPERATION,
                                         RdmapOperationCode.UNSPECIFIED, text))


_READ_REQUEST = struct.Struct(">IQIIQ")


@dataclass(frozen=True, kw_only=True)
class ReadRequest:
    """RDMA Read Request header (the 28-octet payload of opcode 1).

    Parameters
    ----------
    sink_stag, sink_to : int
        Where the requester wants the data (32 / 64 bits).
    size : int
        RDMA Read Message Size in octets (32 bits).
    src_stag, src_to : int
        Where the responder reads it from (32 / 64 bits).
    """
    sink_stag: int
    sink_to: int
    size: int
    src_stag: int
    src_to: int

    LENGTH = READ_REQUEST_LEN

    def __post_init__(self):
        check_uint("sink_stag", self.sink_stag, 32)
        check_uint("sink_to", self.sink_to, 64)
        check_uint("size", self.size, 32)
        check_uint("src_stag", self.src_stag, 32)
        check_uint("src_to", self.src_to, 64)

    def build(self):
        """The 28 octets."""
        return _READ_REQUEST.pack(self.sink_stag, self.sink_to, self.size,
                                  self.src_stag, self.src_to)

    to_bytes = build

    @classmethod
    def parse(cls, data):
        """Parse exactly 28 octets; other lengths raise ``ProtocolError`` (RDMAP 2/0xFF)."""
        data = bytes(data)
        if len(data) != cls.LENGTH:
            raise _malformed(f"RDMA Read Request payload of {len(data)} octets, expected {cls.LENGTH}")
        sink_stag, sink_to, size, src_stag, src_to = _READ_REQUEST.unpack(data)
        return cls(sink_stag=sink_stag, sink_to=sink_to, size=size,
                   src_stag=src_stag, src_to=src_to)

    def to_json(self):
        return {"sink_stag": self.sink_stag, "sink_to": self.sink_to, "size": self.size,
                "src_stag": self.src_stag, "src_to": self.src_to}


assert TERMINATE_MAX_LEN == 4 + 2 + ddp.UNTAGGED_HEADER_LEN + ReadRequest.LENGTH


@dataclass(frozen=True, kw_only=True)
class Terminate:
    """Terminate message payload (opcode 7), see the module docstring for the layout.

    Parameters
    ----------
    layer, etype, ecode : int
        Terminate Layer (4 bits), error type (4 bits), error code (8 bits).
    m, d, r : bool
        Header control bits: DDP Segment Length valid, DDP header included,
        RDMA Read Request header included.
    ddp_segment_length : int
        16 bits; on the wire when ``m`` or ``d``, else it must be 0.
    ddp_header : bytes
        The terminated DDP header (14 or 18 octets) when ``d``, else empty.
    rdmap_header : bytes
        The terminated 28-octet RDMA Read Request header when ``r``, else empty.
    rsvd : int
        The 13 reserved bits after the flags (0 on transmit).
    """
    layer: int
    etype: int
    ecode: int
    m: bool = False
    d: bool = False
    r: bool = False
    ddp_segment_length: int = 0
    ddp_header: bytes = b""
    rdmap_header: bytes = b""
    rsvd: int = 0

    def __post_init__(self):
        check_uint("layer", int(self.layer), 4)
        check_uint("etype", int(self.etype), 4)
        check_uint("ecode", int(self.ecode), 8)
        check_uint("ddp_segment_length", self.ddp_segment_length, 16)
        check_uint("rsvd", self.rsvd, 13)
        for name in ("m", "d", "r"):
            object.__setattr__(self, name, bool(getattr(self, name)))
        object.__setattr__(self, "ddp_header", bytes(self.ddp_header))
        object.__setattr__(self, "rdmap_header", bytes(self.rdmap_header))
        if not (self.m or self.d) and self.ddp_segment_length:
            raise ValueError("ddp_segment_length needs the M or D flag")
        if self.d:
            if not self.ddp_header or len(self.ddp_header) != ddp.header_length(self.ddp_header[0]):
                raise ValueError("with D set, ddp_header must be one full DDP header "
                                 "(14 octets tagged, 18 untagged, by its T bit)")
        elif self.ddp_header:
            raise ValueError("ddp_header given without the D flag")
        if self.r:
            if len(self.rdmap_header) != ReadRequest.LENGTH:
                raise ValueError(f"with R set, rdmap_header must be {ReadRequest.LENGTH} octets")
        elif self.rdmap_header:
            raise ValueError("rdmap_header given without the R flag")

    @property
    def info(self):
        """The reported error as an :class:`ErrorInfo` (``ValueError`` for a layer above 2)."""
        return ErrorInfo(Layer(self.layer), self.etype, self.ecode)

    def build(self):
        """The Terminate payload octets."""
        word = ((int(self.layer) << 28) | (int(self.etype) << 24) | (int(self.ecode) << 16)
                | (self.m << 15) | (self.d << 14) | (self.r << 13) | self.rsvd)
        out = word.to_bytes(4, "big")
        if self.m or self.d:
            out += self.ddp_segment_length.to_bytes(2, "big")
        return out + self.ddp_header + self.rdmap_header

    to_bytes = build

    @classmethod
    def parse(cls, data):
        """Parse a Terminate payload; malformed ones raise ``ProtocolError`` (RDMAP 2/0xFF)."""
        data = bytes(data)
        if len(data) < 4:
            raise _malformed(f"Terminate payload of {len(data)} octets: no Terminate Control field")
        word = int.from_bytes(data[:4], "big")
        m, d, r = bool(word & 0x8000), bool(word & 0x4000), bool(word & 0x2000)
        pos = 4
        seg_len = 0
        if m or d:
            if len(data) < pos + 2:
                raise _malformed("Terminate announces a DDP Segment Length field it does not carry")
            seg_len = int.from_bytes(data[pos:pos + 2], "big")
            pos += 2
        ddp_header = b""
        if d:
            if len(data) <= pos:
                raise _malformed("Terminate announces a DDP header it does not carry")
            need = ddp.header_length(data[pos])
            if len(data) < pos + need:
                raise _malformed(f"Terminate carries {len(data) - pos} octets of a {need}-octet DDP header")
            ddp_header = data[pos:pos + need]
            pos += need
        rdmap_header = b""
        if r:
            if len(data) < pos + ReadRequest.LENGTH:
                raise _malformed("Terminate announces an RDMA Read Request header it does not carry")
            rdmap_header = data[pos:pos + ReadRequest.LENGTH]
            pos += ReadRequest.LENGTH
        if pos != len(data):
            raise _malformed(f"{len(data) - pos} octets after the Terminate header its flags announce")
        return cls(layer=word >> 28, etype=(word >> 24) & 0xF, ecode=(word >> 16) & 0xFF,
                   m=m, d=d, r=r, ddp_segment_length=seg_len, ddp_header=ddp_header,
                   rdmap_header=rdmap_header, rsvd=word & 0x1FFF)

    @classmethod
    def for_error(cls, info, ulpdu=None):
        """The Terminate this side sends for ``info``, caused by ``ulpdu`` (or by no segment).

        * ``M`` and the DDP Segment Length: whenever the offending ULPDU is
          known (and its length fits 16 bits).
        * ``D`` and its DDP header: for DDP and RDMAP errors whenever the
          ULPDU holds a complete DDP header (never for LLP/MPA errors).
        * ``R`` and the 28-octet Read Request header: for RDMAP Remote
          Protection / Remote Operation errors other than "invalid version" and
          "unexpected opcode", when the ULPDU is an untagged Read Request
          carrying its full header.
        """
        m = d = r = False
        seg_len = 0
        ddp_header = rdmap_header = b""
        if ulpdu is not None:
            ulpdu = bytes(ulpdu)
            if len(ulpdu) <= 0xFFFF:
                m, seg_len = True, len(ulpdu)
            if info.layer != Layer.LLP and ulpdu and len(ulpdu) >= ddp.header_length(ulpdu[0]):
                header, payload = ddp.parse(ulpdu)
                d, ddp_header = True, header.to_bytes()
                rv, _, opcode = parse_control(_rdmap_control_of(header))
                if (info.layer == Layer.RDMAP
                        and info.etype in (RdmapErrorType.REMOTE_PROTECTION, RdmapErrorType.REMOTE_OPERATION)
                        and not (info.etype == RdmapErrorType.REMOTE_OPERATION
                                 and info.ecode in (RdmapOperationCode.INVALID_VERSION,
                                                    RdmapOperationCode.UNEXPECTED_OPCODE))
                        and not header.tagged and opcode == Opcode.RDMA_READ_REQUEST
                        and len(payload) >= ReadRequest.LENGTH):
                    r, rdmap_header = True, payload[:ReadRequest.LENGTH]
        return cls(layer=int(info.layer), etype=int(info.etype), ecode=int(info.ecode),
                   m=m, d=d, r=r, ddp_segment_length=seg_len, ddp_header=ddp_header,
                   rdmap_header=rdmap_header)

    def to_json(self):
        """JSON form: layer, etype, ecode, m, d, r (0/1), plus the included parts."""
        obj = {"layer": int(self.layer), "etype": int(self.etype), "ecode": int(self.ecode),
               "m": int(self.m), "d": int(self.d), "r": int(self.r)}
        if self.m or self.d:
            obj["ddp_segment_length"] = self.ddp_segment_length
        if self.d:
            obj["ddp_header"] = self.ddp_header.hex()
        if self.r:
            obj["rdmap_header"] = self.rdmap_header.hex()
        if self.rsvd:
            obj["rsvd"] = self.rsvd
        return obj
