"""The RNIC core's wire streams joined to the TCP engine's: see :class:`WireJoin`."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width

from .beat import OctetBeat, conn_bits
from .rnic_core.dp_tx import DataPortTx
from .tcp.registers import stream_signature
from .tcp.stream_rx import TcpStreamRx

__all__ = ["WireJoin"]


class WireJoin(wiring.Component):
    """Joins the core's ``tx_wire``/``rx_wire`` to TCP's, with the stream port (TCP_STREAM_*)
    through which the host moves a connection's octets while it is a byte stream.

    * Receive: TCP's octets of a connection in FPDU mode (``fpdu``) go to the core, those
      of a byte stream to the stream port's FIFO (:class:`~rnic.hdl.tcp.stream_rx.
      TcpStreamRx`, which never waits: what TCP acknowledged is kept or dropped and
      marked, never blocks the other connections).
    * Transmit: the core's runs and the stream port's (TCP_STREAM_TX_*, sent as they are,
      by :class:`~rnic.hdl.rnic_core.dp_tx.DataPortTx` from its own FIFO) take turns into
      TCP a whole run at a time, the stream port's first. TCP_STREAM_TX_CMD.CANCEL drops a
      stream run that waits for its connection's permission (a connection closed or reset
      never gets it again); so does the opening of a connection on the id the run waits
      for (``opened``): the run was meant for the connection that had the id before.
    * Permission: TCP's ``may_send`` bit of a connection means its ring has room for one
      more run. A run is under way from the moment its source chose it (the core's
      ``started``, the stream port's turn) until TCP takes its first beat, when TCP's own bit
      falls (as the first beat is taken); meanwhile ``core_may_send`` holds the
      connection's bit at 0, so that neither source begins a second run on it. A stream
      run begins only on a connection whose bit is set.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    connections : int
    tx_words : int
        32-bit words of the stream TX FIFO (default 512).
    rx_octets : int
        Octets of the stream RX FIFO (default 2048).

    Ports
    -----
    core_tx : In(stream.Signature(OctetBeat(width=, connections=)))
        The core's ``tx_wire``: runs of one FPDU each.
    core_rx : Out(stream.Signature(OctetBeat(width=, connections=)))
        The core's ``rx_wire``.
    tcp_tx : Out(stream.Signature(OctetBeat(width=, connections=)))
        TCP's ``tx_wire``: whole runs, one at a time.
    tcp_rx : In(stream.Signature(OctetBeat(width=, connections=)))
        TCP's ``rx_wire``.
    may_send : In(connections)
        TCP's ``may_send``.
    fpdu : In(connections)
        Bit ``c``: connection ``c`` carries FPDUs (TCP_CONN.FPDU by TCP_CMD.MODE).
    core_may_send : Out(connections)
        The core's ``may_send``: TCP's, less the connections with a run under way.
    core_started : In(stream.Signature(range(connections), always_ready=True))
        The core's ``tx_started``.
    opened : In(stream.Signature(range(connections), always_ready=True))
        TCP's ``opened``: a connection id taken by a new connection.
    regs : In(stream_signature())
        The TCP block's TCP_STREAM_* registers.
    push : In(stream.Signature(32, always_ready=True))
        A word written to TCP_STREAM_TX_DATA.

    Latency: on the receive side none to the core (a combinational split), a cycle to the
    stream port (a register; the port never waits); a run of either source is
    offered to TCP in the cycle after it was chosen, and a stream run is chosen in the
    cycle after its first beat is offered and its connection may send; ``may_send``
    reaches ``core_may_send`` a cycle later (a register). Throughput: a beat
    per cycle both ways; a cycle between runs on the transmit side.
    """

    def __init__(self, *, width, connections, tx_words=512, rx_octets=2048):
        check_width(width)
        self._width = width
        self._connections = connections
        self._tx_words = tx_words
        self._rx_octets = rx_octets
        beat = stream.Signature(OctetBeat(width=width, connections=connections))
        super().__init__({
            "core_tx": In(beat), "core_rx": Out(beat),
            "tcp_tx": Out(beat), "tcp_rx": In(beat),
            "may_send": In(connections), "fpdu": In(connections),
            "core_may_send": Out(connections),
            "core_started": In(stream.Signature(conn_bits(connections), always_ready=True)),
            "opened": In(stream.Signature(conn_bits(connections), always_ready=True)),
            "regs": In(stream_signature()),
            "push": In(stream.Signature(unsigned(32), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        W, N = self._width, self._connections
        m.submodules.stream_tx = stream_tx = DataPortTx(width=W, connections=N,
                                                        depth=self._tx_words)
        m.submodules.stream_rx = stream_rx = TcpStreamRx(width=W, connections=N,
                                                         octets=self._rx_octets)
        self._registers(m, stream_tx, stream_rx)
        self._receive(m, stream_rx)
        self._transmit(m, stream_tx)
        return m

    def _registers(self, m, stream_tx, stream_rx):
        """TCP_STREAM_* to the sender and the receive FIFO."""
        r, t, h = self.regs, stream_tx.regs, stream_rx.head
        m.d.comb += [
            t.dp_tx_cmd.send.eq(r.tcp_stream_tx_cmd.send),
            t.dp_tx_len.len.eq(r.tcp_stream_tx_len.len),
            t.dp_tx_conn.conn.eq(r.tcp_stream_tx_conn.conn),
            r.tcp_stream_tx_status.busy.eq(t.dp_tx_status.busy),
            r.tcp_stream_tx_status.free.eq(t.dp_tx_status.free),
            stream_tx.push.valid.eq(self.push.valid),
            stream_tx.push.payload.eq(self.push.payload),
            r.tcp_stream_rx_status.valid.eq(h.valid),
            r.tcp_stream_rx_status.truncated.eq(h.truncated),
            r.tcp_stream_rx_status.lost.eq(h.lost),
            r.tcp_stream_rx_status.len.eq(h.len),
            r.tcp_stream_rx_conn.conn.eq(h.conn),
            r.tcp_stream_rx_data.data.eq(h.data),
            h.pop.eq(r.tcp_stream_rx_cmd.pop),
            h.next.eq(r.tcp_stream_rx_cmd.next),
        ]

    def _receive(self, m, stream_rx):
        """TCP's octets to the core or to the stream port, by the connection's mode."""
        i, core, port = self.tcp_rx, self.core_rx, stream_rx.i
        to_core = self.fpdu.bit_select(i.payload.conn, 1)
        # the stream port never waits (TcpStreamRx keeps or drops): its beats pass a
        # register, which keeps TCP's delivery and the mode bit's lookup off its FIFOs'
        # write side
        to_port = Signal(name="to_stream_port")
        beat = Signal.like(i.payload, name="stream_port_beat")
        m.d.sync += [to_port.eq(i.valid & ~to_core), beat.eq(i.payload)]
        m.d.comb += [core.payload.eq(i.payload), port.payload.eq(beat),
                     core.valid.eq(i.valid & to_core), port.valid.eq(to_port),
                     i.ready.eq(~to_core | core.ready)]

    def _transmit(self, m, stream_tx):
        """The two sources' runs into TCP, and the permission bits."""
        N = self._connections
        o, core, port = self.tcp_tx, self.core_tx, stream_tx.o
        under_way = Signal(N)           # a run chosen, its first beat not yet at TCP
        chosen = Signal(N)              # the stream run chosen in this cycle
        begun = Signal(N)               # a run's first beat taken by TCP in this cycle
        started = Signal(N)             # the core started a run in this cycle
        # TCP's bits, registered (timing: they come from its ring room, which a run's first
        # beat taken through this block changes, and go on to the core's choice of a
        # connection: one path across three blocks otherwise). A run's bit has fallen in
        # the cycle TCP took its first beat, where ``under_way`` still holds it, so the
        # registered bit is 0 when ``under_way`` lets go.
        may = Signal(N, name="tcp_may_send")
        m.d.sync += may.eq(self.may_send)
        port_conn = port.payload.conn
        port_may = (may & ~under_way).bit_select(port_conn, 1)
        with m.If(o.valid & o.ready & o.payload.first):
            m.d.comb += begun.eq(1 << o.payload.conn)
        with m.If(self.core_started.valid):
            m.d.comb += started.eq(1 << self.core_started.payload)
        m.d.sync += under_way.eq((under_way & ~begun) | started | chosen)
        m.d.comb += self.core_may_send.eq(may & ~under_way & ~chosen)
        cancel = Signal()               # a CANCEL waits for the stream run to drop
        busy = stream_tx.regs.dp_tx_status.busy
        with m.If(~busy):
            m.d.sync += cancel.eq(0)
        # a run waiting for an id that a new connection takes was the previous one's
        # (reset or closed before the host knew): it never goes out on the new one
        # (TCP's ``opened`` registered: it comes from its engine's decisions; the new
        # connection's bit comes up in ``may`` no sooner than two cycles after it)
        stale = Signal()
        opened = Signal(name="opened_r")
        opened_conn = Signal.like(self.opened.payload, name="opened_conn")
        m.d.sync += [opened.eq(self.opened.valid), opened_conn.eq(self.opened.payload)]
        m.d.comb += stale.eq(opened & port.valid & (opened_conn == port_conn))
        with m.If((self.regs.tcp_stream_tx_cmd.cancel & busy) | stale):
            m.d.sync += cancel.eq(1)
        with m.FSM(name="runs"):
            with m.State("CHOOSE"):
                with m.If(port.valid & (cancel | stale)):
                    m.next = "DROP"
                with m.Elif(port.valid & port_may):
                    m.d.comb += chosen.eq(1 << port_conn)
                    m.next = "STREAM"
                with m.Elif(core.valid):
                    m.next = "CORE"
            with m.State("DROP"):
                m.d.comb += port.ready.eq(1)
                with m.If(port.valid & port.payload.last):
                    m.d.sync += cancel.eq(0)
                    m.next = "CHOOSE"
            for name, source in (("STREAM", port), ("CORE", core)):
                with m.State(name):
                    m.d.comb += [o.valid.eq(source.valid), source.ready.eq(o.ready),
                                 o.payload.data.eq(source.payload.data),
                                 o.payload.n.eq(source.payload.n),
                                 o.payload.first.eq(source.payload.first),
                                 o.payload.last.eq(source.payload.last),
                                 o.payload.conn.eq(source.payload.conn)]
                    with m.If(o.valid & o.ready & o.payload.last):
                        m.next = "CHOOSE"
