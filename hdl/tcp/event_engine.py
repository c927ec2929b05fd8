"""The engine's events on synchronized connections: one segment, timer report, write or
send at a time against the connection table, through the rule blocks, to the delivery
action, the segments sent and the connection's events."""

import contextlib

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec
from rnic.host.spec.tcp import MAX_WINDOW_SCALE

from ..beat import conn_bits
from ..synth_hints import no_rw_collision
from .ack_update import TcpAckUpdate
from .arm import TcpArm
from .conn_ids import lowest_set
from .engine_ack import AckKind, AckSteps
from .engine_open import OpenSteps
from .engine_send import SendSteps
from .engine_timers import TimerSteps
from .events import (ConnCommand, ConnEvent, EngineEvent, FreeConn, RxEvent, TcbWrite,
                     TcpDropEvent)
from .layouts import TcpCommand, TcpDrop, TcpSegInfo, TcpTxDesc
from .ring_read import TxRequest
from .ring_write import RingPosition
from .rtt_update import TcpRttUpdate
from .rule_wiring import wire_rules
from .rx_check import RxVerdict, TcpRxCheck
from .rx_deliver import RxAction
from .rx_text import TcpRxText
from .send_cut import CutAnswer, CutRequest, ReleaseRequest
from .send_data import TcpSendData
from .send_step import TcpSendStep
from .stage import staged
from .syn_sent import TcpSynSent
from .tcb import Tcb
from .timeout import TcpTimeout
from .timer_table import TimerArm
from .timers_due import TcpTimersDue
from .window_field import TcpWindowField

__all__ = ["TcpEventEngine"]


class _TableWrite:
    """The inputs of the table's registered write."""

    def __init__(self, connections):
        self.addr = Signal(conn_bits(connections), name="put_conn")
        self.data = Signal(Tcb(), name="put_tcb")
        self.en = Signal(name="put")


class TcpEventEngine(SendSteps, TimerSteps, OpenSteps, AckSteps, wiring.Component):
    """Applies the model's receive rules (:class:`rnic.host.model.tcp_engine.TcpEngine`'s
    ``_synchronized`` and what follows) to each segment of a synchronized connection.

    The connection's entry is read from the table, checked
    (:class:`~rnic.hdl.tcp.rx_check.TcpRxCheck`), its ACK applied
    (:class:`~rnic.hdl.tcp.ack_update.TcpAckUpdate`,
    :class:`~rnic.hdl.tcp.rtt_update.TcpRttUpdate`) with the FIN-acknowledged transitions,
    its text and FIN taken (:class:`~rnic.hdl.tcp.rx_text.TcpRxText`), the ACK owed sent as
    a pure ACK (:class:`~rnic.hdl.tcp.window_field.TcpWindowField`), the send timers set
    (:class:`~rnic.hdl.tcp.arm.TcpArm`), and the entry written back. A RST at RCV.NXT and
    the ACK of the FIN in LAST-ACK free the connection (state CLOSED; RESET or CLOSED).
    A segment of an active open in SYN-SENT goes to the model's ``_syn_sent`` instead
    (:class:`~rnic.hdl.tcp.engine_open.OpenSteps`).

    A report of the timer table (``fired``) runs the model's ``_timers``
    (:class:`~rnic.hdl.tcp.timers_due.TcpTimersDue`,
    :class:`~rnic.hdl.tcp.engine_timers.TimerSteps`):
    TIME-WAIT over frees the connection (CLOSED); a retransmission timeout backs off and
    sends from SND.UNA again, or after ``max_retries`` sends a RST and frees the
    connection (LOST); a persist timer over sends a one-octet probe; a delayed ACK due is
    sent. Every entry written back arms the connection's earliest deadline (``arm``); a
    freed one disarms it.

    Every event ends as the model's ``_flush`` (:class:`~rnic.hdl.tcp.engine_send.SendSteps`):
    a duplicate ACK owed, then one segment of what the windows let go (``cut``/``answer``
    to :class:`~rnic.hdl.tcp.send_cut.TcpSendCut`, ``send`` to the ring reader), then an
    ACK still owed. A connection that sent stays pending, and its next segment is an event
    of its own, taken when no other waits; so are the octets the core writes
    (``written``). ACKs of new data release the cut's records (``release``).

    Parameters
    ----------
    connections : int

    Ports
    -----
    event : In(stream.Signature(RxEvent(connections=)))
        Segments of synchronized connections (the connection table found them).
    fired : In(stream.Signature(conn_bits(connections)))
        Connections whose deadline passed (:class:`~rnic.hdl.tcp.timer_table.TcpTimerTable`);
        taken before a waiting segment, up to ``connections`` of them in a row.
    arm : Out(stream.Signature(TimerArm(connections=)))
        Each connection's next deadline, for the timer table (always ready), a cycle after
        its entry is written.
    action : Out(stream.Signature(RxAction(connections=)))
        One per segment: which of its payload octets to deliver.
    ack : Out(stream.Signature(TcpTxDesc))
        A pure ACK owed, a RST, or the SYN of an active open again
        (:class:`~rnic.hdl.tcp.engine_ack.AckSteps`).
    report : Out(stream.Signature(ConnEvent(connections=)))
        RESET, CLOSED, PEER_CLOSED.
    free : Out(stream.Signature(FreeConn(connections=)))
        A connection reported RESET or CLOSED, with its key (the front takes it out of
        the connection table and frees the id).
    written : In(stream.Signature(RingPosition(connections=)))
        A connection's octets written end at ``seq``.
    cut : Out(stream.Signature(CutRequest(connections=)))
    answer : In(stream.Signature(CutAnswer))
    release : Out(stream.Signature(ReleaseRequest(connections=)))
        To the :class:`~rnic.hdl.tcp.send_cut.TcpSendCut` of the connections' FPDU ends.
    send : Out(stream.Signature(TxRequest(connections=)))
        Segments with octets of the ring, or our FIN.
    drop : Out(TcpDropEvent)
        One pulse per segment dropped, with its reason.
    write : In(stream.Signature(TcbWrite(connections=)))
        Sets an entry (opens, tests) and arms its retransmission timer as the entry has
        it (an active open's SYN); taken between events.
    command : In(stream.Signature(ConnCommand(connections=)))
        The layer above's CLOSE or ABORT of a connection; an event of its own, taken
        before timer reports and segments (a connection already freed takes nothing).
    read_conn : In(conn_bits(connections))
    read_tcb : Out(Tcb)
        The table entry ``read_conn`` holds, a cycle later, between events.
    read_valid : Out(1)
        ``read_tcb`` is ``read_conn``'s entry (the engine was idle in the cycle before).
    retransmit : Out(1)
        A cycle per segment sent on ``send`` that carries sequence space sent before (the
        model's ``TcpStat.RETRANSMITS``), registered.
    now, delack, time_wait, rcv_wnd, rto_min, rto_max, rto_initial : In(32)
    tx_ring : In(32)
        Octets of a send ring (an echo connection's window is its ring's room).
    max_retries : In(8)
        Retransmission timeouts on the same data before the connection is lost.
    mss : In(16)
    rcv_scale : In(range(15))
        Our MSS and window shift, for the SYN of an active open and its answer.

    Latency and throughput: a segment takes 41 cycles from its event to the entry written
    back when it sends nothing, 43 with a pure ACK, 36 when it is dropped; sending a data
    segment adds the cut's walk and 5 cycles; more while an output waits. One event at a
    time. Each state waits for the ``LATENCY`` of the rule blocks it reads; the time base
    is sampled when the event is taken.
    """

    def __init__(self, *, connections):
        self._connections = connections
        n = connections
        super().__init__({
            "event": In(stream.Signature(RxEvent(connections=n))),
            "fired": In(stream.Signature(conn_bits(n))),
            "arm": Out(stream.Signature(TimerArm(connections=n))),
            "free": Out(stream.Signature(FreeConn(connections=n))),
            "written": In(stream.Signature(RingPosition(connections=n))),
            "cut": Out(stream.Signature(CutRequest(connections=n))),
            "answer": In(stream.Signature(CutAnswer())),
            "release": Out(stream.Signature(ReleaseRequest(connections=n))),
            "send": Out(stream.Signature(TxRequest(connections=n))),
            "action": Out(stream.Signature(RxAction(connections=n))),
            "ack": Out(stream.Signature(TcpTxDesc())),
            "report": Out(stream.Signature(ConnEvent(connections=n))),
            "drop": Out(TcpDropEvent),
            "write": In(stream.Signature(TcbWrite(connections=n))),
            "command": In(stream.Signature(ConnCommand(connections=n))),
            "read_conn": In(conn_bits(n)),
            "read_tcb": Out(Tcb()),
            "read_valid": Out(1),
            "retransmit": Out(1),
            **{name: In(32) for name in ("now", "delack", "time_wait", "rcv_wnd", "rto_min",
                                         "rto_max", "rto_initial", "tx_ring")},
            "max_retries": In(8),
            "mss": In(16),
            "rcv_scale": In(range(MAX_WINDOW_SCALE + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        # no row is read back before two cycles after its write (below), so the ports need
        # no collision logic
        table = no_rw_collision(memory.Memory(shape=Tcb(), depth=self._connections, init=[]))
        m.submodules.table = table
        rd = table.read_port()
        table_wr = table.write_port()
        # the write is registered: the state's decode and the event sources' handshakes
        # stay off the path to the table's write enable (a memory of LUTs at 16
        # connections); an entry is read back two cycles after its write at the earliest
        wr = _TableWrite(self._connections)
        m.d.sync += [table_wr.addr.eq(wr.addr), table_wr.data.eq(wr.data),
                     table_wr.en.eq(wr.en)]
        blocks = dict(check=TcpRxCheck(), ack=TcpAckUpdate(), rtt=TcpRttUpdate(),
                      text=TcpRxText(), window=TcpWindowField(), arm=TcpArm(),
                      timers=TcpTimersDue(), timeout=TcpTimeout(), step=TcpSendStep(),
                      data=TcpSendData())
        for name, block in blocks.items():
            m.submodules[name] = block
        t = Signal(Tcb())                   # the entry being worked on
        conn = Signal(conn_bits(self._connections))
        seg = Signal(TcpSegInfo())
        verdict = Signal(RxVerdict)
        restart_time_wait = Signal()
        reason = Signal(TcpDrop)
        now = Signal(32, name="event_now")  # the time base when the event was taken
        kind = Signal(EngineEvent)
        command = Signal(TcpCommand)        # of a COMMAND
        length = Signal(17)                 # of the segment to send
        written = Signal(32)                # the ring's new end (WRITTEN)
        acked = Signal()                    # the ACK took octets: their records go
        resend = Signal()                   # the ACK asks for the first segment again
        probe = Signal()                    # the persist timer asks for a probe
        self._pending = Signal(self._connections)   # connections that may send more
        self._pending_updates(m, conn)
        # timer reports in a row: each connection's due timers go before a segment that
        # waits (as the model's poll at a time goes before the segments of that time),
        # but no more than one report per connection can hold a segment back
        streak = Signal(range(self._connections + 1))
        armed, fin_acked = wire_rules(m, blocks, t, seg, now, self)
        syn_sent = self._wire_open(m, t, seg)
        # where an echo connection's FIN goes: after the last octet it echoes, RCV.NXT - 1
        # (past the peer's FIN) - (IRS - ISS), in two registered steps (FLUSH, where it is
        # read, waits longer after the text is taken)
        echo_fin_a = staged(m, t.recv.rcv_nxt - t.recv.echo_delta, "echo_fin_a", 32)
        echo_fin = staged(m, echo_fin_a - 1, "echo_fin", 32)
        assert TcpWindowField.LATENCY >= 2
        self._wire_send(m, t, now, blocks, length, resend)
        self._wire_timeout(m, t, now, blocks["timeout"])
        outputs = (self.action, self.ack, self.report, self.free, self.cut, self.send,
                   self.release)
        for port in outputs:
            with m.If(port.ready):
                m.d.sync += port.valid.eq(0)
        self._wire_ack(m, t, seg, blocks["window"])
        # the arm is registered: the state's decode stays off the timer table's pending set
        # (a report the table makes meanwhile from the old deadline finds nothing due)
        m.d.sync += self.arm.valid.eq(0)
        m.d.comb += self.read_tcb.eq(rd.data)
        # the outputs were all free in the cycle before, which the engine spent in IDLE
        # (registered: the outputs' handshakes stay off the choice of the next event; in
        # IDLE the outputs are only taken, never set)
        were_free = staged(m, ~(Cat(port.valid for port in outputs).any() | self._ack_ask),
                           "were_free")
        idle_before = Signal()
        m.d.sync += idle_before.eq(0)
        outputs_free = were_free & idle_before
        m.d.comb += self.read_valid.eq(idle_before)
        m.d.sync += self.retransmit.eq(0)
        # the lowest pending connection, registered (the set changes only within events,
        # several cycles before the engine is idle again)
        found, lowest = lowest_set(m, self._pending, "pending")
        pending_any = Signal()
        pending_first = Signal.like(conn, name="pending_first")
        m.d.sync += [pending_any.eq(found), pending_first.eq(lowest)]
        # each state waits for the rule blocks it reads (their inputs hold still meanwhile)
        self._latency = {
            # (a timer report waits for the entry's timers as TcpArm sets them)
            "TIMERS": TcpArm.LATENCY + 1 + TcpTimersDue.LATENCY,
            "TIMEOUT": TcpTimeout.LATENCY,
            "CHECK": TcpRxCheck.LATENCY,
            "SYN_SENT": max(TcpRttUpdate.LATENCY, TcpSynSent.LATENCY),
            "DECIDE": max(TcpAckUpdate.LATENCY, TcpRttUpdate.LATENCY),
            "TEXT": TcpRxText.LATENCY + 1,      # (+1: fin_acked is registered)
            "FLUSH": TcpWindowField.LATENCY,
            "STEP": TcpSendStep.LATENCY,
            "DATA": max(TcpSendData.LATENCY, TcpWindowField.LATENCY),
            "ACK_NOW": TcpWindowField.LATENCY,
            "STORE": TcpArm.LATENCY + 1 + TcpTimersDue.LATENCY,
        }
        self._settle = Signal(range(max(self._latency.values()) + 1), name="settle")
        with m.FSM():
            with m.State("IDLE"):
                m.d.sync += idle_before.eq(1)
                m.d.comb += [rd.addr.eq(self.read_conn), rd.en.eq(1)]
                with m.If(self.write.valid):
                    w = self.write.payload
                    m.d.comb += [self.write.ready.eq(1), wr.addr.eq(w.conn),
                                 wr.data.eq(w.tcb), wr.en.eq(1)]
                    self._arm(m, w.conn, w.tcb.timers.rto_armed, w.tcb.timers.rto_at)
                with m.Elif(self.command.valid & outputs_free):
                    m.d.comb += self.command.ready.eq(1)
                    m.d.sync += [conn.eq(self.command.payload.conn), now.eq(self.now),
                                 command.eq(self.command.payload.kind),
                                 kind.eq(EngineEvent.COMMAND)]
                    m.next = "READ"
                with m.Elif(self.fired.valid & outputs_free
                            & ~(self.event.valid & (streak == self._connections))):
                    m.d.comb += self.fired.ready.eq(1)
                    m.d.sync += [conn.eq(self.fired.payload), now.eq(self.now),
                                 kind.eq(EngineEvent.TIMER),
                                 streak.eq(Mux(streak == self._connections, streak,
                                               streak + 1))]
                    m.next = "READ"
                with m.Elif(self.event.valid & outputs_free):
                    m.d.comb += self.event.ready.eq(1)
                    m.d.sync += [conn.eq(self.event.payload.conn), seg.eq(self.event.payload.seg),
                                 now.eq(self.now), kind.eq(EngineEvent.SEGMENT), streak.eq(0)]
                    m.next = "READ"
                with m.Elif(self.written.valid & outputs_free):
                    m.d.comb += self.written.ready.eq(1)
                    m.d.sync += [conn.eq(self.written.payload.conn), now.eq(self.now),
                                 written.eq(self.written.payload.seq), kind.eq(EngineEvent.WRITTEN)]
                    m.next = "READ"
                with m.Elif(pending_any & outputs_free):
                    m.d.sync += [conn.eq(pending_first), now.eq(self.now),
                                 kind.eq(EngineEvent.SEND)]
                    m.next = "READ"
            with m.State("READ"):
                # the entry is read from the id taken, registered: the choice of the event
                # stays off the path to the table
                m.d.comb += [rd.addr.eq(conn), rd.en.eq(1)]
                m.next = "LOAD"
            with m.State("LOAD"):
                m.d.sync += [t.eq(rd.data), acked.eq(0), resend.eq(0), probe.eq(0)]
                self._goto(m, "TIMERS", wait=kind == EngineEvent.TIMER)
            with m.State("TIMERS"), self._settled(m):
                with m.If((kind == EngineEvent.COMMAND) & (t.state != spec.TcpState.CLOSED)):
                    self._command(m, t, conn, command)
                with m.Else():
                    self._timers(m, t, conn, seg, blocks, kind, written, probe)
            with m.State("TIMEOUT"), self._settled(m):
                self._timeout(m, t, blocks)
            with m.State("GIVE_UP"):
                self._give_up(m, t, conn, blocks)
            with m.State("ABORT"):
                self._reset_and_free(m, t, conn, t.state != spec.TcpState.SYN_SENT, None)
            with m.State("SYN_SENT"), self._settled(m):
                self._syn_sent(m, t, conn, seg, syn_sent, blocks["rtt"])
            with m.State("CHECK"), self._settled(m):
                m.d.sync += [verdict.eq(blocks["check"].verdict),
                             reason.eq(blocks["check"].reason),
                             restart_time_wait.eq(blocks["check"].restart_time_wait)]
                self._goto(m, "DECIDE")
            with m.State("DECIDE"), self._settled(m):
                with m.If(restart_time_wait):
                    m.d.sync += t.timers.tw_at.eq(now + self.time_wait)
                self._decide(m, t, conn, seg, verdict, reason, blocks, acked, resend)
            with m.State("TEXT"), self._settled(m):
                self._text(m, t, conn, seg, blocks, fin_acked, now)
            with m.State("FLUSH"), self._settled(m):
                self._echo_close(m, t, echo_fin)
                self._flush(m, t, blocks)
            with m.State("STEP"), self._settled(m):
                self._step(m, t, conn, blocks, length, resend, probe)
            with m.State("ANSWER"):
                self._answer(m, conn, length, resend, blocks["step"].first_fin)
            with m.State("DATA"), self._settled(m):
                self._data(m, t, conn, blocks, length, resend)
            with m.State("ACK_NOW"), self._settled(m):
                self._ack_now(m, t, blocks)
            with m.State("STORE"), self._settled(m):
                with m.If(acked):
                    r = self.release.payload
                    m.d.sync += [self.release.valid.eq(1), r.conn.eq(conn),
                                 r.una.eq(t.send.snd_una), r.reset.eq(0), acked.eq(0)]
                m.d.comb += [wr.addr.eq(conn), wr.data.eq(armed), wr.en.eq(1)]
                self._arm(m, conn, blocks["timers"].armed, blocks["timers"].deadline)
                self._goto(m, "IDLE")
            with m.State("CLOSE"):
                # the key is taken here, not where the end is decided: the decision's
                # compares stay off the path to the key's 64 bits. The entry stored is
                # STORE's (its timers may be stale: a CLOSED entry's are never read, and
                # the timer table is disarmed here), so the table's write data chooses
                # between two sources, not three
                key = self.free.payload.key
                m.d.comb += [wr.addr.eq(conn), wr.data.eq(armed), wr.en.eq(1)]
                self._arm(m, conn, 0, 0)
                m.d.sync += [self.free.valid.eq(1), self.free.payload.conn.eq(conn),
                             key.remote_ip.eq(t.remote_ip), key.remote_port.eq(t.remote_port),
                             key.local_port.eq(t.local_port)]
                m.next = "IDLE"
        return m

    def _pending_updates(self, m, conn):
        """The pending set's updates for the event's connection (:meth:`_mark_pending`),
        applied a cycle later: the states' decisions stay off the set's demultiplexer.
        IDLE reads the set through a register: a connection it takes as pending just after
        an update that cleared it gets an event that finds nothing to send."""
        self._pend_write = Signal(name="pend_write")
        self._pend_value = Signal(name="pend_value")
        write, value = Signal(name="pend_write_r"), Signal(name="pend_value_r")
        at = Signal.like(conn, name="pend_conn")
        m.d.sync += [write.eq(self._pend_write), value.eq(self._pend_value), at.eq(conn)]
        with m.If(write):
            m.d.sync += self._pending.bit_select(at, 1).eq(value)

    def _mark_pending(self, m, value):
        """The event's connection is pending (``value`` 1: it may send more) or not."""
        m.d.comb += [self._pend_write.eq(1), self._pend_value.eq(value)]

    def _arm(self, m, conn, armed, deadline):
        """The connection's next deadline to the timer table, in the next cycle."""
        a = self.arm.payload
        m.d.sync += [self.arm.valid.eq(1), a.conn.eq(conn), a.armed.eq(armed),
                     a.deadline.eq(deadline)]

    def _goto(self, m, state, wait=1):
        """To ``state``, which first waits for the rule blocks it reads (when ``wait``)."""
        m.next = state
        m.d.sync += self._settle.eq(Mux(wait, self._latency.get(state, 0), 0))

    @contextlib.contextmanager
    def _settled(self, m):
        """The body of a state, once its rule blocks are settled."""
        with m.If(self._settle != 0):
            m.d.sync += self._settle.eq(self._settle - 1)
        with m.Else():
            yield

    def _decide(self, m, t, conn, seg, verdict, reason, blocks, acked, resend):
        """The checks' verdict: drop, reset, or the ACK's effects and FIN transitions."""
        with m.If(verdict == RxVerdict.RESET):
            self._free(m, t, conn, seg, spec.TcpEventKind.RESET)
        with m.Elif(verdict != RxVerdict.ACCEPT):
            m.d.comb += [self.drop.valid.eq(1), self.drop.reason.eq(reason)]
            with m.If(verdict == RxVerdict.DROP_ACK):
                m.d.sync += t.recv.dup_ack.eq(1)
            self._deliver(m, conn, seg, keep=0, skip=0)
            self._goto(m, "FLUSH")
        with m.Else():
            ack, rtt = blocks["ack"], blocks["rtt"]
            m.d.sync += t.send.eq(ack.o)
            with m.If(ack.new_data):
                m.d.sync += [t.rtt.eq(rtt.o), t.timers.rto_armed.eq(0), acked.eq(1)]
            m.d.sync += resend.eq(ack.send_first)
            self._goto(m, "TEXT")

    def _text(self, m, t, conn, seg, blocks, fin_acked, now):
        """FIN acknowledged (FIN-WAIT-1 -> FIN-WAIT-2, CLOSING -> TIME-WAIT, LAST-ACK ->
        CLOSED), then the text and the peer's FIN."""
        text = blocks["text"]
        S = spec.TcpState
        with m.If(fin_acked & (t.state == S.LAST_ACK)):
            self._free(m, t, conn, seg, spec.TcpEventKind.CLOSED)
        with m.Elif(fin_acked & (t.state == S.CLOSING)):
            self._time_wait(m, t, now)
            self._deliver(m, conn, seg, keep=0, skip=0)
            self._goto(m, "FLUSH")
        with m.Else():
            # (the text rules see FIN-WAIT-2 where our FIN is acknowledged: rule_wiring)
            r = text.o
            m.d.sync += [t.state.eq(r.state), t.recv.rcv_nxt.eq(r.rcv_nxt),
                         t.recv.rcv_unacked.eq(r.rcv_unacked), t.recv.ack_now.eq(r.ack_now),
                         t.recv.dup_ack.eq(r.dup_ack), t.recv.delack_armed.eq(r.delack_armed),
                         t.recv.delack_at.eq(r.delack_at)]
            self._deliver(m, conn, seg, keep=text.keep, skip=text.skip)
            with m.If(text.out_of_order):
                m.d.comb += [self.drop.valid.eq(1), self.drop.reason.eq(spec.TcpDrop.OUT_OF_ORDER)]
            with m.If(text.peer_closed):
                m.d.sync += [self.report.valid.eq(1), self.report.payload.conn.eq(conn),
                             self.report.payload.kind.eq(spec.TcpEventKind.PEER_CLOSED)]
            with m.If(text.time_wait):
                self._time_wait(m, t, now)
            self._goto(m, "FLUSH")

    def _reset_and_free(self, m, t, conn, send_rst, kind):
        """A RST at SND.NXT (no ACK, window 0) when ``send_rst``, and the connection freed
        (``kind`` reported, None: not), once the ACK port is free."""
        with m.If(~self._ack_busy):
            with m.If(send_rst):
                self._send_ack(m, AckKind.RST_AT_SND_NXT)
            self._free(m, t, conn, None, kind)

    def _command(self, m, t, conn, command):
        """The layer above's command (the model's ``close`` and ``abort``): CLOSE frees a
        SYN-SENT connection (CLOSED), puts our FIN after the octets written from
        ESTABLISHED (FIN-WAIT-1) or CLOSE-WAIT (LAST-ACK), and leaves one already closing
        as it is; then the sending. ABORT: a RST from a synchronized state, the id freed,
        nothing reported."""
        S = spec.TcpState
        with m.If(command == TcpCommand.ABORT):
            m.next = "ABORT"
        with m.Elif(t.state == S.SYN_SENT):
            self._free(m, t, conn, None, spec.TcpEventKind.CLOSED)
        with m.Else():
            with m.If(t.state == S.ESTABLISHED):
                m.d.sync += t.state.eq(S.FIN_WAIT_1)
            with m.If(t.state == S.CLOSE_WAIT):
                m.d.sync += t.state.eq(S.LAST_ACK)
            with m.If((t.state == S.ESTABLISHED) | (t.state == S.CLOSE_WAIT)):
                m.d.sync += [t.fin_pending.eq(1), t.fin_seq.eq(t.data_end)]
            self._goto(m, "FLUSH")

    def _echo_close(self, m, t, echo_fin):
        """The echo service closes when the peer has: CLOSE-WAIT -> LAST-ACK, our FIN after
        the last octet echoed (the model's ``_peer_fin``)."""
        with m.If(t.recv.echo & (t.state == spec.TcpState.CLOSE_WAIT)):
            m.d.sync += [t.state.eq(spec.TcpState.LAST_ACK), t.fin_pending.eq(1),
                         t.fin_seq.eq(echo_fin)]

    def _time_wait(self, m, t, now):
        m.d.sync += [t.state.eq(spec.TcpState.TIME_WAIT), t.timers.tw_armed.eq(1),
                     t.timers.tw_at.eq(now + self.time_wait), t.timers.rto_armed.eq(0),
                     t.timers.persist_armed.eq(0)]

    def _deliver(self, m, conn, seg, *, keep, skip):
        a = self.action.payload
        m.d.sync += [self.action.valid.eq(1), a.conn.eq(conn), a.length.eq(seg.length),
                     a.skip.eq(skip), a.keep.eq(keep)]

    def _free(self, m, t, conn, seg, kind):
        """The connection ends: its entry CLOSED, reported as ``kind`` (None: not
        reported), the segment's payload (``seg``, None for a timer or a command) dropped;
        ``CLOSE`` frees it with its key."""
        m.d.sync += [t.state.eq(spec.TcpState.CLOSED),
                     self.release.valid.eq(1), self.release.payload.conn.eq(conn),
                     self.release.payload.reset.eq(1)]
        self._mark_pending(m, 0)
        if kind is not None:
            m.d.sync += [self.report.valid.eq(1), self.report.payload.conn.eq(conn),
                         self.report.payload.kind.eq(kind)]
        if seg is not None:
            self._deliver(m, conn, seg, keep=0, skip=0)
        self._goto(m, "CLOSE")
