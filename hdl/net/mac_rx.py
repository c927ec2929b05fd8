"""Receive half of the Ethernet MAC: GMII octets in, frame octets with a verdict out."""

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import crc, stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.net import FCS_LEN, MAX_FRAME_LEN, MIN_FRAME_LEN, PREAMBLE, SFD

from ..compare import above
from .gmii import GmiiRx
from .layouts import RxDrop, RxOctet

__all__ = ["MacRx", "RX_DELAY"]

#: Octets the receive path holds back: the FCS (4) and the frame's last octet, which can
#: only be marked ``last`` once ``rx_dv`` has fallen.
RX_DELAY = FCS_LEN + 1

_COUNT_BITS = 16


class MacRx(wiring.Component):
    """Receive MAC for a GMII octet stream (1 Gb/s): finds the start of a frame, checks and
    strips its FCS, filters by destination, and passes every frame on with a verdict.

    Runs in the PHY's receive clock domain (written as ``sync``; the port renames it), one
    octet per cycle; the GMII source never stalls and neither does ``o``.

    A frame starts with any number of preamble octets (0x55) followed by the SFD (0xD5)
    while ``rx_dv`` is high; an octet that is neither while looking for the SFD makes the
    rest of that ``rx_dv`` burst be ignored (no output, no counter). The frame is the octets
    after the SFD until ``rx_dv`` falls; its last four are the FCS, checked with
    ``amaranth.lib.crc`` (``CRC32_ETHERNET``) and not passed on.

    Every frame that got past its SFD leaves on ``o`` as at least one octet, the ``last``
    one carrying the verdict ``drop`` (``NONE``: keep it), checked in this order:

    * ``RUNT``: fewer than 60 octets without the FCS (a frame of up to 4 octets after the
      SFD leaves as one octet of no meaning);
    * ``GIANT``: more than ``max_len`` octets without the FCS;
    * ``FCS``: the FCS does not match, or ``rx_er`` was high on any octet of the frame;
    * ``OTHER_MAC``: the destination is neither ``mac`` nor the broadcast address
      (multicast addresses are not accepted: no upper layer here needs them).

    Parameters: none.

    Ports
    -----
    gmii : In(GmiiRx)
        From the PHY adapter, registered once at the input.
    mac : In(48)
        The NIC's unicast address, the first octet on the wire in bits 47..40
        (``int.from_bytes(mac, "big")``). Quasi-static.
    max_len : In(16), init 1514
        Longest accepted frame without FCS. Quasi-static.
    o : Out(stream.Signature(RxOctet, always_ready=True))
        Frame octets (registered); never stalled.
    verdict : Out(stream.Signature(RxDrop, always_ready=True))
        One pulse per frame, in the same cycle as the frame's ``last`` octet on ``o``,
        with the same reason: the events the counters count.

    Latency: an octet of the frame leaves on ``o`` 7 cycles after it is on ``gmii``
    (input register, 5 octets held back, output register); the last octet and its verdict
    leave 2 cycles after ``rx_dv`` falls. Throughput: one octet per cycle.
    """

    gmii: In(GmiiRx)
    mac: In(48)
    max_len: In(16, init=MAX_FRAME_LEN)
    o: Out(stream.Signature(RxOctet(), always_ready=True))
    verdict: Out(stream.Signature(RxDrop, always_ready=True))

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = fcs = crc.catalog.CRC32_ETHERNET(8).create()

        rxd = Signal(8)
        dv = Signal()
        er = Signal()
        m.d.sync += [rxd.eq(self.gmii.rxd), dv.eq(self.gmii.rx_dv), er.eq(self.gmii.rx_er)]

        held = Array(Signal(8, name=f"held{k}") for k in range(RX_DELAY))   # held[0] newest
        count = Signal(_COUNT_BITS)            # octets after the SFD, saturating
        phy_error = Signal()
        ours = Signal()
        broadcast = Signal()
        mac_octets = Array(self.mac.word_select(5 - k, 8) for k in range(6))

        m.d.sync += [self.o.valid.eq(0), self.verdict.valid.eq(0)]
        m.d.comb += [fcs.data.eq(rxd), fcs.valid.eq(0), fcs.start.eq(0)]

        with m.FSM(name="rx_state"):
            with m.State("HUNT"):
                with m.If(dv & (rxd == SFD)):
                    m.d.comb += fcs.start.eq(1)
                    m.d.sync += [count.eq(0), phy_error.eq(0), ours.eq(1), broadcast.eq(1)]
                    m.next = "FRAME"
                with m.Elif(dv & (rxd != PREAMBLE)):
                    m.next = "IGNORE"
            with m.State("IGNORE"):
                with m.If(~dv):
                    m.next = "HUNT"
            with m.State("FRAME"):
                with m.If(dv):
                    m.d.comb += fcs.valid.eq(1)
                    m.d.sync += [held[0].eq(rxd)] + [held[k].eq(held[k - 1])
                                                     for k in range(1, RX_DELAY)]
                    with m.If(count != (1 << _COUNT_BITS) - 1):
                        m.d.sync += count.eq(count + 1)
                    m.d.sync += phy_error.eq(phy_error | er)
                    with m.If(~above(count, 5)):
                        m.d.sync += [ours.eq(ours & (rxd == mac_octets[count[:3]])),
                                     broadcast.eq(broadcast & (rxd == 0xFF))]
                    with m.If(above(count, RX_DELAY - 1)):
                        m.d.sync += [self.o.valid.eq(1),
                                     self.o.payload.eq(Cat(held[RX_DELAY - 1],
                                                           count == RX_DELAY, Const(0, 1),
                                                           Const(RxDrop.NONE, 4)))]
                with m.Else():
                    m.d.sync += [self.o.valid.eq(1), self.verdict.valid.eq(1),
                                 self.o.payload.data.eq(held[RX_DELAY - 1]),
                                 self.o.payload.first.eq(~above(count, RX_DELAY)),
                                 self.o.payload.last.eq(1)]
                    drop = self._verdict(m, count, phy_error | ~fcs.match_detected,
                                         ours | broadcast)
                    m.d.sync += [self.o.payload.drop.eq(drop), self.verdict.payload.eq(drop)]
                    m.next = "HUNT"
        return m

    def _verdict(self, m, count, bad_fcs, for_us):
        drop = Signal(RxDrop)
        with m.If(~above(count, MIN_FRAME_LEN + FCS_LEN - 1)):
            m.d.comb += drop.eq(RxDrop.RUNT)
        with m.Elif(count > self.max_len + FCS_LEN):
            m.d.comb += drop.eq(RxDrop.GIANT)
        with m.Elif(bad_fcs):
            m.d.comb += drop.eq(RxDrop.FCS)
        with m.Elif(~for_us):
            m.d.comb += drop.eq(RxDrop.OTHER_MAC)
        with m.Else():
            m.d.comb += drop.eq(RxDrop.NONE)
        return drop
