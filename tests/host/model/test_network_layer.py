"""The NIC's network receive and send paths (host/model/network_layer.py), with frames built
and checked by scapy: every drop reason counted once, the next good frame still handled; the
TCP checksum (pseudo-header, odd lengths, 0x0000 and 0xFFFF) and header length."""

import ipaddress

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_RR
from scapy.layers.l2 import ARP, Dot1Q, Ether

from rnic.host.model import ethernet, ipv4
from rnic.host.model.network_layer import NicNetModel, TcpDelivery
from rnic.host.spec.net import (DEFAULT_TTL, MAX_FRAME_LEN, MIN_FRAME_LEN, MTU, IpProto, RxDrop,
                                TxDrop)

NIC_MAC, NIC_IP = "02:00:0a:07:00:02", "169.254.7.2"
PEER_MAC, PEER_IP = "52:54:00:12:34:56", "169.254.7.1"
BCAST = "ff:ff:ff:ff:ff:ff"


def eth(dst=NIC_MAC):
    return Ether(dst=dst, src=PEER_MAC)


def ip(**fields):
    return IP(**(dict(src=PEER_IP, dst=NIC_IP) | fields))


def ping(size=56, ident=0x77, seq=1, **ip_fields):
    payload = bytes((i * 7 + 3) & 0xFF for i in range(size))
    return bytes(eth() / ip(**ip_fields) / ICMP(type=8, id=ident, seq=seq) / payload), payload


def assert_echo_reply(reply_frame, payload, ident=0x77, seq=1):
    reply = Ether(reply_frame)
    assert (reply.dst, reply.src, reply.type) == (PEER_MAC, NIC_MAC, 0x0800)
    assert (reply[IP].src, reply[IP].dst, reply[IP].ttl, int(reply[IP].flags)) == \
        (NIC_IP, PEER_IP, DEFAULT_TTL, 2)
    assert reply[IP].len == 20 + 8 + len(payload)
    assert (reply[ICMP].type, reply[ICMP].code, reply[ICMP].id, reply[ICMP].seq) == (0, 0, ident, seq)
    assert bytes(reply[ICMP].payload)[:len(payload)] == payload
    assert len(reply_frame) == max(MIN_FRAME_LEN, 14 + 20 + 8 + len(payload))
    again = Ether(reply_frame)
    del again[IP].chksum, again[ICMP].chksum
    again = Ether(bytes(again))
    assert (reply[IP].chksum, reply[ICMP].chksum) == (again[IP].chksum, again[ICMP].chksum)


def only(model, reason):
    """The counters hold exactly one drop, for ``reason``."""
    expected = {r: int(r == reason) for r in model.counters}
    assert model.counters == expected


@pytest.mark.parametrize("size", [0, 56, 1472])
def test_ping_answered_with_identical_payload(size):
    model = NicNetModel()
    frame, payload = ping(size)
    result = model.receive(frame)
    assert result.drop is RxDrop.NONE and result.delivered is None
    assert len(result.replies) == 1
    assert_echo_reply(result.replies[0], payload)
    assert not any(model.counters.values())
    if size == 1472:
        assert len(frame) == len(result.replies[0]) == MAX_FRAME_LEN


def test_ping_in_padded_frame_ignores_padding():
    model = NicNetModel()
    frame, payload = ping(4)
    frame = ethernet.pad(frame)  # 46 octets of frame padded to 60
    result = model.receive(frame)
    assert_echo_reply(result.replies[0], payload)
    assert Ether(result.replies[0])[IP].len == 32


def test_echo_replies_take_successive_identifications():
    model = NicNetModel()
    idents = [Ether(model.receive(ping(seq=s)[0]).replies[0])[IP].id for s in range(3)]
    assert idents == [0, 1, 2]


def test_arp_request_answered_and_learned():
    model = NicNetModel()
    frame = bytes(eth(BCAST) / ARP(op=1, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=NIC_IP))
    result = model.receive(frame)
    assert result.drop is RxDrop.NONE and len(result.replies) == 1
    reply = Ether(result.replies[0])
    assert (reply.dst, reply.src, reply.type) == (PEER_MAC, NIC_MAC, 0x0806)
    assert (reply[ARP].op, reply[ARP].hwsrc, reply[ARP].psrc) == (2, NIC_MAC, NIC_IP)
    assert (reply[ARP].hwdst, reply[ARP].pdst) == (PEER_MAC, PEER_IP)
    assert len(result.replies[0]) == MIN_FRAME_LEN
    assert model.arp_cache.lookup(PEER_IP) == ethernet.parse_mac(PEER_MAC)


def test_tcp_delivered_up_without_padding():
    model = NicNetModel()
    segment = TCP(sport=4000, dport=5000, flags="S", seq=1) / b"hi"
    frame = ethernet.pad(bytes(eth() / ip() / segment))
    result = model.receive(frame)
    assert result == type(result)(delivered=TcpDelivery(
        ipaddress.IPv4Address(PEER_IP), ipaddress.IPv4Address(NIC_IP),
        bytes((ip() / segment)[TCP])))
    assert not result.replies and not any(model.counters.values())


def tcp_frame(payload=b"data", *, ip_fields=None, **tcp_fields):
    """An Ethernet frame with a TCP segment for the NIC (scapy's checksum unless given)."""
    segment = TCP(**(dict(sport=4000, dport=5000, flags="PA", seq=7) | tcp_fields)) / payload
    return bytes(eth() / ip(**(ip_fields or {})) / segment)


#: Octets of the TCP checksum field in a frame without IP options.
TCP_CHECKSUM_AT = 14 + 20 + 16


def with_tcp_checksum(frame, value):
    """``frame`` with its TCP checksum field set to ``value``."""
    return frame[:TCP_CHECKSUM_AT] + value.to_bytes(2, "big") + frame[TCP_CHECKSUM_AT + 2:]


def tcp_checksum(frame, *, length=None, src=PEER_IP, dst=NIC_IP):
    """The checksum of the frame's TCP segment (up to the IPv4 total length) with the
    pseudo-header of ``src``, ``dst`` and ``length`` (the segment's by default)."""
    segment = bytes(Ether(frame)[TCP])[:Ether(frame)[IP].len - 20]
    segment = segment[:16] + bytes(2) + segment[18:]
    pseudo = ipv4.pseudo_header(src, dst, IpProto.TCP,
                                len(segment) if length is None else length)
    return ipv4.checksum(pseudo + segment)


def _bad_tcp_checksum():
    frame = tcp_frame()
    return with_tcp_checksum(frame, tcp_checksum(frame) ^ 0x0100)


def _delivered(frame):
    model = NicNetModel()
    result = model.receive(frame)
    assert result.drop is RxDrop.NONE and not any(model.counters.values()), result.drop
    return result.delivered


def _dropped(frame, reason):
    model = NicNetModel()
    assert model.receive(frame).drop is reason
    only(model, reason)


@pytest.mark.parametrize("payload", [b"", b"x", b"abc", bytes(range(255)), bytes(1460),
                                     bytes(1459)])
def test_tcp_checksum_of_odd_and_even_segments(payload):
    """scapy's checksum verifies at any length (an odd last octet padded with a zero, not
    with the Ethernet padding or trailing octets after the total length); one bit off in
    any 16-bit word of the segment, the checksum field or a pseudo-header field does not."""
    frame = tcp_frame(payload)
    segment = bytes(Ether(frame)[TCP])
    assert _delivered(frame).segment == segment
    assert _delivered(ethernet.pad(frame) + b"\xff\x01\x02").segment == segment
    for at in (34, 34 + 16, len(frame) - 1):
        flipped = bytearray(frame)
        flipped[at] ^= 0x01
        _dropped(bytes(flipped), RxDrop.TCP_CHECKSUM)
    _dropped(bytes(eth() / ip(src="169.254.7.9") / TCP(bytes(Ether(frame)[TCP]))),
             RxDrop.TCP_CHECKSUM)


def test_tcp_checksum_covers_the_pseudo_headers_length():
    """Checksums made with another length in the pseudo-header (the IPv4 total length, the
    frame's length, none) or without the pseudo-header are refused; the segment's own
    length is the one that verifies."""
    frame = tcp_frame(b"odd")
    total = Ether(frame)[IP].len
    assert with_tcp_checksum(frame, tcp_checksum(frame)) == frame
    for length in (total, len(frame), 0):
        _dropped(with_tcp_checksum(frame, tcp_checksum(frame, length=length)),
                 RxDrop.TCP_CHECKSUM)
    segment = bytes(Ether(frame)[TCP])
    bare = ipv4.checksum(segment[:16] + bytes(2) + segment[18:])
    _dropped(with_tcp_checksum(frame, bare), RxDrop.TCP_CHECKSUM)
    _dropped(with_tcp_checksum(frame, tcp_checksum(frame, dst="169.254.7.3")),
             RxDrop.TCP_CHECKSUM)


def test_tcp_checksum_zero_and_all_ones():
    """A segment whose words sum to 0xFFFF has the checksum 0x0000, and 0xFFFF (the other
    zero of one's complement) verifies too: the sum folds to 0xFFFF either way. A field of
    0x0000 or 0xFFFF where the checksum is anything else is refused (0 is not "no
    checksum" in TCP). The pseudo-header is never all zero, so 0xFFFF is never the one
    checksum that verifies."""
    frame = tcp_frame(bytes(2))
    # the last two octets of the payload make the segment (checksum field 0) sum to 0xFFFF
    zeroed = with_tcp_checksum(frame, 0)
    pseudo = ipv4.pseudo_header(PEER_IP, NIC_IP, IpProto.TCP, len(frame) - 34)
    fill = ~ipv4.ones_sum(pseudo + zeroed[34:]) & 0xFFFF
    zero_sum = zeroed[:-2] + fill.to_bytes(2, "big")
    assert ipv4.ones_sum(pseudo + zero_sum[34:]) == 0xFFFF
    assert tcp_checksum(zero_sum) == 0x0000
    for value in (0x0000, 0xFFFF):
        assert _delivered(with_tcp_checksum(zero_sum, value)) is not None
    other = tcp_frame(b"\x12\x34")
    assert tcp_checksum(other) not in (0x0000, 0xFFFF)
    for value in (0x0000, 0xFFFF):
        _dropped(with_tcp_checksum(other, value), RxDrop.TCP_CHECKSUM)


@pytest.mark.parametrize("dataofs, options", [(5, b""), (6, b"\x01" * 4), (15, b"\x01" * 40)])
def test_tcp_header_exactly_the_segment(dataofs, options):
    """A header that fills the whole segment (no payload) is good, at every data offset;
    one octet short of it is TCP_HEADER."""
    frame = bytes(eth() / ip() / TCP(sport=1, dport=2, dataofs=dataofs, options=[]) / options)
    assert len(frame) == 14 + 20 + 4 * dataofs
    assert len(_delivered(frame).segment) == 4 * dataofs
    short = bytes(eth() / ip() / TCP(sport=1, dport=2, dataofs=dataofs, options=[])
                  / options[:-1]) if options else bytes(eth() / ip(proto=6) / frame[34:-1])
    _dropped(short, RxDrop.TCP_HEADER)


def _vlan_ping():
    return bytes(eth() / Dot1Q(vlan=7) / ip() / ICMP(type=8) / b"x")


def _bad_ip_checksum():
    return bytes(eth() / ip(chksum=0x1234) / ICMP(type=8))


def _total_length(n):
    return bytes(eth() / ip(len=n) / ICMP(type=8) / b"abcd")


#: One frame per drop reason (and, for the ordering, frames with several faults: the first
#: reason in the documented order is the one counted).
BAD_FRAMES = {
    "runt": (b"\x02\x00\x0a\x07\x00\x02" * 2, RxDrop.RUNT),
    "other unicast MAC": (bytes(eth("02:00:0a:07:00:03") / ip() / ICMP(type=8)), RxDrop.OTHER_MAC),
    "IPv6 EtherType": (bytes(Ether(dst=NIC_MAC, src=PEER_MAC, type=0x86DD) / bytes(46)),
                       RxDrop.ETHERTYPE),
    "VLAN-tagged ping": (_vlan_ping(), RxDrop.ETHERTYPE),
    "ARP for another address": (bytes(eth(BCAST) / ARP(op=1, hwsrc=PEER_MAC, psrc=PEER_IP,
                                                        pdst="169.254.7.3")), RxDrop.ARP_OTHER),
    "ARP reply for another address": (bytes(eth() / ARP(op=2, hwsrc=PEER_MAC, psrc=PEER_IP,
                                                        pdst="169.254.7.3")), RxDrop.ARP_OTHER),
    "ARP not IPv4 over Ethernet": (bytes(eth(BCAST) / ARP(op=1, ptype=0x86DD, hwsrc=PEER_MAC,
                                                          psrc=PEER_IP, pdst=NIC_IP))[:42],
                                   RxDrop.ARP_OTHER),
    "ARP opcode 3": (bytes(eth(BCAST) / ARP(op=3, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=NIC_IP)),
                     RxDrop.ARP_OTHER),
    "short ARP": (bytes(eth(BCAST) / ARP(op=1, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=NIC_IP))[:40],
                  RxDrop.ARP_OTHER),
    "IP version 6 in an IPv4 frame": (bytes(eth() / ip(version=6) / ICMP(type=8)), RxDrop.IP_HEADER),
    "IP options": (bytes(eth() / ip(options=[IPOption_RR()]) / ICMP(type=8)), RxDrop.IP_HEADER),
    "IHL 4": (bytes(eth() / ip(ihl=4) / ICMP(type=8)), RxDrop.IP_HEADER),
    "total length beyond the frame": (_total_length(20 + 8 + 4 + 1), RxDrop.IP_HEADER),
    "total length below the header": (_total_length(19), RxDrop.IP_HEADER),
    "IP header cut short": (bytes(eth() / ip())[:14 + 19], RxDrop.IP_HEADER),
    "bad IP checksum": (_bad_ip_checksum(), RxDrop.IP_CHECKSUM),
    "fragment, MF": (bytes(eth() / ip(flags="MF") / ICMP(type=8)), RxDrop.IP_FRAGMENT),
    "fragment, offset": (bytes(eth() / ip(frag=100) / ICMP(type=8)), RxDrop.IP_FRAGMENT),
    "wrong IP": (bytes(eth() / ip(dst="169.254.7.3") / ICMP(type=8)), RxDrop.IP_OTHER),
    "broadcast IP": (bytes(eth(BCAST) / ip(dst="169.254.7.255") / ICMP(type=8)), RxDrop.IP_OTHER),
    "UDP": (bytes(eth() / ip() / UDP(dport=7) / b"echo"), RxDrop.IP_PROTOCOL),
    "echo reply": (bytes(eth() / ip() / ICMP(type=0) / b"x"), RxDrop.ICMP_OTHER),
    "destination unreachable": (bytes(eth() / ip() / ICMP(type=3, code=3) / bytes(28)),
                                RxDrop.ICMP_OTHER),
    "bad ICMP checksum": (bytes(eth() / ip() / ICMP(type=8, chksum=0xBEEF) / b"x"),
                          RxDrop.ICMP_OTHER),
    "ICMP shorter than its header": (bytes(eth() / ip(proto=1) / b"\x08\x00\xf7"),
                                     RxDrop.ICMP_OTHER),
    "bad TCP checksum": (_bad_tcp_checksum(), RxDrop.TCP_CHECKSUM),
    "TCP data offset 4": (tcp_frame(dataofs=4), RxDrop.TCP_HEADER),
    "TCP data offset 15 in a 40-octet segment": (tcp_frame(bytes(20), dataofs=15),
                                                 RxDrop.TCP_HEADER),
    "TCP segment of 19 octets": (bytes(eth() / ip(proto=6) / bytes(range(19))), RxDrop.TCP_HEADER),
    "TCP segment of 0 octets": (ethernet.pad(bytes(eth() / ip(proto=6))), RxDrop.TCP_HEADER),
    # order: the first failing check names the reason
    "VLAN before anything": (bytes(eth("02:00:0a:07:00:02") / Dot1Q() / ip(dst="1.1.1.1", flags="MF")),
                             RxDrop.ETHERTYPE),
    "options before checksum": (bytes(eth() / ip(options=[IPOption_RR()], chksum=1) / ICMP()),
                                RxDrop.IP_HEADER),
    "checksum before fragment": (bytes(eth() / ip(flags="MF", chksum=1) / ICMP()), RxDrop.IP_CHECKSUM),
    "fragment before wrong IP": (bytes(eth() / ip(flags="MF", dst="10.0.0.1") / ICMP()),
                                 RxDrop.IP_FRAGMENT),
    "wrong IP before protocol": (bytes(eth() / ip(dst="10.0.0.1") / UDP()), RxDrop.IP_OTHER),
    "wrong IP before TCP checksum": (tcp_frame(ip_fields=dict(dst="10.0.0.1"), chksum=1),
                                     RxDrop.IP_OTHER),
    "IP checksum before TCP header": (tcp_frame(ip_fields=dict(chksum=1), dataofs=4),
                                      RxDrop.IP_CHECKSUM),
    "TCP header before TCP checksum": (tcp_frame(dataofs=4, chksum=1), RxDrop.TCP_HEADER),
    "other MAC before EtherType": (bytes(Ether(dst="02:00:0a:07:00:03", type=0x86DD) / bytes(46)),
                                   RxDrop.OTHER_MAC),
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_drop_counted_once_and_next_frame_handled(name):
    frame, reason = BAD_FRAMES[name]
    model = NicNetModel()
    result = model.receive(frame)
    assert result.drop is reason
    assert not result.replies and result.delivered is None
    only(model, reason)
    assert len(model.arp_cache) == 0
    good, payload = ping(56)
    after = model.receive(good)
    assert after.drop is RxDrop.NONE
    assert_echo_reply(after.replies[0], payload)
    only(model, reason)


def test_every_network_reason_is_exercised():
    exercised = {reason for _, reason in BAD_FRAMES.values()}
    mac_only = {RxDrop.NONE, RxDrop.FCS, RxDrop.GIANT, RxDrop.OVERFLOW}
    assert exercised == set(RxDrop) - mac_only


def test_drops_accumulate_per_reason():
    model = NicNetModel()
    for _ in range(3):
        model.receive(_bad_ip_checksum())
    model.receive(_vlan_ping())
    assert model.counters[RxDrop.IP_CHECKSUM] == 3 and model.counters[RxDrop.ETHERTYPE] == 1
    assert sum(model.counters.values()) == 4


def test_multicast_mac_passes_the_mac_filter():
    model = NicNetModel()
    frame = bytes(Ether(dst="01:00:5e:00:00:01", src=PEER_MAC) / ip(dst="224.0.0.1") / ICMP())
    assert model.receive(frame).drop is RxDrop.IP_OTHER


def test_send_resolves_then_sends():
    model = NicNetModel()
    first = model.send_ipv4(PEER_IP, IpProto.TCP, b"segment")
    assert first.drop is TxDrop.ARP_MISS and len(first.frames) == 1
    request = Ether(first.frames[0])
    assert (request.dst, request.src, request.type) == (BCAST, NIC_MAC, 0x0806)
    assert (request[ARP].op, request[ARP].psrc, request[ARP].pdst, request[ARP].hwsrc) == \
        (1, NIC_IP, PEER_IP, NIC_MAC)
    assert model.tx_counters == {TxDrop.NO_ROUTE: 0, TxDrop.ARP_MISS: 1}
    answer = bytes(eth() / ARP(op=2, hwsrc=PEER_MAC, psrc=PEER_IP, hwdst=NIC_MAC, pdst=NIC_IP))
    assert model.receive(answer).drop is RxDrop.NONE
    sent = [model.send_ipv4(PEER_IP, IpProto.TCP, bytes([n]) * 1480) for n in range(2)]
    for n, result in enumerate(sent):
        assert result.drop is TxDrop.NONE
        frame = Ether(result.frames[0])
        assert len(result.frames[0]) == MAX_FRAME_LEN
        assert (frame.dst, frame.src) == (PEER_MAC, NIC_MAC)
        assert (frame[IP].src, frame[IP].dst, frame[IP].proto, frame[IP].ttl) == (NIC_IP, PEER_IP, 6, 64)
        assert (int(frame[IP].flags), frame[IP].frag, frame[IP].ihl, frame[IP].id) == (2, 0, 5, n)
        assert bytes(frame[IP].payload) == bytes([n]) * 1480
        del frame[IP].chksum
        assert Ether(bytes(frame))[IP].chksum == Ether(result.frames[0])[IP].chksum
    assert model.tx_counters[TxDrop.ARP_MISS] == 1


def test_send_short_packet_is_padded():
    model = NicNetModel(static_arp={PEER_IP: PEER_MAC})
    result = model.send_ipv4(PEER_IP, 17, b"x")
    assert len(result.frames[0]) == MIN_FRAME_LEN
    frame = Ether(result.frames[0])
    assert frame[IP].len == 21 and frame[IP].proto == 17


def test_off_link_without_gateway_is_no_route():
    model = NicNetModel()
    result = model.send_ipv4("10.1.2.3", IpProto.TCP, b"x")
    assert result.frames == () and result.drop is TxDrop.NO_ROUTE
    assert model.tx_counters[TxDrop.NO_ROUTE] == 1


def test_off_link_goes_to_gateway():
    model = NicNetModel(gateway="169.254.7.254")
    result = model.send_ipv4("10.1.2.3", IpProto.TCP, b"x")
    assert result.drop is TxDrop.ARP_MISS
    assert Ether(result.frames[0])[ARP].pdst == "169.254.7.254"
    model.arp_cache.set_static("169.254.7.254", "02:00:00:00:00:fe")
    frame = Ether(model.send_ipv4("10.1.2.3", IpProto.TCP, b"x").frames[0])
    assert frame.dst == "02:00:00:00:00:fe" and frame[IP].dst == "10.1.2.3"


def test_send_arguments_checked():
    model = NicNetModel()
    with pytest.raises(ValueError, match="1481 octets"):
        model.send_ipv4(PEER_IP, IpProto.TCP, bytes(MTU - 20 + 1))
    with pytest.raises(ValueError, match="own address"):
        model.send_ipv4(NIC_IP, IpProto.TCP, b"")


def test_static_arp_entry_not_overwritten_by_learning():
    model = NicNetModel(static_arp={PEER_IP: "02:00:00:00:00:99"}, arp_cache_size=2)
    model.receive(bytes(eth(BCAST) / ARP(op=1, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=NIC_IP)))
    assert model.arp_cache.lookup(PEER_IP) == ethernet.parse_mac("02:00:00:00:00:99")
    assert Ether(model.send_ipv4(PEER_IP, IpProto.TCP, b"").frames[0]).dst == "02:00:00:00:00:99"


def test_cache_size_and_replacement_through_the_model():
    model = NicNetModel(arp_cache_size=2)
    for n in (1, 3, 4):
        mac = f"52:54:00:00:00:{n:02x}"
        frame = bytes(Ether(dst=BCAST, src=mac) /
                      ARP(op=1, hwsrc=mac, psrc=f"169.254.7.{n + 10}", pdst=NIC_IP))
        assert len(model.receive(frame).replies) == 1
    assert [e.ip for e in model.arp_cache.slots] == [ipaddress.IPv4Address("169.254.7.14"),
                                                     ipaddress.IPv4Address("169.254.7.13")]


def test_arp_request_helper():
    model = NicNetModel()
    request = Ether(model.arp_request(PEER_IP))
    assert request.dst == BCAST and request[ARP].pdst == PEER_IP and request[ARP].op == 1


@pytest.mark.parametrize("kwargs, error, text", [
    (dict(prefix=33), ValueError, "prefix 33"),
    (dict(prefix="24"), TypeError, "prefix"),
    (dict(mac="01:00:5e:00:00:01"), ValueError, "group address"),
    (dict(ip="169.254.7"), ValueError, "169.254.7"),
    (dict(gateway="10.0.0.1"), ValueError, "outside the network"),
    (dict(arp_cache_size=0), ValueError, "size 0"),
])
def test_config_checked(kwargs, error, text):
    with pytest.raises(error, match=text):
        NicNetModel(**kwargs)


def test_other_config():
    model = NicNetModel(mac="02:00:00:00:00:01", ip="10.0.0.2", prefix=8)
    frame = bytes(Ether(dst="02:00:00:00:00:01", src=PEER_MAC) / IP(src="10.200.0.1", dst="10.0.0.2")
                  / ICMP(type=8) / b"abc")
    reply = Ether(model.receive(frame).replies[0])
    assert (reply.src, reply[IP].src, reply[IP].dst) == ("02:00:00:00:00:01", "10.0.0.2", "10.200.0.1")
    assert model.receive(ping()[0]).drop is RxDrop.OTHER_MAC


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_frame_is_handled_or_dropped_for_one_reason(data):
    """Mutated good frames and random octets: no exception, and either handled (nothing
    counted) or exactly one reason counted."""
    good = [ping(8)[0], bytes(eth(BCAST) / ARP(op=1, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=NIC_IP)),
            bytes(eth() / ip() / TCP() / b"data")]
    frame = bytearray(data.draw(st.sampled_from(good)))
    for _ in range(data.draw(st.integers(0, 3))):
        frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    frame = bytes(frame[:data.draw(st.integers(0, len(frame)))])
    model = NicNetModel()
    result = model.receive(frame)
    if result.drop is RxDrop.NONE:
        assert not any(model.counters.values())
        assert result.replies or result.delivered is not None or Ether(frame).type == 0x0806
    else:
        only(model, result.drop)
        assert not result.replies and result.delivered is None
