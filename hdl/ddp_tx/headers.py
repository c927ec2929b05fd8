"""DDP/RDMAP header octets (RFC 5041 section 4, RFC 5040 section 4) as lists of 8-bit values,
octet 0 first: the building blocks of :mod:`.segment_start` and :mod:`.terminate`."""

from amaranth.hdl import Const

from rnic.host.spec.protocol import (
    DDP_VERSION, QN_READ_REQUEST, QN_SEND, QN_TERMINATE, RDMAP_VERSION, READ_REQUEST_LEN, T_FLAG,
    TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN, RdmapOpcode,
)

from .layouts import HEADER_MAX

__all__ = ["OP_READ_RESPONSE", "OP_TERMINATE", "QN_SEND", "QN_READ_REQUEST", "QN_TERMINATE",
           "TAGGED_HEADER_LEN", "UNTAGGED_HEADER_LEN", "READ_REQUEST_SEGMENT_LEN",
           "octets", "tagged_header", "untagged_header", "padded"]

#: RDMAP opcodes that are no work request opcode (the work request ones are
#: :class:`rnic.host.spec.regmap.SqOpcode`).
OP_READ_RESPONSE = RdmapOpcode.RDMA_READ_RESPONSE.value
OP_TERMINATE = RdmapOpcode.TERMINATE.value
#: Octets of a Read Request segment: untagged header and the Read Request header.
READ_REQUEST_SEGMENT_LEN = UNTAGGED_HEADER_LEN + READ_REQUEST_LEN

_DDP_TAGGED = T_FLAG             # DDP control: T (L is bit 6: ``last << 6``)
_DDP_VERSION = DDP_VERSION       # DDP control: DV in the low 2 bits
_RDMAP_VERSION = RDMAP_VERSION << 6  # RDMAP control: RV in the high 2 bits, the opcode low


def octets(value, nbytes):
    """Octets of ``value`` in network order (first = most significant), as 8-bit slices."""
    return [value[8 * (nbytes - 1 - k):8 * (nbytes - k)] for k in range(nbytes)]


def untagged_header(last, opcode, inval, qn, msn, mo):
    """The :data:`UNTAGGED_HEADER_LEN` octets of an untagged DDP header with its RDMAP
    control and Invalidate STag."""
    return ([Const(_DDP_VERSION, 8) | (last << 6), Const(_RDMAP_VERSION, 8) | opcode]
            + octets(inval, 4) + octets(Const(qn, 32) if isinstance(qn, int) else qn, 4)
            + octets(msn, 4) + octets(mo, 4))


def tagged_header(last, opcode, stag, to):
    """The :data:`TAGGED_HEADER_LEN` octets of a tagged DDP header with its RDMAP control."""
    return ([Const(_DDP_TAGGED | _DDP_VERSION, 8) | (last << 6), Const(_RDMAP_VERSION, 8) | opcode]
            + octets(stag, 4) + octets(to, 8))


def padded(header):
    """``header`` padded with zero octets to the header register's :data:`HEADER_MAX`."""
    return header + [Const(0, 8)] * (HEADER_MAX - len(header))
