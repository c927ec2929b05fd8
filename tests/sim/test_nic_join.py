"""The RNIC core joined to TCP in the simulated NIC (sim/nic_device.py): a peer (the model's
TCP engine, with the model's MPA framing on top) connects to a listening port; the host
reads its MPA Request and answers through the stream port (TCP_STREAM_*), commits the
connection to FPDUs (TCP_CMD.MODE and the core's context, markers and CRC on), and from
then on the FPDUs go between the peer's TCP and the core without the host: the peer's
ULPDUs come out of the core's deframer (the data port's sink) whole and with good CRCs,
and the core's Sends (its transmit path, under TCP's permission to send) reach the peer
as FPDUs in segments that begin and end at FPDU boundaries.
"""

import random
import time

import pytest

from rnic.host.driver.device import Device
from rnic.host.driver.regs import MpaDirection, Registers
from rnic.host.driver.tcp_regs import STREAM_SEND_MAX, TcpEvent
from rnic.host.model import ddp
from rnic.host.model.fpdu import FpduDecoder, FpduEncoder, FpduRecord, mulpdu
from rnic.host.model.mpa_frames import FrameReader, MpaFrame, build
from rnic.host.model.rdmap import Opcode
from rnic.host.model.segment import TxStream
from rnic.host.model.tcp import TcpSegment, seq_diff, seq_geq
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.net.nic_tcp import NicStream, NicTcpError, tcp_mux
from rnic.host.spec.net import DEFAULT_NIC_IP
from rnic.host.spec.regmap import ConnState, CqQueue, CqStatus, DpCrc, DpError, SqOpcode
from rnic.host.spec.tcp import TcpFlag
from rnic.host.spec.tcp_engine import TcpEventKind, TcpStat, TcpState
from rnic.host.tools.bench_tcp import PEER_IP, LossyLink, peer_frame
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from tests.sim.test_nic_tcp import PEER_TIMERS, open_nic, segment

RDMA_PORT = 4791
#: The NIC's MSS (TCP_MSS's reset value) and the MULPDU that fits it with markers.
MSS = 1460
TX_MULPDU = mulpdu(MSS, markers=True)


@pytest.fixture(scope="module")
def nic():
    dev, regs = open_nic()
    regs.tcp_listen(1, RDMA_PORT)
    regs.dp_configure(sink=True)
    regs.enable()
    yield dev
    dev.close()


def fresh(nic):
    """The NIC's registers with every connection a test before left aborted, its events
    and the frames it sent read: a test's peer sees only its own connections."""
    regs = Registers(nic)
    for c in range(regs.fields("CAPS")["connections"]):
        if regs.tcp_connection(c).state is not TcpState.CLOSED:
            regs.tcp_abort(c)
    nic.frames(timeout=0.01)
    regs.tcp_events()
    while regs.dp_recv() is not None:
        pass
    return regs


def takes_sequence(frame):
    """Whether a frame's TCP segment (either way) takes sequence space, so that losing it
    means a retransmission."""
    ip = Ether(frame)[IP]
    seg = TcpSegment.parse(bytes(ip)[4 * ip.ihl:ip.len])
    return bool(seg.payload) or bool(seg.flags & (TcpFlag.SYN | TcpFlag.FIN))


class Peer:
    """The model's TCP engine as the peer, clocked in wall time, over a cable that loses,
    duplicates and holds back frames at ``rate`` each way; the NIC's data segments that
    arrive kept as ``(seq, payload)``."""

    def __init__(self, nic, rate, seed, connections=1):
        self.nic = nic
        self.tcp = TcpEngine(ip=PEER_IP, connections=connections, **PEER_TIMERS)
        rng = random.Random(seed)
        self.to_nic = LossyLink(rng, rate, keep_lost=True)
        self.to_peer = LossyLink(rng, rate, keep_lost=True)
        self.t0, self.segments, self.received = time.monotonic(), [], bytearray()

    def now(self):
        return int((time.monotonic() - self.t0) * 1000) + 1

    def step(self, outs=()):
        """Send ``outs``, take what the NIC sent, run the timers; the octets it delivered."""
        outs = list(outs)
        for f in self.to_peer.carry(self.nic.frames(timeout=0.002)):
            octets = segment(f)
            seg = TcpSegment.parse(octets)
            if seg.payload:
                self.segments.append((seg.seq, seg.payload))
            outs += self.tcp.receive(DEFAULT_NIC_IP, octets, self.now())
        outs += self.tcp.poll(self.now())
        for f in self.to_nic.carry([peer_frame(s) for s in outs]):
            self.nic.send_frame(f)
        data = self.tcp.read(0)
        self.received += data
        return data

    def until(self, done, what, timeout=60):
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            self.step()


def stream_octets(regs, conn, want, peer, what):
    """The first ``want`` octets the NIC received on ``conn`` in byte-stream mode."""
    got = bytearray()

    def more():
        for c, data, truncated in regs.tcp_stream_runs():
            assert c == conn and not truncated
            got.extend(data)
        return len(got) >= want
    peer.until(more, what)
    return bytes(got)


@pytest.mark.parametrize("rate", [0.0, 0.03], ids=["clean", "lossy"])
def test_mpa_then_fpdus(nic, rate):
    regs = fresh(nic)
    peer = Peer(nic, rate, seed=11)
    peer.step(peer.tcp.connect(0, remote_ip=DEFAULT_NIC_IP, remote_port=RDMA_PORT,
                               local_port=43000 + int(rate * 100), now=peer.now()))
    events = []
    peer.until(lambda: events.extend(regs.tcp_events()) or events, "ACCEPTED")
    assert [e.kind for e in events] == [TcpEventKind.ACCEPTED]
    conn = events[0].conn

    # MPA negotiation through the stream port: the peer's Request, the host's Reply
    request = MpaFrame(kind="request", markers=True, crc=True, rev=2, enhanced=True, ird=4,
                       ord=4, p2p=True, rtr_send=True, private_data=b"hello NIC")
    reply = MpaFrame(kind="reply", markers=True, crc=True, rev=2, enhanced=True, ird=4, ord=4,
                     p2p=True, rtr_send=True, private_data=b"hello peer")
    assert peer.tcp.write(0, build(request)) == len(build(request))
    reader = FrameReader(expect="request")
    reader.feed(stream_octets(regs, conn, len(build(request)), peer, "the MPA Request"))
    assert reader.done and reader.frame == request
    # FPDUs from here on: the core's context (a responder waits for the first FPDU), then
    # the Reply (the peer's FPDUs may follow it at once)
    regs.tcp_set_mode(conn, fpdu=True)
    regs.program_connection(conn, tx=MpaDirection(True, True, 0, TX_MULPDU),
                            rx=MpaDirection(True, True, 0, 64768), ird=4, ord=4,
                            state=ConnState.WAIT_RX)
    assert len(build(reply)) <= STREAM_SEND_MAX
    regs.tcp_stream_send(conn, build(reply))
    peer.until(lambda: len(peer.received) >= len(build(reply)), "the MPA Reply")
    frame, rest = FrameReader(expect="reply").feed(bytes(peer.received))
    assert frame == reply and rest == b""
    peer.received.clear()
    fpdu_start = peer.tcp._table[0].rcv_nxt          # the NIC's first FPDU's sequence number

    # the peer's FPDUs, cut by its TCP anywhere: ULPDUs of random octets after an untagged
    # DDP control octet (the deframer checks ULPDU_Length against the header it announces;
    # the sink shows them as they are, each within its 2 KiB FIFO)
    rng = random.Random(5)
    ulpdus = [bytes([0x41]) + rng.randbytes(n - 1) for n in (18, 19, 700, 2000, 1400, 21, 1999)]
    encoder = FpduEncoder(markers=True, crc=True)
    stream = b"".join(encoder.encode(u) for u in ulpdus)
    written = 0
    got = []

    def delivered():
        nonlocal written
        if written < len(stream) and peer.tcp.state(0) is TcpState.ESTABLISHED:
            written += peer.tcp.write(0, stream[written:])
        while (ulpdu := regs.dp_recv()) is not None:
            got.append(ulpdu)
        return len(got) == len(ulpdus)
    peer.until(delivered, "the peer's ULPDUs")
    assert [(u.conn, u.crc, u.error) for u in got] == [(conn, DpCrc.OK, DpError.NONE)] * len(got)
    assert [u.data for u in got] == ulpdus
    assert regs.connection_status(conn)["state"] is ConnState.RTS      # the fence opened

    # the core's Sends (of the simulated NIC's memory, zero here), as FPDUs the peer's
    # decoder takes, each of its segments whole FPDUs
    lengths = [0, 1, 1500, 4000, 77]
    for k, n in enumerate(lengths):
        while not regs.post_send(conn, SqOpcode.SEND, length=n, wr_id=k):
            nic.run(100)                # (the previous doorbell still waits for its queue)
    completions = []
    peer.until(lambda: completions.extend(c for c in iter(regs.poll_cq, None))
               or len(completions) == len(lengths), "the Sends' completions")
    assert [(c.wr_id, c.status) for c in completions] == [(k, CqStatus.SUCCESS)
                                                          for k in range(len(lengths))]
    decoder = FpduDecoder(markers=True, crc=True)
    messages, payload = [], {}
    wire_octets = 0

    def decoded():
        nonlocal wire_octets
        for record in decoder.feed(bytes(peer.received)):
            assert isinstance(record, FpduRecord) and record.crc == "ok", record
            wire_octets += record.length
            assert record.ulpdu_length <= TX_MULPDU
            header, data = ddp.parse(record.ulpdu)
            payload.setdefault(header.msn, bytearray()).extend(data)
            if header.last:
                messages.append(header.msn)
        peer.received.clear()
        return len(messages) == len(lengths)
    peer.until(decoded, "the Sends' FPDUs")
    assert messages == list(range(1, len(lengths) + 1))
    assert [len(payload[msn]) for msn in messages] == lengths
    assert not any(any(p) for p in payload.values())
    # FPDU alignment (RFC 5044 section 4.1): each data segment the NIC sent, first or sent
    # again, holds whole FPDUs, markers where the stream's offset puts them
    fpdu_segments = [(seq_diff(seq, fpdu_start), data) for seq, data in peer.segments
                     if seq_geq(seq, fpdu_start)]
    assert sum(len(data) for _, data in fpdu_segments) >= wire_octets
    for offset, data in fpdu_segments:
        out = FpduDecoder(markers=True, crc=True, offset=offset).feed(data)
        assert out and all(isinstance(r, FpduRecord) for r in out), (offset, out)
        assert sum(r.length for r in out) == len(data)
    assert peer.tcp.state(0) is TcpState.ESTABLISHED
    if any(takes_sequence(f) for f in peer.to_nic.lost + peer.to_peer.lost):
        assert peer.tcp.stats[TcpStat.RETRANSMITS] + regs.tcp_counters()["retransmits"] > 0
    assert (peer.to_nic.counts["lost"] + peer.to_peer.counts["lost"] > 0) == (rate > 0)


def test_rdma_over_nic_tcp(nic):
    """The NIC opens the connection and is the MPA initiator (revision 1, CRC, no markers);
    then RDMA through the core's DDP/RDMAP paths and the simulated host memory: the peer's
    Send lands in a posted receive buffer and its RDMA Write in a registered region, the
    NIC's RDMA Write and Send carry what its memory holds."""
    regs = fresh(nic)
    regs.dp_configure()                         # received ULPDUs to the DDP/RDMAP path
    peer = Peer(nic, 0.0, seed=12)
    peer.tcp.listen(RDMA_PORT)
    conn = regs.tcp_connect(PEER_IP, RDMA_PORT, 44000)
    events = []
    peer.until(lambda: events.extend(regs.tcp_events()) or events, "CONNECTED")
    assert events == [TcpEvent(conn, TcpEventKind.CONNECTED)]

    request = MpaFrame(kind="request", crc=True, private_data=b"initiator")
    reply = MpaFrame(kind="reply", crc=True, private_data=b"responder")
    regs.tcp_stream_send(conn, build(request))
    peer.until(lambda: len(peer.received) >= len(build(request)), "the MPA Request")
    assert FrameReader(expect="request").feed(bytes(peer.received)) == (request, b"")
    peer.received.clear()
    peer.tcp.write(0, build(reply))
    reader = FrameReader(expect="reply")
    assert reader.feed(stream_octets(regs, conn, len(build(reply)), peer, "the MPA Reply")) == (
        reply, b"")
    mulpdu_tx = mulpdu(MSS, markers=False)
    regs.tcp_set_mode(conn, fpdu=True)
    regs.program_connection(conn, tx=MpaDirection(False, True, 0, mulpdu_tx),
                            rx=MpaDirection(False, True, 0, 64768), state=ConnState.RTS)

    # the peer's Send into a posted buffer, its RDMA Write into a registered region
    rng = random.Random(13)
    send_data, write_data = rng.randbytes(3000), rng.randbytes(5000)
    rq_addr, region, stag = 0x10000, 0x40000, 0x1234
    assert regs.post_recv(conn, rq_addr, 4096, 77)
    regs.write_stag(stag % regs.fields("CAPS")["stags"], stag=stag,
                    base=0x7000_0000, length=8192, conn=conn, addr=region, remote_write=True)
    peer_tx = TxStream(mulpdu=mulpdu(MSS, markers=False))
    encoder = FpduEncoder(markers=False, crc=True)
    stream = b"".join(encoder.encode(u) for u in
                      peer_tx.message(Opcode.RDMA_WRITE, write_data, stag=stag, to=0x7000_0100)
                      + peer_tx.message(Opcode.SEND, send_data))
    written = 0
    completions = []

    def received():
        nonlocal written
        if written < len(stream):
            written += peer.tcp.write(0, stream[written:])
        completions.extend(iter(regs.poll_cq, None))
        return completions
    peer.until(received, "the Send's completion")
    (done,) = completions
    assert (done.wr_id, done.queue, done.status, done.length) == (77, CqQueue.RQ,
                                                                  CqStatus.SUCCESS, 3000)
    assert nic.mem_read(rq_addr, 3000) == send_data
    assert nic.mem_read(region + 0x100, 5000) == write_data      # placed before the Send

    # the NIC's RDMA Write and Send, from its memory
    local = 0x80000
    nic.mem_write(local, write_data + send_data)
    for wr in (dict(opcode=SqOpcode.RDMA_WRITE, laddr=local, length=5000, rstag=0x99,
                    rto=0x1000, wr_id=1),
               dict(opcode=SqOpcode.SEND, laddr=local + 5000, length=3000, wr_id=2)):
        while not regs.post_send(conn, **wr):
            nic.run(100)
    decoder = FpduDecoder(markers=False, crc=True)
    writes, sends = bytearray(), bytearray()
    done = []

    def sent():
        for record in decoder.feed(bytes(peer.received)):
            assert isinstance(record, FpduRecord) and record.crc == "ok", record
            header, data = ddp.parse(record.ulpdu)
            if isinstance(header, ddp.TaggedHeader):
                assert (header.stag, header.to) == (0x99, 0x1000 + len(writes))
                writes.extend(data)
            else:
                sends.extend(data)
                if header.last:
                    done.append(header.msn)
        peer.received.clear()
        return done
    peer.until(sent, "the NIC's Send")
    assert bytes(writes) == write_data and bytes(sends) == send_data
    sq = []
    peer.until(lambda: sq.extend(iter(regs.poll_cq, None)) or len(sq) == 2, "completions")
    assert [(c.wr_id, c.queue, c.status) for c in sq] == [(1, CqQueue.SQ, CqStatus.SUCCESS),
                                                          (2, CqQueue.SQ, CqStatus.SUCCESS)]


def test_a_reset_connection_does_not_hold_the_stream_port(nic):
    """A peer resets its connection while the host answers it: the host's stream send on it
    waits for ever (the connection may never send again). The next stream send on another
    connection drops it (TCP_STREAM_TX_CMD.CANCEL) instead of waiting behind it, and a send
    on the reset connection is an error. A run still waiting when a new connection takes
    the id is dropped by the NIC: it never reaches the new connection's peer."""
    fresh(nic)                                  # connection ids from 0 (the lowest free)
    device = Device(nic)
    regs = device.regs
    peer = Peer(nic, 0.0, seed=14, connections=2)
    mux, conns, got = tcp_mux(device), [], bytearray()     # (the peer's slot 1; 0: received)

    def accepted(index, local_port):
        peer.step(peer.tcp.connect(index, remote_ip=DEFAULT_NIC_IP, remote_port=RDMA_PORT,
                                   local_port=local_port, now=peer.now()))

        def new():
            mux.poll()
            return [c for c, kinds in list(mux.events.items())
                    if kinds and kinds[-1] is TcpEventKind.ACCEPTED and c not in conns]
        peer.until(new, "ACCEPTED")
        conns.append(new()[0])
        return conns[-1]

    def steps(n=20):
        for _ in range(n):
            peer.step()
            got.extend(peer.tcp.read(1))

    first, second = accepted(0, 45000), accepted(1, 45001)
    peer.step(peer.tcp.abort(0, peer.now()))
    peer.until(lambda: mux.poll() or mux.ended(first), "the NIC's RESET")
    regs.tcp_stream_send(first, b"a Reply the peer will never see")
    steps()
    assert regs.field("TCP_STREAM_TX_STATUS", "BUSY")           # waits for ever
    NicStream(device, second).sendall(b"the second Reply")
    peer.until(lambda: steps(1) or got == b"the second Reply", "the second Reply")
    assert not regs.field("TCP_STREAM_TX_STATUS", "BUSY")
    with pytest.raises(NicTcpError, match="reset"):
        NicStream(device, first).sendall(b"more")

    # the host does not learn of the reset in time; a new connection takes the id
    regs.tcp_stream_send(first, b"a stale Reply")
    steps()
    assert regs.field("TCP_STREAM_TX_STATUS", "BUSY")
    conns.remove(first)
    mux.forget(first)
    assert accepted(0, 45002) == first
    peer.until(lambda: not regs.field("TCP_STREAM_TX_STATUS", "BUSY"), "the stale run dropped")
    regs.tcp_stream_send(first, b"the new connection's Reply")
    peer.until(lambda: len(peer.received) >= 26, "the new connection's Reply")
    assert peer.received == b"the new connection's Reply"
    assert [p for _, p in peer.segments].count(b"a stale Reply") == 0
    regs.tcp_abort(first)
    regs.tcp_abort(second)
