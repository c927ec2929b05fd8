"""ARP: answers requests for the NIC's address, learns the senders, and sends the requests
of the transmit path."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width
from rnic.host.spec.net import (ARP_LEN, BROADCAST_MAC, ETH_ADDR_LEN, ETH_HEADER_LEN, ArpOp,
                                EtherType)

from .l3_layouts import ArpBinding
from .layouts import FrameBeat
from .octets import capture, field, frame_bits, octets_of

__all__ = ["ArpResponder", "ARP_FRAME_LEN"]

#: Octets of an ARP frame as sent here (the MAC pads it to 60).
ARP_FRAME_LEN = ETH_HEADER_LEN + ARP_LEN
_HTYPE_ETHERNET = 1


class ArpResponder(wiring.Component):
    """Answers ARP requests for ``ip``, learns from every ARP packet for ``ip`` and sends
    ARP requests for the transmit path, as :class:`rnic.host.model.arp.ArpResponder`.

    The frames on ``i`` are already checked (:class:`~rnic.hdl.net.rx_classify.RxClassify`:
    IPv4 over Ethernet, request or reply, target IP ``ip``). From each, the sender's pair
    goes to ``learn`` unless the sender IP is 0.0.0.0 (a probe); a request is answered
    with a reply to the sender (42 octets, the MAC pads it). A request on ``request`` (a
    target IP) sends a broadcast ARP request for it.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width)))
        Checked ARP frames for ``ip`` (at least the 42 octets of header and packet).
    o : Out(stream.Signature(FrameBeat(width)))
        ARP frames to send: 42 octets each.
    learn : Out(stream.Signature(ArpBinding))
        Sender pairs for the :class:`~rnic.hdl.net.arp_cache.ArpCache`.
    request : In(stream.Signature(32))
        Target IPs to send a request for; taken between received frames.
    mac : In(48)
    ip : In(32)
        The NIC's addresses, big-endian. Quasi-static.

    Latency: the reply's first beat is valid 2 cycles after the request's last beat was
    taken on ``i`` (a cycle to learn); a request from ``request`` 1 cycle after it was
    taken. Throughput: ``i`` is stalled while a reply is sent, so a request takes its
    beats plus ``ceil(42 / W)`` plus 1 cycles.
    """

    def __init__(self, *, width):
        self._width = check_width(width)
        beat = stream.Signature(FrameBeat(width=width))
        super().__init__({
            "i": In(beat),
            "o": Out(beat),
            "learn": Out(stream.Signature(ArpBinding())),
            "request": In(stream.Signature(32)),
            "mac": In(48),
            "ip": In(32),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        beats = (ARP_FRAME_LEN + W - 1) // W
        head = Signal(8 * ARP_FRAME_LEN)
        index = Signal(16)
        sender_mac = field(head, 22, ETH_ADDR_LEN)
        sender_ip = field(head, 28, 4)
        frame = Signal(8 * W * beats)
        out_index = Signal(range(beats + 1))

        def arp_frame(dst, op, target_mac, target_ip):
            return frame_bits(octets_of(dst, 6) + octets_of(self.mac, 6)
                              + octets_of(EtherType.ARP, 2) + octets_of(_HTYPE_ETHERNET, 2)
                              + octets_of(EtherType.IPV4, 2) + octets_of(ETH_ADDR_LEN, 1)
                              + octets_of(4, 1) + octets_of(op, 2) + octets_of(self.mac, 6)
                              + octets_of(self.ip, 4) + octets_of(target_mac, 6)
                              + octets_of(target_ip, 4))

        m.d.comb += [self.learn.payload.ip.eq(sender_ip), self.learn.payload.mac.eq(sender_mac),
                     self.o.payload.data.eq(frame.word_select(out_index, 8 * W)),
                     self.o.payload.first.eq(out_index == 0),
                     self.o.payload.last.eq(out_index == beats - 1),
                     self.o.payload.n.eq(W)]
        with m.If(out_index == beats - 1):
            m.d.comb += self.o.payload.n.eq(ARP_FRAME_LEN - (beats - 1) * W)

        with m.FSM():
            with m.State("RECEIVE"):
                with m.If((index == 0) & self.request.valid):
                    m.d.comb += self.request.ready.eq(1)
                    m.d.sync += [frame.eq(arp_frame(int.from_bytes(BROADCAST_MAC, "big"),
                                                    ArpOp.REQUEST, 0, self.request.payload)),
                                 out_index.eq(0)]
                    m.next = "SEND"
                with m.Else():
                    m.d.comb += self.i.ready.eq(1)
                    with m.If(self.i.valid):
                        capture(m, head, ARP_FRAME_LEN, self.i.payload, index, W)
                        m.d.sync += index.eq(index + 1)
                        with m.If(self.i.payload.last):
                            m.d.sync += index.eq(0)
                            m.next = "LEARN"
            with m.State("LEARN"):
                m.d.comb += self.learn.valid.eq(sender_ip != 0)
                with m.If(self.learn.ready | (sender_ip == 0)):
                    m.d.sync += [frame.eq(arp_frame(sender_mac, ArpOp.REPLY, sender_mac,
                                                    sender_ip)),
                                 out_index.eq(0)]
                    m.next = "SEND"
                    with m.If(field(head, 20, 2) != ArpOp.REQUEST):
                        m.next = "RECEIVE"
            with m.State("SEND"):
                m.d.comb += self.o.valid.eq(1)
                with m.If(self.o.ready):
                    m.d.sync += out_index.eq(out_index + 1)
                    with m.If(out_index == beats - 1):
                        m.next = "RECEIVE"
        return m
