"""The NIC's network layers above the MAC (ARP, IPv4, ICMP echo, the TCP checksum and header
length), cycle-free: the golden model of the gateware ARP/IPv4/ICMP blocks and receive
classifier, and the network side of the simulated NIC.

:class:`NicNetModel` takes one received frame at a time (as the MAC hands it up: FCS checked
and removed) and says what the NIC sends in answer, what it hands to the TCP layer, and why
it dropped the frame if it did; :meth:`NicNetModel.send_ipv4` is the send side for the layer
above.
"""

import ipaddress
from dataclasses import dataclass

from rnic.host.model import arp, ethernet, icmp, ipv4
from rnic.host.spec.net import (DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX,
                                ETH_HEADER_LEN, IPV4_HEADER_LEN, MTU, EtherType,
                                IcmpType, IpProto, RxDrop, TxDrop)
from rnic.host.spec.tcp import TCP_HEADER_LEN

__all__ = ["NicNetModel", "RxResult", "TxResult", "TcpDelivery", "DEFAULT_ARP_CACHE_SIZE"]

#: Slots of the ARP cache unless configured otherwise.
DEFAULT_ARP_CACHE_SIZE = 8


@dataclass(frozen=True)
class TcpDelivery:
    """An IPv4 TCP packet for the NIC, handed to the TCP layer: the addresses (for the
    connection lookup) and the TCP segment octets (the IP payload up to the total length).
    The segment's checksum verifies and its header fits it: at least 20 octets, a data offset of at least 5 and at most the segment's length
    in words."""
    src: ipaddress.IPv4Address
    dst: ipaddress.IPv4Address
    segment: bytes


@dataclass(frozen=True)
class RxResult:
    """What the NIC did with one received frame.

    ``drop`` is :attr:`RxDrop.NONE` when the frame was handled, else the one reason counted;
    ``replies`` the frames sent in answer (an ARP reply or an ICMP echo reply: padded to 60
    octets, no FCS); ``delivered`` the TCP packet handed up, or ``None``.
    """
    drop: RxDrop = RxDrop.NONE
    replies: tuple = ()
    delivered: TcpDelivery | None = None


@dataclass(frozen=True)
class TxResult:
    """What the send path did with one packet: ``frames`` to send (the IPv4 frame, or the ARP
    request sent in its place on an ``ARP_MISS``; padded, no FCS) and ``drop``
    (:attr:`TxDrop.NONE` when the packet was sent)."""
    frames: tuple = ()
    drop: TxDrop = TxDrop.NONE


class NicNetModel:
    """ARP, IPv4, ICMP echo and the TCP receive checks of the NIC, one frame at a time.

    Parameters
    ----------
    mac : bytes or str
        The NIC's MAC address.
    ip : IPv4 address
        The NIC's IPv4 address.
    prefix : int
        Prefix length of the NIC's network (0..32): destinations inside it are on the cable.
    arp_cache_size : int
        Slots of the ARP cache.
    static_arp : mapping of IPv4 address to MAC, optional
        Static ARP entries.
    gateway : IPv4 address, optional
        Next hop for destinations outside the prefix (inside it); without one they are
        ``NO_ROUTE``.

    Receive (:meth:`receive`): each frame is handled or dropped for exactly one reason,
    counted in :attr:`counters`; the checks run in this order, the first that fails names
    the reason:

    1. ``RUNT``: shorter than the 14-octet Ethernet header (the MAC never passes such a
       frame up; the simulated cable may). ``OTHER_MAC``: a unicast destination that is not
       the NIC's (the MAC's own filter; broadcast and multicast pass).
    2. ``ETHERTYPE``: neither IPv4 nor ARP; an 802.1Q-tagged frame is one of these.
    3. ARP: ``ARP_OTHER`` when the packet is short or not IPv4 over Ethernet, or its target
       IP is not the NIC's; else a request is answered and learned, a reply learned
       (:class:`~rnic.host.model.arp.ArpResponder`).
    4. IPv4, in order: ``IP_HEADER`` (shorter than 20 octets, version not 4, IHL not 5
       (options, or below 5), total length below 20 or beyond the frame) before
       ``IP_CHECKSUM`` (header checksum) before ``IP_FRAGMENT`` (MF or an offset) before
       ``IP_OTHER`` (destination not the NIC's address: broadcast and multicast included)
       before ``IP_PROTOCOL`` (neither ICMP nor TCP). Octets after the total length
       (Ethernet padding) are ignored, as Linux does.
    5. ICMP: ``ICMP_OTHER`` when the message is shorter than 8 octets, its checksum does not
       match, or it is not an echo request (any code); else an echo reply goes back to the
       request's source MAC and IP with the request's identifier, sequence and data.
    6. TCP: ``TCP_HEADER`` when the segment (total length - 20 octets) is shorter than 20
       octets, or its data offset (the high nibble of octet 12) is below 5 or its header
       (data offset * 4 octets) longer than the segment, before ``TCP_CHECKSUM`` when the
       checksum over the pseudo-header (:func:`~rnic.host.model.ipv4.pseudo_header`: the
       addresses, protocol 6, the segment's length) and the segment (an odd last octet
       padded with a zero) does not sum to 0xFFFF; else handed up as a
       :class:`TcpDelivery`.

    Send (:meth:`send_ipv4`, also used for echo replies' IP headers): IHL 5, DF, TTL 64,
    identification from one counter of every packet sent (:class:`ipv4.IdentCounter`).
    A next hop not in the ARP cache: the packet is dropped and counted (``ARP_MISS`` in
    :attr:`tx_counters`) and an ARP request for the next hop is sent instead; the send path
    holds no packet (the gateware has no buffer for it: the TCP layer keeps every unacked
    segment and sends it again on retransmission, by which time the reply is in the cache).
    Every miss sends one request: the layer above paces them.
    """

    def __init__(self, *, mac=DEFAULT_NIC_MAC, ip=DEFAULT_NIC_IP, prefix=DEFAULT_PREFIX,
                 arp_cache_size=DEFAULT_ARP_CACHE_SIZE, static_arp=None, gateway=None):
        self.mac = ethernet.mac_address(mac, "mac")
        if ethernet.is_multicast(self.mac):
            raise ValueError(f"mac {ethernet.format_mac(self.mac)} is a group address")
        self.ip = ipv4.ipv4_address(ip, "ip")
        if isinstance(prefix, bool) or not isinstance(prefix, int):
            raise TypeError(f"prefix must be an int, not {type(prefix).__name__}")
        if not 0 <= prefix <= 32:
            raise ValueError(f"prefix {prefix} is not between 0 and 32")
        self.prefix = prefix
        self.network = ipaddress.IPv4Network((self.ip, prefix), strict=False)
        self.gateway = None if gateway is None else ipv4.ipv4_address(gateway, "gateway")
        if self.gateway is not None and self.gateway not in self.network:
            raise ValueError(f"gateway {self.gateway} is outside the network {self.network}")
        self.arp_cache = arp.ArpCache(size=arp_cache_size, static=static_arp)
        self._arp = arp.ArpResponder(mac=self.mac, ip=self.ip, cache=self.arp_cache)
        self.ident = ipv4.IdentCounter()
        #: Dropped received frames per reason (every reason but NONE, from 0).
        self.counters = {reason: 0 for reason in RxDrop if reason != RxDrop.NONE}
        #: Dropped packets of the send path per reason.
        self.tx_counters = {reason: 0 for reason in TxDrop if reason != TxDrop.NONE}

    # -- receive ---------------------------------------------------------------------------

    def receive(self, frame):
        """Handle one received frame (no FCS); return an :class:`RxResult`."""
        result = self._receive(bytes(frame))
        if result.drop != RxDrop.NONE:
            self.counters[result.drop] += 1
        return result

    def _receive(self, frame):
        if len(frame) < ETH_HEADER_LEN:
            return RxResult(RxDrop.RUNT)
        header, payload = ethernet.parse(frame)
        if not ethernet.is_multicast(header.dst) and header.dst != self.mac:
            return RxResult(RxDrop.OTHER_MAC)
        if header.ethertype == EtherType.ARP:
            return self._receive_arp(payload)
        if header.ethertype == EtherType.IPV4:
            return self._receive_ipv4(header, payload)
        return RxResult(RxDrop.ETHERTYPE)

    def _receive_arp(self, payload):
        outcome = self._arp.receive(payload)
        if not outcome.accepted:
            return RxResult(RxDrop.ARP_OTHER)
        replies = () if outcome.reply is None else (arp.build_frame(outcome.reply),)
        return RxResult(replies=replies)

    def _receive_ipv4(self, eth_header, payload):
        try:
            header, body = ipv4.parse(payload)
        except ValueError:
            return RxResult(RxDrop.IP_HEADER)
        if header.length != IPV4_HEADER_LEN:
            return RxResult(RxDrop.IP_HEADER)
        if not ipv4.header_checksum_ok(payload):
            return RxResult(RxDrop.IP_CHECKSUM)
        if header.is_fragment:
            return RxResult(RxDrop.IP_FRAGMENT)
        if header.dst != self.ip:
            return RxResult(RxDrop.IP_OTHER)
        if header.proto == IpProto.TCP:
            return self._receive_tcp(header, body)
        if header.proto == IpProto.ICMP:
            return self._receive_icmp(eth_header, header, body)
        return RxResult(RxDrop.IP_PROTOCOL)

    def _receive_icmp(self, eth_header, ip_header, message):
        if not icmp.message_checksum_ok(message):
            return RxResult(RxDrop.ICMP_OTHER)
        if icmp.parse(message)[0].type != IcmpType.ECHO_REQUEST:
            return RxResult(RxDrop.ICMP_OTHER)
        reply = self._ipv4_frame(eth_header.src, ip_header.src, IpProto.ICMP,
                                 icmp.echo_reply(message))
        return RxResult(replies=(reply,))

    @staticmethod
    def _receive_tcp(ip_header, segment):
        if len(segment) < TCP_HEADER_LEN:
            return RxResult(RxDrop.TCP_HEADER)
        header_len = (segment[12] >> 4) * 4
        if not TCP_HEADER_LEN <= header_len <= len(segment):
            return RxResult(RxDrop.TCP_HEADER)
        pseudo = ipv4.pseudo_header(ip_header.src, ip_header.dst, IpProto.TCP, len(segment))
        if not ipv4.checksum_ok(pseudo + segment):
            return RxResult(RxDrop.TCP_CHECKSUM)
        return RxResult(delivered=TcpDelivery(ip_header.src, ip_header.dst, segment))

    # -- send ------------------------------------------------------------------------------

    def _ipv4_frame(self, dst_mac, dst_ip, proto, payload):
        header = ipv4.send_header(src=self.ip, dst=dst_ip, proto=proto,
                                  identification=self.ident.take())
        eth = ethernet.EthernetHeader(dst=dst_mac, src=self.mac, ethertype=EtherType.IPV4)
        return ethernet.build(eth, ipv4.build(header, payload))

    def next_hop(self, dst_ip):
        """The address whose MAC a packet to ``dst_ip`` goes to: ``dst_ip`` itself inside the
        prefix, else the gateway; ``None`` without a route."""
        dst_ip = ipv4.ipv4_address(dst_ip, "dst_ip")
        if dst_ip in self.network:
            return dst_ip
        return self.gateway

    def send_ipv4(self, dst_ip, proto, payload):
        """Send ``payload`` (at most ``MTU - 20`` octets) to ``dst_ip`` with protocol
        ``proto``; return a :class:`TxResult` (see the class docstring for a miss)."""
        dst_ip = ipv4.ipv4_address(dst_ip, "dst_ip")
        payload = bytes(payload)
        if len(payload) > MTU - IPV4_HEADER_LEN:
            raise ValueError(f"a payload of {len(payload)} octets does not fit the MTU of {MTU} "
                             f"with the {IPV4_HEADER_LEN}-octet header")
        if dst_ip == self.ip:
            raise ValueError(f"dst_ip {dst_ip} is the NIC's own address (no loopback)")
        hop = self.next_hop(dst_ip)
        if hop is None:
            self.tx_counters[TxDrop.NO_ROUTE] += 1
            return TxResult(drop=TxDrop.NO_ROUTE)
        dst_mac = self.arp_cache.lookup(hop)
        if dst_mac is None:
            self.tx_counters[TxDrop.ARP_MISS] += 1
            return TxResult(frames=(arp.build_frame(self._arp.request(hop)),),
                            drop=TxDrop.ARP_MISS)
        return TxResult(frames=(self._ipv4_frame(dst_mac, dst_ip, proto, payload),))

    def arp_request(self, target_ip):
        """The ARP request frame for ``target_ip`` (to resolve an address ahead of sending)."""
        return arp.build_frame(self._arp.request(target_ip))
