"""The transmit side's frame builder: a segment's TCP header, checksum included, and its
payload, as a packet for the IPv4 send path."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from rnic.host.spec.limits import check_width
from rnic.host.spec.net import IpProto
from rnic.host.spec.tcp import TCP_HEADER_LEN, TcpOption

from ..net.checksum import fold
from ..net.l3_layouts import Ipv4TxBeat
from ..net.layouts import FrameBeat
from ..net.octets import frame_bits, octets_of
from .layouts import TcpTxDesc
from .rx_header import TCP_OFFSET

__all__ = ["TcpTxFrame", "MSS_OPTION_LEN", "WS_OPTION_LEN"]

#: Octets of the options of a SYN this NIC sends: MSS (4), then NOP and window scale (4)
#: when the window is scaled.
MSS_OPTION_LEN = 4
WS_OPTION_LEN = 4
_PAYLOAD_AT = TCP_OFFSET + TCP_HEADER_LEN                  # 54: where a payload starts
_HEAD_LEN = _PAYLOAD_AT + MSS_OPTION_LEN + WS_OPTION_LEN   # 62: the longest head


class TcpTxFrame(wiring.Component):
    """Builds each segment described on ``desc`` as a packet for
    :class:`~rnic.hdl.net.ipv4_tx.Ipv4Tx`: 34 octets of room for the Ethernet and IPv4
    headers, the TCP header (20 octets; 24 with ``syn_options``: MSS ``mss``; 28 with
    ``ws_present`` too: NOP, window scale ``ws``), then ``length`` octets of ``payload``.

    The checksum covers the pseudo-header (``ip``, ``dst_ip``, protocol 6, the segment's
    length), the header and the payload, whose sum comes with the descriptor
    (``payload_sum``: the 16-bit one's complement sum of the payload as big-endian words,
    as :func:`rnic.host.model.ipv4.ones_sum` gives it; the stage that reads the payload
    adds it up). The frame equals the model's
    (:meth:`rnic.host.model.tcp.TcpSegment.build`). A segment with ``syn_options`` carries
    no payload (``length`` must be 0).

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.

    Ports
    -----
    desc : In(stream.Signature(TcpTxDesc))
        One per segment; taken when its frame's last beat leaves.
    payload : In(stream.Signature(FrameBeat(width)))
        The payload of each descriptor with ``length`` > 0, aligned to lane 0, ``first`` to
        ``last`` (``length`` octets).
    o : Out(stream.Signature(Ipv4TxBeat(width)))
        The packets, registered: ``dst``, ``proto`` 6 and ``length`` (TCP octets) on every
        beat of a packet (Ipv4Tx reads them on the first).
    ip : In(32)
        The NIC's address (the pseudo-header's source). Quasi-static.

    Latency: a packet's first beat is valid 3 cycles after its descriptor (the checksum's
    two adder stages). Throughput: one beat per cycle within a packet; 2 idle cycles
    between packets; the payload moves at the rate of the output.
    """

    def __init__(self, *, width):
        self._width = check_width(width)
        super().__init__({
            "desc": In(stream.Signature(TcpTxDesc())),
            "payload": In(stream.Signature(FrameBeat(width=width))),
            "o": Out(stream.Signature(Ipv4TxBeat(width=width))),
            "ip": In(32),
        })

    def _head(self, desc, checksum, offset):
        """The first 62 frame octets of the segment: room, TCP header, SYN options."""
        flags = desc.flags.as_value()
        tcp = [*octets_of(desc.src_port, 2), *octets_of(desc.dst_port, 2),
               *octets_of(desc.seq, 4), *octets_of(desc.ack, 4), Cat(Const(0, 4), offset),
               flags, *octets_of(desc.window, 2), *octets_of(checksum, 2), Const(0, 8),
               Const(0, 8)]
        options = [TcpOption.MSS, 4, *octets_of(desc.mss, 2), TcpOption.NOP,
                   TcpOption.WINDOW_SCALE, 3, Cat(desc.ws, Const(0, 8 - len(desc.ws)))]
        return frame_bits([Const(0, 8)] * TCP_OFFSET + tcp
                          + [Const(v, 8) if isinstance(v, int) else v for v in options])

    @staticmethod
    def _header_len(desc):
        """The TCP header's octets: 20, 24 (MSS) or 28 (MSS and window scale)."""
        return Mux(desc.syn_options,
                   Mux(desc.ws_present, TCP_HEADER_LEN + MSS_OPTION_LEN + WS_OPTION_LEN,
                       TCP_HEADER_LEN + MSS_OPTION_LEN), TCP_HEADER_LEN)

    def _sum(self, m, desc, offset):
        """Two registered adder stages: the binary sum of the pseudo-header, the header's
        words (checksum 0) and the payload's sum; then its fold and complement."""
        tcp_len = Signal(16)
        m.d.comb += tcp_len.eq(desc.length + self._header_len(desc))
        ws = desc.syn_options & desc.ws_present
        words = [self.ip[16:], self.ip[:16], desc.dst_ip[16:], desc.dst_ip[:16],
                 Const(IpProto.TCP, 16), tcp_len, desc.src_port, desc.dst_port,
                 desc.seq[16:], desc.seq[:16], desc.ack[16:], desc.ack[:16],
                 Cat(desc.flags.as_value(), Const(0, 4), offset),
                 desc.window, desc.payload_sum,
                 Mux(desc.syn_options, (TcpOption.MSS << 8) | 4, 0),
                 Mux(desc.syn_options, desc.mss, 0),
                 Mux(ws, (TcpOption.NOP << 8) | TcpOption.WINDOW_SCALE, 0),
                 Mux(ws, Cat(desc.ws, Const(0, 8 - len(desc.ws)), Const(3, 8)), 0)]
        halves = [Signal(20, name=f"sum_{k}") for k in range(2)]
        half = (len(words) + 1) // 2
        for k, part in enumerate((words[:half], words[half:])):
            total = part[0]
            for word in part[1:]:
                total = total + word
            m.d.sync += halves[k].eq(total)
        checksum = Signal(16)
        m.d.sync += checksum.eq(~fold(halves[0] + halves[1]))
        return checksum

    def elaborate(self, platform):
        m = Module()
        W = self._width
        desc = self.desc.payload
        offset = Signal(4)                  # the data offset: the header in 32-bit words
        m.d.comb += offset.eq(self._header_len(desc) >> 2)
        checksum = self._sum(m, desc, offset)
        head = self._head(desc, checksum, offset)
        s = _PAYLOAD_AT % W                 # header lanes of the beat where the payload starts
        assert s != 0, "the shift below is written for a payload that starts inside a beat"
        syn_beats = -(-_HEAD_LEN // W)
        out = self.o.payload
        beat = Signal(range(syn_beats + 1))  # index of the next head beat
        prev = Signal(8 * W)                # the payload beat before (its top lanes are due)
        prev_n = Signal(bits_for(W))

        free = ~self.o.valid | self.o.ready
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        pay = self.payload.payload
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.desc.valid):
                    m.d.sync += beat.eq(0)
                    m.next = "SUM"
            with m.State("SUM"):
                m.next = "HEAD"
            with m.State("HEAD"):
                self._head_beats(m, head, beat, free, s, syn_beats, prev, prev_n)
            with m.State("BODY"):
                with m.If(free & self.payload.valid):
                    m.d.comb += self.payload.ready.eq(1)
                    m.d.sync += [self.o.valid.eq(1), out.first.eq(0),
                                 out.data.eq(Cat(prev[8 * (W - s):], pay.data[:8 * (W - s)])),
                                 prev.eq(pay.data), prev_n.eq(pay.n)]
                    with m.If(pay.last & (pay.n > W - s)):
                        m.d.sync += [out.n.eq(W), out.last.eq(0)]
                        m.next = "SPILL"
                    with m.Elif(pay.last):
                        m.d.sync += [out.n.eq(s + pay.n), out.last.eq(1)]
                        m.d.comb += self.desc.ready.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [out.n.eq(W), out.last.eq(0)]
            with m.State("SPILL"):
                with m.If(free):
                    m.d.comb += self.desc.ready.eq(1)
                    m.d.sync += [self.o.valid.eq(1), out.first.eq(0), out.last.eq(1),
                                 out.data.eq(prev[8 * (W - s):]),
                                 out.n.eq(prev_n - (W - s))]
                    m.next = "IDLE"
        return m

    def _head_beats(self, m, head, beat, free, s, syn_beats, prev, prev_n):
        """The beats of the head; the last one of a segment with payload also carries the
        payload's first ``W - s`` octets."""
        W = self._width
        desc, out, pay = self.desc.payload, self.o.payload, self.payload.payload
        syn = desc.syn_options
        has_payload = ~syn & (desc.length != 0)
        # the head's end (54, 58 or 62 octets): its last beat, and that beat's octets
        ends = {(0, 0): _PAYLOAD_AT, (1, 0): _PAYLOAD_AT + MSS_OPTION_LEN, (1, 1): _HEAD_LEN}
        last_beat = Signal(range(syn_beats))
        last_n = Signal(range(W + 1))
        for (with_syn, with_ws), end in ends.items():
            with m.If((syn == with_syn) & ((desc.ws_present & syn) == with_ws)):
                m.d.comb += [last_beat.eq(-(-end // W) - 1),
                             last_n.eq(end - (-(-end // W) - 1) * W)]
        words = [head[8 * W * k:8 * W * (k + 1)] for k in range(syn_beats)]
        word = Signal(8 * W)
        with m.Switch(beat):
            for k in range(syn_beats):
                with m.Case(k):
                    m.d.comb += word.eq(words[k])
        joins = beat == last_beat
        # the head's last beat waits for the payload's first when it carries its octets
        can = free & (~(joins & has_payload) | self.payload.valid)
        with m.If(can):
            m.d.sync += [self.o.valid.eq(1), out.first.eq(beat == 0), out.n.eq(W),
                         out.last.eq(0), out.data.eq(word), beat.eq(beat + 1),
                         out.dst.eq(desc.dst_ip), out.proto.eq(IpProto.TCP),
                         out.length.eq(desc.length + self._header_len(desc))]
            with m.If(joins & has_payload):
                m.d.comb += self.payload.ready.eq(1)
                m.d.sync += [out.data.eq(Cat(word[:8 * s], pay.data[:8 * (W - s)])),
                             prev.eq(pay.data), prev_n.eq(pay.n)]
                with m.If(pay.last & (pay.n <= W - s)):
                    m.d.sync += [out.n.eq(s + pay.n), out.last.eq(1)]
                    m.d.comb += self.desc.ready.eq(1)
                    m.next = "IDLE"
                with m.Elif(pay.last):
                    m.next = "SPILL"
                with m.Else():
                    m.next = "BODY"
            with m.Elif(joins):
                m.d.sync += [out.n.eq(last_n), out.last.eq(1)]
                m.d.comb += self.desc.ready.eq(1)
                m.next = "IDLE"
