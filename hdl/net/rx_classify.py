"""Receive classification above the MAC: checks a frame's Ethernet, ARP, IPv4, ICMP and TCP
headers and checksums in the reference model's order and routes it whole to the ARP block,
the echo block or the TCP layer, or drops it with its reason."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rnic.host.spec.limits import check_width
from rnic.host.spec.net import (ARP_LEN, ETH_ADDR_LEN, ETH_HEADER_LEN, ICMP_HEADER_LEN,
                                IPV4_HEADER_LEN, IPV4_VERSION, ArpOp, EtherType, IcmpType,
                                IpProto, RxDrop as SpecRxDrop)
from rnic.host.spec.tcp import TCP_HEADER_LEN

from ..compare import above
from .checksum import SUM_BITS, beat_sum, folds_to_ones
from .l3_layouts import DropEvent, Route
from .layouts import FrameBeat, RxDrop
from .octets import capture, field, octet

__all__ = ["RxClassify", "HEAD_LEN", "CAPTURE_LEN"]

#: Octets of an ARP frame the classifier checks and routes: the Ethernet header and the ARP
#: packet (14 + 28), as many as the Ethernet, IPv4 and ICMP echo headers (14 + 20 + 8).
HEAD_LEN = ETH_HEADER_LEN + ARP_LEN
assert HEAD_LEN == ETH_HEADER_LEN + IPV4_HEADER_LEN + ICMP_HEADER_LEN

_IP = ETH_HEADER_LEN                       # offset of the IPv4 header in the frame
_L4 = ETH_HEADER_LEN + IPV4_HEADER_LEN     # offset of the IPv4 payload (ICMP, TCP)
_DATA_OFFSET = _L4 + 12                    # the TCP data offset: this octet's high nibble
_LEN_BITS = 17                             # frame offsets up to 14 + 65535
_PSEUDO_BITS = 19                          # the pseudo-header's sum: below 5 * 2**16
_VERDICTS = 16                             # frames the verdict queue holds

#: Octets of a frame the classifier latches: up to the TCP data offset (47), past the ARP
#: packet and the ICMP echo header (HEAD_LEN), so that a segment's header length is
#: checked with the other headers.
CAPTURE_LEN = _DATA_OFFSET + 1
assert CAPTURE_LEN >= HEAD_LEN


class _Verdict(data.StructLayout):
    def __init__(self):
        super().__init__({"route": Route, "beats": 16, "out_len": 16})


def check_depth(name, depth, width):
    """``depth`` if it is a power of 2 that holds two frames of 1514 octets, else
    ValueError naming it."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 4096 \
            or depth & (depth - 1):
        raise ValueError(f"{name} must be a power of 2 of at least 4096, not {depth!r}")
    return depth


class RxClassify(wiring.Component):
    """Checks each received frame and routes it, whole, to one of three outputs or drops it.

    The frame is written into a store-and-forward buffer (``depth`` octets,
    ``amaranth.lib.memory``) while its first 47 octets (:data:`CAPTURE_LEN`, up to the TCP
    data offset) are latched and two Internet checksums run over it, W octets per cycle: the
    IPv4 header's (octets 14..33) and the IPv4 payload's (octet 34 to the end of the IPv4
    packet, the total length; Ethernet padding is left out), which is the ICMP message's
    sum or, with the TCP pseudo-header's sum (the addresses at octets 26 and 30, protocol
    6, total length - 20) added, the TCP segment's. The headers are checked in the cycle
    after the frame's last beat and the checksums in the cycle after that; the verdict is
    the one of :class:`rnic.host.model.network_layer.NicNetModel` (the first check that
    fails names the reason):

    ``RUNT`` (under 14 octets; the MAC never passes one), ``ETHERTYPE`` (neither IPv4 nor
    ARP, a VLAN tag included), for ARP ``ARP_OTHER`` (under 42 octets, not IPv4 over
    Ethernet, an operation other than request/reply, a target IP not ``ip``), for IPv4
    ``IP_HEADER`` (under 34 octets, version not 4, IHL not 5, total length below 20 or
    beyond the frame), ``IP_CHECKSUM``, ``IP_FRAGMENT`` (MF or an offset), ``IP_OTHER``
    (destination not ``ip``), then TCP checked for ``TCP_HEADER`` (a segment under 20
    octets, a data offset below 5, a header of data offset * 4 octets longer than the
    segment) and ``TCP_CHECKSUM`` (over the pseudo-header and the segment, an odd last
    octet padded with a zero) and routed to ``tcp``, ICMP checked for ``ICMP_OTHER`` (under
    8 octets, checksum, type not echo request) and routed to ``echo``, and any other
    protocol is ``IP_PROTOCOL``. The MAC has already dropped bad FCS, runts, giants and
    other unicast MACs.

    A dropped frame is skipped in the buffer in one cycle and counted with one pulse on
    ``drop``; it never disturbs the frames before or after it.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    depth : int
        Octets of the buffer, a power of 2 of at least 4096 (two longest frames). A frame
        longer than the buffer would stall ``i`` for good: the MAC's ``max_len`` must stay
        below ``depth``.

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width)))
        Frames from the MAC (no FCS).
    arp : Out(stream.Signature(FrameBeat(width)))
        ARP requests and replies for ``ip`` that are IPv4 over Ethernet: the first 42
        octets of the frame (the Ethernet header and the ARP packet, no padding).
    echo : Out(stream.Signature(FrameBeat(width)))
        ICMP echo requests for ``ip`` with good IPv4 header and ICMP checksums: the frame up
        to the end of the IPv4 packet (``14 + total length`` octets, no padding).
    tcp : Out(stream.Signature(FrameBeat(width)))
        IPv4 TCP packets for ``ip`` whose IPv4 header is good (version 4, IHL 5, header
        checksum, not a fragment) and whose TCP segment has a good checksum and a header
        that fits it (at least 20 octets, data offset * 4 at most the segment's length):
        the frame from its destination MAC to the end of the IPv4 packet, ``14 + total
        length`` octets, Ethernet padding removed. The TCP segment starts at octet 34, its
        payload at ``34 + 4 * data offset``.
    drop : Out(DropEvent)
        ``valid`` for one cycle per dropped frame, ``reason`` why: the counter events.
    ip : In(32)
        The NIC's IPv4 address, big-endian (``int.from_bytes(addr.packed, "big")``).
        Quasi-static.

    Latency: the first beat of a routed frame is valid on its output 5 cycles after its
    last beat was taken on ``i`` (headers, checksums, verdict register, queue, memory read).
    Throughput: one beat per cycle on ``i``; an output sends one beat per cycle with one idle cycle between frames
    (a dropped frame takes one cycle); ``i`` stalls only while the buffer is full. Any
    output may be stalled at any time: it holds only the frames behind it.
    """

    def __init__(self, *, width, depth=4096):
        self._width = check_width(width)
        self._depth = check_depth("depth", depth, width)
        beat = stream.Signature(FrameBeat(width=width))
        super().__init__({
            "i": In(beat),
            "arp": Out(beat),
            "echo": Out(beat),
            "tcp": Out(beat),
            "drop": Out(DropEvent),
            "ip": In(32),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        rows = self._depth // W
        abits = ceil_log2(rows)
        m.submodules.buffer = buf = memory.Memory(shape=8 * W, depth=rows, init=[])
        m.submodules.verdicts = verdicts = fifo.SyncFIFOBuffered(width=_Verdict().size,
                                                                 depth=_VERDICTS)
        wr_ptr = Signal(abits + 1)
        rd_ptr = Signal(abits + 1)
        self._write(m, buf, verdicts, wr_ptr, rd_ptr, rows, abits)
        self._read(m, buf, verdicts, rd_ptr, abits)
        return m

    # -- write side: buffer, header, checksums, verdict -------------------------------------

    def _write(self, m, buf, verdicts, wr_ptr, rd_ptr, rows, abits):
        W = self._width
        beat = self.i.payload
        index = Signal(16)                      # beats of the frame before this one
        # a lane's offset in the frame: the beat's index above the lane's number
        lanes = [Cat(Const(j, ceil_log2(W)), index)[:_LEN_BITS] for j in range(W)]
        offset = lanes[0]
        head = Signal(8 * CAPTURE_LEN)
        total_length = field(head, _IP + 2, 2)
        ip_end = _IP + total_length

        room = (wr_ptr - rd_ptr)[:abits + 1] < rows
        # (three verdicts may be on their way into the queue: see _decide)
        m.d.comb += self.i.ready.eq(room & (verdicts.level < _VERDICTS - 3))
        take = self.i.valid & self.i.ready

        wp = buf.write_port()
        m.d.comb += [wp.addr.eq(wr_ptr[:abits]), wp.data.eq(beat.data), wp.en.eq(take)]

        # (area: compares with constants as LUT logic, and one subtract for the IP end in
        # place of a compare per lane: carry chains otherwise)
        to_end = Signal(signed(_LEN_BITS + 1))      # octets of the IP packet from the beat on
        m.d.comb += to_end.eq(ip_end - offset)
        ip_keep = Cat(*(above(p, _IP - 1) & ~above(p, _L4 - 1) for p in lanes))
        payload_keep = Cat(*(above(p, _L4 - 1) & ~to_end[-1] & above(to_end[:-1], j)
                             & (j < beat.n) for j, p in enumerate(lanes)))

        # The checksums run one cycle behind the beats: a beat and its lanes' keep flags
        # are taken into registers and added in the next cycle.
        sum_data = Signal(8 * W)
        sum_ip_keep = Signal(W)
        sum_payload_keep = Signal(W)
        sum_first = Signal()
        sum_pending = Signal()
        ip_acc = Signal(SUM_BITS)
        payload_acc = Signal(SUM_BITS)
        m.d.sync += sum_pending.eq(0)
        with m.If(sum_pending):
            m.d.sync += [ip_acc.eq(Mux(sum_first, 0, ip_acc)
                                   + beat_sum(sum_data, sum_ip_keep, W)),
                         payload_acc.eq(Mux(sum_first, 0, payload_acc)
                                        + beat_sum(sum_data, sum_payload_keep, W))]

        # The finished frame's headers are checked in the cycle after its last beat (while
        # the next frame's first beat may come in: head only changes at the end of that
        # cycle); its checksums in the cycle after that.
        decide = Signal()
        fin_len = Signal(_LEN_BITS)
        fin_beats = Signal(16)
        m.d.sync += decide.eq(0)
        with m.If(take):
            capture(m, head, CAPTURE_LEN, beat, index, W)
            m.d.sync += [wr_ptr.eq(wr_ptr + 1), index.eq(index + 1),
                         sum_data.eq(beat.data), sum_ip_keep.eq(ip_keep),
                         sum_payload_keep.eq(payload_keep), sum_first.eq(index == 0),
                         sum_pending.eq(1)]
            with m.If(beat.last):
                m.d.sync += [index.eq(0), decide.eq(1), fin_len.eq(offset + beat.n),
                             fin_beats.eq(index + 1)]
        self._decide(m, verdicts, decide, head, fin_len, fin_beats, ip_acc, payload_acc)

    def _decide(self, m, verdicts, decide, head, fin_len, fin_beats, ip_acc, payload_acc):
        """Three stages: the verdict from the headers with every checksum taken as good,
        which checksum decides it, and the TCP pseudo-header's sum; then the checksums'
        verdict; then into the queue."""
        route, reason, out_len, matters = self._verdict(m, head, fin_len)
        checked = Signal()
        pre = Signal(_Verdict())
        pre_reason = Signal(RxDrop)
        pre_matters = {name: Signal(name=f"pre_{name}_matters") for name in matters}
        pre_pseudo = Signal(_PSEUDO_BITS)
        m.d.sync += checked.eq(decide)
        with m.If(decide):
            m.d.sync += [pre.route.eq(route), pre.beats.eq(fin_beats), pre.out_len.eq(out_len),
                         pre_reason.eq(reason), pre_pseudo.eq(self._pseudo_sum(head))]
            m.d.sync += [pre_matters[name].eq(value) for name, value in matters.items()]
        # (timing: the pseudo-header's sum comes registered, so this stage adds one carry
        # chain to the accumulator ahead of the compare)
        tcp_sum = Signal(SUM_BITS)
        m.d.comb += tcp_sum.eq(payload_acc + pre_pseudo)
        verdict = Signal(_Verdict())
        final_reason = Signal(RxDrop)
        m.d.comb += [verdict.eq(pre), final_reason.eq(pre_reason)]
        # (at most one of icmp and tcp matters: they are the routes ECHO and TCP)
        with m.If(pre_matters["ip"] & ~folds_to_ones(ip_acc)):
            m.d.comb += [verdict.route.eq(Route.DROP), final_reason.eq(SpecRxDrop.IP_CHECKSUM)]
        with m.Elif(pre_matters["icmp"] & ~folds_to_ones(payload_acc)):
            m.d.comb += [verdict.route.eq(Route.DROP), final_reason.eq(SpecRxDrop.ICMP_OTHER)]
        with m.Elif(pre_matters["tcp"] & ~folds_to_ones(tcp_sum)):
            m.d.comb += [verdict.route.eq(Route.DROP),
                         final_reason.eq(SpecRxDrop.TCP_CHECKSUM)]
        # the verdict is registered on its way into the queue (timing: the checksum's
        # carry chain and fold stay off the queue's memory)
        into_queue = Signal(_Verdict())
        queued = Signal()
        queued_reason = Signal(RxDrop)
        m.d.sync += [into_queue.eq(verdict), queued.eq(checked),
                     queued_reason.eq(final_reason)]
        m.d.comb += [verdicts.w_data.eq(into_queue), verdicts.w_en.eq(queued),
                     self.drop.valid.eq(queued & (into_queue.route == Route.DROP)),
                     self.drop.reason.eq(queued_reason)]

    @staticmethod
    def _pseudo_sum(head):
        """The binary sum of the TCP pseudo-header's 16-bit words (RFC 9293: source and
        destination address, zero and protocol 6, the segment's length: total length -
        20), from ``head``. Meaningful where the TCP checks pass (total length of 40 or
        more); the payload's sum plus this one folds to 0xFFFF for a good checksum."""
        total_length = field(head, _IP + 2, 2)
        addresses = ((field(head, _IP + 12, 2) + field(head, _IP + 14, 2))
                     + (field(head, _IP + 16, 2) + field(head, _IP + 18, 2)))
        # (timing: the protocol and the IPv4 header's 20 octets in one constant, -14, keep
        # the tree three adders deep. The sum is negative only for a total length below
        # 14, where the TCP checks fail; the register keeps its low bits.)
        return addresses + (total_length + (IpProto.TCP - IPV4_HEADER_LEN))

    def _verdict(self, m, head, length):
        """Route, drop reason and output length of the frame in ``head``, by the model's
        rules (see the class docstring), with its checksums taken as good; and which
        checksum would change that, ``{"ip", "icmp", "tcp": 1-bit}``: the IPv4 header's,
        the ICMP message's or the TCP segment's."""
        route = Signal(Route)
        reason = Signal(RxDrop)
        out_len = Signal(16)
        matters = {name: Signal(name=f"{name}_sum_matters") for name in ("ip", "icmp", "tcp")}
        ethertype = field(head, 12, 2)
        total_length = field(head, _IP + 2, 2)
        version_ihl = field(head, _IP, 1)
        flags_offset = field(head, _IP + 6, 2)
        arp_ok = ((length >= HEAD_LEN) & (field(head, 14, 2) == 1)
                  & (field(head, 16, 2) == EtherType.IPV4)
                  & (field(head, 18, 1) == ETH_ADDR_LEN) & (field(head, 19, 1) == 4)
                  & ((field(head, 20, 2) == ArpOp.REQUEST) | (field(head, 20, 2) == ArpOp.REPLY))
                  & (field(head, 38, 4) == self.ip))
        ip_header_ok = ((length >= _L4) & (version_ihl == (IPV4_VERSION << 4 | 5))
                        & (total_length >= IPV4_HEADER_LEN)
                        & (_IP + total_length <= length))
        icmp_ok = ((total_length >= IPV4_HEADER_LEN + ICMP_HEADER_LEN)
                   & (field(head, _L4, 1) == IcmpType.ECHO_REQUEST))
        # A segment shorter than 20 octets fails the second check whatever the data offset
        # octet holds (from this frame or, past its end, an earlier one): a data offset of
        # 5 or more is a header of 20 octets or more.
        data_offset = octet(head, _DATA_OFFSET)[4:]
        tcp_ok = ((data_offset >= TCP_HEADER_LEN // 4)
                  & (total_length >= IPV4_HEADER_LEN + Cat(Const(0, 2), data_offset)))

        def drop(why):
            m.d.comb += [route.eq(Route.DROP), reason.eq(why)]

        m.d.comb += out_len.eq(_IP + total_length)
        with m.If(length < ETH_HEADER_LEN):
            drop(SpecRxDrop.RUNT)
        with m.Elif(ethertype == EtherType.ARP):
            m.d.comb += out_len.eq(HEAD_LEN)
            with m.If(arp_ok):
                m.d.comb += route.eq(Route.ARP)
            with m.Else():
                drop(SpecRxDrop.ARP_OTHER)
        with m.Elif(ethertype == EtherType.IPV4):
            with m.If(~ip_header_ok):
                drop(SpecRxDrop.IP_HEADER)
            with m.Else():
                m.d.comb += matters["ip"].eq(1)
                with m.If(flags_offset[:14] != 0):       # MF and the 13-bit offset
                    drop(SpecRxDrop.IP_FRAGMENT)
                with m.Elif(field(head, _IP + 16, 4) != self.ip):
                    drop(SpecRxDrop.IP_OTHER)
                with m.Elif(field(head, _IP + 9, 1) == IpProto.TCP):
                    with m.If(tcp_ok):
                        m.d.comb += [route.eq(Route.TCP), matters["tcp"].eq(1)]
                    with m.Else():
                        drop(SpecRxDrop.TCP_HEADER)
                with m.Elif(field(head, _IP + 9, 1) == IpProto.ICMP):
                    with m.If(icmp_ok):
                        m.d.comb += [route.eq(Route.ECHO), matters["icmp"].eq(1)]
                    with m.Else():
                        drop(SpecRxDrop.ICMP_OTHER)
                with m.Else():
                    drop(SpecRxDrop.IP_PROTOCOL)
        with m.Else():
            drop(SpecRxDrop.ETHERTYPE)
        return route, reason, out_len, matters

    # -- read side: route the oldest decided frame ------------------------------------------

    def _read(self, m, buf, verdicts, rd_ptr, abits):
        W = self._width
        rp = buf.read_port()
        verdict = data.View(_Verdict(), verdicts.r_data)
        remaining = Signal(16)                  # beats of the current frame still to read
        frame_end = Signal(abits + 1)
        last_n = Signal(range(W + 1))
        route = Signal(Route)
        first = Signal()
        out_valid = Signal()
        out_route = Signal(Route)
        out = Signal(FrameBeat(width=W))
        outputs = {Route.ARP: self.arp, Route.ECHO: self.echo, Route.TCP: self.tcp}

        selected_ready = Signal()
        for key, port in outputs.items():
            m.d.comb += [port.valid.eq(out_valid & (out_route == key)),
                         port.payload.eq(out), port.payload.data.eq(rp.data)]
            with m.If(out_route == key):
                m.d.comb += selected_ready.eq(port.ready)
        advance = ~out_valid | selected_ready
        m.d.comb += [rp.addr.eq(rd_ptr[:abits]), rp.en.eq(advance & (remaining != 0))]

        with m.If(advance):
            with m.If(remaining != 0):
                is_last = remaining == 1
                m.d.sync += [out_valid.eq(1), out_route.eq(route), out.first.eq(first),
                             out.last.eq(is_last), out.n.eq(Mux(is_last, last_n, W)),
                             first.eq(0), remaining.eq(remaining - 1),
                             rd_ptr.eq(Mux(is_last, frame_end, rd_ptr + 1))]
            with m.Else():
                m.d.sync += out_valid.eq(0)
                m.d.comb += verdicts.r_en.eq(1)
                with m.If(verdicts.r_rdy):
                    with m.If(verdict.route == Route.DROP):
                        m.d.sync += rd_ptr.eq(rd_ptr + verdict.beats)
                    with m.Else():
                        shift = ceil_log2(W)
                        m.d.sync += [remaining.eq((verdict.out_len + W - 1) >> shift),
                                     last_n.eq(((verdict.out_len - 1) & (W - 1)) + 1),
                                     frame_end.eq(rd_ptr + verdict.beats),
                                     route.eq(verdict.route), first.eq(1)]
