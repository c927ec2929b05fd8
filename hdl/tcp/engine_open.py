"""The event engine's steps of an active open: the segment that answers our SYN, and the
SYN sent again on a timeout."""

from amaranth.hdl import Mux, Signal

from rnic.host.spec import tcp_engine as spec

from .engine_ack import AckKind
from .syn_sent import SynSentVerdict, TcpSynSent

__all__ = ["OpenSteps"]


class OpenSteps:
    """State SYN_SENT of :class:`~rnic.hdl.tcp.event_engine.TcpEventEngine` and its SYN
    (a mixin: the engine's ports, ``_goto``, ``_free``, ``_deliver``).

    A segment on a SYN-SENT connection goes to SYN_SENT instead of the checks of a
    synchronized one (:class:`~rnic.hdl.tcp.syn_sent.TcpSynSent`, the model's
    ``_syn_sent``): a drop (an unacceptable ACK answered by ``<SEQ=SEG.ACK><CTL=RST>``),
    REFUSED (the peer's RST: the connection is freed), or the SYN-ACK: the connection's
    receive and send fields from it, the SYN's RTT sample when it was timed (Karn: not
    when it was sent again), the retransmission timer stopped, ESTABLISHED, CONNECTED
    reported and an ACK owed at once. Text on the SYN-ACK is not taken (the peer sends it
    again). The sending follows (FLUSH): that ACK, and what the core wrote meanwhile.
    """

    def _wire_open(self, m, t, seg):
        """TcpSynSent's view of the entry and the segment; the window of our SYN (the
        echo service's is at most its ring)."""
        m.submodules.syn_sent = syn_sent = TcpSynSent()
        ring_window = Signal(32)
        m.d.sync += ring_window.eq(Mux(self.tx_ring < self.rcv_wnd, self.tx_ring,
                                       self.rcv_wnd))
        self._syn_window = Signal(32)
        m.d.comb += [self._syn_window.eq(Mux(t.recv.echo, ring_window, self.rcv_wnd)),
                     syn_sent.snd_nxt.eq(t.send.snd_nxt), syn_sent.seg.eq(seg),
                     syn_sent.mss.eq(self.mss), syn_sent.rcv_scale.eq(self.rcv_scale),
                     syn_sent.rcv_wnd.eq(self._syn_window)]
        return syn_sent

    def _syn_sent(self, m, t, conn, seg, syn_sent, rtt):
        verdict = syn_sent.verdict
        with m.If(verdict == SynSentVerdict.REFUSED):
            self._free(m, t, conn, seg, spec.TcpEventKind.REFUSED)
        with m.Elif(verdict == SynSentVerdict.CONNECTED):
            self._connected(m, t, conn, syn_sent.connected, seg, rtt)
            self._deliver(m, conn, seg, keep=0, skip=0)
            self._goto(m, "FLUSH")
        with m.Else():
            m.d.comb += [self.drop.valid.eq(1), self.drop.reason.eq(syn_sent.reason)]
            with m.If(verdict == SynSentVerdict.DROP_RESET):
                self._send_ack(m, AckKind.RST_AT_SEG_ACK)
            self._deliver(m, conn, seg, keep=0, skip=0)
            self._goto(m, "FLUSH")

    def _connected(self, m, t, conn, c, seg, rtt):
        """The model's ``_connected``: the SYN-ACK's fields into the entry."""
        s, r = t.send, t.recv
        m.d.sync += [
            t.state.eq(spec.TcpState.ESTABLISHED), t.irs.eq(c.irs),
            r.rcv_nxt.eq(c.rcv_nxt), r.rcv_adv.eq(c.rcv_adv), r.rcv_shift.eq(c.rcv_shift),
            r.ack_now.eq(1), r.echo_delta.eq(c.irs - t.iss),
            s.snd_shift.eq(c.snd_shift), s.send_mss.eq(c.send_mss), s.snd_wnd.eq(c.snd_wnd),
            s.max_snd_wnd.eq(c.snd_wnd), s.snd_wl1.eq(c.snd_wl1), s.snd_wl2.eq(c.snd_wl2),
            s.snd_una.eq(c.snd_una), s.cwnd.eq(c.cwnd), s.retries.eq(0),
            t.timers.rto_armed.eq(0),
            self.report.valid.eq(1), self.report.payload.conn.eq(conn),
            self.report.payload.kind.eq(spec.TcpEventKind.CONNECTED),
        ]
        with m.If(t.rtt.timing):
            m.d.sync += t.rtt.eq(rtt.o)

    def _resend_syn(self, m):
        """Our SYN again (the model's ``_syn``), counted as a retransmission."""
        self._send_ack(m, AckKind.SYN)
        m.d.sync += self.retransmit.eq(1)
