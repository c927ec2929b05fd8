"""The DDP/RDMAP receive path: the ingest and the segment processor."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..axi import AXI4WriteSignature
from ..beat import check_width, conn_bits
from ..mpa_rx import MpaRxBeat
from ..rdma_layouts import (
    Completion, ConnCtl, ReadRequestOut, RqPost, RrDone, StagWrite, TermReport,
)
from .ingest import Ingest
from .processor import SegmentProcessor

__all__ = ["DdpRx"]


class DdpRx(wiring.Component):
    """DDP/RDMAP receive path: ULPDUs in, placement writes, completions and reports out.

    It sits behind the MPA deframer (:class:`rnic.hdl.mpa_rx.MpaRxDeframer`, payload
    :class:`rnic.hdl.mpa_rx.MpaRxBeat`) and turns ULPDUs into byte-granular AXI4 writes to
    host memory, completions, queued RDMA Read Requests and error / Terminate reports. The
    golden model is :class:`rnic.host.model.sink.Sink`: validation order and codes follow
    its module docstring exactly.

    Parameters
    ----------
    width : int
        Datapath width W in octets (4, 8, 16, 32); also the AXI data width.
    connections : int
        Connection contexts (rows of the context memories).
    stags : int
        Rows of the STag table (power of 2); row of a wire STag = ``stag % stags``.
    slots : int
        Segment buffers (power of 2). A ULPDU is buffered whole until the deframer's
        verdict on its last beat, so that no octet of an FPDU with a bad CRC is placed.
    slot_bytes : int
        Capacity of one segment buffer (power of 2, >= MULPDU of every connection);
        longer ULPDUs are reported as DDP local catastrophic.
    rq_depth : int
        Receive buffers that may be posted per connection (power of 2).
    addr_width : int
        AXI address width AW: host memory is ``2**AW`` octets. Placement and bounds
        arithmetic is done in AW bits: an STag row or receive buffer reaching beyond
        ``2**AW`` is refused (the row never matches, the post is dropped), and a TO with
        bits set above AW fails the bounds check (the TO-wrap check stays 64-bit).

    Ports
    -----
    i : In(stream(MpaRxBeat))
        The deframer's output.
    stag_w : In(stream(StagWrite))
        STag table row writes. Taken only between segments while no write is in
        flight, so a region that is rewritten is never written after the rewrite.
    rq_post : In(stream(RqPost))
        (Also taken only between segments with no write in flight.)
        Receive buffer posts; ``rq_overflow`` pulses (two cycles after the handshake) when
        one is dropped: queue full, or the buffer not inside the bus address space
        (``addr + length > 2**addr_width``).
    ctl : In(stream(ConnCtl))
        Connection (re)start: MSNs 1, queues empty, no error, IRD.
    rr_done : In(stream(RrDone))
        One Read Request of the connection answered (IRD slot freed).
    cq : Out(stream(Completion))
        Send and Read Response completions; issued after every write of the message
        was acknowledged on B.
    rrq : Out(stream(ReadRequestOut))
        Validated inbound RDMA Read Requests, in order, for the TX side.
    term : Out(stream(TermReport))
        Errors and received Terminates (one per connection until ``ctl``).
    m_axi : Out(AXI4WriteSignature)
        Placement writes: single-beat (``awlen`` 0) full-width writes, byte strobes, at
        most 128 not acknowledged on B.
    aw_conn : Out(conn)
        Connection of the write on ``m_axi`` AW (side band, for checkers).
    rq_overflow : Out(1)
        See ``rq_post``.

    Operation: the :class:`~rnic.hdl.ddp_rx.ingest.Ingest` buffers each ULPDU whole in a
    slot (one beat per cycle, no bubbles) and queues it once the deframer's verdict is in:
    nothing is placed before it, and a ULPDU with a CRC or marker error is dropped whole
    and reported (LLP 0/2, 0/3). The
    :class:`~rnic.hdl.ddp_rx.processor.SegmentProcessor` checks one segment at a time, in
    the order of their last beats, while its placer streams the previous segment's
    payload to memory; a completion waits in the processor's completion gate for its
    writes' B responses, not in the sequencer. A stream of segments costs one cycle per
    segment beyond its words where the placer is the limit, and the sequencer's states
    where they are (about ``ceil(18/W) + 8`` cycles per Write or in-order Send segment:
    short segments at W >= 8). None of the pipeline registers (for timing) changes the
    AXI, completion or report order, and none adds latency to a Write's or a Send's
    placement.
    """

    def __init__(self, *, width=8, connections=16, stags=256, slots=4, slot_bytes=2048,
                 rq_depth=8, addr_width=64):
        check_width(width)
        for name, v in (("stags", stags), ("slots", slots), ("slot_bytes", slot_bytes),
                        ("rq_depth", rq_depth)):
            if not isinstance(v, int) or v < 2 or v & (v - 1):
                raise ValueError(f"{name} must be a power of 2 (>= 2), not {v!r}")
        if slot_bytes < 2 * width or slot_bytes < 32:
            raise ValueError(f"slot_bytes must be at least 32 and 2 * width, not {slot_bytes!r}")
        if not isinstance(addr_width, int) or not 8 <= addr_width <= 64:
            raise ValueError(f"addr_width must be 8..64, not {addr_width!r}")
        self.width = width
        self.connections = connections
        self.stags = stags
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.rq_depth = rq_depth
        self.addr_width = addr_width
        C = connections
        super().__init__({
            "i": In(stream.Signature(MpaRxBeat(width=width, connections=C))),
            "stag_w": In(stream.Signature(StagWrite(stags=stags, connections=C))),
            "rq_post": In(stream.Signature(RqPost(connections=C))),
            "ctl": In(stream.Signature(ConnCtl(connections=C))),
            "rr_done": In(stream.Signature(RrDone(connections=C))),
            "cq": Out(stream.Signature(Completion(connections=C))),
            "rrq": Out(stream.Signature(ReadRequestOut(connections=C))),
            "term": Out(stream.Signature(TermReport(connections=C))),
            "m_axi": Out(AXI4WriteSignature(addr_width=addr_width, data_width=8 * width)),
            "aw_conn": Out(conn_bits(C)),
            "rq_overflow": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.ingest = ingest = Ingest(width=self.width, connections=self.connections,
                                              slots=self.slots, slot_bytes=self.slot_bytes)
        m.submodules.processor = proc = SegmentProcessor(
            width=self.width, connections=self.connections, stags=self.stags, slots=self.slots,
            slot_bytes=self.slot_bytes, rq_depth=self.rq_depth, addr_width=self.addr_width)
        wiring.connect(m, wiring.flipped(self.i), ingest.i)
        wiring.connect(m, ingest.o, proc.ulpdus)
        wiring.connect(m, ingest.slot_rd, proc.slot_rd)
        wiring.connect(m, ingest.hdr_rd, proc.hdr_rd)
        wiring.connect(m, proc.release, ingest.release)
        wiring.connect(m, proc.release_placed, ingest.release_placed)
        for name in ("stag_w", "rq_post", "ctl", "rr_done"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(proc, name))
        for name in ("cq", "rrq", "term", "m_axi"):
            wiring.connect(m, getattr(proc, name), wiring.flipped(getattr(self, name)))
        m.d.comb += [self.aw_conn.eq(proc.aw_side.conn), self.rq_overflow.eq(proc.rq_overflow)]
        return m
