"""The transmit side's ring writer: what the core sends on each connection, into that
connection's send ring in memory, where it stays until the peer acknowledges it."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from rnic.host.spec.limits import check_width

from ..axi import AXI4WriteSignature
from ..beat import OctetBeat, conn_bits
from ..synth_hints import SyncFIFOBuffered

__all__ = ["TcpRingWrite", "RingPosition", "ring_words_mask", "ring_start"]

_REPORTS = 8        # runs whose writes may be on their way at once
_COUNT_BITS = 16    # counters of issued and acknowledged writes (wrap)


def ring_words_mask(m, ring_log2, width):
    """The mask of a word index within a ring of ``2**ring_log2`` octets of ``width``-octet
    words (combinational, in ``m``)."""
    size = Signal(33, name="ring_size")
    m.d.comb += size.eq(Const(1, 33) << ring_log2)
    return (size >> ceil_log2(width)) - 1


def ring_start(ring_base, ring_log2, conn):
    """The address of connection ``conn``'s ring."""
    return ring_base + (conn << ring_log2)


class RingPosition(data.StructLayout):
    """A connection and a sequence number: where its next octet goes (``start``), or where
    its written octets end (``written``)."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "seq": 32})


class TcpRingWrite(wiring.Component):
    """Writes each run of ``i`` into its connection's send ring.

    Connection ``c``'s ring is ``2**ring_log2`` octets at ``ring_base + c * 2**ring_log2``;
    the octet of sequence number ``s`` is at offset ``s mod 2**ring_log2`` of it, so the
    octets of one window sit in the ring in order and retransmission reads them where
    they were written. The writer keeps each connection's next sequence number (set
    through ``start`` before the connection's first run, advanced by every run). A run is
    written as single-beat AXI4 writes of aligned ``W``-octet words with byte strobes: one
    word per input beat, one more when the run's octets spill past the last word its
    beats began. Once every write of a run is acknowledged, ``written`` reports the
    sequence number after its last octet (the engine may send up to there). The ring
    never overflows here: the engine lets the core send on a connection only while its
    ring has room.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    connections : int
        Connection ids.
    addr_width : int
        Bits of a memory address.

    Ports
    -----
    i : In(stream.Signature(OctetBeat(width=, connections=)))
        Runs of one connection each (the core's ``tx_wire``).
    start : In(stream.Signature(RingPosition(connections=)))
        Sets a connection's next sequence number (taken between runs).
    ended : Out(stream.Signature(RingPosition(connections=)))
        One per run, in order, as its last beat is taken (its octets hold ring space from
        then on); the next run waits until it is taken.
    written : Out(stream.Signature(RingPosition(connections=)))
        One per run, in order, once its writes are acknowledged; never before its
        ``ended``.
    m_axi : Out(AXI4WriteSignature(addr_width=, data_width=8 * width))
    ring_base : In(addr_width)
    ring_log2 : In(5)
        Where the rings are and how large each is (at least ``W`` octets). Quasi-static.

    Latency: a run's first write is issued 3 cycles after its first beat is valid (the
    sequence number is read, then the address formed). Throughput: one beat per cycle
    while the bus takes a write per cycle, plus 3 cycles per run and a spilled word's
    cycle; at most 8 runs wait for their acknowledgments.
    """

    def __init__(self, *, width, connections, addr_width=32):
        self._width = check_width(width)
        self._connections = connections
        self._addr_width = addr_width
        position = stream.Signature(RingPosition(connections=connections))
        super().__init__({
            "i": In(stream.Signature(OctetBeat(width=width, connections=connections))),
            "start": In(position),
            "ended": Out(position),
            "written": Out(position),
            "m_axi": Out(AXI4WriteSignature(addr_width=addr_width, data_width=8 * width)),
            "ring_base": In(addr_width),
            "ring_log2": In(5),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        shift = ceil_log2(W)
        m.submodules.next_seq = next_seq = memory.Memory(shape=32, depth=self._connections,
                                                         init=[])
        rd = next_seq.read_port()
        wr = next_seq.write_port()
        report = RingPosition(connections=self._connections)
        m.submodules.reports = reports = SyncFIFOBuffered(
            width=report.size + _COUNT_BITS, depth=_REPORTS)

        axi = self.m_axi
        issued = Signal(_COUNT_BITS)        # writes issued, ever (wraps)
        acked = Signal(_COUNT_BITS)         # write responses taken, ever (wraps)
        m.d.comb += axi.bready.eq(1)
        with m.If(axi.bvalid):
            m.d.sync += acked.eq(acked + 1)
        self._release(m, reports, report, acked)

        conn = Signal(conn_bits(self._connections))
        seq = Signal(32)                    # the run's first sequence number
        length = Signal(17)                 # octets of the run taken so far
        offset = Signal(range(W))           # lane of the run's first octet
        word = Signal(32)                   # word index in the ring of the next write
        ring = Signal(self._addr_width)     # the connection's ring
        prev = Signal(8 * W)                # the beat before (its top lanes spill)
        prev_n = Signal(bits_for(W))
        words_mask = ring_words_mask(m, self.ring_log2, W)

        # the output slot: one write (AW and W) waiting for the bus
        slot_free = (~axi.awvalid | axi.awready) & (~axi.wvalid | axi.wready)
        with m.If(axi.awready):
            m.d.sync += axi.awvalid.eq(0)
        with m.If(axi.wready):
            m.d.sync += axi.wvalid.eq(0)
        m.d.comb += [axi.awlen.eq(0), axi.awsize.eq(shift), axi.awburst.eq(1),
                     axi.wlast.eq(1)]

        def emit(value, strobes):
            m.d.sync += [axi.awvalid.eq(1), axi.wvalid.eq(1), axi.wdata.eq(value),
                         axi.wstrb.eq(strobes),
                         axi.awaddr.eq(ring + ((word & words_mask) << shift)),
                         word.eq(word + 1), issued.eq(issued + 1)]

        def finish():
            # ``ended`` is registered (its takers' logic stays off this FSM); the run's
            # report is queued as it is taken, so ``written`` never comes first
            end = self.ended.payload.seq
            with m.If(~self.ended.valid):
                m.d.sync += [self.ended.valid.eq(1), self.ended.payload.conn.eq(conn),
                             end.eq(seq + length)]
            with m.Elif(self.ended.ready):
                m.d.sync += self.ended.valid.eq(0)
                m.d.comb += [wr.addr.eq(conn), wr.data.eq(end), wr.en.eq(1),
                             reports.w_en.eq(1),
                             reports.w_data.eq(Cat(conn, end, issued))]
                m.next = "IDLE"

        beat = self.i.payload
        lanes = [Signal(W, name=f"lanes_{k}") for k in range(2)]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start.valid):
                    m.d.comb += [self.start.ready.eq(1), wr.addr.eq(self.start.payload.conn),
                                 wr.data.eq(self.start.payload.seq), wr.en.eq(1)]
                with m.Elif(self.i.valid & reports.w_rdy):
                    m.d.comb += [rd.addr.eq(beat.conn), rd.en.eq(1)]
                    m.d.sync += conn.eq(beat.conn)
                    m.next = "LOAD"
            with m.State("LOAD"):
                m.d.sync += [seq.eq(rd.data), length.eq(0), offset.eq(rd.data[:shift]),
                             word.eq(rd.data >> shift),
                             ring.eq(ring_start(self.ring_base, self.ring_log2, conn))]
                m.next = "RUN"
            with m.State("RUN"):
                # lanes of this beat's octets in the word it starts (they begin at
                # ``offset`` in the run's first word) and in the next one
                mask = Signal(2 * W)
                m.d.comb += mask.eq(((Const(1, 2 * W + 1) << beat.n) - 1) << offset)
                m.d.comb += [lanes[0].eq(mask[:W]), lanes[1].eq(mask[W:])]
                word_data = self._funnel(m, prev, beat.data, offset)
                carried = Signal(W)         # lanes of the word the previous beat spilled into
                m.d.comb += carried.eq(Mux(beat.first, 0, (Const((1 << W) - 1, W) << offset)
                                           ^ Const((1 << W) - 1, W)))
                with m.If(self.i.valid & slot_free):
                    m.d.comb += self.i.ready.eq(1)
                    emit(word_data, lanes[0] | carried)
                    m.d.sync += [prev.eq(beat.data), prev_n.eq(beat.n),
                                 length.eq(length + beat.n)]
                    with m.If(beat.last & (lanes[1] != 0)):
                        m.next = "SPILL"
                    with m.Elif(beat.last):
                        m.next = "DONE"
            with m.State("SPILL"):
                with m.If(slot_free):
                    spill = Signal(W)
                    m.d.comb += spill.eq((((Const(1, 2 * W + 1) << prev_n) - 1)
                                          << offset)[W:])
                    emit(self._funnel(m, prev, Const(0, 8 * W), offset), spill)
                    m.next = "DONE"
            with m.State("DONE"):
                finish()
        return m

    def _funnel(self, m, low, high, offset):
        """The word of the ring that ``low``'s top ``offset`` lanes and ``high``'s first
        ``W - offset`` lanes make: ``Cat(low, high)`` from lane ``W - offset`` on."""
        W = self._width
        word_data = Signal(8 * W)
        joined = Cat(low, high)
        with m.Switch(offset):
            for o in range(W):
                with m.Case(o):
                    m.d.comb += word_data.eq(joined[8 * (W - o):8 * (2 * W - o)])
        return word_data

    def _release(self, m, reports, report, acked):
        """``written``: the oldest run's report once ``acked`` has passed its last write."""
        out = data.View(report, reports.r_data[:report.size])
        last_write = reports.r_data[report.size:]
        due = Signal(_COUNT_BITS)
        m.d.comb += due.eq(acked - last_write)
        ready = reports.r_rdy & ~due[-1]
        m.d.comb += [self.written.valid.eq(ready), self.written.payload.eq(out),
                     reports.r_en.eq(ready & self.written.ready)]
