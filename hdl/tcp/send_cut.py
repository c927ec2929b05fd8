"""Where a segment ends: the FPDU ends of each connection's unacknowledged octets, and the
walk that finds the last one a segment can reach."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, enum, memory, stream, wiring
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


class _Queue(data.StructLayout):
    """A connection's records: the oldest at ``head``, the next free at ``tail`` (modulo
    twice the depth: full when they differ by it); ``streaming`` the newest is byte
    stream."""

    def __init__(self, bits):
        super().__init__({"head": bits + 1, "tail": bits + 1, "streaming": 1})


class _Op(enum.Enum, shape=2):
    """What the request taken does."""
    RELEASE = 0
    RESET = 1
    CUT = 2
    PUSH = 3


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
        Bit ``c``: connection ``c`` has a free record; registered, it follows a push 2
        cycles after it is taken (before :class:`~rnic.hdl.tcp.ring_room.TcpRingRoom`'s
        bit, which the same run's end holds at 0 for 3).

    Latency: an answer after ``3k + 3`` cycles for a walk over ``k`` records; a push or a
    reset is written 2 cycles after it is taken. Throughput: one request at a time (a
    push every 2 cycles). The queues' heads and tails are in a memory of ``connections``
    rows, so that only the room bits grow with the connections.
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
        # each connection's queue of records in a memory, not in registers: at 256
        # connections the registers and their multiplexers took 11 000 LUT4; only the
        # room bits are registers (all ones: every queue starts empty)
        m.submodules.queues = queues = memory.Memory(shape=_Queue(bits), depth=N, init=[])
        q_rd = queues.read_port()
        self._q_wr = queues.write_port()
        self._room = Signal(N, init=(1 << N) - 1)
        m.d.comb += self.room.eq(self._room)

        op = Signal(_Op)
        conn = Signal(conn_bits(N))
        q = Signal(_Queue(bits))            # the connection's queue as loaded
        at = Signal(bits + 1)               # the record being read
        req = Signal(CutRequest(connections=N))
        pushed = Signal(CutRecord(connections=N))
        una = Signal(32)
        length = Signal(17)
        with m.If(self.answer.ready):
            m.d.sync += self.answer.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                self._take(m, q_rd, op, conn, req, pushed, una, length)
            with m.State("LOAD"):
                row = q_rd.data
                m.d.sync += [q.eq(row), at.eq(row.head)]
                with m.If(op == _Op.RESET):
                    self._store(m, conn, row.tail, row.tail, row.streaming, D)
                    m.next = "IDLE"
                with m.Elif(op == _Op.RELEASE):
                    m.next = "RELEASE"
                with m.Elif(op == _Op.CUT):
                    m.next = "WALK"
                with m.Else():
                    self._push(m, wr, conn, pushed, row, bits, D)
                    m.next = "IDLE"
            with m.State("RELEASE"):
                self._release(m, rd, conn, q, at, una, bits, D)
            with m.State("WALK"):
                self._walk(m, rd, q.tail, conn, at, req, length, bits, D)
        return m

    def _take(self, m, q_rd, op, conn, req, pushed, una, length):
        """IDLE: a release first, then a cut (none while an answer waits), then a push;
        its connection's queue is read."""
        r, c, p = self.release.payload, self.cut.payload, self.push.payload
        m.d.comb += q_rd.en.eq(1)
        with m.If(self.release.valid):
            m.d.comb += [self.release.ready.eq(1), q_rd.addr.eq(r.conn)]
            m.d.sync += [conn.eq(r.conn), una.eq(r.una),
                         op.eq(Mux(r.reset, _Op.RESET, _Op.RELEASE))]
            m.next = "LOAD"
        with m.Elif(self.cut.valid & ~self.answer.valid):
            m.d.comb += [self.cut.ready.eq(1), q_rd.addr.eq(c.conn)]
            m.d.sync += [req.eq(c), conn.eq(c.conn), length.eq(0), op.eq(_Op.CUT)]
            m.next = "LOAD"
        with m.Elif(self.push.valid):
            m.d.comb += [self.push.ready.eq(1), q_rd.addr.eq(p.conn)]
            m.d.sync += [pushed.eq(p), conn.eq(p.conn), op.eq(_Op.PUSH)]
            m.next = "LOAD"

    def _store(self, m, conn, head, tail, streaming, D):
        """Connection ``conn``'s queue written back, and its room bit."""
        w = self._q_wr
        m.d.comb += [w.en.eq(1), w.addr.eq(conn), w.data.head.eq(head), w.data.tail.eq(tail),
                     w.data.streaming.eq(streaming)]
        used = Signal.like(head, name="used")
        m.d.comb += used.eq(tail - head)
        m.d.sync += self._room.bit_select(conn, 1).eq(used != D)

    def _push(self, m, wr, conn, p, row, bits, D):
        """A record appended; byte stream after byte stream (the newest record, still
        held) only moves that record's end, as the model's ``write`` does."""
        merge = ~p.aligned & row.streaming & (row.head != row.tail)
        m.d.comb += [wr.en.eq(1), wr.data.end.eq(p.end), wr.data.aligned.eq(p.aligned),
                     wr.addr.eq(conn * D + Mux(merge, row.tail - 1, row.tail)[:bits])]
        self._store(m, conn, row.head, Mux(merge, row.tail, row.tail + 1), ~p.aligned, D)

    def _release(self, m, rd, conn, q, at, una, bits, D):
        """Drop the oldest records while they end at or before ``una`` (two cycles a
        record: its read, then the compare); the queue's new head written back."""
        reading = Signal()
        m.d.comb += [rd.addr.eq(conn * D + at[:bits]), rd.en.eq(1)]
        m.d.sync += reading.eq(~reading)
        acknowledged = seq_at_or_after(m, una, rd.data.end, "done")
        with m.If((at == q.tail) | (reading & ~acknowledged)):
            self._store(m, conn, q.head, q.tail, q.streaming, D)
            m.d.sync += reading.eq(0)
            m.next = "IDLE"
        with m.Elif(reading):
            m.d.sync += [q.head.eq(at + 1), at.eq(at + 1)]

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
