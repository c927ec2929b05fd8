"""The simulated NIC on a virtual cable: :class:`NicSim`, what ``rnic nic-sim`` runs.

The cable is qemu's ``dgram`` netdev (what ``siw-vm run --wire QEMUPORT:PEERPORT`` gives the
guest): one Ethernet frame per UDP datagram on 127.0.0.1, destination MAC first, no
preamble, no FCS. :class:`NicSim` binds ``127.0.0.1:listen_port``, puts every datagram that
arrives there on the simulated NIC's GMII receive side
(:class:`rnic.sim.nic_device.NicSimDevice`), sends every frame the NIC transmits as one
datagram to ``127.0.0.1:peer_port``, and serves the NIC's registers on
``127.0.0.1:control_port`` (:class:`rnic.host.driver.transport.TransportServer`, so that
``rnic regs ... --device tcp:127.0.0.1:PORT`` reaches them). At start it programs the MAC,
the IPv4 address and the prefix length through the registers
(:meth:`rnic.host.driver.regs.Registers.set_mac` / ``set_ip``), and TCP: a random SYN-cookie
secret, the largest send rings its memory holds (TCP_CAPS.RING_LOG2), and the echo service on each of
``echo_ports``::

    from rnic.host.apps.nic_sim import NicSim

    with NicSim(listen_port=17702, peer_port=17701, echo_ports=[7]) as sim:
        print(sim.control_address)                            # tcp:127.0.0.1:<port>
        sim.wait()                                            # until sim.stop() (a signal)

The sockets are bound before the simulation is built or started, so a port in use fails at
once (:class:`PortInUse`). Threads: one receives datagrams, the device's reader sends the
NIC's frames, the register server has its own; the device's lock serialises frames and
register accesses (one exchange with the harness at a time).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import secrets
import socket
import threading

from rnic.host.driver.regs import Registers
from rnic.host.driver.transport import Transport, TransportError, TransportServer
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX

__all__ = ["NicSim", "NicSimStats", "PortInUse", "parse_wire", "parse_ip", "parse_mac",
           "HOST"]

#: The cable and the register server are on the loopback interface only (the register
#: protocol has no access control).
HOST = "127.0.0.1"
#: Largest datagram read from the cable (a jumbo frame is counted as a giant by the MAC;
#: the harness takes at most 16383 octets, longer datagrams are dropped here and counted).
_DATAGRAM = 65536


class PortInUse(OSError):
    """A port of the cable or of the register server cannot be bound."""


def parse_wire(text):
    """``(listen_port, peer_port)`` of ``LISTEN:PEER`` (two ports 1..65535, different);
    ValueError otherwise."""
    listen, sep, peer = str(text).partition(":")
    if not sep or not listen.isdigit() or not peer.isdigit():
        raise ValueError(f"{text!r} is not LISTEN_PORT:PEER_PORT (e.g. 17702:17701)")
    listen, peer = int(listen), int(peer)
    for port in (listen, peer):
        if not 0 < port < 65536:
            raise ValueError(f"port {port} in {text!r} is not in 1..65535")
    if listen == peer:
        raise ValueError(f"{text!r}: the NIC cannot listen on the port it sends to")
    return listen, peer


def parse_ip(text):
    """``(IPv4Address, prefix)`` of ``ADDRESS/PREFIX`` (``ADDRESS`` alone: prefix 24); a
    unicast address and a prefix of 1..32; ValueError otherwise."""
    address, sep, prefix = str(text).partition("/")
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        raise ValueError(f"{address!r} is not an IPv4 address (e.g. 169.254.7.2/24)") from None
    if sep:
        if not prefix.isdigit() or not 1 <= int(prefix) <= 32:
            raise ValueError(f"prefix length {prefix!r} in {text!r} is not in 1..32")
        prefix = int(prefix)
    else:
        prefix = DEFAULT_PREFIX
    if ip.is_multicast or ip.is_unspecified or ip == ipaddress.IPv4Address("255.255.255.255"):
        raise ValueError(f"{address} is not a unicast address")
    net = ipaddress.IPv4Network(f"{ip}/{prefix}", strict=False)
    if prefix <= 30 and ip in (net.network_address, net.broadcast_address):
        raise ValueError(f"{ip} is the {'network' if ip == net.network_address else 'broadcast'} "
                         f"address of {net}")
    return ip, prefix


def parse_mac(text):
    """The 6 octets of ``aa:bb:cc:dd:ee:ff`` (or ``-`` separated), a unicast MAC; ValueError
    otherwise."""
    parts = str(text).replace("-", ":").split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"{text!r} is not a MAC address (e.g. 02:00:0a:07:00:02)")
    try:
        mac = bytes.fromhex("".join(parts))
    except ValueError:
        raise ValueError(f"{text!r} is not a MAC address (e.g. 02:00:0a:07:00:02)") from None
    if mac[0] & 1:
        raise ValueError(f"{text} is a group (multicast) address, not a NIC's")
    if mac == bytes(6):
        raise ValueError(f"{text} is the null MAC address")
    return mac


@dataclasses.dataclass
class NicSimStats:
    """What crossed the cable: frames in (datagrams given to the NIC), frames out (sent to
    the peer), datagrams dropped here (empty or longer than the harness takes), sends that
    failed, and bad frames from the NIC (bad FCS, tx_er, preamble: gateware errors)."""
    frames_in: int = 0
    frames_out: int = 0
    dropped_in: int = 0
    send_errors: int = 0
    bad_out: int = 0


class _LateTransport(Transport):
    """The register server's transport before the device exists (the server's socket is
    bound first, so that a port in use is found before the build)."""

    def __init__(self):
        self.device = None

    def _dev(self):
        if self.device is None:
            raise TransportError("the simulated NIC is not running")
        return self.device

    def read32(self, addr):
        return self._dev().read32(addr)

    def write32(self, addr, value):
        self._dev().write32(addr, value)

    # the simulated NIC's host memory, for data paths driven through the register server
    @property
    def mem_size(self):
        return self._dev().mem_size

    def mem_read(self, addr, n):
        return self._dev().mem_read(addr, n)

    def mem_write(self, addr, data):
        self._dev().mem_write(addr, data)

    def close(self):
        pass


class NicSim:
    """The simulated NIC on a virtual cable (see the module docstring).

    Parameters (keyword-only)
    ----------
    listen_port, peer_port : int
        The cable: datagrams in on ``127.0.0.1:listen_port`` (0: a free port, then
        :attr:`listen_port`), out to ``127.0.0.1:peer_port``.
    ip, prefix, mac
        The NIC's addresses (defaults 169.254.7.2/24 and 02:00:0a:07:00:02), programmed
        through the registers at start.
    control_port : int
        TCP port of the register server (0: any free port; :attr:`control_port`).
    width, connections : int
        Build parameters of the simulated NIC (defaults 4, 16).
    echo_ports : iterable of int
        TCP ports of the echo service (RFC 862, in gateware; at most TCP_CAPS.LISTENERS).
    pcap : str, path, file or None
        Where to write every frame of the cable, both ways, as it passes (a pcap file:
        :class:`rnic.host.net.pcap.FrameWriter`).
    device_factory : callable or None
        ``factory(on_frame=..., on_bad=..., width=..., connections=...)`` returning the
        device (default :class:`rnic.sim.nic_device.NicSimDevice`).
    """

    def __init__(self, *, listen_port, peer_port, ip=DEFAULT_NIC_IP, prefix=DEFAULT_PREFIX,
                 mac=DEFAULT_NIC_MAC, control_port=0, width=4, connections=16,
                 echo_ports=(), pcap=None, device_factory=None):
        self.listen_port, self.peer_port = listen_port, peer_port
        self.ip, self.prefix, self.mac = ipaddress.IPv4Address(ip), prefix, bytes(mac)
        self.stats = NicSimStats()
        self._stop = threading.Event()
        self._late = _LateTransport()
        self.device = self.server = self._udp = self._rx_thread = self.capture = None
        try:
            if pcap is not None:
                from rnic.host.net.pcap import FrameWriter
                self.capture = FrameWriter(pcap)
            self._udp = self._bind_udp(listen_port)
            self.listen_port = self._udp.getsockname()[1]      # (0 binds a free port)
            try:
                self.server = TransportServer(self._late, control_port, HOST)
            except OSError as e:
                raise PortInUse(f"cannot listen on {HOST}:{control_port} (--control): "
                                f"{e.strerror or e}") from None
            self.control_port = self.server.port
            if device_factory is None:
                from rnic.sim.nic_device import NicSimDevice
                device_factory = NicSimDevice
            self.device = device_factory(on_frame=self._to_peer, on_bad=self._bad,
                                         width=width, connections=connections)
            regs = Registers(self.device)
            regs.set_mac(self.mac)
            regs.set_ip(self.ip, self.prefix)
            self.echo_ports = self._set_up_tcp(regs, tuple(echo_ports))
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _set_up_tcp(regs, echo_ports):
        """TCP's secret and time base, and the echo listeners; the echo ports."""
        caps = regs.tcp_caps()
        if not caps.tcp:
            if echo_ports:
                raise ValueError("this simulated NIC has no TCP engine for --echo")
            return ()
        if len(echo_ports) > caps.listeners:
            raise ValueError(f"{len(echo_ports)} echo ports, the NIC listens on at most "
                             f"{caps.listeners}")
        regs.tcp_configure(secret=secrets.randbits(32), ring_log2=caps.ring_log2)
        for index, port in enumerate(echo_ports):
            regs.tcp_listen(index, port, echo=True)
        return echo_ports

    @staticmethod
    def _bind_udp(port):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((HOST, port))
        except OSError as e:
            sock.close()
            raise PortInUse(f"cannot bind UDP {HOST}:{port} (--wire): {e.strerror or e}") from None
        sock.settimeout(0.2)
        return sock

    @property
    def control_address(self):
        """The ``--device`` spec of the register server: ``tcp:127.0.0.1:PORT``."""
        return f"tcp:{HOST}:{self.control_port}"

    def start(self):
        """Start moving frames and serving registers (background threads); returns self."""
        self._late.device = self.device
        self.server.start()
        self._rx_thread = threading.Thread(target=self._from_peer, daemon=True,
                                           name="rnic-nicsim-cable")
        self._rx_thread.start()
        return self

    # -- the cable
    def _from_peer(self):
        from rnic.sim.nic_device import MAX_FRAME
        while not self._stop.is_set():
            try:
                data = self._udp.recv(_DATAGRAM)
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            if not 1 <= len(data) <= MAX_FRAME:
                self.stats.dropped_in += 1
                continue
            if self.capture is not None:        # (before the NIC can answer it)
                self.capture.write(data)
            try:
                self.device.send_frame(data)
            except (TransportError, ValueError):
                if self._stop.is_set() or not self.alive:
                    return
                self.stats.dropped_in += 1
                continue
            self.stats.frames_in += 1

    def _to_peer(self, frame):
        if self.capture is not None:
            self.capture.write(frame)
        try:
            self._udp.sendto(frame, (HOST, self.peer_port))
        except OSError:                 # nobody on the other end yet: a cable without a peer
            self.stats.send_errors += 1
            return
        self.stats.frames_out += 1

    def _bad(self, reason, octets):
        self.stats.bad_out += 1

    # -- running
    @property
    def alive(self):
        """The simulation process still runs."""
        proc = getattr(self.device, "_proc", None)
        return proc is not None and proc.poll() is None

    def stop(self):
        """Make :meth:`wait` return (safe from a signal handler)."""
        self._stop.set()

    def wait(self, timeout=None):
        """Block until :meth:`stop` or the simulation process ends; True if stopped."""
        import time
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stop.wait(0.25):
            if not self.alive:
                return False
            if deadline is not None and time.monotonic() >= deadline:
                return False
        return True

    def close(self):
        """Stop the threads, close the sockets and the simulation."""
        self._stop.set()
        if self.server is not None:
            self.server.close()
        if self._rx_thread is not None:
            self._rx_thread.join(timeout=2.0)
        if self._udp is not None:
            self._udp.close()
        if self.device is not None:
            self.device.close()
        if self.capture is not None:
            self.capture.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
