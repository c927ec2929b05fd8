"""The IPv4 send path: next hop, ARP lookup, the Ethernet and IPv4 headers of a packet from
the layer above."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width
from rnic.host.spec.net import (DEFAULT_TTL, ETH_HEADER_LEN, IPV4_DF, IPV4_HEADER_LEN,
                                IPV4_VERSION, EtherType)

from .checksum import fold
from .l3_layouts import Ipv4TxBeat, TxDropEvent
from .layouts import FrameBeat, TxDrop
from .octets import frame_bits, octets_of

__all__ = ["Ipv4Tx", "HEADERS_LEN"]

#: Octets of the Ethernet and IPv4 headers this block writes at the start of each frame.
HEADERS_LEN = ETH_HEADER_LEN + IPV4_HEADER_LEN
_VERSION_IHL = (IPV4_VERSION << 4) | (IPV4_HEADER_LEN // 4)


class Ipv4Tx(wiring.Component):
    """Sends the packets of the layer above (TCP) as Ethernet frames, as
    :meth:`rnic.host.model.network_layer.NicNetModel.send_ipv4`.

    For each packet on ``i`` (:class:`~rnic.hdl.net.l3_layouts.Ipv4TxBeat`: the frame with
    room for the headers, the destination, protocol and payload length on its first beat):

    1. the next hop: the destination itself inside ``ip``/``prefix``, else ``gateway``;
       without one (``gateway`` 0) the packet is dropped as ``NO_ROUTE``;
    2. its MAC from the ARP cache (``lookup_*``); on a miss the packet is dropped as
       ``ARP_MISS`` and an ARP request for the next hop goes out on ``arp_request`` (one
       waits in a register until the ARP block takes it; a miss while one waits sends
       none). The send path holds no packet: TCP sends it again when it retransmits;
    3. else the frame leaves on ``o`` with octets 0 .. 33 written: the next hop's MAC,
       ``mac``, EtherType IPv4, and an IPv4 header with IHL 5, TOS 0, total length
       ``20 + length``, identification ``ident`` (taken with a pulse on ``ident_take``),
       DF, TTL 64, ``proto``, the header checksum, ``ip`` and the destination.

    Every dropped packet is consumed to its ``last`` beat and reported once on ``drop``.
    The layer above sends ``34 + length`` octets per packet (``length`` at most the MTU
    less 20: a longer frame is dropped by the MAC and counted there). A beat without a
    packet open and without ``first`` is thrown away.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.

    Ports
    -----
    i : In(stream.Signature(Ipv4TxBeat(width)))
        Packets from the layer above.
    o : Out(stream.Signature(FrameBeat(width)))
        Frames to send (to the transmit arbiter).
    mac : In(48)
    ip, gateway : In(32)
    prefix : In(6)
        The NIC's addresses, its network's prefix length (0 .. 32) and the next hop for
        destinations outside it (0: none). Quasi-static.
    lookup_ip : Out(32)
    lookup_hit : In(1)
    lookup_mac : In(48)
        The ARP cache's send-path lookup (:class:`~rnic.hdl.net.arp_cache.ArpCache`
        ``tx_lookup_*``: the answer one cycle after the address; held here two cycles).
    arp_request : Out(stream.Signature(32))
        Next hops to send an ARP request for.
    ident : In(16)
    ident_take : Out(1)
        The identification counter and its increment.
    drop : Out(TxDropEvent)
        One cycle of ``valid`` per dropped packet with its reason.

    Latency: a frame's first beat is offered on ``o`` 4 cycles after the packet's first
    beat is offered on ``i`` (next hop, the cache's match, lookup and header sum, fold).
    Throughput: one beat per cycle within a packet (``i.ready`` is
    ``o.ready``), 4 idle cycles between packets; a dropped packet takes its beats plus 3
    cycles.
    """

    def __init__(self, *, width):
        self._width = check_width(width)
        super().__init__({
            "i": In(stream.Signature(Ipv4TxBeat(width=width))),
            "o": Out(stream.Signature(FrameBeat(width=width))),
            "mac": In(48),
            "ip": In(32),
            "gateway": In(32),
            "prefix": In(6),
            "lookup_ip": Out(32),
            "lookup_hit": In(1),
            "lookup_mac": In(48),
            "arp_request": Out(stream.Signature(32)),
            "ident": In(16),
            "ident_take": Out(1),
            "drop": Out(TxDropEvent),
        })

    def elaborate(self, platform):
        m = Module()
        i = self.i
        dst = Signal(32)
        proto = Signal(8)
        length = Signal(16)
        hop = Signal(32)
        no_route = Signal()
        dst_mac = Signal(48)
        ident = Signal(16)
        ip_sum = Signal(20)
        checksum = Signal(16)

        # next hop: inside the prefix the destination itself, else the gateway
        mask = Signal(32)
        m.d.comb += mask.eq(~(Const(0xFFFF_FFFF, 32) >> self.prefix))
        on_link = ((i.payload.dst ^ self.ip) & mask) == 0
        m.d.comb += self.lookup_ip.eq(hop)

        with m.If(self.arp_request.ready):
            m.d.sync += self.arp_request.valid.eq(0)

        with m.FSM(name="tx_state"):
            with m.State("IDLE"):
                # a beat that starts no packet is thrown away
                m.d.comb += i.ready.eq(i.valid & ~i.payload.first)
                with m.If(i.valid & i.payload.first):
                    m.d.sync += [dst.eq(i.payload.dst), proto.eq(i.payload.proto),
                                 length.eq(i.payload.length),
                                 hop.eq(Mux(on_link, i.payload.dst, self.gateway)),
                                 no_route.eq(~on_link & (self.gateway == 0))]
                    m.next = "MATCH"
            with m.State("MATCH"):
                # the cache compares ``hop`` with its slots (registered)
                m.next = "LOOKUP"
            with m.State("LOOKUP"):
                m.d.sync += dst_mac.eq(self.lookup_mac)
                with m.If(no_route):
                    m.d.comb += [self.drop.valid.eq(1), self.drop.reason.eq(TxDrop.NO_ROUTE)]
                    m.next = "DISCARD"
                with m.Elif(~self.lookup_hit):
                    m.d.comb += [self.drop.valid.eq(1), self.drop.reason.eq(TxDrop.ARP_MISS)]
                    with m.If(~self.arp_request.valid):
                        m.d.sync += [self.arp_request.valid.eq(1),
                                     self.arp_request.payload.eq(hop)]
                    m.next = "DISCARD"
                with m.Else():
                    m.d.comb += self.ident_take.eq(1)
                    m.d.sync += [ident.eq(self.ident),
                                 ip_sum.eq(self._header_sum(self.ident, proto, length, dst))]
                    m.next = "FOLD"
            with m.State("FOLD"):
                m.d.sync += checksum.eq(~fold(ip_sum))
                m.next = "SEND"
            with m.State("SEND"):
                self._send(m, self._headers(dst_mac, length, ident, proto, checksum, dst))
            with m.State("DISCARD"):
                m.d.comb += i.ready.eq(1)
                with m.If(i.valid & i.payload.last):
                    m.next = "IDLE"
        return m

    def _header_sum(self, ident, proto, length, dst):
        """The binary sum of the IPv4 header's words, its checksum left out."""
        return ((_VERSION_IHL << 8) + (length + IPV4_HEADER_LEN) + ident + IPV4_DF
                + ((DEFAULT_TTL << 8) | proto) + self.ip[16:] + self.ip[:16]
                + dst[16:] + dst[:16])

    def _headers(self, dst_mac, length, ident, proto, checksum, dst):
        """Octets 0 .. 33 of the frame."""
        return frame_bits(
            octets_of(dst_mac, 6) + octets_of(self.mac, 6) + octets_of(EtherType.IPV4, 2)
            + octets_of(_VERSION_IHL, 1) + octets_of(0, 1)
            + octets_of((length + IPV4_HEADER_LEN)[:16], 2) + octets_of(ident, 2)
            + octets_of(IPV4_DF, 2) + octets_of(DEFAULT_TTL, 1) + octets_of(proto, 1)
            + octets_of(checksum, 2) + octets_of(self.ip, 4) + octets_of(dst, 4))

    def _send(self, m, head):
        """The packet's beats to ``o`` with the header octets laid over the first ones."""
        W = self._width
        i, o = self.i, self.o
        header_beats = (HEADERS_LEN + W - 1) // W
        index = Signal(range(header_beats + 1))
        data = Signal(8 * W)
        m.d.comb += data.eq(i.payload.data)
        for k in range(header_beats):
            with m.If(index == k):
                for lane in range(min(W, HEADERS_LEN - k * W)):
                    p = k * W + lane
                    m.d.comb += data[8 * lane:8 * lane + 8].eq(head[8 * p:8 * p + 8])
        m.d.comb += [o.valid.eq(i.valid), i.ready.eq(o.ready), o.payload.data.eq(data),
                     o.payload.n.eq(i.payload.n), o.payload.first.eq(index == 0),
                     o.payload.last.eq(i.payload.last)]
        with m.If(i.valid & o.ready):
            with m.If(index != header_beats):
                m.d.sync += index.eq(index + 1)
            with m.If(i.payload.last):
                m.d.sync += index.eq(0)
                m.next = "IDLE"
