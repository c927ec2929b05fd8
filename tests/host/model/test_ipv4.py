"""IPv4 headers, the Internet checksum and its incremental update (host/model/ipv4.py),
checked against scapy."""

import ipaddress

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.inet import IP, TCP, IPOption_RR

from rnic.host.model import ipv4
from rnic.host.spec.net import DEFAULT_TTL, IPV4_HEADER_LEN, IpProto

NIC, PEER = "169.254.7.2", "169.254.7.1"


def test_rfc1071_example():
    # RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2
    data = bytes.fromhex("0001f203f4f5f6f7")
    assert ipv4.ones_sum(data) == 0xDDF2
    assert ipv4.checksum(data) == 0x220D
    assert ipv4.checksum_ok(data + (0x220D).to_bytes(2, "big"))
    assert ipv4.ones_sum(b"\x01") == 0x0100  # an odd octet is padded with zero


def test_all_zero_data_never_verifies():
    assert ipv4.checksum(bytes(8)) == 0xFFFF
    assert not ipv4.checksum_ok(bytes(8))
    assert ipv4.checksum_ok(bytes(6) + b"\xff\xff")


@pytest.mark.parametrize("data", [b"", b"x", b"odd!!", bytes(range(200))])
def test_pseudo_header_gives_scapys_tcp_checksum(data):
    """scapy's TCP checksum is checksum(pseudo_header + segment), odd lengths included."""
    packet = IP(bytes(IP(src=PEER, dst=NIC) / TCP(sport=1, dport=2, seq=9) / data))
    segment = bytes(packet[TCP])
    pseudo = ipv4.pseudo_header(PEER, NIC, IpProto.TCP, len(segment))
    assert pseudo == ipaddress.IPv4Address(PEER).packed + ipaddress.IPv4Address(NIC).packed \
        + bytes([0, 6]) + len(segment).to_bytes(2, "big")
    assert ipv4.checksum_ok(pseudo + segment)
    zeroed = segment[:16] + bytes(2) + segment[18:]
    assert ipv4.checksum(pseudo + zeroed) == packet[TCP].chksum
    with pytest.raises(ValueError):
        ipv4.pseudo_header(PEER, NIC, IpProto.TCP, 1 << 16)


def test_send_header_matches_scapy():
    header = ipv4.send_header(src=NIC, dst=PEER, proto=IpProto.TCP, identification=0x1234)
    packet = ipv4.build(header, b"segment")
    theirs = IP(packet)
    assert (theirs.version, theirs.ihl, theirs.tos, theirs.len) == (4, 5, 0, 27)
    assert (theirs.id, int(theirs.flags), theirs.frag) == (0x1234, 2, 0)  # DF only
    assert (theirs.ttl, theirs.proto, theirs.src, theirs.dst) == (DEFAULT_TTL, 6, NIC, PEER)
    recomputed = IP(bytes(IP(src=NIC, dst=PEER, proto=6, id=0x1234, flags="DF", ttl=64)
                          / b"segment"))
    assert theirs.chksum == recomputed.chksum
    assert bytes(theirs) == packet
    assert ipv4.header_checksum_ok(packet)


def test_parse_scapy_packet_with_options_and_fragment():
    raw = bytes(IP(src=PEER, dst=NIC, id=7, flags="MF", frag=3, ttl=5, tos=0xB8,
                   options=[IPOption_RR(routers=["1.2.3.4"])]) / TCP() / b"data")
    header, payload = ipv4.parse(raw)
    assert header.ihl == IP(raw).ihl > 5
    assert header.options == raw[IPV4_HEADER_LEN:header.length]
    assert (header.mf, header.df, header.fragment_offset, header.is_fragment) == (True, False, 3, True)
    assert (header.identification, header.ttl, header.tos) == (7, 5, 0xB8)
    assert header.proto is IpProto.TCP
    assert header.src == ipaddress.IPv4Address(PEER) and header.dst == ipaddress.IPv4Address(NIC)
    assert header.checksum == IP(raw).chksum and ipv4.header_checksum_ok(raw)
    assert payload == raw[header.length:] and payload.endswith(b"data")
    assert bytes(IP(raw).payload) == payload
    assert ipv4.build(header, payload) == raw


def test_padding_after_total_length_is_ignored():
    raw = bytes(IP(src=PEER, dst=NIC) / b"xy")
    header, payload = ipv4.parse(raw + bytes(24))
    assert payload == b"xy" and header.total_length == len(raw)


@pytest.mark.parametrize("mutate, text", [
    (lambda p: p[:19], "shorter"),
    (lambda p: bytes([0x65]) + p[1:], "version 6"),
    (lambda p: bytes([0x44]) + p[1:], "IHL 4"),
    (lambda p: bytes([0x4F]) + p[1:], "beyond"),
    (lambda p: p[:2] + (19).to_bytes(2, "big") + p[4:], "total length 19"),
    (lambda p: p[:2] + (len(p) + 1).to_bytes(2, "big") + p[4:], "total length"),
])
def test_parse_rejects(mutate, text):
    packet = bytes(IP(src=PEER, dst=NIC) / b"abcd")
    with pytest.raises(ValueError, match=text):
        ipv4.parse(mutate(packet))


def test_bad_checksum_detected():
    packet = bytearray(bytes(IP(src=PEER, dst=NIC) / b"abcd"))
    packet[10] ^= 0x40
    assert not ipv4.header_checksum_ok(packet)
    assert not ipv4.header_checksum_ok(b"\x45")
    assert ipv4.parse(packet)[0].checksum == int.from_bytes(packet[10:12], "big")


@pytest.mark.parametrize("kwargs, error", [
    (dict(ttl=256), ValueError), (dict(fragment_offset=1 << 13), ValueError),
    (dict(options=b"\x01\x01\x01"), ValueError), (dict(options=bytes(44)), ValueError),
    (dict(total_length=19), ValueError), (dict(proto=-1), ValueError),
    (dict(src="1.2.3"), ValueError), (dict(dst=b"\x01\x02"), ValueError),
    (dict(src=1.5), TypeError), (dict(checksum=1 << 16), ValueError),
])
def test_header_validation(kwargs, error):
    fields = dict(proto=IpProto.TCP, src=PEER, dst=NIC) | kwargs
    with pytest.raises(error):
        ipv4.Ipv4Header(**fields)


def test_address_forms():
    want = ipaddress.IPv4Address(PEER)
    for value in (PEER, want.packed, int(want), want):
        assert ipv4.ipv4_address(value) == want


def test_ident_counter_wraps():
    counter = ipv4.IdentCounter(start=0xFFFE)
    assert [counter.take() for _ in range(3)] == [0xFFFE, 0xFFFF, 0]
    with pytest.raises(ValueError):
        ipv4.IdentCounter(start=1 << 16)


def test_rfc1624_example():
    # RFC 1624 section 4: HC 0xDD2F, a word 0x5555 becomes 0x3285: HC' 0x0000
    assert ipv4.update_checksum(0xDD2F, b"\x55\x55", b"\x32\x85") == 0x0000


@settings(max_examples=300)
@given(st.binary(min_size=2, max_size=64).filter(lambda b: len(b) % 2 == 0), st.data())
def test_incremental_update_equals_full_recompute(data, draw):
    words = len(data) // 2
    start = draw.draw(st.integers(0, words - 1))
    end = draw.draw(st.integers(start + 1, words))
    new_words = draw.draw(st.binary(min_size=2 * (end - start), max_size=2 * (end - start)))
    new_data = data[:2 * start] + new_words + data[2 * end:]
    updated = ipv4.update_checksum(ipv4.checksum(data), data[2 * start:2 * end], new_words)
    if any(new_data):
        assert updated == ipv4.checksum(new_data)
    else:  # the one documented difference: all-zero data
        assert (updated, ipv4.checksum(new_data)) == (0x0000, 0xFFFF)


@settings(max_examples=200)
@given(st.integers(0, 255), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_ttl_decrement_update_verifies(ttl, ident, src, dst):
    header = ipv4.Ipv4Header(proto=6, src=src, dst=dst, ttl=ttl, identification=ident)
    raw = ipv4.build(header)
    new_ttl = (ttl - 1) & 0xFF
    new = ipv4.update_checksum(int.from_bytes(raw[10:12], "big"), raw[8:10],
                               bytes([new_ttl, raw[9]]))
    updated = raw[:8] + bytes([new_ttl]) + raw[9:10] + new.to_bytes(2, "big") + raw[12:]
    assert ipv4.header_checksum_ok(updated)
    assert updated == ipv4.build(ipv4.Ipv4Header(proto=6, src=src, dst=dst, ttl=new_ttl,
                                                 identification=ident))


@settings(max_examples=200)
@given(st.integers(0, 255), st.integers(0, 255), st.integers(0, 0xFFFF), st.booleans(),
       st.booleans(), st.integers(0, 0x1FFF), st.integers(0, 255), st.integers(0, 2**32 - 1),
       st.integers(0, 2**32 - 1), st.integers(0, 10).map(lambda n: bytes(range(4 * n))),
       st.binary(max_size=100))
def test_round_trip_with_scapy(proto, ttl, ident, df, mf, frag, tos, src, dst, options, payload):
    header = ipv4.Ipv4Header(proto=proto, src=src, dst=dst, ttl=ttl, identification=ident,
                             df=df, mf=mf, fragment_offset=frag, tos=tos, options=options)
    raw = ipv4.build(header, payload)
    parsed, body = ipv4.parse(raw)
    assert body == payload
    assert parsed == header.__class__(**{**header.__dict__, "total_length": len(raw),
                                         "checksum": parsed.checksum})
    assert ipv4.header_checksum_ok(raw)
    theirs = IP(raw)
    assert (theirs.proto, theirs.ttl, theirs.id, theirs.frag, theirs.tos, theirs.len) == \
        (proto, ttl, ident, frag, tos, len(raw))
    assert (theirs.src, theirs.dst) == (str(ipaddress.IPv4Address(src)),
                                        str(ipaddress.IPv4Address(dst)))
    assert int(theirs.flags) == (2 if df else 0) | (1 if mf else 0)
    del theirs.chksum
    assert IP(bytes(theirs)).chksum == parsed.checksum
