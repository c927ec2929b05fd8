"""ICMP echo in gateware: stores an echo request and sends the echo reply."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rnic.host.spec.limits import check_width
from rnic.host.spec.net import (DEFAULT_TTL, ETH_HEADER_LEN, IPV4_DF, IPV4_HEADER_LEN,
                                IPV4_VERSION, MAX_FRAME_LEN, EtherType, IcmpType, IpProto)

from ..stream_slice import StreamSlice
from .checksum import SUM_BITS, beat_sum, fold
from .layouts import FrameBeat
from .octets import capture, field, frame_bits, octets_of

__all__ = ["IcmpEcho", "REWRITTEN_LEN"]

_IP = ETH_HEADER_LEN
_ICMP = ETH_HEADER_LEN + IPV4_HEADER_LEN
#: Octets of the reply that differ from the request: Ethernet and IPv4 headers, the ICMP
#: type, code and checksum. The identifier, sequence and data are copied.
REWRITTEN_LEN = _ICMP + 4


class IcmpEcho(wiring.Component):
    """Answers ICMP echo requests: the request is stored in a memory as it arrives and the
    reply is read back out of it with its first 38 octets rewritten, while the next
    request is stored in the memory's other bank.

    The reply, byte for byte :class:`rnic.host.model.network_layer.NicNetModel`'s: to the
    request's source MAC and IP from ``mac`` and ``ip``; IPv4 header of IHL 5, TOS 0, the
    request's total length, identification ``ident`` (taken with ``ident_take``), DF, TTL
    64, protocol ICMP and a fresh header checksum; ICMP type 0, code 0, the request's
    identifier, sequence and data, and the checksum over the reply, computed from the
    one's complement sum of the request's octets 38 to the end as they arrive (so an all-zero
    identifier, sequence and data give 0xFFFF, as a full computation does).

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    max_len : int
        Longest request frame stored (each bank of the memory holds ``max_len`` octets,
        rounded up to a power of two rows); default 1514,
        an IPv4 packet of the MTU. A longer request is taken and dropped without a reply.

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width)))
        Echo requests for ``ip`` whose IPv4 header and ICMP checksum are good, from the
        Ethernet header to the end of the IPv4 packet (no padding):
        :class:`~rnic.hdl.net.rx_classify.RxClassify`'s ``echo``.
    o : Out(stream.Signature(FrameBeat(width)))
        Echo replies, as long as their request.
    mac : In(48)
    ip : In(32)
        The NIC's addresses, big-endian. Quasi-static.
    ident : In(16)
        The identification counter shared with the other IPv4 senders.
    ident_take : Out(1)
        High for one cycle when a reply takes ``ident`` (the owner then steps it).

    Latency: the reply's first beat is valid 5 cycles after the request's last beat was
    taken (the checksums take two cycles, sums then folds; ``o`` is registered by a
    :class:`~rnic.hdl.stream_slice.StreamSlice`) when no reply is being sent. Throughput:
    one beat per cycle in and out; the memory has two banks, so a request is taken while
    the reply to the one before is sent (at the pace of ``o``: the line's, behind the
    transmit path) and ``i`` waits only after it, for that reply to end. Pings back to back
    at line rate are answered at line rate. ``ident_take`` pulses in the cycle after the
    request's last beat.
    """

    def __init__(self, *, width, max_len=MAX_FRAME_LEN):
        self._width = check_width(width)
        if isinstance(max_len, bool) or not isinstance(max_len, int) \
                or not REWRITTEN_LEN <= max_len <= 65535 + ETH_HEADER_LEN:
            raise ValueError(f"max_len must be an int from {REWRITTEN_LEN} to "
                             f"{65535 + ETH_HEADER_LEN}, not {max_len!r}")
        self._max_len = max_len
        beat = stream.Signature(FrameBeat(width=width))
        super().__init__({
            "i": In(beat),
            "o": Out(beat),
            "mac": In(48),
            "ip": In(32),
            "ident": In(16),
            "ident_take": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        rows = (self._max_len + W - 1) // W
        abits = max(1, ceil_log2(rows))
        # two banks: a request is received into one while the reply to the one before is
        # read out of the other
        m.submodules.store = store = memory.Memory(shape=8 * W, depth=2 << abits, init=[])
        wp = store.write_port()
        rp = store.read_port()
        write_bank = Signal()
        read_bank = Signal()

        beat = self.i.payload
        head = Signal(8 * _ICMP)
        index = Signal(16)
        beats = Signal(16)
        last_n = Signal(range(W + 1))
        too_long = Signal()
        offset = Cat(Signal(ceil_log2(W)), index)
        keep = Cat(*((offset + j >= REWRITTEN_LEN) & (j < beat.n) for j in range(W)))

        # The sum of octets 38 onwards runs one cycle behind the beats: each beat is taken
        # into a register (with its lanes' keep flags) and added in the next cycle, so
        # that nothing but a register sits behind the request's source (a memory read).
        sum_data = Signal(8 * W)
        sum_keep = Signal(W)
        sum_first = Signal()
        sum_pending = Signal()
        rest_sum = Signal(SUM_BITS)
        m.d.sync += sum_pending.eq(0)
        with m.If(sum_pending):
            m.d.sync += rest_sum.eq(Mux(sum_first, 0, rest_sum)
                                    + beat_sum(sum_data, sum_keep, W))

        m.d.comb += [wp.addr.eq(Cat(index[:abits], write_bank)), wp.data.eq(beat.data)]

        # the reply being sent: its header, length and position
        header = Signal(8 * REWRITTEN_LEN)
        reply_beats = Signal(16)
        reply_last_n = Signal(range(W + 1))
        sending = Signal()
        remaining = Signal(16)
        out_valid = Signal()
        out_index = Signal(16)
        read_index = Signal(16)
        # The reply leaves through a register slice: its octets come out of the store (a
        # block RAM) with the header laid over them.
        m.submodules.out = out = StreamSlice(FrameBeat(width=W))
        wiring.connect(m, out.o, wiring.flipped(self.o))
        advance = ~out_valid | out.i.ready
        self._reply_beat(m, rp, header, out.i, out_valid, out_index, reply_beats,
                         reply_last_n)
        m.d.comb += [rp.addr.eq(Cat(read_index[:abits], read_bank)),
                     rp.en.eq(advance & (remaining != 0))]
        with m.If(sending & advance):
            with m.If(remaining != 0):
                m.d.sync += [out_valid.eq(1), out_index.eq(read_index),
                             read_index.eq(read_index + 1), remaining.eq(remaining - 1)]
            with m.Else():
                m.d.sync += [out_valid.eq(0), sending.eq(0)]

        ident = Signal(16)
        ip_sum = Signal(SUM_BITS)
        with m.FSM():
            with m.State("RECEIVE"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.comb += wp.en.eq(index < rows)
                    capture(m, head, _ICMP, beat, index, W)
                    m.d.sync += [index.eq(index + 1),
                                 sum_data.eq(beat.data), sum_keep.eq(keep),
                                 sum_first.eq(index == 0), sum_pending.eq(1),
                                 too_long.eq(Mux(index == 0, 0, too_long) | (index >= rows))]
                    with m.If(beat.last):
                        m.d.sync += [index.eq(0), beats.eq(index + 1), last_n.eq(beat.n)]
                        with m.If(~(Mux(index == 0, 0, too_long) | (index >= rows))):
                            m.next = "SUM"
            with m.State("SUM"):
                # The last beat is added to rest_sum; the IPv4 header's sum is taken with
                # the identification it uses.
                m.d.comb += self.ident_take.eq(1)
                m.d.sync += [ident.eq(self.ident), ip_sum.eq(self._ip_sum(head, self.ident))]
                m.next = "HAND_OVER"
            with m.State("HAND_OVER"):
                # the stored request becomes the reply once the one before has been sent
                with m.If(~sending):
                    m.d.sync += [header.eq(self._header(head, ident, ip_sum, rest_sum)),
                                 reply_beats.eq(beats), reply_last_n.eq(last_n),
                                 remaining.eq(beats), read_index.eq(0), sending.eq(1),
                                 read_bank.eq(write_bank), write_bank.eq(~write_bank)]
                    m.next = "RECEIVE"
        return m

    def _ip_sum(self, head, ident):
        """The binary sum of the reply's IPv4 header words, its checksum left out."""
        total_length = field(head, _IP + 2, 2)
        peer_ip = field(head, _IP + 12, 4)
        version_ihl = (IPV4_VERSION << 4) | (IPV4_HEADER_LEN // 4)
        ttl_proto = (DEFAULT_TTL << 8) | IpProto.ICMP
        return ((version_ihl << 8) + total_length + ident + IPV4_DF + ttl_proto
                + self.ip[16:] + self.ip[:16] + peer_ip[16:] + peer_ip[:16])

    def _header(self, head, ident, ip_sum, rest_sum):
        """The reply's first 38 octets from the request's header, the identification, the
        sum of the reply's IPv4 header words and the sum of the request's octets 38
        onwards."""
        total_length = field(head, _IP + 2, 2)
        peer_mac = field(head, 6, 6)
        peer_ip = field(head, _IP + 12, 4)
        version_ihl = (IPV4_VERSION << 4) | (IPV4_HEADER_LEN // 4)
        ttl_proto = (DEFAULT_TTL << 8) | IpProto.ICMP
        ip_checksum = ~fold(ip_sum)
        icmp_checksum = ~fold(rest_sum)
        return frame_bits(
            octets_of(peer_mac, 6) + octets_of(self.mac, 6) + octets_of(EtherType.IPV4, 2)
            + octets_of(version_ihl, 1) + octets_of(0, 1) + octets_of(total_length, 2)
            + octets_of(ident, 2) + octets_of(IPV4_DF, 2) + octets_of(ttl_proto, 2)
            + octets_of(ip_checksum, 2) + octets_of(self.ip, 4) + octets_of(peer_ip, 4)
            + octets_of(IcmpType.ECHO_REPLY, 1) + octets_of(0, 1)
            + octets_of(icmp_checksum, 2))

    def _reply_beat(self, m, rp, header, o, out_valid, out_index, beats, last_n):
        """Drive ``o`` (the output slice's input) from the memory's read data with the
        header octets laid over it."""
        W = self._width
        header_beats = (REWRITTEN_LEN + W - 1) // W
        padded = Cat(header, Signal(8 * (header_beats * W - REWRITTEN_LEN)))
        offset = Cat(Signal(ceil_log2(W)), out_index)
        header_beat = padded.word_select(out_index[:max(1, ceil_log2(header_beats + 1))], 8 * W)
        lanes = [Mux(offset + j < REWRITTEN_LEN, header_beat[8 * j:8 * j + 8],
                     rp.data[8 * j:8 * j + 8]) for j in range(W)]
        is_last = out_index == beats - 1
        m.d.comb += [o.valid.eq(out_valid), o.payload.data.eq(Cat(*lanes)),
                     o.payload.first.eq(out_index == 0), o.payload.last.eq(is_last),
                     o.payload.n.eq(Mux(is_last, last_n, W))]
