"""Facts of Ethernet, ARP, IPv4, ICMP and TCP that the model, the driver and the gateware share
(stdlib only): frame sizes, EtherTypes, header lengths, opcodes and types, the default
addresses of the simulated NIC, and why the receive path drops a frame.

Sizes count a frame from its destination address; the FCS is counted separately (a 60-octet
frame is 64 octets on the wire with its FCS, 72 with preamble and SFD).
"""

import enum

__all__ = [
    "PREAMBLE", "SFD", "PREAMBLE_LEN", "FCS_LEN", "IFG_LEN", "MIN_FRAME_LEN", "MAX_FRAME_LEN",
    "ETH_HEADER_LEN", "ETH_ADDR_LEN", "BROADCAST_MAC", "EtherType", "VLAN_TAG_LEN",
    "ARP_LEN", "ArpOp", "IPV4_HEADER_LEN", "IPV4_VERSION", "IPV4_DF", "IpProto", "DEFAULT_TTL",
    "ICMP_HEADER_LEN", "MAX_ECHO_DATA", "IcmpType", "MTU",
    "DEFAULT_NIC_MAC", "DEFAULT_NIC_IP", "DEFAULT_PREFIX", "DEFAULT_PEER_IP",
    "RxDrop", "TxDrop",
]

#: Preamble octet (7 of them) and start frame delimiter, as sent on GMII (802.3 clause 35).
PREAMBLE = 0x55
SFD = 0xD5
PREAMBLE_LEN = 7
#: Frame check sequence: CRC-32 (the Ethernet polynomial), least significant octet first.
FCS_LEN = 4
#: Minimum inter-frame gap in octet times.
IFG_LEN = 12
#: Smallest frame without FCS (a shorter one is padded with zeros on send, a runt on receive)
#: and the largest untagged frame without FCS at the standard MTU.
MIN_FRAME_LEN = 60
MAX_FRAME_LEN = 1514

#: Octets of an Ethernet II header (destination, source, EtherType) and of an address.
ETH_HEADER_LEN = 14
ETH_ADDR_LEN = 6
BROADCAST_MAC = b"\xff" * 6
#: Octets an 802.1Q tag adds after the source address.
VLAN_TAG_LEN = 4


class EtherType(enum.IntEnum):
    """EtherTypes this NIC knows (the ones it handles and the VLAN tag it drops)."""
    IPV4 = 0x0800
    ARP = 0x0806
    VLAN = 0x8100


#: Octets of an ARP packet for IPv4 over Ethernet (RFC 826), after the Ethernet header.
ARP_LEN = 28


class ArpOp(enum.IntEnum):
    """ARP operation codes (RFC 826)."""
    REQUEST = 1
    REPLY = 2


#: Octets of an IPv4 header without options (IHL 5; RFC 791) and the version field.
IPV4_HEADER_LEN = 20
IPV4_VERSION = 4
#: TTL of the packets this NIC sends.
DEFAULT_TTL = 64
#: The Don't Fragment flag in the IPv4 flags/offset word (set on every packet sent).
IPV4_DF = 0x4000
#: The largest IPv4 packet on an untagged Ethernet frame.
MTU = MAX_FRAME_LEN - ETH_HEADER_LEN


class IpProto(enum.IntEnum):
    """IPv4 protocol numbers this NIC knows."""
    ICMP = 1
    TCP = 6
    UDP = 17


#: Octets of an ICMP echo header: type, code, checksum, identifier, sequence (RFC 792).
ICMP_HEADER_LEN = 8
#: The most data an echo request carries in one unfragmented packet (``ping -s 1472``).
MAX_ECHO_DATA = MTU - IPV4_HEADER_LEN - ICMP_HEADER_LEN


class IcmpType(enum.IntEnum):
    """ICMP message types this NIC handles (RFC 792)."""
    ECHO_REPLY = 0
    ECHO_REQUEST = 8


#: Defaults of the simulated NIC on the virtual cable: a locally administered unicast MAC,
#: the NIC's link-local address and the address of the VM at the other end.
DEFAULT_NIC_MAC = bytes.fromhex("02000a070002")
DEFAULT_NIC_IP = "169.254.7.2"
DEFAULT_PREFIX = 24
DEFAULT_PEER_IP = "169.254.7.1"


class RxDrop(enum.IntEnum):
    """Why the receive path dropped a frame; each reason has its own counter.

    MAC (a frame that ends with one of these never reaches the layers above): ``FCS`` the
    frame check sequence does not match (or the PHY flagged an error); ``RUNT`` shorter than
    :data:`MIN_FRAME_LEN`; ``GIANT`` longer than the configured maximum; ``OTHER_MAC``
    unicast to another address; ``OVERFLOW`` no room in the receive buffer.
    Network (decided on the frame's headers): ``ETHERTYPE`` neither IPv4 nor ARP (an 802.1Q
    tag included); ``ARP_OTHER`` an ARP packet that is malformed or for another address;
    ``IP_HEADER`` version not 4, options (IHL above 5), a total length that does not fit
    the frame; ``IP_CHECKSUM`` the header checksum does not match; ``IP_FRAGMENT`` MF set or
    a fragment offset; ``IP_OTHER`` a destination that is not the NIC's address;
    ``IP_PROTOCOL`` a protocol with no handler; ``ICMP_OTHER`` an ICMP message that is not
    an echo request, or whose checksum does not match; ``TCP_HEADER`` a TCP segment (the
    IPv4 payload, total length - 20 octets) shorter than a TCP header (:data:`rnic.host.spec.tcp.TCP_HEADER_LEN`), or whose
    data offset is below 5 or gives a header (data offset * 4 octets) longer than the
    segment; ``TCP_CHECKSUM`` a TCP segment whose checksum, over the RFC 9293 pseudo-header
    (source and destination addresses, a zero octet, protocol 6, the segment's length) and
    the segment, does not verify.

    A frame with several faults counts once, for the first reason in this order: the MAC's
    RUNT, GIANT, FCS, OTHER_MAC (OVERFLOW only for a frame that passed them), then the
    network reasons in the order of their values (ETHERTYPE first, TCP_CHECKSUM last; of
    IP_PROTOCOL, ICMP_OTHER and the TCP reasons a packet can only meet those of its
    protocol).
    """
    NONE = 0
    FCS = 1
    RUNT = 2
    GIANT = 3
    OTHER_MAC = 4
    OVERFLOW = 5
    ETHERTYPE = 6
    ARP_OTHER = 7
    IP_HEADER = 8
    IP_CHECKSUM = 9
    IP_FRAGMENT = 10
    IP_OTHER = 11
    IP_PROTOCOL = 12
    ICMP_OTHER = 13
    TCP_HEADER = 14
    TCP_CHECKSUM = 15


class TxDrop(enum.IntEnum):
    """Why the send path dropped a packet that the layer above handed it; each reason has its
    own counter.

    ``NO_ROUTE`` the destination is outside the NIC's prefix and no gateway is configured;
    ``ARP_MISS`` the next hop is not in the ARP cache: the packet is dropped and an ARP
    request for the next hop is sent in its place (the layer above, TCP, sends it again
    when it retransmits; the send path holds no packet).
    """
    NONE = 0
    NO_ROUTE = 1
    ARP_MISS = 2
