"""Facts of TCP (RFC 9293, RFC 7323) that the model, the driver and the gateware share
(stdlib only): header sizes, flags, option kinds and lengths, and the sequence-number space.
"""

import enum

__all__ = [
    "TCP_HEADER_LEN", "MAX_TCP_HEADER_LEN", "MAX_OPTIONS_LEN", "MIN_DATA_OFFSET",
    "TcpFlag", "TcpOption", "OPTION_LEN", "MAX_WINDOW_SCALE", "DEFAULT_MSS", "SEQ_BITS",
    "SEQ_MOD",
]

#: Octets of a TCP header without options, and the most a data offset of 15 allows.
TCP_HEADER_LEN = 20
MAX_TCP_HEADER_LEN = 60
#: Octets of options a header can carry.
MAX_OPTIONS_LEN = MAX_TCP_HEADER_LEN - TCP_HEADER_LEN
#: The smallest valid data offset, in 32-bit words.
MIN_DATA_OFFSET = TCP_HEADER_LEN // 4


class TcpFlag(enum.IntFlag):
    """The control bits of the TCP header (octet 13; RFC 9293 section 3.1, RFC 3168)."""
    FIN = 0x01
    SYN = 0x02
    RST = 0x04
    PSH = 0x08
    ACK = 0x10
    URG = 0x20
    ECE = 0x40
    CWR = 0x80


class TcpOption(enum.IntEnum):
    """TCP option kinds this NIC knows (RFC 9293 section 3.2, RFC 7323, RFC 2018).
    Every other kind is skipped by its length."""
    EOL = 0
    NOP = 1
    MSS = 2
    WINDOW_SCALE = 3
    SACK_PERMITTED = 4
    SACK = 5
    TIMESTAMPS = 8


#: The length octet a known option must carry to be used (EOL and NOP have none; SACK
#: blocks vary). A known option with another length is skipped by its length, as Linux does.
OPTION_LEN = {
    TcpOption.MSS: 4,
    TcpOption.WINDOW_SCALE: 3,
    TcpOption.SACK_PERMITTED: 2,
    TcpOption.TIMESTAMPS: 10,
}

#: The largest shift a window scale option may ask for; a larger one counts as this
#: (RFC 7323 section 2.3).
MAX_WINDOW_SCALE = 14

#: The send MSS when the peer's SYN has no MSS option (RFC 9293 section 3.7.1).
DEFAULT_MSS = 536

#: Sequence numbers are 32 bits and wrap (RFC 9293 section 3.4).
SEQ_BITS = 32
SEQ_MOD = 1 << SEQ_BITS
