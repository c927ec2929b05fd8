"""The connection a valid SYN cookie opens (RFC 4987 section 3.6)."""

from amaranth.hdl import Array, Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec
from rnic.host.spec.tcp import MAX_WINDOW_SCALE

from .cookie import CookieVerdict
from .layouts import TcpSegInfo
from .stage import staged
from .syn_sent import initial_window

__all__ = ["TcpAccept", "Accepted"]


class Accepted(data.StructLayout):
    """The fields of a connection opened by a cookie (the model's ``_accept``)."""

    def __init__(self):
        super().__init__({"iss": 32, "irs": 32, "snd_una": 32, "rcv_nxt": 32, "rcv_adv": 32,
                          "snd_wl1": 32, "snd_wl2": 32, "snd_shift": 4, "rcv_shift": 4,
                          "send_mss": 16, "recover": 32, "cwnd": 32, "echo_delta": 32})


class TcpAccept(wiring.Component):
    """The model's ``_accept`` (:class:`rnic.host.model.tcp_engine.TcpEngine`): the ACK
    ``seg`` returned a good cookie whose MSS index and window shift code are ``cookie``'s.

    ISS = SEG.ACK - 1 (SND.UNA = SND.NXT = SND.MAX = SEG.ACK, ``recover`` ISS), IRS =
    SEG.SEQ - 1 (RCV.NXT = SEG.SEQ, SND.WL1 = IRS, SND.WL2 = SEG.ACK); window scaling on
    only when the peer's SYN had it (its shift, and ``rcv_scale`` ours); the send MSS
    min(the cookie's MSS, ``mss``); the advertised edge min(``rcv_wnd``, 65535) past
    RCV.NXT (what the SYN-ACK said); cwnd the initial window.

    Latency: :data:`LATENCY` cycle from inputs that hold still (:mod:`~rnic.hdl.tcp.stage`).

    Ports
    -----
    seg : In(TcpSegInfo)
    cookie : In(CookieVerdict)
    mss : In(16)
    rcv_scale : In(range(15))
    rcv_wnd : In(32)
    o : Out(Accepted)
    """

    def __init__(self):
        super().__init__({
            "seg": In(TcpSegInfo()),
            "cookie": In(CookieVerdict()),
            "mss": In(16),
            "rcv_scale": In(range(MAX_WINDOW_SCALE + 1)),
            "rcv_wnd": In(32),
            "o": Out(Accepted()),
        })

    #: Cycles from the inputs to the outputs.
    LATENCY = 1

    def elaborate(self, platform):
        m = Module()
        seg, o = self.seg, self.o
        scaled = self.cookie.wscale_code != spec.COOKIE_NO_WSCALE
        table = Array(spec.COOKIE_MSS_TABLE)[self.cookie.mss_index]
        # 1: the send MSS (the initial window's compares follow from it)
        send_mss = staged(m, Mux(table < self.mss, table, self.mss), "send_mss", 16)
        window = Mux(self.rcv_wnd > spec.MAX_UNSCALED_WINDOW, spec.MAX_UNSCALED_WINDOW,
                     self.rcv_wnd)
        m.d.comb += [o.iss.eq(seg.ack - 1), o.irs.eq(seg.seq - 1), o.snd_una.eq(seg.ack),
                     o.rcv_nxt.eq(seg.seq), o.rcv_adv.eq(seg.seq + window),
                     o.snd_wl1.eq(seg.seq - 1), o.snd_wl2.eq(seg.ack),
                     o.snd_shift.eq(Mux(scaled, self.cookie.wscale_code, 0)),
                     o.rcv_shift.eq(Mux(scaled, self.rcv_scale, 0)),
                     o.send_mss.eq(send_mss), o.recover.eq(seg.ack - 1),
                     o.cwnd.eq(initial_window(m, send_mss)),
                     o.echo_delta.eq(seg.seq - seg.ack)]
        return m
