"""What an acceptable segment's ACK field does to the send side: SND.UNA, the send window,
congestion control (RFC 5681 with byte counting, RFC 6582 NewReno) and fast retransmit."""

from amaranth.hdl import Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.tcp_engine import DUPACK_THRESHOLD, MAX_WINDOW

from .layouts import TcpFlags
from .seq import seq_after, seq_at_or_after
from .stage import staged

__all__ = ["TcpAckUpdate", "SendState", "AckSeg"]

#: A duplicate-ACK count saturates here (the model's count only matters up to the third).
_DUPACKS_MAX = DUPACK_THRESHOLD + 1


class SendState(data.StructLayout):
    """A connection's send-side fields (the model's names; ``snd_wnd`` scaled, octets)."""

    def __init__(self):
        super().__init__({
            "snd_una": 32, "snd_nxt": 32, "snd_max": 32, "snd_wnd": 32, "snd_wl1": 32,
            "snd_wl2": 32, "max_snd_wnd": 32, "snd_shift": 4, "send_mss": 16, "cwnd": 32,
            "ssthresh": 32, "ca_acked": 32, "dupacks": range(_DUPACKS_MAX + 1),
            "in_recovery": 1, "recover": 32, "retries": 8,
        })


class AckSeg(data.StructLayout):
    """The segment's fields the ACK rules read (``length``: payload octets)."""

    def __init__(self):
        super().__init__({"seq": 32, "ack": 32, "window": 16, "flags": TcpFlags(),
                          "length": 16})


class TcpAckUpdate(wiring.Component):
    """The model's ``_ack_field`` after its range checks (:class:`TcpRxCheck` makes them),
    with ``_acked``, ``_congestion_ack`` and ``_duplicate_ack``, on the send-side fields:

    * ``ack`` after SND.UNA (``new_data``): SND.UNA = ack, SND.NXT at least ack, the retry
      count 0; in fast recovery a full ACK (up to ``recover``) ends it with cwnd =
      ssthresh, a partial one deflates cwnd by the octets acknowledged (adding one MSS
      back when at least one MSS was) and sends the first unacknowledged segment again
      (``send_first``); otherwise the duplicate count goes to 0 and cwnd grows: by
      min(acked, MSS) in slow start (cwnd < ssthresh), by one MSS per cwnd of octets
      acknowledged in congestion avoidance; cwnd at most 2**30;
    * ``ack`` equal to SND.UNA on an empty segment without SYN and FIN, with the window
      as it was (not zero) and data out: a duplicate ACK: in fast recovery cwnd grows by
      one MSS; the third one, if SND.UNA has passed ``recover`` or cwnd is above one MSS,
      starts fast retransmit (``fast_retransmit``, ``send_first``): ssthresh =
      max(flight / 2, 2 MSS), recover = SND.MAX, cwnd = ssthresh + 3 MSS;
    * the window (``window << snd_shift``) is taken when the segment is not older than
      the last one that set it (SND.WL1, SND.WL2); MAX.SND.WND follows it.

    Latency: :data:`LATENCY` cycles from inputs that hold still
    (:mod:`~rnic.hdl.tcp.stage`): the comparisons and sums of the inputs, the sums of
    those, the candidates for cwnd, then the choice among them. The RTT estimate is
    :class:`~rnic.hdl.tcp.rtt_update.TcpRttUpdate`'s.

    Ports
    -----
    i : In(SendState)
    seg : In(AckSeg)
    o : Out(SendState)
    new_data, send_first, fast_retransmit : Out(1)
    """

    def __init__(self):
        super().__init__({
            "i": In(SendState()),
            "seg": In(AckSeg()),
            "o": Out(SendState()),
            "new_data": Out(1),
            "send_first": Out(1),
            "fast_retransmit": Out(1),
        })

    #: Cycles from the inputs to the outputs.
    LATENCY = 3

    def elaborate(self, platform):
        m = Module()
        i, seg = self.i, self.seg
        mss = i.send_mss
        # 1: comparisons and sums of the inputs
        s1 = dict(
            window=staged(m, seg.window << i.snd_shift, "window", 32),
            new=staged(m, seq_after(m, seg.ack, i.snd_una, "new"), "new"),
            acked=staged(m, seg.ack - i.snd_una, "acked", 32),
            past_nxt=staged(m, seq_after(m, seg.ack, i.snd_nxt, "nxt"), "past_nxt"),
            full=staged(m, seq_at_or_after(m, seg.ack, i.recover, "recover"), "full"),
            newer=staged(m, seq_after(m, seg.seq, i.snd_wl1, "wl1")
                         | ((seg.seq == i.snd_wl1)
                            & seq_at_or_after(m, seg.ack, i.snd_wl2, "wl2")), "newer"),
            current=staged(m, seq_at_or_after(m, seg.ack, i.snd_una, "una"), "current"),
            same=staged(m, (seg.ack == i.snd_una) & (seg.length == 0) & ~seg.flags.syn
                        & ~seg.flags.fin & (i.snd_wnd != 0) & (i.snd_max != i.snd_una),
                        "same"),
            passed=staged(m, seq_at_or_after(m, i.snd_una, i.recover, "passed"), "passed"),
            half=staged(m, (i.snd_max - i.snd_una)[1:], "half", 31),
            slow_start=staged(m, i.cwnd < i.ssthresh, "slow_start"),
            above_mss=staged(m, i.cwnd > mss, "above_mss"),
            cwnd_mss=staged(m, i.cwnd + mss, "cwnd_mss", 33),
        )
        s2 = self._step_two(m, s1)
        s3 = self._step_three(m, s1, s2)
        self._choose(m, s1, s2, s3)
        return m

    def _step_two(self, m, s1):
        """Sums of the first step's values."""
        i = self.i
        mss = i.send_mss
        acked, window = s1["acked"], s1["window"]
        return dict(
            duplicate=staged(m, s1["same"] & (window == i.snd_wnd), "duplicate"),
            acked_small=staged(m, acked < mss, "acked_small"),
            cwnd_acked=staged(m, i.cwnd + acked, "cwnd_acked", 33),
            counted=staged(m, i.ca_acked + acked, "counted", 33),
            deflated=staged(m, i.cwnd - acked, "deflated", signed(34)),
            deflated_mss=staged(m, s1["cwnd_mss"] - acked, "deflated_mss", signed(34)),
            ssthresh=staged(m, Mux(s1["half"] > 2 * mss, s1["half"], 2 * mss), "ssthresh", 32),
            inflated=staged(m, self._clamp(s1["cwnd_mss"]), "inflated", 32),
            cwnd=staged(m, self._clamp(i.cwnd), "cwnd", 32),
            max_snd_wnd=staged(m, Mux(window > i.max_snd_wnd, window, i.max_snd_wnd),
                               "max_snd_wnd", 32),
        )

    def _step_three(self, m, s1, s2):
        """The candidates for cwnd and the congestion-avoidance count."""
        mss = self.i.send_mss

        def at_least_mss(value):
            return Mux(value[33] | (value[:33] < mss), mss, value[:32])

        return dict(
            slow_grown=staged(m, self._clamp(s2["cwnd_acked"]), "slow_grown", 32),
            reached=staged(m, s2["counted"] >= self.i.cwnd, "reached"),
            counted_rest=staged(m, s2["counted"] - self.i.cwnd, "counted_rest", 32),
            deflated=staged(m, at_least_mss(s2["deflated"]), "deflated_floor", 32),
            deflated_mss=staged(m, at_least_mss(s2["deflated_mss"]), "deflated_mss_floor",
                                32),
            recovering=staged(m, s2["ssthresh"] + DUPACK_THRESHOLD * mss, "recovering", 32),
        )

    @staticmethod
    def _clamp(value):
        return Mux(value > MAX_WINDOW, MAX_WINDOW, value)

    def _choose(self, m, s1, s2, s3):
        """The outputs from the steps' values."""
        i, o, seg = self.i, self.o, self.seg
        m.d.comb += [o.eq(i), self.new_data.eq(s1["new"])]
        with m.If(s1["new"]):
            m.d.comb += [o.snd_una.eq(seg.ack), o.retries.eq(0)]
            with m.If(s1["past_nxt"]):
                m.d.comb += o.snd_nxt.eq(seg.ack)
            with m.If(i.in_recovery & s1["full"]):
                m.d.comb += [o.cwnd.eq(i.ssthresh), o.in_recovery.eq(0), o.dupacks.eq(0)]
            with m.Elif(i.in_recovery):
                # deflated by the octets acknowledged, one MSS back when at least one was
                m.d.comb += [o.cwnd.eq(Mux(s2["acked_small"], s3["deflated"],
                                           s3["deflated_mss"])),
                             self.send_first.eq(1)]
            with m.Else():
                m.d.comb += o.dupacks.eq(0)
                with m.If(s1["slow_start"]):
                    m.d.comb += o.cwnd.eq(Mux(s2["acked_small"], s3["slow_grown"],
                                              s2["inflated"]))
                with m.Elif(s3["reached"]):
                    m.d.comb += [o.ca_acked.eq(s3["counted_rest"]), o.cwnd.eq(s2["inflated"])]
                with m.Else():
                    m.d.comb += [o.ca_acked.eq(s2["counted"]), o.cwnd.eq(s2["cwnd"])]
        with m.Elif(s2["duplicate"]):
            self._duplicate(m, s1, s2, s3)
        # the window, once SND.UNA is updated (ack is at or after it then, or the segment
        # was no ACK of new data and is checked against the SND.UNA before)
        with m.If(s1["current"] & s1["newer"]):
            m.d.comb += [o.snd_wnd.eq(s1["window"]), o.snd_wl1.eq(seg.seq),
                         o.snd_wl2.eq(seg.ack), o.max_snd_wnd.eq(s2["max_snd_wnd"])]

    def _duplicate(self, m, s1, s2, s3):
        """A duplicate ACK: the count, inflation in recovery, or fast retransmit."""
        i, o = self.i, self.o
        m.d.comb += o.dupacks.eq(Mux(i.dupacks == _DUPACKS_MAX, _DUPACKS_MAX, i.dupacks + 1))
        third = (i.dupacks == DUPACK_THRESHOLD - 1)
        with m.If(i.in_recovery):
            m.d.comb += o.cwnd.eq(s2["inflated"])
        with m.Elif(third & (s1["passed"] | s1["above_mss"])):
            m.d.comb += [o.ssthresh.eq(s2["ssthresh"]), o.ca_acked.eq(0),
                         o.recover.eq(i.snd_max), o.in_recovery.eq(1),
                         o.cwnd.eq(s3["recovering"]), self.fast_retransmit.eq(1),
                         self.send_first.eq(1)]
