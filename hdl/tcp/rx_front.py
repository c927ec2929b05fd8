"""Where each received segment goes: to its connection, to a listening port (SYN cookies),
or answered by a RST (the model's ``receive`` and ``_listener``)."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec
from rnic.host.spec.tcp import MAX_WINDOW_SCALE

from .accept import TcpAccept
from .conn_ids import TcpConnIds
from .conn_table import ConnTableOp, TcpConnTable
from .cookie import CookieVerdict, TcpCookie, cookie_mss_index
from .events import (ConnEvent, ConnectAnswer, ConnectRequest, FreeConn, RxEvent, TcbWrite,
                     TcpDropEvent)
from .front_connect import ConnectSteps
from .layouts import TcpSegInfo, TcpTxDesc
from .listeners import ListenerWrite, TcpListeners
from .reply import ReplyKind, TcpReply
from .rx_deliver import RxAction

__all__ = ["TcpRxFront"]

_DROP = spec.TcpDrop


class TcpRxFront(ConnectSteps, wiring.Component):
    """Takes each parsed segment to where the model's ``receive`` sends it, one at a time:

    * malformed options: dropped (BAD_OPTIONS), no answer;
    * a segment of a connection in the table: an event for the event engine
      (:class:`~rnic.hdl.tcp.event_engine.TcpEventEngine`), whose delivery action and reports
      pass through here;
    * for a listening port (:class:`~rnic.hdl.tcp.listeners.TcpListeners`): a SYN gets a
      SYN-ACK whose ISS is a cookie (:class:`~rnic.hdl.tcp.cookie.TcpCookie`), no state
      kept; an ACK whose ack - 1 is a good cookie opens an ESTABLISHED connection on the
      lowest free id (:class:`~rnic.hdl.tcp.accept.TcpAccept`: the entry is written,
      ACCEPTED reported) and the segment goes on to it (an echo listener's SYN-ACK and
      connection get a window of at most ``tx_ring``, and the connection is marked
      echo); a bad cookie (or SYN with ACK)
      is dropped with a RST (BAD_COOKIE); no free id, or no room in the key's bucket
      of the connection table: dropped (NO_FREE_CONNECTION); a RST, or neither SYN nor
      ACK: dropped (NO_CONNECTION);
    * anything else: dropped (NO_CONNECTION) with a RST unless it is one
      (:class:`~rnic.hdl.tcp.reply.TcpReply`).

    Between segments it takes the host's active opens (``connect``, before a waiting
    segment: :class:`~rnic.hdl.tcp.front_connect.ConnectSteps`): a SYN-SENT entry on the
    lowest free id, the SYN, and the answer on ``connect_answer``.

    A segment the front itself handles gets a delivery action that keeps nothing. A
    connection the engine frees (``free``) leaves the connection table and its id is
    free, before the next segment is taken.

    Parameters
    ----------
    connections : int
    listeners : int
        Listening slots.

    Ports
    -----
    seg : In(stream.Signature(TcpSegInfo))
        The parser's reports.
    event : Out(stream.Signature(RxEvent(connections=)))
    write : Out(stream.Signature(TcbWrite(connections=)))
        To the event engine: segments of connections, entries of new ones.
    engine_action : In(stream.Signature(RxAction(connections=)))
    engine_report : In(stream.Signature(ConnEvent(connections=)))
    free : In(stream.Signature(FreeConn(connections=)))
        The event engine's.
    action : Out(stream.Signature(RxAction(connections=)))
        One per segment, in order (:class:`~rnic.hdl.tcp.rx_deliver.TcpRxDeliver`).
    report : Out(stream.Signature(ConnEvent(connections=)))
        ACCEPTED, and the engine's reports.
    reply : Out(stream.Signature(TcpTxDesc))
        RSTs, SYN-ACKs and active opens' SYNs.
    connect : In(stream.Signature(ConnectRequest))
    connect_answer : Out(stream.Signature(ConnectAnswer(connections=)))
        Active opens, and what became of each.
    drop : Out(TcpDropEvent)
    active : Out(1)
        Some connection id is in use.
    listen : In(stream.Signature(ListenerWrite(entries=listeners)))
    secret, now, rcv_wnd, rto_initial, tx_ring : In(32)
    mss : In(16)
    rcv_scale : In(range(15))

    Latency: a segment of a connection is offered to the engine 5 cycles after it is
    taken; a SYN's SYN-ACK 14 cycles after, and an ACK that opens a connection reaches the
    engine 17 cycles after (the cookie's CRC takes 8). One segment at a time: the next is
    taken once every output of the one before is taken.
    """

    def __init__(self, *, connections, listeners=4):
        self._connections = connections
        self._listeners = listeners
        n = connections
        super().__init__({
            "seg": In(stream.Signature(TcpSegInfo())),
            "event": Out(stream.Signature(RxEvent(connections=n))),
            "write": Out(stream.Signature(TcbWrite(connections=n))),
            "engine_action": In(stream.Signature(RxAction(connections=n))),
            "engine_report": In(stream.Signature(ConnEvent(connections=n))),
            "free": In(stream.Signature(FreeConn(connections=n))),
            "action": Out(stream.Signature(RxAction(connections=n))),
            "report": Out(stream.Signature(ConnEvent(connections=n))),
            "reply": Out(stream.Signature(TcpTxDesc())),
            "connect": In(stream.Signature(ConnectRequest())),
            "connect_answer": Out(stream.Signature(ConnectAnswer(connections=n))),
            "drop": Out(TcpDropEvent),
            "active": Out(1),
            "listen": In(stream.Signature(ListenerWrite(entries=listeners))),
            "secret": In(32), "now": In(32), "rcv_wnd": In(32), "rto_initial": In(32),
            "tx_ring": In(32),
            "mss": In(16),
            "rcv_scale": In(range(MAX_WINDOW_SCALE + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._connections
        m.submodules.table = table = TcpConnTable(connections=n)
        m.submodules.listeners = listeners = TcpListeners(entries=self._listeners)
        m.submodules.cookie = cookie = TcpCookie()
        m.submodules.replies = replies = TcpReply()
        m.submodules.accept = accept = TcpAccept()
        m.submodules.ids = ids = TcpConnIds(connections=n)
        m.d.comb += self.active.eq(ids.in_use)
        info = Signal(TcpSegInfo())
        conn = Signal.like(ids.free_id, name="conn")
        verdict = Signal(CookieVerdict())
        made = Signal(32)                   # the cookie of a SYN-ACK, the ISS of a SYN
        self._echo = Signal()               # the segment's listener is the echo service
        kind = Signal(ReplyKind)            # of the reply (held with the segment)
        self._wire(m, info, verdict, made, kind, listeners, cookie, replies, accept)

        outputs = (self.event, self.write, self.action, self.report, self.reply,
                   self.connect_answer)
        for port in outputs:
            with m.If(port.ready):
                m.d.sync += port.valid.eq(0)
        m.d.comb += [table.resp.ready.eq(1), cookie.cookie.ready.eq(1),
                     cookie.verdict.ready.eq(1)]
        key = table.cmd.payload.key
        freed = Signal.like(self.free.payload, name="freed")   # the key REMOVE takes out
        removing = Signal()                 # freed holds a key to take out
        with m.If(table.cmd.payload.op == ConnTableOp.REMOVE):
            m.d.comb += key.eq(freed.key)
        with m.Else():
            m.d.comb += [key.local_port.eq(info.dst_port), key.remote_port.eq(info.src_port),
                         key.remote_ip.eq(info.src_ip)]
        m.d.comb += table.cmd.payload.conn.eq(conn)
        # the engine's reports, whenever they come (a timer's too), but not over ACCEPTED
        accepting = Signal()
        er = self.engine_report
        m.d.comb += er.ready.eq(~self.report.valid & ~accepting)
        with m.If(er.valid & er.ready):
            m.d.sync += [self.report.valid.eq(1), self.report.payload.eq(er.payload)]
        flags = info.flags
        with m.FSM():
            with m.State("IDLE"):
                settled = ~Cat(port.valid for port in outputs).any()
                m.d.comb += [self.free.ready.eq(1),
                             self.seg.ready.eq(settled & ~self.free.valid
                                               & ~self.connect.valid)]
                with m.If(self.free.valid):
                    m.d.sync += freed.eq(self.free.payload)
                    m.d.comb += [ids.release.eq(1), ids.release_id.eq(self.free.payload.conn)]
                    m.next = "REMOVE"
                with m.Elif(settled & self.connect.valid):
                    self._take_connect(m, info, made, kind)
                with m.If(self.seg.valid & self.seg.ready):
                    m.d.sync += [info.eq(self.seg.payload), kind.eq(ReplyKind.RESET)]
                    m.next = "LOOKUP"
            with m.State("LOOKUP"):
                with m.If(info.bad_options):
                    self._finish(m, info, _DROP.BAD_OPTIONS)
                with m.Else():
                    self._table_command(m, table, ConnTableOp.LOOKUP, "FOUND")
            with m.State("FOUND"):
                with m.If(table.resp.valid & table.resp.payload.hit):
                    m.d.sync += conn.eq(table.resp.payload.conn)
                    self._event(m, info, table.resp.payload.conn)
                with m.Elif(table.resp.valid & listeners.hit):
                    self._listener(m, info, listeners)
                with m.Elif(table.resp.valid):
                    self._finish(m, info, _DROP.NO_CONNECTION, reply=~flags.rst)
            with m.State("CHECK"):
                m.d.comb += cookie.check.valid.eq(1)
                with m.If(cookie.check.ready):
                    m.next = "CHECKED"
            with m.State("CHECKED"):
                with m.If(cookie.verdict.valid & ~cookie.verdict.payload.ok):
                    # (a segment with data or FIN comes again: no RST, see the model)
                    self._finish(m, info, _DROP.BAD_COOKIE,
                                 reply=(info.length == 0) & ~info.flags.fin)
                with m.Elif(cookie.verdict.valid & ~ids.any_free):
                    self._finish(m, info, _DROP.NO_FREE_CONNECTION)
                with m.Elif(cookie.verdict.valid):
                    m.d.sync += [verdict.eq(cookie.verdict.payload), conn.eq(ids.free_id)]
                    m.next = "INSERT"
            with m.State("INSERT"):
                # (a cycle at least: TcpAccept settles on the verdict before INSERTED)
                assert TcpAccept.LATENCY <= 1
                self._table_command(m, table, ConnTableOp.INSERT, "INSERTED")
            with m.State("INSERTED"):
                with m.If(table.resp.valid & table.resp.payload.hit):
                    m.d.comb += ids.take.eq(1)
                    self._open(m, info, conn, accept)
                with m.Elif(table.resp.valid):
                    self._finish(m, info, _DROP.NO_FREE_CONNECTION)
            with m.State("MAKE"):
                m.d.comb += cookie.make.valid.eq(1)
                with m.If(cookie.make.ready):
                    m.next = "MADE"
            with m.State("MADE"):
                with m.If(cookie.cookie.valid):
                    m.d.sync += [made.eq(cookie.cookie.payload), kind.eq(ReplyKind.SYN_ACK)]
                    m.next = "SYN_ACK"
            with m.State("SYN_ACK"):
                self._finish(m, info, None, reply=1)
            with m.State("ACCEPTED"):
                # reported before the engine can report anything of the connection
                m.d.comb += accepting.eq(1)
                with m.If(~self.report.valid):
                    m.d.sync += [self.report.valid.eq(1), self.report.payload.conn.eq(conn),
                                 self.report.payload.kind.eq(spec.TcpEventKind.ACCEPTED)]
                    m.next = "ENGINE"
            with m.State("ENGINE"):
                self._engine(m, ids, freed, removing)
            self._connect_states(m, info, made, conn, table, ids)
            with m.State("REMOVE"):
                self._table_command(m, table, ConnTableOp.REMOVE, "REMOVED")
            with m.State("REMOVED"):
                with m.If(table.resp.valid):
                    m.d.sync += removing.eq(0)
                    m.next = "IDLE"
        return m

    def _wire(self, m, info, verdict, made, kind, listeners, cookie, replies, accept):
        """The blocks' inputs from the segment and the parameters."""
        wiring.connect(m, wiring.flipped(self.listen), listeners.write)
        # the window of a SYN-ACK and of the connection it opens: for the echo service at
        # most its send ring (registered: quasi-static)
        ring_window = Signal(32)
        m.d.sync += ring_window.eq(Mux(self.tx_ring < self.rcv_wnd, self.tx_ring,
                                       self.rcv_wnd))
        first_window = Mux(self._echo, ring_window, self.rcv_wnd)
        peer = [info.src_ip, info.src_port, info.dst_port]
        for request in (cookie.make.payload, cookie.check.payload):
            m.d.comb += [request.remote_ip.eq(peer[0]), request.remote_port.eq(peer[1]),
                         request.local_port.eq(peer[2])]
        m.d.comb += [cookie.make.payload.peer_isn.eq(info.seq),
                     cookie.check.payload.peer_isn.eq(info.seq - 1)]
        m.d.comb += [
            listeners.port.eq(info.dst_port),
            cookie.secret.eq(self.secret), cookie.now.eq(self.now),
            cookie.make.payload.mss_index.eq(cookie_mss_index(m, info.mss)),
            cookie.make.payload.wscale_code.eq(Mux(info.ws_present, info.ws,
                                                   spec.COOKIE_NO_WSCALE)),
            cookie.check.payload.cookie.eq(info.ack - 1),
            replies.seg.eq(info), replies.kind.eq(kind), replies.cookie.eq(made),
            replies.mss.eq(self.mss),
            replies.rcv_scale.eq(self.rcv_scale), replies.rcv_wnd.eq(first_window),
            accept.seg.eq(info), accept.cookie.eq(verdict), accept.mss.eq(self.mss),
            accept.rcv_scale.eq(self.rcv_scale), accept.rcv_wnd.eq(first_window),
            self.reply.payload.eq(replies.desc),
        ]

    @staticmethod
    def _table_command(m, table, op, then):
        """``op`` to the connection table (on the segment's key, or the freed one's for
        REMOVE), then state ``then``, where its answer comes."""
        m.d.comb += [table.cmd.valid.eq(1), table.cmd.payload.op.eq(op)]
        with m.If(table.cmd.ready):
            m.next = then

    def _listener(self, m, info, listeners):
        """A segment for a listening port and no connection (whose echo flag it keeps)."""
        flags = info.flags
        m.d.sync += self._echo.eq(listeners.echo)
        with m.If(flags.rst):
            self._finish(m, info, _DROP.NO_CONNECTION)
        with m.Elif(flags.ack & flags.syn):
            self._finish(m, info, _DROP.BAD_COOKIE, reply=1)
        with m.Elif(flags.ack):
            m.next = "CHECK"
        with m.Elif(flags.syn):
            m.next = "MAKE"
        with m.Else():
            self._finish(m, info, _DROP.NO_CONNECTION)

    def _open(self, m, info, conn, accept):
        """The connection a good cookie opens: its entry, ACCEPTED, then the segment."""
        a = accept.o
        t = self.write.payload.tcb
        m.d.sync += [
            self.write.valid.eq(1), self.write.payload.conn.eq(conn), t.eq(0),
            t.state.eq(spec.TcpState.ESTABLISHED), t.remote_ip.eq(info.src_ip),
            t.remote_port.eq(info.src_port), t.local_port.eq(info.dst_port),
            t.iss.eq(a.iss), t.irs.eq(a.irs), t.data_end.eq(a.snd_una),
            t.send.snd_una.eq(a.snd_una), t.send.snd_nxt.eq(a.snd_una),
            t.send.snd_max.eq(a.snd_una), t.send.snd_wl1.eq(a.snd_wl1),
            t.send.snd_wl2.eq(a.snd_wl2), t.send.snd_shift.eq(a.snd_shift),
            t.send.send_mss.eq(a.send_mss), t.send.cwnd.eq(a.cwnd),
            t.send.ssthresh.eq(spec.MAX_WINDOW), t.send.recover.eq(a.recover),
            t.rtt.rto.eq(self.rto_initial), t.recv.rcv_nxt.eq(a.rcv_nxt),
            t.recv.rcv_adv.eq(a.rcv_adv), t.recv.rcv_shift.eq(a.rcv_shift),
            t.recv.echo.eq(self._echo), t.recv.echo_delta.eq(a.echo_delta),
        ]
        self._event(m, info, conn)
        m.next = "ACCEPTED"

    def _event(self, m, info, conn):
        m.d.sync += [self.event.valid.eq(1), self.event.payload.conn.eq(conn),
                     self.event.payload.seg.eq(info)]
        m.next = "ENGINE"

    def _engine(self, m, ids, freed, removing):
        """The engine's action through; done once it and the segment's reports are
        taken. A connection the engine frees meanwhile (it waits for that before it takes
        the segment) is taken out of the table after."""
        ea = self.engine_action
        acted = Signal()
        m.d.comb += [ea.ready.eq(~self.action.valid & ~acted), self.free.ready.eq(~removing)]
        with m.If(self.free.valid & ~removing):
            m.d.sync += [freed.eq(self.free.payload), removing.eq(1)]
            m.d.comb += [ids.release.eq(1), ids.release_id.eq(self.free.payload.conn)]
        with m.If(ea.valid & ea.ready):
            m.d.sync += [self.action.valid.eq(1), self.action.payload.eq(ea.payload),
                         acted.eq(1)]
        with m.If(acted & ~self.engine_report.valid & ~self.event.valid):
            m.d.sync += acted.eq(0)
            with m.If(removing):
                m.next = "REMOVE"
            with m.Else():
                m.next = "IDLE"

    def _finish(self, m, info, reason, *, reply=0):
        """The segment handled here: counted as ``reason`` (None: not a drop), its payload
        dropped, and (``reply``) answered: by a RST, or by the SYN-ACK once its cookie is
        made."""
        if reason is not None:
            m.d.comb += [self.drop.valid.eq(1), self.drop.reason.eq(reason)]
        a = self.action.payload
        m.d.sync += [self.action.valid.eq(1), a.conn.eq(0), a.length.eq(info.length),
                     a.skip.eq(0), a.keep.eq(0)]
        with m.If(reply):
            m.d.sync += self.reply.valid.eq(1)
        m.next = "IDLE"
