"""Facts of TCP (RFC 9293, RFC 7323) that the model, the driver and the gateware share
(stdlib only): header sizes, flags, option kinds and lengths, the sequence-number space, and
the connection table's hash.
"""

import enum

__all__ = [
    "TCP_HEADER_LEN", "MAX_TCP_HEADER_LEN", "MAX_OPTIONS_LEN", "MIN_DATA_OFFSET",
    "TcpFlag", "TcpOption", "OPTION_LEN", "MAX_WINDOW_SCALE", "DEFAULT_MSS", "SEQ_BITS",
    "SEQ_MOD", "conn_hash",
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


def conn_hash(remote_ip, remote_port, local_port, bits):
    """The bucket of a connection in the engine's connection table of ``2**bits`` buckets:
    its 64-bit key (remote IPv4 address, remote port, local port, in that order from the
    top bit) cut into ``bits``-bit pieces from the bottom, XORed together. The gateware's
    is the same fold (:class:`rnic.hdl.tcp.conn_table.TcpConnTable`)."""
    if not isinstance(bits, int) or not 1 <= bits <= 16:
        raise ValueError(f"bits must be an int from 1 to 16, not {bits!r}")
    key = (remote_ip << 32) | (remote_port << 16) | local_port
    value = 0
    while key:
        value ^= key & ((1 << bits) - 1)
        key >>= bits
    return value
