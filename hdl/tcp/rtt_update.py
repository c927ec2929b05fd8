"""The round-trip time estimate and the retransmission timeout (RFC 6298), on an ACK of new
data."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.tcp_engine import RTTVAR_SHIFT, SRTT_SHIFT

from .seq import seq_at_or_after

__all__ = ["TcpRttUpdate", "RttState"]


class RttState(data.StructLayout):
    """A connection's RTT fields: the timed sequence number (``timing``: one is timed;
    ``rtt_seq`` the sequence number whose acknowledgment ends the sample, ``rtt_time``
    the tick the segment left), the estimate (``estimated``: a sample was taken; ``srtt8``
    SRTT * 8 and ``rttvar4`` RTTVAR * 4, in ticks) and the timeout ``rto`` (ticks)."""

    def __init__(self):
        super().__init__({"timing": 1, "rtt_seq": 32, "rtt_time": 32, "estimated": 1,
                          "srtt8": 32, "rttvar4": 32, "rto": 32})


class TcpRttUpdate(wiring.Component):
    """What an ACK of new data does to the RTT fields, as the model's ``_rtt_ack`` and
    ``_rto_from_estimate`` (:class:`rnic.host.model.tcp_engine.TcpEngine`):

    * if a sequence number is timed and ``ack`` covers it, the sample ``now - rtt_time``
      ends the timing and updates the estimate: the first sample R gives SRTT = R and
      RTTVAR = R / 2; later ones delta = R - SRTT, SRTT += delta / 8, RTTVAR += (|delta| -
      RTTVAR) / 4, in the scaled integers (RFC 6298 section 2);
    * RTO = max(``rto_min``, SRTT + max(1, 4 * RTTVAR)), at most ``rto_max``, or
      ``rto_initial`` while there is no estimate.

    Combinational. The estimate is kept in 32 bits: exact for round trips below 2**28
    ticks.

    Ports
    -----
    i : In(RttState)
    ack : In(32)
    now : In(32)
    rto_min, rto_max, rto_initial : In(32)
    o : Out(RttState)
    """

    def __init__(self):
        super().__init__({
            "i": In(RttState()),
            "ack": In(32),
            "now": In(32),
            "rto_min": In(32),
            "rto_max": In(32),
            "rto_initial": In(32),
            "o": Out(RttState()),
        })

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        covers = i.timing & seq_at_or_after(m, self.ack, i.rtt_seq, "past")
        sample = Signal(32)
        m.d.comb += sample.eq(self.now - i.rtt_time)
        delta = Signal(signed(34))
        m.d.comb += delta.eq(sample - (i.srtt8 >> SRTT_SHIFT))
        magnitude = Signal(33)
        m.d.comb += magnitude.eq(Mux(delta < 0, -delta, delta))

        m.d.comb += o.eq(i)
        with m.If(covers):
            m.d.comb += o.timing.eq(0)
            with m.If(~i.estimated):
                m.d.comb += [o.estimated.eq(1), o.srtt8.eq(sample << SRTT_SHIFT),
                             o.rttvar4.eq(sample << (RTTVAR_SHIFT - 1))]
            with m.Else():
                m.d.comb += [o.srtt8.eq(i.srtt8 + delta),
                             o.rttvar4.eq(i.rttvar4 + magnitude - (i.rttvar4 >> RTTVAR_SHIFT))]
        rto = Signal(34)
        m.d.comb += rto.eq((o.srtt8 >> SRTT_SHIFT) + Mux(o.rttvar4 == 0, 1, o.rttvar4))
        with m.If(~o.estimated):
            m.d.comb += o.rto.eq(self.rto_initial)
        with m.Elif(rto < self.rto_min):
            m.d.comb += o.rto.eq(self.rto_min)
        with m.Elif(rto > self.rto_max):
            m.d.comb += o.rto.eq(self.rto_max)
        with m.Else():
            m.d.comb += o.rto.eq(rto)
        return m
