"""One Ethernet port: GMII in the PHY clock domains, W-octet frame streams in the core's."""

from amaranth.hdl import Cat, DomainRenamer, Module, Mux
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width
from rnic.host.spec.net import MAX_FRAME_LEN

from ..stream_slice import StreamSlice
from .frame_buffer import FrameBuffer, check_depth
from .gmii import GmiiRx, GmiiTx
from .layouts import RX_COUNTERS, FrameBeat, RxDrop
from .mac_rx import MacRx
from .mac_tx import MacTx
from .width import BeatsToOctets, OctetsToBeats

__all__ = ["EthernetPort"]

#: Entries of the clock-crossing FIFOs of the frame beats and of the verdicts.
CDC_DEPTH = 16


class EthernetPort(wiring.Component):
    """A 1 Gb/s Ethernet MAC with its buffers, clock-domain crossings and width converters.

    Receive: ``gmii_rx`` → :class:`~rnic.hdl.net.mac_rx.MacRx` →
    :class:`~rnic.hdl.net.frame_buffer.FrameBuffer` (``rx_depth`` octets, ``"drop"``) →
    :class:`~rnic.hdl.stream_slice.StreamSlice` →
    :class:`~rnic.hdl.net.width.OctetsToBeats` → ``AsyncFIFO`` → ``rx``. Only good frames
    reach ``rx``, whole and in order; a frame that finds the buffer full (``rx`` stalled)
    is dropped as a whole and counted as ``OVERFLOW``.

    Transmit: ``tx`` → ``AsyncFIFO`` → :class:`~rnic.hdl.net.width.BeatsToOctets` →
    :class:`~rnic.hdl.stream_slice.StreamSlice` →
    :class:`~rnic.hdl.net.frame_buffer.FrameBuffer` (``tx_depth`` octets, ``"wait"``) →
    :class:`~rnic.hdl.stream_slice.StreamSlice` → :class:`~rnic.hdl.net.mac_tx.MacTx` →
    ``gmii_tx``. The buffer holds a frame until all
    of it is in, so ``tx`` may stall or idle inside a frame; a frame longer than
    ``tx_depth`` is thrown away (counted in ``tx_dropped``).

    Clock domains: ``sync`` (the core: ``rx``, ``tx``, config and counters), ``eth_rx``
    (the PHY's receive clock: ``gmii_rx``) and ``eth_tx`` (the transmit clock:
    ``gmii_tx``), each with its own reset; the two Ethernet domains may be driven by one
    clock (plain GMII in simulation). The core clock must be at least 125 MHz / W for line
    rate, and above 125 MHz / 20 so that no verdict is lost on its way to the counters.

    Parameters
    ----------
    width : int
        Octets per beat on ``rx``/``tx``: one of :data:`rnic.host.spec.limits.WIDTHS`.
    rx_depth, tx_depth : int
        Octets of the receive and transmit frame buffers (powers of 2). The transmit
        buffer sends at line rate when it holds two frames (the one on the wire and the
        next): at least 2 x 1514 octets, hence 4096.

    Ports
    -----
    gmii_rx : In(GmiiRx)
        In ``eth_rx``.
    gmii_tx : Out(GmiiTx)
        In ``eth_tx``.
    rx : Out(stream.Signature(FrameBeat(width=W)))
        Received good frames, without FCS, from the destination address on.
    tx : In(stream.Signature(FrameBeat(width=W)))
        Frames to send, without FCS (shorter ones are padded to 60 octets).
    mac : In(48)
        The NIC's address, the first octet on the wire in bits 47..40. Quasi-static.
    max_len : In(16), init 1514
        Longest frame accepted, without FCS. Quasi-static.
    rx_counts : Out(ArrayLayout(32, 6))
        Receive counters indexed by :class:`~rnic.hdl.net.layouts.RxDrop` value: ``NONE``
        good frames, then ``FCS``, ``RUNT``, ``GIANT``, ``OTHER_MAC``, ``OVERFLOW``; they
        wrap at 2**32 and are zeroed by the ``sync`` reset.
    tx_frames, tx_dropped : Out(32)
        Frames sent, and frames thrown away for being longer than ``tx_depth``.
    rx_events : Out(6), tx_events : Out(2)
        The events those counters count, as strobes (for counters kept elsewhere, e.g.
        :class:`~rnic.hdl.counter_memory.CounterMemory`; the counters above go unused
        then, and synthesis removes them): ``rx_events`` bit ``k`` one frame of the
        ``rx_counts[k]`` kind (registered), ``tx_events`` bit 0 a frame sent, bit 1 a frame
        dropped; in the cycle before the counter shows it.

    Latency (125 MHz GMII, 100 MHz core; approximate, as frames cross clock domains):
    store-and-forward both ways. A received frame's first beat is on ``rx`` about W + 11
    ``eth_rx`` cycles after its last FCS octet on ``gmii_rx`` (the first beat waits for W
    octets from the buffer). A frame offered on an idle ``tx`` starts on ``gmii_tx``
    (first preamble octet) about L + 13 ``eth_tx`` cycles after its first beat, L its
    length (its octets enter the transmit buffer at one a cycle). Throughput: line rate
    both ways, minimum gap on ``gmii_tx``.
    """

    def __init__(self, *, width, rx_depth=4096, tx_depth=4096):
        self._width = check_width(width)
        self._rx_depth = rx_depth
        self._tx_depth = tx_depth
        check_depth(rx_depth)
        check_depth(tx_depth)
        super().__init__({
            "gmii_rx": In(GmiiRx),
            "gmii_tx": Out(GmiiTx),
            "rx": Out(stream.Signature(FrameBeat(width=width))),
            "tx": In(stream.Signature(FrameBeat(width=width))),
            "mac": In(48),
            "max_len": In(16, init=MAX_FRAME_LEN),
            "rx_counts": Out(data.ArrayLayout(32, len(RX_COUNTERS))),
            "tx_frames": Out(32),
            "tx_dropped": Out(32),
            "rx_events": Out(len(RX_COUNTERS)),
            "tx_events": Out(2),
        })

    def elaborate(self, platform):
        m = Module()
        self._receive(m)
        self._transmit(m)
        return m

    def _receive(self, m):
        rx_domain = DomainRenamer("eth_rx")
        m.submodules.mac_rx = mac_rx = rx_domain(MacRx())
        m.submodules.rx_buffer = buffer = rx_domain(FrameBuffer(depth=self._rx_depth))
        m.submodules.rx_pack = pack = rx_domain(OctetsToBeats(width=self._width))
        beat_bits = FrameBeat(width=self._width).size
        m.submodules.rx_cdc = beats = fifo.AsyncFIFO(width=beat_bits, depth=CDC_DEPTH,
                                                     w_domain="eth_rx", r_domain="sync")
        m.submodules.rx_verdict_cdc = verdicts = fifo.AsyncFIFO(
            width=RxDrop.as_shape().width, depth=CDC_DEPTH, w_domain="eth_rx", r_domain="sync")

        m.submodules.mac_sync = FFSynchronizer(self.mac, mac_rx.mac, o_domain="eth_rx")
        m.submodules.max_len_sync = FFSynchronizer(self.max_len, mac_rx.max_len,
                                                   o_domain="eth_rx", init=MAX_FRAME_LEN)
        wiring.connect(m, wiring.flipped(self.gmii_rx), mac_rx.gmii)
        m.d.comb += [buffer.i.valid.eq(mac_rx.o.valid), buffer.i.payload.eq(mac_rx.o.payload)]
        # a slice: the packer's ready comes from the crossing's write side (its pointer
        # synchronizer), and the buffer's read side decides on it
        m.submodules.rx_slice = cut = rx_domain(StreamSlice(FrameBeat(width=1)))
        wiring.connect(m, buffer.o, cut.i)
        wiring.connect(m, cut.o, pack.i)
        m.d.comb += [beats.w_data.eq(pack.o.payload), beats.w_en.eq(pack.o.valid),
                     pack.o.ready.eq(beats.w_rdy),
                     self.rx.payload.eq(beats.r_data), self.rx.valid.eq(beats.r_rdy),
                     beats.r_en.eq(self.rx.ready)]

        m.d.comb += [verdicts.w_data.eq(buffer.verdict.payload),
                     verdicts.w_en.eq(buffer.verdict.valid), verdicts.r_en.eq(1)]
        # the verdict's decode is registered: the FIFO's read side stays off the enables
        # of the counters (here, or wherever the strobes go)
        m.d.sync += self.rx_events.eq(0)
        with m.If(verdicts.r_rdy):
            with m.Switch(verdicts.r_data):
                for k in range(len(RX_COUNTERS)):
                    with m.Case(k):
                        m.d.sync += self.rx_events[k].eq(1)
        # (the counters count the strobes: one decode of the verdict for both)
        for k in range(len(RX_COUNTERS)):
            with m.If(self.rx_events[k]):
                m.d.sync += self.rx_counts[k].eq(self.rx_counts[k] + 1)

    def _transmit(self, m):
        tx_domain = DomainRenamer("eth_tx")
        beat_bits = FrameBeat(width=self._width).size
        m.submodules.tx_cdc = beats = fifo.AsyncFIFO(width=beat_bits, depth=CDC_DEPTH,
                                                     w_domain="sync", r_domain="eth_tx")
        m.submodules.tx_unpack = unpack = tx_domain(BeatsToOctets(width=self._width))
        m.submodules.tx_buffer = buffer = tx_domain(FrameBuffer(depth=self._tx_depth,
                                                                overflow="wait"))
        m.submodules.mac_tx = mac_tx = tx_domain(MacTx())
        m.submodules.tx_done_cdc = done = fifo.AsyncFIFO(width=2, depth=CDC_DEPTH,
                                                         w_domain="eth_tx", r_domain="sync")

        m.d.comb += [beats.w_data.eq(self.tx.payload), beats.w_en.eq(self.tx.valid),
                     self.tx.ready.eq(beats.w_rdy),
                     unpack.i.payload.eq(beats.r_data), unpack.i.valid.eq(beats.r_rdy),
                     beats.r_en.eq(unpack.i.ready)]
        # A register slice, so that the buffer's "full" (its pointers) does not reach the
        # clock-crossing FIFO's read side through the unpacker's ready.
        m.submodules.tx_slice = cut = tx_domain(StreamSlice(FrameBeat(width=1)))
        wiring.connect(m, unpack.o, cut.i)
        m.d.comb += [buffer.i.valid.eq(cut.o.valid), cut.o.ready.eq(buffer.i.ready),
                     buffer.i.payload.data.eq(cut.o.payload.data),
                     buffer.i.payload.first.eq(cut.o.payload.first),
                     buffer.i.payload.last.eq(cut.o.payload.last),
                     buffer.i.payload.drop.eq(RxDrop.NONE)]
        # The buffer's octets come straight out of its block RAM: a register slice before
        # the MAC's CRC.
        m.submodules.tx_out_slice = out = tx_domain(StreamSlice(FrameBeat(width=1)))
        wiring.connect(m, buffer.o, out.i)
        wiring.connect(m, out.o, mac_tx.i)
        wiring.connect(m, mac_tx.gmii, wiring.flipped(self.gmii_tx))

        # Sent frames (bit 0) and frames too long for the buffer (bit 1) to the counters.
        too_long = buffer.verdict.valid & (buffer.verdict.payload != RxDrop.NONE)
        m.d.comb += [done.w_en.eq(mac_tx.sent | too_long),
                     done.w_data.eq(Cat(mac_tx.sent, too_long)), done.r_en.eq(1)]
        # registered: the counters (and whatever counts the strobes) may be placed far
        # from the clock-crossing FIFO
        m.d.sync += self.tx_events.eq(Mux(done.r_rdy, done.r_data, 0))
        with m.If(self.tx_events[0]):
            m.d.sync += self.tx_frames.eq(self.tx_frames + 1)
        with m.If(self.tx_events[1]):
            m.d.sync += self.tx_dropped.eq(self.tx_dropped + 1)
