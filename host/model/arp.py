"""ARP for IPv4 over Ethernet (RFC 826): the 28-octet packet, the NIC's small address cache
and the responder.

What the NIC does with an ARP packet addressed to it (target protocol address = its IPv4
address; everything else is dropped as ``ARP_OTHER``, and nothing is learned from it):

- a request: answer with a reply sent to the requester's hardware address, and learn the
  requester's (IP, MAC) pair;
- a reply: learn the sender's pair (whether the NIC asked or not).

A sender IP of 0.0.0.0 (an RFC 5227 probe) is answered but not learned. Learning never
overwrites a static entry.
"""

import ipaddress
import struct
from dataclasses import dataclass
from typing import NamedTuple

from rnic.host.model import ethernet
from rnic.host.model.ipv4 import ipv4_address
from rnic.host.spec.net import ARP_LEN, BROADCAST_MAC, ETH_ADDR_LEN, ArpOp, EtherType

__all__ = [
    "ArpPacket", "parse", "build", "build_frame", "request", "ArpEntry", "ArpCache",
    "ArpResponder", "ArpOutcome", "HTYPE_ETHERNET",
]

_PACKET = struct.Struct(">HHBBH6s4s6s4s")
#: Hardware type of Ethernet.
HTYPE_ETHERNET = 1
_ZERO_IP = ipv4_address("0.0.0.0")


@dataclass(frozen=True, kw_only=True)
class ArpPacket:
    """An ARP packet for IPv4 over Ethernet (hardware type 1, protocol 0x0800, lengths 6
    and 4: the only kind this NIC handles).

    Parameters
    ----------
    op : ArpOp
        Request or reply.
    sender_mac, target_mac : bytes or str
        Hardware addresses (6 octets; the target's is zero in a request).
    sender_ip, target_ip : str, bytes, int or ipaddress.IPv4Address
        Protocol addresses.
    """
    op: ArpOp
    sender_mac: bytes
    sender_ip: ipaddress.IPv4Address
    target_mac: bytes = bytes(ETH_ADDR_LEN)
    target_ip: ipaddress.IPv4Address = _ZERO_IP

    def __post_init__(self):
        if isinstance(self.op, bool) or not isinstance(self.op, int):
            raise TypeError(f"op must be an ArpOp, not {type(self.op).__name__}")
        if self.op not in ArpOp._value2member_map_:
            raise ValueError(f"ARP operation {self.op} is neither a request (1) nor a reply (2)")
        object.__setattr__(self, "op", ArpOp(self.op))
        object.__setattr__(self, "sender_mac", ethernet.mac_address(self.sender_mac, "sender_mac"))
        object.__setattr__(self, "target_mac", ethernet.mac_address(self.target_mac, "target_mac"))
        object.__setattr__(self, "sender_ip", ipv4_address(self.sender_ip, "sender_ip"))
        object.__setattr__(self, "target_ip", ipv4_address(self.target_ip, "target_ip"))

    length = ARP_LEN

    def to_bytes(self):
        """The 28 packet octets."""
        return _PACKET.pack(HTYPE_ETHERNET, EtherType.IPV4, ETH_ADDR_LEN, 4, self.op,
                            self.sender_mac, self.sender_ip.packed,
                            self.target_mac, self.target_ip.packed)


def parse(payload):
    """The ARP packet at the start of an Ethernet payload (padding after its 28 octets is
    ignored).

    Raises
    ------
    ValueError
        Shorter than 28 octets, or a hardware type, protocol type, address length or
        operation other than those of IPv4 over Ethernet.
    """
    payload = bytes(payload)
    if len(payload) < ARP_LEN:
        raise ValueError(f"an ARP packet of {len(payload)} octets is shorter than {ARP_LEN}")
    htype, ptype, hlen, plen, op, sha, spa, tha, tpa = _PACKET.unpack_from(payload)
    if (htype, ptype, hlen, plen) != (HTYPE_ETHERNET, EtherType.IPV4, ETH_ADDR_LEN, 4):
        raise ValueError(f"ARP hardware type {htype}, protocol {ptype:#06x}, lengths {hlen} "
                         f"and {plen}: not IPv4 over Ethernet (1, 0x0800, 6, 4)")
    return ArpPacket(op=op, sender_mac=sha, sender_ip=spa, target_mac=tha, target_ip=tpa)


def build(packet):
    """The 28 octets of ``packet``."""
    if not isinstance(packet, ArpPacket):
        raise TypeError(f"packet must be an ArpPacket, not {type(packet).__name__}")
    return packet.to_bytes()


def build_frame(packet, *, dst=None):
    """The Ethernet frame (padded to 60 octets, no FCS) that carries ``packet`` from its
    sender's MAC to ``dst``: by default broadcast for a request, the target's MAC for a
    reply."""
    if dst is None:
        dst = BROADCAST_MAC if packet.op == ArpOp.REQUEST else packet.target_mac
    header = ethernet.EthernetHeader(dst=dst, src=packet.sender_mac, ethertype=EtherType.ARP)
    return ethernet.build(header, build(packet))


def request(*, sender_mac, sender_ip, target_ip):
    """The request for ``target_ip``'s hardware address (target MAC zero)."""
    return ArpPacket(op=ArpOp.REQUEST, sender_mac=sender_mac, sender_ip=sender_ip,
                     target_ip=target_ip)


class ArpEntry(NamedTuple):
    """One slot of the cache."""
    ip: ipaddress.IPv4Address
    mac: bytes
    static: bool


class ArpCache:
    """The NIC's ARP cache: a fixed number of slots, as in the gateware (a small table
    searched in parallel).

    Parameters
    ----------
    size : int
        Number of slots (at least 1).
    static : mapping of IPv4 address to MAC, optional
        Static entries, which take slots of the same table and which learning never
        overwrites or replaces; at most ``size`` of them.

    Learning (:meth:`learn`) an address already in the table updates its MAC (unless that
    entry is static). A new address goes to the lowest free slot; when none is free, it
    replaces the entry at the round-robin pointer, which then moves one slot on: the pointer
    starts at slot 0 and skips static slots, so entries are replaced oldest-first among
    those that were learned once the table has filled. When every slot is static nothing is
    learned. Entries never age out (the cable has nothing that moves).
    """

    def __init__(self, *, size, static=None):
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"size must be an int, not {type(size).__name__}")
        if size < 1:
            raise ValueError(f"an ARP cache of size {size}: at least 1 slot is needed")
        self.size = size
        self._slots = [None] * size
        self._pointer = 0
        for ip, mac in dict(static or {}).items():
            self.set_static(ip, mac)

    @property
    def slots(self):
        """The slots in order, ``None`` for a free one."""
        return tuple(self._slots)

    def _find(self, ip):
        for index, entry in enumerate(self._slots):
            if entry is not None and entry.ip == ip:
                return index
        return None

    def lookup(self, ip):
        """The MAC for ``ip``, or ``None`` when it is not in the table."""
        index = self._find(ipv4_address(ip))
        return None if index is None else self._slots[index].mac

    def __contains__(self, ip):
        return self.lookup(ip) is not None

    def __len__(self):
        return sum(entry is not None for entry in self._slots)

    def _victim(self):
        if None in self._slots:
            return self._slots.index(None)
        for step in range(self.size):
            index = (self._pointer + step) % self.size
            if not self._slots[index].static:
                self._pointer = (index + 1) % self.size
                return index
        return None

    def learn(self, ip, mac):
        """Enter ``ip`` -> ``mac`` as a learned entry; return its slot, or ``None`` when it
        was not entered (a static entry for ``ip``, or every slot static)."""
        ip, mac = ipv4_address(ip, "ip"), ethernet.mac_address(mac, "mac")
        index = self._find(ip)
        if index is not None:
            if self._slots[index].static:
                return None
        else:
            index = self._victim()
            if index is None:
                return None
        self._slots[index] = ArpEntry(ip, mac, False)
        return index

    def set_static(self, ip, mac):
        """Enter ``ip`` -> ``mac`` as a static entry (replacing a learned one for ``ip``, or
        taking a slot as :meth:`learn` would); return its slot."""
        ip, mac = ipv4_address(ip, "ip"), ethernet.mac_address(mac, "mac")
        index = self._find(ip)
        if index is None:
            index = self._victim()
            if index is None:
                raise ValueError(f"no slot for static entry {ip}: all {self.size} are static")
        self._slots[index] = ArpEntry(ip, mac, True)
        return index


class ArpOutcome(NamedTuple):
    """What the responder did with one ARP packet: ``accepted`` false means dropped
    (``ARP_OTHER``); ``reply`` is the packet to send, if any."""
    accepted: bool
    reply: ArpPacket | None


class ArpResponder:
    """The ARP receive logic of the NIC: answers requests for its address and fills the
    cache (see the module docstring for the rules).

    Parameters
    ----------
    mac : bytes or str
        The NIC's MAC address.
    ip : IPv4 address
        The NIC's IPv4 address.
    cache : ArpCache
        The table it fills.
    """

    def __init__(self, *, mac, ip, cache):
        if not isinstance(cache, ArpCache):
            raise TypeError(f"cache must be an ArpCache, not {type(cache).__name__}")
        self.mac = ethernet.mac_address(mac, "mac")
        self.ip = ipv4_address(ip, "ip")
        self.cache = cache

    def receive(self, payload):
        """Handle the Ethernet payload of an ARP frame."""
        try:
            packet = parse(payload)
        except ValueError:
            return ArpOutcome(False, None)
        if packet.target_ip != self.ip:
            return ArpOutcome(False, None)
        if packet.sender_ip != _ZERO_IP:
            self.cache.learn(packet.sender_ip, packet.sender_mac)
        if packet.op != ArpOp.REQUEST:
            return ArpOutcome(True, None)
        reply = ArpPacket(op=ArpOp.REPLY, sender_mac=self.mac, sender_ip=self.ip,
                          target_mac=packet.sender_mac, target_ip=packet.sender_ip)
        return ArpOutcome(True, reply)

    def request(self, target_ip):
        """The request the NIC sends to resolve ``target_ip``."""
        return request(sender_mac=self.mac, sender_ip=self.ip, target_ip=target_ip)
