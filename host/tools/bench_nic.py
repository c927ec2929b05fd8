"""``rnic bench nic``: the simulated NIC on its virtual cable, pinged as fast as it answers.

What ``rnic nic-sim`` runs (:class:`rnic.host.apps.nic_sim.NicSim`: the Verilated NIC top
behind UDP datagrams on 127.0.0.1) is started on free ports; the benchmark is the peer at
the other end of the cable. It resolves the NIC by ARP, then for each ICMP payload size sends
``pings`` echo requests with at most ``window`` of them unanswered, and checks every reply,
octet for octet, against :class:`rnic.host.model.network_layer.NicNetModel`'s reply to the
same request (a benchmark that answers wrongly fast is worthless: a difference, a missing or
an extra frame fails the run). At the end the NIC's receive counters must match the model's.

Figures, per payload size
-------------------------
``frames_per_s``
    Frames over the cable (requests in plus replies out) per second of wall time, from the
    first request sent to the last reply received: what a peer on the cable sees.
``cycles``, ``cycles_per_s``
    Cycles the harness clocked during the run and their rate per second of wall time (the
    harness stops its clock while it has nothing to do, so this is the simulation's speed
    with the cable's round trips in it), ``cycles_per_sim_s`` the rate of its clock loop
    alone (the simulation's own speed).
``cycles_per_ping``, ``wire_octets``, ``line_busy``
    Cycles per echo, octets a request takes on the line (preamble, SFD, frame padded to 60,
    FCS, inter-frame gap: one cycle each at one GMII octet per cycle), and the share of the
    cycles the receive line carried a request (``wire_octets / cycles_per_ping``): below 1
    the gateware waited for the cable, not the other way round.
``realtime``
    ``cycles_per_s`` over the 125 MHz octet clock of a 1 Gb/s line: the simulation's speed
    as a share of the board's.
"""

from __future__ import annotations

import ipaddress
import random
import socket
import time

from rnic.host.apps.nic_sim import HOST, NicSim
from rnic.host.driver.regs import Registers
from rnic.host.model import arp, ethernet, icmp, ipv4
from rnic.host.model.network_layer import NicNetModel
from rnic.host.spec.net import (DEFAULT_NIC_IP, DEFAULT_NIC_MAC, ETH_HEADER_LEN, FCS_LEN,
                                IFG_LEN, IPV4_HEADER_LEN, MAX_ECHO_DATA, PREAMBLE_LEN,
                                EtherType, IcmpType, IpProto, RxDrop)

__all__ = ["NIC_SIZES", "DEFAULT_PINGS", "DEFAULT_WINDOW", "LINE_HZ",
           "NicBenchMismatch", "echo_request", "wire_octets", "run_nic_bench",
           "nic_text_report"]

#: ICMP payload sizes of a default run: the issue's ping sizes (empty, ping's default,
#: the largest that fits the MTU unfragmented).
NIC_SIZES = (0, 56, MAX_ECHO_DATA)
#: Echo requests per size and most unanswered at once (the peer's window).
DEFAULT_PINGS, DEFAULT_WINDOW = 400, 16
#: The octet clock of a 1 Gb/s line (GMII).
LINE_HZ = 125e6
#: The peer's addresses (the siw VM guest's on the same cable).
PEER_MAC = bytes.fromhex("525400000701")
PEER_IP = ipaddress.IPv4Address("169.254.7.1")
#: Seconds to wait for a reply before the run fails.
REPLY_TIMEOUT = 10.0
#: Line octets of a frame besides the frame itself: preamble and SFD, FCS, inter-frame gap.
_LINE_OVERHEAD = PREAMBLE_LEN + 1 + FCS_LEN + IFG_LEN


class NicBenchMismatch(AssertionError):
    """The simulated NIC answered differently from the model (or not at all)."""


def echo_request(rng, size, *, nic_mac=DEFAULT_NIC_MAC, nic_ip=DEFAULT_NIC_IP):
    """An ICMP echo request frame from the peer to the NIC with ``size`` random payload
    octets (destination MAC first, no FCS, not padded)."""
    message = icmp.build(icmp.IcmpEcho(type=IcmpType.ECHO_REQUEST,
                                       identifier=rng.getrandbits(16),
                                       sequence=rng.getrandbits(16)), rng.randbytes(size))
    header = ipv4.Ipv4Header(proto=IpProto.ICMP, src=PEER_IP, dst=nic_ip,
                             identification=rng.getrandbits(16))
    eth = ethernet.EthernetHeader(dst=nic_mac, src=PEER_MAC, ethertype=EtherType.IPV4)
    return ethernet.build(eth, ipv4.build(header, message), pad_short=False)


def wire_octets(frame):
    """Octets (cycles of a GMII line) ``frame`` takes: padded to 60, with preamble, SFD, FCS
    and the inter-frame gap."""
    return len(ethernet.pad(frame)) + _LINE_OVERHEAD


class _Peer:
    """The benchmark's end of the cable: a UDP socket on 127.0.0.1."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((HOST, 0))
        self.sock.settimeout(REPLY_TIMEOUT)
        self.port = self.sock.getsockname()[1]
        self.nic_port = None

    def send(self, frame):
        self.sock.sendto(frame, (HOST, self.nic_port))

    def recv(self, what):
        try:
            return self.sock.recv(65536)
        except socket.timeout:
            raise NicBenchMismatch(f"no reply within {REPLY_TIMEOUT:.0f} s to {what}") from None

    def close(self):
        self.sock.close()


def _difference(reply, wants, k):
    """How ``reply`` differs from ``wants[k]``, the model's: the first octet that differs,
    or the later request it answers (the replies between lost)."""
    echoed = ETH_HEADER_LEN + IPV4_HEADER_LEN + 4     # identifier, sequence, data: the request's
    later = [j for j in range(k + 1, len(wants)) if wants[j][echoed:] == reply[echoed:]]
    if later:
        return (f"is missing: the reply to request {later[0] + 1} came in its place (see "
                f"the NIC's NET_RX_OVERFLOW for requests it had no room for)")
    want = wants[k]
    at = next((i for i, (a, b) in enumerate(zip(reply, want)) if a != b), min(len(reply),
                                                                             len(want)))
    return (f"differs from the model's at octet {at} of {len(reply)} (the model's has "
            f"{len(want)}): {reply[at:at + 8].hex()} != {want[at:at + 8].hex()}")


def _exchange(peer, model, frame, what):
    """Send one frame that has one reply; check the reply against the model's."""
    (want,) = model.receive(ethernet.pad(frame)).replies
    peer.send(frame)
    got = peer.recv(what)
    if got != want:
        raise NicBenchMismatch(f"the reply to {what} " + _difference(got, [want], 0))


def _burst(sim, peer, model, rng, size, pings, window):
    """``pings`` echo requests of ``size`` payload octets, ``window`` in flight; every reply
    checked in order. Returns the row of the report."""
    frames = [echo_request(rng, size, nic_mac=sim.mac, nic_ip=sim.ip) for _ in range(pings)]
    wants = [model.receive(ethernet.pad(f)).replies[0] for f in frames]
    before = sim.device.stats()
    t0 = time.monotonic()
    sent = got = 0
    while got < pings:
        while sent < pings and sent - got < window:
            peer.send(frames[sent])
            sent += 1
        reply = peer.recv(f"echo request {got + 1} of {pings} ({size} octets)")
        if reply != wants[got]:
            raise NicBenchMismatch(f"reply {got + 1} of {pings} ({size} octets) "
                                   + _difference(reply, wants, got))
        got += 1
    wall = time.monotonic() - t0
    after = sim.device.stats()
    cycles = after["cycles"] - before["cycles"]
    sim_s = after["sim_s"] - before["sim_s"]
    wire = wire_octets(frames[0])
    return {"size": size, "frame_octets": len(ethernet.pad(frames[0])), "pings": pings,
            "wall_s": round(wall, 4), "frames_per_s": round(2 * pings / wall, 1),
            "pings_per_s": round(pings / wall, 1), "cycles": cycles,
            "cycles_per_s": round(cycles / wall), "cycles_per_sim_s":
            round(cycles / sim_s) if sim_s > 0 else None,
            "cycles_per_ping": round(cycles / pings, 1), "wire_octets": wire,
            "line_busy": round(wire * pings / cycles, 4) if cycles else None,
            "realtime": round(cycles / wall / LINE_HZ, 6)}


def _check_counters(sim, model, good):
    """The NIC's receive counters (NET_RX_*) against the model's; ``good`` frames sent."""
    got = Registers(sim.device).net_rx_counters()
    want = {reason: model.counters.get(reason, 0) for reason in RxDrop}
    want[RxDrop.NONE] = good
    for reason, count in want.items():
        if got[reason] != count:
            raise NicBenchMismatch(f"the NIC counted {got[reason]} frames as {reason.name}, "
                                   f"the model {count}")


def run_nic_bench(sizes=NIC_SIZES, *, pings=DEFAULT_PINGS, window=DEFAULT_WINDOW, seed=1,
                  width=4, say=None, device_factory=None):
    """Run the benchmark (see the module docstring); return the report (a dict).

    A difference from the model raises :class:`NicBenchMismatch`. ``device_factory`` is
    :class:`NicSim`'s (default: the Verilated NIC, built once and cached).
    """
    for size in sizes:
        if not 0 <= size <= MAX_ECHO_DATA:
            raise ValueError(f"ICMP payload size {size} is not in 0..{MAX_ECHO_DATA}")
    if pings < 1 or window < 1:
        raise ValueError(f"pings ({pings}) and window ({window}) must be at least 1")
    rng = random.Random(seed)
    peer = _Peer()
    try:
        t0 = time.monotonic()
        if say:
            say(f"W={width}: starting the simulated NIC (built once, then cached)")
        sim = NicSim(listen_port=0, peer_port=peer.port, width=width,
                     device_factory=device_factory)
        start_s = time.monotonic() - t0
        with sim:
            peer.nic_port = sim.listen_port
            model = NicNetModel(mac=sim.mac, ip=sim.ip, prefix=sim.prefix)
            _exchange(peer, model, arp.build_frame(arp.request(
                sender_mac=PEER_MAC, sender_ip=PEER_IP, target_ip=sim.ip)), "the ARP request")
            rows = []
            for size in sizes:
                if say:
                    say(f"W={width}: {pings} pings of {size} octets, {window} in flight")
                rows.append(_burst(sim, peer, model, rng, size, pings, window))
            _check_counters(sim, model, 1 + pings * len(sizes))
            stats = sim.device.stats()
    finally:
        peer.close()
    return {"bench": "nic", "width": width, "window": window, "seed": seed,
            "peer": {"mac": ethernet.format_mac(PEER_MAC), "ip": str(PEER_IP)},
            "nic": {"mac": ethernet.format_mac(sim.mac), "ip": f"{sim.ip}/{sim.prefix}"},
            "start_s": round(start_s, 2), "frames_in": stats["frames_in"],
            "frames_out": stats["frames_out"], "bad_out": stats["bad_out"],
            "verified": stats["bad_out"] == 0, "results": rows}


def nic_text_report(report):
    """The ``rnic bench nic`` report as a Markdown table."""
    lines = [
        f"Simulated NIC (W = {report['width']}) on the virtual cable: echo requests, "
        f"{report['window']} in flight, every reply checked against the model; "
        f"started in {report['start_s']} s",
        "",
        "| payload | frame | pings | frames/s | M cycles/s (wall) | M cycles/s (loop) "
        "| cycles/ping | line busy | of real time |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        loop = r["cycles_per_sim_s"]
        lines.append(
            f"| {r['size']} | {r['frame_octets']} | {r['pings']} | {r['frames_per_s']:.0f} | "
            f"{r['cycles_per_s'] / 1e6:.3f} | {'-' if loop is None else f'{loop / 1e6:.3f}'} | "
            f"{r['cycles_per_ping']:.0f} | {r['line_busy']:.3f} | 1/{1 / r['realtime']:.0f} |")
    return "\n".join(lines)
