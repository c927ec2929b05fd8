"""``rnic bench rdma``: RDMA Writes of the simulated NIC's core over its own TCP, cycle for
cycle.

The Verilated NIC top (what ``rnic nic-sim`` runs, W = 4: MAC, network layer, TCP, the RNIC
core joined to it) and a peer made of the models, in lock-step with the simulation as in
:mod:`rnic.host.tools.bench_tcp` (the harness clocks only when told, ``step`` cycles a turn;
both time bases count line time). The NIC opens the TCP connection to the peer's port and
is the MPA initiator through the stream port (revision 1, CRC, no markers), and the host
commits the connection to FPDUs. Then, ``direction``:

* ``out``: the host posts ``octets`` of RDMA Writes of ``size`` octets each from the
  simulated host memory. The peer's TCP (the model's engine) acknowledges, its MPA decoder
  checks every FPDU's CRC, and every octet must arrive at the tagged offset it was written
  from (a benchmark that answers wrongly fast is worthless). The host takes the core's
  completions meanwhile; every Write must complete successfully.
* ``in``: the host registers a region and posts a receive buffer; the peer (the model's
  RDMAP/DDP segmentation and MPA framing over its TCP) sends the RDMA Writes into the
  region, then a Send. The Send's completion (after every Write is placed, RDMA's
  ordering) ends the run, and the region must hold every octet the peer wrote.

Figures
-------
``octets_per_cycle``
    RDMA payload octets per cycle: out, from the cycle the first Write was posted to the
    cycle its last octet reached the peer; in, from the cycle the peer's TCP took the first
    octet to the cycle the host saw the Send's completion. The simulated line carries an
    octet per cycle (GMII: all clocks are one in simulation), the W = 4 datapath four.
``line_share``
    That over the line's octet per cycle: the share of a 1 Gb/s line.
``limit_share``
    That over the most RDMA Writes can carry on the line with full segments
    (``limit``: one FPDU per segment of the sender's MSS, its ULPDU of MULPDU octets with
    the 14-octet tagged DDP header, in the segment's octets of line with Ethernet, IPv4
    and TCP headers, preamble, FCS and gap).
``nic_segments``, ``nic_retransmits``, ``peer_retransmits``
    The NIC's segments and those sent again, the peer's retransmissions.
"""

from __future__ import annotations

import random
import time

from rnic.host.driver.regs import MpaDirection, Registers
from rnic.host.model import ddp
from rnic.host.model.fpdu import FpduDecoder, FpduRecord, mulpdu
from rnic.host.model.fpdu import FpduEncoder
from rnic.host.model.mpa_frames import FrameReader, MpaFrame, build
from rnic.host.model.segment import TxStream
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.protocol import TAGGED_HEADER_LEN
from rnic.host.spec.net import (DEFAULT_NIC_IP, ETH_HEADER_LEN, FCS_LEN, IFG_LEN,
                                IPV4_HEADER_LEN, PREAMBLE_LEN)
from rnic.host.spec.regmap import ConnState, CqQueue, CqStatus, SqOpcode
from rnic.host.spec.tcp import TCP_HEADER_LEN
from rnic.host.spec.tcp_engine import ENGINE_MSS, TcpEventKind, TcpStat, TcpState
from rnic.host.tools.bench_tcp import (DEFAULT_STEP, IDLE_STEPS, PEER_IP, STALL_CYCLES,
                                       TICK_CYCLES, TIMERS, LossyLink, nic_segment,
                                       peer_frame, set_up_nic)

__all__ = ["run_rdma_bench", "rdma_text_report", "RdmaBenchMismatch", "DEFAULT_OCTETS",
           "DEFAULT_SIZE", "RDMA_PORT", "DIRECTIONS"]

DEFAULT_OCTETS = 1 << 20
DEFAULT_SIZE = 1 << 16
#: ``out``: the NIC's core writes to the peer; ``in``: the peer writes into the NIC.
DIRECTIONS = ("out", "in")
RDMA_PORT = 4791
#: The peer's region: its STag and the tagged offset of the first Write.
STAG, BASE_TO = 0x5A17, 0x1_0000_0000
#: Where the Writes' octets are in the NIC's host memory (out: read from; in: the region).
LOCAL_ADDR = 0x10_0000
#: The receive buffer of the peer's closing Send (in).
RECV_ADDR, RECV_LENGTH = 0x8_0000, 256
#: Line octets of a segment besides its TCP payload.
SEGMENT_OVERHEAD = (TCP_HEADER_LEN + IPV4_HEADER_LEN + ETH_HEADER_LEN + PREAMBLE_LEN + 1
                    + FCS_LEN + IFG_LEN)


class RdmaBenchMismatch(AssertionError):
    """What reached the peer differs from what was written, or the transfer stopped."""


class _Progress:
    """A transfer's progress: a line for ``say`` every twentieth of ``total``, and a stall
    (nothing moved for STALL_CYCLES) raised as a mismatch."""

    def __init__(self, run, total, what, say):
        self.run, self.total, self.what, self.say = run, total, what, say
        self.moved, self.shown = run.cycle, 0

    def update(self, done, moved):
        """``done`` of ``total`` so far; ``moved``: something moved on in this turn."""
        if moved:
            self.moved = self.run.cycle
        elif self.run.cycle - self.moved > STALL_CYCLES:
            raise RdmaBenchMismatch(f"the transfer stopped after {done} of {self.total} "
                                    f"{self.what}")
        if self.say is not None and done - self.shown >= self.total // 20:
            self.shown = done
            self.say(f"{done} of {self.total} {self.what}")


class _Run:
    """The peer's side and the host's, stepped with the simulation."""

    def __init__(self, dev, regs, data, *, size, loss, seed, step):
        self.dev, self.regs, self.data, self.size, self.step = dev, regs, data, size, step
        rng = random.Random(seed)
        self.to_nic, self.to_peer = LossyLink(rng, loss), LossyLink(rng, loss)
        self.peer = TcpEngine(ip=PEER_IP, connections=1, **TIMERS)
        self.peer.listen(RDMA_PORT)
        self.idle = 1
        self.cycle = self.start = dev.run(0)
        self.received = bytearray()     # the peer's TCP octets not yet decoded
        self.placed = bytearray(len(data))
        self.arrived = 0
        self.first = self.last = None
        self.decoder = None

    def now(self):
        return (self.cycle - self.start) // TICK_CYCLES + 1

    def turn(self):
        """The NIC's frames to the peer, its answers to the NIC, ``step`` cycles."""
        peer, outs = self.peer, []
        frames = self.dev.frames(timeout=0)
        for frame in self.to_peer.carry(frames):
            outs += peer.receive(DEFAULT_NIC_IP, nic_segment(frame), self.now())
        if peer.state(0) is not TcpState.CLOSED:
            self.received += peer.read(0)
        outs += peer.poll(self.now())
        for frame in self.to_nic.carry([peer_frame(s) for s in outs]):
            self.dev.send_frame(frame)
        self.idle = 1 if frames or outs else min(2 * self.idle, IDLE_STEPS)
        self.cycle = self.dev.run(self.step * self.idle)

    def until(self, done, what):
        since = self.cycle
        while not done():
            if self.cycle - since > STALL_CYCLES:
                raise RdmaBenchMismatch(f"{what} did not come")
            self.turn()

    def negotiate(self):
        """TCP from the NIC, MPA through the stream port; the connection committed."""
        regs = self.regs
        regs.tcp_events()
        conn = regs.tcp_connect(PEER_IP, RDMA_PORT, 40001)
        events = []
        self.until(lambda: events.extend(regs.tcp_events()) or events, "the connection")
        if [(e.conn, e.kind) for e in events] != [(conn, TcpEventKind.CONNECTED)]:
            raise RdmaBenchMismatch(f"the NIC's connection ended in {events}")
        request = build(MpaFrame(kind="request", crc=True, private_data=b"rnic bench rdma"))
        reply = build(MpaFrame(kind="reply", crc=True))
        regs.tcp_stream_send(conn, request)
        self.until(lambda: len(self.received) >= len(request), "the MPA Request")
        if FrameReader(expect="request").feed(bytes(self.received))[1] != b"":
            raise RdmaBenchMismatch("the peer got more than the MPA Request")
        self.received.clear()
        self.peer.write(0, reply)
        got = bytearray()
        self.until(lambda: got.extend(b"".join(d for _, d, _ in regs.tcp_stream_runs()))
                   or len(got) >= len(reply), "the MPA Reply")
        mss = regs.tcp_connection(conn).mss
        regs.tcp_set_mode(conn, fpdu=True)
        regs.program_connection(conn, tx=MpaDirection(False, True, 0, mulpdu(mss, markers=False)),
                                rx=MpaDirection(False, True, 0, 64768), state=ConnState.RTS)
        self.decoder = FpduDecoder(markers=False, crc=True)
        return conn, mss

    def decode(self):
        """The FPDUs the peer has, checked and placed (``placed``, ``arrived``)."""
        for record in self.decoder.feed(bytes(self.received)):
            if not isinstance(record, FpduRecord) or record.crc != "ok":
                raise RdmaBenchMismatch(f"the peer decoded {record}")
            header, payload = ddp.parse(record.ulpdu)
            if not isinstance(header, ddp.TaggedHeader) or header.stag != STAG:
                raise RdmaBenchMismatch(f"an FPDU that is no Write to the region: {header}")
            at = header.to - BASE_TO
            if not 0 <= at <= len(self.data) - len(payload) \
                    or self.data[at:at + len(payload)] != payload:
                raise RdmaBenchMismatch(f"the octets at offset {at} differ from those written")
            self.placed[at:at + len(payload)] = payload
            self.arrived += len(payload)
            self.last = self.cycle
        self.received.clear()

    def transfer(self, conn, say=None):
        """Post the Writes as the send queue takes them; until every octet arrived and
        every Write completed (``say``: a progress line every twentieth)."""
        regs, count = self.regs, len(self.data) // self.size
        posted, done = 0, []
        self.first = self.cycle
        progress = _Progress(self, len(self.data), "octets placed", say)
        while self.arrived < len(self.data) or len(done) < count:
            before = (self.arrived, len(done))
            while posted < count and regs.post_send(
                    conn, SqOpcode.RDMA_WRITE, laddr=LOCAL_ADDR + posted * self.size,
                    length=self.size, rstag=STAG, rto=BASE_TO + posted * self.size,
                    wr_id=posted):
                posted += 1
            done.extend(iter(regs.poll_cq, None))
            self.turn()
            self.decode()
            progress.update(self.arrived, (self.arrived, len(done)) != before)
        bad = [c for c in done if (c.queue, c.status, c.opcode) != (CqQueue.SQ,
               CqStatus.SUCCESS, SqOpcode.RDMA_WRITE)]
        if bad or sorted(c.wr_id for c in done) != list(range(count)):
            raise RdmaBenchMismatch(f"completions {bad or done} are not the Writes' successes")
        if self.placed != self.data:
            raise RdmaBenchMismatch("the region differs from what was written")


    def receive(self, conn, mss, say=None):
        """The peer's Writes into a region of the NIC (its octets cleared first), then its
        Send; until the Send's completion, the region then checked."""
        regs, data, size = self.regs, self.data, self.size
        self.dev.mem_write(LOCAL_ADDR, bytes(len(data)))
        stags = regs.fields("CAPS")["stags"]
        regs.write_stag(STAG % stags, stag=STAG, base=BASE_TO, length=len(data), conn=conn,
                        addr=LOCAL_ADDR, remote_write=True)
        if not regs.post_recv(conn, RECV_ADDR, RECV_LENGTH, 1):
            raise RdmaBenchMismatch("the NIC took no receive buffer")
        tx = TxStream(mulpdu=mulpdu(mss, markers=False))
        encoder = FpduEncoder(markers=False, crc=True)
        ulpdus = [u for k in range(len(data) // size)
                  for u in tx.write(data[k * size:(k + 1) * size], stag=STAG,
                                    to=BASE_TO + k * size)]
        stream = b"".join(encoder.encode(u) for u in ulpdus + tx.send(b"the Writes are done"))
        written, done = 0, []
        self.first = self.cycle
        progress = _Progress(self, len(stream), "octets of FPDUs sent", say)
        while not done:
            before = written
            if written < len(stream):
                written += self.peer.write(0, stream[written:])
            done.extend(iter(regs.poll_cq, None))
            self.turn()
            progress.update(written, written != before or bool(done))
        self.last = self.cycle
        (c,) = done
        if (c.wr_id, c.queue, c.status) != (1, CqQueue.RQ, CqStatus.SUCCESS):
            raise RdmaBenchMismatch(f"the Send completed as {c}")
        if self.dev.mem_read(LOCAL_ADDR, len(data)) != data:
            raise RdmaBenchMismatch("the region differs from what the peer wrote")

def run_rdma_bench(*, octets=DEFAULT_OCTETS, size=DEFAULT_SIZE, direction="out", loss=0.0,
                   step=DEFAULT_STEP, seed=1, say=None, device_factory=None):
    """The benchmark (see the module docstring); returns the report (a dict)."""
    if not 1 <= size <= octets or octets % size:
        raise ValueError(f"octets ({octets}) must be a multiple of the Write size ({size})")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    if device_factory is None:
        from rnic.sim.nic_device import NicSimDevice
        device_factory = NicSimDevice
    data = random.Random(seed).randbytes(octets)
    t0 = time.monotonic()
    with device_factory() as dev:
        regs = Registers(dev)
        regs.dp_configure()                     # received ULPDUs to the DDP/RDMAP path
        regs.enable()
        set_up_nic(regs, seed)
        dev.manual(True)
        before = regs.tcp_counters()
        run = _Run(dev, regs, data, size=size, loss=loss, seed=seed, step=step)
        conn, mss = run.negotiate()
        if direction == "out":
            dev.mem_write(LOCAL_ADDR, data)
            run.transfer(conn, say)
        else:
            mss = ENGINE_MSS                    # the NIC's MSS, which the peer honours
            run.receive(conn, mss, say)
        after = regs.tcp_counters()
    cycles = run.last - run.first
    per_cycle = octets / cycles
    limit = (mulpdu(mss, markers=False) - TAGGED_HEADER_LEN) / (mss + SEGMENT_OVERHEAD)
    return {
        "octets": octets, "size": size, "writes": octets // size, "direction": direction,
        "loss": loss, "step": step,
        "width": 4, "mss": mss, "cycles": cycles, "octets_per_cycle": per_cycle,
        "line_share": per_cycle, "limit": limit, "limit_share": per_cycle / limit,
        "nic_segments": after["tx_segments"] - before["tx_segments"],
        "nic_retransmits": after["retransmits"] - before["retransmits"],
        "peer_retransmits": run.peer.stats[TcpStat.RETRANSMITS],
        "link": {"to_nic": run.to_nic.counts, "to_peer": run.to_peer.counts},
        "wall_s": time.monotonic() - t0, "verified": True,
    }


def rdma_text_report(report):
    """The report as lines of text."""
    r = report
    return "\n".join([
        f"{r['writes']} RDMA Writes of {r['size']} octets "
        + ("from the NIC's core over its TCP" if r["direction"] == "out"
           else "from the peer into the NIC's core over its TCP")
        + f" (W = {r['width']}, MSS {r['mss']}, peer step {r['step']} cycles, cable loss "
        f"{r['loss']:.1%}): every octet placed"
        + (" and every Write completed" if r["direction"] == "out" else
           " before the closing Send completed"),
        f"  {r['octets_per_cycle']:.3f} octets per cycle over {r['cycles']} cycles: "
        f"{r['line_share']:.3f} of the 1 Gb/s line, {r['limit_share']:.3f} of what RDMA "
        f"Writes can carry on it ({r['limit']:.3f} octets per cycle)",
        f"  NIC segments sent {r['nic_segments']} ({r['nic_retransmits']} again); peer "
        f"retransmits {r['peer_retransmits']}; {r['wall_s']:.1f} s in all",
    ])
