"""The window a connection advertises in the segments it sends (RFC 9293 section 3.8.6.2.1,
RFC 7323)."""

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.tcp import MAX_WINDOW_SCALE
from rnic.host.spec.tcp_engine import MAX_UNSCALED_WINDOW

from .seq import seq_after
from .stage import staged

__all__ = ["TcpWindowField"]


class TcpWindowField(wiring.Component):
    """The window field of a segment with ACK and the right edge it advertises, as the
    model's ``_window_field`` and ``_emit``: ``rcv_wnd >> rcv_shift``, but never less than
    what keeps the right edge already advertised (``rcv_adv``, rounded up to the scale:
    the edge never moves left), at most 65535; ``rcv_adv`` moves to the new edge when it
    is further. An ``echo`` connection offers at most its send ring's room: ``tx_ring``
    less the octets received and not yet acknowledged as echoed, ``(RCV.NXT - IRS) -
    (SND.UNA - ISS)``, from ``echo_delta`` = IRS - ISS.

    Latency: :data:`LATENCY` cycles from inputs that hold still
    (:mod:`~rnic.hdl.tcp.stage`).

    Ports
    -----
    rcv_nxt, rcv_adv, rcv_wnd : In(32)
    rcv_shift : In(range(15))
    echo : In(1)
    echo_delta, snd_una, tx_ring : In(32)
    window : Out(16)
    new_adv : Out(32)
    """

    def __init__(self):
        super().__init__({
            "rcv_nxt": In(32),
            "rcv_adv": In(32),
            "rcv_wnd": In(32),
            "rcv_shift": In(range(MAX_WINDOW_SCALE + 1)),
            "echo": In(1),
            "echo_delta": In(32),
            "snd_una": In(32),
            "tx_ring": In(32),
            "window": Out(16),
            "new_adv": Out(32),
        })

    #: Cycles from the inputs to the outputs.
    LATENCY = 6

    def elaborate(self, platform):
        m = Module()
        shift = self.rcv_shift
        # 1: the advertised edge past RCV.NXT, the offer in the scale's units, the echo's
        # room in two halves: SND.UNA + IRS - ISS and tx_ring - RCV.NXT
        ahead = staged(m, self.rcv_adv - self.rcv_nxt, "ahead", 32)
        offered = staged(m, self.rcv_wnd >> shift, "offered", 32)
        acked = staged(m, self.snd_una + self.echo_delta, "echo_acked", 32)
        ring_left = staged(m, self.tx_ring - self.rcv_nxt, "echo_ring_left", 32)
        # 2: what keeps the edge, rounded up (0 if behind); the echo's room (signed)
        keep = staged(m, Mux(ahead[31], 0, (ahead + (1 << shift) - 1) >> shift), "keep", 32)
        room = staged(m, acked + ring_left, "echo_room", 32)
        # 3: the room in the scale's units (0 when the ring is over); 4: the offer
        room_scaled = staged(m, Mux(room[31], 0, room) >> shift, "echo_scaled", 32)
        offer = staged(m, Mux(self.echo & (room_scaled < offered), room_scaled, offered),
                       "offer", 32)
        # 5: the field; 6: the edge it advertises
        wanted = Mux(offer > keep, offer, keep)
        window = staged(m, Mux(wanted > MAX_UNSCALED_WINDOW, MAX_UNSCALED_WINDOW, wanted),
                        "window", 16)
        m.d.comb += self.window.eq(window)
        edge = staged(m, self.rcv_nxt + (window << shift), "edge", 32)
        m.d.comb += self.new_adv.eq(Mux(seq_after(m, edge, self.rcv_adv, "further"), edge,
                                        self.rcv_adv))
        return m
