"""Which of a connection's send timers runs after an event: retransmission or persist
(RFC 6298 section 5.1 and 5.2, RFC 9293 section 3.8.6.1)."""

from amaranth.hdl import Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec

from .layouts import TcpState
from .seq import seq_after
from .stage import staged

__all__ = ["TcpArm", "ArmState", "PERSIST_BACKOFF_BITS"]

#: Bits of the persist backoff count (the model's count is unbounded; past 31 doublings
#: every RTO is long past the maximum anyway).
PERSIST_BACKOFF_BITS = 5


class ArmState(data.StructLayout):
    """The fields the rule reads and writes (the model's names; ``*_armed``: the timer
    runs; ``data_end`` the sequence number after the octets written)."""

    def __init__(self):
        super().__init__({"state": TcpState, "snd_wnd": 32, "snd_una": 32, "snd_nxt": 32,
                          "snd_max": 32, "data_end": 32, "rto": 32, "rto_armed": 1,
                          "rto_at": 32, "persist_armed": 1, "persist_at": 32,
                          "persist_backoff": PERSIST_BACKOFF_BITS})


class TcpArm(wiring.Component):
    """The model's ``_arm`` (:class:`rnic.host.model.tcp_engine.TcpEngine`), after every
    event of a connection:

    * TIME-WAIT: nothing changes (its own timer runs);
    * a synchronized connection whose send window is 0 with octets in its ring: the
      retransmission timer stops, SND.NXT goes back to SND.UNA (the window's opening sends
      from the probe's octet on), and the persist timer starts if it does not run, at
      ``now + min(RTO << backoff, rto_max)``;
    * otherwise the persist timer stops (its backoff to 0), and the retransmission timer
      stops when nothing is unacknowledged, or starts at ``now + RTO`` if it does not run.

    Latency: :data:`LATENCY` cycles from inputs that hold still
    (:mod:`~rnic.hdl.tcp.stage`).

    Ports
    -----
    i : In(ArmState)
    now, rto_max : In(32)
    o : Out(ArmState)
    """

    def __init__(self):
        super().__init__({
            "i": In(ArmState()),
            "now": In(32),
            "rto_max": In(32),
            "o": Out(ArmState()),
        })

    #: Cycles from the inputs to the outputs.
    LATENCY = 2

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        # 1: octets in the ring (written, not acknowledged), the backed-off RTO, the RTO's
        # deadline, the compares that choose the timer
        in_ring = staged(m, seq_after(m, i.data_end, i.snd_una, "held"), "in_ring")
        backed_off = staged(m, i.rto << i.persist_backoff, "backed_off")
        rto_at = staged(m, self.now + i.rto, "rto_at", 32)
        waiting = staged(m, (i.state != spec.TcpState.SYN_SENT) & (i.snd_wnd == 0),
                         "waiting")         # (for the window, with octets in the ring)
        all_acked = staged(m, i.snd_max == i.snd_una, "all_acked")
        time_wait = staged(m, i.state == spec.TcpState.TIME_WAIT, "time_wait")
        # 2: the persist deadlines, backed off or at the maximum
        too_long = staged(m, backed_off > self.rto_max, "too_long")
        persist_at = staged(m, self.now + backed_off, "persist_at", 32)
        persist_at_max = staged(m, self.now + self.rto_max, "persist_at_max", 32)
        m.d.comb += o.eq(i)
        with m.If(time_wait):
            pass
        with m.Elif(waiting & in_ring):
            m.d.comb += [o.rto_armed.eq(0), o.snd_nxt.eq(i.snd_una)]
            with m.If(~i.persist_armed):
                m.d.comb += [o.persist_armed.eq(1),
                             o.persist_at.eq(Mux(too_long, persist_at_max, persist_at))]
        with m.Else():
            m.d.comb += [o.persist_armed.eq(0), o.persist_backoff.eq(0)]
            with m.If(all_acked):
                m.d.comb += o.rto_armed.eq(0)
            with m.Elif(~i.rto_armed):
                m.d.comb += [o.rto_armed.eq(1), o.rto_at.eq(rto_at)]
        return m
