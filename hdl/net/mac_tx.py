"""Transmit half of the Ethernet MAC: frames in, GMII octets out."""

from amaranth.hdl import Module, Signal
from amaranth.lib import crc, stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.net import FCS_LEN, IFG_LEN, MIN_FRAME_LEN, PREAMBLE, PREAMBLE_LEN, SFD

from .gmii import GmiiTx
from .layouts import FrameBeat

__all__ = ["MacTx"]


class MacTx(wiring.Component):
    """Transmit MAC for a GMII octet stream (1 Gb/s): preamble and SFD, the frame, zero
    padding up to 60 octets, the FCS (``amaranth.lib.crc``, ``CRC32_ETHERNET``, least
    significant octet first), then at least 12 idle octets (the inter-frame gap).

    Runs in the PHY's transmit clock domain (written as ``sync``), one octet per cycle.

    What it needs from its source: once the first octet of a frame has been taken, the
    octets up to ``last`` are valid back to back. A store-and-forward buffer in front
    (:class:`~rnic.hdl.net.frame_buffer.FrameBuffer` with ``overflow="wait"``, as in
    :class:`~rnic.hdl.net.ethernet_port.EthernetPort`) guarantees that. If the source does
    stall inside a frame, the frame is cut short with ``tx_er`` high on its last octet on
    the wire (the PHY sends an error symbol and the receiver drops it), the rest of the
    frame is taken and thrown away, and the gap follows. An octet without ``first`` while
    no frame is open is taken and thrown away.

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width=1)))
        Frames without FCS, ``n`` ignored (one octet a beat).
    gmii : Out(GmiiTx)
        To the PHY adapter; registered.
    sent : Out(1)
        One-cycle pulse when a frame has been sent in full (with its FCS).

    Latency: the first preamble octet is on ``gmii`` 1 cycle after a frame's first
    octet is valid on ``i`` (if the gap has passed); that octet itself follows 8 cycles
    later. Throughput: line rate, 8 + max(60, L) + 4 + 12 cycles for a frame of L octets.
    """

    i: In(stream.Signature(FrameBeat(width=1)))
    gmii: Out(GmiiTx)
    sent: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.crc = fcs = crc.catalog.CRC32_ETHERNET(8).create()
        step = Signal(range(max(PREAMBLE_LEN + 1, IFG_LEN, FCS_LEN)))   # octet within a phase
        length = Signal(range(MIN_FRAME_LEN + 1))                  # frame octets, saturating
        txd, tx_en, tx_er = self.gmii.txd, self.gmii.tx_en, self.gmii.tx_er
        beat = self.i.payload

        m.d.sync += [tx_en.eq(0), tx_er.eq(0), txd.eq(0), self.sent.eq(0)]
        with m.FSM(name="tx_state"):
            with m.State("IDLE"):
                with m.If(self.i.valid & ~beat.first):
                    m.d.comb += self.i.ready.eq(1)
                with m.Elif(self.i.valid):
                    m.d.comb += fcs.start.eq(1)
                    m.d.sync += [tx_en.eq(1), txd.eq(PREAMBLE), step.eq(1), length.eq(0)]
                    m.next = "PREAMBLE"
            with m.State("PREAMBLE"):
                m.d.sync += [tx_en.eq(1), step.eq(step + 1)]
                with m.If(step == PREAMBLE_LEN):
                    m.d.sync += txd.eq(SFD)
                    m.next = "FRAME"
                with m.Else():
                    m.d.sync += txd.eq(PREAMBLE)
            with m.State("FRAME"):
                m.d.comb += self.i.ready.eq(1)
                m.d.sync += tx_en.eq(1)
                with m.If(self.i.valid):
                    m.d.comb += [fcs.valid.eq(1), fcs.data.eq(beat.data)]
                    m.d.sync += txd.eq(beat.data)
                    with m.If(length != MIN_FRAME_LEN):
                        m.d.sync += length.eq(length + 1)
                    with m.If(beat.last):
                        m.d.sync += step.eq(0)
                        with m.If(length + 1 < MIN_FRAME_LEN):
                            m.next = "PAD"
                        with m.Else():
                            m.next = "FCS"
                with m.Else():
                    m.d.sync += tx_er.eq(1)
                    m.next = "ABORT"
            with m.State("PAD"):
                m.d.comb += [fcs.valid.eq(1), fcs.data.eq(0)]
                m.d.sync += [tx_en.eq(1), txd.eq(0), length.eq(length + 1)]
                with m.If(length == MIN_FRAME_LEN - 1):
                    m.next = "FCS"
            with m.State("FCS"):
                m.d.sync += [tx_en.eq(1), txd.eq(fcs.crc.word_select(step[:2], 8)),
                             step.eq(step + 1)]
                with m.If(step == FCS_LEN - 1):
                    m.d.sync += [step.eq(0), self.sent.eq(1)]
                    m.next = "GAP"
            with m.State("ABORT"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid & beat.last):
                    m.d.sync += step.eq(0)
                    m.next = "GAP"
            with m.State("GAP"):
                m.d.sync += step.eq(step + 1)
                with m.If(step == IFG_LEN - 1):
                    m.next = "IDLE"
        return m
