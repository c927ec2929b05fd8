"""TCP segments (RFC 9293): header and options, the checksum over the pseudo-header, and
sequence-number arithmetic modulo 2**32.

What the NIC's receive parser makes of a segment is :func:`receive_info`: the header fields,
the options it uses (MSS, window scale, SACK-permitted) and whether the options are
malformed. The option rules (:func:`parse_options`), the same in the gateware:

* EOL ends the list; NOP is one octet; every other kind has a length octet that counts the
  kind and length octets too.
* Malformed, and the segment is dropped: a length octet that is missing (the kind is the
  last octet of the options), below 2, or that runs the option past the end of the header.
* A known option with another length than :data:`~rnic.host.spec.tcp.OPTION_LEN` gives is
  skipped by its length (as Linux does), like an unknown kind; so are SACK blocks and
  timestamps, which this NIC never asks for.
* A window scale above :data:`~rnic.host.spec.tcp.MAX_WINDOW_SCALE` counts as 14; when an
  option comes twice the last one counts.
"""

import struct
from dataclasses import dataclass, field

from rnic.host.spec.limits import check_uint
from rnic.host.spec.net import IpProto
from rnic.host.spec.tcp import (MAX_OPTIONS_LEN, MAX_WINDOW_SCALE, MIN_DATA_OFFSET,
                                OPTION_LEN, SEQ_MOD, TCP_HEADER_LEN, TcpOption)

from . import ipv4

__all__ = [
    "seq_add", "seq_diff", "seq_lt", "seq_leq", "seq_gt", "seq_geq", "seq_in_window",
    "TcpOptions", "MalformedOptions", "parse_options", "build_options",
    "TcpSegment", "checksum", "checksum_ok", "ReceiveInfo", "receive_info",
]

_HEADER = struct.Struct(">HHIIBBHHH")


# -- sequence numbers ------------------------------------------------------------------------

def seq_add(seq, n):
    """``seq + n`` modulo 2**32 (``n`` may be negative)."""
    return (seq + n) % SEQ_MOD


def seq_diff(a, b):
    """``a - b`` as a signed distance in ``-2**31 .. 2**31 - 1``: how far ``a`` is ahead of
    ``b`` in sequence space."""
    d = (a - b) % SEQ_MOD
    return d - SEQ_MOD if d >= SEQ_MOD // 2 else d


def seq_lt(a, b):
    """``a`` comes before ``b`` (RFC 9293's ``<`` on sequence numbers)."""
    return seq_diff(a, b) < 0


def seq_leq(a, b):
    return seq_diff(a, b) <= 0


def seq_gt(a, b):
    return seq_diff(a, b) > 0


def seq_geq(a, b):
    return seq_diff(a, b) >= 0


def seq_in_window(seq, start, size):
    """``start <= seq < start + size`` in sequence space (``size`` octets from ``start``;
    an empty window holds nothing)."""
    return 0 <= (seq - start) % SEQ_MOD < size


# -- options ---------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class TcpOptions:
    """The options of a segment that this NIC uses: ``mss`` (None: no MSS option),
    ``window_scale`` (None: no window scale option; else the shift, at most 14),
    ``sack_permitted``, ``timestamps`` (``(TSval, TSecr)`` or None; parsed, never used)."""
    mss: int | None = None
    window_scale: int | None = None
    sack_permitted: bool = False
    timestamps: tuple[int, int] | None = None


class MalformedOptions(ValueError):
    """The options of a segment are malformed (:func:`parse_options`); ``offset`` is the
    option's octet offset in the options."""

    def __init__(self, offset, why):
        super().__init__(f"option at offset {offset}: {why}")
        self.offset = offset


def parse_options(data):
    """The :class:`TcpOptions` of the options octets ``data`` (the header after its first 20
    octets), by the rules of this module's docstring; :class:`MalformedOptions` if they are
    malformed."""
    data = bytes(data)
    if len(data) > MAX_OPTIONS_LEN:
        raise ValueError(f"{len(data)} octets of options, more than {MAX_OPTIONS_LEN}")
    found = {}
    at = 0
    while at < len(data):
        kind = data[at]
        if kind == TcpOption.EOL:
            break
        if kind == TcpOption.NOP:
            at += 1
            continue
        if at + 1 >= len(data):
            raise MalformedOptions(at, f"kind {kind} has no length octet")
        length = data[at + 1]
        if length < 2:
            raise MalformedOptions(at, f"kind {kind} has length {length}")
        if at + length > len(data):
            raise MalformedOptions(at, f"kind {kind} of length {length} runs past the "
                                       f"{len(data)} octets of options")
        if OPTION_LEN.get(kind) == length:
            found[kind] = data[at + 2:at + length]
        at += length
    value = {}
    if TcpOption.MSS in found:
        value["mss"] = int.from_bytes(found[TcpOption.MSS], "big")
    if TcpOption.WINDOW_SCALE in found:
        value["window_scale"] = min(found[TcpOption.WINDOW_SCALE][0], MAX_WINDOW_SCALE)
    if TcpOption.SACK_PERMITTED in found:
        value["sack_permitted"] = True
    if TcpOption.TIMESTAMPS in found:
        value["timestamps"] = struct.unpack(">II", found[TcpOption.TIMESTAMPS])
    return TcpOptions(**value)


def build_options(*, mss=None, window_scale=None, sack_permitted=False, timestamps=None):
    """Options octets carrying what is given, padded with NOPs so that each option after the
    MSS starts where Linux puts it (a multiple of 4 octets in all)."""
    out = bytearray()
    if mss is not None:
        out += struct.pack(">BBH", TcpOption.MSS, 4, check_uint("mss", mss, 16))
    if window_scale is not None:
        if not 0 <= window_scale <= MAX_WINDOW_SCALE:
            raise ValueError(f"window_scale {window_scale} is not between 0 and "
                             f"{MAX_WINDOW_SCALE}")
        out += struct.pack(">BBBB", TcpOption.NOP, TcpOption.WINDOW_SCALE, 3, window_scale)
    if sack_permitted:
        out += struct.pack(">BBBB", TcpOption.NOP, TcpOption.NOP, TcpOption.SACK_PERMITTED, 2)
    if timestamps is not None:
        out += struct.pack(">BBBBII", TcpOption.NOP, TcpOption.NOP, TcpOption.TIMESTAMPS, 10,
                           *timestamps)
    return bytes(out)


# -- segments --------------------------------------------------------------------------------

def checksum(src, dst, segment):
    """The checksum field for ``segment`` (its own checksum field taken as zero by the
    caller) from ``src`` to ``dst``."""
    return ipv4.checksum(ipv4.pseudo_header(src, dst, IpProto.TCP, len(segment))
                         + bytes(segment))


def checksum_ok(src, dst, segment):
    """True when ``segment`` from ``src`` to ``dst`` verifies (a receiver's check)."""
    return ipv4.checksum_ok(ipv4.pseudo_header(src, dst, IpProto.TCP, len(segment))
                            + bytes(segment))


@dataclass(frozen=True, kw_only=True)
class TcpSegment:
    """A TCP segment: header fields, raw ``options`` (a multiple of 4 octets) and
    ``payload``. ``flags`` holds the 8 control bits (:class:`~rnic.host.spec.tcp.TcpFlag`)."""
    src_port: int
    dst_port: int
    seq: int = 0
    ack: int = 0
    flags: int = 0
    window: int = 0
    urgent: int = 0
    options: bytes = b""
    payload: bytes = field(default=b"", repr=False)

    def __post_init__(self):
        for name, bits in (("src_port", 16), ("dst_port", 16), ("seq", 32), ("ack", 32),
                           ("flags", 8), ("window", 16), ("urgent", 16)):
            check_uint(name, getattr(self, name), bits)
        if len(self.options) % 4 or len(self.options) > MAX_OPTIONS_LEN:
            raise ValueError(f"options are {len(self.options)} octets: not a multiple of 4 "
                             f"up to {MAX_OPTIONS_LEN}")

    def build(self, src, dst):
        """The segment's octets from ``src`` to ``dst``, with its checksum."""
        offset = (TCP_HEADER_LEN + len(self.options)) // 4
        header = _HEADER.pack(self.src_port, self.dst_port, self.seq, self.ack, offset << 4,
                              self.flags, self.window, 0, self.urgent)
        octets = header + self.options + self.payload
        value = checksum(src, dst, octets)
        return octets[:16] + value.to_bytes(2, "big") + octets[18:]

    @classmethod
    def parse(cls, octets):
        """The segment in ``octets``; ValueError when it is shorter than its header or its
        data offset is below 5 (the checksum is not checked: :func:`checksum_ok`)."""
        octets = bytes(octets)
        if len(octets) < TCP_HEADER_LEN:
            raise ValueError(f"{len(octets)} octets, shorter than a TCP header")
        sport, dport, seq, ack, offset, flags, window, _, urgent = _HEADER.unpack_from(octets)
        length = 4 * (offset >> 4)
        if offset >> 4 < MIN_DATA_OFFSET or length > len(octets):
            raise ValueError(f"data offset {offset >> 4} does not fit a segment of "
                             f"{len(octets)} octets")
        return cls(src_port=sport, dst_port=dport, seq=seq, ack=ack, flags=flags,
                   window=window, urgent=urgent, options=octets[TCP_HEADER_LEN:length],
                   payload=octets[length:])


@dataclass(frozen=True, kw_only=True)
class ReceiveInfo:
    """What the NIC's receive parser reports of one segment (the fields of
    :class:`rnic.hdl.tcp.layouts.TcpSegInfo`): the sender's address, the header fields,
    ``length`` the payload octets, the options it uses (``mss`` 0: none;
    ``window_scale`` None: none) and ``bad_options``, set when they are malformed (then
    the option fields are 0, None and False)."""
    src_ip: int
    src_port: int
    dst_port: int
    seq: int
    ack: int
    flags: int
    window: int
    length: int
    mss: int = 0
    window_scale: int | None = None
    sack_permitted: bool = False
    bad_options: bool = False


def receive_info(src_ip, octets):
    """The :class:`ReceiveInfo` and payload of the segment ``octets`` from ``src_ip``, as
    the receive parser sees them (a segment whose checksum and data offset the network
    layer has checked)."""
    segment = TcpSegment.parse(octets)
    fields = dict(src_ip=int(ipv4.ipv4_address(src_ip, "src_ip")),
                  src_port=segment.src_port, dst_port=segment.dst_port, seq=segment.seq,
                  ack=segment.ack, flags=segment.flags, window=segment.window,
                  length=len(segment.payload))
    try:
        options = parse_options(segment.options)
    except MalformedOptions:
        return ReceiveInfo(**fields, bad_options=True), segment.payload
    return ReceiveInfo(**fields, mss=options.mss or 0, window_scale=options.window_scale,
                       sack_permitted=options.sack_permitted), segment.payload
