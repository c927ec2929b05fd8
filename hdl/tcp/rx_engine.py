"""The engine's receive events on synchronized connections: one segment at a time against
the connection table, through the rule blocks, to the delivery action, the ACK owed and
the connection's events."""

import contextlib

from amaranth.hdl import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec

from ..beat import conn_bits
from .ack_update import TcpAckUpdate
from .arm import ArmState, TcpArm
from .layouts import TcpDrop, TcpEventKind, TcpSegInfo, TcpTxDesc
from .rtt_update import TcpRttUpdate
from .rx_check import RxVerdict, TcpRxCheck
from .rx_deliver import RxAction
from .rx_text import TcpRxText
from .seq import seq_after
from .tcb import Tcb
from .window_field import TcpWindowField

__all__ = ["TcpRxEngine", "RxEvent", "TcbWrite", "ConnEvent", "TcpDropEvent"]

#: A counter event: ``valid`` for one cycle per segment dropped, ``reason`` its
#: :class:`~rnic.hdl.tcp.rx_check.TcpDrop`.
TcpDropEvent = wiring.Signature({"valid": Out(1), "reason": Out(TcpDrop)})


class RxEvent(data.StructLayout):
    """A received segment of connection ``conn``."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "seg": TcpSegInfo()})


class TcbWrite(data.StructLayout):
    """Connection ``conn``'s entry becomes ``tcb``."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "tcb": Tcb()})


class ConnEvent(data.StructLayout):
    """What connection ``conn`` reports (``kind``)."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "kind": TcpEventKind})


class TcpRxEngine(wiring.Component):
    """Applies the model's receive rules (:class:`rnic.host.model.tcp_engine.TcpEngine`'s
    ``_synchronized`` and what follows) to each segment of a synchronized connection.

    The connection's entry is read from the table, checked
    (:class:`~rnic.hdl.tcp.rx_check.TcpRxCheck`), its ACK applied
    (:class:`~rnic.hdl.tcp.ack_update.TcpAckUpdate`,
    :class:`~rnic.hdl.tcp.rtt_update.TcpRttUpdate`) with the FIN-acknowledged transitions,
    its text and FIN taken (:class:`~rnic.hdl.tcp.rx_text.TcpRxText`), the ACK owed sent as
    a pure ACK (:class:`~rnic.hdl.tcp.window_field.TcpWindowField`), the send timers set
    (:class:`~rnic.hdl.tcp.arm.TcpArm`), and the entry written back. A RST at RCV.NXT and
    the ACK of the FIN in LAST-ACK free the connection (state CLOSED; RESET or CLOSED). The
    block sends no data: the send side is the send scheduler's.

    Parameters
    ----------
    connections : int

    Ports
    -----
    event : In(stream.Signature(RxEvent(connections=)))
        Segments of synchronized connections (the connection table found them).
    action : Out(stream.Signature(RxAction(connections=)))
        One per segment: which of its payload octets to deliver.
    ack : Out(stream.Signature(TcpTxDesc))
        A pure ACK owed.
    report : Out(stream.Signature(ConnEvent(connections=)))
        RESET, CLOSED, PEER_CLOSED.
    drop : Out(TcpDropEvent)
        One pulse per segment dropped, with its reason.
    write : In(stream.Signature(TcbWrite(connections=)))
        Sets an entry (opens, tests); taken between events.
    read_conn : In(conn_bits(connections))
    read_tcb : Out(Tcb)
        The table entry ``read_conn`` holds, a cycle later, between events.
    now, delack, time_wait, rcv_wnd, rto_min, rto_max, rto_initial : In(32)

    Latency and throughput: a segment takes 22 cycles from its event to the entry written
    back, 24 when it sends an ACK, 17 when it is dropped, more while an output waits; one
    at a time. Each state waits for the ``LATENCY`` of the rule blocks it reads; the time
    base is sampled when the event is taken.
    """

    def __init__(self, *, connections):
        self._connections = connections
        n = connections
        super().__init__({
            "event": In(stream.Signature(RxEvent(connections=n))),
            "action": Out(stream.Signature(RxAction(connections=n))),
            "ack": Out(stream.Signature(TcpTxDesc())),
            "report": Out(stream.Signature(ConnEvent(connections=n))),
            "drop": Out(TcpDropEvent),
            "write": In(stream.Signature(TcbWrite(connections=n))),
            "read_conn": In(conn_bits(n)),
            "read_tcb": Out(Tcb()),
            **{name: In(32) for name in ("now", "delack", "time_wait", "rcv_wnd", "rto_min",
                                         "rto_max", "rto_initial")},
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.table = table = memory.Memory(shape=Tcb(), depth=self._connections,
                                                   init=[])
        rd = table.read_port()
        wr = table.write_port()
        blocks = dict(check=TcpRxCheck(), ack=TcpAckUpdate(), rtt=TcpRttUpdate(),
                      text=TcpRxText(), window=TcpWindowField(), arm=TcpArm())
        for name, block in blocks.items():
            m.submodules[name] = block
        t = Signal(Tcb())                   # the entry being worked on
        conn = Signal(conn_bits(self._connections))
        seg = Signal(TcpSegInfo())
        verdict = Signal(RxVerdict)
        restart_time_wait = Signal()
        reason = Signal(TcpDrop)
        now = Signal(32, name="event_now")  # the time base when the segment was taken
        fin_acked = self._fin_acked(m, t)
        armed = self._wire_blocks(m, blocks, t, seg, fin_acked, now)
        for port in (self.action, self.ack, self.report):
            with m.If(port.ready):
                m.d.sync += port.valid.eq(0)
        m.d.comb += self.read_tcb.eq(rd.data)
        outputs_free = ~self.action.valid & ~self.ack.valid & ~self.report.valid
        # each state waits for the rule blocks it reads (their inputs hold still meanwhile)
        self._latency = {
            "DECIDE": max(TcpAckUpdate.LATENCY, TcpRttUpdate.LATENCY),
            "TEXT": TcpRxText.LATENCY,
            "FLUSH": TcpWindowField.LATENCY,
            "STORE": TcpArm.LATENCY + 1,       # (its outputs registered)
        }
        self._settle = Signal(range(max(self._latency.values()) + 1), name="settle")
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += [rd.addr.eq(self.read_conn), rd.en.eq(1)]
                with m.If(self.write.valid):
                    m.d.comb += [self.write.ready.eq(1), wr.addr.eq(self.write.payload.conn),
                                 wr.data.eq(self.write.payload.tcb), wr.en.eq(1)]
                with m.Elif(self.event.valid & outputs_free):
                    m.d.comb += [self.event.ready.eq(1), rd.addr.eq(self.event.payload.conn)]
                    m.d.sync += [conn.eq(self.event.payload.conn), seg.eq(self.event.payload.seg),
                                 now.eq(self.now)]
                    m.next = "LOAD"
            with m.State("LOAD"):
                m.d.sync += t.eq(rd.data)
                m.next = "CHECK"
            with m.State("CHECK"):
                m.d.sync += [verdict.eq(blocks["check"].verdict),
                             reason.eq(blocks["check"].reason),
                             restart_time_wait.eq(blocks["check"].restart_time_wait)]
                self._goto(m, "DECIDE")
            with m.State("DECIDE"), self._settled(m):
                with m.If(restart_time_wait):
                    m.d.sync += t.timers.tw_at.eq(now + self.time_wait)
                self._decide(m, t, conn, seg, verdict, reason, blocks)
            with m.State("TEXT"), self._settled(m):
                self._text(m, t, conn, seg, blocks, fin_acked, now)
            with m.State("FLUSH"), self._settled(m):
                self._flush(m, t, blocks)
            with m.State("STORE"), self._settled(m):
                m.d.comb += [wr.addr.eq(conn), wr.data.eq(armed), wr.en.eq(1)]
                self._goto(m, "IDLE")
            with m.State("CLOSE"):
                m.d.comb += [wr.addr.eq(conn), wr.data.eq(t), wr.en.eq(1)]
                m.next = "IDLE"
        return m

    def _goto(self, m, state):
        """To ``state``, which first waits for the rule blocks it reads."""
        m.next = state
        m.d.sync += self._settle.eq(self._latency.get(state, 0))

    @contextlib.contextmanager
    def _settled(self, m):
        """The body of a state, once its rule blocks are settled."""
        with m.If(self._settle != 0):
            m.d.sync += self._settle.eq(self._settle - 1)
        with m.Else():
            yield

    def _wire_blocks(self, m, blocks, t, seg, fin_acked, now):
        """The rule blocks' inputs from the entry and the segment; returns the entry with
        the send timers set (TcpArm's)."""
        check, ack, rtt, text = blocks["check"], blocks["ack"], blocks["rtt"], blocks["text"]
        window, arm = blocks["window"], blocks["arm"]
        m.d.comb += [
            check.tcb.state.eq(t.state), check.tcb.rcv_nxt.eq(t.recv.rcv_nxt),
            check.tcb.rcv_adv.eq(t.recv.rcv_adv), check.tcb.snd_una.eq(t.send.snd_una),
            check.tcb.snd_max.eq(t.send.snd_max), check.tcb.max_snd_wnd.eq(t.send.max_snd_wnd),
            check.seg.seq.eq(seg.seq), check.seg.ack.eq(seg.ack), check.seg.flags.eq(seg.flags),
            check.seg.length.eq(seg.length),
            ack.i.eq(t.send), ack.seg.seq.eq(seg.seq), ack.seg.ack.eq(seg.ack),
            ack.seg.window.eq(seg.window), ack.seg.flags.eq(seg.flags),
            ack.seg.length.eq(seg.length),
            rtt.i.eq(t.rtt), rtt.ack.eq(seg.ack), rtt.now.eq(now),
            rtt.rto_min.eq(self.rto_min), rtt.rto_max.eq(self.rto_max),
            rtt.rto_initial.eq(self.rto_initial),
            text.i.state.eq(t.state), text.i.rcv_nxt.eq(t.recv.rcv_nxt),
            text.i.rcv_adv.eq(t.recv.rcv_adv), text.i.rcv_unacked.eq(t.recv.rcv_unacked),
            text.i.send_mss.eq(t.send.send_mss), text.i.ack_now.eq(t.recv.ack_now),
            text.i.dup_ack.eq(t.recv.dup_ack), text.i.delack_armed.eq(t.recv.delack_armed),
            text.i.delack_at.eq(t.recv.delack_at), text.i.fin_acked.eq(fin_acked),
            text.seg.seq.eq(seg.seq), text.seg.flags.eq(seg.flags),
            text.seg.length.eq(seg.length), text.now.eq(now), text.delack.eq(self.delack),
            window.rcv_nxt.eq(t.recv.rcv_nxt), window.rcv_adv.eq(t.recv.rcv_adv),
            window.rcv_wnd.eq(self.rcv_wnd), window.rcv_shift.eq(t.recv.rcv_shift),
            arm.now.eq(now), arm.rto_max.eq(self.rto_max),
        ]
        return self._wire_arm(m, arm, t)

    @staticmethod
    def _fin_acked(m, t):
        """Our FIN is sent and acknowledged (SND.UNA past it), as a signal."""
        acked = Signal(name="fin_acked")
        m.d.comb += acked.eq(t.fin_pending & seq_after(m, t.send.snd_una, t.fin_seq,
                                                       "fin_past"))
        return acked

    @staticmethod
    def _wire_arm(m, arm, t):
        """TcpArm's view of the entry; returns the entry with its timers set."""
        i = arm.i
        m.d.comb += [i.state.eq(t.state), i.snd_wnd.eq(t.send.snd_wnd),
                     i.snd_una.eq(t.send.snd_una), i.snd_nxt.eq(t.send.snd_nxt),
                     i.snd_max.eq(t.send.snd_max), i.data_end.eq(t.data_end),
                     i.rto.eq(t.rtt.rto), i.rto_armed.eq(t.timers.rto_armed),
                     i.rto_at.eq(t.timers.rto_at), i.persist_armed.eq(t.timers.persist_armed),
                     i.persist_at.eq(t.timers.persist_at),
                     i.persist_backoff.eq(t.timers.persist_backoff)]
        # registered: the rule's logic stays off the path to the table's write port
        o = Signal(ArmState(), name="arm_o")
        m.d.sync += o.eq(arm.o)
        out = Signal(Tcb(), name="armed_tcb")
        m.d.comb += [out.eq(t), out.send.snd_nxt.eq(o.snd_nxt),
                     out.timers.rto_armed.eq(o.rto_armed), out.timers.rto_at.eq(o.rto_at),
                     out.timers.persist_armed.eq(o.persist_armed),
                     out.timers.persist_at.eq(o.persist_at),
                     out.timers.persist_backoff.eq(o.persist_backoff)]
        return out

    def _decide(self, m, t, conn, seg, verdict, reason, blocks):
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
                m.d.sync += [t.rtt.eq(rtt.o), t.timers.rto_armed.eq(0)]
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
            with m.If(fin_acked & (t.state == S.FIN_WAIT_1)):
                m.d.comb += text.i.state.eq(S.FIN_WAIT_2)
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

    def _time_wait(self, m, t, now):
        m.d.sync += [t.state.eq(spec.TcpState.TIME_WAIT), t.timers.tw_armed.eq(1),
                     t.timers.tw_at.eq(now + self.time_wait), t.timers.rto_armed.eq(0),
                     t.timers.persist_armed.eq(0)]

    def _flush(self, m, t, blocks):
        """The pure ACK owed (a duplicate, or one due at once), then the timers."""
        window = blocks["window"]
        with m.If((t.recv.dup_ack | t.recv.ack_now) & ~self.ack.valid):
            d = self.ack.payload
            m.d.sync += [self.ack.valid.eq(1), d.dst_ip.eq(t.remote_ip),
                         d.src_port.eq(t.local_port), d.dst_port.eq(t.remote_port),
                         d.seq.eq(t.send.snd_nxt), d.ack.eq(t.recv.rcv_nxt),
                         d.flags.eq(0), d.flags.ack.eq(1), d.window.eq(window.window),
                         d.length.eq(0), d.payload_sum.eq(0), d.syn_options.eq(0),
                         t.recv.rcv_adv.eq(window.new_adv), t.recv.ack_now.eq(0),
                         t.recv.dup_ack.eq(0), t.recv.delack_armed.eq(0),
                         t.recv.rcv_unacked.eq(0)]
        with m.Elif(~self.ack.valid):
            self._goto(m, "STORE")

    def _deliver(self, m, conn, seg, *, keep, skip):
        a = self.action.payload
        m.d.sync += [self.action.valid.eq(1), a.conn.eq(conn), a.length.eq(seg.length),
                     a.skip.eq(skip), a.keep.eq(keep)]

    def _free(self, m, t, conn, seg, kind):
        """The connection ends: its entry CLOSED, reported, its payload dropped."""
        m.d.sync += [t.state.eq(spec.TcpState.CLOSED), self.report.valid.eq(1),
                     self.report.payload.conn.eq(conn), self.report.payload.kind.eq(kind)]
        self._deliver(m, conn, seg, keep=0, skip=0)
        self._goto(m, "CLOSE")
