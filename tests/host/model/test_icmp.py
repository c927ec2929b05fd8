"""ICMP echo messages (host/model/icmp.py), checked against scapy."""

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.inet import ICMP

from rnic.host.model import icmp, ipv4
from rnic.host.spec.net import ICMP_HEADER_LEN, IcmpType


@pytest.mark.parametrize("size", [0, 1, 56, 1472])
def test_request_matches_scapy(size):
    payload = bytes(i & 0xFF for i in range(size))
    ours = icmp.build(icmp.IcmpEcho(type=IcmpType.ECHO_REQUEST, identifier=0x1A2B,
                                    sequence=7), payload)
    assert ours == bytes(ICMP(type=8, code=0, id=0x1A2B, seq=7) / payload)
    assert icmp.message_checksum_ok(ours)


def test_parse_scapy_reply():
    raw = bytes(ICMP(type=0, id=3, seq=0xFFFF) / b"ping")
    header, payload = icmp.parse(raw)
    assert header == icmp.IcmpEcho(type=IcmpType.ECHO_REPLY, identifier=3, sequence=0xFFFF,
                                   checksum=ICMP(raw).chksum)
    assert header.type is IcmpType.ECHO_REPLY and payload == b"ping"
    assert icmp.build(header, payload) == raw


def test_other_types_parse():
    raw = bytes(ICMP(type=3, code=1) / bytes(28))
    header, _ = icmp.parse(raw)
    assert header.type == 3 and header.code == 1 and not isinstance(header.type, IcmpType)


def test_short_message():
    with pytest.raises(ValueError, match="7 octets"):
        icmp.parse(bytes(7))
    assert not icmp.message_checksum_ok(b"\xff" * 7)


def test_bad_checksum_detected():
    raw = bytearray(bytes(ICMP(type=8, id=1, seq=1) / b"abc"))
    raw[-1] ^= 0x10
    assert not icmp.message_checksum_ok(raw)


@pytest.mark.parametrize("kwargs", [dict(type=256), dict(type=8, code=-1),
                                    dict(type=8, identifier=1 << 16), dict(type=8, checksum=1 << 16)])
def test_validation(kwargs):
    with pytest.raises(ValueError):
        icmp.IcmpEcho(**kwargs)


def test_echo_reply_of_scapy_request():
    request = bytes(ICMP(type=8, id=0x4242, seq=9) / (b"\xa5" * 56))
    reply = icmp.echo_reply(request)
    theirs = ICMP(reply)
    assert (theirs.type, theirs.code, theirs.id, theirs.seq) == (0, 0, 0x4242, 9)
    assert bytes(theirs.payload) == b"\xa5" * 56
    assert reply == bytes(ICMP(type=0, id=0x4242, seq=9) / (b"\xa5" * 56))


@settings(max_examples=200)
@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0, 255),
       st.binary(max_size=1472))
def test_reply_checksum_by_incremental_update(identifier, sequence, code, payload):
    """The gateware's way: the request's checksum updated for type 8 -> 0 and code -> 0."""
    request = icmp.build(icmp.IcmpEcho(type=IcmpType.ECHO_REQUEST, code=code,
                                       identifier=identifier, sequence=sequence), payload)
    reply = icmp.echo_reply(request)
    updated = ipv4.update_checksum(int.from_bytes(request[2:4], "big"), request[:2], b"\x00\x00")
    if any(reply[:2] + reply[4:]):
        assert updated == int.from_bytes(reply[2:4], "big")
    else:  # identifier, sequence and data all zero: the full sum's 0xFFFF
        assert (updated, reply[2:4]) == (0x0000, b"\xff\xff")
    assert icmp.message_checksum_ok(reply)


@settings(max_examples=200)
@given(st.sampled_from([0, 8]), st.integers(0, 255), st.integers(0, 0xFFFF),
       st.integers(0, 0xFFFF), st.binary(max_size=300))
def test_round_trip(type_, code, identifier, sequence, payload):
    header = icmp.IcmpEcho(type=type_, code=code, identifier=identifier, sequence=sequence)
    raw = icmp.build(header, payload)
    parsed, body = icmp.parse(raw)
    assert body == payload and len(raw) == ICMP_HEADER_LEN + len(payload)
    assert parsed == icmp.IcmpEcho(type=type_, code=code, identifier=identifier,
                                   sequence=sequence, checksum=parsed.checksum)
    assert icmp.message_checksum_ok(raw)
    theirs = ICMP(raw)
    del theirs.chksum
    assert ICMP(bytes(theirs)).chksum == parsed.checksum
