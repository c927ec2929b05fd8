"""The golden model of the NIC's TCP offload engine: passive opens by SYN cookies, active
opens, in-order delivery, acknowledgment, retransmission, congestion control, zero-window
probing and close, for a table of connections.

The model is event-driven and has no clock of its own: every call takes ``now``, a count of
time-base ticks, and every timer length is in ticks. It is written as rules a gateware
engine implements the same way: the state of a connection is one entry of a table
(:class:`_Tcb`), arithmetic is on integers (sequence numbers with :func:`tcp.seq_add` and
the ``seq_*`` comparisons, since they wrap), and nothing queues without bound except the
octets a connection holds (its send ring, and what it delivered and the layer above has not
read yet).

Rules, each stated where it is applied:

* Opens: passive opens are stateless SYN cookies, always (RFC 4987 section 3.6): a SYN
  flood holds no table entry. Cookie layout in :mod:`rnic.host.spec.tcp_engine` (a 20-bit
  hash, the peer's window shift in 4 bits, 5 bits of time, a 3-bit MSS index; the shift is
  carried rather than searched, so a cookie is checked with one hash per time counter).
  Active opens send SYN with MSS and window scale; simultaneous open is not supported.
* Receive (RFC 9293 section 3.10.7.4 with RFC 5961): acceptability by the four cases,
  RST and SYN by RFC 5961, the ACK field, then in-order text only (no out-of-order queue).
* Send: a ring of written octets per connection, segments cut at FPDU ends when the
  writer gave them, retransmission (RFC 6298) and NewReno congestion control (RFC 5681,
  RFC 6582), zero-window probes (RFC 9293 section 3.8.6.1).
"""

import ipaddress
from dataclasses import dataclass, field

import crc32c

from rnic.host.spec.tcp import DEFAULT_MSS, MAX_WINDOW_SCALE, SEQ_MOD, TcpFlag
from rnic.host.spec.tcp_engine import (
    ACK_EVERY_SEGMENTS, COOKIE_AGES, COOKIE_HASH_BITS, COOKIE_MSS_BITS, COOKIE_MSS_TABLE,
    COOKIE_NO_WSCALE, COOKIE_TIME_BITS, COOKIE_TIME_SHIFT, COOKIE_WSCALE_BITS,
    DEFAULT_CONNECTIONS, DEFAULT_DELACK, DEFAULT_MAX_RETRIES, DEFAULT_RCV_WND,
    DEFAULT_RTO_INITIAL, DEFAULT_RTO_MAX, DEFAULT_RTO_MIN, DEFAULT_TIME_WAIT, DEFAULT_TX_RING,
    DUPACK_THRESHOLD, ENGINE_MSS, ISS_CLOCK_PER_TICK, IW_MAX_SEGMENTS, IW_MIN_SEGMENTS,
    IW_OCTETS, MAX_CONNECTIONS, MAX_MSS, MAX_RETRIES, MAX_TIMER, MAX_TX_RING,
    MAX_UNSCALED_WINDOW, MAX_WINDOW, MIN_MSS, RTTVAR_SHIFT, SRTT_SHIFT, TcpDrop, TcpEventKind,
    TcpStat, TcpState)

from . import ipv4, tcp
from .tcp import seq_add, seq_diff, seq_geq, seq_gt, seq_in_window, seq_lt

__all__ = ["Outgoing", "Event", "TcpEngine", "syn_cookie", "check_cookie", "cookie_mss_index",
           "initial_sequence"]

_FIN, _SYN, _RST, _PSH, _ACK = (TcpFlag.FIN, TcpFlag.SYN, TcpFlag.RST, TcpFlag.PSH,
                                TcpFlag.ACK)
#: States that have exchanged SYNs.
_SYNCHRONIZED = frozenset(TcpState) - {TcpState.CLOSED, TcpState.SYN_SENT}
#: States whose send side may still have data or a FIN to (re)send.
_SENDING = frozenset({TcpState.ESTABLISHED, TcpState.CLOSE_WAIT, TcpState.FIN_WAIT_1,
                      TcpState.CLOSING, TcpState.LAST_ACK})
#: States that take text and a FIN from the peer (RFC 9293 section 3.10.7.4, seventh step).
_RECEIVING = frozenset({TcpState.ESTABLISHED, TcpState.FIN_WAIT_1, TcpState.FIN_WAIT_2})
#: States in which the writer may add octets to the send ring.
_WRITABLE = frozenset({TcpState.SYN_SENT, TcpState.ESTABLISHED, TcpState.CLOSE_WAIT})


@dataclass(frozen=True)
class Outgoing:
    """A segment the engine sends: to ``dst_ip``, its ``octets`` (checksum included, from
    the engine's address) and the ``segment`` they were built from."""
    dst_ip: ipaddress.IPv4Address
    octets: bytes = field(repr=False)
    segment: tcp.TcpSegment


@dataclass(frozen=True)
class Event:
    """What connection ``conn`` reports: ``kind`` and, for ACCEPTED, ``detail`` =
    (remote address, remote port, local port)."""
    conn: int
    kind: TcpEventKind
    detail: tuple | None = None


# -- SYN cookies and the initial sequence number ---------------------------------------------

def _u32(value):
    return (value % SEQ_MOD).to_bytes(4, "big")


def _cookie_at(secret, remote_ip, remote_port, local_port, peer_isn, t, mss_index,
               wscale_code):
    """The cookie for time counter ``t`` (the layout of :mod:`rnic.host.spec.tcp_engine`)."""
    low = (wscale_code << COOKIE_TIME_BITS | t % (1 << COOKIE_TIME_BITS)) << COOKIE_MSS_BITS
    low |= mss_index
    # (six 32-bit words: the gateware's CRC32c works a word at a time)
    digest = crc32c.crc32c(_u32(secret) + _u32(int(remote_ip)) + remote_port.to_bytes(2, "big")
                           + local_port.to_bytes(2, "big") + _u32(peer_isn) + _u32(t)
                           + _u32(low))
    return (digest % (1 << COOKIE_HASH_BITS)) << (32 - COOKIE_HASH_BITS) | low


def syn_cookie(secret, remote_ip, remote_port, local_port, peer_isn, now, mss_index,
               wscale_code):
    """The SYN cookie (the ISS of the SYN-ACK) for a SYN from ``remote_ip``:``remote_port``
    to ``local_port`` whose sequence number is ``peer_isn``, at tick ``now``;
    ``wscale_code`` is the peer's window shift or :data:`COOKIE_NO_WSCALE`. The hash covers
    the peer, the ports, the peer's ISN, the full time counter ``now >> COOKIE_TIME_SHIFT``
    and the MSS index and shift, so none of them can be forged (RFC 4987 section 3.6), and
    only a segment at the peer's ISN + 1 (the handshake's ACK, or the first data after it)
    returns it: a later one would open the connection with a wrong IRS, as if the octets
    before it had arrived."""
    return _cookie_at(secret, remote_ip, remote_port, local_port, peer_isn,
                      now >> COOKIE_TIME_SHIFT, mss_index, wscale_code)


def check_cookie(secret, remote_ip, remote_port, local_port, peer_isn, now, cookie):
    """``(mss_index, wscale_code)`` if ``cookie`` is one that :func:`syn_cookie` gave for
    this peer and ISN at the time counter of ``now`` or the ``COOKIE_AGES - 1`` counters
    before it (a cookie lives 65536 to 98304 ticks at the default layout); else None."""
    mss_index = cookie % (1 << COOKIE_MSS_BITS)
    t_low = (cookie >> COOKIE_MSS_BITS) % (1 << COOKIE_TIME_BITS)
    wscale_code = (cookie >> (COOKIE_MSS_BITS + COOKIE_TIME_BITS)) % (1 << COOKIE_WSCALE_BITS)
    if wscale_code > MAX_WINDOW_SCALE and wscale_code != COOKIE_NO_WSCALE:
        return None
    t_now = now >> COOKIE_TIME_SHIFT
    for t in range(t_now, max(t_now - COOKIE_AGES, -1), -1):
        if t % (1 << COOKIE_TIME_BITS) == t_low and cookie == _cookie_at(
                secret, remote_ip, remote_port, local_port, peer_isn, t, mss_index,
                wscale_code):
            return mss_index, wscale_code
    return None


def cookie_mss_index(peer_mss):
    """The index of the largest :data:`COOKIE_MSS_TABLE` entry <= ``peer_mss`` (0, the
    default MSS of 536, when the peer's is smaller still: as Linux does)."""
    index = 0
    for i, value in enumerate(COOKIE_MSS_TABLE):
        if value <= peer_mss:
            index = i
    return index


def initial_sequence(secret, local_ip, local_port, remote_ip, remote_port, now):
    """The ISS of an active open (RFC 6528 section 3): crc32c over (``secret``, the 4-tuple)
    plus :data:`ISS_CLOCK_PER_TICK` per tick, modulo 2**32."""
    digest = crc32c.crc32c(_u32(secret) + _u32(int(local_ip)) + local_port.to_bytes(2, "big")
                           + _u32(int(remote_ip)) + remote_port.to_bytes(2, "big"))
    return (digest + now * ISS_CLOCK_PER_TICK) % SEQ_MOD


# -- the connection table ----------------------------------------------------------------------

@dataclass(eq=False)
class _Tcb:
    """One entry of the connection table (RFC 9293 section 3.3.1 names where they exist).

    ``snd_max`` is the highest sequence number sent (SND.NXT goes back to SND.UNA on a
    timeout). The send ring holds the octets from ``ring_seq`` on (unacknowledged and
    unsent); ``records`` cut it into runs, ``[end_seq, aligned]``: an aligned run is one
    FPDU, an unaligned one is byte stream that may be cut anywhere. ``rcv_adv`` is the right
    edge of the window last advertised. ``srtt8`` and ``rttvar4`` are SRTT * 8 and
    RTTVAR * 4 (None before the first sample)."""
    state: TcpState
    remote_ip: int
    remote_port: int
    local_port: int
    iss: int
    snd_una: int
    snd_nxt: int
    snd_max: int
    ring_seq: int
    rto: int
    irs: int = 0
    rcv_nxt: int = 0
    rcv_adv: int = 0
    snd_wnd: int = 0
    snd_wl1: int = 0
    snd_wl2: int = 0
    max_snd_wnd: int = 0
    snd_shift: int = 0
    rcv_shift: int = 0
    send_mss: int = DEFAULT_MSS
    ring: bytearray = field(default_factory=bytearray)
    records: list = field(default_factory=list)
    fin_pending: bool = False
    fin_seq: int = 0
    rcv_unacked: int = 0
    ack_now: bool = False
    dup_ack: bool = False
    delack_at: int | None = None
    cwnd: int = 0
    ssthresh: int = MAX_WINDOW
    ca_acked: int = 0
    dupacks: int = 0
    in_recovery: bool = False
    recover: int = 0
    srtt8: int | None = None
    rttvar4: int | None = None
    rtt_seq: int | None = None
    rtt_time: int = 0
    rto_at: int | None = None
    retries: int = 0
    persist_at: int | None = None
    persist_backoff: int = 0
    time_wait_at: int | None = None
    echo: bool = False

    @property
    def data_end(self):
        """The sequence number after the last octet written."""
        return seq_add(self.ring_seq, len(self.ring))

    @property
    def fin_acked(self):
        return self.fin_pending and seq_gt(self.snd_una, self.fin_seq)


def _check_int(name, value, low, high):
    """``value`` if it is an int (not a bool) in ``low .. high``, else TypeError/ValueError
    naming ``name`` and the value."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} = {value} is not between {low} and {high}")
    return value


class TcpEngine:
    """The TCP offload engine for the address ``ip``, with ``connections`` connection ids.

    Parameters (times in ticks; every one is checked and an error names the bad value)
    ----------
    ip : the engine's IPv4 address.
    connections : connection ids, 0 .. connections - 1.
    mss : the MSS announced in our SYNs, and the most we send.
    rcv_wnd : the receive window, in octets (at most 65535 << rcv_scale and 2**30).
    rcv_scale : our window shift (RFC 7323), used when both SYNs carry the option.
    tx_ring : octets of each connection's send ring.
    rto_initial, rto_min, rto_max : RFC 6298's initial RTO and bounds.
    max_retries : retransmission timeouts on the same data before the connection is lost.
    delack : delayed-ACK time.
    time_wait : TIME-WAIT time (2 MSL).
    cookie_secret, iss_secret : 32-bit secrets of the SYN cookie and of the ISS.
    """

    def __init__(self, *, ip, connections=DEFAULT_CONNECTIONS, mss=ENGINE_MSS,
                 rcv_wnd=DEFAULT_RCV_WND, rcv_scale=0, tx_ring=DEFAULT_TX_RING,
                 rto_initial=DEFAULT_RTO_INITIAL, rto_min=DEFAULT_RTO_MIN,
                 rto_max=DEFAULT_RTO_MAX, max_retries=DEFAULT_MAX_RETRIES,
                 delack=DEFAULT_DELACK, time_wait=DEFAULT_TIME_WAIT, cookie_secret=0,
                 iss_secret=0):
        self.ip = ipv4.ipv4_address(ip, "ip")
        self.connections = _check_int("connections", connections, 1, MAX_CONNECTIONS)
        self.mss = _check_int("mss", mss, MIN_MSS, MAX_MSS)
        self.rcv_scale = _check_int("rcv_scale", rcv_scale, 0, MAX_WINDOW_SCALE)
        self.rcv_wnd = _check_int("rcv_wnd", rcv_wnd, 1 << rcv_scale,
                                  min(MAX_UNSCALED_WINDOW << rcv_scale, MAX_WINDOW))
        self.tx_ring = _check_int("tx_ring", tx_ring, 1, MAX_TX_RING)
        self.rto_min = _check_int("rto_min", rto_min, 1, MAX_TIMER)
        self.rto_max = _check_int("rto_max", rto_max, rto_min, MAX_TIMER)
        self.rto_initial = _check_int("rto_initial", rto_initial, rto_min, rto_max)
        self.max_retries = _check_int("max_retries", max_retries, 1, MAX_RETRIES)
        self.delack = _check_int("delack", delack, 1, MAX_TIMER)
        self.time_wait = _check_int("time_wait", time_wait, 0, MAX_TIMER)
        self.cookie_secret = _check_int("cookie_secret", cookie_secret, 0, SEQ_MOD - 1)
        self.iss_secret = _check_int("iss_secret", iss_secret, 0, SEQ_MOD - 1)
        self._table = [None] * connections
        self._rx = [bytearray() for _ in range(connections)]
        self._listening = {}            # port -> echo
        self._events = []
        #: One counter per reason a received segment is dropped (:class:`TcpDrop`).
        self.counters = {reason: 0 for reason in TcpDrop}
        #: One counter per send-side activity (:class:`TcpStat`).
        self.stats = {stat: 0 for stat in TcpStat}

    # -- the layer above ---------------------------------------------------------------------

    def listen(self, port, *, echo=False):
        """Take passive opens on local ``port`` (answered by SYN cookies). With ``echo``, its
        connections are the echo service (RFC 862): every octet received is written back
        into the connection's send ring at once (never read), the receive window is what
        the ring has room for, and the peer's FIN is answered by ours after the last octet
        echoed."""
        if not isinstance(echo, bool):
            raise TypeError(f"echo must be a bool, not {echo!r}")
        self._listening[_check_int("port", port, 1, 0xFFFF)] = echo

    def unlisten(self, port):
        """Stop taking passive opens on ``port``; connections already open stay."""
        if port not in self._listening:
            raise ValueError(f"port {port!r} is not listening")
        del self._listening[port]

    def connect(self, conn, *, remote_ip, remote_port, local_port, now, iss=None, echo=False):
        """Active open on the free id ``conn`` (RFC 9293 section 3.10.1): a SYN with MSS =
        our mss and window scale = rcv_scale, its window unscaled; the connection is
        SYN-SENT. ``iss``: the initial sequence number, None for :func:`initial_sequence`'s
        (the NIC's driver computes it and hands it to the gateware). With ``echo`` the
        connection is the echo service (RFC 862), as a listener's can be."""
        self._check_conn(conn)
        if self._table[conn] is not None:
            raise ValueError(f"connection {conn} is in use ({self._table[conn].state.name})")
        remote = int(ipv4.ipv4_address(remote_ip, "remote_ip"))
        _check_int("remote_port", remote_port, 1, 0xFFFF)
        _check_int("local_port", local_port, 1, 0xFFFF)
        if self._lookup(remote, remote_port, local_port) is not None:
            raise ValueError(f"{ipaddress.IPv4Address(remote)}:{remote_port} from local port "
                             f"{local_port} is already connection "
                             f"{self._lookup(remote, remote_port, local_port)}")
        if not isinstance(echo, bool):
            raise TypeError(f"echo must be a bool, not {echo!r}")
        if iss is None:
            iss = initial_sequence(self.iss_secret, self.ip, local_port, remote, remote_port,
                                   now)
        _check_int("iss", iss, 0, SEQ_MOD - 1)
        tcb = _Tcb(state=TcpState.SYN_SENT, remote_ip=remote, remote_port=remote_port,
                   local_port=local_port, iss=iss, snd_una=iss, snd_nxt=seq_add(iss, 1),
                   snd_max=seq_add(iss, 1), ring_seq=seq_add(iss, 1), rto=self.rto_initial,
                   recover=iss, rtt_seq=seq_add(iss, 1), rtt_time=now, echo=echo)
        self._table[conn] = tcb
        self._rx[conn].clear()
        out = [self._syn(tcb.remote_ip, remote_port, local_port, iss, None, self.rcv_scale,
                         echo=echo)]
        self._arm(tcb, now)
        return out

    def write(self, conn, data, *, fpdu_ends=None):
        """Put ``data`` into the send ring of ``conn``; the octets accepted (what the ring's
        free space holds). ``fpdu_ends``: the offsets in ``data`` where an FPDU ends (the
        last one ``len(data)``); then only whole FPDUs are accepted, and each must be at
        most the send MSS long (the driver makes MULPDU from the MSS, so this never cuts
        an FPDU for size; an FPDU write needs the MSS, so a synchronized connection).
        ``None``: a plain byte stream, cut anywhere. Sent by :meth:`poll` and
        :meth:`receive`."""
        tcb = self._tcb(conn)
        if tcb.state not in _WRITABLE:
            raise ValueError(f"connection {conn} is {tcb.state.name}: it takes no data")
        data = bytes(data)
        free = self.tx_ring - len(tcb.ring)
        start = tcb.data_end
        if fpdu_ends is None:
            accepted = min(len(data), free)
            if accepted and tcb.records and not tcb.records[-1][1]:
                tcb.records[-1][0] = seq_add(start, accepted)     # one run of byte stream
            elif accepted:
                tcb.records.append([seq_add(start, accepted), False])
        else:
            ends = self._check_fpdu_ends(tcb, data, fpdu_ends)
            accepted = max((end for end in ends if end <= free), default=0)
            tcb.records += [[seq_add(start, end), True] for end in ends if end <= accepted]
        tcb.ring += data[:accepted]
        return accepted

    def read(self, conn):
        """The octets of ``conn`` delivered in order since the last read (the core's
        rx_wire)."""
        self._check_conn(conn)
        data = bytes(self._rx[conn])
        self._rx[conn].clear()
        return data

    def close(self, conn, now):
        """Close ``conn`` (RFC 9293 section 3.10.4): a FIN follows the data already written
        (ESTABLISHED -> FIN-WAIT-1, CLOSE-WAIT -> LAST-ACK); a SYN-SENT connection is freed
        with a CLOSED event."""
        tcb = self._tcb(conn)
        if tcb.state == TcpState.SYN_SENT:
            self._free(conn, TcpEventKind.CLOSED)
            return []
        if tcb.state == TcpState.ESTABLISHED:
            tcb.state = TcpState.FIN_WAIT_1
        elif tcb.state == TcpState.CLOSE_WAIT:
            tcb.state = TcpState.LAST_ACK
        else:
            raise ValueError(f"connection {conn} is {tcb.state.name}: already closing")
        tcb.fin_pending, tcb.fin_seq = True, tcb.data_end
        out = []
        self._flush(tcb, now, out)
        return out

    def abort(self, conn, now):
        """Abort ``conn`` (RFC 9293 section 3.10.5): <SEQ=SND.NXT><CTL=RST> from a
        synchronized state, nothing from SYN-SENT; the id is free and no event follows."""
        tcb = self._tcb(conn)
        out = []
        if tcb.state in _SYNCHRONIZED:
            out.append(self._emit(tcb, seq=tcb.snd_nxt, flags=_RST))
        self._table[conn] = None
        return out

    def state(self, conn):
        """The :class:`TcpState` of ``conn`` (CLOSED when the id is free)."""
        self._check_conn(conn)
        tcb = self._table[conn]
        return TcpState.CLOSED if tcb is None else tcb.state

    def events(self):
        """The :class:`Event` list since the last call."""
        events, self._events = self._events, []
        return events

    def next_deadline(self):
        """The earliest tick at which a timer of some connection expires (None: no timer
        runs); :meth:`poll` at that tick handles it."""
        times = [t for tcb in self._table if tcb is not None
                 for t in (tcb.rto_at, tcb.persist_at, tcb.delack_at, tcb.time_wait_at)
                 if t is not None]
        return min(times, default=None)

    # -- the wire ----------------------------------------------------------------------------

    def receive(self, src_ip, segment, now):
        """One received ``segment`` from ``src_ip`` (its checksum checked by the network
        layer); the segments sent in answer.

        Malformed options: dropped, no answer (BAD_OPTIONS). A segment of a connection goes
        to it; else to a listener (SYN cookies); else it is answered by a RST per RFC 9293
        section 3.10.7.1 (NO_CONNECTION)."""
        info, payload = tcp.receive_info(src_ip, segment)
        if info.bad_options:
            return self._drop(TcpDrop.BAD_OPTIONS)
        conn = self._lookup(info.src_ip, info.src_port, info.dst_port)
        if conn is not None:
            return self._arrive(conn, info, payload, now)
        if info.dst_port in self._listening:
            return self._listener(info, payload, now)
        return self._drop(TcpDrop.NO_CONNECTION) + self._reset_answer(info, len(payload))

    def poll(self, now):
        """Run the timers that expired by ``now`` (TIME-WAIT, retransmission, persist,
        delayed ACK), then send what the windows let go; connections in id order."""
        out = []
        for conn, tcb in enumerate(self._table):
            if tcb is None:
                continue
            if self._timers(conn, tcb, now, out):
                self._flush(tcb, now, out)
        return out

    # -- helpers: the table --------------------------------------------------------------------

    def _check_conn(self, conn):
        _check_int("conn", conn, 0, self.connections - 1)

    def _tcb(self, conn):
        self._check_conn(conn)
        if self._table[conn] is None:
            raise ValueError(f"connection {conn} is not open")
        return self._table[conn]

    def _lookup(self, remote_ip, remote_port, local_port):
        """The id of the connection with this 4-tuple, or None (a CAM in gateware)."""
        for conn, tcb in enumerate(self._table):
            if tcb is not None and (tcb.remote_ip, tcb.remote_port, tcb.local_port) == (
                    remote_ip, remote_port, local_port):
                return conn
        return None

    def _free(self, conn, kind):
        self._table[conn] = None
        self._events.append(Event(conn, kind))

    def _drop(self, reason):
        self.counters[reason] += 1
        return []

    def _check_fpdu_ends(self, tcb, data, fpdu_ends):
        """The FPDU end offsets, checked: increasing, the last at ``len(data)``, no FPDU
        longer than the send MSS."""
        if tcb.state not in _SYNCHRONIZED:
            raise ValueError(f"FPDUs need the send MSS: the connection is {tcb.state.name}")
        ends = list(fpdu_ends)
        if not ends or ends[-1] != len(data):
            raise ValueError(f"fpdu_ends {ends} must end at len(data) = {len(data)}")
        previous = 0
        for end in ends:
            if isinstance(end, bool) or not isinstance(end, int):
                raise TypeError(f"fpdu_ends holds {end!r}, not an int")
            if not 0 < end - previous <= tcb.send_mss:
                raise ValueError(f"FPDU {previous}..{end} of fpdu_ends is not 1 to the "
                                 f"send MSS {tcb.send_mss} octets long")
            previous = end
        return ends

    # -- helpers: building segments --------------------------------------------------------

    def _out(self, remote_ip, segment):
        dst = ipaddress.IPv4Address(remote_ip)
        return Outgoing(dst, segment.build(self.ip, dst), segment)

    def _window_field(self, tcb):
        """The window field of a non-SYN segment: rcv_wnd >> our shift, but never less than
        what keeps the right edge already advertised (RFC 9293 section 3.8.6.2.1 says not
        to shrink it), at most 65535. An echo connection's window is at most the room of
        its send ring: ``tx_ring`` less the octets received and not yet acknowledged by
        the peer as echoed (counted from RCV.NXT and SND.UNA, as the gateware does, whose
        echoed octets reach the ring a little after they are received), so the octets it
        takes always fit the ring."""
        keep = seq_diff(tcb.rcv_adv, tcb.rcv_nxt)
        keep = (keep + (1 << tcb.rcv_shift) - 1) >> tcb.rcv_shift
        window = self.rcv_wnd
        if tcb.echo:
            held = seq_diff(tcb.rcv_nxt, tcb.irs) - seq_diff(tcb.snd_una, tcb.iss)
            window = min(window, max(self.tx_ring - held, 0))
        return min(max(window >> tcb.rcv_shift, keep), MAX_UNSCALED_WINDOW)

    def _emit(self, tcb, *, seq, flags, payload=b""):
        """A segment of ``tcb`` other than a SYN. With ACK it carries RCV.NXT and our window
        (and moves the advertised right edge), and is the acknowledgment owed (delayed or
        immediate); a RST without ACK has window 0."""
        ack = window = 0
        if flags & _ACK:
            ack, window = tcb.rcv_nxt, self._window_field(tcb)
            edge = seq_add(tcb.rcv_nxt, window << tcb.rcv_shift)
            if seq_gt(edge, tcb.rcv_adv):
                tcb.rcv_adv = edge
            tcb.ack_now = tcb.dup_ack = False
            tcb.delack_at, tcb.rcv_unacked = None, 0
        segment = tcp.TcpSegment(src_port=tcb.local_port, dst_port=tcb.remote_port, seq=seq,
                                 ack=ack, flags=flags, window=window, payload=payload)
        return self._out(tcb.remote_ip, segment)

    def _syn(self, remote_ip, remote_port, local_port, seq, ack, scale, *, echo=False):
        """A SYN (``ack`` None) or SYN-ACK: MSS = our mss, window scale ``scale`` (None: no
        option), the window unscaled (RFC 7323 section 2.2): :meth:`_first_window`."""
        flags = _SYN if ack is None else _SYN | _ACK
        segment = tcp.TcpSegment(
            src_port=local_port, dst_port=remote_port, seq=seq, ack=ack or 0, flags=flags,
            window=self._first_window(echo),
            options=tcp.build_options(mss=self.mss, window_scale=scale))
        return self._out(remote_ip, segment)

    def _first_window(self, echo):
        """The window of a SYN or SYN-ACK: min(rcv_wnd, 65535), and for the echo service at
        most the send ring (what it can echo)."""
        window = min(self.rcv_wnd, MAX_UNSCALED_WINDOW)
        return min(window, self.tx_ring) if echo else window

    def _reset_answer(self, info, length):
        """The RST for a segment that has no connection (RFC 9293 section 3.10.7.1): none
        to a RST; to an ACK <SEQ=SEG.ACK><CTL=RST>; else
        <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>, SEG.LEN counting SYN and FIN."""
        if info.flags & _RST:
            return []
        if info.flags & _ACK:
            seq, ack, flags = info.ack, 0, _RST
        else:
            length += bool(info.flags & _SYN) + bool(info.flags & _FIN)
            seq, ack, flags = 0, seq_add(info.seq, length), _RST | _ACK
        segment = tcp.TcpSegment(src_port=info.dst_port, dst_port=info.src_port, seq=seq,
                                 ack=ack, flags=flags)
        return [self._out(info.src_ip, segment)]

    # -- helpers: passive open --------------------------------------------------------------

    def _listener(self, info, payload, now):
        """A segment for a listening port and no connection (RFC 9293 section 3.10.7.2 with
        RFC 4987 section 3.6 cookies).

        RST: dropped. SYN: a SYN-ACK whose ISS is the cookie, always (no state is kept).
        ACK (with or without data or FIN): if ack - 1 is a valid cookie for seq - 1, the
        lowest free id gets an ESTABLISHED connection and the segment is processed on it; no
        free id: dropped (NO_FREE_CONNECTION); no valid cookie (or SYN and ACK): RST as for
        no connection (BAD_COOKIE), but for a segment with data or FIN: the peer sends that
        again, and may be one whose handshake ACK and first data were lost (its
        retransmission of the first opens the connection), so it is dropped without one.
        Neither SYN nor ACK: dropped."""
        if info.flags & _RST:
            return self._drop(TcpDrop.NO_CONNECTION)
        if info.flags & _ACK:
            found = None if info.flags & _SYN else check_cookie(
                self.cookie_secret, info.src_ip, info.src_port, info.dst_port,
                seq_add(info.seq, -1), now, seq_add(info.ack, -1))
            if found is None and (payload or info.flags & _FIN) and not info.flags & _SYN:
                return self._drop(TcpDrop.BAD_COOKIE)
            if found is None:
                return self._drop(TcpDrop.BAD_COOKIE) + self._reset_answer(info, len(payload))
            conn = next((c for c, tcb in enumerate(self._table) if tcb is None), None)
            if conn is None:
                return self._drop(TcpDrop.NO_FREE_CONNECTION)
            self._accept(conn, info, *found)
            return self._arrive(conn, info, payload, now)
        if info.flags & _SYN:
            return [self._syn_ack(info, now)]
        return self._drop(TcpDrop.NO_CONNECTION)

    def _syn_ack(self, info, now):
        """The SYN-ACK to a SYN on a listening port: ISS = :func:`syn_cookie` with the
        peer's MSS (536 without the option) and window shift folded in."""
        index = cookie_mss_index(info.mss or DEFAULT_MSS)
        code = COOKIE_NO_WSCALE if info.window_scale is None else info.window_scale
        cookie = syn_cookie(self.cookie_secret, info.src_ip, info.src_port, info.dst_port,
                            info.seq, now, index, code)
        scale = None if info.window_scale is None else self.rcv_scale
        return self._syn(info.src_ip, info.src_port, info.dst_port, cookie,
                         seq_add(info.seq, 1), scale, echo=self._listening[info.dst_port])

    def _accept(self, conn, info, mss_index, wscale_code):
        """An ESTABLISHED connection from a valid cookie: ISS = ack - 1, IRS = seq - 1; the
        window scale is on only if the peer's SYN had it (RFC 7323 section 2.2); the send
        MSS is min(the cookie's MSS, our mss); our SYN-ACK advertised an unscaled
        min(rcv_wnd, 65535)."""
        scaled = wscale_code != COOKIE_NO_WSCALE
        tcb = _Tcb(state=TcpState.ESTABLISHED, remote_ip=info.src_ip,
                   remote_port=info.src_port, local_port=info.dst_port,
                   iss=seq_add(info.ack, -1), snd_una=info.ack, snd_nxt=info.ack,
                   snd_max=info.ack, ring_seq=info.ack, rto=self.rto_initial,
                   irs=seq_add(info.seq, -1), rcv_nxt=info.seq,
                   snd_wl1=seq_add(info.seq, -1), snd_wl2=info.ack,
                   snd_shift=wscale_code if scaled else 0,
                   rcv_shift=self.rcv_scale if scaled else 0,
                   send_mss=min(COOKIE_MSS_TABLE[mss_index], self.mss),
                   recover=seq_add(info.ack, -1), echo=self._listening[info.dst_port])
        tcb.rcv_adv = seq_add(tcb.rcv_nxt, self._first_window(tcb.echo))
        tcb.cwnd = self._initial_window(tcb)
        self._table[conn] = tcb
        self._rx[conn].clear()
        self._events.append(Event(conn, TcpEventKind.ACCEPTED, (
            ipaddress.IPv4Address(info.src_ip), info.src_port, info.dst_port)))

    @staticmethod
    def _initial_window(tcb):
        """IW = min(4 * MSS, max(2 * MSS, 4380)) (RFC 3390, RFC 5681 section 3.1)."""
        mss = tcb.send_mss
        return min(IW_MAX_SEGMENTS * mss, max(IW_MIN_SEGMENTS * mss, IW_OCTETS))

    # -- helpers: a segment for a connection --------------------------------------------------

    def _arrive(self, conn, info, payload, now):
        """A segment of connection ``conn``: SYN-SENT or synchronized processing, then what
        the windows let go and the ACK owed."""
        tcb = self._table[conn]
        out = []
        if tcb.state == TcpState.SYN_SENT:
            self._syn_sent(conn, tcb, info, now, out)
        else:
            self._synchronized(conn, tcb, info, payload, now, out)
        if self._table[conn] is tcb:
            self._flush(tcb, now, out)
        return out

    def _syn_sent(self, conn, tcb, info, now, out):
        """SYN-SENT (RFC 9293 section 3.10.7.3, RFC 5961 section 3.2).

        An ACK other than ISS + 1: <SEQ=SEG.ACK><CTL=RST> (none to a RST), dropped
        (BAD_ACK). RST with an acceptable ACK: REFUSED, the id is free; without ACK:
        dropped. SYN-ACK: ESTABLISHED, ACK sent, CONNECTED (data on it is not taken: the
        peer sends it again). SYN without ACK (simultaneous open): dropped
        (SIMULTANEOUS_OPEN). Anything else: dropped (NOT_ACCEPTABLE)."""
        has_ack = info.flags & _ACK
        if has_ack and info.ack != tcb.snd_nxt:
            self._drop(TcpDrop.BAD_ACK)
            out += self._reset_answer(info, 0) if not info.flags & _RST else []
        elif info.flags & _RST:
            if has_ack:
                self._free(conn, TcpEventKind.REFUSED)
            else:
                self._drop(TcpDrop.NOT_ACCEPTABLE)
        elif not info.flags & _SYN:
            self._drop(TcpDrop.NOT_ACCEPTABLE)
        elif not has_ack:
            self._drop(TcpDrop.SIMULTANEOUS_OPEN)
        else:
            self._connected(conn, tcb, info, now)

    def _connected(self, conn, tcb, info, now):
        """A SYN-ACK acknowledging our SYN: the peer's MSS (536 without the option) bounds
        the send MSS; window scale on only if both SYNs had it; the SYN-ACK's window is
        unscaled; the SYN gives an RTT sample unless it was sent again (Karn)."""
        tcb.irs = info.seq
        tcb.rcv_nxt = seq_add(info.seq, 1)
        tcb.rcv_adv = seq_add(tcb.rcv_nxt, self._first_window(tcb.echo))
        scaled = info.window_scale is not None
        tcb.snd_shift = info.window_scale if scaled else 0
        tcb.rcv_shift = self.rcv_scale if scaled else 0
        tcb.send_mss = min(info.mss or DEFAULT_MSS, self.mss)
        tcb.snd_wnd = tcb.max_snd_wnd = info.window
        tcb.snd_wl1, tcb.snd_wl2 = info.seq, info.ack
        self._rtt_ack(tcb, info.ack, now)
        tcb.snd_una = info.ack
        tcb.cwnd = self._initial_window(tcb)
        tcb.rto_at, tcb.retries = None, 0
        tcb.state = TcpState.ESTABLISHED
        tcb.ack_now = True
        self._events.append(Event(conn, TcpEventKind.CONNECTED))

    def _synchronized(self, conn, tcb, info, payload, now, out):
        """A synchronized state (RFC 9293 section 3.10.7.4), in its order: acceptability,
        RST, SYN, ACK, text and FIN. A RST in TIME-WAIT is ignored (RFC 1337 section 3:
        the connection is over, and the RST is most likely the answer of a peer that has
        already forgotten it to a duplicate of our last ACK)."""
        length = len(payload) + bool(info.flags & _SYN) + bool(info.flags & _FIN)
        if not self._acceptable(tcb, info.seq, length):
            # RFC 9293: an unacceptable segment gets an ACK unless it is a RST; in TIME-WAIT
            # it can only be the peer's FIN sent again, which restarts the 2 MSL wait.
            if not info.flags & _RST:
                tcb.dup_ack = True
                if tcb.state == TcpState.TIME_WAIT and info.flags & _FIN:
                    tcb.time_wait_at = now + self.time_wait
            self._drop(TcpDrop.NOT_ACCEPTABLE)
        elif info.flags & _RST and tcb.state == TcpState.TIME_WAIT:
            self._drop(TcpDrop.TIME_WAIT_RST)
        elif info.flags & _RST:
            self._reset(conn, tcb, info)
        elif info.flags & _SYN:
            # RFC 5961 section 4.2: a SYN on a synchronized connection gets a challenge ACK.
            tcb.dup_ack = True
            self._drop(TcpDrop.CHALLENGE_ACK)
        elif not info.flags & _ACK:
            self._drop(TcpDrop.NO_ACK)
        elif self._ack_field(conn, tcb, info, len(payload), now, out):
            self._text(conn, tcb, info, payload, now)

    def _acceptable(self, tcb, seq, length):
        """The four cases of RFC 9293 section 3.10.7.4, RCV.WND being what we advertised,
        with the window's right edge taken for an empty segment, as Linux does
        (``tcp_sequence``; RFC 9293 asks that valid ACKs be let in even when the window
        is closed): a peer whose octets up to the edge were all lost sends its ACKs at
        SEQ = RCV.NXT + RCV.WND, and refusing them would leave both ends waiting for an
        ACK the other cannot take. So an empty segment from RCV.NXT to the edge; one with
        octets never with RCV.WND 0 (a zero-window probe is still answered by the ACK of
        the unacceptable case, RFC 9293 section 3.8.6.1; it cannot happen in FPDU mode,
        where the window never closes); else its first or last octet in the window."""
        window = max(seq_diff(tcb.rcv_adv, tcb.rcv_nxt), 0)
        if length == 0:
            return seq_in_window(seq, tcb.rcv_nxt, window + 1)
        if window == 0:
            return False
        return (seq_in_window(seq, tcb.rcv_nxt, window)
                or seq_in_window(seq_add(seq, length - 1), tcb.rcv_nxt, window))

    def _reset(self, conn, tcb, info):
        """RST (RFC 5961 section 3.2): at exactly RCV.NXT it resets the connection (RESET,
        the id is free); elsewhere in the window it gets a challenge ACK."""
        if info.seq == tcb.rcv_nxt:
            self._free(conn, TcpEventKind.RESET)
        else:
            tcb.dup_ack = True
            self._drop(TcpDrop.CHALLENGE_ACK)

    def _ack_field(self, conn, tcb, info, length, now, out):
        """The ACK field (RFC 9293 section 3.10.7.4 fifth step, RFC 5961 section 5.2);
        False when the segment is dropped or the connection is gone.

        ack > SND.MAX: an ACK is sent, dropped (BAD_ACK). ack < SND.UNA - MAX.SND.WND:
        dropped (OLD_ACK). ack > SND.UNA: acknowledges data. ack = SND.UNA on an empty
        segment with the same window while data is out: a duplicate ACK (RFC 5681 section
        2; not while the window is zero: those answer probes). The window is taken when
        the segment is not older than the last one that set it (SND.WL1, SND.WL2), scaled
        by the peer's shift."""
        ack = info.ack
        if seq_gt(ack, tcb.snd_max):
            tcb.dup_ack = True
            self._drop(TcpDrop.BAD_ACK)
            return False
        if seq_lt(ack, seq_add(tcb.snd_una, -tcb.max_snd_wnd)):
            self._drop(TcpDrop.OLD_ACK)
            return False
        window = info.window << tcb.snd_shift
        if seq_gt(ack, tcb.snd_una):
            self._acked(tcb, ack, now, out)
        elif (ack == tcb.snd_una and length == 0 and not info.flags & (_SYN | _FIN)
              and window == tcb.snd_wnd != 0 and tcb.snd_max != tcb.snd_una):
            self._duplicate_ack(tcb, now, out)
        if seq_geq(ack, tcb.snd_una) and (seq_lt(tcb.snd_wl1, info.seq) or (
                tcb.snd_wl1 == info.seq and seq_geq(ack, tcb.snd_wl2))):
            tcb.snd_wnd, tcb.snd_wl1, tcb.snd_wl2 = window, info.seq, ack
            tcb.max_snd_wnd = max(tcb.max_snd_wnd, window)
        return self._fin_acked(conn, tcb, now)

    def _fin_acked(self, conn, tcb, now):
        """Our FIN acknowledged: FIN-WAIT-1 -> FIN-WAIT-2, CLOSING -> TIME-WAIT, LAST-ACK ->
        CLOSED (CLOSED event, the id is free; returns False)."""
        if not tcb.fin_acked:
            return True
        if tcb.state == TcpState.FIN_WAIT_1:
            tcb.state = TcpState.FIN_WAIT_2
        elif tcb.state == TcpState.CLOSING:
            self._enter_time_wait(tcb, now)
        elif tcb.state == TcpState.LAST_ACK:
            self._free(conn, TcpEventKind.CLOSED)
            return False
        return True

    def _enter_time_wait(self, tcb, now):
        tcb.state = TcpState.TIME_WAIT
        tcb.time_wait_at = now + self.time_wait
        tcb.rto_at = tcb.persist_at = None

    def _text(self, conn, tcb, info, payload, now):
        """Text and FIN (RFC 9293 section 3.10.7.4, seventh and eighth steps), in order only.

        Starting at RCV.NXT: delivered, as far as the window goes. Starting before it with
        octets beyond: trimmed, the rest delivered, ACKed at once (a retransmission).
        Starting after it (a hole): dropped (OUT_OF_ORDER) with an immediate duplicate ACK.
        ACKs: at once when 2 MSS of octets are unacknowledged (every second full-sized
        segment, RFC 5681 section 4.2, counted in octets so that FPDU-sized segments count
        too), else after ``delack`` ticks (RFC 9293 section 3.8.6.3). A FIN right after the
        delivered octets: RCV.NXT + 1, ACKed at once, PEER_CLOSED; ESTABLISHED ->
        CLOSE-WAIT, FIN-WAIT-1 -> CLOSING (TIME-WAIT if our FIN is acknowledged),
        FIN-WAIT-2 -> TIME-WAIT."""
        if tcb.state not in _RECEIVING or not (payload or info.flags & _FIN):
            return
        skip = seq_diff(tcb.rcv_nxt, info.seq)
        if skip < 0:
            tcb.dup_ack = True
            self._drop(TcpDrop.OUT_OF_ORDER)
            return
        room = max(seq_diff(tcb.rcv_adv, tcb.rcv_nxt), 0)
        taken = payload[skip:skip + room]
        if skip and len(payload):
            tcb.ack_now = True
        if taken and tcb.echo:
            written = self.write(conn, taken)
            assert written == len(taken), "the echo's window fits its ring"
        elif taken:
            self._rx[conn] += taken
        if taken:
            tcb.rcv_nxt = seq_add(tcb.rcv_nxt, len(taken))
            tcb.rcv_unacked += len(taken)
            if tcb.rcv_unacked >= ACK_EVERY_SEGMENTS * tcb.send_mss:
                tcb.ack_now = True
            elif tcb.delack_at is None:
                tcb.delack_at = now + self.delack
        if info.flags & _FIN and skip + len(taken) == len(payload):
            self._peer_fin(conn, tcb, now)

    def _peer_fin(self, conn, tcb, now):
        tcb.rcv_nxt = seq_add(tcb.rcv_nxt, 1)
        tcb.ack_now = True
        self._events.append(Event(conn, TcpEventKind.PEER_CLOSED))
        if tcb.state == TcpState.ESTABLISHED and tcb.echo:
            # the echo closes too: our FIN after the last octet echoed
            tcb.state = TcpState.LAST_ACK
            tcb.fin_pending, tcb.fin_seq = True, tcb.data_end
        elif tcb.state == TcpState.ESTABLISHED:
            tcb.state = TcpState.CLOSE_WAIT
        elif tcb.state == TcpState.FIN_WAIT_1 and not tcb.fin_acked:
            tcb.state = TcpState.CLOSING
        else:
            self._enter_time_wait(tcb, now)

    # -- helpers: acknowledgments, RTT, congestion ------------------------------------------

    def _acked(self, tcb, ack, now, out):
        """ack > SND.UNA: the acknowledged octets leave the ring (and their FPDU runs), an
        RTT sample is taken, the retry count and the retransmission timer restart (RFC 6298
        section 5.3), and congestion control counts it. The timer backoff ends too: RTO
        comes back to the estimate of SRTT and RTTVAR, as lwIP does, rather than on the
        next valid sample only (RFC 6298 section 5.7, Karn): without an out-of-order queue
        a lossy path rarely completes a sample, and the backoff would grow to rto_max."""
        acked = seq_diff(ack, tcb.snd_una)
        gone = min(max(seq_diff(ack, tcb.ring_seq), 0), len(tcb.ring))
        del tcb.ring[:gone]
        tcb.ring_seq = seq_add(tcb.ring_seq, gone)
        while tcb.records and seq_geq(tcb.ring_seq, tcb.records[0][0]):
            del tcb.records[0]
        self._rtt_ack(tcb, ack, now)
        tcb.snd_una = ack
        if seq_lt(tcb.snd_nxt, ack):
            tcb.snd_nxt = ack
        tcb.retries, tcb.rto_at = 0, None
        self._rto_from_estimate(tcb)
        self._congestion_ack(tcb, ack, acked, now, out)

    def _congestion_ack(self, tcb, ack, acked, now, out):
        """RFC 5681 section 3.1 and RFC 6582 section 3.2. In fast recovery: a full ACK (up
        to ``recover``) ends it with cwnd = ssthresh; a partial ACK sends the next
        unacknowledged segment again and deflates cwnd by the octets acknowledged, adding
        back one MSS when at least one MSS was acknowledged. Otherwise: slow start (cwnd <
        ssthresh) adds min(acked, MSS); congestion avoidance counts the octets acknowledged
        and adds one MSS for each cwnd of them (RFC 5681 section 3.1's recommended byte
        counting, RFC 3465: no division)."""
        mss = tcb.send_mss
        if tcb.in_recovery:
            if seq_geq(ack, tcb.recover):
                tcb.cwnd, tcb.in_recovery, tcb.dupacks = tcb.ssthresh, False, 0
            else:
                self._send_first(tcb, now, out)
                tcb.cwnd = max(tcb.cwnd - acked + (mss if acked >= mss else 0), mss)
            return
        tcb.dupacks = 0
        if tcb.cwnd < tcb.ssthresh:
            tcb.cwnd += min(acked, mss)
        else:
            tcb.ca_acked += acked
            if tcb.ca_acked >= tcb.cwnd:
                tcb.ca_acked -= tcb.cwnd
                tcb.cwnd += mss
        tcb.cwnd = min(tcb.cwnd, MAX_WINDOW)

    def _duplicate_ack(self, tcb, now, out):
        """A duplicate ACK (RFC 5681 section 3.2, RFC 6582 section 3.2): in fast recovery
        cwnd += MSS; the third one starts fast retransmit if SND.UNA has passed
        ``recover`` (so that a loss is not recovered twice), or, below it after a timeout,
        if cwnd > MSS (RFC 6582 section 4.2's ACK heuristic, simplified: ACKs have opened
        cwnd since the timeout, so the going back is under way and the duplicates show a
        segment lost in it; waiting for a second, backed-off timeout would stall).
        Fast retransmit: ssthresh = max(flight / 2, 2 * MSS), recover = SND.MAX, the first
        unacknowledged segment sent again, cwnd = ssthresh + 3 * MSS."""
        mss = tcb.send_mss
        tcb.dupacks += 1
        if tcb.in_recovery:
            tcb.cwnd = min(tcb.cwnd + mss, MAX_WINDOW)
        elif tcb.dupacks == DUPACK_THRESHOLD and (seq_geq(tcb.snd_una, tcb.recover)
                                                  or tcb.cwnd > mss):
            flight = seq_diff(tcb.snd_max, tcb.snd_una)
            tcb.ssthresh, tcb.ca_acked = max(flight // 2, 2 * mss), 0
            tcb.recover, tcb.in_recovery = tcb.snd_max, True
            self.stats[TcpStat.FAST_RETRANSMITS] += 1
            self._send_first(tcb, now, out)
            tcb.cwnd = tcb.ssthresh + DUPACK_THRESHOLD * mss

    def _rtt_ack(self, tcb, ack, now):
        """One RTT sample at a time (RFC 6298 section 3): the one timed is taken when ``ack``
        covers it. SRTT and RTTVAR in integer ticks, kept shifted (SRTT * 8, RTTVAR * 4,
        as Linux and BSD): the first sample R gives SRTT = R, RTTVAR = R / 2; then
        delta = R - SRTT, SRTT += delta / 8, RTTVAR += (|delta| - RTTVAR) / 4; RTO =
        max(rto_min, SRTT + max(1, 4 * RTTVAR)), at most rto_max (RFC 6298 section 2)."""
        if tcb.rtt_seq is None or seq_lt(ack, tcb.rtt_seq):
            return
        # (modulo 2**32: the gateware's time base is 32 bits and wraps)
        sample, tcb.rtt_seq = (now - tcb.rtt_time) % SEQ_MOD, None
        if tcb.srtt8 is None:
            tcb.srtt8 = sample << SRTT_SHIFT
            tcb.rttvar4 = sample << (RTTVAR_SHIFT - 1)
        else:
            delta = sample - (tcb.srtt8 >> SRTT_SHIFT)
            tcb.srtt8 += delta
            tcb.rttvar4 += abs(delta) - (tcb.rttvar4 >> RTTVAR_SHIFT)
        self._rto_from_estimate(tcb)

    def _rto_from_estimate(self, tcb):
        """RTO = max(rto_min, SRTT + max(1, 4 * RTTVAR)), at most rto_max; rto_initial
        until there is a sample (RFC 6298 section 2.1)."""
        if tcb.srtt8 is None:
            tcb.rto = self.rto_initial
        else:
            rto = (tcb.srtt8 >> SRTT_SHIFT) + max(1, tcb.rttvar4)
            tcb.rto = min(max(self.rto_min, rto), self.rto_max)

    # -- helpers: sending ------------------------------------------------------------------------

    def _flush(self, tcb, now, out):
        """After a segment or a timer: a duplicate or challenge ACK first (a pure ACK, so
        that the peer counts it), then what the windows let go, then an ACK still owed;
        then the timers are set (a pure ACK's SEQ: :meth:`_ack_seq`)."""
        if tcb.dup_ack:
            out.append(self._emit(tcb, seq=self._ack_seq(tcb), flags=_ACK))
        if tcb.state in _SENDING:
            self._send_window(tcb, now, out)
        if tcb.ack_now:
            out.append(self._emit(tcb, seq=self._ack_seq(tcb), flags=_ACK))
        self._arm(tcb, now)

    @staticmethod
    def _ack_seq(tcb):
        """A pure ACK's SEQ: SND.MAX, not SND.NXT, but never past the peer's window
        (Linux's ``tcp_acceptable_seq``): after a timeout SND.NXT goes back to SND.UNA,
        and the peer, which may hold octets up to SND.MAX, would take an ACK from before
        its RCV.NXT for an old duplicate; a persist probe's octet takes SND.MAX one past
        the peer's closed window, where its acceptability test would refuse the ACK.
        Either way the peer would ignore our ACK and window."""
        edge = seq_add(tcb.snd_una, tcb.snd_wnd)
        return edge if seq_lt(edge, tcb.snd_max) else tcb.snd_max

    def _send_window(self, tcb, now, out):
        """Send from SND.NXT while the usable window, min(cwnd, SND.WND) - (SND.NXT -
        SND.UNA), is open: each segment at most min(send MSS, usable window) octets, cut by
        :meth:`_cut`; the FIN after the last octet written (with it when it fits the
        segment; a FIN needs no window)."""
        while True:
            unsent = seq_diff(tcb.data_end, tcb.snd_nxt)
            if unsent > 0:
                usable = min(tcb.cwnd, tcb.snd_wnd) - seq_diff(tcb.snd_nxt, tcb.snd_una)
                if usable <= 0:
                    return
                length = self._cut(tcb, tcb.snd_nxt, min(tcb.send_mss, usable, unsent),
                                   may_split=tcb.snd_nxt == tcb.snd_una)
                if length == 0:
                    return
            elif unsent == 0 and tcb.fin_pending and tcb.snd_nxt == tcb.fin_seq:
                length = 0
            else:
                return
            self._send_data(tcb, tcb.snd_nxt, length, now, out)

    def _cut(self, tcb, seq, limit, *, may_split):
        """How many octets from ``seq`` a segment of at most ``limit`` carries: byte stream
        is cut anywhere; with FPDUs it ends at the last FPDU end that fits. When not even
        the first FPDU fits, the window is why (an FPDU is never longer than the send MSS,
        asserted): with nothing in flight the segment is cut at ``limit`` inside the FPDU
        (``may_split``, counted WINDOW_CUTS: waiting would never end), else it waits for
        ACKs to open the window (0)."""
        length = 0
        for end, aligned in tcb.records:
            reach = seq_diff(end, seq)
            if reach <= 0:
                continue
            if reach <= limit:
                length = reach
                continue
            if not aligned:
                length = limit
            elif length == 0:
                assert reach <= tcb.send_mss, "an FPDU longer than the send MSS"
                if may_split:
                    self.stats[TcpStat.WINDOW_CUTS] += 1
                    length = limit
            break
        return length

    def _send_data(self, tcb, seq, length, now, out):
        """One segment of ``length`` ring octets from ``seq``, with FIN when it reaches the
        FIN's place, PSH when it ends the data written (RFC 9293 section 3.9.1.2). Sending
        from SND.NXT advances it. Sequence space below SND.MAX counts as a retransmission,
        and spoils the RTT sample when it carries the timed segment's last octet (Karn's
        rule); a segment past SND.MAX is timed when none is."""
        fin = tcb.fin_pending and seq_add(seq, length) == tcb.fin_seq
        offset = seq_diff(seq, tcb.ring_seq)
        payload = bytes(tcb.ring[offset:offset + length])
        flags = _ACK | (_FIN if fin else 0)
        if length and seq_add(seq, length) == tcb.data_end:
            flags |= _PSH
        out.append(self._emit(tcb, seq=seq, flags=flags, payload=payload))
        end = seq_add(seq, length + fin)
        if seq_lt(seq, tcb.snd_max):
            self.stats[TcpStat.RETRANSMITS] += 1
            if tcb.rtt_seq is not None and seq_lt(seq, tcb.rtt_seq) and seq_geq(end,
                                                                             tcb.rtt_seq):
                tcb.rtt_seq = None
        elif tcb.rtt_seq is None:
            tcb.rtt_seq, tcb.rtt_time = end, now
        if seq == tcb.snd_nxt:
            tcb.snd_nxt = end
        if seq_gt(end, tcb.snd_max):
            tcb.snd_max = end

    def _send_first(self, tcb, now, out):
        """The first unacknowledged segment again (fast retransmit, partial ACK): cut from
        SND.UNA by the rule of :meth:`_cut` within what was sent, the FIN alone when only
        it is outstanding."""
        sent = min(seq_diff(tcb.snd_max, tcb.snd_una), seq_diff(tcb.data_end, tcb.snd_una))
        length = self._cut(tcb, tcb.snd_una, min(tcb.send_mss, sent), may_split=True)
        if length or (tcb.fin_pending and tcb.snd_una == tcb.fin_seq):
            self._send_data(tcb, tcb.snd_una, length, now, out)

    # -- helpers: timers -----------------------------------------------------------------------

    def _arm(self, tcb, now):
        """Timers after every event. SYN-SENT: the retransmission timer. A zero send window
        with octets in the ring: the persist timer (RTO << backoff, at most rto_max; RFC
        9293 section 3.8.6.1) instead of the retransmission timer, SND.NXT at SND.UNA.
        Otherwise the retransmission timer runs while anything is unacknowledged (RFC 6298
        section 5.1) and stops when all is (section 5.2)."""
        if tcb.state == TcpState.TIME_WAIT:
            return
        if tcb.state != TcpState.SYN_SENT and tcb.snd_wnd == 0 and tcb.ring:
            # As BSD's tcp_output: SND.NXT stays at SND.UNA while the window is zero, so
            # the window opening sends from the probe's octet on.
            tcb.rto_at, tcb.snd_nxt = None, tcb.snd_una
            if tcb.persist_at is None:
                tcb.persist_at = now + min(tcb.rto << tcb.persist_backoff, self.rto_max)
            return
        tcb.persist_at, tcb.persist_backoff = None, 0
        if tcb.snd_max == tcb.snd_una:
            tcb.rto_at = None
        elif tcb.rto_at is None:
            tcb.rto_at = now + tcb.rto

    def _timers(self, conn, tcb, now, out):
        """The timers of ``conn`` that expired by ``now``; False when the connection is gone.
        TIME-WAIT over: CLOSED, the id is free. Delayed ACK over: an ACK is owed."""
        if tcb.time_wait_at is not None and now >= tcb.time_wait_at:
            self._free(conn, TcpEventKind.CLOSED)
            return False
        if tcb.rto_at is not None and now >= tcb.rto_at:
            if not self._timeout(conn, tcb, now, out):
                return False
        if tcb.persist_at is not None and now >= tcb.persist_at:
            self._probe(tcb, now, out)
        if tcb.delack_at is not None and now >= tcb.delack_at:
            tcb.ack_now = True
        return True

    def _timeout(self, conn, tcb, now, out):
        """Retransmission timeout (RFC 6298 section 5.4 to 5.7, RFC 5681 section 3.1): after
        ``max_retries`` of them on the same data the next one gives up (a RST from a
        synchronized state, LOST, the id is free; returns False). Otherwise RTO doubles (at
        most rto_max), the RTT sample is spoilt; SYN-SENT sends the SYN again; else
        ssthresh = max(flight / 2, 2 * MSS), cwnd = 1 MSS, recovery ends with recover =
        SND.MAX (RFC 6582 section 4), and sending goes back to SND.UNA: the first
        unacknowledged segment goes out, the rest as ACKs open cwnd."""
        self.stats[TcpStat.TIMEOUTS] += 1
        tcb.retries += 1
        if tcb.retries > self.max_retries:
            if tcb.state in _SYNCHRONIZED:
                out.append(self._emit(tcb, seq=tcb.snd_nxt, flags=_RST))
            self._free(conn, TcpEventKind.LOST)
            return False
        tcb.rto = min(tcb.rto * 2, self.rto_max)
        tcb.rtt_seq, tcb.rto_at = None, now + tcb.rto
        if tcb.state == TcpState.SYN_SENT:
            self.stats[TcpStat.RETRANSMITS] += 1
            out.append(self._syn(tcb.remote_ip, tcb.remote_port, tcb.local_port, tcb.iss,
                                 None, self.rcv_scale, echo=tcb.echo))
            return True
        mss = tcb.send_mss
        tcb.ssthresh, tcb.ca_acked = max(seq_diff(tcb.snd_max, tcb.snd_una) // 2, 2 * mss), 0
        tcb.cwnd, tcb.dupacks = mss, 0
        tcb.in_recovery, tcb.recover = False, tcb.snd_max
        tcb.snd_nxt = tcb.snd_una
        if tcb.state in _SENDING:
            self._send_window(tcb, now, out)
        return True

    def _probe(self, tcb, now, out):
        """Persist timer over (RFC 9293 section 3.8.6.1): a one-octet probe, the first octet
        of the ring at SND.UNA (unsent data, or the same octet again), past the zero
        window; the timer backs off (doubles, at most rto_max) until the window opens."""
        self.stats[TcpStat.PROBES] += 1
        self._send_data(tcb, tcb.snd_una, 1, now, out)
        tcb.persist_backoff += 1
        tcb.persist_at = now + min(tcb.rto << tcb.persist_backoff, self.rto_max)
