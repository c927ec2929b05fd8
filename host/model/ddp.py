"""DDP segment headers (RFC 5041 section 4), at the ULPDU level (after MPA framing).

Control octet: ``T`` (0x80) ``L`` (0x40) ``Rsvd`` (4 bits) ``DV`` (2 bits).

Tagged header, 14 octets: control, RsvdULP (8 bits: the RDMAP control octet),
STag (32), TO (64). Untagged header, 18 octets: control, RsvdULP (40 bits:
the RDMAP control octet, then 32 bits that RDMAP uses for the STag to
invalidate), QN (32), MSN (32), MO (32). All fields big endian.

:func:`parse` does not reject a DV other than 1 (a dissector must show frames
of older revisions, such as the ``0x40 0x03`` of the early MPA figures) and
does not look at the reserved bits; :func:`check_version` says what a data
sink reports for a wrong DV.
"""

import struct
from dataclasses import dataclass

from rnic.host.spec.errors import DdpErrorType, DdpTaggedCode, DdpUntaggedCode, ErrorInfo, ProtocolError
from rnic.host.spec.protocol import DDP_VERSION, L_FLAG, T_FLAG, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN
from rnic.host.spec.limits import check_uint

__all__ = [
    "DDP_VERSION", "T_FLAG", "L_FLAG", "TAGGED_HEADER_LEN", "UNTAGGED_HEADER_LEN",
    "TaggedHeader", "UntaggedHeader", "header_length", "parse", "build",
    "check_version",
]

_TAGGED = struct.Struct(">BBIQ")
_UNTAGGED = struct.Struct(">BB4sIII")


def _control(tagged, last, rsvd, dv):
    return (T_FLAG if tagged else 0) | (L_FLAG if last else 0) | (rsvd << 2) | dv


@dataclass(frozen=True, kw_only=True)
class TaggedHeader:
    """Tagged buffer model header (14 octets).

    Parameters
    ----------
    last : bool
        L flag: last segment of the DDP message.
    stag, to : int
        Steering tag (32 bits) and tagged offset (64 bits).
    rsvd_ulp : int
        RsvdULP, 8 bits (the RDMAP control octet).
    dv : int
        DDP version, 2 bits (1 today).
    rsvd : int
        The 4 reserved bits of the control octet (0 on transmit).
    """
    last: bool
    stag: int
    to: int
    rsvd_ulp: int
    dv: int = DDP_VERSION
    rsvd: int = 0

    def __post_init__(self):
        object.__setattr__(self, "last", bool(self.last))
        check_uint("stag", self.stag, 32)
        check_uint("to", self.to, 64)
        check_uint("rsvd_ulp", self.rsvd_ulp, 8)
        check_uint("dv", self.dv, 2)
        check_uint("rsvd", self.rsvd, 4)

    tagged = True
    length = TAGGED_HEADER_LEN

    @property
    def control(self):
        """The control octet."""
        return _control(True, self.last, self.rsvd, self.dv)

    def to_bytes(self):
        """The 14 header octets."""
        return _TAGGED.pack(self.control, self.rsvd_ulp, self.stag, self.to)


@dataclass(frozen=True, kw_only=True)
class UntaggedHeader:
    """Untagged buffer model header (18 octets).

    Parameters
    ----------
    last : bool
        L flag: last segment of the DDP message.
    qn, msn, mo : int
        Queue number, message sequence number, message offset (32 bits each).
    rsvd_ulp : int
        RsvdULP, 40 bits: RDMAP control octet in the top 8 bits, then 32 bits
        (the STag to invalidate for the Send-with-Invalidate kinds).
    dv : int
        DDP version, 2 bits (1 today).
    rsvd : int
        The 4 reserved bits of the control octet (0 on transmit).
    """
    last: bool
    qn: int
    msn: int
    mo: int
    rsvd_ulp: int
    dv: int = DDP_VERSION
    rsvd: int = 0

    def __post_init__(self):
        object.__setattr__(self, "last", bool(self.last))
        check_uint("qn", self.qn, 32)
        check_uint("msn", self.msn, 32)
        check_uint("mo", self.mo, 32)
        check_uint("rsvd_ulp", self.rsvd_ulp, 40)
        check_uint("dv", self.dv, 2)
        check_uint("rsvd", self.rsvd, 4)

    tagged = False
    length = UNTAGGED_HEADER_LEN

    @property
    def control(self):
        """The control octet."""
        return _control(False, self.last, self.rsvd, self.dv)

    def to_bytes(self):
        """The 18 header octets."""
        return _UNTAGGED.pack(self.control, self.rsvd_ulp >> 32,
                              (self.rsvd_ulp & 0xFFFFFFFF).to_bytes(4, "big"),
                              self.qn, self.msn, self.mo)


def header_length(control):
    """Header length (14 or 18) that a control octet announces."""
    return TAGGED_HEADER_LEN if control & T_FLAG else UNTAGGED_HEADER_LEN


def parse(ulpdu):
    """Split a ULPDU into its DDP header and payload.

    Parameters
    ----------
    ulpdu : bytes-like
        One DDP segment (the MPA ULPDU).

    Returns
    -------
    (TaggedHeader | UntaggedHeader, bytes)

    Raises
    ------
    ProtocolError
        DDP local catastrophic (layer 1, type 0, code 0) when the ULPDU is
        shorter than the header its control octet announces.
    """
    ulpdu = bytes(ulpdu)
    if not ulpdu:
        raise ProtocolError(ErrorInfo.ddp(
            DdpErrorType.CATASTROPHIC, 0, "empty ULPDU: no DDP control octet"))
    control = ulpdu[0]
    need = header_length(control)
    if len(ulpdu) < need:
        kind = "tagged" if control & T_FLAG else "untagged"
        raise ProtocolError(ErrorInfo.ddp(
            DdpErrorType.CATASTROPHIC, 0,
            f"ULPDU of {len(ulpdu)} octets is shorter than the {need}-octet {kind} DDP header"))
    last = bool(control & L_FLAG)
    rsvd = (control >> 2) & 0xF
    dv = control & 0x3
    if control & T_FLAG:
        _, rsvd_ulp, stag, to = _TAGGED.unpack_from(ulpdu)
        header = TaggedHeader(last=last, stag=stag, to=to, rsvd_ulp=rsvd_ulp, dv=dv, rsvd=rsvd)
    else:
        _, ulp_hi, ulp_lo, qn, msn, mo = _UNTAGGED.unpack_from(ulpdu)
        header = UntaggedHeader(last=last, qn=qn, msn=msn, mo=mo,
                                rsvd_ulp=(ulp_hi << 32) | int.from_bytes(ulp_lo, "big"),
                                dv=dv, rsvd=rsvd)
    return header, ulpdu[need:]


def build(header, payload=b""):
    """Return the ULPDU: ``header`` octets followed by ``payload``."""
    if not isinstance(header, (TaggedHeader, UntaggedHeader)):
        raise TypeError(f"header must be a TaggedHeader or UntaggedHeader, not {type(header).__name__}")
    return header.to_bytes() + bytes(payload)


def check_version(header):
    """The data-sink verdict on DV: ``None`` when DV is 1, else the :class:`ErrorInfo`.

    Tagged: layer DDP, type 1, code 4; untagged: layer DDP, type 2, code 6
    (RFC 5041 section 7.2, "Invalid DDP version").
    """
    if header.dv == DDP_VERSION:
        return None
    text = f"DDP version {header.dv}, expected {DDP_VERSION}"
    if header.tagged:
        return ErrorInfo.ddp(DdpErrorType.TAGGED, DdpTaggedCode.INVALID_VERSION, text)
    return ErrorInfo.ddp(DdpErrorType.UNTAGGED, DdpUntaggedCode.INVALID_VERSION, text)
