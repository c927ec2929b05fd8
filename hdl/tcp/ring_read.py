"""The transmit side's ring reader: a segment's payload read from its connection's send ring,
added up for the checksum, and held until the frame builder sends it."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rnic.host.spec.limits import check_width

from ..axi import AXI4ReadSignature
from ..beat import conn_bits
from ..net.checksum import SUM_BITS, beat_sum, fold
from ..net.layouts import FrameBeat
from ..synth_hints import SyncFIFOBuffered
from .lane_shift import LaneShift
from .layouts import TcpTxDesc
from .ring_write import ring_start, ring_words_mask

__all__ = ["TcpRingRead", "TxRequest", "BURST_WORDS"]

#: The longest read burst, in words; bursts never cross a multiple of it (so never a 4 KiB
#: boundary nor a ring's end: a ring holds at least this many words).
BURST_WORDS = 16
_DESCS = 4          # descriptors of loaded segments that wait for the frame builder


class TxRequest(data.StructLayout):
    """A segment to send: its connection (whose ring holds the payload) and its descriptor
    (``payload_sum`` is filled in here)."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "desc": TcpTxDesc()})


class TcpRingRead(wiring.Component):
    """Loads each requested segment's payload from the send ring, then passes its descriptor
    on with the payload's sum.

    A request with ``length`` > 0 reads the octets ``seq .. seq + length - 1`` of
    connection ``conn``'s ring (:class:`~rnic.hdl.tcp.ring_write.TcpRingWrite`'s layout,
    wrapping at the ring's end) in AXI4 bursts of up to 16 words that never cross a
    multiple of 16 words, realigns them to lane 0 (a
    :class:`~rnic.hdl.tcp.lane_shift.LaneShift`), adds them up as the Internet checksum
    does and stores them; once the last octet is stored the descriptor leaves on ``desc``
    with ``payload_sum``, and the payload follows on ``payload``. A request without payload
    passes at once, in order. Requests are taken one at a time, in order.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    connections : int
        Connection ids.
    addr_width : int
        Bits of a memory address.
    max_segment : int
        The most payload octets of a segment; the store holds two such segments.

    Ports
    -----
    req : In(stream.Signature(TxRequest(connections=)))
    desc : Out(stream.Signature(TcpTxDesc))
    payload : Out(stream.Signature(FrameBeat(width)))
        To :class:`~rnic.hdl.tcp.tx_frame.TcpTxFrame`.
    m_axi : Out(AXI4ReadSignature(addr_width=, data_width=8 * width))
    ring_base : In(addr_width)
    ring_log2 : In(5)
        As the ring writer's (a ring holds at least 16 words). Quasi-static.

    Latency: a segment's descriptor leaves 4 cycles after its last word arrived on the bus.
    Throughput: one word per cycle as the bus delivers them; a request waits until the
    one before has all its payload stored.
    """

    def __init__(self, *, width, connections, addr_width=32, max_segment=1460):
        self._width = check_width(width)
        self._connections = connections
        self._addr_width = addr_width
        if not isinstance(max_segment, int) or not 1 <= max_segment <= 65535:
            raise ValueError(f"max_segment must be an int from 1 to 65535, not {max_segment!r}")
        self._depth = 2 * -(-max_segment // width)
        super().__init__({
            "req": In(stream.Signature(TxRequest(connections=connections))),
            "desc": Out(stream.Signature(TcpTxDesc())),
            "payload": Out(stream.Signature(FrameBeat(width=width))),
            "m_axi": Out(AXI4ReadSignature(addr_width=addr_width, data_width=8 * width)),
            "ring_base": In(addr_width),
            "ring_log2": In(5),
        })

    def elaborate(self, platform):
        m = Module()
        W = self._width
        beat = FrameBeat(width=W)
        m.submodules.shift = shift = LaneShift(width=W)
        m.submodules.store = store = SyncFIFOBuffered(width=beat.size, depth=self._depth)
        m.submodules.descs = descs = SyncFIFOBuffered(width=TcpTxDesc().size, depth=_DESCS)
        m.d.comb += [self.payload.valid.eq(store.r_rdy), self.payload.payload.eq(store.r_data),
                     store.r_en.eq(self.payload.ready),
                     self.desc.valid.eq(descs.r_rdy), self.desc.payload.eq(descs.r_data),
                     descs.r_en.eq(self.desc.ready)]

        req = self.req.payload
        words = Signal(17)                  # words the segment's octets touch
        last_n = Signal(range(W + 1))       # lanes of the last word that hold its octets
        first = req.desc.seq[:ceil_log2(W)]
        m.d.comb += [words.eq((first + req.desc.length + W - 1) >> ceil_log2(W)),
                     last_n.eq(((first + req.desc.length - 1) & (W - 1)) + 1)]

        total = Signal(SUM_BITS)
        out = shift.o.payload
        keep = Cat(*(j < out.n for j in range(W)))
        with m.If(shift.o.valid & shift.o.ready):
            m.d.sync += total.eq(Mux(out.first, 0, total) + beat_sum(out.data, keep, W))
        m.d.comb += [store.w_data.eq(shift.o.payload), store.w_en.eq(shift.o.valid),
                     shift.o.ready.eq(store.w_rdy)]
        loaded = shift.o.valid & shift.o.ready & out.last

        issue = Signal()                    # the current request's reads are due
        received = Signal(17)               # its words received
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.req.valid & descs.w_rdy):
                    with m.If(req.desc.length == 0):
                        m.d.comb += [self.req.ready.eq(1), descs.w_en.eq(1),
                                     descs.w_data.eq(req.desc)]
                    with m.Else():
                        m.d.sync += [issue.eq(1), received.eq(0)]
                        m.next = "LOAD"
            with m.State("LOAD"):
                with m.If(loaded):
                    m.next = "SUM"
            with m.State("SUM"):
                # the sum of the whole payload is in ``total`` now: its fold and the
                # descriptor's write stay off the store's handshake
                desc = Signal(TcpTxDesc())
                m.d.comb += [desc.eq(req.desc), desc.payload_sum.eq(fold(total)),
                             self.req.ready.eq(1), descs.w_en.eq(1), descs.w_data.eq(desc)]
                m.next = "IDLE"
        self._reads(m, req, words, issue)
        self._words(m, shift, req, words, last_n, received)
        return m

    def _reads(self, m, req, words, issue):
        """The read bursts of the current request."""
        W = self._width
        shift = ceil_log2(W)
        axi = self.m_axi
        words_mask = ring_words_mask(m, self.ring_log2, W)
        ring = ring_start(self.ring_base, self.ring_log2, req.conn)
        word = Signal(32)                   # ring word index of the next burst's first word
        left = Signal(17)                   # words not yet requested
        started = Signal()
        # the next burst's length, registered from ``word`` and ``left`` (so a burst is
        # issued at most every other cycle, once it is computed from their new values)
        burst = Signal(range(BURST_WORDS + 1))
        fresh = Signal()                    # ``burst`` is from the current word and left
        room = BURST_WORDS - word[:ceil_log2(BURST_WORDS)]
        m.d.sync += [burst.eq(Mux(left < room, left, room)), fresh.eq(started)]
        m.d.comb += [axi.arsize.eq(shift), axi.arburst.eq(1)]
        with m.If(axi.arready):
            m.d.sync += axi.arvalid.eq(0)
        with m.If(~issue):
            m.d.sync += [started.eq(0), fresh.eq(0)]
        with m.Elif(~started):
            m.d.sync += [started.eq(1), word.eq(req.desc.seq >> shift), left.eq(words)]
        with m.Elif(fresh & (left != 0) & (~axi.arvalid | axi.arready)):
            m.d.sync += [axi.arvalid.eq(1), axi.arlen.eq(burst - 1),
                         axi.araddr.eq(ring + ((word & words_mask) << shift)),
                         word.eq(word + burst), left.eq(left - burst), fresh.eq(0)]
            with m.If(left == burst):
                m.d.sync += issue.eq(0)

    def _words(self, m, shift, req, words, last_n, received):
        """The words of the bus into the lane shift, first and last marked."""
        W = self._width
        axi = self.m_axi
        i = shift.i.payload
        is_last = received == words - 1
        m.d.comb += [shift.i.valid.eq(axi.rvalid), axi.rready.eq(shift.i.ready),
                     i.data.eq(axi.rdata), i.first.eq(received == 0), i.last.eq(is_last),
                     i.n.eq(Mux(is_last, last_n, W)),
                     i.skip.eq(req.desc.seq[:ceil_log2(W)])]
        with m.If(axi.rvalid & axi.rready):
            m.d.sync += received.eq(received + 1)
