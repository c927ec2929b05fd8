"""The engine's timer steps: the model's ``_timers`` on a connection whose deadline
passed (TIME-WAIT over, retransmission timeout, persist probe, delayed ACK due)."""

from rnic.host.spec import tcp_engine as spec

from .events import EngineEvent

__all__ = ["TimerSteps"]


class TimerSteps:
    """States TIMERS, TIMEOUT and GIVE_UP of :class:`~rnic.hdl.tcp.event_engine.TcpEventEngine`
    (a mixin: the engine's ports, its ``_goto``, ``_free``, ``_deliver`` and
    ``_pending``).

    TIMERS follows the model's order on a timer report: TIME-WAIT over frees the
    connection (CLOSED); a retransmission timeout goes to TIMEOUT
    (:class:`~rnic.hdl.tcp.timeout.TcpTimeout`), which backs off and goes back to SND.UNA,
    or after ``max_retries`` to GIVE_UP (a RST from a synchronized state, LOST, freed);
    a SYN-SENT connection sends its SYN again;
    a persist timer over sends a one-octet probe from SND.UNA (``probe``, sent by STEP) and
    backs off (:class:`~rnic.hdl.tcp.arm.TcpArm` restarts it at the entry's store); a
    delayed ACK due is owed at once. The sending follows (FLUSH).
    """

    def _wire_timeout(self, m, t, now, timeout):
        """TcpTimeout's view of the entry ``t``."""
        i, s = timeout.i, t.send
        m.d.comb += [i.state.eq(t.state), i.retries.eq(s.retries), i.rto.eq(t.rtt.rto),
                     i.rto_armed.eq(t.timers.rto_armed), i.rto_at.eq(t.timers.rto_at),
                     i.timing.eq(t.rtt.timing), i.snd_una.eq(s.snd_una),
                     i.snd_nxt.eq(s.snd_nxt), i.snd_max.eq(s.snd_max),
                     i.send_mss.eq(s.send_mss), i.cwnd.eq(s.cwnd), i.ssthresh.eq(s.ssthresh),
                     i.ca_acked.eq(s.ca_acked), i.dupacks.eq(s.dupacks),
                     i.in_recovery.eq(s.in_recovery), i.recover.eq(s.recover),
                     timeout.now.eq(now), timeout.rto_max.eq(self.rto_max),
                     timeout.max_retries.eq(self.max_retries)]

    def _timers(self, m, t, conn, seg, blocks, kind, written, probe):
        """After the entry is read: a segment goes on to its checks; a timer report runs
        the timers due; octets written move the ring's end; then (but for a segment) the
        sending. A connection that is over (it ended after the event was queued, as a
        TIME-WAIT that ended after the front found it for a segment) takes nothing: a
        segment is dropped as for no connection."""
        timers = blocks["timers"]
        closed = t.state == spec.TcpState.CLOSED
        timer = kind == EngineEvent.TIMER
        with m.If(closed & (kind == EngineEvent.SEGMENT)):
            m.d.comb += [self.drop.valid.eq(1), self.drop.reason.eq(spec.TcpDrop.NO_CONNECTION)]
            self._deliver(m, conn, seg, keep=0, skip=0)
            m.next = "IDLE"
        with m.Elif(closed):
            self._mark_pending(m, 0)
            m.next = "IDLE"
        with m.Elif((kind == EngineEvent.SEGMENT) & (t.state == spec.TcpState.SYN_SENT)):
            self._goto(m, "SYN_SENT")
        with m.Elif(kind == EngineEvent.SEGMENT):
            self._goto(m, "CHECK")
        with m.Elif(timer & timers.tw_due):
            self._free(m, t, conn, None, spec.TcpEventKind.CLOSED)
        with m.Elif(timer & timers.rto_due):
            self._goto(m, "TIMEOUT")
        with m.Else():
            with m.If(timer & timers.persist_due):
                backoff = t.timers.persist_backoff
                m.d.sync += [probe.eq(1), t.timers.persist_armed.eq(0),
                             backoff.eq(backoff + (backoff != (1 << len(backoff)) - 1))]
            self._delack_due(m, t, timers, timer)
            with m.If(kind == EngineEvent.WRITTEN):
                m.d.sync += t.data_end.eq(written)
            self._goto(m, "FLUSH")

    def _delack_due(self, m, t, timers, timer):
        with m.If(timer & timers.delack_due):
            m.d.sync += t.recv.ack_now.eq(1)

    def _timeout(self, m, t, blocks):
        """TIMEOUT: the retransmission timer expired (the model's ``_timeout``)."""
        timeout = blocks["timeout"]
        o = timeout.o
        with m.If(timeout.give_up):
            m.next = "GIVE_UP"
        with m.Else():
            with m.If(timeout.resend_syn):
                self._resend_syn(m)
            s = t.send
            m.d.sync += [s.retries.eq(o.retries), t.rtt.rto.eq(o.rto),
                         t.rtt.timing.eq(o.timing), t.timers.rto_armed.eq(o.rto_armed),
                         t.timers.rto_at.eq(o.rto_at), s.snd_nxt.eq(o.snd_nxt),
                         s.cwnd.eq(o.cwnd), s.ssthresh.eq(o.ssthresh),
                         s.ca_acked.eq(o.ca_acked), s.dupacks.eq(o.dupacks),
                         s.in_recovery.eq(o.in_recovery), s.recover.eq(o.recover)]
            self._delack_due(m, t, blocks["timers"], 1)
            self._goto(m, "FLUSH")

    def _give_up(self, m, t, conn, blocks):
        """GIVE_UP: the retries are spent: a RST at SND.NXT from a synchronized state
        (no ACK, window 0), then the connection is LOST."""
        self._reset_and_free(m, t, conn, blocks["timeout"].reset, spec.TcpEventKind.LOST)
