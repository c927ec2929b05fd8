"""The errors the receive path reports, as 16-bit error ids built from :mod:`rnic.host.spec.errors`.

An error id is the first 16 bits of a Terminate: Layer (4 bits), Error Type (4 bits),
Error Code (8 bits), see :func:`error_word`. The checks carry error ids; the report splits
them into the :class:`rnic.hdl.rdma_layouts.TermReport` fields.
"""

from rnic.host.spec.errors import (
    DdpErrorType, DdpTaggedCode, DdpUntaggedCode, Layer, MpaError, RdmapErrorType,
    RdmapOperationCode, RdmapProtectionCode,
)

__all__ = [
    "error_word",
    "E_DDP_CATASTROPHIC", "E_DDP_T_INVALID_STAG", "E_DDP_T_BOUNDS", "E_DDP_T_NOT_ASSOC",
    "E_DDP_T_TO_WRAP", "E_DDP_T_VERSION", "E_DDP_U_QN", "E_DDP_U_NO_BUFFER", "E_DDP_U_MSN_RANGE",
    "E_DDP_U_MO", "E_DDP_U_TOO_LONG", "E_DDP_U_VERSION", "E_RP_INVALID_STAG", "E_RP_BOUNDS",
    "E_RP_ACCESS", "E_RP_NOT_ASSOC", "E_RP_TO_WRAP", "E_RP_CANNOT_INV", "E_RO_VERSION",
    "E_RO_OPCODE", "E_RO_CATA_STREAM", "E_RO_CANNOT_INV", "E_RO_UNSPECIFIED", "E_LLP_CRC",
    "E_LLP_MARKER",
]


def error_word(layer, etype, ecode):
    """16-bit error id used internally: layer(4) etype(4) ecode(8), as in a Terminate's first word."""
    return (int(layer) << 12) | (int(etype) << 8) | int(ecode)


def _ddp_tagged(code):
    return error_word(Layer.DDP, DdpErrorType.TAGGED, code)


def _ddp_untagged(code):
    return error_word(Layer.DDP, DdpErrorType.UNTAGGED, code)


def _rdmap_protection(code):
    return error_word(Layer.RDMAP, RdmapErrorType.REMOTE_PROTECTION, code)


def _rdmap_operation(code):
    return error_word(Layer.RDMAP, RdmapErrorType.REMOTE_OPERATION, code)


#: DDP local catastrophic (also: a ULPDU shorter than its header or longer than a slot,
#: an MPA status beat)
E_DDP_CATASTROPHIC = error_word(Layer.DDP, DdpErrorType.CATASTROPHIC, 0)
E_DDP_T_INVALID_STAG = _ddp_tagged(DdpTaggedCode.INVALID_STAG)
E_DDP_T_BOUNDS = _ddp_tagged(DdpTaggedCode.BASE_BOUNDS)
E_DDP_T_NOT_ASSOC = _ddp_tagged(DdpTaggedCode.STAG_NOT_ASSOCIATED)
E_DDP_T_TO_WRAP = _ddp_tagged(DdpTaggedCode.TO_WRAP)
E_DDP_T_VERSION = _ddp_tagged(DdpTaggedCode.INVALID_VERSION)
E_DDP_U_QN = _ddp_untagged(DdpUntaggedCode.INVALID_QN)
E_DDP_U_NO_BUFFER = _ddp_untagged(DdpUntaggedCode.INVALID_MSN_NO_BUFFER)
E_DDP_U_MSN_RANGE = _ddp_untagged(DdpUntaggedCode.INVALID_MSN_RANGE)
E_DDP_U_MO = _ddp_untagged(DdpUntaggedCode.INVALID_MO)
E_DDP_U_TOO_LONG = _ddp_untagged(DdpUntaggedCode.MESSAGE_TOO_LONG)
E_DDP_U_VERSION = _ddp_untagged(DdpUntaggedCode.INVALID_VERSION)
E_RP_INVALID_STAG = _rdmap_protection(RdmapProtectionCode.INVALID_STAG)
E_RP_BOUNDS = _rdmap_protection(RdmapProtectionCode.BASE_BOUNDS)
E_RP_ACCESS = _rdmap_protection(RdmapProtectionCode.ACCESS_RIGHTS)
E_RP_NOT_ASSOC = _rdmap_protection(RdmapProtectionCode.STAG_NOT_ASSOCIATED)
E_RP_TO_WRAP = _rdmap_protection(RdmapProtectionCode.TO_WRAP)
E_RP_CANNOT_INV = _rdmap_protection(RdmapProtectionCode.STAG_CANNOT_INVALIDATE)
E_RO_VERSION = _rdmap_operation(RdmapOperationCode.INVALID_VERSION)
E_RO_OPCODE = _rdmap_operation(RdmapOperationCode.UNEXPECTED_OPCODE)
E_RO_CATA_STREAM = _rdmap_operation(RdmapOperationCode.CATASTROPHIC_STREAM)
E_RO_CANNOT_INV = _rdmap_operation(RdmapOperationCode.STAG_CANNOT_INVALIDATE)
E_RO_UNSPECIFIED = _rdmap_operation(RdmapOperationCode.UNSPECIFIED)
E_LLP_CRC = error_word(Layer.LLP, 0, MpaError.CRC)
E_LLP_MARKER = error_word(Layer.LLP, 0, MpaError.MARKER)
