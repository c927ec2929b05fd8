"""Which connections may write a run into their send ring."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import conn_bits
from .ring_write import RingPosition
from .send_cut import ReleaseRequest

__all__ = ["TcpRingRoom", "RunBegan"]


def RunBegan(connections):
    """A pulse: ``valid`` for one cycle when a run's first beat is taken on ``conn``."""
    return wiring.Signature({"valid": Out(1), "conn": Out(conn_bits(connections))})


class _Update(enum.Enum, shape=1):
    ENDED = 0               # a run ended: the ring's end moved
    RELEASED = 1            # octets acknowledged: the ring's start moved


class TcpRingRoom(wiring.Component):
    """Keeps each connection's send ring occupancy: from its start (SND.UNA, as the
    engine's releases move it) to the end of the last run the core wrote (as the ring
    writer's ``ended`` moves it). Bit ``c`` of ``room`` says connection ``c`` may begin a
    run of up to ``max_run`` octets: it is open (``opened``, until a ``released`` with
    ``reset``), its octets and ``max_run`` more fit the ring (``2**ring_log2`` octets), and
    no run of it is under way (from the run's first beat, ``began``, until its ``ended``
    is counted).

    Parameters
    ----------
    connections : int

    Ports
    -----
    began : In(RunBegan(connections))
        The core's runs as they begin (its ``tx_wire``'s first beats).
    ended : In(stream.Signature(RingPosition(connections=)))
        The ring writer's ``ended``. Ready whenever the updates are idle, whatever
        ``valid`` is.
    opened : In(stream.Signature(RingPosition(connections=)))
        A connection's ring starts (empty) at ``seq``. Ready as ``ended``, when no
        ``ended`` waits.
    released : In(stream.Signature(ReleaseRequest(connections=)))
        The engine's releases. Ready as ``opened``, when neither waits.
    ring_log2 : In(5)
    max_run : In(17)
        Quasi-static.
    room : Out(connections)

    Latency: a ring's end or start moved updates its bit 3 cycles after it is taken; the
    bit of a run's connection falls in the cycle its first beat is taken. Throughput: one
    update per 3 cycles; an ``opened`` or a reset in one cycle.
    """

    def __init__(self, *, connections):
        self._connections = connections
        n = connections
        position = stream.Signature(RingPosition(connections=n))
        super().__init__({
            "began": In(RunBegan(n)),
            "ended": In(position),
            "opened": In(position),
            "released": In(stream.Signature(ReleaseRequest(connections=n))),
            "ring_log2": In(5),
            "max_run": In(17),
            "room": Out(n),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._connections
        m.submodules.ends = ends = memory.Memory(shape=32, depth=n, init=[])
        m.submodules.starts = starts = memory.Memory(shape=32, depth=n, init=[])
        end_rd, end_wr = ends.read_port(), ends.write_port()
        start_rd, start_wr = starts.read_port(), starts.write_port()
        fits = Signal(n)                    # the ring has room for a run, when last counted
        live = Signal(n)                    # opened, not freed
        pending = Signal(n)                 # a run began, its end not yet counted
        began = Signal(n)
        with m.If(self.began.valid):
            m.d.comb += began.eq(1 << self.began.conn)
        m.d.comb += self.room.eq(fits & live & ~pending & ~began)

        # the most octets a ring may hold when a run begins (registered: quasi-static)
        self._most = Signal(signed(34), name="most")
        m.d.sync += self._most.eq((1 << self.ring_log2) - self.max_run)

        conn = Signal(conn_bits(n))
        kind = Signal(_Update)
        moved = Signal(32)                  # the end (ENDED) or start (RELEASED) taken
        used = Signal(32)
        with m.FSM():
            with m.State("IDLE"):
                e, o, r = self.ended, self.opened, self.released
                m.d.comb += [e.ready.eq(1), o.ready.eq(~e.valid),
                             r.ready.eq(~e.valid & ~o.valid)]
                with m.If(e.valid):
                    m.d.comb += [end_wr.addr.eq(e.payload.conn), end_wr.data.eq(e.payload.seq),
                                 end_wr.en.eq(1), start_rd.addr.eq(e.payload.conn)]
                    m.d.sync += [conn.eq(e.payload.conn), moved.eq(e.payload.seq),
                                 kind.eq(_Update.ENDED)]
                    m.next = "USED"
                with m.Elif(o.valid):
                    c = o.payload.conn
                    m.d.comb += [end_wr.addr.eq(c), end_wr.data.eq(o.payload.seq), end_wr.en.eq(1),
                                 start_wr.addr.eq(c), start_wr.data.eq(o.payload.seq),
                                 start_wr.en.eq(1)]
                    m.d.sync += [live.bit_select(c, 1).eq(1),
                                 fits.bit_select(c, 1).eq(self._fits(0))]
                with m.Elif(r.valid & r.payload.reset):
                    m.d.sync += live.bit_select(r.payload.conn, 1).eq(0)
                with m.Elif(r.valid):
                    c = r.payload.conn
                    m.d.comb += [start_wr.addr.eq(c), start_wr.data.eq(r.payload.una),
                                 start_wr.en.eq(1), end_rd.addr.eq(c)]
                    m.d.sync += [conn.eq(c), moved.eq(r.payload.una),
                                 kind.eq(_Update.RELEASED)]
                    m.next = "USED"
            with m.State("USED"):
                end = Mux(kind == _Update.ENDED, moved, end_rd.data)
                start = Mux(kind == _Update.ENDED, start_rd.data, moved)
                m.d.sync += used.eq(end - start)
                m.next = "DECIDE"
            with m.State("DECIDE"):
                m.d.sync += fits.bit_select(conn, 1).eq(self._fits(used))
                with m.If(kind == _Update.ENDED):
                    m.d.sync += pending.bit_select(conn, 1).eq(0)
                m.next = "IDLE"
        # a run that begins now is under way, whatever an update of the cycle says
        with m.If(self.began.valid):
            m.d.sync += pending.bit_select(self.began.conn, 1).eq(1)
        return m

    def _fits(self, used):
        """``used`` octets and a run more fit the ring."""
        return used <= self._most
