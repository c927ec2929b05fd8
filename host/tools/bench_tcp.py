"""``rnic bench tcp``: the TCP goodput of the simulated NIC, cycle for cycle.

The Verilated NIC top (what ``rnic nic-sim`` runs, W = 4) with its echo service on port 7;
the peer is the model's TCP engine (:class:`rnic.host.model.tcp_engine.TcpEngine`), in
lock-step with the simulation: the harness clocks only when told (``MANUAL``), ``step``
cycles at a time, and between two steps the peer takes the frames the NIC sent, answers,
writes and reads (a peer that reacts within ``step`` cycles, a few microseconds of a 1 Gb/s
line; while no frame moves either way it waits longer steps, for a timer). Both time bases
count line time: the NIC's ticks every ``TICK_CYCLES`` cycles (TCP_TICK), the peer's
milliseconds are the same cycles, and both use a LAN's timers (:data:`TIMERS`). The peer
connects, sends ``octets`` random octets and reads them back; every octet must come back in
order (a benchmark that answers wrongly fast is worthless). ``loss`` makes the cable between
them drop, duplicate and hold back that share of the frames each way (:class:`LossyLink`).

Figures
-------
``octets_per_cycle``
    Octets echoed per cycle, each way, from the cycle the first data segment went in to the
    cycle the last octet came back. The simulated line carries an octet per cycle each way
    (GMII: all clocks are one in simulation), the W = 4 datapath four.
``line_share``
    ``octets_per_cycle`` over the line's octet per cycle: the share of a 1 Gb/s line's
    capacity the echo used in each direction.
``limit_share``
    ``octets_per_cycle`` over the most TCP can carry on the line with full segments
    (``PAYLOAD_LIMIT``: 1460 payload octets in 1538 octets of line, with Ethernet, IPv4 and
    TCP headers, preamble, FCS and gap).
``peer_retransmits``, ``nic_segments``, ``nic_retransmits``, ``nic_drops``
    The peer's retransmitted segments, the segments the NIC sent and how many of them it
    sent again, and its drop counters by reason (non-zero ones).
"""

from __future__ import annotations

import random
import time

from rnic.host.driver.regs import Registers
from rnic.host.model import ethernet, ipv4
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.spec.net import (DEFAULT_NIC_IP, DEFAULT_NIC_MAC, ETH_HEADER_LEN, FCS_LEN,
                                IFG_LEN, IPV4_HEADER_LEN, PREAMBLE_LEN, EtherType, IpProto)
from rnic.host.spec.tcp import TCP_HEADER_LEN
from rnic.host.spec.tcp_engine import ENGINE_MSS, TcpDrop, TcpStat, TcpState

__all__ = ["run_tcp_bench", "tcp_text_report", "LossyLink", "peer_frame", "nic_segment",
           "set_up_nic", "TcpBenchMismatch", "PAYLOAD_LIMIT", "TICK_CYCLES", "DEFAULT_OCTETS",
           "DEFAULT_STEP", "ECHO_PORT"]

#: Cycles of a millisecond of the 1 Gb/s line's 125 MHz octet clock: a tick of both ends.
TICK_CYCLES = 125_000
DEFAULT_OCTETS = 1 << 20
DEFAULT_STEP = 256
ECHO_PORT = 7
#: Payload octets per line octet of full segments.
PAYLOAD_LIMIT = ENGINE_MSS / (ENGINE_MSS + TCP_HEADER_LEN + IPV4_HEADER_LEN + ETH_HEADER_LEN
                              + PREAMBLE_LEN + 1 + FCS_LEN + IFG_LEN)
PEER_MAC = bytes.fromhex("525400000701")
PEER_IP = "169.254.7.1"
#: Both ends' timers in ticks: a LAN's (RTO from 5 ms; Linux's least is 200 ms), so that a
#: loss the ACKs do not repair costs thousands of cycles of simulation, not millions.
TIMERS = {"rto_initial": 20, "rto_min": 5, "delack": 1}
#: Cycles without the echo moving on before the run fails (several backed-off timeouts).
STALL_CYCLES = 400 * TICK_CYCLES
#: A turn with no frame either way lengthens the next step, up to this many steps (the
#: peer waits for a timer; its reaction to a frame matters only while frames move).
IDLE_STEPS = 64


class TcpBenchMismatch(AssertionError):
    """The echo came back different, or stopped."""


class LossyLink:
    """Frames one way: each lost, duplicated or held back (sent after the next ones) at
    ``rate``; ``counts`` of each, and the frames lost in ``lost`` with ``keep_lost``."""

    def __init__(self, rng, rate, *, keep_lost=False):
        self.rng, self.rate, self.held = rng, rate, []
        self.counts = dict.fromkeys(("lost", "duplicated", "reordered"), 0)
        self.keep_lost, self.lost = keep_lost, []

    def carry(self, frames):
        """The frames that arrive of ``frames`` (and of those held before)."""
        out = []
        for frame in frames:
            roll = self.rng.random()
            if roll < self.rate:
                self.counts["lost"] += 1
                if self.keep_lost:
                    self.lost.append(frame)
            elif roll < 2 * self.rate:
                self.counts["duplicated"] += 1
                out += [frame, frame]
            elif roll < 3 * self.rate:
                self.counts["reordered"] += 1
                self.held.append(frame)
            else:
                out.append(frame)
        if self.held and (out or self.rng.random() < 0.5):
            out += self.flush()
        return out

    def flush(self):
        """The frames held back, now (a cable whose next frame is long in coming)."""
        held, self.held = self.held, []
        return held


def peer_frame(segment):
    """The frame of the peer's TCP ``segment`` (a model segment) to the NIC."""
    header = ipv4.Ipv4Header(proto=IpProto.TCP, src=PEER_IP, dst=DEFAULT_NIC_IP)
    eth = ethernet.EthernetHeader(dst=DEFAULT_NIC_MAC, src=PEER_MAC, ethertype=EtherType.IPV4)
    return ethernet.build(eth, ipv4.build(header, segment.octets), pad_short=False)


def nic_segment(frame):
    """The TCP segment of a frame the NIC sent."""
    _, packet = ethernet.parse(frame)
    header, payload = ipv4.parse(packet)
    if header.proto != IpProto.TCP:
        raise TcpBenchMismatch(f"the NIC sent IP protocol {header.proto}, not TCP")
    return payload


def set_up_nic(regs, seed):
    """The NIC's address, the peer's ARP entry, TCP's timers in line time."""
    regs.set_ip(DEFAULT_NIC_IP, 24)
    regs.write_arp(0, PEER_IP, PEER_MAC)
    caps = regs.tcp_caps()
    # (the secret from the seed: the cookies, hence the sequence numbers, repeat run to run)
    regs.tcp_configure(secret=random.Random(seed).getrandbits(32), ring_log2=caps.ring_log2,
                       tick_cycles=TICK_CYCLES, **TIMERS)


def _set_up(dev, seed):
    regs = Registers(dev)
    set_up_nic(regs, seed)
    regs.tcp_listen(0, ECHO_PORT, echo=True)
    dev.manual(True)
    return regs


class _Run:
    """The peer's side of one echo, stepped with the simulation."""

    def __init__(self, dev, data, *, loss, seed, step):
        self.dev, self.data, self.step = dev, data, step
        rng = random.Random(seed)
        self.to_nic, self.to_peer = LossyLink(rng, loss), LossyLink(rng, loss)
        self.peer = TcpEngine(ip=PEER_IP, connections=1, **TIMERS)
        self.idle = 1                   # steps the next turn clocks
        self.cycle = dev.run(0)
        self.start = self.cycle
        self.first = self.last = None
        self.written, self.back = 0, bytearray()

    def now(self):
        return (self.cycle - self.start) // TICK_CYCLES + 1

    def send(self, segments):
        for frame in self.to_nic.carry([peer_frame(s) for s in segments]):
            self.dev.send_frame(frame)

    def turn(self):
        """One step: the NIC's frames to the peer, the peer's answers and data to the NIC,
        ``step`` cycles."""
        peer, outs = self.peer, []
        frames = self.dev.frames(timeout=0)
        for frame in self.to_peer.carry(frames):
            outs += peer.receive(DEFAULT_NIC_IP, nic_segment(frame), self.now())
        if peer.state(0) is TcpState.ESTABLISHED and self.written < len(self.data):
            if self.first is None:
                self.first = self.cycle
            self.written += peer.write(0, self.data[self.written:])
        got = peer.read(0)
        if got:
            if self.data[len(self.back):len(self.back) + len(got)] != got:
                raise TcpBenchMismatch(f"the echo differs from what was sent after "
                                       f"{len(self.back)} octets")
            self.back += got
            self.last = self.cycle
        outs += peer.poll(self.now())
        self.send(outs)
        self.idle = 1 if frames or outs else min(2 * self.idle, IDLE_STEPS)
        self.cycle = self.dev.run(self.step * self.idle)

    def run(self, say=None):
        self.send(self.peer.connect(0, remote_ip=DEFAULT_NIC_IP, remote_port=ECHO_PORT,
                                    local_port=40000, now=self.now()))
        moved, shown = self.cycle, 0
        while len(self.back) < len(self.data):
            before = len(self.back)
            self.turn()
            if len(self.back) != before:
                moved = self.cycle
            elif self.cycle - moved > STALL_CYCLES:
                raise TcpBenchMismatch(f"the echo stopped after {len(self.back)} of "
                                       f"{len(self.data)} octets")
            if say is not None and len(self.back) - shown >= len(self.data) // 20:
                shown = len(self.back)
                say(f"echoed {shown} of {len(self.data)} octets")
        for segment in self.peer.close(0, self.now()):
            self.send([segment])


def run_tcp_bench(*, octets=DEFAULT_OCTETS, loss=0.0, step=DEFAULT_STEP, seed=1, say=None,
                  device_factory=None):
    """The benchmark (see the module docstring); returns the report (a dict)."""
    if device_factory is None:
        from rnic.sim.nic_device import NicSimDevice
        device_factory = NicSimDevice
    data = random.Random(seed).randbytes(octets)
    t0 = time.monotonic()
    with device_factory() as dev:
        regs = _set_up(dev, seed)
        before = regs.tcp_counters()
        stats0 = dev.stats()
        run = _Run(dev, data, loss=loss, seed=seed, step=step)
        run.run(say)
        stats1 = dev.stats()
        after = regs.tcp_counters()
    cycles = run.last - run.first
    per_cycle = octets / cycles
    drops = {reason.name: after["drops"][reason] - before["drops"][reason] for reason in TcpDrop}
    return {
        "octets": octets, "loss": loss, "step": step, "width": 4, "cycles": cycles,
        "octets_per_cycle": per_cycle, "line_share": per_cycle,
        "limit_share": per_cycle / PAYLOAD_LIMIT, "payload_limit": PAYLOAD_LIMIT,
        "peer_retransmits": run.peer.stats[TcpStat.RETRANSMITS],
        "peer_fast_retransmits": run.peer.stats[TcpStat.FAST_RETRANSMITS],
        "nic_segments": after["tx_segments"] - before["tx_segments"],
        "nic_retransmits": after["retransmits"] - before["retransmits"],
        "nic_drops": {k: v for k, v in drops.items() if v},
        "link": {"to_nic": run.to_nic.counts, "to_peer": run.to_peer.counts},
        "sim_cycles_per_s": (stats1["cycles"] - stats0["cycles"])
        / max(stats1["sim_s"] - stats0["sim_s"], 1e-9),
        "wall_s": time.monotonic() - t0, "verified": True,
    }


def tcp_text_report(report):
    """The report as lines of text."""
    r = report
    lines = [
        f"echo of {r['octets']} octets through the NIC's TCP (W = {r['width']}, peer step "
        f"{r['step']} cycles, cable loss {r['loss']:.1%}): every octet came back in order",
        f"  {r['octets_per_cycle']:.3f} octets per cycle each way over {r['cycles']} cycles: "
        f"{r['line_share']:.3f} of the 1 Gb/s line, {r['limit_share']:.3f} of TCP's limit on "
        f"it ({r['payload_limit']:.3f} octets per cycle with 1460-octet segments)",
        f"  NIC segments sent {r['nic_segments']} ({r['nic_retransmits']} again), drops "
        + (", ".join(f"{k} {v}" for k, v in r["nic_drops"].items()) or "none")
        + f"; peer retransmits {r['peer_retransmits']} (fast {r['peer_fast_retransmits']})",
        f"  simulation {r['sim_cycles_per_s'] / 1e6:.2f} M cycles/s, {r['wall_s']:.1f} s in all",
    ]
    return "\n".join(lines)
