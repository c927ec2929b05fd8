"""What an accepted segment's text and FIN do: which octets are delivered, RCV.NXT, the
ACK owed, and the close states (RFC 9293 section 3.10.7.4, seventh and eighth steps)."""

from amaranth.hdl import Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec

from .layouts import TcpFlags
from .layouts import TcpState
from .seq import window_left
from .stage import staged

__all__ = ["TcpRxText", "RecvState", "TextSeg"]


class RecvState(data.StructLayout):
    """A connection's receive-side fields (the model's names): ``fin_acked`` our FIN is
    acknowledged; ``delack_armed`` and ``delack_at`` the delayed-ACK timer."""

    def __init__(self):
        super().__init__({"state": TcpState, "rcv_nxt": 32, "rcv_adv": 32, "rcv_unacked": 32,
                          "send_mss": 16, "ack_now": 1, "dup_ack": 1, "delack_armed": 1,
                          "delack_at": 32, "fin_acked": 1})


class TextSeg(data.StructLayout):
    """The segment's fields the text rules read (``length``: payload octets)."""

    def __init__(self):
        super().__init__({"seq": 32, "flags": TcpFlags(), "length": 16})


class TcpRxText(wiring.Component):
    """The model's ``_text`` and ``_peer_fin`` (:class:`rnic.host.model.tcp_engine.TcpEngine`),
    for a segment the checks and the ACK field accepted.

    In ESTABLISHED, FIN-WAIT-1 and FIN-WAIT-2, for a segment with octets or a FIN:

    * starting after RCV.NXT (a hole): nothing delivered, ``out_of_order`` (dropped,
      counted) and a duplicate ACK owed (``dup_ack``);
    * else the octets from RCV.NXT on, as far as the advertised window goes, are delivered:
      ``skip`` octets of the payload are left out, ``keep`` delivered (RCV.NXT advances by
      them); a segment that started before RCV.NXT is ACKed at once (``ack_now``); the
      octets not yet acknowledged count up, and reaching two send MSS owes an ACK at once,
      else the delayed-ACK timer starts (``now + delack``) unless it runs;
    * a FIN right after the delivered octets: RCV.NXT + 1, ACK at once, ``peer_closed``;
      ESTABLISHED -> CLOSE-WAIT, FIN-WAIT-1 -> CLOSING (TIME-WAIT when our FIN is
      acknowledged), FIN-WAIT-2 -> TIME-WAIT (``time_wait``: the engine starts its timer
      and stops the others).

    Latency: :data:`LATENCY` cycles from inputs that hold still
    (:mod:`~rnic.hdl.tcp.stage`).

    Ports
    -----
    i : In(RecvState)
    seg : In(TextSeg)
    now, delack : In(32)
    o : Out(RecvState)
    skip, keep : Out(16)
        Of the segment's payload (:class:`~rnic.hdl.tcp.rx_deliver.RxAction`).
    out_of_order, peer_closed, time_wait : Out(1)
    """

    def __init__(self):
        super().__init__({
            "i": In(RecvState()),
            "seg": In(TextSeg()),
            "now": In(32),
            "delack": In(32),
            "o": Out(RecvState()),
            "skip": Out(16),
            "keep": Out(16),
            "out_of_order": Out(1),
            "peer_closed": Out(1),
            "time_wait": Out(1),
        })

    #: Cycles from the inputs to the outputs.
    LATENCY = 4

    def elaborate(self, platform):
        m = Module()
        i, o, seg = self.i, self.o, self.seg
        m.d.comb += o.eq(i)
        S = spec.TcpState
        # 1: the octets already delivered (RCV.NXT - SEG.SEQ), the advertised window; the
        # decisions on the state and the segment's flags (the outputs' enables then come
        # from registers, not from the compares)
        behind = staged(m, i.rcv_nxt - seg.seq, "behind", 32)
        room = staged(m, window_left(m, i.rcv_adv, i.rcv_nxt, "room"), "room")
        receiving = (i.state == S.ESTABLISHED) | (i.state == S.FIN_WAIT_1) | (
            i.state == S.FIN_WAIT_2)
        s = dict(
            fin_nxt=staged(m, i.rcv_nxt + 1, "fin_nxt", 32),
            delack_at=staged(m, self.now + self.delack, "delack_at", 32),
            # the octets that owe an ACK at once (ACK_EVERY_SEGMENTS send MSS in all)
            short=staged(m, spec.ACK_EVERY_SEGMENTS * i.send_mss - i.rcv_unacked, "short",
                         signed(34)),
            text=staged(m, receiving & ((seg.length != 0) | seg.flags.fin), "has_text"),
            fin=staged(m, seg.flags.fin, "has_fin"),
            established=staged(m, i.state == S.ESTABLISHED, "was_established"),
            closing=staged(m, (i.state == S.FIN_WAIT_1) & ~i.fin_acked, "to_closing"),
        )
        # 2, 3: what is kept: the octets from ``behind`` on, at most ``room`` of them
        beyond = staged(m, Mux(behind < seg.length, seg.length - behind, 0), "beyond", 17)
        s["late"] = staged(m, (behind != 0) & (seg.length != 0), "late")
        keep = staged(m, Mux(beyond < room, beyond, room), "keep", 16)
        s["kept"] = staged(m, (beyond != 0) & (room != 0), "kept")
        # 4: the sums with it
        s.update(
            unacked=staged(m, i.rcv_unacked + keep, "unacked", 32),
            nxt=staged(m, i.rcv_nxt + keep, "nxt", 32),
            fin_nxt=staged(m, s["fin_nxt"] + keep, "fin_keep_nxt", 32),
            ack_due=staged(m, keep >= s["short"], "ack_due"),
            fin_here=staged(m, s["fin"] & (behind + keep == seg.length), "fin_here"),
        )
        with m.If(s["text"]):
            with m.If(behind[31]):
                m.d.comb += [self.out_of_order.eq(1), o.dup_ack.eq(1)]
            with m.Else():
                m.d.comb += [self.skip.eq(behind), self.keep.eq(keep)]
                with m.If(s["late"]):
                    m.d.comb += o.ack_now.eq(1)
                self._delivered(m, s)
                with m.If(s["fin_here"]):
                    self._fin(m, s)
        return m

    def _delivered(self, m, s):
        """RCV.NXT and the ACK owed after the octets kept."""
        i, o = self.i, self.o
        with m.If(s["kept"]):
            m.d.comb += [o.rcv_nxt.eq(s["nxt"]), o.rcv_unacked.eq(s["unacked"])]
            with m.If(s["ack_due"]):
                m.d.comb += o.ack_now.eq(1)
            with m.Elif(~i.delack_armed):
                m.d.comb += [o.delack_armed.eq(1), o.delack_at.eq(s["delack_at"])]

    def _fin(self, m, s):
        """The peer's FIN, right after the delivered octets."""
        o = self.o
        m.d.comb += [o.rcv_nxt.eq(s["fin_nxt"]), o.ack_now.eq(1), self.peer_closed.eq(1)]
        with m.If(s["established"]):
            m.d.comb += o.state.eq(spec.TcpState.CLOSE_WAIT)
        with m.Elif(s["closing"]):
            m.d.comb += o.state.eq(spec.TcpState.CLOSING)
        with m.Else():
            m.d.comb += [o.state.eq(spec.TcpState.TIME_WAIT), self.time_wait.eq(1)]
