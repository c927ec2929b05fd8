"""The event engine's ACK port: pure ACKs, RSTs and the SYN of an active open, loaded a
cycle after the state that sends one decides."""

from amaranth.hdl import Mux, Signal
from amaranth.lib import enum

from rnic.host.spec import tcp_engine as spec

from .seq import seq_before
from .stage import staged

__all__ = ["AckKind", "AckSteps"]


class AckKind(enum.Enum, shape=2):
    """A segment of the ACK port."""

    PURE_ACK = 0        # SEQ the model's ``_ack_seq``, ACK RCV.NXT, the window
    RST_AT_SEG_ACK = 1  # <SEQ=SEG.ACK><CTL=RST>: an unacceptable ACK in SYN-SENT
    RST_AT_SND_NXT = 2  # <SEQ=SND.NXT><CTL=RST>: an abort, the retries spent
    SYN = 3             # our SYN again, with its options


class AckSteps:
    """The ACK port of :class:`~rnic.hdl.tcp.event_engine.TcpEventEngine` (a mixin: the
    engine's ports).

    A state that sends a segment on it asks (:meth:`_send_ack`, with an :class:`AckKind`);
    the descriptor is loaded in the next cycle from registered values of the cycle that
    asked (the pure ACK's SEQ and window) and from fields of the entry and the segment that
    no sending state writes. So the descriptor's 140 bits take their load enable from one
    register, not from the decode of the engine's state and its conditions. The port is
    busy (``_ack_busy``) from the ask until the descriptor is taken.
    """

    def _wire_ack(self, m, t, seg, window):
        self._ack_ask = Signal(name="ack_ask")
        self._ack_kind = Signal(AckKind, name="ack_kind")
        self._ack_busy = Signal(name="ack_busy")
        m.d.comb += self._ack_busy.eq(self.ack.valid | self._ack_ask)
        pure_seq = staged(m, self._ack_seq(m, t), "pure_ack_seq", 32)
        pure_window = staged(m, window.window, "pure_ack_window", 16)
        syn_window = staged(m, Mux(self._syn_window > spec.MAX_UNSCALED_WINDOW,
                                   spec.MAX_UNSCALED_WINDOW, self._syn_window),
                            "syn_window", 16)
        m.d.sync += self._ack_ask.eq(0)
        d = self.ack.payload
        with m.If(self._ack_ask):
            # (the fields read here from the entry, RCV.NXT, SND.NXT, ISS, the addresses,
            # and SEG.ACK, are not written in the cycle that asks)
            m.d.sync += [self.ack.valid.eq(1), d.eq(0), d.dst_ip.eq(t.remote_ip),
                         d.src_port.eq(t.local_port), d.dst_port.eq(t.remote_port)]
            with m.Switch(self._ack_kind):
                with m.Case(AckKind.PURE_ACK):
                    m.d.sync += [d.seq.eq(pure_seq), d.ack.eq(t.recv.rcv_nxt),
                                 d.window.eq(pure_window), d.flags.ack.eq(1)]
                with m.Case(AckKind.RST_AT_SEG_ACK):
                    m.d.sync += [d.seq.eq(seg.ack), d.flags.rst.eq(1)]
                with m.Case(AckKind.RST_AT_SND_NXT):
                    m.d.sync += [d.seq.eq(t.send.snd_nxt), d.flags.rst.eq(1)]
                with m.Case(AckKind.SYN):
                    m.d.sync += [d.seq.eq(t.iss), d.flags.syn.eq(1), d.window.eq(syn_window),
                                 d.syn_options.eq(1), d.mss.eq(self.mss), d.ws_present.eq(1),
                                 d.ws.eq(self.rcv_scale)]

    @staticmethod
    def _ack_seq(m, t):
        """A pure ACK's SEQ: SND.MAX, but never past the peer's window (the model's
        ``TcpEngine._ack_seq``)."""
        edge = Signal(32, name="peer_edge")
        m.d.comb += edge.eq(t.send.snd_una + t.send.snd_wnd)
        return Mux(seq_before(m, edge, t.send.snd_max, "max_past_edge"), edge, t.send.snd_max)

    def _send_ack(self, m, kind):
        """Sends a segment of ``kind`` (:class:`AckKind`) on the ACK port (which must not be
        busy)."""
        m.d.sync += [self._ack_ask.eq(1), self._ack_kind.eq(kind)]
