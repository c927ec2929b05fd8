"""The round-trip time estimate and the retransmission timeout (RFC 6298), on an ACK of new
data."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.tcp_engine import RTTVAR_SHIFT, SRTT_SHIFT

from .seq import seq_at_or_after
from .stage import staged

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

    Latency: :data:`LATENCY` cycles from inputs that hold still
    (:mod:`~rnic.hdl.tcp.stage`). The estimate is kept in 32 bits: exact for round trips below 2**28
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

    #: Cycles from the inputs to the outputs.
    LATENCY = 4

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        srtt = i.srtt8 >> SRTT_SHIFT
        # 1: whether the sample ends, the sample
        covers = staged(m, i.timing & seq_at_or_after(m, self.ack, i.rtt_seq, "past"), "covers")
        sample = staged(m, self.now - i.rtt_time, "sample", 32)
        decayed = staged(m, i.rttvar4 - (i.rttvar4 >> RTTVAR_SHIFT), "decayed", 32)
        # 2: its difference from SRTT, both ways
        above = Signal(signed(34))
        below = Signal(signed(34))
        m.d.comb += [above.eq(sample - srtt), below.eq(srtt - sample)]
        delta = staged(m, above, "delta")
        magnitude = staged(m, Mux(above < 0, below, above), "magnitude", 33)
        # 3: the estimate
        estimate = Signal(RttState())
        m.d.comb += estimate.eq(i)
        with m.If(covers):
            m.d.comb += estimate.timing.eq(0)
            with m.If(~i.estimated):
                m.d.comb += [estimate.estimated.eq(1),
                             estimate.srtt8.eq(sample << SRTT_SHIFT),
                             estimate.rttvar4.eq(sample << (RTTVAR_SHIFT - 1))]
            with m.Else():
                m.d.comb += [estimate.srtt8.eq(i.srtt8 + delta),
                             estimate.rttvar4.eq(decayed + magnitude)]
        new = staged(m, estimate, "estimate", RttState())
        # 4: the timeout from it
        rto = staged(m, (new.srtt8 >> SRTT_SHIFT) + Mux(new.rttvar4 == 0, 1, new.rttvar4),
                     "rto_estimated", 34)
        m.d.comb += [o.eq(new), o.rtt_seq.eq(i.rtt_seq), o.rtt_time.eq(i.rtt_time)]
        with m.If(~new.estimated):
            m.d.comb += o.rto.eq(self.rto_initial)
        with m.Elif(rto < self.rto_min):
            m.d.comb += o.rto.eq(self.rto_min)
        with m.Elif(rto > self.rto_max):
            m.d.comb += o.rto.eq(self.rto_max)
        with m.Else():
            m.d.comb += o.rto.eq(rto)
        return m
