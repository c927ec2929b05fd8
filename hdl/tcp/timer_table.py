"""The engine's timers: one deadline per connection, scanned against the time base."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import conn_bits
from .seq import seq_at_or_after

__all__ = ["TcpTimerTable", "TimerArm"]


class TimerArm(data.StructLayout):
    """Connection ``conn``'s next deadline (a time-base value) when ``armed``, else none."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "armed": 1, "deadline": 32})


class TcpTimerTable(wiring.Component):
    """Tells which connections' deadlines have passed.

    The engine keeps, per connection, the earliest of its timers (retransmission, delayed
    ACK, persist, TIME-WAIT) here through ``arm``; the table visits one connection a cycle,
    round robin, and reports on ``fired`` each armed connection whose deadline is not after
    ``now`` (compared as sequence numbers: the time base wraps). A reported connection is
    not reported again until it is armed again: the engine, which looks at the
    connection's own timers when it handles the report, always writes its next deadline
    (or disarms it) then. A report may come for a deadline that was changed since the
    table read it; the engine finds no timer due then and arms the connection again.

    Parameters
    ----------
    connections : int
        Connection ids.

    Ports
    -----
    now : In(32)
        The time base (ticks).
    arm : In(stream.Signature(TimerArm(connections=)))
        Always ready.
    fired : Out(stream.Signature(conn_bits(connections)))
        A connection whose deadline passed; the scan waits while one is not taken.

    Latency: a connection is reported at most ``connections + 3`` cycles after its deadline
    passed, plus a cycle for each report ahead of it (while ``fired`` is taken at once).
    Throughput: one connection visited a cycle; a report holds the scan for a cycle.
    """

    def __init__(self, *, connections):
        self._connections = connections
        super().__init__({
            "now": In(32),
            "arm": In(stream.Signature(TimerArm(connections=connections))),
            "fired": Out(stream.Signature(conn_bits(connections))),
        })

    def elaborate(self, platform):
        m = Module()
        N = self._connections
        entry = data.StructLayout({"armed": 1, "deadline": 32})
        m.submodules.table = table = memory.Memory(shape=entry, depth=N, init=[])
        rd = table.read_port()
        wr = table.write_port()
        pending = Signal(N)                 # reported and not armed since

        visit = Signal(range(N))            # the connection being read
        looked = Signal(range(N))           # the connection whose entry is on rd.data
        m.d.comb += [self.arm.ready.eq(1), wr.addr.eq(self.arm.payload.conn),
                     wr.data.armed.eq(self.arm.payload.armed),
                     wr.data.deadline.eq(self.arm.payload.deadline),
                     wr.en.eq(self.arm.valid)]

        due = Signal()
        m.d.comb += due.eq(rd.data.armed & seq_at_or_after(m, self.now, rd.data.deadline, "late")
                           & ~pending.bit_select(looked, 1))
        # the scan waits while a report is out, taken or not (the engine's ready, decided in
        # its idle state, stays off the compare and the pending set)
        hold = self.fired.valid
        with m.If(self.fired.ready):
            m.d.sync += self.fired.valid.eq(0)
        # (while the scan holds, the entry it stopped at is read again: an arm meanwhile
        # is seen)
        m.d.comb += rd.addr.eq(Mux(hold, looked, visit))
        with m.If(~hold):
            m.d.sync += [looked.eq(visit), visit.eq(Mux(visit == N - 1, 0, visit + 1))]
            with m.If(due):
                m.d.sync += [self.fired.valid.eq(1), self.fired.payload.eq(looked),
                             pending.bit_select(looked, 1).eq(1)]
        with m.If(self.arm.valid):
            # (an arm after the report's cycle makes the connection reportable again, also
            # while the report waits to be taken; one in its cycle is the report's: the
            # engine reads the connection's timers when it takes the report)
            m.d.sync += pending.bit_select(self.arm.payload.conn, 1).eq(0)
            with m.If(~hold & due & (self.arm.payload.conn == looked)):
                m.d.sync += pending.bit_select(looked, 1).eq(1)
        return m
