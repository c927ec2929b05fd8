"""Where a segment ends: the FPDU ends of each connection's unacknowledged octets, and the
walk that finds the last one a segment can reach."""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..beat import conn_bits
from .seq import seq_at_or_after

__all__ = ["TcpSendCut", "CutRecord", "CutRequest", "CutAnswer", "ReleaseRequest"]


class CutRecord(data.StructLayout):
    """The end of written octets of connection ``conn``: ``end`` the sequence number after
    them; ``aligned`` they end an FPDU (else a byte stream, cut anywhere)."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "end": 32, "aligned": 1})


class CutRequest(data.StructLayout):
    """How far a segment from ``seq`` of ``conn`` may go: at most ``limit`` octets;
    ``may_split`` it may end inside an FPDU when not even the first fits (nothing is in
    flight)."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "seq": 32, "limit": 17,
                          "may_split": 1})


class CutAnswer(data.StructLayout):
    """The segment's octets (0: wait for the window), and ``split``: it ends inside an FPDU
    because the window could not hold the first (counted, WINDOW_CUTS)."""

    def __init__(self):
        super().__init__({"length": 17, "split": 1})


class ReleaseRequest(data.StructLayout):
    """Connection ``conn``'s octets before ``una`` are acknowledged (or ``reset``: all its
    records go, for a connection that is freed)."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "una": 32, "reset": 1})


class TcpSendCut(wiring.Component):
    """The model's ``_cut`` and its records (:class:`rnic.host.model.tcp_engine.TcpEngine`)
    for ``connections`` connections of ``depth`` records each.

    ``push`` appends a record (the ring writer's report of a run: an FPDU end when the
    framer ends a run with every FPDU); byte stream right after byte stream moves the
    newest record's end instead, while that record is held. ``cut`` walks the connection's records from the
    oldest, three cycles a record: records at or before ``seq`` are passed; the segment reaches the
    last record within ``limit`` octets; at the first record beyond it, a byte stream is
    cut at ``limit``, and an FPDU, when no record was within reach, is cut at ``limit``
    only with ``may_split`` (``split``), else the answer is 0. ``release`` drops the
    records acknowledged (one a cycle).

    Parameters
    ----------
    connections : int
    depth : int
        Records per connection, a power of 2: while a connection's are all taken, ``room``
        is 0 for it and the core must not send on it.

    Ports
    -----
    push : In(stream.Signature(CutRecord(connections=)))
        Taken when the engine is not walking; never into a full queue (``room``).
    cut : In(stream.Signature(CutRequest(connections=)))
    answer : Out(stream.Signature(CutAnswer))
    release : In(stream.Signature(ReleaseRequest(connections=)))
    room : Out(connections)
        Bit ``c``: connection ``c`` has a free record.

    Latency: an answer after ``3k + 2`` cycles for a walk over ``k`` records. Throughput:
    one request at a time.
    """

    def __init__(self, *, connections, depth=64):
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of 2 of at least 2, not {depth!r}")
        self._connections = connections
        self._depth = depth
        super().__init__({
            "push": In(stream.Signature(CutRecord(connections=connections))),
            "cut": In(stream.Signature(CutRequest(connections=connections))),
            "answer": Out(stream.Signature(CutAnswer())),
            "release": In(stream.Signature(ReleaseRequest(connections=connections))),
            "room": Out(connections),
        })

    def elaborate(self, platform):
        m = Module()
        N, D = self._connections, self._depth
        bits = ceil_log2(D)
        entry = data.StructLayout({"end": 32, "aligned": 1})
        m.submodules.records = records = memory.Memory(shape=entry, depth=N * D, init=[])
        rd = records.read_port()
        wr = records.write_port()
        heads = Array(Signal(bits + 1, name=f"head{c}") for c in range(N))
        tails = Array(Signal(bits + 1, name=f"tail{c}") for c in range(N))
        m.d.comb += self.room.eq(_room(m, heads, tails, N, D))
        streaming = Signal(N)               # the newest record is byte stream (unaligned)

        conn = Signal(conn_bits(N))
        at = Signal(bits + 1)               # the record being read
        last = Signal(bits + 1)             # the walked connection's tail: push waits
        req = Signal(CutRequest(connections=N))
        una = Signal(32)
        length = Signal(17)
        with m.If(self.answer.ready):
            m.d.sync += self.answer.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.release.valid):
                    r = self.release.payload
                    m.d.comb += self.release.ready.eq(1)
                    with m.If(r.reset):
                        m.d.sync += heads[r.conn].eq(tails[r.conn])
                    with m.Else():
                        m.d.sync += [conn.eq(r.conn), una.eq(r.una), at.eq(heads[r.conn])]
                        m.next = "RELEASE"
                with m.Elif(self.cut.valid & ~self.answer.valid):
                    c = self.cut.payload
                    m.d.comb += self.cut.ready.eq(1)
                    m.d.sync += [req.eq(c), conn.eq(c.conn), at.eq(heads[c.conn]),
                                 last.eq(tails[c.conn]), length.eq(0)]
                    m.next = "WALK"
                with m.Elif(self.push.valid):
                    self._push(m, wr, heads, tails, streaming, bits, D)
            with m.State("RELEASE"):
                self._release(m, rd, heads, tails, conn, at, una, bits, D)
            with m.State("WALK"):
                self._walk(m, rd, last, conn, at, req, length, bits, D)
        return m

    def _push(self, m, wr, heads, tails, streaming, bits, D):
        """A record appended; byte stream after byte stream (the newest record, still
        held) only moves that record's end, as the model's ``write`` does."""
        p = self.push.payload
        tail = tails[p.conn]
        merge = ~p.aligned & streaming.bit_select(p.conn, 1) & (heads[p.conn] != tail)
        m.d.comb += [self.push.ready.eq(1), wr.en.eq(1), wr.data.end.eq(p.end),
                     wr.data.aligned.eq(p.aligned),
                     wr.addr.eq(p.conn * D + Mux(merge, tail - 1, tail)[:bits])]
        m.d.sync += streaming.bit_select(p.conn, 1).eq(~p.aligned)
        with m.If(~merge):
            m.d.sync += tail.eq(tail + 1)

    def _release(self, m, rd, heads, tails, conn, at, una, bits, D):
        """Drop the oldest records while they end at or before ``una`` (two cycles a
        record: its read, then the compare)."""
        reading = Signal()
        m.d.comb += [rd.addr.eq(conn * D + at[:bits]), rd.en.eq(1)]
        m.d.sync += reading.eq(~reading)
        acknowledged = seq_at_or_after(m, una, rd.data.end, "done")
        with m.If(at == tails[conn]):
            m.d.sync += reading.eq(0)
            m.next = "IDLE"
        with m.Elif(reading):
            with m.If(acknowledged):
                m.d.sync += [heads[conn].eq(at + 1), at.eq(at + 1)]
            with m.Else():
                m.next = "IDLE"

    def _walk(self, m, rd, last, conn, at, req, length, bits, D):
        """The cut's walk, three cycles a record: its read, its distance from ``seq``
        (registered: the carry chain stays off the decision), then the decision."""
        phase = Signal(range(3))
        m.d.comb += [rd.addr.eq(conn * D + at[:bits]), rd.en.eq(1)]
        m.d.sync += phase.eq(_next_phase(phase))
        reach = Signal(32)
        aligned = Signal()
        m.d.sync += [reach.eq(rd.data.end - req.seq), aligned.eq(rd.data.aligned)]
        answer = self.answer.payload

        def finish(value, split=0):
            m.d.sync += [self.answer.valid.eq(1), answer.length.eq(value),
                         answer.split.eq(split), phase.eq(0)]
            m.next = "IDLE"

        with m.If(at == last):
            finish(length)
        with m.Elif(phase == 2):
            m.d.sync += at.eq(at + 1)
            with m.If(reach[31] | (reach == 0)):
                pass                        # at or before seq: passed
            with m.Elif((reach[17:] == 0) & (reach[:17] <= req.limit)):
                m.d.sync += length.eq(reach)
            with m.Elif(~aligned):
                finish(req.limit)
            with m.Elif((length == 0) & req.may_split):
                finish(req.limit, split=1)
            with m.Else():
                finish(length)


def _next_phase(phase):
    """0, 1, 2, 0, ...: the walk's step through a record."""
    return Mux(phase == 2, 0, phase + 1)


def _room(m, heads, tails, N, D):
    """Bit ``c``: connection ``c``'s queue is not full."""
    room = Signal(N, name="room_bits")
    for c in range(N):
        used = Signal(range(2 * D), name=f"used{c}")
        m.d.comb += [used.eq(tails[c] - heads[c]), room[c].eq(used != D)]
    return room
