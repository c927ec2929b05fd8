"""The rules of SYN-SENT: what answers an active open's SYN (RFC 9293 section 3.10.7.3)."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec
from rnic.host.spec.tcp import DEFAULT_MSS, MAX_WINDOW_SCALE

from .layouts import TcpDrop, TcpSegInfo
from .stage import staged

__all__ = ["TcpSynSent", "SynSentVerdict", "Connected", "initial_window"]


class SynSentVerdict(enum.Enum, shape=unsigned(2)):
    """DROP (counted as ``reason``), DROP_RESET (counted, and a RST answers it), REFUSED
    (the peer's RST: the connection is freed) or CONNECTED (the SYN-ACK: ``connected``
    holds the connection's fields)."""
    DROP = 0
    DROP_RESET = 1
    REFUSED = 2
    CONNECTED = 3


class Connected(data.StructLayout):
    """The fields a SYN-ACK sets (the model's ``_connected``); SND.UNA is its ack."""

    def __init__(self):
        super().__init__({"irs": 32, "rcv_nxt": 32, "rcv_adv": 32, "snd_shift": 4,
                          "rcv_shift": 4, "send_mss": 16, "snd_wnd": 32, "snd_wl1": 32,
                          "snd_wl2": 32, "snd_una": 32, "cwnd": 32})


def initial_window(m, mss, name="iw"):
    """IW = min(4 MSS, max(2 MSS, 4380)) (RFC 3390, RFC 5681 section 3.1), in ``m``."""
    iw = Signal(32, name=name)
    two = mss * spec.IW_MIN_SEGMENTS
    four = mss * spec.IW_MAX_SEGMENTS
    floor = Mux(two > spec.IW_OCTETS, two, spec.IW_OCTETS)
    m.d.comb += iw.eq(Mux(four < floor, four, floor))
    return iw


class TcpSynSent(wiring.Component):
    """The model's ``_syn_sent`` and ``_connected`` (:class:`rnic.host.model.tcp_engine.TcpEngine`)
    for a segment on a connection in SYN-SENT whose SYN took ``snd_nxt``:

    * an ACK other than SND.NXT: DROP_RESET (BAD_ACK; DROP for a RST);
    * a RST with an acceptable ACK: REFUSED; without ACK: DROP (NOT_ACCEPTABLE);
    * no SYN: DROP (NOT_ACCEPTABLE); a SYN without ACK (simultaneous open): DROP
      (SIMULTANEOUS_OPEN);
    * a SYN-ACK: CONNECTED with IRS and RCV.NXT, the advertised edge (min(``rcv_wnd``,
      65535) on), window scaling only if both SYNs had it, the send MSS (min(the peer's or
      536, ``mss``)), the unscaled window, SND.WL1/WL2, SND.UNA, IW.

    The outputs are registered: they follow the inputs after :attr:`LATENCY` cycles (the
    inputs hold still meanwhile; timing: the compares of the segment's fields stay off the
    event engine's decision). The RTT sample of the SYN is
    :class:`~rnic.hdl.tcp.rtt_update.TcpRttUpdate`'s.

    Ports
    -----
    snd_nxt : In(32)
    seg : In(TcpSegInfo)
    mss : In(16)
    rcv_scale : In(range(15))
    rcv_wnd : In(32)
    verdict : Out(SynSentVerdict)
    reason : Out(TcpDrop)
    connected : Out(Connected)
    """

    def __init__(self):
        super().__init__({
            "snd_nxt": In(32),
            "seg": In(TcpSegInfo()),
            "mss": In(16),
            "rcv_scale": In(range(MAX_WINDOW_SCALE + 1)),
            "rcv_wnd": In(32),
            "verdict": Out(SynSentVerdict),
            "reason": Out(TcpDrop),
            "connected": Out(Connected()),
        })

    #: Cycles from the inputs to the outputs.
    LATENCY = 2

    def elaborate(self, platform):
        m = Module()
        seg, flags = self.seg, self.seg.flags
        verdict = Signal(SynSentVerdict)
        reason = Signal(TcpDrop)
        connected = Signal(Connected())
        m.d.sync += [self.verdict.eq(verdict), self.reason.eq(reason),
                     self.connected.eq(connected)]
        with m.If(flags.ack & (seg.ack != self.snd_nxt)):
            m.d.comb += [verdict.eq(Mux(flags.rst, SynSentVerdict.DROP,
                                        SynSentVerdict.DROP_RESET)),
                         reason.eq(spec.TcpDrop.BAD_ACK)]
        with m.Elif(flags.rst & flags.ack):
            m.d.comb += verdict.eq(SynSentVerdict.REFUSED)
        with m.Elif(flags.rst | ~flags.syn):
            m.d.comb += [verdict.eq(SynSentVerdict.DROP),
                         reason.eq(spec.TcpDrop.NOT_ACCEPTABLE)]
        with m.Elif(~flags.ack):
            m.d.comb += [verdict.eq(SynSentVerdict.DROP),
                         reason.eq(spec.TcpDrop.SIMULTANEOUS_OPEN)]
        with m.Else():
            m.d.comb += verdict.eq(SynSentVerdict.CONNECTED)
        self._connected(m, connected)
        return m

    def _connected(self, m, c):
        seg = self.seg
        peer_mss = Mux(seg.mss == 0, DEFAULT_MSS, seg.mss)
        # registered: the least MSS goes on to IW's products and compares (2: the outputs)
        send_mss = staged(m, Mux(peer_mss < self.mss, peer_mss, self.mss), "send_mss", 16)
        window = Mux(self.rcv_wnd > spec.MAX_UNSCALED_WINDOW, spec.MAX_UNSCALED_WINDOW,
                     self.rcv_wnd)
        m.d.comb += [c.irs.eq(seg.seq), c.rcv_nxt.eq(seg.seq + 1),
                     c.rcv_adv.eq(seg.seq + 1 + window),
                     c.snd_shift.eq(Mux(seg.ws_present, seg.ws, 0)),
                     c.rcv_shift.eq(Mux(seg.ws_present, self.rcv_scale, 0)),
                     c.send_mss.eq(send_mss), c.snd_wnd.eq(seg.window),
                     c.snd_wl1.eq(seg.seq), c.snd_wl2.eq(seg.ack), c.snd_una.eq(seg.ack),
                     c.cwnd.eq(initial_window(m, send_mss))]
