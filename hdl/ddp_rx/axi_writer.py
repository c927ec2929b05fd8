"""The AXI writer: the placer's writes through AW and W queues onto the bus, and their B responses."""

from amaranth.hdl import Assert, Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..axi import AXI4WriteSignature
from ..beat import conn_bits
from .completion_gate import COUNT_BITS
from .reg_fifo import RegFIFO

__all__ = ["WriteAddress", "WriteData", "PlacerWrite", "AxiWriter"]


class WriteAddress(data.StructLayout):
    """An AW entry: the aligned ``addr`` and side band for checkers: the write's connection,
    ``tagged`` (a tagged placement, else untagged), its first and last strobed lanes."""

    def __init__(self, *, width, connections, addr_width):
        lw = max(1, exact_log2(width))
        super().__init__({
            "addr": unsigned(addr_width), "conn": unsigned(conn_bits(connections)),
            "tagged": unsigned(1), "lo": unsigned(lw), "hi": unsigned(lw),
        })


class WriteData(data.StructLayout):
    """A W entry: one full-width word with byte strobes."""

    def __init__(self, *, width):
        super().__init__({"data": unsigned(8 * width), "strb": unsigned(width)})


class PlacerWrite(data.StructLayout):
    """One placement write: its AW and W entries, pushed together."""

    def __init__(self, *, width, connections, addr_width):
        super().__init__({
            "aw": WriteAddress(width=width, connections=connections, addr_width=addr_width),
            "w": WriteData(width=width),
        })


class AxiWriter(wiring.Component):
    """Single-beat full-width AXI4 writes (``awlen`` 0), through an AW and a W queue of four
    (registers); a pusher that keeps to ``room`` has at most 128 writes not yet acknowledged
    on B.

    Ports
    -----
    push : In(stream(PlacerWrite), always ready)
        A write; the pusher keeps to ``room``.
    room : Out(1)
        Room for one more write next cycle: registered for timing (it heads the placer's
        flow control), and conservative: a queue with at most two free places less than
        full, and fewer than 127 writes outstanding, take the next one.
    m_axi : Out(AXI4WriteSignature)
    aw_side : Out(WriteAddress)
        The AW entry on the bus, side band included (``conn`` is the block's ``aw_conn``).
    idle : Out(1)
        No write in flight (queued or not acknowledged): registered, one cycle late and low
        in the cycle after a push, so it never claims idle early.
    aw_quiet : Out(1)
        Every write pushed has been handed to the bus on AW (and W): registered likewise.
    acked : Out(COUNT_BITS)
        B responses of pushed writes so far (a wrapping counter, for the
        :class:`~rnic.hdl.ddp_rx.completion_gate.CompletionGate`).

    Latency: a write is on AW and W the cycle after its push; one write per cycle.

    For checkers: ``aw_fifo`` (the AW queue, :class:`RegFIFO`). With ``platform ==
    "formal"`` it asserts that ``idle`` and ``aw_quiet`` are never early
    (``lemma_writes_idle``, ``lemma_aw_quiet``).
    """

    def __init__(self, *, width, connections, addr_width):
        self.width = width
        aw_l = WriteAddress(width=width, connections=connections, addr_width=addr_width)
        w_l = WriteData(width=width)
        super().__init__({
            "push": In(stream.Signature(PlacerWrite(width=width, connections=connections,
                                                    addr_width=addr_width), always_ready=True)),
            "room": Out(1),
            "m_axi": Out(AXI4WriteSignature(addr_width=addr_width, data_width=8 * width)),
            "aw_side": Out(aw_l),
            "idle": Out(1),
            "aw_quiet": Out(1),
            "acked": Out(COUNT_BITS),
        })
        self.aw_fifo = RegFIFO(shape=aw_l, depth=4)
        self._w_fifo = RegFIFO(shape=w_l, depth=4)

    def elaborate(self, platform):
        m = Module()
        awf, wf, axi = self.aw_fifo, self._w_fifo, self.m_axi
        m.submodules.aw_fifo = awf
        m.submodules.w_fifo = wf
        push = self.push.valid
        m.d.comb += [
            awf.w.payload.eq(self.push.payload.aw), awf.w.valid.eq(push),
            wf.w.payload.eq(self.push.payload.w), wf.w.valid.eq(push),
            self.aw_side.eq(awf.r.payload),
            axi.awaddr.eq(awf.r.payload.addr), axi.awlen.eq(0),
            axi.awsize.eq(exact_log2(self.width)), axi.awburst.eq(1),
            axi.awvalid.eq(awf.r.valid), awf.r.ready.eq(axi.awready),
            axi.wdata.eq(wf.r.payload.data), axi.wstrb.eq(wf.r.payload.strb), axi.wlast.eq(1),
            axi.wvalid.eq(wf.r.valid), wf.r.ready.eq(axi.wready),
            axi.bready.eq(1),
        ]
        # writes pushed and not yet acknowledged on B
        outstanding = Signal(range(256))
        b_ack = Signal()
        m.d.comb += b_ack.eq(axi.bvalid & (outstanding != 0))
        m.d.sync += [outstanding.eq(outstanding + push - b_ack), self.acked.eq(self.acked + b_ack)]
        idle_c = Signal()
        m.d.comb += idle_c.eq((outstanding == 0) & ~awf.r.valid & ~wf.r.valid)
        m.d.sync += self.idle.eq(idle_c & ~push)
        m.d.sync += self.aw_quiet.eq(~awf.r.valid & ~wf.r.valid & ~push)
        m.d.sync += self.room.eq((awf.level <= awf.depth - 2) & (wf.level <= wf.depth - 2)
                                 & (outstanding < 127))

        if platform == "formal":
            with m.If(self.idle):
                m.d.comb += Assert((outstanding == 0) & (awf.level == 0) & (wf.level == 0),
                                   "lemma_writes_idle")
            with m.If(self.aw_quiet):
                m.d.comb += Assert((awf.level == 0) & (wf.level == 0), "lemma_aw_quiet")
        return m
