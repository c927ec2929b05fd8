"""TCP in the simulated NIC (sim/nic_device.py: NicTop with TcpOffload on Verilator): the
echo service set up through the TCP registers, a peer (the model's TCP engine, in wall
time like the NIC's time base) that connects, sends and reads back every octet, over a
clean cable and over one that loses, duplicates and reorders frames both ways; then the
close, the events the NIC queued, its TCB window and its counters.
"""

import random
import time

import pytest
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from rnic.host.driver.regs import Registers
from rnic.host.driver.tcp_regs import TcpConnectError, TcpEvent
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.net import DEFAULT_NIC_IP
from rnic.host.spec.tcp_engine import TcpDrop, TcpEventKind, TcpStat, TcpState
from rnic.host.tools.bench_tcp import PEER_IP, PEER_MAC, LossyLink, peer_frame
from rnic.sim.nic_device import NicSimDevice

ECHO_PORT = 7
PEER_PORT = 5001
#: The peer's timers in milliseconds (the NIC's time base ticks once per millisecond).
#: Its TIME-WAIT outlasts two of the NIC's retransmissions of its FIN: on the lossy cable
#: the peer's ACK of it may be lost, and the FIN sent again must still find the peer there
#: (else the peer's RST ends the NIC's connection RESET, as it should).
PEER_TIMERS = dict(rto_initial=300, rto_min=200, delack=10, time_wait=2500)


def open_nic():
    """The simulated NIC at its address, the peer in its ARP cache, TCP configured (the
    largest rings, delayed ACKs of 10 ms); with its :class:`Registers`."""
    dev = NicSimDevice()
    regs = Registers(dev)
    regs.set_ip(DEFAULT_NIC_IP, 24)
    regs.write_arp(0, PEER_IP, PEER_MAC)
    caps = regs.tcp_caps()
    assert (caps.tcp, caps.listeners, caps.ring_log2) == (True, 4, 16)
    regs.tcp_configure(secret=0x5EC2E7, delack=10, ring_log2=caps.ring_log2)
    return dev, regs


@pytest.fixture(scope="module")
def nic():
    dev, regs = open_nic()
    regs.tcp_listen(0, ECHO_PORT, echo=True)
    yield dev
    dev.close()


def segment(frame):
    """The TCP segment of a frame from the NIC to the peer (without the Ethernet padding of
    a short frame)."""
    ip = Ether(frame)[IP]
    assert (ip.src, ip.dst, ip.proto) == (DEFAULT_NIC_IP, PEER_IP, 6)
    return bytes(ip)[4 * ip.ihl:ip.len]


def events_until_closed(nic, regs):
    """The NIC's queued events until one is CLOSED (10 s at most)."""
    deadline = time.monotonic() + 10
    events = []
    while time.monotonic() < deadline and TcpEventKind.CLOSED not in [e.kind for e in events]:
        nic.run(2000)
        events += regs.tcp_events()
    return events


def echo(nic, data, *, rate, seed, local_port, timeout=240, active=False):
    """Connect to the echo service, send ``data``, read it all back, close; the octets that
    came back and the peer's engine. ``active``: the NIC opens the echo connection to the
    peer's port ``PEER_PORT`` from ``local_port`` (TCP_CMD.CONNECT)."""
    rng = random.Random(seed)
    to_nic, to_peer = LossyLink(rng, rate), LossyLink(rng, rate)
    peer = TcpEngine(ip=PEER_IP, connections=1, **PEER_TIMERS)
    t0 = time.monotonic()

    def now():
        return int((time.monotonic() - t0) * 1000) + 1

    def to_wire(segments):
        for f in to_nic.carry([peer_frame(s) for s in segments]):
            nic.send_frame(f)

    if active:
        peer.listen(PEER_PORT)
        Registers(nic).tcp_connect(PEER_IP, PEER_PORT, local_port, echo=True)
    else:
        to_wire(peer.connect(0, remote_ip=DEFAULT_NIC_IP, remote_port=ECHO_PORT,
                             local_port=local_port, now=now()))
    written, back, closed = 0, bytearray(), False
    while time.monotonic() - t0 < timeout:
        outs = []
        for f in to_peer.carry(nic.frames(timeout=0.002)):
            outs += peer.receive(DEFAULT_NIC_IP, segment(f), now())
        state = peer.state(0)
        if state is TcpState.ESTABLISHED and written < len(data):
            written += peer.write(0, data[written:])
        back += peer.read(0)
        if len(back) == len(data) and not closed:
            closed = True
            outs += peer.close(0, now())
        outs += peer.poll(now())
        to_wire(outs)
        if closed and state is TcpState.CLOSED:
            break
    return bytes(back), peer


@pytest.mark.parametrize("rate, size", [(0.0, 65536), (0.03, 65536)], ids=["clean", "lossy"])
def test_echo_service(nic, rate, size):
    regs = Registers(nic)
    before = regs.tcp_counters()
    data = random.Random(size).randbytes(size)
    back, peer = echo(nic, data, rate=rate, seed=7, local_port=40000 + int(rate * 100))
    assert back == data
    assert peer.state(0) is TcpState.CLOSED
    # the NIC queued the connection's events, in order, and it ended there too
    events = events_until_closed(nic, regs)
    assert [e.kind for e in events] == [TcpEventKind.ACCEPTED, TcpEventKind.PEER_CLOSED,
                                        TcpEventKind.CLOSED], events
    conn = events[0].conn
    assert regs.tcp_connection(conn).state is TcpState.CLOSED
    after = regs.tcp_counters()
    # at least a segment per MSS of the data, and nothing dropped on a clean cable
    assert after["tx_segments"] - before["tx_segments"] >= size // 1460
    assert after["events_lost"] == before["events_lost"]
    drops = {reason: after["drops"][reason] - before["drops"][reason] for reason in TcpDrop}
    if rate == 0:
        assert not any(drops.values()), drops
        assert peer.stats[TcpStat.RETRANSMITS] == 0
        assert after["retransmits"] == before["retransmits"]
    else:
        # the lost frames left holes (duplicate ACKs) and the peer sent them again; nothing
        # the peer sent was malformed or unacceptable
        assert drops[TcpDrop.OUT_OF_ORDER] > 0 and peer.stats[TcpStat.RETRANSMITS] > 0
        assert after["retransmits"] > before["retransmits"]     # the NIC's echo lost too
        assert drops[TcpDrop.BAD_OPTIONS] == drops[TcpDrop.BAD_ACK] == 0, drops


def test_active_open(nic):
    """The driver's CONNECT opens an echo connection from the NIC to a listening peer
    (its ISS the driver's RFC 6528 hash): the peer's 16 KiB come back, the connection
    reports CONNECTED, PEER_CLOSED and CLOSED; a second CONNECT of the same four-tuple
    while it is open is refused with the reason."""
    regs = Registers(nic)
    regs.tcp_events()
    data = random.Random("active").randbytes(16384)
    back, peer = echo(nic, data, rate=0.0, seed=9, local_port=42000, active=True)
    assert back == data and peer.state(0) is TcpState.CLOSED
    events = events_until_closed(nic, regs)
    assert [e.kind for e in events] == [TcpEventKind.CONNECTED, TcpEventKind.PEER_CLOSED,
                                        TcpEventKind.CLOSED], events
    conn = regs.tcp_connect(PEER_IP, PEER_PORT, 42001)
    with pytest.raises(TcpConnectError, match="connection already") as refused:
        regs.tcp_connect(PEER_IP, PEER_PORT, 42001)
    assert refused.value.result.name == "IN_USE"
    assert regs.tcp_connection(conn).state is TcpState.SYN_SENT
    regs.tcp_close(conn)
    nic.run(2000)
    assert regs.tcp_connection(conn).state is TcpState.CLOSED
    assert regs.tcp_events() == [TcpEvent(conn, TcpEventKind.CLOSED)]


def test_tcb_window_and_commands(nic):
    """An open connection's TCB through the window; ABORT ends it at once."""
    regs = Registers(nic)
    peer = TcpEngine(ip=PEER_IP, connections=1, **PEER_TIMERS)
    t0 = time.monotonic()

    def now():
        return int((time.monotonic() - t0) * 1000) + 1

    def exchange(segments):
        for s in segments:
            nic.send_frame(peer_frame(s))
        out = []
        for f in nic.frames(timeout=0.2):
            out += peer.receive(DEFAULT_NIC_IP, segment(f), now())
        return out

    outs = peer.connect(0, remote_ip=DEFAULT_NIC_IP, remote_port=ECHO_PORT, local_port=41000,
                        now=now())
    for _ in range(10):
        outs = exchange(outs + peer.poll(now()))
        if peer.state(0) is TcpState.ESTABLISHED and not outs:
            break
    (accepted,) = regs.tcp_events()
    tcb = regs.tcp_connection(accepted.conn)
    assert (tcb.state, tcb.echo, tcb.local_port, tcb.remote_port, str(tcb.remote_ip)) == (
        TcpState.ESTABLISHED, True, ECHO_PORT, 41000, PEER_IP)
    assert tcb.rcv_nxt == (peer._table[0].snd_nxt) % (1 << 32)
    regs.tcp_abort(accepted.conn)
    nic.run(2000)
    (frame,) = nic.frames(count=1, timeout=5)
    peer.receive(DEFAULT_NIC_IP, segment(frame), now())
    assert peer.state(0) is TcpState.CLOSED                # the RST reached it
    assert regs.tcp_connection(accepted.conn).state is TcpState.CLOSED
    assert regs.tcp_events() == []
