"""The octets of connections in byte-stream mode, kept for the host: see :class:`TcpStreamRx`."""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from rnic.host.spec.limits import check_width

from ..beat import OctetBeat, conn_bits
from ..synth_hints import SyncFIFOBuffered

__all__ = ["TcpStreamRx", "StreamRecord", "StreamHead"]


class StreamRecord(data.StructLayout):
    """One run kept: its connection, the octets and beats of it in the beat FIFO, and
    whether some of its octets were dropped."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "len": unsigned(16),
                          "beats": unsigned(16), "truncated": unsigned(1)})


def StreamHead(connections):
    """The view of the head run for the registers (TCP_STREAM_RX_*) and their commands."""
    return wiring.Signature({
        "valid": Out(1), "conn": Out(conn_bits(connections)), "len": Out(16),
        "truncated": Out(1), "lost": Out(1), "data": Out(32),
        "pop": In(1), "next": In(1)})


class TcpStreamRx(wiring.Component):
    """Keeps runs of octets (a TCP segment's payload each, in order per connection) for the
    host to read a 32-bit word at a time: the byte stream of a connection before it
    carries FPDUs (MPA's Request and Reply).

    ``i`` never waits: TCP has acknowledged these octets, and a connection whose host does
    not read must not hold back the others. A run is kept if a record of it fits when its
    first beat arrives (else the whole run is dropped and ``lost`` is set, sticky); its beats
    are kept while the beat FIFO has room, the rest dropped and the record marked
    ``truncated``. Either way the connection's stream is broken and the host aborts it;
    a peer within MPA's limits (a Request or Reply of at most 532 octets, then nothing
    until it is answered) never fills them.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    connections : int
    octets : int
        Octets the beat FIFO holds (a multiple of ``width``; default 2048).
    records : int
        Runs the record FIFO holds (default 16).

    Ports
    -----
    i : In(stream.Signature(OctetBeat(width=, connections=), always_ready=True))
        Runs ``first`` .. ``last``, one connection's each, octets from lane 0.
    head : Out(StreamHead(connections))
        The head run (``valid``, ``conn``, ``len``, ``truncated``) and its current word
        (``data``: octet k in bits 8k+7 .. 8k, octets past the run's end 0); ``lost``.
        ``next`` (a pulse) advances ``data`` by a word; ``pop`` drops the head run and
        its words not yet read.

    Latency and throughput: a beat a cycle in. The views are registers, one cycle behind
    the FIFOs; a run shows at ``head`` 3 cycles after its last beat; after a ``pop`` the
    next run shows once the dropped run's beats are gone (a beat a cycle).
    """

    def __init__(self, *, width, connections, octets=2048, records=16):
        check_width(width)
        if not isinstance(octets, int) or octets < 2 * width or octets % width:
            raise ValueError(f"octets must be a multiple of width={width} of at least "
                             f"{2 * width}, not {octets!r}")
        if not isinstance(records, int) or records < 2:
            raise ValueError(f"records must be an integer of at least 2, not {records!r}")
        self._width = width
        self._connections = connections
        self._beats = octets // width
        self._records = records
        super().__init__({
            "i": In(stream.Signature(OctetBeat(width=width, connections=connections),
                                     always_ready=True)),
            "head": Out(StreamHead(connections)),
        })

    def elaborate(self, platform):
        m = Module()
        W, N = self._width, self._connections
        beat = data.StructLayout({"data": 8 * W, "n": bits_for(W)})
        record = StreamRecord(connections=N)
        m.submodules.beats = beats = SyncFIFOBuffered(width=beat.size, depth=self._beats)
        m.submodules.records = records = SyncFIFOBuffered(width=record.size,
                                                          depth=self._records)
        self._writer(m, beats, records, beat, record)
        self._reader(m, beats, records, beat, record)
        return m

    def _writer(self, m, beats, records, beat, record):
        """Each beat into the beat FIFO while its run is kept and there is room; the run's
        record at its last beat."""
        i = self.i
        p = i.payload
        keep = Signal()                 # the run under way has a record (registered)
        length = Signal(16)             # its octets kept so far
        count = Signal(16)              # its beats kept so far
        truncated = Signal()
        taken = i.valid
        kept = Signal()                 # this beat's run is kept
        stored = Signal()               # this beat goes into the FIFO
        m.d.comb += [kept.eq(Mux(p.first, records.w_rdy, keep)),
                     stored.eq(taken & kept & beats.w_rdy),
                     beats.w_en.eq(stored),
                     beats.w_data.eq(Cat(p.data, p.n))]
        # the run's totals with this beat (a first beat starts from 0)
        length_now = Mux(p.first, 0, length) + Mux(stored, p.n, 0)
        count_now = Mux(p.first, 0, count) + stored
        truncated_now = (~p.first & truncated) | (taken & kept & ~beats.w_rdy)
        with m.If(taken):
            m.d.sync += [keep.eq(kept), length.eq(length_now), count.eq(count_now),
                         truncated.eq(truncated_now)]
            with m.If(p.first & ~records.w_rdy):
                m.d.sync += self.head.lost.eq(1)
        entry = Signal(record)
        m.d.comb += [entry.conn.eq(p.conn), entry.len.eq(length_now),
                     entry.beats.eq(count_now), entry.truncated.eq(truncated_now),
                     records.w_data.eq(entry),
                     records.w_en.eq(taken & p.last & kept)]

    def _reader(self, m, beats, records, beat, record):
        """The head run and its current word; NEXT and POP."""
        h = self.head
        K = self._width // 4
        head = Signal(record)
        front = Signal(beat)
        m.d.comb += [head.eq(records.r_data), front.eq(beats.r_data)]
        word = Signal(range(K))         # the current word of the head run's front beat
        used = Signal(16)               # beats of the head run read past
        skip = Signal(16)               # beats still to drop after a POP
        skipping = Signal()
        head_valid = records.r_rdy & ~skipping
        has_beat = head_valid & (used < head.beats) & beats.r_rdy
        octets_left = Signal(range(self._width + 1))
        m.d.comb += octets_left.eq(front.n - (word << 2))
        mask = Cat(*(Mux(octets_left > j, 0xFF, 0) for j in range(4)))
        current = front.data.word_select(word, 32) if K > 1 else front.data
        m.d.sync += [h.valid.eq(head_valid),
                     h.conn.eq(Mux(head_valid, head.conn, 0)),
                     h.len.eq(Mux(head_valid, head.len, 0)),
                     h.truncated.eq(head_valid & head.truncated),
                     h.data.eq(Mux(has_beat, current & mask, 0))]
        last_word = (word == K - 1) | (octets_left <= 4) if K > 1 else 1
        with m.If(skipping):
            with m.If(skip == 0):
                m.d.sync += skipping.eq(0)
            with m.Elif(beats.r_rdy):
                m.d.comb += beats.r_en.eq(1)
                m.d.sync += skip.eq(skip - 1)
        with m.Elif(h.pop & head_valid):
            m.d.comb += records.r_en.eq(1)
            m.d.sync += [skipping.eq(1), skip.eq(head.beats - used), used.eq(0), word.eq(0)]
        with m.Elif(h.next & has_beat):
            with m.If(last_word):
                m.d.comb += beats.r_en.eq(1)
                m.d.sync += [used.eq(used + 1), word.eq(0)]
            with m.Else():
                m.d.sync += word.eq(word + 1)
