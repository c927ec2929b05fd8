"""Whether a connection may send a segment from SND.NXT now, and how long it may be
(RFC 5681 section 3.1, RFC 9293 section 3.8.6)."""

from amaranth.hdl import Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec

from .layouts import TcpState
from .seq import seq_distance
from .stage import staged

__all__ = ["TcpSendStep", "SendWindowState"]


class SendWindowState(data.StructLayout):
    """The fields the rule reads (the model's names; ``data_end`` the sequence number
    after the octets written)."""

    def __init__(self):
        super().__init__({"state": TcpState, "snd_una": 32, "snd_nxt": 32, "snd_max": 32,
                          "snd_wnd": 32, "cwnd": 32, "send_mss": 16, "data_end": 32,
                          "fin_pending": 1, "fin_seq": 32})


class TcpSendStep(wiring.Component):
    """One turn of the model's ``_send_window`` (:class:`rnic.host.model.tcp_engine.TcpEngine`):
    in a state that sends (ESTABLISHED, CLOSE-WAIT, FIN-WAIT-1, CLOSING, LAST-ACK),

    * with octets written and not sent (``unsent`` = data end - SND.NXT > 0) and a usable
      window (min(cwnd, SND.WND) - (SND.NXT - SND.UNA) > 0): ``cut``, a segment from
      SND.NXT of at most ``limit`` = min(send MSS, usable window, unsent) octets, where
      :class:`~rnic.hdl.tcp.send_cut.TcpSendCut` says (``may_split`` when nothing is in
      flight);
    * with every written octet sent and our FIN due at SND.NXT: ``fin``, the FIN alone;
    * else nothing to send.

    And the model's ``_send_first`` (fast retransmit, a partial ACK): the first
    unacknowledged segment again is cut from SND.UNA within ``first_limit`` = min(send
    MSS, octets sent and written past SND.UNA) octets (0: none), FIN alone when it is the
    only thing outstanding (``first_fin``).

    Latency: :data:`LATENCY` cycles from inputs that hold still
    (:mod:`~rnic.hdl.tcp.stage`).

    Ports
    -----
    i : In(SendWindowState)
    cut, fin, may_split : Out(1)
    limit : Out(16)
    first_limit : Out(16)
    first_fin : Out(1)
    """

    #: Cycles from the inputs to the outputs.
    LATENCY = 3

    def __init__(self):
        super().__init__({
            "i": In(SendWindowState()),
            "cut": Out(1),
            "fin": Out(1),
            "may_split": Out(1),
            "limit": Out(16),
            "first_limit": Out(16),
            "first_fin": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        i = self.i
        S = spec.TcpState
        sending = ((i.state == S.ESTABLISHED) | (i.state == S.CLOSE_WAIT)
                   | (i.state == S.FIN_WAIT_1) | (i.state == S.CLOSING)
                   | (i.state == S.LAST_ACK))
        # 1: the window, the octets in flight, the octets not sent
        window = staged(m, Mux(i.cwnd < i.snd_wnd, i.cwnd, i.snd_wnd), "window", 32)
        flight = staged(m, seq_distance(m, i.snd_nxt, i.snd_una, "flight"), "in_flight")
        unsent = staged(m, seq_distance(m, i.data_end, i.snd_nxt, "unsent").as_signed(),
                        "not_sent")
        # 2: the usable window
        usable = staged(m, window - flight, "usable", signed(34))
        # 3: the segment's limit: the least of the MSS, the usable window and the unsent
        mss = i.send_mss
        mss_least = (mss <= usable) & (mss <= unsent)
        usable_least = (usable <= unsent)
        limit = staged(m, Mux(mss_least, mss, Mux(usable_least, usable, unsent)), "limit", 16)
        # the first segment again: 1: sent and written past SND.UNA, 2: the less, 3: the limit
        sent_max = staged(m, seq_distance(m, i.snd_max, i.snd_una, "sent").as_signed(),
                          "sent_max")
        sent_end = staged(m, seq_distance(m, i.data_end, i.snd_una, "held").as_signed(),
                          "sent_end")
        sent = staged(m, Mux(sent_max < sent_end, sent_max, sent_end), "sent_first",
                      signed(32))
        first = staged(m, Mux(sent <= 0, 0, Mux(sent < mss, sent, mss)), "first_limit", 16)
        # the decisions, registered too (the engine's enables then come from registers):
        # 1: on the inputs, 2: with the octets not sent, 3: with the usable window
        sending = staged(m, sending, "sending")
        first_fin = staged(m, i.fin_pending & (i.snd_una == i.fin_seq), "first_fin")
        at_fin = staged(m, i.fin_pending & (i.snd_nxt == i.fin_seq), "at_fin")
        may_split = staged(m, i.snd_nxt == i.snd_una, "may_split")
        has_unsent = staged(m, sending & (unsent > 0), "has_unsent")
        fin = staged(m, sending & (unsent == 0) & at_fin, "fin_alone")
        cut = staged(m, has_unsent & (usable > 0), "cut")
        m.d.comb += [
            self.first_limit.eq(first),
            self.first_fin.eq(first_fin),
            self.cut.eq(cut),
            self.fin.eq(fin),
            self.may_split.eq(may_split),
            self.limit.eq(limit),
        ]
        return m
