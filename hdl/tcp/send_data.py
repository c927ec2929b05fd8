"""What sending one segment of ring octets does to a connection: its flags, SND.NXT,
SND.MAX and the RTT sample (RFC 6298 section 3, Karn's rule)."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .layouts import TcpFlags
from .seq import seq_after, seq_at_or_after, seq_before
from .stage import staged

__all__ = ["TcpSendData", "SentState"]


class SentState(data.StructLayout):
    """The fields the rule reads and writes (the model's names; ``timing``: an RTT sample
    runs, ending when ``rtt_seq`` is acknowledged; it started at ``rtt_time``)."""

    def __init__(self):
        super().__init__({"snd_nxt": 32, "snd_max": 32, "data_end": 32, "fin_pending": 1,
                          "fin_seq": 32, "timing": 1, "rtt_seq": 32, "rtt_time": 32})


class TcpSendData(wiring.Component):
    """The model's ``_send_data`` (:class:`rnic.host.model.tcp_engine.TcpEngine`) for a
    segment of ``length`` ring octets from ``seq``:

    * its flags: ACK; FIN when it ends where our FIN goes; PSH when it carries octets up
      to the end of those written;
    * its end ``seq + length`` (+ 1 with FIN); from below SND.MAX it is a retransmission
      (``retransmit``), which stops the RTT sample if it covers the timed octet; else,
      when no sample runs, it is timed (``rtt_seq`` its end, ``rtt_time`` now);
    * SND.NXT moves to its end when it starts at SND.NXT; SND.MAX when it ends past it.

    Latency: :data:`LATENCY` cycles from inputs that hold still
    (:mod:`~rnic.hdl.tcp.stage`).

    Ports
    -----
    i : In(SentState)
    seq : In(32)
    length : In(16)
    now : In(32)
    o : Out(SentState)
    flags : Out(TcpFlags)
    retransmit : Out(1)
    """

    #: Cycles from the inputs to the outputs.
    LATENCY = 3

    def __init__(self):
        super().__init__({
            "i": In(SentState()),
            "seq": In(32),
            "length": In(16),
            "now": In(32),
            "o": Out(SentState()),
            "flags": Out(TcpFlags()),
            "retransmit": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        i, o, seq = self.i, self.o, self.seq
        # 1: where the octets end; what the start is
        octets_end = staged(m, seq + self.length, "octets_end", 32)
        retransmit = staged(m, seq_before(m, seq, i.snd_max, "below_max"), "retransmit")
        timed_after = staged(m, seq_before(m, seq, i.rtt_seq, "before_timed"), "timed_after")
        at_nxt = staged(m, seq == i.snd_nxt, "at_nxt")
        # 2: FIN, PSH and the segment's end
        fin_here = i.fin_pending & (octets_end == i.fin_seq)
        fin = staged(m, fin_here, "fin")
        psh = staged(m, (self.length != 0) & (octets_end == i.data_end), "psh")
        end = staged(m, octets_end + fin_here, "end", 32)
        # 3: the end against the timed octet and SND.MAX
        covers = staged(m, seq_at_or_after(m, end, i.rtt_seq, "covers_timed"), "covers")
        past_max = staged(m, seq_after(m, end, i.snd_max, "past_max"), "past_max")

        m.d.comb += [o.eq(i), self.retransmit.eq(retransmit), self.flags.ack.eq(1),
                     self.flags.fin.eq(fin), self.flags.psh.eq(psh)]
        with m.If(retransmit):
            with m.If(i.timing & timed_after & covers):
                m.d.comb += o.timing.eq(0)
        with m.Elif(~i.timing):
            m.d.comb += [o.timing.eq(1), o.rtt_seq.eq(end), o.rtt_time.eq(self.now)]
        with m.If(at_nxt):
            m.d.comb += o.snd_nxt.eq(end)
        with m.If(past_max):
            m.d.comb += o.snd_max.eq(end)
        return m
