"""The event engine's sending steps: the model's ``_flush`` after every event (a
duplicate ACK first, then what the windows let go, then an ACK still owed), one data
segment per event."""

from amaranth.hdl import Mux

from .engine_ack import AckKind
from .seq import seq_before
from .stage import staged

__all__ = ["SendSteps"]


class SendSteps:
    """States FLUSH, STEP, ANSWER, DATA and ACK_NOW of
    :class:`~rnic.hdl.tcp.event_engine.TcpEventEngine` (a mixin: the engine's ports and its
    ``_goto``, ``_pending``).

    FLUSH sends the duplicate ACK owed (a pure ACK's SEQ is SND.MAX, never past the peer's
    window). A persist probe (``probe``) is one octet from
    SND.UNA. An ACK that asked for the first unacknowledged
    segment again (``resend``: fast retransmit, a partial ACK) has it sent first, cut from
    SND.UNA (the model's ``_send_first``). STEP asks :class:`~rnic.hdl.tcp.send_step.TcpSendStep`
    whether a segment may go from SND.NXT: if so the cut (``cut``, ``answer``,
    :class:`~rnic.hdl.tcp.send_cut.TcpSendCut`) says how long; a segment with octets, or
    our FIN alone, is sent (``send``, to the ring reader) with the fields of
    :class:`~rnic.hdl.tcp.send_data.TcpSendData` and the ACK and window every segment
    carries, and the connection stays pending: the next segment is another event's. A
    connection with nothing to send leaves the pending set. ACK_NOW sends an ACK still
    owed.
    """

    def _wire_send(self, m, t, now, blocks, length, resend):
        step, data = blocks["step"], blocks["data"]
        # the send port was free in the cycle before: only DATA sets it, and leaves DATA as
        # it does (the port's handshake stays off the entry's enables)
        self._send_free = staged(m, ~self.send.valid, "send_was_free")
        m.d.comb += [
            step.i.state.eq(t.state), step.i.snd_una.eq(t.send.snd_una),
            step.i.snd_nxt.eq(t.send.snd_nxt), step.i.snd_max.eq(t.send.snd_max),
            step.i.snd_wnd.eq(t.send.snd_wnd),
            step.i.cwnd.eq(t.send.cwnd), step.i.send_mss.eq(t.send.send_mss),
            step.i.data_end.eq(t.data_end), step.i.fin_pending.eq(t.fin_pending),
            step.i.fin_seq.eq(t.fin_seq),
            data.i.snd_nxt.eq(t.send.snd_nxt), data.i.snd_max.eq(t.send.snd_max),
            data.i.data_end.eq(t.data_end), data.i.fin_pending.eq(t.fin_pending),
            data.i.fin_seq.eq(t.fin_seq), data.i.timing.eq(t.rtt.timing),
            data.i.rtt_seq.eq(t.rtt.rtt_seq), data.i.rtt_time.eq(t.rtt.rtt_time),
            data.seq.eq(Mux(resend, t.send.snd_una, t.send.snd_nxt)), data.length.eq(length),
            data.now.eq(now),
        ]

    def _header(self, m, desc, t, window):
        """The fields every segment of the connection carries: addresses, ports, the ACK
        of RCV.NXT and the window (:meth:`_advertise`)."""
        m.d.sync += [desc.dst_ip.eq(t.remote_ip), desc.src_port.eq(t.local_port),
                     desc.dst_port.eq(t.remote_port), desc.ack.eq(t.recv.rcv_nxt),
                     desc.window.eq(window.window), desc.payload_sum.eq(0),
                     desc.syn_options.eq(0)]
        self._advertise(m, t, window)

    @staticmethod
    def _advertise(m, t, window):
        """A segment with our ACK and window goes: the advertised edge moves and no ACK is
        owed after it."""
        m.d.sync += [t.recv.rcv_adv.eq(window.new_adv), t.recv.ack_now.eq(0),
                     t.recv.dup_ack.eq(0), t.recv.delack_armed.eq(0),
                     t.recv.rcv_unacked.eq(0)]

    def _pure_ack(self, m, t, blocks):
        self._advertise(m, t, blocks["window"])
        self._send_ack(m, AckKind.PURE_ACK)

    def _flush(self, m, t, blocks):
        """FLUSH: the duplicate ACK owed, then the sending."""
        with m.If(t.recv.dup_ack & ~self._ack_busy):
            self._pure_ack(m, t, blocks)
        with m.Elif(~self._ack_busy):
            self._goto(m, "STEP")

    def _step(self, m, t, conn, blocks, length, resend, probe):
        """STEP: a persist probe (one octet from SND.UNA, uncut) or the first segment
        again, when asked; else a segment from SND.NXT to cut, our FIN alone, or
        nothing."""
        step = blocks["step"]
        c = self.cut.payload
        with m.If(probe):
            m.d.sync += [length.eq(1), resend.eq(1), probe.eq(0)]
            self._goto(m, "DATA")
        with m.Elif(resend & (step.first_limit != 0)):
            m.d.sync += [self.cut.valid.eq(1), c.conn.eq(conn), c.seq.eq(t.send.snd_una),
                         c.limit.eq(step.first_limit), c.may_split.eq(1)]
            m.next = "ANSWER"
        with m.Elif(resend & step.first_fin):
            m.d.sync += length.eq(0)
            self._goto(m, "DATA")
        with m.Elif(resend):
            m.d.sync += resend.eq(0)
            self._goto(m, "STEP")
        with m.Elif(step.cut):
            m.d.sync += [self.cut.valid.eq(1), c.conn.eq(conn), c.seq.eq(t.send.snd_nxt),
                         c.limit.eq(step.limit), c.may_split.eq(step.may_split)]
            m.next = "ANSWER"
        with m.Elif(step.fin):
            m.d.sync += length.eq(0)
            self._goto(m, "DATA")
        with m.Else():
            self._mark_pending(m, 0)
            self._goto(m, "ACK_NOW")

    def _answer(self, m, conn, length, resend, first_fin):
        """ANSWER: the cut's length; 0 waits for the window (or more octets), or (the
        first segment again) sends the FIN alone when it is outstanding, else goes on to
        the window's segments."""
        m.d.comb += self.answer.ready.eq(~self.cut.valid)
        with m.If(self.answer.valid & self.answer.ready):
            m.d.sync += length.eq(self.answer.payload.length)
            with m.If((self.answer.payload.length != 0) | (resend & first_fin)):
                self._goto(m, "DATA")
            with m.Elif(resend):
                m.d.sync += resend.eq(0)
                self._goto(m, "STEP")
            with m.Else():
                self._mark_pending(m, 0)
                self._goto(m, "ACK_NOW")

    def _data(self, m, t, conn, blocks, length, resend):
        """DATA: the segment to the ring reader; the connection's send fields after it.
        After the first segment again, the window's segments follow."""
        data = blocks["data"]
        d = self.send.payload.desc
        sent_before = seq_before(m, data.seq, t.send.snd_max, "sent_before")
        with m.If(self._send_free):
            self._header(m, d, t, blocks["window"])
            m.d.sync += self.retransmit.eq(sent_before)
            m.d.sync += [self.send.valid.eq(1), self.send.payload.conn.eq(conn),
                         d.seq.eq(data.seq), d.flags.eq(data.flags), d.length.eq(length),
                         t.send.snd_nxt.eq(data.o.snd_nxt), t.send.snd_max.eq(data.o.snd_max),
                         t.rtt.timing.eq(data.o.timing), t.rtt.rtt_seq.eq(data.o.rtt_seq),
                         t.rtt.rtt_time.eq(data.o.rtt_time),
                         resend.eq(0)]
            self._mark_pending(m, 1)
            with m.If(resend):
                self._goto(m, "STEP")
            with m.Else():
                self._goto(m, "ACK_NOW")

    def _ack_now(self, m, t, blocks):
        """ACK_NOW: an ACK still owed (no segment carried it)."""
        with m.If(t.recv.ack_now & ~self._ack_busy):
            self._pure_ack(m, t, blocks)
        with m.Elif(~self._ack_busy):
            self._goto(m, "STORE")
