"""The segments without payload kept behind the data segments sent before them."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import TcpTxDesc

__all__ = ["TcpTxOrder"]


class TcpTxOrder(wiring.Component):
    """Holds each segment without payload (a pure ACK, a RST, a SYN-ACK, our SYN again)
    until the data segments sent before it have left the ring reader, so segments leave
    in the order the engine sent them, as the model's do.

    The data segments take the longer way (their payload is read from the send ring
    first); a pure ACK's SEQ is SND.MAX, which counts the segments cut before it. Let it
    overtake them, and the peer sees a SEQ past what it received: a listener that checks
    a SYN cookie against SEG.SEQ - 1 of the ACK that opens the connection (Linux with
    syncookies, the model) resets the connection.

    Each segment taken on ``i`` waits for the data segments ahead of it at that moment:
    the one the engine offers on its ``send`` port (``queued``), and those taken there
    (``sent``) that have not yet left the ring reader (``left``; the reader passes them
    on in order). Segments that reach the engine's port later do not hold it back.

    Ports
    -----
    i : In(stream.Signature(TcpTxDesc))
        The segments without payload; ``ready`` does not depend on ``valid``.
    o : Out(stream.Signature(TcpTxDesc))
        Registered.
    queued : In(1)
        The engine's ``send`` port is valid (a data segment not yet taken).
    sent : In(1)
        It is taken (``valid & ready``).
    left : In(1)
        A data segment's descriptor leaves the ring reader (``valid & ready``).

    Latency: one cycle from ``i`` to ``o`` with no data segment ahead. Throughput: one
    segment per two cycles. At most :data:`IN_FLIGHT` data segments may be between
    ``sent`` and ``left``.
    """

    #: The most data segments between the engine's port and the ring reader's output (the
    #: request slice's one and the reader's descriptor FIFO's four are five).
    IN_FLIGHT = 15

    def __init__(self):
        super().__init__({
            "i": In(stream.Signature(TcpTxDesc())),
            "o": Out(stream.Signature(TcpTxDesc())),
            "queued": In(1),
            "sent": In(1),
            "left": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        in_flight = Signal(range(self.IN_FLIGHT + 1))  # taken at ``send``, not yet left
        m.d.sync += in_flight.eq(in_flight + self.sent - self.left)

        held = Signal()                     # a segment is in the register
        ahead = Signal(range(self.IN_FLIGHT + 2))  # the data segments still ahead of it
        with m.If(held & self.left & (ahead != 0)):
            m.d.sync += ahead.eq(ahead - 1)
        m.d.comb += [self.i.ready.eq(~held),
                     self.o.valid.eq(held & (ahead == 0))]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [held.eq(1), self.o.payload.eq(self.i.payload),
                         ahead.eq(in_flight + self.queued - self.left)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += held.eq(0)
        return m
