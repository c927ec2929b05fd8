"""The front's active opens: a host's CONNECT takes a free id and a place in the connection
table, writes a SYN-SENT entry and sends the SYN (the model's ``connect``)."""

from rnic.host.spec import tcp_engine as spec

from .conn_table import ConnTableOp
from .reply import ReplyKind

__all__ = ["ConnectSteps"]

_RESULT = spec.TcpConnectResult


class ConnectSteps:
    """States CONNECT, CONNECT_FOUND, CONNECT_INSERT and CONNECT_INSERTED of
    :class:`~rnic.hdl.tcp.rx_front.TcpRxFront` (a mixin: the front's ports, its ``_echo``
    and ``_table_command``).

    A request is taken between segments (before a waiting one) and held in the segment's
    fields as if the peer had sent it (``src_ip``, ``src_port`` the peer's, ``dst_port``
    ours), so that the table's key and the SYN's addresses come from where a segment's
    do. Its four-tuple is looked up first: a connection already (IN_USE) or no free id
    (NO_FREE_CONNECTION) sends nothing. Else the lowest free id is inserted under the key
    (a full bucket: NO_FREE_CONNECTION), its SYN-SENT entry written (the SYN timed, the
    retransmission timer at ``now + rto_initial``, which the engine arms as it takes the
    entry), the SYN sent (:class:`~rnic.hdl.tcp.reply.TcpReply`) and SYN_SENT answered
    with the id. The engine takes it from there: the SYN-ACK, the SYN's retransmissions.
    """

    def _take_connect(self, m, info, iss, kind):
        """IDLE takes the request into the segment's fields."""
        c = self.connect.payload
        m.d.comb += self.connect.ready.eq(1)
        m.d.sync += [info.eq(0), info.src_ip.eq(c.remote_ip), info.src_port.eq(c.remote_port),
                     info.dst_port.eq(c.local_port), iss.eq(c.iss), self._echo.eq(c.echo),
                     kind.eq(ReplyKind.SYN)]
        m.next = "CONNECT"

    def _connect_states(self, m, info, iss, conn, table, ids):
        with m.State("CONNECT"):
            self._table_command(m, table, ConnTableOp.LOOKUP, "CONNECT_FOUND")
        with m.State("CONNECT_FOUND"):
            with m.If(table.resp.valid & table.resp.payload.hit):
                self._connect_answer(m, _RESULT.IN_USE, 0)
            with m.Elif(table.resp.valid & ~ids.any_free):
                self._connect_answer(m, _RESULT.NO_FREE_CONNECTION, 0)
            with m.Elif(table.resp.valid):
                m.d.sync += conn.eq(ids.free_id)
                m.next = "CONNECT_INSERT"
        with m.State("CONNECT_INSERT"):
            self._table_command(m, table, ConnTableOp.INSERT, "CONNECT_INSERTED")
        with m.State("CONNECT_INSERTED"):
            with m.If(table.resp.valid & table.resp.payload.hit):
                m.d.comb += ids.take.eq(1)
                self._syn_sent_entry(m, info, iss, conn)
                m.d.sync += self.reply.valid.eq(1)
                self._connect_answer(m, _RESULT.SYN_SENT, conn)
            with m.Elif(table.resp.valid):
                self._connect_answer(m, _RESULT.NO_FREE_CONNECTION, 0)

    def _syn_sent_entry(self, m, info, iss, conn):
        """The entry of the model's ``connect``: SND.UNA = ISS, SND.NXT = SND.MAX = the
        ring's start = ISS + 1, the SYN timed, RTO the initial one and armed."""
        t = self.write.payload.tcb
        m.d.sync += [
            self.write.valid.eq(1), self.write.payload.conn.eq(conn), t.eq(0),
            t.state.eq(spec.TcpState.SYN_SENT), t.remote_ip.eq(info.src_ip),
            t.remote_port.eq(info.src_port), t.local_port.eq(info.dst_port),
            t.iss.eq(iss), t.data_end.eq(iss + 1),
            t.send.snd_una.eq(iss), t.send.snd_nxt.eq(iss + 1), t.send.snd_max.eq(iss + 1),
            t.send.send_mss.eq(self.mss), t.send.ssthresh.eq(spec.MAX_WINDOW),
            t.send.recover.eq(iss),
            t.rtt.rto.eq(self.rto_initial), t.rtt.timing.eq(1), t.rtt.rtt_seq.eq(iss + 1),
            t.rtt.rtt_time.eq(self.now),
            t.timers.rto_armed.eq(1), t.timers.rto_at.eq(self.now + self.rto_initial),
            t.recv.echo.eq(self._echo),
        ]

    def _connect_answer(self, m, result, conn):
        a = self.connect_answer.payload
        m.d.sync += [self.connect_answer.valid.eq(1), a.result.eq(result), a.conn.eq(conn)]
        m.next = "IDLE"
