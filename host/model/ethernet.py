"""Ethernet II frames (IEEE 802.3 clause 3 with an EtherType): header, padding, FCS, and the
MAC address helpers.

A frame here runs from its destination address to the end of its payload (and padding); the
FCS is separate (:func:`append_fcs`, :func:`check_fcs`), as in :mod:`rnic.host.spec.net`.
The FCS is the CRC-32 of the frame (``zlib.crc32``: reflected polynomial 0x04C11DB7,
initial value and final XOR 0xFFFFFFFF), sent least significant octet first: the CRC of a
frame whose FCS field reads ``1C DF 44 21`` is 0x2144DF1C.
"""

import re
import struct
import zlib
from dataclasses import dataclass

from rnic.host.spec.net import (BROADCAST_MAC, ETH_ADDR_LEN, ETH_HEADER_LEN, FCS_LEN,
                                MIN_FRAME_LEN, EtherType)

__all__ = [
    "EthernetHeader", "parse", "build", "pad", "fcs", "fcs_field", "append_fcs", "check_fcs",
    "strip_fcs", "FCS_RESIDUE", "mac_address", "parse_mac", "format_mac", "is_multicast",
    "is_broadcast",
]

_HEADER = struct.Struct(">6s6sH")
_MAC_TEXT = re.compile(r"^[0-9a-fA-F]{2}([:-])(?:[0-9a-fA-F]{2}\1){4}[0-9a-fA-F]{2}$")

#: CRC-32 of a frame followed by its own good FCS (the "magic" residue a receiver that runs
#: the CRC over the FCS too ends with; its bit-reversed, uninverted form is 0xC704DD7B).
FCS_RESIDUE = 0x2144DF1C


def parse_mac(text):
    """The 6 octets of a MAC address written ``02:00:0a:07:00:02`` (or with ``-``)."""
    if not isinstance(text, str):
        raise TypeError(f"a MAC address text must be a str, not {type(text).__name__}")
    if not _MAC_TEXT.match(text):
        raise ValueError(f"{text!r} is not a MAC address of the form 02:00:0a:07:00:02")
    return bytes(int(part, 16) for part in re.split("[:-]", text))


def format_mac(mac):
    """``mac`` (6 octets) as lower-case text ``02:00:0a:07:00:02``."""
    return ":".join(f"{octet:02x}" for octet in mac_address(mac))


def mac_address(value, name="MAC address"):
    """``value`` (6 octets, or text for :func:`parse_mac`) as 6 octets of ``bytes``."""
    if isinstance(value, str):
        return parse_mac(value)
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"{name} must be 6 octets or text, not {type(value).__name__}")
    value = bytes(value)
    if len(value) != ETH_ADDR_LEN:
        raise ValueError(f"{name} {value.hex()} is {len(value)} octets, not {ETH_ADDR_LEN}")
    return value


def is_multicast(mac):
    """True for a group address (the I/G bit, bit 0 of the first octet), broadcast included."""
    return bool(mac_address(mac)[0] & 1)


def is_broadcast(mac):
    """True for ff:ff:ff:ff:ff:ff."""
    return mac_address(mac) == BROADCAST_MAC


@dataclass(frozen=True, kw_only=True)
class EthernetHeader:
    """The 14-octet Ethernet II header.

    Parameters
    ----------
    dst, src : bytes or str
        Destination and source MAC addresses (kept as 6 octets).
    ethertype : int
        16 bits; an :class:`~rnic.host.spec.net.EtherType` member when it is one the NIC
        knows. An 802.1Q tag shows here as :attr:`EtherType.VLAN`, its TCI and the inner
        EtherType being the first 4 payload octets.
    """
    dst: bytes
    src: bytes
    ethertype: int

    def __post_init__(self):
        object.__setattr__(self, "dst", mac_address(self.dst, "dst"))
        object.__setattr__(self, "src", mac_address(self.src, "src"))
        if isinstance(self.ethertype, bool) or not isinstance(self.ethertype, int):
            raise TypeError(f"ethertype must be an int, not {type(self.ethertype).__name__}")
        if not 0 <= self.ethertype <= 0xFFFF:
            raise ValueError(f"ethertype {self.ethertype:#x} does not fit 16 bits")
        if self.ethertype in EtherType._value2member_map_:
            object.__setattr__(self, "ethertype", EtherType(self.ethertype))

    length = ETH_HEADER_LEN

    def to_bytes(self):
        """The 14 header octets."""
        return _HEADER.pack(self.dst, self.src, self.ethertype)


def parse(frame):
    """Split a frame (without FCS) into its header and payload.

    The payload is everything after the header, padding included: the layer above knows its
    own length (an IPv4 total length, the 28 octets of ARP).

    Raises
    ------
    ValueError
        The frame is shorter than the 14-octet header.
    """
    frame = bytes(frame)
    if len(frame) < ETH_HEADER_LEN:
        raise ValueError(f"a frame of {len(frame)} octets is shorter than the "
                         f"{ETH_HEADER_LEN}-octet Ethernet header")
    dst, src, ethertype = _HEADER.unpack_from(frame)
    return EthernetHeader(dst=dst, src=src, ethertype=ethertype), frame[ETH_HEADER_LEN:]


def pad(frame):
    """``frame`` followed by zero octets up to :data:`MIN_FRAME_LEN` (60) octets."""
    frame = bytes(frame)
    return frame + bytes(max(0, MIN_FRAME_LEN - len(frame)))


def build(header, payload=b"", *, pad_short=True):
    """The frame (without FCS): ``header`` octets, ``payload``, and zero padding to 60
    octets unless ``pad_short`` is false."""
    if not isinstance(header, EthernetHeader):
        raise TypeError(f"header must be an EthernetHeader, not {type(header).__name__}")
    frame = header.to_bytes() + bytes(payload)
    return pad(frame) if pad_short else frame


def fcs(frame):
    """The CRC-32 value of ``frame`` (the octets the FCS covers: destination to padding)."""
    return zlib.crc32(bytes(frame))


def fcs_field(frame):
    """The 4 FCS octets of ``frame`` in wire order (least significant octet first)."""
    return fcs(frame).to_bytes(FCS_LEN, "little")


def append_fcs(frame):
    """``frame`` followed by its FCS, as the MAC sends it after the SFD."""
    frame = bytes(frame)
    return frame + fcs_field(frame)


def check_fcs(frame_with_fcs):
    """True when the last 4 octets are the FCS of the octets before them."""
    frame_with_fcs = bytes(frame_with_fcs)
    if len(frame_with_fcs) < FCS_LEN:
        return False
    return zlib.crc32(frame_with_fcs) == FCS_RESIDUE


def strip_fcs(frame_with_fcs):
    """The frame without its FCS; ``ValueError`` when the FCS does not match."""
    frame_with_fcs = bytes(frame_with_fcs)
    if not check_fcs(frame_with_fcs):
        raise ValueError("the FCS of the frame does not match")
    return frame_with_fcs[:-FCS_LEN]
