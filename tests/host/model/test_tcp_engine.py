"""The TCP offload engine's golden model (host/model/tcp_engine.py): handshakes against
scapy-built peers, SYN cookies under a flood, RFC 5961, two engines over a lossy link,
zero window, retries, in-order delivery, answers to strays and the parameter checks."""

import heapq
import itertools
import random

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.inet import IP, TCP

from rnic.host.model import tcp
from rnic.host.model.tcp_engine import (TcpEngine, check_cookie, cookie_mss_index,
                                        initial_sequence, syn_cookie)
from rnic.host.spec.tcp import SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import (COOKIE_MSS_TABLE, COOKIE_NO_WSCALE, COOKIE_TIME_SHIFT,
                                       TcpDrop, TcpEventKind, TcpStat, TcpState)

NIC, PEER = "169.254.7.2", "169.254.7.1"
NIC_PORT, PEER_PORT = 7000, 40000


def peer_segment(flags, seq=0, ack=0, payload=b"", options=(), window=65535,
                 sport=PEER_PORT, dport=NIC_PORT):
    """A segment from PEER to NIC built by scapy, checksum included."""
    packet = IP(src=PEER, dst=NIC) / TCP(sport=sport, dport=dport, flags=flags, seq=seq,
                                         ack=ack, window=window, options=list(options))
    return bytes(IP(bytes(packet / payload))[TCP])


def parsed(out):
    """The scapy view of an Outgoing (checksum verified on the way)."""
    assert tcp.checksum_ok(NIC, str(out.dst_ip), out.octets)
    return TCP(out.octets)


def kinds(engine):
    return [(event.conn, event.kind) for event in engine.events()]


def accept(engine, now=0, window=65535, options=(("MSS", 1460), ("WScale", 7)), seq=1000):
    """A passive open from a scapy peer; (conn, the peer's next seq, the NIC's next seq)."""
    engine.listen(NIC_PORT)
    (syn_ack,) = engine.receive(PEER, peer_segment("S", seq=seq, options=options), now)
    nic_seq = (parsed(syn_ack).seq + 1) % SEQ_MOD
    assert engine.receive(PEER, peer_segment("A", seq + 1, nic_seq, window=window), now) == []
    (event,) = engine.events()
    assert event.kind == TcpEventKind.ACCEPTED
    return event.conn, seq + 1, nic_seq


# -- handshakes ------------------------------------------------------------------------------

def test_passive_open_answers_with_a_cookie_and_accepts_its_ack():
    engine = TcpEngine(ip=NIC, rcv_scale=3, rcv_wnd=200000, cookie_secret=0x1234)
    engine.listen(NIC_PORT)
    (out,) = engine.receive(PEER, peer_segment("S", seq=77, options=[("MSS", 1400),
                                                                      ("WScale", 5)]), 100)
    seg = parsed(out)
    assert str(out.dst_ip) == PEER and str(seg.flags) == "SA" and seg.ack == 78
    assert seg.window == 65535                      # a SYN's window is never scaled
    assert dict(seg.options)["MSS"] == 1460 and dict(seg.options)["WScale"] == 3
    assert seg.seq == syn_cookie(0x1234, PEER_IP_INT, PEER_PORT, NIC_PORT, 77, 100,
                                 COOKIE_MSS_TABLE.index(1400), 5)
    assert all(engine.state(c) == TcpState.CLOSED for c in range(16))     # no state kept
    assert engine.receive(PEER, peer_segment("A", 78, seg.seq + 1, window=100), 150) == []
    assert engine.events()[0].detail == (out.dst_ip, PEER_PORT, NIC_PORT)
    assert engine.state(0) == TcpState.ESTABLISHED
    engine.write(0, b"x" * 100000)
    sent = engine.poll(150)
    assert sum(len(o.segment.payload) for o in sent) == 100 << 5     # the peer's shift of 5
    assert all(len(o.segment.payload) <= 1400 for o in sent)
    assert sent[0].segment.window == 200000 >> 3


def test_passive_open_without_window_scale_scales_nothing():
    engine = TcpEngine(ip=NIC, rcv_scale=3, rcv_wnd=200000)
    conn, seq, nic_seq = accept(engine, options=[("MSS", 536)])
    engine.write(conn, b"y" * 3000)
    sent = engine.poll(0)
    assert [len(o.segment.payload) for o in sent][:2] == [536, 536]
    assert sent[0].segment.window == 65535


def test_a_bad_cookie_is_answered_with_a_reset():
    engine = TcpEngine(ip=NIC)
    engine.listen(NIC_PORT)
    (syn_ack,) = engine.receive(PEER, peer_segment("S", seq=5), 0)
    bad = (parsed(syn_ack).seq + 1 + (1 << 12)) % SEQ_MOD
    (rst,) = engine.receive(PEER, peer_segment("A", 6, bad), 0)
    assert str(parsed(rst).flags) == "R" and parsed(rst).seq == bad
    assert engine.counters[TcpDrop.BAD_COOKIE] == 1 and engine.events() == []
    # The same cookie, too old: three time counters later it is no longer taken.
    good = (parsed(syn_ack).seq + 1) % SEQ_MOD
    counter = 1 << COOKIE_TIME_SHIFT
    (rst,) = engine.receive(PEER, peer_segment("A", 6, good), 3 * counter)
    assert str(parsed(rst).flags) == "R" and engine.counters[TcpDrop.BAD_COOKIE] == 2
    assert engine.receive(PEER, peer_segment("A", 6, good), 2 * counter) == []
    assert kinds(engine) == [(0, TcpEventKind.ACCEPTED)]


def test_a_cookie_opens_only_at_the_peers_first_octet():
    """The handshake's ACK and the first data segment are lost: the second segment returns
    the cookie but for another sequence number, so it would open the connection with a
    wrong IRS (as if the first segment's octets had arrived). It is dropped without a RST
    (the peer sends it again); the first segment, sent again, opens the connection, and
    the second, sent again, follows it."""
    engine = TcpEngine(ip=NIC)
    engine.listen(NIC_PORT)
    (syn_ack,) = engine.receive(PEER, peer_segment("S", seq=1000), 0)
    nic_seq = (parsed(syn_ack).seq + 1) % SEQ_MOD
    first, second = b"a" * 100, b"b" * 100
    assert engine.receive(PEER, peer_segment("PA", 1101, nic_seq, second), 5) == []
    assert engine.counters[TcpDrop.BAD_COOKIE] == 1 and engine.events() == []
    engine.receive(PEER, peer_segment("PA", 1001, nic_seq, first), 9)
    engine.receive(PEER, peer_segment("PA", 1101, nic_seq, second), 9)
    assert kinds(engine) == [(0, TcpEventKind.ACCEPTED)]
    assert engine.read(0) == first + second


def test_active_open_connects():
    engine = TcpEngine(ip=NIC, rcv_scale=2, iss_secret=9)
    (syn,) = engine.connect(3, remote_ip=PEER, remote_port=PEER_PORT, local_port=NIC_PORT,
                            now=10)
    seg = parsed(syn)
    assert str(seg.flags) == "S" and dict(seg.options) == {"MSS": 1460, "WScale": 2,
                                                           "NOP": None}
    assert seg.seq == initial_sequence(9, engine.ip, NIC_PORT, PEER_IP_INT, PEER_PORT, 10)
    assert engine.state(3) == TcpState.SYN_SENT
    # a SYN without ACK (simultaneous open) is dropped
    assert engine.receive(PEER, peer_segment("S", seq=500), 11) == []
    assert engine.counters[TcpDrop.SIMULTANEOUS_OPEN] == 1
    (ack,) = engine.receive(PEER, peer_segment("SA", 500, seg.seq + 1,
                                               options=[("MSS", 1000)]), 12)
    assert str(parsed(ack).flags) == "A" and parsed(ack).ack == 501
    assert parsed(ack).seq == seg.seq + 1
    assert kinds(engine) == [(3, TcpEventKind.CONNECTED)]
    assert engine.state(3) == TcpState.ESTABLISHED
    engine.write(3, b"z" * 5000)
    assert {len(o.segment.payload) for o in engine.poll(12)} == {1000}     # peer MSS 1000


def test_active_open_refused():
    engine = TcpEngine(ip=NIC)
    (syn,) = engine.connect(0, remote_ip=PEER, remote_port=PEER_PORT, local_port=NIC_PORT,
                            now=0)
    iss = parsed(syn).seq
    (rst,) = engine.receive(PEER, peer_segment("SA", 1, iss + 5), 1)   # a wrong ack: RST
    assert str(parsed(rst).flags) == "R" and parsed(rst).seq == iss + 5
    assert engine.receive(PEER, peer_segment("R", 0), 1) == []           # RST without ACK
    assert engine.state(0) == TcpState.SYN_SENT
    assert engine.receive(PEER, peer_segment("RA", 0, iss + 1), 2) == []
    assert kinds(engine) == [(0, TcpEventKind.REFUSED)]
    assert engine.state(0) == TcpState.CLOSED


def test_syn_is_sent_again_with_backoff():
    engine = TcpEngine(ip=NIC, rto_initial=300, max_retries=2)
    engine.connect(0, remote_ip=PEER, remote_port=PEER_PORT, local_port=NIC_PORT, now=0)
    times = []
    while (deadline := engine.next_deadline()) is not None:
        out = engine.poll(deadline)
        times.append((deadline, [str(parsed(o).flags) for o in out]))
    assert times == [(300, ["S"]), (900, ["S"]), (2100, [])]
    assert kinds(engine) == [(0, TcpEventKind.LOST)]


def test_an_echo_active_open_with_the_drivers_iss():
    """The driver's ISS is the SYN's; an echo connection opened actively advertises at
    most its ring and sends back what arrives."""
    engine = TcpEngine(ip=NIC, tx_ring=4096, rcv_wnd=65535)
    (syn,) = engine.connect(1, remote_ip=PEER, remote_port=PEER_PORT, local_port=NIC_PORT,
                            now=0, iss=SEQ_MOD - 1, echo=True)
    assert parsed(syn).seq == SEQ_MOD - 1 and parsed(syn).window == 4096
    (ack,) = engine.receive(PEER, peer_segment("SA", 700, 0), 1)
    assert parsed(ack).ack == 701 and parsed(ack).window == 4096
    (echo,) = engine.receive(PEER, peer_segment("A", 701, 0, payload=b"ping"), 2)
    assert echo.segment.payload == b"ping" and echo.segment.seq == 0
    assert engine.read(1) == b""
    with pytest.raises(ValueError, match="iss"):
        engine.connect(2, remote_ip=PEER, remote_port=1, local_port=2, now=0, iss=SEQ_MOD)


PEER_IP_INT = int(tcp.ipv4.ipv4_address(PEER))


# -- SYN flood --------------------------------------------------------------------------------

def test_a_syn_flood_holds_no_connection_and_a_peer_still_gets_in():
    engine = TcpEngine(ip=NIC, connections=4)
    engine.listen(NIC_PORT)
    rng = random.Random(1)
    for i in range(10_000):
        src = rng.randrange(1, 2**32)
        syn = tcp.TcpSegment(src_port=rng.randrange(1, 65536), dst_port=NIC_PORT,
                             seq=rng.randrange(SEQ_MOD), flags=TcpFlag.SYN,
                             options=tcp.build_options(mss=1460)).build(src, NIC)
        (answer,) = engine.receive(src, syn, i // 10)
        assert answer.segment.flags == TcpFlag.SYN | TcpFlag.ACK
    assert all(engine.state(c) == TcpState.CLOSED for c in range(4))
    conn, _, _ = accept(engine, now=1000)
    assert conn == 0 and engine.state(0) == TcpState.ESTABLISHED


def test_no_free_connection_drops_the_ack():
    engine = TcpEngine(ip=NIC, connections=1)
    accept(engine)
    (syn_ack,) = engine.receive(PEER, peer_segment("S", seq=9, sport=5555), 0)
    assert engine.receive(PEER, peer_segment("A", 10, parsed(syn_ack).seq + 1,
                                              sport=5555), 0) == []
    assert engine.counters[TcpDrop.NO_FREE_CONNECTION] == 1


@settings(max_examples=200, deadline=None)
@given(secret=st.integers(0, SEQ_MOD - 1), ip=st.integers(0, SEQ_MOD - 1),
       port=st.integers(1, 65535), now=st.integers(0, 2**40),
       mss=st.integers(1, 65535), wscale=st.sampled_from([*range(15), COOKIE_NO_WSCALE]),
       age=st.integers(0, 4 << COOKIE_TIME_SHIFT))
def test_cookie_round_trip(secret, ip, port, now, mss, wscale, age):
    index = cookie_mss_index(mss)
    assert COOKIE_MSS_TABLE[index] <= max(mss, COOKIE_MSS_TABLE[0])
    isn = secret ^ ip
    cookie = syn_cookie(secret, ip, port, NIC_PORT, isn, now, index, wscale)
    found = check_cookie(secret, ip, port, NIC_PORT, isn, now + age, cookie)
    if ((now + age) >> COOKIE_TIME_SHIFT) - (now >> COOKIE_TIME_SHIFT) <= 2:
        assert found == (index, wscale)
    else:
        assert found is None
    for other in (dict(secret=secret ^ 1), dict(isn=(isn + 1460) % SEQ_MOD)):
        args = {"secret": secret, "isn": isn, **other}
        assert check_cookie(args["secret"], ip, port, NIC_PORT, args["isn"], now,
                            cookie) is None or _cookie_collides(ip, port, now, cookie, **args)


def _cookie_collides(ip, port, now, cookie, *, secret, isn):
    """A 20-bit hash collides once in 2**20; hypothesis may find one, which is fine."""
    return syn_cookie(secret, ip, port, NIC_PORT, isn, now, cookie & 7,
                      cookie >> 8 & 15) == cookie


# -- RFC 5961 ---------------------------------------------------------------------------------

def test_rst_and_syn_on_an_established_connection():
    engine = TcpEngine(ip=NIC)
    conn, seq, nic_seq = accept(engine)
    (ack,) = engine.receive(PEER, peer_segment("R", seq + 10), 1)        # in window, not exact
    assert str(parsed(ack).flags) == "A" and parsed(ack).ack == seq
    assert parsed(ack).seq == nic_seq
    assert engine.counters[TcpDrop.CHALLENGE_ACK] == 1
    assert engine.receive(PEER, peer_segment("R", seq + 100000), 1) == []   # out of window
    (ack,) = engine.receive(PEER, peer_segment("S", seq + 5), 1)        # SYN: challenge ACK
    assert str(parsed(ack).flags) == "A" and parsed(ack).ack == seq
    assert engine.counters[TcpDrop.CHALLENGE_ACK] == 2
    assert engine.state(conn) == TcpState.ESTABLISHED and engine.events() == []
    assert engine.receive(PEER, peer_segment("R", seq), 2) == []          # exact: reset
    assert kinds(engine) == [(conn, TcpEventKind.RESET)]
    assert engine.state(conn) == TcpState.CLOSED


def test_ack_of_unsent_data_and_of_old_data():
    engine = TcpEngine(ip=NIC)
    conn, seq, nic_seq = accept(engine)
    (ack,) = engine.receive(PEER, peer_segment("A", seq, nic_seq + 10, b"abc"), 1)
    assert parsed(ack).ack == seq and engine.counters[TcpDrop.BAD_ACK] == 1
    assert engine.read(conn) == b""
    old = (nic_seq - (65535 << 7) - 1) % SEQ_MOD          # MAX.SND.WND is 65535 << 7
    assert engine.receive(PEER, peer_segment("A", seq, old, b"abc"), 1) == []
    assert engine.counters[TcpDrop.OLD_ACK] == 1 and engine.read(conn) == b""
    assert engine.receive(PEER, peer_segment("A", seq, nic_seq, b"abc"), 1) == []
    assert engine.read(conn) == b"abc"


# -- in-order delivery, ACKs ------------------------------------------------------------------

def test_out_of_order_and_trimmed_retransmission():
    engine = TcpEngine(ip=NIC, delack=40)
    conn, seq, nic_seq = accept(engine)
    (dup,) = engine.receive(PEER, peer_segment("A", seq + 100, nic_seq, b"h" * 50), 1)
    assert parsed(dup).ack == seq and engine.read(conn) == b""
    assert engine.counters[TcpDrop.OUT_OF_ORDER] == 1
    data = bytes(range(256)) * 2
    assert engine.receive(PEER, peer_segment("A", seq, nic_seq, data[:200]), 2) == []
    assert engine.next_deadline() == 42                                   # delayed ACK
    (ack,) = engine.receive(PEER, peer_segment("A", seq + 100, nic_seq, data[100:300]), 3)
    assert parsed(ack).ack == seq + 300                                   # trimmed, ACKed at once
    assert engine.read(conn) == data[:300]
    # entirely old: unacceptable, ACKed, dropped
    (ack,) = engine.receive(PEER, peer_segment("A", seq, nic_seq, data[:100]), 4)
    assert parsed(ack).ack == seq + 300 and engine.read(conn) == b""
    assert engine.counters[TcpDrop.NOT_ACCEPTABLE] == 1


def test_every_second_full_segment_is_acked_at_once_else_delayed():
    engine = TcpEngine(ip=NIC, delack=40)
    conn, seq, nic_seq = accept(engine)
    assert engine.receive(PEER, peer_segment("A", seq, nic_seq, b"a" * 1460), 5) == []
    (ack,) = engine.receive(PEER, peer_segment("A", seq + 1460, nic_seq, b"b" * 1460), 6)
    assert parsed(ack).ack == seq + 2920
    assert engine.receive(PEER, peer_segment("A", seq + 2920, nic_seq, b"c" * 10), 7) == []
    assert engine.poll(46) == []
    (ack,) = engine.poll(47)
    assert parsed(ack).ack == seq + 2930 and engine.next_deadline() is None


def test_congestion_avoidance_adds_one_mss_per_window_acknowledged():
    """Byte counting (RFC 5681 section 3.1): above ssthresh, cwnd grows by one MSS once a
    whole cwnd of octets is acknowledged, whatever the ACKs' sizes."""
    engine = TcpEngine(ip=NIC)
    conn, seq, nic_seq = accept(engine)
    tcb = engine._table[conn]
    tcb.cwnd = tcb.ssthresh = 4 * 1460
    engine.write(conn, bytes(20 * 1460))
    assert len(engine.poll(1)) == 4
    acked = nic_seq
    for k, size in enumerate((1460, 730, 730, 1460, 1460)):
        acked = (acked + size) % SEQ_MOD
        engine.receive(PEER, peer_segment("A", seq, acked), 2 + k)
        want = 5 * 1460 if sum((1460, 730, 730, 1460, 1460)[:k + 1]) >= 4 * 1460 else 4 * 1460
        assert tcb.cwnd == want, k


def test_an_empty_segment_at_the_windows_right_edge_is_taken():
    """A peer whose octets up to our window's edge were all lost sends its ACKs at SEQ =
    RCV.NXT + RCV.WND: taken (as Linux does), so its ACK reaches us; one past is not."""
    engine = TcpEngine(ip=NIC, rcv_wnd=4000)
    conn, seq, nic_seq = accept(engine)
    engine.write(conn, b"x" * 100)
    engine.poll(1)
    assert engine.receive(PEER, peer_segment("A", seq + 4000, nic_seq + 100), 2) == []
    assert engine.counters[TcpDrop.NOT_ACCEPTABLE] == 0
    assert engine.next_deadline() is None                       # all acknowledged
    (dup,) = engine.receive(PEER, peer_segment("A", seq + 4001, nic_seq + 100), 3)
    assert parsed(dup).ack == seq and engine.counters[TcpDrop.NOT_ACCEPTABLE] == 1


def test_a_pure_ack_carries_the_highest_sequence_number_sent():
    """After a timeout SND.NXT goes back to SND.UNA, but a pure ACK still carries SND.MAX:
    a peer that holds our octets up to it would take an older SEQ for a duplicate and
    ignore the ACK and window it brings."""
    engine = TcpEngine(ip=NIC, rto_initial=200, rto_min=200)
    conn, seq, nic_seq = accept(engine)
    engine.write(conn, b"y" * 2000)
    assert sum(len(o.segment.payload) for o in engine.poll(0)) == 2000
    (again,) = engine.poll(200)
    assert parsed(again).seq == nic_seq and len(again.segment.payload) == 1460
    (dup,) = engine.receive(PEER, peer_segment("A", seq + 10, nic_seq, b"z"), 201)
    assert parsed(dup).seq == nic_seq + 2000 and parsed(dup).ack == seq

# -- zero window, retries ---------------------------------------------------------------------

def test_zero_window_probes_then_data_resumes():
    engine = TcpEngine(ip=NIC, rto_initial=1000)
    conn, seq, nic_seq = accept(engine, window=0)
    data = bytes(random.Random(3).randrange(256) for _ in range(3000))
    assert engine.write(conn, data) == 3000
    assert engine.poll(0) == [] and engine.next_deadline() == 1000
    (probe,) = engine.poll(1000)
    assert probe.segment.seq == nic_seq and probe.segment.payload == data[:1]
    assert engine.receive(PEER, peer_segment("A", seq, nic_seq, window=0), 1001) == []
    assert engine.next_deadline() == 3000                                  # backed off
    # the probe's octet is past the peer's closed window: a pure ACK stays at its edge
    (dup,) = engine.receive(PEER, peer_segment("A", seq - 1, nic_seq, b"o", window=0), 1002)
    assert parsed(dup).seq == nic_seq
    (probe,) = engine.poll(3000)
    assert probe.segment.seq == nic_seq and probe.segment.payload == data[:1]
    assert engine.stats[TcpStat.PROBES] == 2
    sent = engine.receive(PEER, peer_segment("A", seq, nic_seq, window=65535), 3001)
    assert sent[0].segment.seq == nic_seq
    assert b"".join(o.segment.payload for o in sent) == data


def test_retries_exhausted_sends_rst_and_reports_lost():
    engine = TcpEngine(ip=NIC, max_retries=3, rto_initial=200, rto_min=200, rto_max=1000)
    conn, seq, nic_seq = accept(engine)
    engine.write(conn, b"q" * 100)
    (first,) = engine.poll(0)
    log = []
    while (deadline := engine.next_deadline()) is not None:
        log.append((deadline, [(str(parsed(o).flags), parsed(o).seq, len(o.segment.payload))
                               for o in engine.poll(deadline)]))
    assert log == [(200, [("PA", nic_seq, 100)]), (600, [("PA", nic_seq, 100)]),
                   (1400, [("PA", nic_seq, 100)]), (2400, [("R", nic_seq + 100, 0)])]
    assert kinds(engine) == [(conn, TcpEventKind.LOST)]
    assert engine.stats[TcpStat.TIMEOUTS] == 4 and engine.stats[TcpStat.RETRANSMITS] == 3


# -- strays -----------------------------------------------------------------------------------

def test_segments_for_no_connection_get_the_right_reset():
    engine = TcpEngine(ip=NIC)
    (rst,) = engine.receive(PEER, peer_segment("A", 10, 12345, b"data"), 0)
    assert str(parsed(rst).flags) == "R" and parsed(rst).seq == 12345
    (rst,) = engine.receive(PEER, peer_segment("S", 10), 0)
    assert str(parsed(rst).flags) == "RA" and (parsed(rst).seq, parsed(rst).ack) == (0, 11)
    (rst,) = engine.receive(PEER, peer_segment("F", 10, payload=b"abc"), 0)
    assert str(parsed(rst).flags) == "RA" and parsed(rst).ack == 14
    assert parsed(rst).sport == NIC_PORT and parsed(rst).dport == PEER_PORT
    assert engine.receive(PEER, peer_segment("R", 10), 0) == []
    assert engine.receive(PEER, peer_segment("RA", 10, 5), 0) == []
    assert engine.counters[TcpDrop.NO_CONNECTION] == 5


def test_malformed_options_are_dropped_without_answer():
    engine = TcpEngine(ip=NIC)
    engine.listen(NIC_PORT)
    syn = tcp.TcpSegment(src_port=PEER_PORT, dst_port=NIC_PORT, seq=1, flags=TcpFlag.SYN,
                         options=b"\x02\x01\x00\x00").build(PEER, NIC)
    assert engine.receive(PEER, syn, 0) == []
    assert engine.counters[TcpDrop.BAD_OPTIONS] == 1


def test_close_from_both_ends():
    engine = TcpEngine(ip=NIC, time_wait=500)
    conn, seq, nic_seq = accept(engine)
    (ack,) = engine.receive(PEER, peer_segment("FA", seq, nic_seq, b"bye"), 1)
    assert parsed(ack).ack == seq + 4 and engine.read(conn) == b"bye"
    assert kinds(engine) == [(conn, TcpEventKind.PEER_CLOSED)]
    assert engine.state(conn) == TcpState.CLOSE_WAIT
    engine.write(conn, b"end")
    (fin,) = engine.close(conn, 2)
    assert str(parsed(fin).flags) == "FPA" and fin.segment.payload == b"end"
    assert engine.state(conn) == TcpState.LAST_ACK
    assert engine.receive(PEER, peer_segment("A", seq + 4, nic_seq + 4), 3) == []
    assert kinds(engine) == [(conn, TcpEventKind.CLOSED)]
    # active close: FIN-WAIT-1, FIN-WAIT-2, TIME-WAIT, CLOSED after time_wait
    conn, seq, nic_seq = accept(engine, seq=5000)
    (fin,) = engine.close(conn, 10)
    assert str(parsed(fin).flags) == "FA" and engine.state(conn) == TcpState.FIN_WAIT_1
    engine.receive(PEER, peer_segment("A", seq, nic_seq + 1), 11)
    assert engine.state(conn) == TcpState.FIN_WAIT_2
    (ack,) = engine.receive(PEER, peer_segment("FA", seq, nic_seq + 1), 12)
    assert parsed(ack).ack == seq + 1 and engine.state(conn) == TcpState.TIME_WAIT
    assert engine.receive(PEER, peer_segment("R", seq + 1), 13) == []     # RFC 1337
    assert engine.counters[TcpDrop.TIME_WAIT_RST] == 1
    assert engine.poll(511) == [] and engine.state(conn) == TcpState.TIME_WAIT
    assert engine.poll(512) == [] and engine.state(conn) == TcpState.CLOSED
    assert kinds(engine) == [(conn, TcpEventKind.PEER_CLOSED), (conn, TcpEventKind.CLOSED)]


# -- FPDUs ------------------------------------------------------------------------------------

def test_fpdus_are_never_cut_for_size_and_cut_only_when_the_window_is_too_small():
    engine = TcpEngine(ip=NIC)
    conn, seq, nic_seq = accept(engine, window=1000, options=[("MSS", 1460)])
    with pytest.raises(ValueError, match="1461"):
        engine.write(conn, bytes(1461), fpdu_ends=[1461])
    assert engine.write(conn, bytes(1900), fpdu_ends=[600, 1900]) == 1900
    (first,) = engine.poll(0)
    assert len(first.segment.payload) == 600                 # the 1300-octet FPDU waits
    sent = engine.receive(PEER, peer_segment("A", seq, nic_seq + 600, window=1000), 1)
    assert [len(o.segment.payload) for o in sent] == [1000]  # nothing in flight: cut
    assert engine.stats[TcpStat.WINDOW_CUTS] == 1
    sent = engine.receive(PEER, peer_segment("A", seq, nic_seq + 1600, window=1000), 2)
    assert [len(o.segment.payload) for o in sent] == [300]
    assert engine.write(conn, bytes(70000), fpdu_ends=range(1000, 70001, 1000)) == 65000


# -- two engines over a lossy link ------------------------------------------------------------

A_IP, B_IP, A_PORT, B_PORT = "10.0.0.1", "10.0.0.2", 41000, 7174


class Link:
    """Both directions of a cable that loses, duplicates and reorders segments (a random
    delay of 1 to 4 ticks each); SYNs are never lost so that the handshake is the one
    forced near the sequence wrap."""

    def __init__(self, engines, seed, loss, duplicate):
        self.engines = {engine.ip: engine for engine in engines}
        self.rng = random.Random(seed)
        self.loss, self.duplicate = loss, duplicate
        self.queue, self.order = [], itertools.count()
        self.sent = {engine.ip: [] for engine in engines}

    def send(self, src, outs, now):
        for out in outs:
            self.sent[src.ip].append(out.segment)
            if not out.segment.flags & TcpFlag.SYN and self.rng.random() < self.loss:
                continue
            for _ in range(2 if self.rng.random() < self.duplicate else 1):
                heapq.heappush(self.queue, (now + self.rng.randint(1, 4), next(self.order),
                                            out.dst_ip, src.ip, out.octets))

    def deliver(self, now):
        while self.queue and self.queue[0][0] <= now:
            _, _, dst, src, octets = heapq.heappop(self.queue)
            engine = self.engines[dst]
            self.send(engine, engine.receive(src, octets, now), now)

    def next_time(self, now):
        times = [engine.next_deadline() for engine in self.engines.values()]
        times = [t for t in times if t is not None] + [entry[0] for entry in self.queue[:1]]
        return max(now + 1, min(times)) if times else None


class Writer:
    """Writes a stream into a connection as fast as its ring takes it (FPDU ends when
    given), reads what arrives, closes when all is written."""

    def __init__(self, engine, conn, data, ends=None):
        self.engine, self.conn, self.data, self.ends = engine, conn, data, ends
        self.at, self.next_end, self.closed = 0, 0, False
        self.got = bytearray()

    def step(self, link, now):
        if self.at < len(self.data):
            if self.ends is None:
                self.at += self.engine.write(self.conn, self.data[self.at:self.at + 100000])
            else:
                ends = self.ends[self.next_end:self.next_end + 64]
                accepted = self.engine.write(self.conn, self.data[self.at:ends[-1]],
                                             fpdu_ends=[end - self.at for end in ends])
                self.at += accepted
                while self.next_end < len(self.ends) and self.ends[self.next_end] <= self.at:
                    self.next_end += 1
        elif not self.closed:
            self.closed = True
            link.send(self.engine, self.engine.close(self.conn, now), now)
        self.got += self.engine.read(self.conn)


def near_wrap_handshake(a, b, now):
    """A connects to B (listening) without loss; both ISS within 512 KiB below 2**32."""
    b.listen(B_PORT)
    (syn,) = a.connect(0, remote_ip=B_IP, remote_port=B_PORT, local_port=A_PORT, now=now)
    (syn_ack,) = b.receive(A_IP, syn.octets, now)
    (ack,) = a.receive(B_IP, syn_ack.octets, now)
    assert b.receive(A_IP, ack.octets, now) == []
    assert [e.kind for e in a.events()] == [TcpEventKind.CONNECTED]
    assert [e.kind for e in b.events()] == [TcpEventKind.ACCEPTED]
    for seq in (syn.segment.seq, syn_ack.segment.seq):
        assert SEQ_MOD - 2**19 <= seq < SEQ_MOD
    return syn.segment.seq


def engines_near_the_wrap(**kwargs):
    """Two engines and a start tick that put both ISS just below 2**32: A's by the clock
    of its ISS, B's cookie by a search for a cookie secret."""
    a_ip, b_ip = tcp.ipv4.ipv4_address(A_IP), tcp.ipv4.ipv4_address(B_IP)
    base = initial_sequence(0, a_ip, A_PORT, b_ip, B_PORT, 0)
    now = (SEQ_MOD - 2**19 - base) % SEQ_MOD // 250 + 1
    code = kwargs.get("rcv_scale", 0)
    isn = initial_sequence(0, a_ip, A_PORT, b_ip, B_PORT, now)
    secret = next(s for s in itertools.count(1) if SEQ_MOD - 2**19 <= syn_cookie(
        s, a_ip, A_PORT, B_PORT, isn, now, cookie_mss_index(1460), code) < SEQ_MOD - 2**17)
    return TcpEngine(ip=A_IP, **kwargs), TcpEngine(ip=B_IP, cookie_secret=secret,
                                                   **kwargs), now


def transfer(fpdus, seed, **kwargs):
    """1 MiB each way over a lossy link, then both close; the link and the writers."""
    a, b, now = engines_near_the_wrap(**kwargs)
    iss = near_wrap_handshake(a, b, now)
    rng = random.Random(seed)
    a_data, b_data = rng.randbytes(1 << 20), rng.randbytes(1 << 20)
    ends = None
    if fpdus:
        ends = list(itertools.accumulate(rng.randint(24, 1460) for _ in range(2000)))
        ends = [end for end in ends if end < len(a_data)] + [len(a_data)]
    link = Link([a, b], seed, loss=0.02, duplicate=0.01)
    writers = [Writer(a, 0, a_data, ends), Writer(b, 0, b_data)]
    events = {a.ip: [], b.ip: []}
    start = now
    while True:
        assert now - start < 400_000, "the transfer did not finish"
        for writer in writers:
            writer.step(link, now)
        link.deliver(now)
        for engine in (a, b):
            link.send(engine, engine.poll(now), now)
            events[engine.ip] += engine.events()
        if all(TcpEventKind.CLOSED in [e.kind for e in events[w.engine.ip]] for w in writers):
            break
        now = link.next_time(now)
        assert now is not None, "nothing left to happen, and the transfer is not over"
    print(f"transfer over in {now - start} ticks")
    for writer in writers:
        writer.got += writer.engine.read(writer.conn)
    assert bytes(writers[0].got) == b_data and bytes(writers[1].got) == a_data
    return a, b, link, iss, ends, events


@pytest.mark.parametrize("fpdus", [False, True])
def test_two_engines_over_a_lossy_link(fpdus):
    # TIME-WAIT outlasts the longest RTO, so that the peer's last FIN, sent again when our
    # ACK is lost, still finds the connection (else a RST answers it, rightly).
    a, b, link, iss, ends, events = transfer(fpdus, seed=7, rcv_scale=2, rcv_wnd=131072,
                                             time_wait=120_000)
    for engine in (a, b):
        assert [e.kind for e in events[engine.ip]].count(TcpEventKind.PEER_CLOSED) == 1
        assert engine.state(0) == TcpState.CLOSED
    stats = {stat: a.stats[stat] + b.stats[stat] for stat in TcpStat}
    assert stats[TcpStat.RETRANSMITS] > 0 and stats[TcpStat.FAST_RETRANSMITS] > 0
    assert stats[TcpStat.TIMEOUTS] >= 0
    seqs = [seg.seq for seg in link.sent[a.ip] if seg.payload]
    assert any(seq < 2**20 for seq in seqs) and any(seq > SEQ_MOD - 2**20 for seq in seqs)
    if fpdus:
        assert a.stats[TcpStat.WINDOW_CUTS] == 0
        boundaries = {0, *ends}
        for seg in link.sent[a.ip]:
            if seg.payload:
                offset = tcp.seq_diff(seg.seq, iss + 1)
                assert offset in boundaries and offset + len(seg.payload) in boundaries


def test_echo_over_a_lossy_link():
    """The echo service (RFC 862) on a ring much smaller than the peer's data: every octet
    comes back once and in order, the echo's window never promises more than its ring
    holds (its writes always take everything), and the peer's FIN is answered by ours
    after the last octet."""
    a, b, now = engines_near_the_wrap(rcv_wnd=65535, tx_ring=8192, time_wait=120_000)
    b.listen(B_PORT, echo=True)
    (syn,) = a.connect(0, remote_ip=B_IP, remote_port=B_PORT, local_port=A_PORT, now=now)
    (syn_ack,) = b.receive(A_IP, syn.octets, now)
    assert syn_ack.segment.window == 8192
    link = Link([a, b], seed=3, loss=0.02, duplicate=0.01)
    link.send(a, a.receive(B_IP, syn_ack.octets, now), now)
    data = random.Random(3).randbytes(200_000)
    writer = Writer(a, 0, data)
    events = []
    start = now
    while TcpEventKind.CLOSED not in [e.kind for e in events]:
        assert now - start < 400_000, "the echo did not finish"
        writer.step(link, now)
        link.deliver(now)
        for engine in (a, b):
            link.send(engine, engine.poll(now), now)
        events += a.events()
        now = link.next_time(now)
    writer.got += a.read(0)
    assert bytes(writer.got) == data
    assert [e.kind for e in events].count(TcpEventKind.PEER_CLOSED) == 1
    assert b.read(0) == b"" and max(s.window for s in link.sent[b.ip]) <= 8192
    assert b.stats[TcpStat.RETRANSMITS] > 0


# -- parameters -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, value", [
    ("connections", 0), ("mss", 87), ("mss", 65496), ("rcv_scale", 15),
    ("rcv_wnd", 0), ("rcv_wnd", 65536), ("tx_ring", 0), ("rto_min", 0), ("rto_max", 100),
    ("rto_initial", 100), ("max_retries", 0), ("delack", 0), ("time_wait", -1),
    ("cookie_secret", 2**32), ("iss_secret", -1), ("mss", True), ("delack", 1.5),
])
def test_every_parameter_is_checked(name, value):
    with pytest.raises((ValueError, TypeError), match=name):
        TcpEngine(ip=NIC, **{name: value})
    if not isinstance(value, (bool, float)):
        with pytest.raises(ValueError, match=str(value)):
            TcpEngine(ip=NIC, **{name: value})


def test_bad_ip_and_calls_are_named():
    with pytest.raises(ValueError, match="ip"):
        TcpEngine(ip="1.2.3")
    engine = TcpEngine(ip=NIC, connections=2)
    with pytest.raises(ValueError, match="conn = 2"):
        engine.read(2)
    with pytest.raises(ValueError, match="not open"):
        engine.write(1, b"x")
    with pytest.raises(ValueError, match="port = 0"):
        engine.listen(0)
    with pytest.raises(TypeError, match="echo must be a bool, not 1"):
        engine.listen(7, echo=1)
    with pytest.raises(ValueError, match="5"):
        engine.unlisten(5)
    engine.connect(0, remote_ip=PEER, remote_port=1, local_port=2, now=0)
    with pytest.raises(ValueError, match="in use"):
        engine.connect(0, remote_ip=PEER, remote_port=1, local_port=2, now=0)
    with pytest.raises(ValueError, match="already connection 0"):
        engine.connect(1, remote_ip=PEER, remote_port=1, local_port=2, now=0)
    with pytest.raises(ValueError, match="SYN_SENT"):
        engine.write(0, b"ab", fpdu_ends=[2])
