"""The window a connection advertises in the segments it sends (RFC 9293 section 3.8.6.2.1,
RFC 7323)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.tcp import MAX_WINDOW_SCALE
from rnic.host.spec.tcp_engine import MAX_UNSCALED_WINDOW

from .seq import seq_after

__all__ = ["TcpWindowField"]


class TcpWindowField(wiring.Component):
    """The window field of a segment with ACK and the right edge it advertises, as the
    model's ``_window_field`` and ``_emit``: ``rcv_wnd >> rcv_shift``, but never less than
    what keeps the right edge already advertised (``rcv_adv``, rounded up to the scale:
    the edge never moves left), at most 65535; ``rcv_adv`` moves to the new edge when it
    is further.

    Combinational.

    Ports
    -----
    rcv_nxt, rcv_adv, rcv_wnd : In(32)
    rcv_shift : In(range(15))
    window : Out(16)
    new_adv : Out(32)
    """

    def __init__(self):
        super().__init__({
            "rcv_nxt": In(32),
            "rcv_adv": In(32),
            "rcv_wnd": In(32),
            "rcv_shift": In(range(MAX_WINDOW_SCALE + 1)),
            "window": Out(16),
            "new_adv": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        ahead = Signal(32)                  # the advertised edge past RCV.NXT
        m.d.comb += ahead.eq(self.rcv_adv - self.rcv_nxt)
        keep = Signal(32)                   # ... in the scale's units, rounded up; 0 if behind
        m.d.comb += keep.eq(Mux(ahead[31], 0,
                                (ahead + (1 << self.rcv_shift) - 1) >> self.rcv_shift))
        offered = Signal(32)
        m.d.comb += offered.eq(self.rcv_wnd >> self.rcv_shift)
        wanted = Mux(offered > keep, offered, keep)
        m.d.comb += self.window.eq(Mux(wanted > MAX_UNSCALED_WINDOW, MAX_UNSCALED_WINDOW,
                                       wanted))
        edge = Signal(32)
        m.d.comb += edge.eq(self.rcv_nxt + (self.window << self.rcv_shift))
        m.d.comb += self.new_adv.eq(Mux(seq_after(m, edge, self.rcv_adv, "further"), edge,
                                        self.rcv_adv))
        return m
