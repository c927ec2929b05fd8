"""The NIC's network layer above the MAC: receive classification, ARP, ICMP echo and the
transmit arbiter, in the core clock domain."""

from amaranth.hdl import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width
from rnic.host.spec.net import MAX_FRAME_LEN

from ..stream_slice import StreamSlice
from .arp_cache import ArpCache, check_entries
from .arp_responder import ArpResponder
from .icmp_echo import IcmpEcho
from .ipv4_tx import Ipv4Tx
from .l3_layouts import ArpWrite, DropEvent, Ipv4TxBeat, TxDropEvent
from .layouts import FrameBeat
from .rx_classify import RxClassify, check_depth
from .tx_arbiter import TxArbiter

__all__ = ["NetworkLayer", "TX_INPUTS"]

#: Inputs of the transmit arbiter, in its round-robin order.
TX_INPUTS = ("arp", "echo", "ip_tx")


class NetworkLayer(wiring.Component):
    """ARP, IPv4, ICMP echo and the TCP receive checks between the MAC and the TCP layer:
    the gateware of :class:`rnic.host.model.network_layer.NicNetModel`.

    ``rx`` → :class:`~rnic.hdl.net.rx_classify.RxClassify` → ARP frames to
    :class:`~rnic.hdl.net.arp_responder.ArpResponder` (which fills
    :class:`~rnic.hdl.net.arp_cache.ArpCache`), echo requests to
    :class:`~rnic.hdl.net.icmp_echo.IcmpEcho`, TCP to ``tcp``. Packets of the layer above
    (``ip_tx``) get their next hop, ARP lookup and headers in
    :class:`~rnic.hdl.net.ipv4_tx.Ipv4Tx`. ARP frames, echo replies and those packets go
    out on ``tx`` through :class:`~rnic.hdl.net.tx_arbiter.TxArbiter`, a whole frame at a
    time. Every frame is handled or dropped for exactly the reason the model gives,
    counted through ``drop``; every packet of ``ip_tx`` sent or dropped as the model's
    ``send_ipv4``, counted through ``tx_drop``.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    arp_entries : int
        Slots of the ARP cache (1 to 64).
    rx_depth : int
        Octets of the receive classification buffer (a power of 2, at least 4096).
    send_path : bool
        Build the send path (:class:`~rnic.hdl.net.ipv4_tx.Ipv4Tx`; default ``True``).
        Without it the ports ``ip_tx``, ``tx_drop`` and ``gateway`` do not exist and only
        ARP frames and echo replies are sent: for a top with no layer above that sends
        (no logic for a port nothing drives).

    Ports
    -----
    rx : In(stream.Signature(FrameBeat(width)))
        Good frames from the MAC (``EthernetPort.rx``).
    tx : Out(stream.Signature(FrameBeat(width)))
        Frames to the MAC (``EthernetPort.tx``, which pads them to 60 octets).
    tcp : Out(stream.Signature(FrameBeat(width)))
        IPv4 TCP packets for ``ip`` with a good IPv4 header (version 4, IHL 5, checksum, no
        fragment), a good TCP checksum (over the pseudo-header and the segment) and a TCP
        header that fits the segment (data offset 5 or more, data offset * 4 at most the
        segment's length): the frame from its destination MAC to the end of the IPv4 packet
        (``14 + total length`` octets, padding removed); the TCP header starts at octet
        34, the addresses are at 26 (source) and 30 (``ip``).
    ip_tx : In(stream.Signature(Ipv4TxBeat(width)))
        Packets of the layer above (TCP): the frame with octets 0 .. 33 left for the
        headers, destination, protocol and payload length on the first beat
        (:class:`~rnic.hdl.net.l3_layouts.Ipv4TxBeat`).
    tx_drop : Out(TxDropEvent)
        One cycle of ``valid`` per packet of ``ip_tx`` dropped (``NO_ROUTE``, ``ARP_MISS``).
    drop : Out(DropEvent)
        One cycle of ``valid`` per dropped frame with its ``reason``
        (:class:`~rnic.hdl.net.layouts.RxDrop` ``ETHERTYPE`` to ``TCP_CHECKSUM``): the
        register bank counts them, one counter per reason.
    mac : In(48)
    ip : In(32)
        The NIC's MAC and IPv4 address, big-endian (the first octet on the wire in the top
        bits). Quasi-static.
    prefix : In(6)
    gateway : In(32)
        Prefix length of the NIC's network and the next hop beyond it (0: none), for the
        send path. Quasi-static.
    arp_write : In(stream.Signature(ArpWrite(entries=arp_entries)))
        Host writes of ARP cache slots (static entries).
    arp_request : In(stream.Signature(32))
        An IPv4 address to send a broadcast ARP request for (the host's; the send path's
        own requests go first).
    arp_lookup_ip : In(32)
    arp_lookup_done : Out(1)
    arp_lookup_hit : Out(1)
    arp_lookup_mac : Out(48)
        ARP cache lookup for the register window: hit and MAC are those of
        ``arp_lookup_ip`` while ``arp_lookup_done``, a few cycles after it changed
        (:class:`~rnic.hdl.net.arp_cache.ArpCache`; the send path has a lookup port of its
        own).
    ident : Out(16)
        The IPv4 identification counter (the next value a sent packet takes; echo replies
        and ``ip_tx`` packets take from it).

    Latency (no back-pressure): the first beat of an ARP reply leaves on ``tx``
    ``ceil(42 / W) + 7`` cycles after the request's last beat came in on ``rx`` (18 at
    W = 4, 13 at W = 8); of an echo reply B + 10 cycles after, B the beats of the request's
    14 + total length octets (35 at W = 4, 23 at W = 8 for a 56-octet ping); a TCP frame's
    first beat is on ``tcp`` 5 cycles after its last came in. Throughput: ``rx`` takes one
    beat per cycle while the buffer has room; the classifier routes one beat per cycle
    with one idle cycle between frames (a dropped frame takes one cycle); an echo request
    is taken while the reply to the one before is sent (two in the echo's memory), so
    pings back to back at line rate are answered at line rate; ARP requests in
    ``2 * ceil(42 / W) + 2`` cycles.
    """

    def __init__(self, *, width, arp_entries=8, rx_depth=4096, send_path=True):
        self._width = check_width(width)
        self._entries = check_entries(arp_entries)
        self._rx_depth = check_depth("rx_depth", rx_depth, width)
        if not isinstance(send_path, bool):
            raise TypeError(f"send_path must be a bool, not {send_path!r}")
        self._send = send_path
        beat = stream.Signature(FrameBeat(width=width))
        send = {"ip_tx": In(stream.Signature(Ipv4TxBeat(width=width))),
                "tx_drop": Out(TxDropEvent), "gateway": In(32)} if send_path else {}
        super().__init__({
            "rx": In(beat),
            "tx": Out(beat),
            "tcp": Out(beat),
            "drop": Out(DropEvent),
            "mac": In(48),
            "ip": In(32),
            "prefix": In(6),
            **send,
            "arp_write": In(stream.Signature(ArpWrite(entries=arp_entries))),
            "arp_request": In(stream.Signature(32)),
            "arp_lookup_ip": In(32),
            "arp_lookup_done": Out(1),
            "arp_lookup_hit": Out(1),
            "arp_lookup_mac": Out(48),
            "ident": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        m.submodules.classify = classify = RxClassify(width=W, depth=self._rx_depth)
        m.submodules.arp = arp = ArpResponder(width=W)
        m.submodules.arp_cache = cache = ArpCache(entries=self._entries)
        m.submodules.echo = echo = IcmpEcho(width=W, max_len=MAX_FRAME_LEN)
        inputs = TX_INPUTS if self._send else TX_INPUTS[:-1]
        m.submodules.tx_arbiter = arbiter = TxArbiter(width=W, inputs=len(inputs))

        wiring.connect(m, wiring.flipped(self.rx), classify.i)
        wiring.connect(m, classify.arp, arp.i)
        wiring.connect(m, classify.echo, echo.i)
        wiring.connect(m, classify.tcp, wiring.flipped(self.tcp))
        wiring.connect(m, classify.drop, wiring.flipped(self.drop))
        wiring.connect(m, arp.learn, cache.learn)
        wiring.connect(m, wiring.flipped(self.arp_write), cache.write)
        m.d.comb += [classify.ip.eq(self.ip), arp.mac.eq(self.mac), arp.ip.eq(self.ip),
                     echo.mac.eq(self.mac), echo.ip.eq(self.ip), echo.ident.eq(self.ident),
                     cache.lookup_ip.eq(self.arp_lookup_ip),
                     self.arp_lookup_done.eq(cache.lookup_done),
                     self.arp_lookup_hit.eq(cache.lookup_hit),
                     self.arp_lookup_mac.eq(cache.lookup_mac)]
        sources = {"arp": arp.o, "echo": echo.o}
        if self._send:
            m.submodules.ipv4_tx = ipv4_tx = Ipv4Tx(width=W)
            self._requests(m, ipv4_tx.arp_request, self.arp_request, arp.request)
            self._send_path(m, ipv4_tx, cache, echo)
            # a slice: Ipv4Tx passes a packet's beats through, and the arbiter's ready
            # depends on the other sources' valid; joined, TCP's output handshake ran
            # through both into its own slice
            m.submodules.ip_tx_slice = ip_tx_slice = StreamSlice(FrameBeat(width=W))
            wiring.connect(m, ipv4_tx.o, ip_tx_slice.i)
            sources["ip_tx"] = ip_tx_slice.o
        else:
            wiring.connect(m, wiring.flipped(self.arp_request), arp.request)
            m.d.sync += self.ident.eq(self.ident + echo.ident_take)
        for k, name in enumerate(inputs):
            wiring.connect(m, sources[name], arbiter.i[k])
        wiring.connect(m, arbiter.o, wiring.flipped(self.tx))
        return m

    def _send_path(self, m, ipv4_tx, cache, echo):
        """Ipv4Tx's inputs, its lookup port on the cache and the shared identification
        counter: in a cycle where both take one, the echo reply gets ``ident`` and the
        packet the next."""
        wiring.connect(m, wiring.flipped(self.ip_tx), ipv4_tx.i)
        wiring.connect(m, ipv4_tx.drop, wiring.flipped(self.tx_drop))
        m.d.comb += [ipv4_tx.mac.eq(self.mac), ipv4_tx.ip.eq(self.ip),
                     ipv4_tx.prefix.eq(self.prefix), ipv4_tx.gateway.eq(self.gateway),
                     cache.tx_lookup_ip.eq(ipv4_tx.lookup_ip),
                     ipv4_tx.lookup_hit.eq(cache.tx_lookup_hit),
                     ipv4_tx.lookup_mac.eq(cache.tx_lookup_mac),
                     ipv4_tx.ident.eq(self.ident + echo.ident_take)]
        m.d.sync += self.ident.eq(self.ident + echo.ident_take + ipv4_tx.ident_take)

    @staticmethod
    def _requests(m, first, second, request):
        """Two sources of ARP requests into one port, ``first`` before ``second``."""
        m.d.comb += [request.valid.eq(first.valid | second.valid),
                     request.payload.eq(Mux(first.valid, first.payload, second.payload)),
                     first.ready.eq(request.ready),
                     second.ready.eq(request.ready & ~first.valid)]
