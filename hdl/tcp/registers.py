"""The register map's TCP block (TCP_*) in front of the engine: parameters, the time base,
listening ports, commands, the event queue, the TCB window and the drop counters."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import TCP_BLOCK as TCP_REGISTERS
from rnic.host.spec.regmap import TCP_COUNTER_WORDS, TCP_DROP_COUNTERS, TCP_PARAMS
from rnic.host.spec.tcp_engine import TcpCommand

from ..counter_memory import CounterMemory, count_registers, register_word
from ..beat import conn_bits
from ..regbank import core_signature
from .events import ConnEvent
from .tcb import Tcb

__all__ = ["TcpRegisters", "EVENT_DEPTH", "STREAM_PREFIX", "stream_signature",
           "engine_signature"]

#: The TCP block's registers of the stream port (the wire join's, not the engine's).
STREAM_PREFIX = "TCP_STREAM_"


def stream_signature():
    """The bank's TCP_STREAM_* registers, seen from the bank."""
    return core_signature(registers={r.name for r in TCP_REGISTERS.registers
                                     if r.name.startswith(STREAM_PREFIX)})


def engine_signature():
    """The bank's TCP block but the stream port, seen from the bank."""
    return core_signature(registers={r.name for r in TCP_REGISTERS.registers
                                     if not r.name.startswith(STREAM_PREFIX)})

#: Connection events the queue behind TCP_EVENT holds; more are dropped and counted.
EVENT_DEPTH = 64


#: The TCB window's registers: ``(register, field, the Tcb field it shows)``.
_TCB_FIELDS = (
    ("tcp_tcb_state", "state", ("state",)), ("tcp_tcb_state", "echo", ("recv", "echo")),
    ("tcp_tcb_state", "retries", ("send", "retries")),
    ("tcp_tcb_remote_ip", "value", ("remote_ip",)),
    ("tcp_tcb_ports", "local", ("local_port",)), ("tcp_tcb_ports", "remote", ("remote_port",)),
    ("tcp_tcb_snd_una", "value", ("send", "snd_una")),
    ("tcp_tcb_snd_nxt", "value", ("send", "snd_nxt")),
    ("tcp_tcb_rcv_nxt", "value", ("recv", "rcv_nxt")),
    ("tcp_tcb_snd_wnd", "value", ("send", "snd_wnd")),
    ("tcp_tcb_cwnd", "value", ("send", "cwnd")),
    ("tcp_tcb_rto", "value", ("rtt", "rto")),
    ("tcp_tcb_mss", "mss", ("send", "send_mss")),
)


def counter_word(name):
    """The TCP counter memory's word of counter register ``name``."""
    return register_word(name, TCP_COUNTER_WORDS)


class TcpRegisters(wiring.Component):
    """The TCP block of the register map driving a
    :class:`~rnic.hdl.tcp.offload.TcpOffload` (the meaning of each register is in
    :mod:`rnic.host.spec.regmap`).

    Parameters
    ----------
    control : wiring.Signature
        The engine's control ports as the engine sees them (``report`` .. ``ring_log2``:
        :func:`~rnic.hdl.tcp.rx_path.control_ports` and the ring's); this component has
        them flipped, to be joined port by port.
    connections, listeners, records : int
        The engine's sizes (TCP_CAPS; the connection bits of TCP_CONN.CONN).
    ring_log2 : int
        The largest ring the ring memory holds for every connection (TCP_CAPS.RING_LOG2).

    Ports
    -----
    regs : In(engine_signature())
        The register bank's TCP block but the stream port (TCP_STREAM_*).
    control
        The engine's control ports, flipped (parameters, ``now``, ``listen``,
        ``command``, ``connect``, ``write`` (never valid here), ``report``, ``drops``,
        ``read_conn`` ..).
    fpdu : Out(connections)
        Bit ``c``: connection ``c``'s mode (TCP_CMD.MODE), 0 after reset and from the
        cycle after ``opened`` names it.
    opened : In(stream.Signature(range(connections), always_ready=True))
        A connection opens (it starts as a byte stream).
    tick : In(1)
        One pulse advances the time base by a tick (besides TCP_TICK.CYCLES).
    sent : In(1)
        A segment left the engine (TCP_TX_SEGMENTS).
    counter_addr : In(range(TCP_COUNTER_WORDS))
        The register bus's read word address (its low bits): the counters' read port
        follows it, so that their word is there when the bank samples it.

    Latency: a command or a listener write reaches the engine 2 cycles after its pulse;
    an event is at TCP_EVENT 2 cycles after the engine reports it; the TCB window follows
    TCP_CONN within a few cycles whenever the engine is between events.
    """

    def __init__(self, *, control, connections, listeners, records, ring_log2):
        self._connections = connections
        self._ring_log2 = ring_log2
        self._listeners = listeners
        self._records = records
        super().__init__({
            "regs": In(engine_signature()),
            **{name: member.flip() for name, member in control.members.items()},
            "fpdu": Out(connections),
            "opened": In(stream.Signature(conn_bits(connections), always_ready=True)),
            "tick": In(1),
            "sent": In(1),
            "counter_addr": In(range(TCP_COUNTER_WORDS)),
        })

    def elaborate(self, platform):
        m = Module()
        r = self.regs
        m.d.comb += [r.tcp_caps.tcp.eq(1), r.tcp_caps.listeners.eq(self._listeners),
                     r.tcp_caps.records.eq(self._records),
                     r.tcp_caps.ring_log2.eq(self._ring_log2)]
        for name, (register, field) in TCP_PARAMS.items():
            if name != "tick_cycles":           # (the time base's, below)
                m.d.comb += getattr(self, name).eq(getattr(getattr(r, register.lower()),
                                                                field.lower()))
        self._time_base(m, r)
        self._requests(m, r)
        self._connects(m, r)
        self._events(m, r)
        self._tcb_window(m, r)
        with m.If(r.tcp_cmd.mode):
            m.d.sync += self.fpdu.bit_select(r.tcp_conn.conn[:len(self.read_conn)], 1).eq(
                r.tcp_conn.fpdu)
        with m.If(self.opened.valid):
            m.d.sync += self.fpdu.bit_select(self.opened.payload, 1).eq(0)
        m.d.comb += self.write.valid.eq(0)
        return m

    def _time_base(self, m, r):
        """``now``: a tick every TCP_TICK.CYCLES cycles (none while 0) and on ``tick``."""
        cycles = Signal(32)
        period = r.tcp_tick.cycles
        due = (period != 0) & (cycles + 1 >= period)
        m.d.sync += cycles.eq(cycles + 1)
        with m.If(due | (period == 0)):
            m.d.sync += cycles.eq(0)
        with m.If(due | self.tick):
            m.d.sync += self.now.eq(self.now + 1)
        m.d.comb += r.tcp_now.ticks.eq(self.now)

    def _requests(self, m, r):
        """TCP_CMD.LISTEN to the listener table, CLOSE and ABORT to the engine: each waits
        in a register until taken (a CLOSE or ABORT while one waits is ignored:
        TCP_STATUS.CMD_BUSY)."""
        listen, command = self.listen, self.command
        conn = r.tcp_conn.conn[:len(self.read_conn)]
        for port in (listen, command):
            with m.If(port.ready):
                m.d.sync += port.valid.eq(0)
        with m.If(r.tcp_cmd.listen):
            m.d.sync += [listen.valid.eq(1),
                         listen.payload.index.eq(r.tcp_listen.index),
                         listen.payload.valid.eq(r.tcp_listen.valid),
                         listen.payload.echo.eq(r.tcp_listen.echo),
                         listen.payload.port.eq(r.tcp_listen.port)]
        with m.If((r.tcp_cmd.close | r.tcp_cmd.abort) & ~command.valid):
            m.d.sync += [command.valid.eq(1), command.payload.conn.eq(conn),
                         command.payload.kind.eq(
                             Mux(r.tcp_cmd.abort, TcpCommand.ABORT, TcpCommand.CLOSE))]
        m.d.comb += r.tcp_status.cmd_busy.eq(command.valid)

    def _connects(self, m, r):
        """TCP_CMD.CONNECT to the engine (ignored while one is BUSY: sent and not yet
        answered); its answer into TCP_CONNECT_STATUS."""
        request, answer = self.connect, self.connect_answer
        busy, done = Signal(), Signal()
        conn = Signal.like(answer.payload.conn)
        result = Signal.like(answer.payload.result)
        with m.If(request.ready):
            m.d.sync += request.valid.eq(0)
        with m.If(r.tcp_cmd.connect & ~busy):
            p = request.payload
            m.d.sync += [request.valid.eq(1), busy.eq(1), p.remote_ip.eq(r.tcp_connect_ip.addr),
                         p.remote_port.eq(r.tcp_connect_ports.remote),
                         p.local_port.eq(r.tcp_connect_ports.local),
                         p.iss.eq(r.tcp_connect_iss.iss), p.echo.eq(r.tcp_conn.echo)]
        m.d.comb += answer.ready.eq(1)
        with m.If(answer.valid):
            m.d.sync += [busy.eq(0), done.eq(1), conn.eq(answer.payload.conn),
                         result.eq(answer.payload.result)]
        s = r.tcp_connect_status
        m.d.comb += [s.conn.eq(conn), s.result.eq(result), s.busy.eq(busy), s.done.eq(done)]

    def _events(self, m, r):
        """The engine's reports into a queue (TCP_EVENT, TCP_CMD.POP); a report that finds
        it full is dropped (TCP_EVENTS_LOST): the engine never waits for the host. The
        drops and the segments sent into the counter memory."""
        layout = ConnEvent(connections=self._connections)
        m.submodules.events = fifo = SyncFIFOBuffered(width=layout.size, depth=EVENT_DEPTH)
        report = self.report
        m.d.comb += [report.ready.eq(1), fifo.w_data.eq(report.payload),
                     fifo.w_en.eq(report.valid)]
        head = layout(fifo.r_data)
        m.d.comb += [r.tcp_event.valid.eq(fifo.r_rdy), r.tcp_event.conn.eq(head.conn),
                     r.tcp_event.kind.eq(head.kind), fifo.r_en.eq(r.tcp_cmd.pop)]

        m.submodules.counters = counters = CounterMemory(counters=TCP_COUNTER_WORDS)
        events = {name: self._dropped(m, reason, name) for reason, name in TCP_DROP_COUNTERS}
        events["TCP_TX_SEGMENTS"] = self.sent
        events["TCP_EVENTS_LOST"] = report.valid & ~fifo.w_rdy
        events["TCP_RETRANSMITS"] = self.retransmit
        count_registers(m, counters, TCP_COUNTER_WORDS, events, r)
        m.d.comb += counters.addr.eq(self.counter_addr)

    def _dropped(self, m, reason, name):
        """The event of drop counter ``name``: either source's drop of ``reason``; both in
        one cycle count one now and one in the next cycle."""
        hits = [drop.valid & (drop.reason == reason) for drop in self.drops]
        carry = Signal(name=f"{name.lower()}_carry")
        m.d.sync += carry.eq(hits[0] & hits[1])
        return hits[0] | hits[1] | carry

    def _tcb_window(self, m, r):
        """TCP_CONN's entry, latched while the engine shows it (between events)."""
        m.d.comb += self.read_conn.eq(r.tcp_conn.conn)
        shown = Signal(Tcb())
        with m.If(self.read_valid):
            m.d.sync += shown.eq(self.read_tcb)
        for register, field, path in _TCB_FIELDS:
            value = shown
            for part in path:
                value = getattr(value, part)
            m.d.comb += getattr(getattr(r, register), field).eq(value)
