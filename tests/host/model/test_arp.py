"""ARP packets, the cache and the responder (host/model/arp.py), checked against scapy."""

import ipaddress

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.l2 import ARP, Ether

from rnic.host.model import arp, ethernet
from rnic.host.spec.net import ARP_LEN, BROADCAST_MAC, DEFAULT_NIC_MAC, MIN_FRAME_LEN, ArpOp

NIC_IP, PEER_IP = "169.254.7.2", "169.254.7.1"
PEER_MAC = "52:54:00:12:34:56"


def test_request_matches_scapy():
    packet = arp.request(sender_mac=PEER_MAC, sender_ip=PEER_IP, target_ip=NIC_IP)
    assert packet.to_bytes() == bytes(ARP(op=1, hwsrc=PEER_MAC, psrc=PEER_IP,
                                          hwdst="00:00:00:00:00:00", pdst=NIC_IP))
    assert len(arp.build(packet)) == ARP_LEN


def test_parse_scapy_reply_with_padding():
    raw = bytes(ARP(op=2, hwsrc=PEER_MAC, psrc=PEER_IP, hwdst="02:00:0a:07:00:02", pdst=NIC_IP))
    packet = arp.parse(raw + bytes(18))
    assert packet.op is ArpOp.REPLY
    assert packet.sender_mac == ethernet.parse_mac(PEER_MAC) and packet.target_mac == DEFAULT_NIC_MAC
    assert packet.sender_ip == ipaddress.IPv4Address(PEER_IP)
    assert packet.target_ip == ipaddress.IPv4Address(NIC_IP)


@pytest.mark.parametrize("fields, text", [
    (dict(hwtype=6), "hardware type 6"), (dict(ptype=0x86DD), "protocol 0x86dd"),
    (dict(hwlen=8), "lengths 8"), (dict(plen=16), "and 16"), (dict(op=3), "operation 3"),
])
def test_parse_rejects(fields, text):
    raw = bytes(ARP(**(dict(op=1, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=NIC_IP) | fields)))[:ARP_LEN]
    with pytest.raises(ValueError, match=text):
        arp.parse(raw.ljust(ARP_LEN, b"\x00"))


def test_parse_short():
    with pytest.raises(ValueError, match="27 octets"):
        arp.parse(bytes(27))


def test_frames():
    request = arp.request(sender_mac=DEFAULT_NIC_MAC, sender_ip=NIC_IP, target_ip=PEER_IP)
    frame = arp.build_frame(request)
    theirs = Ether(frame)
    assert len(frame) == MIN_FRAME_LEN
    assert (theirs.dst, theirs.src, theirs.type) == ("ff:ff:ff:ff:ff:ff", "02:00:0a:07:00:02", 0x0806)
    assert (theirs[ARP].op, theirs[ARP].pdst, theirs[ARP].psrc) == (1, PEER_IP, NIC_IP)
    reply = arp.ArpPacket(op=ArpOp.REPLY, sender_mac=DEFAULT_NIC_MAC, sender_ip=NIC_IP,
                          target_mac=PEER_MAC, target_ip=PEER_IP)
    assert Ether(arp.build_frame(reply)).dst == PEER_MAC


@settings(max_examples=200)
@given(st.sampled_from(list(ArpOp)), st.binary(min_size=6, max_size=6),
       st.binary(min_size=6, max_size=6), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_round_trip(op, sha, tha, spa, tpa):
    packet = arp.ArpPacket(op=op, sender_mac=sha, sender_ip=spa, target_mac=tha, target_ip=tpa)
    raw = arp.build(packet)
    assert arp.parse(raw) == packet
    theirs = ARP(raw)
    assert (theirs.op, theirs.hwsrc, theirs.hwdst) == (op, ethernet.format_mac(sha),
                                                      ethernet.format_mac(tha))
    assert (theirs.psrc, theirs.pdst) == (str(ipaddress.IPv4Address(spa)),
                                          str(ipaddress.IPv4Address(tpa)))


def _mac(n):
    return bytes([2, 0, 0, 0, 0, n])


def _ip(n):
    return f"10.0.0.{n}"


def test_cache_fills_lowest_free_slot_then_replaces_round_robin():
    cache = arp.ArpCache(size=3)
    assert [cache.learn(_ip(n), _mac(n)) for n in (1, 2, 3)] == [0, 1, 2]
    assert len(cache) == 3 and all(cache.lookup(_ip(n)) == _mac(n) for n in (1, 2, 3))
    # full: replaced oldest first, the pointer going round
    assert [cache.learn(_ip(n), _mac(n)) for n in (4, 5, 6, 7)] == [0, 1, 2, 0]
    assert [e.ip for e in cache.slots] == [ipaddress.IPv4Address(_ip(n)) for n in (7, 5, 6)]
    assert _ip(4) not in cache and cache.lookup(_ip(1)) is None


def test_cache_updates_known_address_in_place():
    cache = arp.ArpCache(size=2)
    cache.learn(_ip(1), _mac(1))
    assert cache.learn(_ip(1), _mac(9)) == 0
    assert cache.lookup(_ip(1)) == _mac(9) and len(cache) == 1


def test_static_entries_are_never_overwritten_or_replaced():
    cache = arp.ArpCache(size=3, static={_ip(1): _mac(1)})
    assert cache.slots[0] == arp.ArpEntry(ipaddress.IPv4Address(_ip(1)), _mac(1), True)
    assert cache.learn(_ip(1), _mac(99)) is None
    assert cache.lookup(_ip(1)) == _mac(1)
    assert [cache.learn(_ip(n), _mac(n)) for n in (2, 3, 4, 5, 6)] == [1, 2, 1, 2, 1]
    assert cache.lookup(_ip(1)) == _mac(1)


def test_static_replaces_learned_entry_of_same_address():
    cache = arp.ArpCache(size=2)
    cache.learn(_ip(1), _mac(1))
    assert cache.set_static(_ip(1), _mac(2)) == 0
    assert cache.slots[0].static and cache.lookup(_ip(1)) == _mac(2)


def test_all_static_learns_nothing():
    cache = arp.ArpCache(size=2, static={_ip(1): _mac(1), _ip(2): _mac(2)})
    assert cache.learn(_ip(3), _mac(3)) is None and _ip(3) not in cache
    with pytest.raises(ValueError, match="all 2 are static"):
        cache.set_static(_ip(3), _mac(3))
    with pytest.raises(ValueError, match="10.0.0.3"):
        arp.ArpCache(size=2, static={_ip(n): _mac(n) for n in (1, 2, 3)})


@pytest.mark.parametrize("size, error", [(0, ValueError), (True, TypeError), ("4", TypeError)])
def test_cache_size_checked(size, error):
    with pytest.raises(error):
        arp.ArpCache(size=size)


def _responder(size=4):
    cache = arp.ArpCache(size=size)
    return arp.ArpResponder(mac=DEFAULT_NIC_MAC, ip=NIC_IP, cache=cache), cache


def test_request_for_us_is_answered_and_learned():
    responder, cache = _responder()
    request = bytes(ARP(op=1, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=NIC_IP))
    outcome = responder.receive(request)
    assert outcome.accepted
    assert outcome.reply == arp.ArpPacket(op=ArpOp.REPLY, sender_mac=DEFAULT_NIC_MAC,
                                          sender_ip=NIC_IP, target_mac=PEER_MAC,
                                          target_ip=PEER_IP)
    assert cache.lookup(PEER_IP) == ethernet.parse_mac(PEER_MAC)


def test_reply_for_us_is_learned_without_answer():
    responder, cache = _responder()
    outcome = responder.receive(bytes(ARP(op=2, hwsrc=PEER_MAC, psrc=PEER_IP,
                                          hwdst="02:00:0a:07:00:02", pdst=NIC_IP)))
    assert outcome == arp.ArpOutcome(True, None)
    assert cache.lookup(PEER_IP) == ethernet.parse_mac(PEER_MAC)


@pytest.mark.parametrize("op", [1, 2])
def test_packets_for_other_addresses_are_ignored(op):
    responder, cache = _responder()
    outcome = responder.receive(bytes(ARP(op=op, hwsrc=PEER_MAC, psrc=PEER_IP, pdst="169.254.7.3")))
    assert outcome == arp.ArpOutcome(False, None)
    assert len(cache) == 0


def test_probe_answered_not_learned():
    responder, cache = _responder()
    outcome = responder.receive(bytes(ARP(op=1, hwsrc=PEER_MAC, psrc="0.0.0.0", pdst=NIC_IP)))
    assert outcome.accepted and outcome.reply.target_ip == ipaddress.IPv4Address("0.0.0.0")
    assert outcome.reply.target_mac == ethernet.parse_mac(PEER_MAC)
    assert len(cache) == 0


def test_malformed_is_dropped():
    responder, _ = _responder()
    assert responder.receive(bytes(20)) == arp.ArpOutcome(False, None)
    bad = bytes(ARP(op=1, hwtype=6, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=NIC_IP))
    assert not responder.receive(bad).accepted


def test_responder_request():
    responder, _ = _responder()
    packet = responder.request(PEER_IP)
    assert packet.op is ArpOp.REQUEST and packet.target_ip == ipaddress.IPv4Address(PEER_IP)
    assert packet.sender_mac == DEFAULT_NIC_MAC and packet.target_mac == bytes(6)
    assert arp.build_frame(packet)[:6] == BROADCAST_MAC
