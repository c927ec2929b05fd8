"""The whole TCP engine: the network layer's TCP frames in, the core's byte streams out and
in, the segments the connections send out to the IPv4 send path, the send rings in memory."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width

from ..axi import AXI4ReadSignature, AXI4WriteSignature
from ..beat import OctetBeat, conn_bits
from ..net.l3_layouts import Ipv4TxBeat
from ..net.layouts import FrameBeat
from ..stream_merge import StreamMerge
from ..stream_slice import StreamSlice
from .layouts import TcpTxDesc
from .ring_read import TcpRingRead, TxRequest
from .ring_room import TcpRingRoom
from .ring_write import RingPosition, TcpRingWrite
from .rx_path import PARAMS, TcpRxPath, control_ports
from .tx_frame import TcpTxFrame
from .tx_order import TcpTxOrder

__all__ = ["TcpOffload"]

#: The receive path's 32-bit parameters that are the engine's (a ring's size follows from
#: ``ring_log2``).
_PARAMS = tuple(name for name in PARAMS if name != "tx_ring")


class TcpOffload(wiring.Component):
    """TCP for ``connections`` connections between the network layer and the RNIC core.

    Received segments go through :class:`~rnic.hdl.tcp.rx_path.TcpRxPath` (parser, front,
    event engine, delivery) to ``rx_wire``. What the core sends on ``tx_wire`` goes into
    its connection's send ring (:class:`~rnic.hdl.tcp.ring_write.TcpRingWrite`); the event
    engine cuts it into segments at FPDU ends and sends them as the windows let go; each
    is read back from the ring (:class:`~rnic.hdl.tcp.ring_read.TcpRingRead`, the sending
    and every retransmission) and built (:class:`~rnic.hdl.tcp.tx_frame.TcpTxFrame`)
    together with the segments without payload (ACKs, RSTs, SYN-ACKs) for ``o``, in the
    order the engine sent them (:class:`~rnic.hdl.tcp.tx_order.TcpTxOrder`). ``i`` and
    ``o`` are register slices (:class:`~rnic.hdl.stream_slice.StreamSlice`: a cycle each
    way, a beat per cycle): no handshake runs combinationally between the engine and the
    network layer.
    ``may_send`` says per connection whether the core may begin a run
    (:class:`~rnic.hdl.tcp.ring_room.TcpRingRoom`: ring space for ``mss`` octets, and a
    free record of the cut), so a connection whose peer's window is closed holds back
    only itself. A connection of the echo service (accepted on a listening port with
    ``echo``) sends back what it receives: its octets go into its own ring instead of
    ``rx_wire`` (its window is its ring's room, so the receive path never waits for it),
    and its ``may_send`` bit is 0.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    connections : int
    listeners : int
    records : int
        FPDU ends kept per connection (a power of 2).
    addr_width : int
        Bits of a memory address.
    max_segment : int
        The most payload octets of a segment (the ring reader's store holds two).

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width)))
        The network layer's TCP frames (:attr:`rnic.hdl.net.network_layer.NetworkLayer.tcp`).
    o : Out(stream.Signature(Ipv4TxBeat(width)))
        Segments for the IPv4 send path (``NetworkLayer.ip_tx``).
    rx_wire : Out(stream.Signature(OctetBeat(width=, connections=)))
        Each connection's octets in order.
    tx_wire : In(stream.Signature(OctetBeat(width=, connections=)))
        Runs of one connection each, ``first`` to ``last``, at most ``mss`` octets; a run
        begins only on a connection whose ``may_send`` bit is set.
    may_send : Out(connections)
    fpdu : In(connections)
        Bit ``c``: connection ``c``'s runs are whole FPDUs (segments end at their ends);
        else a byte stream. Quasi-static per connection.
    opened : Out(stream.Signature(range(connections), always_ready=True))
        A connection opens (accepted, or its active open sent): a pulse with its id.
    m_axi_w : Out(AXI4WriteSignature(addr_width=, data_width=8 * width))
    m_axi_r : Out(AXI4ReadSignature(addr_width=, data_width=8 * width))
        The send rings: connection ``c``'s is ``2**ring_log2`` octets at
        ``ring_base + c * 2**ring_log2``.
    report : Out(stream.Signature(ConnEvent(connections=)))
    drops : Out(TcpDropEvent).array(2)
    listen : In(stream.Signature(ListenerWrite(entries=listeners)))
    write : In(stream.Signature(TcbWrite(connections=)))
    command : In(stream.Signature(ConnCommand(connections=)))
    connect : In(stream.Signature(ConnectRequest))
    connect_answer : Out(stream.Signature(ConnectAnswer(connections=)))
    read_conn : In(conn_bits(connections))
    read_tcb : Out(Tcb)
    read_valid, active, retransmit : Out(1)
        As :class:`~rnic.hdl.tcp.rx_path.TcpRxPath`'s.
    now, secret, rcv_wnd, rto_initial, rto_min, rto_max, delack, time_wait : In(32)
    mss : In(16)
    rcv_scale : In(range(15))
    max_retries : In(8)
    ip : In(32)
        The NIC's address (the checksum's pseudo-header).
    ring_base : In(addr_width)
    ring_log2 : In(5)

    Throughput: received segments as :class:`~rnic.hdl.tcp.rx_path.TcpRxPath`; the core's
    runs at a beat per cycle while the memory takes a write per cycle; segments sent at the
    memory's read rate.
    """

    def __init__(self, *, width, connections, listeners=4, records=16, addr_width=32,
                 max_segment=1460):
        self._width = check_width(width)
        self._connections = connections
        self._listeners = listeners
        self._records = records
        self._addr_width = addr_width
        self._max_segment = max_segment
        n = connections
        control = control_ports(connections=n, listeners=listeners, params=_PARAMS)
        #: The ports a register block drives or takes (:class:`~rnic.hdl.tcp.registers.
        #: TcpRegisters`): the control ports and the rings' place.
        self.control_names = (*control, "ring_base", "ring_log2")
        beat = stream.Signature(OctetBeat(width=width, connections=n))
        bus = dict(addr_width=addr_width, data_width=8 * width)
        super().__init__({
            "i": In(stream.Signature(FrameBeat(width=width))),
            "o": Out(stream.Signature(Ipv4TxBeat(width=width))),
            "rx_wire": Out(beat),
            "tx_wire": In(beat),
            "may_send": Out(n),
            "fpdu": In(n),
            "opened": Out(stream.Signature(conn_bits(n), always_ready=True)),
            "m_axi_w": Out(AXI4WriteSignature(**bus)),
            "m_axi_r": Out(AXI4ReadSignature(**bus)),
            **control,
            "ip": In(32),
            "ring_base": In(addr_width),
            "ring_log2": In(5),
        })

    def elaborate(self, platform):
        m = Module()
        n, W = self._connections, self._width
        m.submodules.path = path = TcpRxPath(width=W, connections=n,
                                              listeners=self._listeners, records=self._records)
        m.submodules.writer = writer = TcpRingWrite(width=W, connections=n,
                                                    addr_width=self._addr_width)
        m.submodules.reader = reader = TcpRingRead(width=W, connections=n,
                                                   addr_width=self._addr_width,
                                                   max_segment=self._max_segment)
        m.submodules.frame = frame = TcpTxFrame(width=W)
        m.submodules.room = room = TcpRingRoom(connections=n)
        # the segments without payload first once the data segments sent before them
        # have left the reader (TcpTxOrder): an ACK is owed at once, a data segment's
        # payload waits in the reader's store meanwhile
        m.submodules.descs = descs = StreamMerge(TcpTxDesc(), inputs=2)

        echo = Signal(n)                    # connections of the echo service
        # a slice at each end: the network layer's classifier and send arbiter compute
        # their ready from their own FIFOs and arbitration, the receive parser and the
        # frame builder theirs from the payload; joined, the two handshakes ran through
        # both blocks in one cycle
        m.submodules.i_slice = i_slice = StreamSlice(FrameBeat(width=W))
        m.submodules.o_slice = o_slice = StreamSlice(Ipv4TxBeat(width=W))
        wiring.connect(m, wiring.flipped(self.i), i_slice.i)
        wiring.connect(m, i_slice.o, path.i)
        echoed = self._delivered(m, path, echo)
        self._runs(m, writer, room, echoed)
        self._ends(m, writer, path, room, echo)
        # the writer's report of a run written waits for its last write's response (a
        # count compared): a register keeps that off the engine's choice of an event
        m.submodules.written = written = StreamSlice(RingPosition(connections=n),
                                                     full_rate=False)
        wiring.connect(m, writer.written, written.i)
        wiring.connect(m, written.o, path.written)
        self._opened(m, path, writer, room, echo)
        m.d.comb += [self.opened.valid.eq(path.opened.valid & path.opened.ready),
                     self.opened.payload.eq(path.opened.payload.conn)]
        wiring.connect(m, path.released, room.released)
        # the reader's handling of a request stays off the engine's registers (requests
        # are rare: a slice of one register)
        m.submodules.requests = requests = StreamSlice(TxRequest(connections=n),
                                                       full_rate=False)
        wiring.connect(m, path.send, requests.i)
        wiring.connect(m, requests.o, reader.req)
        m.submodules.order = order = TcpTxOrder()
        wiring.connect(m, path.tx, order.i)
        wiring.connect(m, order.o, descs.i[0])
        m.d.comb += [order.queued.eq(path.send.valid),
                     order.sent.eq(path.send.valid & path.send.ready),
                     order.left.eq(reader.desc.valid & reader.desc.ready)]
        wiring.connect(m, reader.desc, descs.i[1])
        wiring.connect(m, descs.o, frame.desc)
        wiring.connect(m, reader.payload, frame.payload)
        wiring.connect(m, frame.o, o_slice.i)
        wiring.connect(m, o_slice.o, wiring.flipped(self.o))
        wiring.connect(m, writer.m_axi, wiring.flipped(self.m_axi_w))
        wiring.connect(m, reader.m_axi, wiring.flipped(self.m_axi_r))
        m.d.comb += self.may_send.eq(path.room & room.room & ~echo)

        wiring.connect(m, path.report, wiring.flipped(self.report))
        for port, source in zip(self.drops, path.drops):
            m.d.comb += [port.valid.eq(source.valid), port.reason.eq(source.reason)]
        wiring.connect(m, wiring.flipped(self.listen), path.listen)
        wiring.connect(m, wiring.flipped(self.write), path.write)
        wiring.connect(m, wiring.flipped(self.command), path.command)
        wiring.connect(m, wiring.flipped(self.connect), path.connect)
        wiring.connect(m, path.connect_answer, wiring.flipped(self.connect_answer))
        m.d.comb += [path.read_conn.eq(self.read_conn), self.read_tcb.eq(path.read_tcb),
                     self.read_valid.eq(path.read_valid), self.active.eq(path.active),
                     self.retransmit.eq(path.retransmit)]
        for name in (*_PARAMS, "mss", "rcv_scale", "max_retries"):
            m.d.comb += getattr(path, name).eq(getattr(self, name))
        m.d.comb += path.tx_ring.eq(1 << self.ring_log2)
        m.d.comb += [frame.ip.eq(self.ip), room.ring_log2.eq(self.ring_log2),
                     room.max_run.eq(self.mss)]
        for block in (writer, reader):
            m.d.comb += [block.ring_base.eq(self.ring_base), block.ring_log2.eq(self.ring_log2)]
        return m

    def _delivered(self, m, path, echo):
        """The octets delivered: an echo connection's back to its ring (returned, a stream
        of runs), the others' to the core. A slice on each side of the split keeps the
        echo bit's lookup and the writer's ready off the delivery's registers."""
        shape = OctetBeat(width=self._width, connections=self._connections)
        m.submodules.delivered = delivered = StreamSlice(shape)
        m.submodules.echoed = echoed = StreamSlice(shape)
        wiring.connect(m, path.o, delivered.i)
        o, rx, back = delivered.o, self.rx_wire, echoed.i
        to_echo = echo.bit_select(o.payload.conn, 1)
        m.d.comb += [rx.payload.eq(o.payload), back.payload.eq(o.payload),
                     rx.valid.eq(o.valid & ~to_echo), back.valid.eq(o.valid & to_echo),
                     o.ready.eq(Mux(to_echo, back.ready, rx.ready))]
        return echoed.o

    def _runs(self, m, writer, room, echoed):
        """The core's runs and the echoed ones into the ring writer, a whole run at a time
        (the echo's first: the receive path must not wait), their beginnings to the room.
        The source is chosen a cycle before its run is offered, and held until its last
        beat is taken (the writer reads a run's connection before it takes its first
        beat)."""
        core, w = self.tx_wire, writer.i
        m.d.comb += [room.began.valid.eq(w.valid & w.ready & w.payload.first),
                     room.began.conn.eq(w.payload.conn)]
        with m.FSM(name="runs"):
            with m.State("CHOOSE"):
                with m.If(echoed.valid):
                    m.next = "ECHO"
                with m.Elif(core.valid):
                    m.next = "CORE"
            for name, source in (("ECHO", echoed), ("CORE", core)):
                with m.State(name):
                    m.d.comb += [w.valid.eq(source.valid), w.payload.eq(source.payload),
                                 source.ready.eq(w.ready)]
                    with m.If(w.valid & w.ready & w.payload.last):
                        m.next = "CHOOSE"

    def _ends(self, m, writer, path, room, echo):
        """Each run's end to the cut's records (aligned for a connection in FPDU mode; the
        echo's are byte stream) and to the room, both in one cycle (the room's ready does
        not depend on its valid)."""
        e = writer.ended
        conn = e.payload.conn
        aligned = self.fpdu.bit_select(conn, 1) & ~echo.bit_select(conn, 1)
        m.d.comb += [path.ended.payload.conn.eq(conn), path.ended.payload.end.eq(e.payload.seq),
                     path.ended.payload.aligned.eq(aligned),
                     room.ended.payload.eq(e.payload),
                     path.ended.valid.eq(e.valid & room.ended.ready),
                     room.ended.valid.eq(e.valid & path.ended.ready),
                     e.ready.eq(path.ended.ready & room.ended.ready)]

    @staticmethod
    def _opened(m, path, writer, room, echo):
        """Each connection's ring start to the writer and to the room, both in one cycle
        (the room's ready does not depend on its valid); whether it echoes."""
        o = path.opened
        for port in (writer.start, room.opened):
            m.d.comb += [port.payload.conn.eq(o.payload.conn), port.payload.seq.eq(o.payload.seq)]
        m.d.comb += [writer.start.valid.eq(o.valid & room.opened.ready),
                     room.opened.valid.eq(o.valid & writer.start.ready),
                     o.ready.eq(writer.start.ready & room.opened.ready)]
        with m.If(o.valid & o.ready):
            m.d.sync += echo.bit_select(o.payload.conn, 1).eq(o.payload.echo)
