"""The receive parser's header stage: a segment's headers captured from its frame, its
payload passed on with the lane it starts in."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width
from rnic.host.spec.net import ETH_HEADER_LEN, IPV4_HEADER_LEN
from rnic.host.spec.tcp import MAX_TCP_HEADER_LEN, MIN_DATA_OFFSET, TCP_HEADER_LEN

from ..net.layouts import FrameBeat
from ..net.octets import capture, field, octet
from .layouts import ShiftBeat, TcpHeaderInfo

__all__ = ["TcpRxHeader", "TCP_OFFSET"]

#: Frame offset of the TCP header (after the Ethernet and the option-less IPv4 header).
TCP_OFFSET = ETH_HEADER_LEN + IPV4_HEADER_LEN
_TOTAL_LENGTH = ETH_HEADER_LEN + 2          # the IPv4 total length
_SRC_IP = ETH_HEADER_LEN + 12               # the IPv4 source address
_DATA_OFFSET = TCP_OFFSET + 12              # the TCP data offset (high nibble)
#: Octets of the frame the stage captures: through the longest TCP header.
_CAPTURED = TCP_OFFSET + MAX_TCP_HEADER_LEN


class TcpRxHeader(wiring.Component):
    """Splits each received segment's frame into its headers (``hdr``) and its payload
    (``payload``).

    The frame's octets up to the end of the longest TCP header are latched as its beats
    pass. The TCP header ends at octet ``P - 1`` with ``P = 34 + 4 * data offset``; once
    the beat holding that octet is taken, ``hdr`` is valid with the headers
    (:class:`~rnic.hdl.tcp.layouts.TcpHeaderInfo`) and the beats from the one holding
    octet ``P`` to the frame's last go to ``payload``, the first of them with ``skip``
    ``= P mod W`` (the lanes of the header before it). A frame that ends inside its TCP
    header gives ``hdr`` with ``truncated`` and no payload (the network layer passes none:
    it checks the data offset against the IPv4 total length).

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width)))
        Frames of IPv4 TCP segments as the network layer hands them up
        (:attr:`rnic.hdl.net.network_layer.NetworkLayer.tcp`): from the destination MAC to
        the end of the IPv4 packet, no padding.
    hdr : Out(stream.Signature(TcpHeaderInfo))
        One per frame, registered; stays valid (and the next frame's header waits) until
        taken.
    payload : Out(stream.Signature(ShiftBeat(width)))
        The payload's beats, combinationally from ``i``.

    Latency: ``hdr`` is valid 1 cycle after the beat that ends the TCP header was taken;
    a payload beat is on ``payload`` in the cycle it is on ``i``. Throughput: one beat per
    cycle, but a frame's header beats wait while ``hdr`` still holds the header before.
    """

    def __init__(self, *, width):
        self._width = check_width(width)
        super().__init__({
            "i": In(stream.Signature(FrameBeat(width=width))),
            "hdr": Out(stream.Signature(TcpHeaderInfo())),
            "payload": Out(stream.Signature(ShiftBeat(width=width))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        beat = self.i.payload
        head = Signal(8 * _CAPTURED)
        # beats of the frame before this one, saturating past the longest header (a frame
        # without a valid data offset never ends its header)
        last_index = _CAPTURED // W + 1
        index = Signal(range(last_index + 1))
        in_payload = Signal()                       # past the header: beats are payload
        pay_first = Signal()                        # the next payload beat is the first
        truncated = Signal()

        # the data offset, from the beat that carries it or from the register after it
        carries = index == _DATA_OFFSET // W
        offset_octet = Mux(carries, beat.data.word_select(_DATA_OFFSET % W, 8),
                           octet(head, _DATA_OFFSET))
        data_offset = offset_octet[4:]
        payload_at = Signal(range(_CAPTURED + 1))   # P: the payload's first octet
        m.d.comb += payload_at.eq(TCP_OFFSET + 4 * data_offset)
        header_ends = ((index >= _DATA_OFFSET // W) & (data_offset >= MIN_DATA_OFFSET)
                       & (index == (payload_at - 1) // W) & (beat.n > (payload_at - 1) % W))
        skip = payload_at % W
        here = header_ends & (skip != 0) & (beat.n > skip)   # payload lanes in this beat

        self._outputs(m, head, truncated)
        take = self.i.valid & self.i.ready
        with m.If(self.hdr.ready):
            m.d.sync += self.hdr.valid.eq(0)
        with m.If(in_payload):
            m.d.comb += [self.i.ready.eq(self.payload.ready), self.payload.valid.eq(self.i.valid),
                         self.payload.payload.first.eq(pay_first)]
            with m.If(take):
                m.d.sync += pay_first.eq(0)
                with m.If(beat.last):
                    m.d.sync += [in_payload.eq(0), index.eq(0)]
        with m.Else():
            m.d.comb += [self.i.ready.eq(~self.hdr.valid & (self.payload.ready | ~here)),
                         self.payload.valid.eq(self.i.valid & ~self.hdr.valid & here),
                         self.payload.payload.first.eq(1),
                         self.payload.payload.skip.eq(skip)]
            # the beat under offer is latched whether or not it is taken (again, the same
            # octets at the same index, until it is): the handshake stays off the
            # enables of the header's octets
            with m.If(self.i.valid & ~self.hdr.valid):
                capture(m, head, _CAPTURED, beat, index, W)
            with m.If(take):
                m.d.sync += index.eq(Mux(index == last_index, index, index + 1))
                with m.If(header_ends | beat.last):
                    m.d.sync += [self.hdr.valid.eq(1), truncated.eq(~header_ends)]
                with m.If(beat.last):
                    m.d.sync += index.eq(0)
                with m.Elif(header_ends):
                    m.d.sync += [in_payload.eq(1), pay_first.eq(~here)]
        for name in ("data", "n", "last"):
            m.d.comb += getattr(self.payload.payload, name).eq(getattr(beat, name))
        return m

    def _outputs(self, m, head, truncated):
        """``hdr``'s fields from the latched octets."""
        hdr = self.hdr.payload
        tcp = TCP_OFFSET
        data_offset = octet(head, _DATA_OFFSET)[4:]
        header_len = Signal(range(MAX_TCP_HEADER_LEN + 1))
        m.d.comb += header_len.eq(4 * data_offset)
        flags = octet(head, tcp + 13)
        m.d.comb += [
            hdr.src_ip.eq(field(head, _SRC_IP, 4)),
            hdr.src_port.eq(field(head, tcp, 2)),
            hdr.dst_port.eq(field(head, tcp + 2, 2)),
            hdr.seq.eq(field(head, tcp + 4, 4)),
            hdr.ack.eq(field(head, tcp + 8, 4)),
            hdr.flags.as_value().eq(flags),
            hdr.window.eq(field(head, tcp + 14, 2)),
            hdr.options.eq(head[8 * (tcp + TCP_HEADER_LEN):]),
            hdr.truncated.eq(truncated),
        ]
        with m.If(~truncated):
            m.d.comb += [
                hdr.options_len.eq(header_len - TCP_HEADER_LEN),
                hdr.length.eq(field(head, _TOTAL_LENGTH, 2) - IPV4_HEADER_LEN - header_len),
            ]
