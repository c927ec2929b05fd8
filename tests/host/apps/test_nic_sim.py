"""``rnic nic-sim`` (host/apps/nic_sim.py, host/cli/nic_sim.py): the simulated NIC on a
virtual cable, driven as a user does.

(a) the option parsers and the CLI's usage errors (exit 2, one line; a port in use found
    before anything is built);
(b) ``rnic nic-sim --wire A:B --control C`` in a subprocess, a UDP socket on 127.0.0.1:B as
    the peer: ARP request, pings of 0, 56 and 1472 octets (replies byte-identical to
    :class:`rnic.host.model.network_layer.NicNetModel`'s), frames for another IP, UDP and
    another MAC (no reply, each counted), a burst of pings (frames per second printed); the
    counters through ``rnic regs read ... --device tcp:127.0.0.1:C`` and the driver;
    SIGTERM -> exit 0, the stopped line, the ports free again;
(c) ``--ip 10.1.2.3/16 --mac 02:00:00:00:00:42 --pcap FILE``: the registers, ARP and ping
    with the new addresses, the old address no longer answered; SIGINT -> exit 0; the
    capture holds the cable's frames both ways, in order;
(d) ``--echo 7``, and ``rnic tcp`` on its register server: a SYN to the echo port answered
    with a SYN-ACK, one to a closed port with a RST, another port opened with
    ``rnic tcp listen``; ``rnic tcp status``/``events``, ``rnic status``'s TCP part, and
    their errors.
"""

from __future__ import annotations

import json
import random
import selectors
import signal
import socket
import subprocess
import sys
import time

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from rnic.host.apps.nic_sim import parse_ip, parse_mac, parse_wire
from rnic.host.driver.regs import Registers
from rnic.host.driver.transport import SocketTransport
from rnic.host.model.network_layer import NicNetModel
from rnic.host.net.pcap import LINKTYPE_ETHERNET, read_pcap
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_NIC_MAC, RxDrop, TxDrop

PEER_MAC = "52:54:00:00:07:01"          # the siw VM guest's
PEER_IP = "169.254.7.1"
BROADCAST = "ff:ff:ff:ff:ff:ff"
#: A first run builds the simulation (about a minute here); a cached one starts in a second.
READY_TIMEOUT = 900


# -- (a) parsers and usage errors --------------------------------------------------------------

def test_parse_wire():
    assert parse_wire("17702:17701") == (17702, 17701)
    for bad in ("17702", "a:b", "0:5", "5:70000", "5:5", ":5", "5:-1"):
        with pytest.raises(ValueError):
            parse_wire(bad)


def test_parse_ip():
    assert parse_ip("10.1.2.3/16") == (__import__("ipaddress").IPv4Address("10.1.2.3"), 16)
    assert parse_ip("169.254.7.2")[1] == 24
    assert parse_ip("10.0.0.1/32")[1] == 32
    for bad in ("10.1.2.3/0", "10.1.2.3/33", "10.1.2/24", "224.0.0.1/24", "0.0.0.0/8",
                "10.1.2.0/24", "10.1.2.255/24", "10.1.2.3/x", "255.255.255.255/32"):
        with pytest.raises(ValueError):
            parse_ip(bad)


def test_parse_mac():
    assert parse_mac("02:00:00:00:00:42") == bytes.fromhex("020000000042")
    assert parse_mac("02-00-0A-07-00-02") == DEFAULT_NIC_MAC
    for bad in ("02:00:00:00:00", "01:00:5e:00:00:01", "00:00:00:00:00:00", "02:00:00:00:00:zz",
                "0200.0000.0042"):
        with pytest.raises(ValueError):
            parse_mac(bad)


def rnic(*args, timeout=120):
    proc = subprocess.run([sys.executable, "-m", "rnic.host.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args, what", [
    (["--wire", "17702"], "--wire"),
    (["--wire", "5:5"], "--wire"),
    (["--wire", "5:70000"], "--wire"),
    (["--wire", "17702:17701", "--ip", "10.1.2.3/40"], "--ip"),
    (["--wire", "17702:17701", "--ip", "10.1.2"], "--ip"),
    (["--wire", "17702:17701", "--mac", "01:00:5e:00:00:01"], "--mac"),
    (["--wire", "17702:17701", "--mac", "02:00"], "--mac"),
    (["--wire", "17702:17701", "--control", "70000"], "--control"),
    (["--wire", "17702:17701", "--echo", "0"], "--echo"),
    (["--wire", "17702:17701", "--echo", "7", "--echo", "7"], "--echo"),
    (["--wire", "17702:17701", *[a for p in range(7, 12) for a in ("--echo", str(p))]],
     "--echo"),
    ([], "--wire"),
])
def test_usage_errors(args, what):
    code, out, err = rnic("nic-sim", *args)
    assert code == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and what in err, err


def test_ports_in_use():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.1", 0))
        taken = udp.getsockname()[1]
        t0 = time.monotonic()
        code, out, err = rnic("nic-sim", "--wire", f"{taken}:{free_udp_port()}")
        assert code == 2 and "cannot bind UDP" in err and f":{taken}" in err, err
        assert len(err.strip().splitlines()) == 1
    with socket.create_server(("127.0.0.1", 0)) as tcp:
        taken = tcp.getsockname()[1]
        code, out, err = rnic("nic-sim", "--wire", f"{free_udp_port()}:{free_udp_port()}",
                              "--control", taken)
        assert code == 2 and "--control" in err and f":{taken}" in err, err
    assert time.monotonic() - t0 < 60          # refused before anything is built


# -- (b), (c): the NIC on the cable ------------------------------------------------------------

class Cable:
    """``rnic nic-sim`` in a subprocess and the peer's UDP socket."""

    def __init__(self, *extra):
        self.listen, self.peer, self.control = free_udp_port(), free_udp_port(), free_tcp_port()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", self.peer))
        self.sock.settimeout(20)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rnic.host.cli", "nic-sim", "--wire",
             f"{self.listen}:{self.peer}", "--control", str(self.control), "--json", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ready = self._first_line()

    def _first_line(self):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if sel.select(timeout=READY_TIMEOUT):
            line = self.proc.stdout.readline()
            if line:
                return json.loads(line)
        self.proc.kill()
        raise AssertionError(f"rnic nic-sim did not get ready: {self.proc.stderr.read()}")

    def send(self, frame):
        self.sock.sendto(bytes(frame), ("127.0.0.1", self.listen))

    def recv(self):
        return self.sock.recv(65536)

    def regs(self):
        return Registers(SocketTransport("127.0.0.1", self.control))

    def stop(self, sig):
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=30)
        self.sock.close()
        return self.proc.returncode, out, err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        self.sock.close()


@pytest.fixture
def cable():
    made = []

    def make(*extra):
        made.append(Cable(*extra))
        return made[-1]
    yield make
    for c in made:
        c.kill()


def pad(frame):
    """What the guest's MAC (and the harness) does to a short frame."""
    frame = bytes(frame)
    return frame + bytes(max(0, 60 - len(frame)))


def arp_request(target, *, src_mac=PEER_MAC, src_ip=PEER_IP):
    return bytes(Ether(dst=BROADCAST, src=src_mac)
                 / ARP(op=1, hwsrc=src_mac, psrc=src_ip, pdst=target))


def ping(rng, size, *, dst_mac=DEFAULT_NIC_MAC, dst_ip=DEFAULT_NIC_IP, src_ip=PEER_IP):
    return bytes(Ether(dst=":".join(f"{b:02x}" for b in dst_mac), src=PEER_MAC)
                 / IP(src=src_ip, dst=dst_ip, id=rng.getrandbits(16))
                 / ICMP(type=8, id=rng.getrandbits(16), seq=rng.getrandbits(16))
                 / Raw(rng.randbytes(size)))


def exchange(cable, model, frame):
    """Send ``frame`` and check the reply against the model's (one reply expected)."""
    (want,) = model.receive(pad(frame)).replies
    cable.send(frame)
    got = cable.recv()
    assert got == want, f"reply differs from the model's:\n{got.hex()}\n{want.hex()}"
    return got


def test_cable_default(cable):
    rng = random.Random(22)
    c = cable()
    assert c.ready["event"] == "ready" and c.ready["device"] == f"tcp:127.0.0.1:{c.control}"
    assert (c.ready["ip"], c.ready["prefix"], c.ready["mac"]) == (DEFAULT_NIC_IP, 24,
                                                                  "02:00:0a:07:00:02")
    model = NicNetModel()
    reply = Ether(exchange(c, model, arp_request(DEFAULT_NIC_IP)))
    assert reply[ARP].op == 2 and reply[ARP].hwsrc == "02:00:0a:07:00:02"
    for size in (0, 56, 1472):
        reply = Ether(exchange(c, model, ping(rng, size)))
        assert reply[ICMP].type == 0 and len(reply[Raw].load if size else b"") >= size

    # no reply to these; each is counted for its reason (the next ping's reply comes next)
    bad = [ping(rng, 56, dst_ip="169.254.7.3"),                                   # IP_OTHER
           bytes(Ether(dst="02:00:0a:07:00:02", src=PEER_MAC) / IP(src=PEER_IP, dst=DEFAULT_NIC_IP)
                 / UDP(sport=5000, dport=5001) / Raw(b"not for us")),             # IP_PROTOCOL
           ping(rng, 56, dst_mac=bytes.fromhex("020000000099")),                  # OTHER_MAC
           arp_request("169.254.7.9")]                                            # ARP_OTHER
    for frame in bad:
        assert model.receive(pad(frame)).replies == ()
        c.send(frame)
    exchange(c, model, ping(rng, 56))

    # a burst: many pings in flight at once, every reply back and right
    n, window = 200, 16
    frames = [ping(rng, 56) for _ in range(n)]
    wants = [model.receive(pad(f)).replies[0] for f in frames]
    t0, sent, got = time.monotonic(), 0, []
    while len(got) < n:
        while sent < n and sent - len(got) < window:
            c.send(frames[sent])
            sent += 1
        got.append(c.recv())
    burst_s = time.monotonic() - t0
    assert got == wants
    print(f"burst: {n} pings (98-octet frames) in {burst_s:.2f} s: "
          f"{2 * n / burst_s:.0f} frames/s over the cable (in + out)")

    # the counters, through the register server: rnic regs and the driver
    good = 1 + 3 + len(bad) - 1 + 1 + n              # every frame the MAC accepted
    code, out, err = rnic("regs", "read", "NET_RX_GOOD", "--device", c.ready["device"], "--json")
    assert code == 0, err
    assert json.loads(out)["value"] == good
    counters = c.regs().net_counters()
    expect = {reason: model.counters.get(reason, 0) for reason in RxDrop}
    expect[RxDrop.NONE] = good
    assert counters["rx"] == expect
    for reason in (RxDrop.IP_OTHER, RxDrop.IP_PROTOCOL, RxDrop.OTHER_MAC, RxDrop.ARP_OTHER):
        assert counters["rx"][reason] == 1, reason
    assert counters["tx_frames"] == 1 + 3 + 1 + n and counters["tx_dropped"] == 0

    code, out, err = c.stop(signal.SIGTERM)
    assert code == 0, err
    stopped = json.loads(out.splitlines()[-1])
    assert stopped == {"event": "stopped", "frames_in": good + 1, "frames_out": 1 + 3 + 1 + n,
                       "dropped_in": 0, "send_errors": 0, "bad_out": 0}
    # the sockets are closed: the ports can be bound again
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", c.listen))
    with socket.create_server(("127.0.0.1", c.control)):
        pass


def test_cable_options(cable, tmp_path):
    import ipaddress
    rng = random.Random(23)
    mac = bytes.fromhex("020000000042")
    capture = tmp_path / "cable.pcap"
    c = cable("--ip", "10.1.2.3/16", "--mac", "02:00:00:00:00:42", "--pcap", capture)
    assert c.ready["pcap"] == str(capture)
    assert (c.ready["ip"], c.ready["prefix"], c.ready["mac"]) == ("10.1.2.3", 16,
                                                                  "02:00:00:00:00:42")
    regs = c.regs()
    assert regs.get_ip() == ipaddress.IPv4Address("10.1.2.3") and regs.get_prefix() == 16
    assert regs.get_mac() == mac

    model = NicNetModel(mac=mac, ip="10.1.2.3", prefix=16)
    c.send(arp_request(DEFAULT_NIC_IP))                      # the default address: not ours now
    assert model.receive(pad(arp_request(DEFAULT_NIC_IP))).replies == ()
    reply = Ether(exchange(c, model, arp_request("10.1.2.3", src_ip="10.1.0.1")))
    assert reply[ARP].hwsrc == "02:00:00:00:00:42" and reply[ARP].psrc == "10.1.2.3"
    exchange(c, model, ping(rng, 100, dst_mac=mac, dst_ip="10.1.2.3", src_ip="10.1.0.1"))
    assert regs.net_rx_counters()[RxDrop.ARP_OTHER] == 1

    code, out, err = c.stop(signal.SIGINT)
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["event"] == "stopped"
    # --pcap: every frame of the cable both ways, in order, as it passed
    linktype, frames = read_pcap(capture)
    sent = [arp_request(DEFAULT_NIC_IP), arp_request("10.1.2.3", src_ip="10.1.0.1")]
    assert linktype == LINKTYPE_ETHERNET and len(frames) == 5
    assert [f for _, f in frames[:2]] == sent
    assert Ether(frames[2][1])[ARP].op == 2 and Ether(frames[4][1])[ICMP].type == 0
    assert [t for t, _ in frames] == sorted(t for t, _ in frames)


# -- (d): TCP ------------------------------------------------------------------------------------

def syn(port, *, seq=1000, sport=40000):
    return bytes(Ether(dst=":".join(f"{b:02x}" for b in DEFAULT_NIC_MAC), src=PEER_MAC)
                 / IP(src=PEER_IP, dst=DEFAULT_NIC_IP)
                 / TCP(sport=sport, dport=port, flags="S", seq=seq, options=[("MSS", 1460)]))


def tcp_answer(c, frame):
    """Send ``frame`` (a SYN from the peer) and return the TCP layer of the NIC's answer
    (the first frame of the NIC may be its ARP request for the peer: answered first)."""
    c.send(frame)
    while True:
        got = Ether(c.recv())
        if ARP in got:
            c.send(bytes(Ether(dst=got[Ether].src, src=PEER_MAC)
                         / ARP(op=2, hwsrc=PEER_MAC, psrc=PEER_IP, hwdst=got[ARP].hwsrc,
                               pdst=got[ARP].psrc)))
            c.send(frame)                  # (the NIC dropped it for the ARP miss)
            continue
        return got[TCP]


def test_echo_port_and_tcp_commands(cable):
    c = cable("--echo", "7")
    assert c.ready["echo"] == [7]
    device = ("--device", f"tcp:127.0.0.1:{c.control}")
    answer = tcp_answer(c, syn(7, seq=1000))
    assert answer.flags == "SA" and answer.ack == 1001 and answer.sport == 7
    assert dict(answer.options)["MSS"] == 1460
    assert tcp_answer(c, syn(9, seq=5)).flags == "RA"     # nothing listens on 9 (yet)

    code, out, err = rnic("tcp", "listen", "9", "--slot", "1", *device, "--json")
    assert code == 0, err
    assert json.loads(out) == {"slot": 1, "port": 9, "echo": False, "listening": True}
    assert tcp_answer(c, syn(9, seq=77)).flags == "SA"
    code, out, err = rnic("tcp", "status", *device, "--json")
    assert code == 0, err
    status = json.loads(out)
    # (SYN cookies: a SYN opens no connection; one opens with the peer's ACK)
    assert status["connections"] == [] and status["drops"]["NO_CONNECTION"] == 1
    # three SYN-ACKs (the first dropped by the send path for the ARP miss) and a RST
    assert status["params"]["ring_log2"] == 16 and status["tx_segments"] == 4
    assert c.regs().net_counters()["tx_drops"][TxDrop.ARP_MISS] == 1
    code, out, err = rnic("tcp", "events", *device)
    assert (code, out) == (0, ""), err
    code, out, err = rnic("tcp", "status", *device)
    assert code == 0 and "connections: none open" in out and "NO_CONNECTION 1" in out, out
    code, out, err = rnic("status", *device, "--json")
    assert code == 0, err
    tcp = json.loads(out)["tcp"]
    assert tcp["connections"] == [] and tcp["drops"] == {"NO_CONNECTION": 1}
    code, out, err = rnic("status", *device)
    assert code == 0 and "tcp: 0 open, 4 segments sent (0 again), drops NO_CONNECTION 1" in out

    code, out, err = rnic("tcp", "listen", "9", "--slot", "9", *device)
    assert code == 2 and "listening slot 9" in err and len(err.strip().splitlines()) == 1, err
    code, out, err = rnic("tcp", "close", "99", *device)
    assert code == 2 and "connection 99" in err, err
    code, out, err = rnic("tcp", "status", "--device", "model")
    assert code == 1 and "no TCP engine" in err and len(err.strip().splitlines()) == 1, err
    code, _, err = c.stop(signal.SIGTERM)
    assert code == 0, err
