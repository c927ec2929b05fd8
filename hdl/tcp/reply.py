"""The segments the front sends: the RST that answers a segment with no connection, the
SYN-ACK that answers a SYN on a listening port, and an active open's SYN."""

from amaranth.hdl import Module, Mux
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.tcp import MAX_WINDOW_SCALE
from rnic.host.spec.tcp_engine import MAX_UNSCALED_WINDOW

from .layouts import TcpSegInfo, TcpTxDesc

__all__ = ["TcpReply", "ReplyKind"]


class ReplyKind(enum.Enum, shape=2):
    """Which segment to build."""
    RESET = 0
    SYN_ACK = 1
    SYN = 2


class TcpReply(wiring.Component):
    """Builds the descriptor of a reply to the received segment ``seg``, as the model's
    ``_reset_answer`` and ``_syn_ack`` (:class:`rnic.host.model.tcp_engine.TcpEngine`):

    * RESET (RFC 9293 section 3.10.7.1): to a segment with ACK, ``<SEQ=SEG.ACK><CTL=RST>``;
      else ``<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>``, SEG.LEN counting SYN and FIN;
      window 0. The engine never answers a RST.
    * SYN_ACK: ``<SEQ=cookie><ACK=SEG.SEQ+1><CTL=SYN,ACK>``, the window unscaled
      (min(``rcv_wnd``, 65535)), MSS ``mss``, and window scale ``rcv_scale`` when the SYN
      had the option.
    * SYN (an active open, whose peer and ports ``seg`` holds as if the peer had sent it):
      ``<SEQ=cookie><CTL=SYN>``, the window unscaled, MSS ``mss`` and window scale
      ``rcv_scale`` (the model's ``_syn``).

    Combinational.

    Ports
    -----
    seg : In(TcpSegInfo)
    kind : In(ReplyKind)
    cookie : In(32)
        The SYN-ACK's ISS (its cookie) or the SYN's.
    mss, rcv_scale, rcv_wnd : In
        The engine's parameters (16, 4 and 32 bits).
    desc : Out(TcpTxDesc)
    """

    def __init__(self):
        super().__init__({
            "seg": In(TcpSegInfo()),
            "kind": In(ReplyKind),
            "cookie": In(32),
            "mss": In(16),
            "rcv_scale": In(range(MAX_WINDOW_SCALE + 1)),
            "rcv_wnd": In(32),
            "desc": Out(TcpTxDesc()),
        })

    def elaborate(self, platform):
        m = Module()
        seg, desc = self.seg, self.desc
        m.d.comb += [desc.dst_ip.eq(seg.src_ip), desc.src_port.eq(seg.dst_port),
                     desc.dst_port.eq(seg.src_port), desc.length.eq(0),
                     desc.payload_sum.eq(0)]
        syn = (self.kind == ReplyKind.SYN_ACK) | (self.kind == ReplyKind.SYN)
        with m.If(syn):
            m.d.comb += [desc.seq.eq(self.cookie), desc.flags.syn.eq(1),
                         desc.window.eq(Mux(self.rcv_wnd > MAX_UNSCALED_WINDOW,
                                            MAX_UNSCALED_WINDOW, self.rcv_wnd)),
                         desc.syn_options.eq(1), desc.mss.eq(self.mss),
                         desc.ws.eq(self.rcv_scale)]
        with m.If(self.kind == ReplyKind.SYN_ACK):
            m.d.comb += [desc.ack.eq(seg.seq + 1), desc.flags.ack.eq(1),
                         desc.ws_present.eq(seg.ws_present)]
        with m.Elif(self.kind == ReplyKind.SYN):
            m.d.comb += desc.ws_present.eq(1)
        with m.Elif(seg.flags.ack):
            m.d.comb += [desc.seq.eq(seg.ack), desc.flags.rst.eq(1)]
        with m.Else():
            m.d.comb += [desc.ack.eq(seg.seq + seg.length + seg.flags.syn + seg.flags.fin),
                         desc.flags.rst.eq(1), desc.flags.ack.eq(1)]
        return m
