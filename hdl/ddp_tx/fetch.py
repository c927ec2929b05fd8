"""The payload reads of the segmenter over AXI4 (AR and R). See :class:`PayloadFetch`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..axi import AXI4ReadSignature
from ..beat import check_width
from ..stream_slice import StreamSlice
from ..synth_hints import SyncFIFOBuffered
from .layouts import FetchStart

__all__ = ["PayloadFetch", "BURST", "R_FIFO_DEPTH"]

#: AXI beats per AR burst at most.
BURST = 16
#: Memory words the R FIFO holds.
R_FIFO_DEPTH = 32


class PayloadFetch(wiring.Component):
    """Reads a segment's payload words from host memory: INCR bursts of at most
    :data:`BURST` full-width beats, none crossing 4 KiB, into a :data:`R_FIFO_DEPTH`-word FIFO.

    Parameters
    ----------
    width : int
        Datapath width W in octets (the AXI data width).
    addr_width : int
        AXI address width AW.

    Ports
    -----
    start : In(stream(FetchStart))
        Read ``words`` memory words from ``addr`` on (always taken; a start replaces the
        bursts not yet requested, so it comes after the last AR of the previous segment).
    m_axi : Out(AXI4ReadSignature)
        ``rresp`` is not looked at; ``rready`` while the FIFO has room.
    words : Out(stream(unsigned(8 * W)))
        The memory words in order.
    busy : Out(1)
        Bursts of the segment are still to be requested (a ``start`` now would replace
        them).

    Latency, throughput and packet boundaries
    -----------------------------------------
    ``arvalid`` rises in the cycle after ``start`` and stays high, burst after burst, until
    the segment's words are all requested (the AR side keeps bursts in flight for the whole
    segment, limited by ``arready`` and, through ``rready``, the FIFO's room). A word is on
    ``words`` 3 cycles after it is taken on R (the FIFO's storage, its output register, then
    a register slice: timing, the FIFO's valid fanned out into the consumer's handshake
    from where the FIFO sits, next to R). The burst length and the address step are
    conditions on registers (the words left, the words to the next 4 KiB boundary), each
    register's next value for each case computed beside them and selected late. Segments
    are not delimited on ``words``: the consumer knows their word counts.
    """

    def __init__(self, *, width, addr_width):
        check_width(width)
        self.width = width
        self.addr_width = addr_width
        super().__init__({
            "start": In(stream.Signature(FetchStart(width=width, addr_width=addr_width), always_ready=True)),
            "m_axi": Out(AXI4ReadSignature(addr_width=addr_width, data_width=8 * width)),
            "words": Out(stream.Signature(8 * width)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, LW, AW = self.width, exact_log2(self.width), self.addr_width
        axi = self.m_axi
        rf = SyncFIFOBuffered(width=8 * W, depth=R_FIFO_DEPTH)
        m.submodules.rfifo = rf
        m.submodules.words_slice = ws = StreamSlice(8 * W)
        m.d.comb += [rf.w_data.eq(axi.rdata), rf.w_en.eq(axi.rvalid), axi.rready.eq(rf.w_rdy),
                     ws.i.payload.eq(rf.r_data), ws.i.valid.eq(rf.r_rdy), rf.r_en.eq(ws.i.ready)]
        wiring.connect(m, ws.o, wiring.flipped(self.words))
        ar_addr = Signal(AW)
        ar_left = Signal(18)           # words still to request
        # words from ar_addr to the next 4 KiB boundary, a register kept in step with ar_addr
        # (timing: a subtract in front of the burst length compares and the address adder)
        to4k = Signal(13 - LW + 1)
        # burst length = min(ar_left, to4k, BURST): its two cases as conditions on registers
        # (timing: the length feeds no adders)
        b_left = Signal()              # the burst is the rest of the segment (ar_left words)
        b_4k = Signal()                # else it ends on the 4 KiB boundary (to4k words)
        m.d.comb += [b_left.eq((ar_left < BURST) & (ar_left <= to4k)), b_4k.eq(to4k <= BURST)]
        m.d.comb += [
            axi.arid.eq(0), axi.araddr.eq(ar_addr),
            axi.arlen.eq(Mux(b_left, ar_left - 1, Mux(b_4k, to4k - 1, BURST - 1))), axi.arsize.eq(LW),
            axi.arburst.eq(1), axi.arvalid.eq(ar_left != 0), self.busy.eq(axi.arvalid),
        ]
        s = self.start.payload
        with m.If(self.start.valid):
            m.d.sync += [ar_addr.eq(s.addr), ar_left.eq(s.words), to4k.eq(s.to4k)]
        with m.Elif(axi.arvalid & axi.arready):
            with m.If(b_left):
                # the segment's last burst: ar_addr and to4k are reloaded before they matter
                m.d.sync += ar_left.eq(0)
            with m.Elif(b_4k):
                # a burst never crosses 4 KiB: one that ends on it steps the address bits above 11
                m.d.sync += [ar_left.eq(ar_left - to4k), ar_addr[:12].eq(0),
                             ar_addr[12:].eq(ar_addr[12:] + 1), to4k.eq(4096 >> LW)]
            with m.Else():
                m.d.sync += [ar_left.eq(ar_left - BURST), ar_addr[:12].eq(ar_addr[:12] + (BURST << LW)),
                             to4k.eq(to4k - BURST)]
        return m
