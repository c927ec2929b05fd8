"""Protocol constants of DDP (RFC 5041) and RDMAP (RFC 5040) that the model, the driver and
the gateware share (stdlib only): header sizes, control bits, versions, queue numbers and
the RDMAP opcodes.
"""

import enum

__all__ = [
    "DDP_VERSION", "RDMAP_VERSION", "T_FLAG", "L_FLAG",
    "TAGGED_HEADER_LEN", "UNTAGGED_HEADER_LEN", "READ_REQUEST_LEN", "TERMINATE_MAX_LEN",
    "QN_SEND", "QN_READ_REQUEST", "QN_TERMINATE", "RdmapOpcode",
]

#: DDP version (the DV field of the control octet) and RDMAP version (RV).
DDP_VERSION = 1
RDMAP_VERSION = 1
#: DDP control octet: tagged (T) and last (L) flags.
T_FLAG = 0x80
L_FLAG = 0x40

#: Octets of a tagged DDP header: control, RsvdULP (the RDMAP control), STag, TO.
TAGGED_HEADER_LEN = 14
#: Octets of an untagged DDP header: control, RsvdULP (RDMAP control, Invalidate STag),
#: QN, MSN, MO.
UNTAGGED_HEADER_LEN = 18
#: Octets of an RDMA Read Request message: sink STag and TO, size, source STag and TO.
READ_REQUEST_LEN = 28
#: Octets of the longest Terminate message: the error word, the DDP segment length, the
#: terminated untagged DDP header and the Read Request header (RFC 5040 section 4.8).
TERMINATE_MAX_LEN = 4 + 2 + UNTAGGED_HEADER_LEN + READ_REQUEST_LEN

#: Untagged queue numbers (RFC 5040 section 5.1).
QN_SEND, QN_READ_REQUEST, QN_TERMINATE = 0, 1, 2


class RdmapOpcode(enum.IntEnum):
    """RDMAP opcodes (RFC 5040 section 4.2), the low 4 bits of the RDMAP control octet."""
    RDMA_WRITE = 0
    RDMA_READ_REQUEST = 1
    RDMA_READ_RESPONSE = 2
    SEND = 3
    SEND_INVALIDATE = 4
    SEND_SE = 5
    SEND_SE_INVALIDATE = 6
    TERMINATE = 7
