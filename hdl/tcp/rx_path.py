"""The engine's receive path: parser, front, event engine and delivery, with the
segments they answer with."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width
from rnic.host.spec.tcp import MAX_WINDOW_SCALE

from ..beat import OctetBeat, conn_bits
from ..net.layouts import FrameBeat
from ..stream_slice import StreamSlice
from .events import ConnEvent, TcbWrite, TcpDropEvent
from .layouts import TcpTxDesc
from .listeners import ListenerWrite
from .ring_read import TxRequest
from .rx_deliver import TcpRxDeliver
from .event_engine import TcpEventEngine
from .rx_front import TcpRxFront
from .rx_parse import TcpRxParse
from .send_cut import CutRecord, TcpSendCut
from .tcb import Tcb
from .timer_table import TcpTimerTable

__all__ = ["TcpRxPath"]

#: The engine's parameters (32-bit inputs; ``mss`` and ``rcv_scale`` narrower).
PARAMS = ("now", "secret", "rcv_wnd", "rto_initial", "rto_min", "rto_max", "delack",
          "time_wait")


class TcpRxPath(wiring.Component):
    """Received TCP segments in, delivered octets and answers out:
    :class:`~rnic.hdl.tcp.rx_parse.TcpRxParse` → :class:`~rnic.hdl.tcp.rx_front.TcpRxFront`
    → :class:`~rnic.hdl.tcp.event_engine.TcpEventEngine`, and the payload through
    :class:`~rnic.hdl.tcp.rx_deliver.TcpRxDeliver` as their actions say; the
    connections' delayed ACKs and TIME-WAIT through a
    :class:`~rnic.hdl.tcp.timer_table.TcpTimerTable`. What they send (RSTs and SYN-ACKs
    of the front, pure ACKs of the engine) leaves on ``tx``; the data segments the engine
    sends (cut at FPDU ends by a :class:`~rnic.hdl.tcp.send_cut.TcpSendCut`) leave on
    ``send`` for the ring reader.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    connections : int
    listeners : int
    records : int
        FPDU ends kept per connection (a power of 2).

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width)))
        The network layer's TCP frames
        (:attr:`rnic.hdl.net.network_layer.NetworkLayer.tcp`).
    o : Out(stream.Signature(OctetBeat(width=, connections=)))
        The octets delivered, in order per connection (the core's ``rx_wire``).
    tx : Out(stream.Signature(TcpTxDesc))
        Segments without payload to send (:class:`~rnic.hdl.tcp.tx_frame.TcpTxFrame`);
        registered.
    written : In(stream.Signature(CutRecord(connections=)))
        Octets written into a connection's send ring end at ``end`` (an FPDU's end when
        ``aligned``): the ring writer's reports.
    send : Out(stream.Signature(TxRequest(connections=)))
        Segments with octets of the ring, or our FIN
        (:class:`~rnic.hdl.tcp.ring_read.TcpRingRead`).
    room : Out(connections)
        Bit ``c``: connection ``c`` may write a run (a record of its ends is free).
    report : Out(stream.Signature(ConnEvent(connections=)))
    drops : Out(TcpDropEvent).array(2)
        The front's drops and the event engine's.
    listen : In(stream.Signature(ListenerWrite(entries=listeners)))
    write : In(stream.Signature(TcbWrite(connections=)))
    read_conn : In(conn_bits(connections))
    read_tcb : Out(Tcb)
        The event engine's table ports (between segments).
    now, secret, rcv_wnd, rto_initial, rto_min, rto_max, delack, time_wait : In(32)
    max_retries : In(8)
    mss : In(16)
    rcv_scale : In(range(15))

    Throughput: one segment at a time through the front and the engine (the
    :class:`~rnic.hdl.tcp.event_engine.TcpEventEngine` cycles and the front's); payload beats
    one per cycle.
    """

    def __init__(self, *, width, connections, listeners=4, records=16):
        self._width = check_width(width)
        self._records = records
        self._connections = connections
        self._listeners = listeners
        n = connections
        super().__init__({
            "i": In(stream.Signature(FrameBeat(width=width))),
            "o": Out(stream.Signature(OctetBeat(width=width, connections=n))),
            "tx": Out(stream.Signature(TcpTxDesc())),
            "written": In(stream.Signature(CutRecord(connections=n))),
            "send": Out(stream.Signature(TxRequest(connections=n))),
            "room": Out(n),
            "report": Out(stream.Signature(ConnEvent(connections=n))),
            "drops": Out(TcpDropEvent).array(2),
            "listen": In(stream.Signature(ListenerWrite(entries=listeners))),
            "write": In(stream.Signature(TcbWrite(connections=n))),
            "read_conn": In(conn_bits(n)),
            "read_tcb": Out(Tcb()),
            **{name: In(32) for name in PARAMS},
            "mss": In(16),
            "max_retries": In(8),
            "rcv_scale": In(range(MAX_WINDOW_SCALE + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._connections
        m.submodules.parse = parse = TcpRxParse(width=self._width)
        m.submodules.front = front = TcpRxFront(connections=n, listeners=self._listeners)
        m.submodules.engine = engine = TcpEventEngine(connections=n)
        m.submodules.deliver = deliver = TcpRxDeliver(width=self._width, connections=n)
        m.submodules.timers = timers = TcpTimerTable(connections=n)
        m.submodules.cuts = cuts = TcpSendCut(connections=n, depth=self._records)
        wiring.connect(m, wiring.flipped(self.i), parse.i)
        wiring.connect(m, parse.seg, front.seg)
        # the delivery's ready comes from the front's action: a slice keeps it off the
        # parser's header stage
        m.submodules.payload_slice = payload_slice = StreamSlice(FrameBeat(width=self._width))
        wiring.connect(m, parse.payload, payload_slice.i)
        wiring.connect(m, payload_slice.o, deliver.payload)
        wiring.connect(m, front.event, engine.event)
        wiring.connect(m, engine.action, front.engine_action)
        wiring.connect(m, engine.report, front.engine_report)
        wiring.connect(m, engine.free, front.free)
        wiring.connect(m, engine.arm, timers.arm)
        wiring.connect(m, timers.fired, engine.fired)
        m.d.comb += timers.now.eq(self.now)
        wiring.connect(m, engine.cut, cuts.cut)
        wiring.connect(m, cuts.answer, engine.answer)
        wiring.connect(m, engine.release, cuts.release)
        wiring.connect(m, engine.send, wiring.flipped(self.send))
        m.d.comb += self.room.eq(cuts.room)
        self._written(m, cuts.push, engine.written)
        wiring.connect(m, front.action, deliver.action)
        wiring.connect(m, deliver.o, wiring.flipped(self.o))
        wiring.connect(m, front.report, wiring.flipped(self.report))
        wiring.connect(m, wiring.flipped(self.listen), front.listen)
        for port, source in zip(self.drops, (front.drop, engine.drop)):
            m.d.comb += [port.valid.eq(source.valid), port.reason.eq(source.reason)]
        m.d.comb += [engine.read_conn.eq(self.read_conn), self.read_tcb.eq(engine.read_tcb)]
        for name in ("now", "rcv_wnd", "rto_initial"):
            m.d.comb += [getattr(front, name).eq(getattr(self, name)),
                         getattr(engine, name).eq(getattr(self, name))]
        for name in ("secret", "mss", "rcv_scale"):
            m.d.comb += getattr(front, name).eq(getattr(self, name))
        for name in ("rto_min", "rto_max", "delack", "time_wait", "max_retries"):
            m.d.comb += getattr(engine, name).eq(getattr(self, name))
        self._tables(m, front, engine)
        self._answers(m, front.reply, engine.ack)
        return m

    def _written(self, m, push, written):
        """Each report of octets written to both the cut's records and the engine (the
        record first: a cut never runs ahead of its records)."""
        taken = Signal()                    # the record is in; the engine's turn
        w = self.written
        m.d.comb += [push.payload.eq(w.payload), written.payload.conn.eq(w.payload.conn),
                     written.payload.seq.eq(w.payload.end),
                     push.valid.eq(w.valid & ~taken), written.valid.eq(w.valid & taken),
                     w.ready.eq(written.valid & written.ready)]
        with m.If(push.valid & push.ready):
            m.d.sync += taken.eq(1)
        with m.If(written.valid & written.ready):
            m.d.sync += taken.eq(0)

    def _tables(self, m, front, engine):
        """The engine's entries: the front's new connections, and the host's writes when
        the front has none."""
        w = engine.write
        with m.If(front.write.valid):
            m.d.comb += [w.valid.eq(1), w.payload.eq(front.write.payload),
                         front.write.ready.eq(w.ready)]
        with m.Else():
            m.d.comb += [w.valid.eq(self.write.valid), w.payload.eq(self.write.payload),
                         self.write.ready.eq(w.ready)]

    def _answers(self, m, reply, ack):
        """The front's replies and the engine's ACKs into one registered stream (the
        front's first)."""
        with m.If(self.tx.ready):
            m.d.sync += self.tx.valid.eq(0)
        with m.If(~self.tx.valid | self.tx.ready):
            with m.If(reply.valid):
                m.d.comb += reply.ready.eq(1)
                m.d.sync += [self.tx.valid.eq(1), self.tx.payload.eq(reply.payload)]
            with m.Elif(ack.valid):
                m.d.comb += ack.ready.eq(1)
                m.d.sync += [self.tx.valid.eq(1), self.tx.payload.eq(ack.payload)]
