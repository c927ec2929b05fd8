"""Which of a connection's send timers runs after an event: retransmission or persist
(RFC 6298 section 5.1 and 5.2, RFC 9293 section 3.8.6.1)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec

from .layouts import TcpState
from .seq import seq_after

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

    Combinational.

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

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        m.d.comb += o.eq(i)
        # octets in the ring: written, not acknowledged
        in_ring = seq_after(m, i.data_end, i.snd_una, "held")
        backed_off = Signal(32 + (1 << PERSIST_BACKOFF_BITS))
        m.d.comb += backed_off.eq(i.rto << i.persist_backoff)
        with m.If(i.state == spec.TcpState.TIME_WAIT):
            pass
        with m.Elif((i.state != spec.TcpState.SYN_SENT) & (i.snd_wnd == 0) & in_ring):
            m.d.comb += [o.rto_armed.eq(0), o.snd_nxt.eq(i.snd_una)]
            with m.If(~i.persist_armed):
                m.d.comb += [o.persist_armed.eq(1),
                             o.persist_at.eq(self.now + Mux(backed_off > self.rto_max,
                                                            self.rto_max, backed_off))]
        with m.Else():
            m.d.comb += [o.persist_armed.eq(0), o.persist_backoff.eq(0)]
            with m.If(i.snd_max == i.snd_una):
                m.d.comb += o.rto_armed.eq(0)
            with m.Elif(~i.rto_armed):
                m.d.comb += [o.rto_armed.eq(1), o.rto_at.eq(self.now + i.rto)]
        return m
