"""What an acceptable segment's ACK field does to the send side: SND.UNA, the send window,
congestion control (RFC 5681 with byte counting, RFC 6582 NewReno) and fast retransmit."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.tcp_engine import DUPACK_THRESHOLD, MAX_WINDOW

from .layouts import TcpFlags
from .seq import seq_after, seq_at_or_after

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

    Combinational. The RTT estimate is :class:`~rnic.hdl.tcp.rtt_update.TcpRttUpdate`'s.

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

    def elaborate(self, platform):
        m = Module()
        i, o, seg = self.i, self.o, self.seg
        window = Signal(32)
        m.d.comb += window.eq(seg.window << i.snd_shift)
        m.d.comb += o.eq(i)
        new = seq_after(m, seg.ack, i.snd_una, "new")
        duplicate = ((seg.ack == i.snd_una) & (seg.length == 0) & ~seg.flags.syn
                     & ~seg.flags.fin & (window == i.snd_wnd) & (i.snd_wnd != 0)
                     & (i.snd_max != i.snd_una))
        m.d.comb += self.new_data.eq(new)
        with m.If(new):
            self._acked(m)
        with m.Elif(duplicate):
            self._duplicate(m)
        # the window, once SND.UNA is updated (ack is at or after it then, or the segment
        # was no ACK of new data and is checked against the SND.UNA before)
        newer = (seq_after(m, seg.seq, i.snd_wl1, "wl1")
                 | ((seg.seq == i.snd_wl1) & seq_at_or_after(m, seg.ack, i.snd_wl2, "wl2")))
        current = seq_at_or_after(m, seg.ack, i.snd_una, "una")
        with m.If(current & newer):
            m.d.comb += [o.snd_wnd.eq(window), o.snd_wl1.eq(seg.seq), o.snd_wl2.eq(seg.ack),
                         o.max_snd_wnd.eq(Mux(window > i.max_snd_wnd, window, i.max_snd_wnd))]
        return m

    def _acked(self, m):
        """An ACK of new data: SND.UNA, SND.NXT, retries, then congestion control."""
        i, o, seg = self.i, self.o, self.seg
        mss = i.send_mss
        acked = Signal(32)
        m.d.comb += acked.eq(seg.ack - i.snd_una)
        m.d.comb += [o.snd_una.eq(seg.ack), o.retries.eq(0)]
        full = seq_at_or_after(m, seg.ack, i.recover, "recover")
        with m.If(seq_after(m, seg.ack, i.snd_nxt, "nxt")):
            m.d.comb += o.snd_nxt.eq(seg.ack)
        with m.If(i.in_recovery):
            with m.If(full):
                m.d.comb += [o.cwnd.eq(i.ssthresh), o.in_recovery.eq(0), o.dupacks.eq(0)]
            with m.Else():
                deflated = Signal(34)
                m.d.comb += [deflated.eq(i.cwnd - acked + Mux(acked >= mss, mss, 0)),
                             self.send_first.eq(1)]
                # (signed: the deflation may go below zero; then one MSS)
                m.d.comb += o.cwnd.eq(Mux(deflated[33] | (deflated[:33] < mss), mss,
                                          deflated[:32]))
        with m.Else():
            grown = Signal(34)
            m.d.comb += o.dupacks.eq(0)
            with m.If(i.cwnd < i.ssthresh):
                m.d.comb += grown.eq(i.cwnd + Mux(acked < mss, acked, mss))
            with m.Else():
                counted = Signal(33)
                m.d.comb += counted.eq(i.ca_acked + acked)
                with m.If(counted >= i.cwnd):
                    m.d.comb += [o.ca_acked.eq(counted - i.cwnd), grown.eq(i.cwnd + mss)]
                with m.Else():
                    m.d.comb += [o.ca_acked.eq(counted), grown.eq(i.cwnd)]
            m.d.comb += o.cwnd.eq(Mux(grown > MAX_WINDOW, MAX_WINDOW, grown))

    def _duplicate(self, m):
        """A duplicate ACK: the count, inflation in recovery, or fast retransmit."""
        i, o = self.i, self.o
        mss = i.send_mss
        count = Mux(i.dupacks == _DUPACKS_MAX, _DUPACKS_MAX, i.dupacks + 1)
        m.d.comb += o.dupacks.eq(count)
        third = (i.dupacks == DUPACK_THRESHOLD - 1)
        passed = seq_at_or_after(m, i.snd_una, i.recover, "passed")
        with m.If(i.in_recovery):
            inflated = Signal(34)
            m.d.comb += inflated.eq(i.cwnd + mss)
            m.d.comb += o.cwnd.eq(Mux(inflated > MAX_WINDOW, MAX_WINDOW, inflated))
        with m.Elif(third & (passed | (i.cwnd > mss))):
            flight = Signal(32)
            half = Signal(32)
            m.d.comb += [flight.eq(i.snd_max - i.snd_una), half.eq(flight >> 1)]
            ssthresh = Mux(half > 2 * mss, half, 2 * mss)
            m.d.comb += [o.ssthresh.eq(ssthresh), o.ca_acked.eq(0), o.recover.eq(i.snd_max),
                         o.in_recovery.eq(1), o.cwnd.eq(ssthresh + DUPACK_THRESHOLD * mss),
                         self.fast_retransmit.eq(1), self.send_first.eq(1)]
