"""TCP segments, options, checksum and sequence arithmetic (host/model/tcp.py), checked
against scapy and the option rules of RFC 9293 section 3.2."""

import ipaddress

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.inet import IP, TCP

from rnic.host.model import tcp
from rnic.host.spec.tcp import MAX_WINDOW_SCALE, SEQ_MOD, TcpFlag, conn_hash

NIC, PEER = "169.254.7.2", "169.254.7.1"


def scapy_segment(options=(), payload=b"", **fields):
    """A segment from PEER to NIC built by scapy, checksum included."""
    packet = IP(src=PEER, dst=NIC) / TCP(options=list(options), **fields) / payload
    return bytes(IP(bytes(packet))[TCP])


# -- sequence numbers ------------------------------------------------------------------------

@pytest.mark.parametrize("a, b, diff", [
    (5, 3, 2), (3, 5, -2), (2, SEQ_MOD - 3, 5), (SEQ_MOD - 3, 2, -5),
    (0x80000000 - 1, 0, 0x7FFFFFFF), (0x80000000, 0, -0x80000000),
])
def test_seq_diff_wraps(a, b, diff):
    assert tcp.seq_diff(a, b) == diff
    assert tcp.seq_gt(a, b) == (diff > 0)
    assert tcp.seq_lt(a, b) == (diff < 0)
    assert tcp.seq_leq(a, a) and tcp.seq_geq(a, a)


def test_seq_add_and_window_near_the_wrap():
    start = SEQ_MOD - 10
    assert tcp.seq_add(start, 15) == 5
    assert tcp.seq_add(3, -5) == SEQ_MOD - 2
    assert tcp.seq_in_window(start, start, 20)
    assert tcp.seq_in_window(9, start, 20)          # 19 octets past start
    assert not tcp.seq_in_window(10, start, 20)     # the first octet beyond
    assert not tcp.seq_in_window(start - 1, start, 20)
    assert not tcp.seq_in_window(start, start, 0)   # an empty window holds nothing


# -- options ---------------------------------------------------------------------------------

def test_options_of_a_linux_syn():
    options = scapy_segment([("MSS", 1460), ("SAckOK", b""), ("Timestamp", (7, 0)),
                             ("NOP", None), ("WScale", 7)], flags="S")[20:]
    assert tcp.parse_options(options) == tcp.TcpOptions(
        mss=1460, window_scale=7, sack_permitted=True, timestamps=(7, 0))


def test_build_options_round_trip_and_scapy_reads_them():
    octets = tcp.build_options(mss=1460, window_scale=9, sack_permitted=True,
                               timestamps=(1, 2))
    assert len(octets) % 4 == 0
    assert tcp.parse_options(octets) == tcp.TcpOptions(mss=1460, window_scale=9,
                                                       sack_permitted=True, timestamps=(1, 2))
    segment = tcp.TcpSegment(src_port=1, dst_port=2, flags=TcpFlag.SYN, options=octets)
    theirs = dict(TCP(segment.build(PEER, NIC)).options)
    assert theirs["MSS"] == 1460 and theirs["WScale"] == 9 and theirs["Timestamp"] == (1, 2)


def test_eol_ends_the_list_and_unknown_kinds_are_skipped():
    assert tcp.parse_options(bytes([0, 2, 4, 5, 0xB4])) == tcp.TcpOptions()
    unknown = bytes([30, 6, 1, 2, 3, 4])              # a kind this NIC does not know
    assert tcp.parse_options(unknown + bytes([2, 4, 1, 0])) == tcp.TcpOptions(mss=256)


def test_known_kinds_with_another_length_are_skipped():
    assert tcp.parse_options(bytes([2, 3, 9, 3, 4, 9, 9, 1])) == tcp.TcpOptions()
    assert tcp.parse_options(bytes([4, 3, 0, 1])) == tcp.TcpOptions()


def test_window_scale_above_14_counts_as_14_and_the_last_option_wins():
    assert tcp.parse_options(bytes([3, 3, 15, 1])).window_scale == MAX_WINDOW_SCALE
    assert tcp.parse_options(bytes([2, 4, 1, 0, 2, 4, 2, 0])).mss == 512


@pytest.mark.parametrize("octets, offset", [
    (bytes([2]), 0),                       # no length octet
    (bytes([1, 1, 1, 8]), 3),              # a kind as the last octet
    (bytes([8, 0, 1, 1]), 0),              # length 0
    (bytes([30, 1, 1, 1]), 0),             # length 1
    (bytes([1, 30, 4, 1]), 1),             # runs past the options
    (bytes([2, 4, 5, 0xB4, 3, 5, 7, 1]), 4),
])
def test_malformed_options(octets, offset):
    with pytest.raises(tcp.MalformedOptions) as info:
        tcp.parse_options(octets)
    assert info.value.offset == offset


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_any_options_parse_or_are_malformed(octets):
    """Whatever the octets, parsing ends with options or MalformedOptions."""
    try:
        options = tcp.parse_options(octets)
    except tcp.MalformedOptions as exc:
        assert 0 <= exc.offset < len(octets)
    else:
        assert options.window_scale is None or options.window_scale <= MAX_WINDOW_SCALE


# -- segments and checksum -------------------------------------------------------------------

def test_build_matches_scapy():
    payload = b"hello, iWARP"
    mine = tcp.TcpSegment(src_port=40000, dst_port=5000, seq=SEQ_MOD - 4, ack=77,
                          flags=TcpFlag.PSH | TcpFlag.ACK, window=29200,
                          options=tcp.build_options(timestamps=(5, 6)),
                          payload=payload).build(PEER, NIC)
    theirs = scapy_segment([("NOP", None), ("NOP", None), ("Timestamp", (5, 6))],
                           payload, sport=40000, dport=5000, seq=SEQ_MOD - 4, ack=77,
                           flags="PA", window=29200)
    assert mine == theirs
    assert tcp.checksum_ok(PEER, NIC, mine)
    assert not tcp.checksum_ok(PEER, "169.254.7.3", mine)     # the pseudo-header counts


def test_odd_length_checksum():
    octets = tcp.TcpSegment(src_port=1, dst_port=2, payload=b"abc").build(PEER, NIC)
    assert octets == scapy_segment(payload=b"abc", sport=1, dport=2, flags=0, window=0,
                                   seq=0, ack=0)
    assert tcp.checksum_ok(PEER, NIC, octets)
    assert not tcp.checksum_ok(PEER, NIC, octets[:-1] + b"\x00")


def test_parse_round_trip_and_bad_offsets():
    octets = tcp.TcpSegment(src_port=1, dst_port=2, seq=3, ack=4, flags=TcpFlag.FIN,
                            window=5, urgent=6, options=bytes([1, 1, 1, 0]),
                            payload=b"xy").build(PEER, NIC)
    segment = tcp.TcpSegment.parse(octets)
    assert (segment.seq, segment.ack, segment.flags, segment.window, segment.urgent,
            segment.options, segment.payload) == (3, 4, TcpFlag.FIN, 5, 6,
                                                  bytes([1, 1, 1, 0]), b"xy")
    with pytest.raises(ValueError, match="data offset 4"):
        tcp.TcpSegment.parse(octets[:12] + bytes([0x40]) + octets[13:])
    with pytest.raises(ValueError, match="data offset 15"):
        tcp.TcpSegment.parse(octets[:12] + bytes([0xF0]) + octets[13:])
    with pytest.raises(ValueError, match="shorter"):
        tcp.TcpSegment.parse(octets[:19])


def test_bad_fields_are_refused_by_name():
    with pytest.raises(ValueError, match="seq"):
        tcp.TcpSegment(src_port=1, dst_port=2, seq=SEQ_MOD)
    with pytest.raises(ValueError, match="multiple of 4"):
        tcp.TcpSegment(src_port=1, dst_port=2, options=b"\x01")


def test_receive_info():
    octets = scapy_segment([("MSS", 1400), ("NOP", None), ("WScale", 20)], b"data",
                           sport=1234, dport=5000, seq=9, ack=10, flags="SA", window=100)
    info, payload = tcp.receive_info(PEER, octets)
    assert info == tcp.ReceiveInfo(
        src_ip=int(ipaddress.IPv4Address(PEER)), src_port=1234, dst_port=5000, seq=9, ack=10,
        flags=TcpFlag.SYN | TcpFlag.ACK, window=100, length=4, mss=1400,
        window_scale=MAX_WINDOW_SCALE)
    assert payload == b"data"
    bad = tcp.TcpSegment(src_port=1, dst_port=2, options=bytes([2, 4, 5, 0xB4, 8, 1, 0, 0]),
                         payload=b"p").build(PEER, NIC)
    info, payload = tcp.receive_info(PEER, bad)
    assert info.bad_options and info.mss == 0 and info.length == 1 and payload == b"p"


def test_conn_hash_folds_the_key():
    # key 0xA9FE0701_1F40_1388 (169.254.7.1:8000 -> 5000) in 5-bit pieces, XORed
    key = (0xA9FE0701 << 32) | (8000 << 16) | 5000
    folded = 0
    for shift in range(0, 64, 5):
        folded ^= (key >> shift) & 31
    assert conn_hash(0xA9FE0701, 8000, 5000, 5) == folded
    assert conn_hash(0, 0, 0, 9) == 0
    with pytest.raises(ValueError, match="bits"):
        conn_hash(1, 2, 3, 0)
