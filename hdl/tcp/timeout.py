"""What a retransmission timeout does (RFC 6298 section 5.4 to 5.7, RFC 5681 section 3.1,
RFC 6582 section 4)."""

from amaranth.hdl import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec

from .layouts import TcpState
from .stage import staged

__all__ = ["TcpTimeout", "TimeoutState"]


class TimeoutState(data.StructLayout):
    """The fields a timeout reads and writes (the model's names; ``rto_armed`` and
    ``rto_at`` the retransmission timer, ``timing`` whether an RTT sample runs)."""

    def __init__(self):
        super().__init__({"state": TcpState, "retries": 8, "rto": 32, "rto_armed": 1,
                          "rto_at": 32, "timing": 1, "snd_una": 32, "snd_nxt": 32,
                          "snd_max": 32, "send_mss": 16, "cwnd": 32, "ssthresh": 32,
                          "ca_acked": 32, "dupacks": 3, "in_recovery": 1, "recover": 32})


class TcpTimeout(wiring.Component):
    """The model's ``_timeout`` (:class:`rnic.host.model.tcp_engine.TcpEngine`) on a
    connection whose retransmission timer expired at ``now``:

    * the retry count goes up; past ``max_retries`` the connection gives up (``give_up``:
      a RST from a synchronized state, ``reset``; LOST; the id is freed);
    * else RTO doubles (at most ``rto_max``), the RTT sample is spoilt, the timer restarts
      at ``now + RTO``; SYN-SENT sends its SYN again (``resend_syn``); a synchronized
      connection takes ssthresh = max(flight / 2, 2 MSS), cwnd = 1 MSS, leaves recovery
      with ``recover`` = SND.MAX and goes back to SND.UNA (``go_back``: the engine sends
      what the window lets go from there).

    Latency: :data:`LATENCY` cycles from inputs that hold still
    (:mod:`~rnic.hdl.tcp.stage`).

    Ports
    -----
    i : In(TimeoutState)
    now, rto_max : In(32)
    max_retries : In(8)
    o : Out(TimeoutState)
    give_up, reset, resend_syn, go_back : Out(1)
    """

    def __init__(self):
        super().__init__({
            "i": In(TimeoutState()),
            "now": In(32),
            "rto_max": In(32),
            "max_retries": In(8),
            "o": Out(TimeoutState()),
            "give_up": Out(1),
            "reset": Out(1),
            "resend_syn": Out(1),
            "go_back": Out(1),
        })

    #: Cycles from the inputs to the outputs.
    LATENCY = 2

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        mss = i.send_mss
        # 1: the retries, the doubled RTO against its maximum, half the flight
        retries = staged(m, i.retries + 1, "retries", 9)
        doubled = i.rto << 1
        capped = staged(m, doubled > self.rto_max, "capped")
        doubled_at = staged(m, self.now + doubled, "doubled_at", 32)
        max_at = staged(m, self.now + self.rto_max, "max_at", 32)
        half = staged(m, (i.snd_max - i.snd_una)[1:32], "half", 31)
        # 2: the new ssthresh
        ssthresh = staged(m, Mux(half > 2 * mss, half, 2 * mss), "ssthresh", 32)
        m.d.comb += [o.eq(i), o.retries.eq(retries)]
        synchronized = (i.state != spec.TcpState.CLOSED) & (i.state != spec.TcpState.SYN_SENT)
        with m.If(retries > self.max_retries):
            m.d.comb += [self.give_up.eq(1), self.reset.eq(synchronized)]
        with m.Else():
            m.d.comb += [o.rto.eq(Mux(capped, self.rto_max, doubled)), o.timing.eq(0),
                         o.rto_armed.eq(1), o.rto_at.eq(Mux(capped, max_at, doubled_at))]
            with m.If(i.state == spec.TcpState.SYN_SENT):
                m.d.comb += self.resend_syn.eq(1)
            with m.Else():
                m.d.comb += [o.ssthresh.eq(ssthresh), o.ca_acked.eq(0), o.cwnd.eq(mss),
                             o.dupacks.eq(0), o.in_recovery.eq(0), o.recover.eq(i.snd_max),
                             o.snd_nxt.eq(i.snd_una), self.go_back.eq(1)]
        return m
