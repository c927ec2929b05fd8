"""Typed access to the TCP engine's registers (the register map's TCP block, TCP_*): a mixin
of :class:`rnic.host.driver.regs.Registers`.

::

    regs = Registers(transport)
    regs.tcp_configure(secret=secrets.randbits(32), ring_log2=regs.tcp_caps().ring_log2)
    regs.tcp_listen(0, 7, echo=True)          # the echo service on port 7, in gateware
    conn = regs.tcp_connect("169.254.7.1", 5001, 40000)   # an active open: SYN sent
    for event in regs.tcp_events():           # ACCEPTED, PEER_CLOSED, CLOSED, ...
        print(event.conn, event.kind.name, regs.tcp_connection(event.conn).state.name)
"""

from __future__ import annotations

import dataclasses
import ipaddress
import secrets

from rnic.host.model.tcp_engine import initial_sequence
from rnic.host.spec.regmap import TCP_DROP_COUNTERS, TCP_PARAMS
from rnic.host.spec.tcp_engine import TcpConnectResult, TcpDrop, TcpEventKind, TcpState

__all__ = ["TcpAccess", "TcpCaps", "TcpEvent", "TcpConnection", "TCP_PARAMS", "TcpMissing",
           "TcpConnectError", "STREAM_SEND_MAX"]

#: The most octets of one stream send: TCP's least MSS (RFC 9293 section 3.7.1), so that a
#: run fits a segment whatever the peer's MSS.
STREAM_SEND_MAX = 536



class TcpMissing(RuntimeError):
    """The device has no TCP engine (TCP_CAPS.TCP is 0)."""


class TcpConnectError(RuntimeError):
    """An active open the engine refused: ``result`` (IN_USE, NO_FREE_CONNECTION)."""

    def __init__(self, result, message):
        super().__init__(message)
        self.result = result


@dataclasses.dataclass(frozen=True)
class TcpCaps:
    """TCP_CAPS: whether the device has the TCP engine, its listening slots and records, and
    the largest TCP_RING_LOG2 its ring memory holds."""
    tcp: bool
    listeners: int
    records: int
    ring_log2: int


@dataclasses.dataclass(frozen=True)
class TcpEvent:
    """One connection event (TCP_EVENT)."""
    conn: int
    kind: TcpEventKind


@dataclasses.dataclass(frozen=True)
class TcpConnection:
    """The TCB window of one connection (TCP_TCB_*)."""
    conn: int
    state: TcpState
    echo: bool
    retries: int
    remote_ip: ipaddress.IPv4Address
    remote_port: int
    local_port: int
    snd_una: int
    snd_nxt: int
    rcv_nxt: int
    snd_wnd: int
    cwnd: int
    rto: int
    mss: int

    def as_dict(self):
        out = dataclasses.asdict(self)
        out.update(state=self.state.name, remote_ip=str(self.remote_ip))
        return out


class TcpAccess:
    """The TCP block's sequences, on the ``read``/``write``/``field``/``modify``/``pulse``
    of :class:`~rnic.host.driver.regs.Registers`."""

    def tcp_caps(self) -> TcpCaps:
        f = self.fields("TCP_CAPS")
        return TcpCaps(bool(f["tcp"]), f["listeners"], f["records"], f["ring_log2"])

    def require_tcp(self) -> TcpCaps:
        """TCP_CAPS; :class:`TcpMissing` on a device without the TCP engine."""
        caps = self.tcp_caps()
        if not caps.tcp:
            raise TcpMissing("the device has no TCP engine (TCP_CAPS.TCP is 0)")
        return caps

    def _tcp_conn(self, conn):
        connections = self.fields("CAPS")["connections"]
        if isinstance(conn, bool) or not isinstance(conn, int) or not 0 <= conn < connections:
            raise ValueError(f"connection {conn!r} is not in 0 .. {connections - 1}")
        self.modify("TCP_CONN", conn=conn)

    def tcp_configure(self, **params):
        """Write engine parameters by :data:`TCP_PARAMS` name (times in ticks)."""
        self.require_tcp()
        for name, value in params.items():
            if name not in TCP_PARAMS:
                raise TypeError(f"unknown TCP parameter {name!r} (known: {', '.join(TCP_PARAMS)})")
            register, field = TCP_PARAMS[name]
            f = self.map[register].field(field)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= f.max:
                raise ValueError(f"TCP parameter {name}={value!r} is not in 0 .. {f.max}")
            self.modify(register, **{field.lower(): value})

    def tcp_params(self):
        """Every engine parameter, ``{name: value}``."""
        return {name: self.field(register, field)
                for name, (register, field) in TCP_PARAMS.items()}

    def tcp_listen(self, index, port, *, echo=False, valid=True):
        """Slot ``index`` listens on ``port`` (``echo``: as the echo service; ``valid=False``
        frees the slot)."""
        caps = self.require_tcp()
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < caps.listeners:
            raise ValueError(f"listening slot {index!r} is not in 0 .. {caps.listeners - 1}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 0xFFFF:
            raise ValueError(f"TCP port {port!r} is not in 0 .. 65535")
        self.write("TCP_LISTEN", index=index, valid=int(bool(valid)), echo=int(bool(echo)),
                   port=port)
        self.pulse("TCP_CMD", "LISTEN")

    def tcp_events(self, limit=1000):
        """The queued connection events, oldest first (each removed from the queue)."""
        out = []
        while len(out) < limit:
            f = self.fields("TCP_EVENT")
            if not f["valid"]:
                break
            out.append(TcpEvent(f["conn"], TcpEventKind(f["kind"])))
            self.pulse("TCP_CMD", "POP")
        return out

    def _tcp_command(self, conn, name):
        self.require_tcp()
        self._wait("TCP_STATUS", "CMD_BUSY", 0)
        self._tcp_conn(conn)
        self.pulse("TCP_CMD", name)

    def tcp_connect(self, remote_ip, remote_port, local_port, *, echo=False, iss=None):
        """Active open to ``remote_ip``:``remote_port`` from ``local_port``: the connection
        id whose SYN is out (CONNECTED, REFUSED or LOST follows as an event). ``echo``: the
        connection is the echo service. ``iss``: the initial sequence number, by default
        RFC 6528's, a hash of the four-tuple under this driver's secret plus a clock
        (:func:`~rnic.host.model.tcp_engine.initial_sequence` of TCP_NOW).
        :class:`TcpConnectError` when the four-tuple is a connection already or no id is
        free."""
        self.require_tcp()
        remote = ipaddress.IPv4Address(remote_ip)
        for name, port in (("remote_port", remote_port), ("local_port", local_port)):
            if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 0xFFFF:
                raise ValueError(f"{name} must be 1 .. 65535, not {port!r}")
        if iss is None:
            if not hasattr(self, "_iss_secret"):
                self._iss_secret = secrets.randbits(32)
            iss = initial_sequence(self._iss_secret, self.get_ip(), local_port, remote,
                                   remote_port, self.read("TCP_NOW"))
        if isinstance(iss, bool) or not isinstance(iss, int) or not 0 <= iss < 1 << 32:
            raise ValueError(f"iss must be a 32-bit unsigned int, not {iss!r}")
        self._wait("TCP_CONNECT_STATUS", "BUSY", 0)
        self.write("TCP_CONNECT_IP", addr=int(remote))
        self.write("TCP_CONNECT_PORTS", local=local_port, remote=remote_port)
        self.write("TCP_CONNECT_ISS", iss=iss)
        self.modify("TCP_CONN", echo=int(bool(echo)))
        self.pulse("TCP_CMD", "CONNECT")
        self._wait("TCP_CONNECT_STATUS", "BUSY", 0)
        status = self.fields("TCP_CONNECT_STATUS")
        result = TcpConnectResult(status["result"])
        if result is TcpConnectResult.IN_USE:
            raise TcpConnectError(result, f"{remote}:{remote_port} from local port "
                                          f"{local_port} is a connection already")
        if result is not TcpConnectResult.SYN_SENT:
            raise TcpConnectError(result, "no free connection id (or no room in the "
                                          "connection table for this four-tuple)")
        return status["conn"]

    def tcp_close(self, conn):
        """A FIN after the octets written (RFC 9293 section 3.10.4)."""
        self._tcp_command(conn, "CLOSE")

    def tcp_abort(self, conn):
        """A RST; the connection id is free at once, no event follows."""
        self._tcp_command(conn, "ABORT")

    def tcp_set_mode(self, conn, *, fpdu):
        """Connection ``conn``'s runs are whole FPDUs (``fpdu``) or a byte stream."""
        self.require_tcp()
        self._tcp_conn(conn)
        self.modify("TCP_CONN", fpdu=int(bool(fpdu)))
        self.pulse("TCP_CMD", "MODE")

    def tcp_stream_send(self, conn, data):
        """Send ``data`` (1 .. 536 octets: TCP's least MSS, room for an MPA Request or Reply
        with 512 octets of private data) on connection ``conn`` through the stream port, as
        they are; it leaves once the connection may send (its send ring has room). Waits
        until no earlier stream send is pending."""
        self.require_tcp()
        data = bytes(data)
        if not 1 <= len(data) <= STREAM_SEND_MAX:
            raise ValueError(f"a stream send has 1 .. {STREAM_SEND_MAX} octets, not {len(data)}")
        connections = self.fields("CAPS")["connections"]
        if isinstance(conn, bool) or not isinstance(conn, int) or not 0 <= conn < connections:
            raise ValueError(f"connection {conn!r} is not in 0 .. {connections - 1}")
        self._wait("TCP_STREAM_TX_STATUS", "BUSY", 0)
        words = -(-len(data) // 4)
        padded = data + bytes(4 * words - len(data))
        for k in range(words):
            self.write("TCP_STREAM_TX_DATA", int.from_bytes(padded[4 * k:4 * k + 4], "little"))
        self.write("TCP_STREAM_TX_CONN", conn=conn)
        self.write("TCP_STREAM_TX_LEN", len=len(data))
        self.pulse("TCP_STREAM_TX_CMD", "SEND")

    def tcp_stream_cancel(self):
        """Drop a stream send that waits for its connection (closed or reset: it never may
        send again); False when none was pending."""
        self.require_tcp()
        if not self.field("TCP_STREAM_TX_STATUS", "BUSY"):
            return False
        self.pulse("TCP_STREAM_TX_CMD", "CANCEL")
        self._wait("TCP_STREAM_TX_STATUS", "BUSY", 0)
        return True

    def tcp_stream_runs(self, limit=1000):
        """The runs of octets received on connections in byte-stream mode, oldest first
        (each removed): ``[(conn, octets, truncated)]``. ``truncated``: octets after these
        were dropped (the stream port's FIFO was full): the connection's stream is broken."""
        out = []
        while len(out) < limit:
            st = self.fields("TCP_STREAM_RX_STATUS")
            if not st["valid"]:
                break
            conn = self.field("TCP_STREAM_RX_CONN", "CONN")
            words = -(-st["len"] // 4)
            data = bytearray()
            for k in range(words):
                data += self.read("TCP_STREAM_RX_DATA").to_bytes(4, "little")
                if k < words - 1:
                    self.pulse("TCP_STREAM_RX_CMD", "NEXT")
            self.pulse("TCP_STREAM_RX_CMD", "POP")
            out.append((conn, bytes(data[:st["len"]]), bool(st["truncated"])))
        return out

    def tcp_stream_lost(self):
        """Whole runs were dropped by the stream port since reset (its records were full)."""
        return bool(self.field("TCP_STREAM_RX_STATUS", "LOST"))

    def tcp_connection(self, conn) -> TcpConnection:
        """The TCB of connection ``conn`` (state CLOSED: not in use)."""
        self.require_tcp()
        self._tcp_conn(conn)
        s, ports = self.fields("TCP_TCB_STATE"), self.fields("TCP_TCB_PORTS")
        word = {name: self.read(f"TCP_TCB_{name.upper()}")
                for name in ("remote_ip", "snd_una", "snd_nxt", "rcv_nxt", "snd_wnd", "cwnd",
                             "rto")}
        return TcpConnection(conn, TcpState(s["state"]), bool(s["echo"]), s["retries"],
                             ipaddress.IPv4Address(word.pop("remote_ip")), ports["remote"],
                             ports["local"], **word, mss=self.field("TCP_TCB_MSS", "MSS"))

    def tcp_counters(self):
        """``{"drops": {TcpDrop: count}, "tx_segments", "retransmits", "events_lost", "now"}``."""
        return {"drops": {TcpDrop(reason): self.read(name) for reason, name in TCP_DROP_COUNTERS},
                "tx_segments": self.read("TCP_TX_SEGMENTS"),
                "retransmits": self.read("TCP_RETRANSMITS"),
                "events_lost": self.read("TCP_EVENTS_LOST"), "now": self.read("TCP_NOW")}
