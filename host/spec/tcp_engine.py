"""Facts of the TCP offload engine that its model (:mod:`rnic.host.model.tcp_engine`), the
driver and the gateware share (stdlib only): connection states, why a segment is dropped,
the events a connection reports, the engine's activity counters, parameter defaults and
limits, and the layout of a SYN cookie.

Times count ticks of the engine's time base (1 ms by default; the rate is no concern of
these numbers).
"""

import enum

__all__ = [
    "TcpState", "TcpDrop", "TcpEventKind", "TcpStat", "TcpCommand", "TcpConnectResult",
    "DEFAULT_CONNECTIONS", "DEFAULT_LISTENERS", "MIN_RING_LOG2", "ENGINE_MSS", "DEFAULT_RCV_WND", "DEFAULT_TX_RING",
    "DEFAULT_RTO_INITIAL", "DEFAULT_RTO_MIN", "DEFAULT_RTO_MAX", "DEFAULT_MAX_RETRIES",
    "DEFAULT_DELACK", "DEFAULT_TIME_WAIT",
    "MAX_CONNECTIONS", "MIN_MSS", "MAX_MSS", "MAX_UNSCALED_WINDOW", "MAX_WINDOW",
    "MAX_TX_RING", "MAX_TIMER", "MAX_RETRIES",
    "COOKIE_MSS_TABLE", "COOKIE_MSS_BITS", "COOKIE_TIME_SHIFT", "COOKIE_TIME_BITS",
    "COOKIE_WSCALE_BITS", "COOKIE_NO_WSCALE", "COOKIE_HASH_BITS", "COOKIE_AGES",
    "ISS_CLOCK_PER_TICK", "DUPACK_THRESHOLD", "SRTT_SHIFT", "RTTVAR_SHIFT",
    "IW_OCTETS", "IW_MIN_SEGMENTS", "IW_MAX_SEGMENTS", "ACK_EVERY_SEGMENTS",
]


class TcpState(enum.IntEnum):
    """The state of a connection (RFC 9293 section 3.3.2). There is no LISTEN (listening is a
    table of ports, not a connection) and no SYN-RECEIVED: passive opens are SYN cookies
    (RFC 4987 section 3.6), so a connection exists only from ESTABLISHED on. A free
    connection id is CLOSED."""
    CLOSED = 0
    SYN_SENT = 1
    ESTABLISHED = 2
    FIN_WAIT_1 = 3
    FIN_WAIT_2 = 4
    CLOSE_WAIT = 5
    CLOSING = 6
    LAST_ACK = 7
    TIME_WAIT = 8


class TcpDrop(enum.IntEnum):
    """Why the engine drops (or answers without using) a received segment; one counter
    each."""
    #: The options are malformed (:func:`rnic.host.model.tcp.parse_options`); no answer.
    BAD_OPTIONS = 0
    #: No connection and no listener for it (answered with a RST unless it is one).
    NO_CONNECTION = 1
    #: An ACK for a listening port whose ack - 1 is no valid SYN cookie (answered with RST).
    BAD_COOKIE = 2
    #: A valid cookie, but every connection id is in use.
    NO_FREE_CONNECTION = 3
    #: A SYN without ACK in SYN-SENT: simultaneous open is not supported.
    SIMULTANEOUS_OPEN = 4
    #: Fails the acceptability test of RFC 9293 section 3.10.7.4 (answered with an ACK unless
    #: it is a RST), or a segment SYN-SENT cannot use.
    NOT_ACCEPTABLE = 5
    #: A RST in the window but not at RCV.NXT, or a SYN on a synchronized connection: a
    #: challenge ACK is sent (RFC 5961 sections 3.2 and 4.2).
    CHALLENGE_ACK = 6
    #: A synchronized connection got a segment without ACK.
    NO_ACK = 7
    #: Acknowledges something never sent (answered with an ACK; RFC 9293 section 3.10.7.4).
    BAD_ACK = 8
    #: Acknowledges data older than SND.UNA - MAX.SND.WND (RFC 5961 section 5.2).
    OLD_ACK = 9
    #: Starts after RCV.NXT (a hole): no out-of-order queue; answered with a duplicate ACK.
    OUT_OF_ORDER = 10
    #: A RST in TIME-WAIT: ignored (RFC 1337 section 3, against TIME-WAIT assassination).
    TIME_WAIT_RST = 11


class TcpEventKind(enum.IntEnum):
    """What a connection reports to the layer above (the MPA connection manager)."""
    #: A passive open completed (detail: remote address, remote port, local port).
    ACCEPTED = 0
    #: An active open completed.
    CONNECTED = 1
    #: The peer's FIN arrived (in order).
    PEER_CLOSED = 2
    #: The connection ended normally and its id is free.
    CLOSED = 3
    #: A RST was received; the id is free.
    RESET = 4
    #: Retransmissions exhausted: MPA's "TCP connection closed or lost"; the id is free.
    LOST = 5
    #: The peer answered the SYN with a RST; the id is free.
    REFUSED = 6


class TcpCommand(enum.IntEnum):
    """What the layer above asks of a connection (the model's methods of those names)."""
    #: A FIN after the octets written (RFC 9293 section 3.10.4); a SYN-SENT connection is
    #: freed (CLOSED); one already closing is left as it is.
    CLOSE = 0
    #: A RST at SND.NXT from a synchronized state (RFC 9293 section 3.10.5); the id is free
    #: and no event follows.
    ABORT = 1


class TcpConnectResult(enum.IntEnum):
    """What became of an active open (TCP_CONNECT_STATUS.RESULT)."""
    #: The SYN is out on the connection id given: CONNECTED, REFUSED or LOST follows.
    SYN_SENT = 0
    #: The four-tuple is a connection already; nothing was sent.
    IN_USE = 1
    #: No connection id is free, or the connection table has no room for the key.
    NO_FREE_CONNECTION = 2


class TcpStat(enum.IntEnum):
    """What the engine's send side did; one counter each."""
    #: Segments that carried sequence space already sent once (any reason).
    RETRANSMITS = 0
    #: Fast retransmits (three duplicate ACKs, RFC 5681 section 3.2).
    FAST_RETRANSMITS = 1
    #: Retransmission timer expiries (RFC 6298 section 5).
    TIMEOUTS = 2
    #: Zero-window probes (RFC 9293 section 3.8.6.1).
    PROBES = 3
    #: Segments cut inside an FPDU because the send window could not hold the first FPDU.
    WINDOW_CUTS = 4


#: Parameter defaults of the engine (times in ticks).
DEFAULT_CONNECTIONS = 16
#: Listening-port slots of the engine (TCP_CAPS.LISTENERS of the NIC top).
DEFAULT_LISTENERS = 4
#: The smallest send ring of the NIC (TCP_RING_LOG2): 4 KiB.
MIN_RING_LOG2 = 12
ENGINE_MSS = 1460
DEFAULT_RCV_WND = 65535
DEFAULT_TX_RING = 65536
DEFAULT_RTO_INITIAL = 1000       # RFC 6298 section 2.1: 1 s
DEFAULT_RTO_MIN = 200            # Linux's minimum; RFC 6298 asks 1 s, Linux and BSD use less
DEFAULT_RTO_MAX = 60000          # RFC 6298 section 2.5: at least 60 s
DEFAULT_MAX_RETRIES = 8
DEFAULT_DELACK = 40              # RFC 9293 section 3.8.6.3: below 0.5 s
DEFAULT_TIME_WAIT = 1000

#: Parameter limits: connection ids, the MSS (Linux's minimum 88 up to an IPv4 datagram of
#: 65535 octets less 40 of headers), windows (RFC 7323 section 2.3: at most 2**30 with
#: scaling, 65535 without), the send ring, timers and retries.
MAX_CONNECTIONS = 65536
MIN_MSS = 88
MAX_MSS = 65495
MAX_UNSCALED_WINDOW = 65535
MAX_WINDOW = 1 << 30
MAX_TX_RING = 1 << 30
MAX_TIMER = (1 << 32) - 1
MAX_RETRIES = 255

#: SYN cookie (RFC 4987 section 3.6), the ISS of a SYN-ACK. Layout, lowest bits first:
#: bits 2..0 an index into COOKIE_MSS_TABLE (the largest entry <= the peer's MSS);
#: bits 7..3 the time counter t = now >> COOKIE_TIME_SHIFT, modulo 32;
#: bits 11..8 the peer's window shift (0..14), COOKIE_NO_WSCALE when its SYN had none;
#: bits 31..12 a 20-bit hash (low bits of crc32c over six 32-bit words, big-endian: the
#: secret, the peer's address, the peer's and the local port, the peer's ISN, t, bits
#: 11..0), checked for t and the COOKIE_AGES - 1 before it. A counter is 32768 ticks, so at 1 ms ticks a cookie
#: lives 65 to 98 s (Linux's live 2 to 3 minutes): long past the retransmissions of a peer
#: whose last ACK of the handshake was lost.
COOKIE_MSS_TABLE = (536, 1024, 1200, 1360, 1400, 1440, 1460, 8960)
COOKIE_MSS_BITS = 3
COOKIE_TIME_SHIFT = 15
COOKIE_TIME_BITS = 5
COOKIE_WSCALE_BITS = 4
COOKIE_NO_WSCALE = (1 << COOKIE_WSCALE_BITS) - 1
COOKIE_HASH_BITS = 32 - COOKIE_MSS_BITS - COOKIE_TIME_BITS - COOKIE_WSCALE_BITS
COOKIE_AGES = 3

#: Active-open ISS (RFC 6528): a hash of the 4-tuple plus this many per tick (a 4 us clock
#: at 1 ms ticks).
ISS_CLOCK_PER_TICK = 250

#: Duplicate ACKs that start a fast retransmit (RFC 5681 section 3.2).
DUPACK_THRESHOLD = 3
#: SRTT is kept times 2**3 and RTTVAR times 2**2 (RFC 6298 section 2, as Linux and BSD).
SRTT_SHIFT = 3
RTTVAR_SHIFT = 2
#: Initial window (RFC 3390): min(4 * MSS, max(2 * MSS, 4380)).
IW_OCTETS = 4380
IW_MIN_SEGMENTS = 2
IW_MAX_SEGMENTS = 4
#: An ACK goes out at once for every second full-sized segment received (RFC 5681 section
#: 4.2), counted in octets: this many MSS not yet acknowledged.
ACK_EVERY_SEGMENTS = 2
