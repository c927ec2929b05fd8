"""The engine's receive path: parser, front, event engine and delivery, with the
segments they answer with."""

from amaranth.hdl import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width
from rnic.host.spec.tcp import MAX_WINDOW_SCALE

from ..beat import OctetBeat, conn_bits
from ..net.layouts import FrameBeat
from ..stream_merge import StreamMerge
from ..stream_slice import StreamSlice
from .events import (ConnCommand, ConnectAnswer, ConnectRequest, ConnEvent, Opened, TcbWrite,
                     TcpDropEvent)
from .layouts import TcpSegInfo, TcpTxDesc
from .listeners import ListenerWrite
from .ring_read import TxRequest
from .rx_deliver import TcpRxDeliver
from .event_engine import TcpEventEngine
from .rx_front import TcpRxFront
from .rx_parse import TcpRxParse
from .ring_write import RingPosition
from .send_cut import CutRecord, ReleaseRequest, TcpSendCut
from .tcb import Tcb
from .timer_table import TcpTimerTable

__all__ = ["TcpRxPath", "control_ports"]

#: The engine's parameters (32-bit inputs; ``mss`` and ``rcv_scale`` narrower).
PARAMS = ("now", "secret", "rcv_wnd", "rto_initial", "rto_min", "rto_max", "delack",
          "time_wait", "tx_ring")


def control_ports(*, connections, listeners, params=PARAMS):
    """The ports the engine is set up, commanded and watched through (``report`` to
    ``max_retries`` of :class:`TcpRxPath`, and of :class:`~rnic.hdl.tcp.offload.TcpOffload`,
    with its 32-bit ``params``)."""
    n = connections
    return {
        "report": Out(stream.Signature(ConnEvent(connections=n))),
        "drops": Out(TcpDropEvent).array(2),
        "listen": In(stream.Signature(ListenerWrite(entries=listeners))),
        "write": In(stream.Signature(TcbWrite(connections=n))),
        "command": In(stream.Signature(ConnCommand(connections=n))),
        "connect": In(stream.Signature(ConnectRequest())),
        "connect_answer": Out(stream.Signature(ConnectAnswer(connections=n))),
        "read_conn": In(conn_bits(n)),
        "read_tcb": Out(Tcb()),
        "read_valid": Out(1),
        "active": Out(1),
        "retransmit": Out(1),
        **{name: In(32) for name in params},
        "mss": In(16),
        "rcv_scale": In(range(MAX_WINDOW_SCALE + 1)),
        "max_retries": In(8),
    }


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
    ended : In(stream.Signature(CutRecord(connections=)))
        A run the core wrote into a connection's send ring ends at ``end`` (an FPDU's end
        when ``aligned``): the ring writer's ``ended``, for the cut's records.
    written : In(stream.Signature(RingPosition(connections=)))
        A connection's octets are in its ring up to ``seq``: the ring writer's
        ``written`` (never before the same run's ``ended``), which the engine sends from.
    send : Out(stream.Signature(TxRequest(connections=)))
        Segments with octets of the ring, or our FIN
        (:class:`~rnic.hdl.tcp.ring_read.TcpRingRead`).
    room : Out(connections)
        Bit ``c``: connection ``c`` may write a run (a record of its ends is free).
    opened : Out(stream.Signature(Opened(connections=)))
        Each entry written into the engine's table (a connection the front opened, or the
        host's write) with its ``data_end`` (where its ring starts) and whether it is the
        echo service.
    released : Out(stream.Signature(ReleaseRequest(connections=)))
        Each release of the cut's records: the octets of ``conn`` before ``una`` are
        acknowledged, or (``reset``) the connection is freed.
    report : Out(stream.Signature(ConnEvent(connections=)))
    drops : Out(TcpDropEvent).array(2)
        The front's drops and the event engine's.
    listen : In(stream.Signature(ListenerWrite(entries=listeners)))
    write : In(stream.Signature(TcbWrite(connections=)))
    command : In(stream.Signature(ConnCommand(connections=)))
    connect : In(stream.Signature(ConnectRequest))
    connect_answer : Out(stream.Signature(ConnectAnswer(connections=)))
        Active opens (the front's) and what became of each.
    read_conn : In(conn_bits(connections))
    read_tcb : Out(Tcb)
    read_valid : Out(1)
        The event engine's table ports (``read_tcb`` is ``read_conn``'s entry while
        ``read_valid``: between events).
    active : Out(1)
        Some connection id is in use (the time base's ticks matter).
    retransmit : Out(1)
        A segment of sequence space sent before went to ``send`` (the event engine's).
    now, secret, rcv_wnd, rto_initial, rto_min, rto_max, delack, time_wait, tx_ring : In(32)
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
            "ended": In(stream.Signature(CutRecord(connections=n))),
            "written": In(stream.Signature(RingPosition(connections=n))),
            "opened": Out(stream.Signature(Opened(connections=n))),
            "released": Out(stream.Signature(ReleaseRequest(connections=n))),
            "send": Out(stream.Signature(TxRequest(connections=n))),
            "room": Out(n),
            **control_ports(connections=n, listeners=listeners),
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
        # the front's ready (none of its outputs pending) stays off the parser's stages:
        # a slice of one register (a report per segment, whose frame of 54 octets or more
        # lasts two beats at least at any width)
        m.submodules.seg_slice = seg_slice = StreamSlice(TcpSegInfo(), full_rate=False)
        wiring.connect(m, parse.seg, seg_slice.i)
        wiring.connect(m, seg_slice.o, front.seg)
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
        self._copied(m, engine.release, cuts.release, self.released)
        wiring.connect(m, engine.send, wiring.flipped(self.send))
        m.d.comb += self.room.eq(cuts.room)
        wiring.connect(m, wiring.flipped(self.ended), cuts.push)
        wiring.connect(m, wiring.flipped(self.written), engine.written)
        wiring.connect(m, front.action, deliver.action)
        wiring.connect(m, deliver.o, wiring.flipped(self.o))
        wiring.connect(m, front.report, wiring.flipped(self.report))
        wiring.connect(m, wiring.flipped(self.listen), front.listen)
        wiring.connect(m, wiring.flipped(self.command), engine.command)
        wiring.connect(m, wiring.flipped(self.connect), front.connect)
        wiring.connect(m, front.connect_answer, wiring.flipped(self.connect_answer))
        for port, source in zip(self.drops, (front.drop, engine.drop)):
            m.d.comb += [port.valid.eq(source.valid), port.reason.eq(source.reason)]
        m.d.comb += [engine.read_conn.eq(self.read_conn), self.read_tcb.eq(engine.read_tcb),
                     self.read_valid.eq(engine.read_valid), self.active.eq(front.active),
                     self.retransmit.eq(engine.retransmit)]
        for name in ("now", "rcv_wnd", "rto_initial", "tx_ring"):
            m.d.comb += [getattr(front, name).eq(getattr(self, name)),
                         getattr(engine, name).eq(getattr(self, name))]
        for name in ("secret", "mss", "rcv_scale"):
            m.d.comb += getattr(front, name).eq(getattr(self, name))
        for name in ("mss", "rcv_scale"):
            m.d.comb += getattr(engine, name).eq(getattr(self, name))
        for name in ("rto_min", "rto_max", "delack", "time_wait", "max_retries"):
            m.d.comb += getattr(engine, name).eq(getattr(self, name))
        self._tables(m, front, engine)
        # the front's replies and the engine's ACKs into one registered stream, the
        # front's first
        m.submodules.answers = answers = StreamMerge(TcpTxDesc(), inputs=2)
        wiring.connect(m, front.reply, answers.i[0])
        wiring.connect(m, engine.ack, answers.i[1])
        wiring.connect(m, answers.o, wiring.flipped(self.tx))
        return m

    @staticmethod
    def _copied(m, source, sink, copy):
        """``source`` to ``sink``, and what ``sink`` takes to ``copy`` (registered; the next
        waits until it is taken)."""
        m.d.comb += [sink.payload.eq(source.payload),
                     sink.valid.eq(source.valid & ~copy.valid),
                     source.ready.eq(sink.ready & ~copy.valid)]
        with m.If(copy.ready):
            m.d.sync += copy.valid.eq(0)
        with m.If(sink.valid & sink.ready):
            m.d.sync += [copy.valid.eq(1), copy.payload.eq(source.payload)]

    def _tables(self, m, front, engine):
        """The engine's entries: the front's new connections, and the host's writes when
        the front has none; each entry's ring position (its ``data_end``) on ``opened``
        (registered; the next entry waits until it is taken)."""
        w, opened = engine.write, self.opened
        source = Mux(front.write.valid, front.write.payload, self.write.payload)
        m.d.comb += [w.payload.eq(source),
                     w.valid.eq((front.write.valid | self.write.valid) & ~opened.valid),
                     front.write.ready.eq(w.ready & ~opened.valid),
                     self.write.ready.eq(w.ready & ~opened.valid & ~front.write.valid)]
        with m.If(opened.ready):
            m.d.sync += opened.valid.eq(0)
        with m.If(w.valid & w.ready):
            m.d.sync += [opened.valid.eq(1), opened.payload.conn.eq(w.payload.conn),
                         opened.payload.seq.eq(w.payload.tcb.data_end),
                         opened.payload.echo.eq(w.payload.tcb.recv.echo)]
