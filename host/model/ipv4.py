"""IPv4 headers (RFC 791), the Internet checksum (RFC 1071) and its incremental update
(RFC 1624), and IPv4 address values.

What the NIC puts in the headers it sends (:func:`send_header`): version 4, IHL 5 (no
options), TOS 0, DF set and no fragment (the NIC never fragments; path MTU discovery finds
the rest), TTL :data:`~rnic.host.spec.net.DEFAULT_TTL`. Identification: one 16-bit counter
for every packet the NIC sends, starting at 0 and wrapping (RFC 6864 allows any value in an
atomic datagram, DF set and not a fragment; a counter costs a register and makes packets
tell apart in a capture); :class:`IdentCounter` is that counter.
"""

import ipaddress
import struct
from dataclasses import dataclass

from rnic.host.spec.net import DEFAULT_TTL, IPV4_DF, IPV4_HEADER_LEN, IPV4_VERSION, IpProto
from rnic.host.spec.limits import check_uint

__all__ = [
    "Ipv4Header", "parse", "build", "send_header", "IdentCounter", "ipv4_address",
    "ones_sum", "checksum", "checksum_ok", "update_checksum", "header_checksum_ok",
    "pseudo_header",
    "MAX_OPTIONS_LEN", "DF_FLAG", "MF_FLAG",
]

_HEADER = struct.Struct(">BBHHHBBH4s4s")
#: Octets of options an IHL of 15 allows.
MAX_OPTIONS_LEN = 40
#: Flag bits in the 16-bit flags/fragment offset word.
DF_FLAG = IPV4_DF
MF_FLAG = 0x2000
_RESERVED_FLAG = 0x8000


def ipv4_address(value, name="IPv4 address"):
    """``value`` (text, 4 octets, int or :class:`ipaddress.IPv4Address`) as an
    :class:`ipaddress.IPv4Address`."""
    if isinstance(value, ipaddress.IPv4Address):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
        if len(value) != 4:
            raise ValueError(f"{name} {value.hex()} is {len(value)} octets, not 4")
    elif isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"{name} must be text, 4 octets or an int, not {type(value).__name__}")
    try:
        return ipaddress.IPv4Address(value)
    except ValueError as exc:
        raise ValueError(f"{name} {value!r} is not an IPv4 address: {exc}") from None


def ones_sum(data, start=0):
    """The 16-bit one's complement sum (end-around carry) of ``data`` taken as big-endian
    16-bit words, an odd last octet padded with a zero octet, added to ``start``."""
    data = bytes(data)
    if len(data) % 2:
        data += b"\x00"
    total = start + sum(struct.unpack(f">{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def checksum(data):
    """The Internet checksum of ``data`` (RFC 1071): the one's complement of
    :func:`ones_sum`, with the checksum field itself taken as zero by the caller."""
    return ~ones_sum(data) & 0xFFFF


def checksum_ok(data):
    """True when ``data``, its checksum field included, sums to 0xFFFF (a receiver's check).
    Data that is all zero octets never passes: its sum is 0x0000."""
    return ones_sum(data) == 0xFFFF


def update_checksum(old_checksum, old, new):
    """The checksum after some 16-bit-aligned octets change from ``old`` to ``new``, by
    RFC 1624 equation 3: ``HC' = ~(~HC + ~m + m')``, summed with end-around carry.

    Parameters
    ----------
    old_checksum : int
        The checksum field before the change.
    old, new : bytes
        The changed octets before and after, the same even length, starting at an even
        offset of the covered data (for an ICMP echo reply: ``08 00`` to ``00 00``).

    It equals a full recomputation (:func:`checksum`) over the new data except in one case:
    when every covered octet of the new data is zero, this gives 0x0000 where the full one
    gives 0xFFFF (equal in one's complement, but a receiver's two's complement adder only
    accepts 0xFFFF there). An IPv4 header never is all zero (version 4); an ICMP echo reply
    with identifier, sequence and payload all zero is.
    """
    if isinstance(old_checksum, bool) or not isinstance(old_checksum, int):
        raise TypeError(f"old_checksum must be an int, not {type(old_checksum).__name__}")
    if not 0 <= old_checksum <= 0xFFFF:
        raise ValueError(f"old_checksum {old_checksum:#x} does not fit 16 bits")
    old, new = bytes(old), bytes(new)
    if len(old) != len(new) or len(old) % 2:
        raise ValueError(f"old and new must be of one even length, not {len(old)} and {len(new)}")
    total = ~old_checksum & 0xFFFF
    for (m,), (m_new,) in zip(struct.iter_unpack(">H", old), struct.iter_unpack(">H", new)):
        total = ones_sum(b"", total + (~m & 0xFFFF) + m_new)
    return ~total & 0xFFFF


@dataclass(frozen=True, kw_only=True)
class Ipv4Header:
    """An IPv4 header (20 octets, plus options).

    Parameters
    ----------
    proto : int
        Protocol, 8 bits (an :class:`~rnic.host.spec.net.IpProto` when the NIC knows it).
    src, dst : str, bytes, int or ipaddress.IPv4Address
        Addresses (kept as :class:`ipaddress.IPv4Address`).
    ttl : int
        Time to live (default :data:`DEFAULT_TTL`).
    identification : int
        16 bits.
    df, mf : bool
        Don't Fragment (default set) and More Fragments.
    fragment_offset : int
        13 bits, in units of 8 octets.
    tos : int
        The DSCP/ECN octet.
    options : bytes
        Options, a multiple of 4 octets, at most 40 (the IHL follows from their length).
    total_length, checksum : int or None
        As on the wire; ``None`` lets :func:`build` compute them (the header length plus the
        payload, and the header checksum).
    reserved_flag : bool
        The reserved flag bit (0 on send).
    """
    proto: int
    src: ipaddress.IPv4Address
    dst: ipaddress.IPv4Address
    ttl: int = DEFAULT_TTL
    identification: int = 0
    df: bool = True
    mf: bool = False
    fragment_offset: int = 0
    tos: int = 0
    options: bytes = b""
    total_length: int | None = None
    checksum: int | None = None
    reserved_flag: bool = False

    def __post_init__(self):
        check_uint("proto", self.proto, 8)
        if self.proto in IpProto._value2member_map_:
            object.__setattr__(self, "proto", IpProto(self.proto))
        object.__setattr__(self, "src", ipv4_address(self.src, "src"))
        object.__setattr__(self, "dst", ipv4_address(self.dst, "dst"))
        check_uint("ttl", self.ttl, 8)
        check_uint("identification", self.identification, 16)
        check_uint("fragment_offset", self.fragment_offset, 13)
        check_uint("tos", self.tos, 8)
        for flag in ("df", "mf", "reserved_flag"):
            object.__setattr__(self, flag, bool(getattr(self, flag)))
        object.__setattr__(self, "options", bytes(self.options))
        if len(self.options) % 4 or len(self.options) > MAX_OPTIONS_LEN:
            raise ValueError(f"options of {len(self.options)} octets: a multiple of 4 up to "
                             f"{MAX_OPTIONS_LEN} is needed")
        if self.total_length is not None:
            check_uint("total_length", self.total_length, 16)
            if self.total_length < self.length:
                raise ValueError(f"total_length {self.total_length} is shorter than the "
                                 f"{self.length}-octet header")
        if self.checksum is not None:
            check_uint("checksum", self.checksum, 16)

    @property
    def ihl(self):
        """Header length in 32-bit words (5 without options)."""
        return (IPV4_HEADER_LEN + len(self.options)) // 4

    @property
    def length(self):
        """Header length in octets."""
        return IPV4_HEADER_LEN + len(self.options)

    @property
    def is_fragment(self):
        """True for a fragment of a larger datagram (MF set or a fragment offset)."""
        return self.mf or self.fragment_offset != 0

    def to_bytes(self, payload_length=0):
        """The header octets; a ``None`` total length becomes the header length plus
        ``payload_length``, a ``None`` checksum the header checksum."""
        total_length = self.total_length
        if total_length is None:
            total_length = self.length + payload_length
            check_uint("total length", total_length, 16)
        flags = ((_RESERVED_FLAG if self.reserved_flag else 0) | (DF_FLAG if self.df else 0)
                 | (MF_FLAG if self.mf else 0) | self.fragment_offset)
        fields = [(IPV4_VERSION << 4) | self.ihl, self.tos, total_length, self.identification,
                  flags, self.ttl, self.proto, 0, self.src.packed, self.dst.packed]
        raw = _HEADER.pack(*fields) + self.options
        value = checksum(raw) if self.checksum is None else self.checksum
        return raw[:10] + value.to_bytes(2, "big") + raw[12:]


def header_checksum_ok(packet):
    """True when the header checksum of ``packet`` (IHL taken from its first octet) matches."""
    packet = bytes(packet)
    ihl_octets = (packet[0] & 0xF) * 4 if packet else 0
    if ihl_octets < IPV4_HEADER_LEN or len(packet) < ihl_octets:
        return False
    return checksum_ok(packet[:ihl_octets])


def pseudo_header(src, dst, proto, length):
    """The 12 octets the TCP and UDP checksums cover ahead of the segment (RFC 9293
    section 3.1, RFC 768): source and destination address, a zero octet, the protocol and
    the segment's ``length`` in octets (the IPv4 total length minus the header length).
    The checksum of a segment is :func:`checksum` over these octets and the segment;
    a received one verifies when :func:`checksum_ok` holds for them."""
    check_uint("proto", proto, 8)
    check_uint("length", length, 16)
    return (ipv4_address(src, "src").packed + ipv4_address(dst, "dst").packed
            + struct.pack(">BBH", 0, proto, length))


def parse(packet):
    """Split an IPv4 packet into its header and payload.

    The payload ends at the total length: octets after it (Ethernet padding) are ignored, as
    Linux does. The checksum is kept in the header, not checked (:func:`header_checksum_ok`).

    Raises
    ------
    ValueError
        Shorter than 20 octets, a version other than 4, an IHL below 5 or beyond the
        packet, a total length below the header length or beyond the packet.
    """
    packet = bytes(packet)
    if len(packet) < IPV4_HEADER_LEN:
        raise ValueError(f"{len(packet)} octets are shorter than the {IPV4_HEADER_LEN}-octet "
                         "IPv4 header")
    (ver_ihl, tos, total_length, identification, flags, ttl, proto, value,
     src, dst) = _HEADER.unpack_from(packet)
    version, ihl_octets = ver_ihl >> 4, (ver_ihl & 0xF) * 4
    if version != IPV4_VERSION:
        raise ValueError(f"IP version {version}, not {IPV4_VERSION}")
    if ihl_octets < IPV4_HEADER_LEN:
        raise ValueError(f"IHL {ihl_octets // 4} is below 5")
    if ihl_octets > len(packet):
        raise ValueError(f"IHL {ihl_octets // 4} ({ihl_octets} octets) is beyond the "
                         f"{len(packet)}-octet packet")
    if not ihl_octets <= total_length <= len(packet):
        raise ValueError(f"total length {total_length} is not between the {ihl_octets}-octet "
                         f"header and the {len(packet)} octets received")
    header = Ipv4Header(proto=proto, src=src, dst=dst, ttl=ttl, identification=identification,
                        df=flags & DF_FLAG, mf=flags & MF_FLAG, fragment_offset=flags & 0x1FFF,
                        reserved_flag=flags & _RESERVED_FLAG, tos=tos,
                        options=packet[IPV4_HEADER_LEN:ihl_octets],
                        total_length=total_length, checksum=value)
    return header, packet[ihl_octets:total_length]


def build(header, payload=b""):
    """The packet: ``header`` (its ``None`` total length and checksum computed) and
    ``payload``."""
    if not isinstance(header, Ipv4Header):
        raise TypeError(f"header must be an Ipv4Header, not {type(header).__name__}")
    payload = bytes(payload)
    return header.to_bytes(len(payload)) + payload


class IdentCounter:
    """The NIC's identification counter: 16 bits, one step per packet sent, wrapping."""

    def __init__(self, *, start=0):
        check_uint("start", start, 16)
        self.value = start

    def take(self):
        """The identification for the next packet (and step the counter)."""
        value = self.value
        self.value = (value + 1) & 0xFFFF
        return value


def send_header(*, src, dst, proto, identification):
    """The header the NIC sends: IHL 5, TOS 0, DF, TTL :data:`DEFAULT_TTL`, with
    ``identification``; length and checksum left for :func:`build`."""
    return Ipv4Header(proto=proto, src=src, dst=dst, identification=identification)
