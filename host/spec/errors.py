"""Error layers, types and codes of MPA, DDP and RDMAP, as carried in a Terminate.

Numbers are those of RFC 5044 (MPA, layer 2 "LLP", error type 0), RFC 5041
section 7.2 (DDP, layer 1) and RFC 5040 (RDMAP, layer 0), with RFC 6581's
MPA codes 5..7. :class:`ErrorInfo` is what every part of the model reports;
:class:`ProtocolError` raises one.

Framing-length errors that none of the tables names (a ULPDU_Length shorter
than the DDP header its control field announces, or longer than MULPDU) are
reported as DDP local catastrophic (layer 1, type 0, code 0): the DDP layer
cannot process the segment. The text says which.
"""

import enum
from dataclasses import dataclass

__all__ = [
    "Layer", "MpaError", "DdpErrorType", "DdpTaggedCode", "DdpUntaggedCode",
    "RdmapErrorType", "RdmapProtectionCode", "RdmapOperationCode",
    "ErrorInfo", "ProtocolError",
]


class Layer(enum.IntEnum):
    """Terminate ``Layer`` field."""
    RDMAP = 0
    DDP = 1
    LLP = 2  # MPA


class MpaError(enum.IntEnum):
    """MPA error codes (layer LLP, error type 0)."""
    TCP_CLOSED = 1
    CRC = 2
    MARKER = 3
    BAD_FRAME = 4
    LOCAL_CATASTROPHIC = 5
    INSUFFICIENT_IRD = 6
    NO_MATCHING_RTR = 7


class DdpErrorType(enum.IntEnum):
    CATASTROPHIC = 0
    TAGGED = 1
    UNTAGGED = 2


class DdpTaggedCode(enum.IntEnum):
    INVALID_STAG = 0x00
    BASE_BOUNDS = 0x01
    STAG_NOT_ASSOCIATED = 0x02
    TO_WRAP = 0x03
    INVALID_VERSION = 0x04


class DdpUntaggedCode(enum.IntEnum):
    INVALID_QN = 0x01
    INVALID_MSN_NO_BUFFER = 0x02
    INVALID_MSN_RANGE = 0x03
    INVALID_MO = 0x04
    MESSAGE_TOO_LONG = 0x05
    INVALID_VERSION = 0x06


class RdmapErrorType(enum.IntEnum):
    LOCAL_CATASTROPHIC = 0
    REMOTE_PROTECTION = 1
    REMOTE_OPERATION = 2


class RdmapProtectionCode(enum.IntEnum):
    INVALID_STAG = 0x00
    BASE_BOUNDS = 0x01
    ACCESS_RIGHTS = 0x02
    STAG_NOT_ASSOCIATED = 0x03
    TO_WRAP = 0x04
    STAG_CANNOT_INVALIDATE = 0x09
    UNSPECIFIED = 0xFF


class RdmapOperationCode(enum.IntEnum):
    INVALID_VERSION = 0x05
    UNEXPECTED_OPCODE = 0x06
    CATASTROPHIC_STREAM = 0x07
    CATASTROPHIC_GLOBAL = 0x08
    STAG_CANNOT_INVALIDATE = 0x09
    UNSPECIFIED = 0xFF


@dataclass(frozen=True)
class ErrorInfo:
    """One protocol error: Terminate layer, error type, error code and a text for people."""
    layer: Layer
    etype: int
    ecode: int
    text: str = ""

    def __post_init__(self):
        object.__setattr__(self, "layer", Layer(self.layer))
        if not 0 <= self.etype <= 0xF:
            raise ValueError(f"error type {self.etype} does not fit 4 bits")
        if not 0 <= self.ecode <= 0xFF:
            raise ValueError(f"error code {self.ecode} does not fit 8 bits")

    @classmethod
    def mpa(cls, code, text=""):
        return cls(Layer.LLP, 0, MpaError(code), text)

    @classmethod
    def ddp(cls, etype, ecode, text=""):
        return cls(Layer.DDP, DdpErrorType(etype), int(ecode), text)

    @classmethod
    def rdmap(cls, etype, ecode, text=""):
        return cls(Layer.RDMAP, RdmapErrorType(etype), int(ecode), text)

    def to_json(self):
        return {"layer": int(self.layer), "etype": int(self.etype),
                "ecode": int(self.ecode), "text": self.text}


class ProtocolError(Exception):
    """A malformed or invalid protocol unit; ``.info`` is the :class:`ErrorInfo`."""

    def __init__(self, info):
        super().__init__(info.text or repr(info))
        self.info = info
