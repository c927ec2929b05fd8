"""Ethernet II frames, FCS and MAC helpers (host/model/ethernet.py), checked against scapy."""

import zlib

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.l2 import Dot1Q, Ether
from scapy.layers.inet import IP

from rnic.host.model import ethernet
from rnic.host.spec.net import (BROADCAST_MAC, DEFAULT_NIC_MAC, ETH_HEADER_LEN, MIN_FRAME_LEN,
                                EtherType)

PEER = "52:54:00:12:34:56"


def test_mac_text_round_trip():
    assert ethernet.parse_mac("02:00:0a:07:00:02") == DEFAULT_NIC_MAC
    assert ethernet.parse_mac("02-00-0A-07-00-02") == DEFAULT_NIC_MAC
    assert ethernet.format_mac(DEFAULT_NIC_MAC) == "02:00:0a:07:00:02"
    assert ethernet.format_mac(PEER) == PEER


@pytest.mark.parametrize("text", ["02:00:0a:07:00", "02:00:0a:07:00:02:03", "02:00-0a:07:00:02",
                                  "0g:00:0a:07:00:02", "2:00:0a:07:00:02", ""])
def test_bad_mac_text(text):
    with pytest.raises(ValueError, match="MAC address"):
        ethernet.parse_mac(text)


def test_bad_mac_values():
    with pytest.raises(ValueError, match="5 octets"):
        ethernet.mac_address(bytes(5))
    with pytest.raises(TypeError):
        ethernet.mac_address(0x020000000000)


def test_group_addresses():
    assert ethernet.is_multicast(BROADCAST_MAC) and ethernet.is_broadcast(BROADCAST_MAC)
    assert ethernet.is_multicast("01:00:5e:00:00:01")
    assert not ethernet.is_broadcast("01:00:5e:00:00:01")
    assert not ethernet.is_multicast(DEFAULT_NIC_MAC)


def test_build_matches_scapy_and_pads():
    header = ethernet.EthernetHeader(dst=PEER, src=DEFAULT_NIC_MAC, ethertype=EtherType.IPV4)
    frame = ethernet.build(header, b"abc")
    ours = Ether(frame)
    assert (ours.dst, ours.src, ours.type) == (PEER, "02:00:0a:07:00:02", 0x0800)
    assert len(frame) == MIN_FRAME_LEN
    assert frame == bytes(Ether(dst=PEER, src="02:00:0a:07:00:02", type=0x0800) / b"abc") \
        + bytes(MIN_FRAME_LEN - ETH_HEADER_LEN - 3)
    assert len(ethernet.build(header, b"abc", pad_short=False)) == ETH_HEADER_LEN + 3
    assert ethernet.build(header, bytes(100)) == header.to_bytes() + bytes(100)


def test_parse_scapy_frames():
    frame = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=PEER) / IP(dst="1.2.3.4"))
    header, payload = ethernet.parse(frame)
    assert header.dst == BROADCAST_MAC and header.src == ethernet.parse_mac(PEER)
    assert header.ethertype is EtherType.IPV4
    assert payload == frame[ETH_HEADER_LEN:]
    tagged = bytes(Ether(dst=PEER, src=PEER) / Dot1Q(vlan=5) / IP())
    header, payload = ethernet.parse(tagged)
    assert header.ethertype is EtherType.VLAN
    assert payload[:2] == (5).to_bytes(2, "big") and payload[2:4] == b"\x08\x00"
    header, _ = ethernet.parse(bytes(Ether(dst=PEER, src=PEER, type=0x86DD)))
    assert header.ethertype == 0x86DD and not isinstance(header.ethertype, EtherType)


def test_parse_short_frame():
    with pytest.raises(ValueError, match="13 octets"):
        ethernet.parse(bytes(13))


def test_header_validation():
    with pytest.raises(ValueError, match="16 bits"):
        ethernet.EthernetHeader(dst=PEER, src=PEER, ethertype=0x10000)
    with pytest.raises(TypeError):
        ethernet.EthernetHeader(dst=PEER, src=PEER, ethertype="0x800")


def test_fcs_vector_and_wire_order():
    # the CRC-32 check value of "123456789" (the catalogue's CRC-32/ISO-HDLC)
    assert ethernet.fcs(b"123456789") == 0xCBF43926
    assert ethernet.fcs_field(b"123456789") == bytes([0x26, 0x39, 0xF4, 0xCB])
    framed = ethernet.append_fcs(b"123456789")
    assert framed[-4:] == bytes.fromhex("2639f4cb")
    assert ethernet.check_fcs(framed)
    assert ethernet.strip_fcs(framed) == b"123456789"


def _crc32_bitwise(data):
    """The Ethernet CRC bit by bit, as 802.3 clause 3.2.9 describes it (reflected
    polynomial 0xEDB88320, register preset to ones, result inverted)."""
    crc = 0xFFFFFFFF
    for octet in data:
        crc ^= octet
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_fcs_of_a_minimum_frame():
    # a broadcast ARP request as Linux sends it, padded to 60 octets
    frame = bytes.fromhex("ffffffffffff525400123456" "0806" "0001080006040001"
                          "525400123456a9fe0701" "000000000000a9fe0702") + bytes(18)
    assert len(frame) == MIN_FRAME_LEN
    assert ethernet.fcs(frame) == _crc32_bitwise(frame)
    assert ethernet.fcs_field(frame) == _crc32_bitwise(frame).to_bytes(4, "little")
    assert ethernet.check_fcs(ethernet.append_fcs(frame))


def test_bad_fcs():
    framed = bytearray(ethernet.append_fcs(bytes(60)))
    framed[10] ^= 0x01
    assert not ethernet.check_fcs(framed)
    with pytest.raises(ValueError, match="FCS"):
        ethernet.strip_fcs(framed)
    assert not ethernet.check_fcs(b"\x00\x00")


@settings(max_examples=200)
@given(st.binary(min_size=0, max_size=1600))
def test_fcs_residue(frame):
    assert zlib.crc32(ethernet.append_fcs(frame)) == ethernet.FCS_RESIDUE
    assert ethernet.check_fcs(ethernet.append_fcs(frame))


@settings(max_examples=200)
@given(st.binary(min_size=6, max_size=6), st.binary(min_size=6, max_size=6),
       st.integers(0x0600, 0xFFFF), st.binary(max_size=1500))
def test_round_trip(dst, src, ethertype, payload):
    header = ethernet.EthernetHeader(dst=dst, src=src, ethertype=ethertype)
    frame = ethernet.build(header, payload, pad_short=False)
    assert ethernet.parse(frame) == (header, payload)
    scapy_frame = Ether(frame)
    # (a value below 0x0600 is an 802.3 length, which scapy parses as another layer)
    assert (scapy_frame.dst, scapy_frame.src, scapy_frame.type) == \
        (ethernet.format_mac(dst), ethernet.format_mac(src), ethertype)
