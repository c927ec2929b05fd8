"""The receive side's delivery stage: what the engine keeps of each segment's payload, to
the core's ``rx_wire``."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width

from ..beat import OctetBeat, conn_bits
from ..net.layouts import FrameBeat
from .lane_shift import LaneShift

__all__ = ["TcpRxDeliver", "RxAction"]


class RxAction(data.StructLayout):
    """What to do with one segment's payload: of its ``length`` octets, deliver ``keep``
    octets from octet ``skip`` on (``skip + keep <= length``; ``keep`` 0 drops them all) to
    connection ``conn``.

    Parameters
    ----------
    connections : int
        Connection ids ``conn`` holds.
    """

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "length": 16, "skip": 16,
                          "keep": 16})


class TcpRxDeliver(wiring.Component):
    """Delivers the part of each segment's payload that its action keeps.

    For each action on ``action`` the stage takes its segment's ``length`` payload octets
    from ``payload`` (none when ``length`` is 0): the beats before octet ``skip`` and after
    octet ``skip + keep - 1`` are dropped at one beat per cycle, the rest go through a
    :class:`~rnic.hdl.tcp.lane_shift.LaneShift` that realigns them to lane 0 with the
    action's ``conn``. What a segment keeps leaves as one unit (``first`` .. ``last``) on
    ``o``: the engine trims a segment that starts before the next expected octet (``skip``)
    or runs past the receive window (``keep``) and drops one it does not accept.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    connections : int
        Connection ids.

    Ports
    -----
    action : In(stream.Signature(RxAction(connections=)))
        One per segment, in the order of ``payload``; taken when the one before it is
        done (with its payload's last beat; a cycle after it is taken when its
        ``length`` is 0).
    payload : In(stream.Signature(FrameBeat(width)))
        The segments' payloads (:attr:`rnic.hdl.tcp.rx_parse.TcpRxParse.payload`).
    o : Out(stream.Signature(OctetBeat(width=, connections=)))
        The delivered octets (the core's ``rx_wire``).

    Latency: an action is applied from the cycle after it is taken; a delivered beat leaves
    1 cycle after the payload beat that completes it. Throughput: one payload beat per
    cycle (the next action is taken with its predecessor's last beat); one cycle more for a
    kept part whose last beat spills (as :class:`~rnic.hdl.tcp.lane_shift.LaneShift`).
    """

    def __init__(self, *, width, connections):
        self._width = check_width(width)
        self._connections = connections
        super().__init__({
            "action": In(stream.Signature(RxAction(connections=connections))),
            "payload": In(stream.Signature(FrameBeat(width=width))),
            "o": Out(stream.Signature(OctetBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.shift = shift = LaneShift(width=self._width,
                                               connections=self._connections)
        wiring.connect(m, shift.o, wiring.flipped(self.o))
        act = self.action.payload
        beat = self.payload.payload
        # the action being applied, taken into registers: its kept part's start and end
        # relative to the payload beat at hand (``to_start``, ``to_end``: octets from the
        # beat's first octet, negative once passed) go down by each beat's octets, so a
        # beat compares them with its own few-bit count, not 16-bit positions with sums
        busy = Signal()
        empty = Signal()                    # the action's segment has no payload
        keep_any = Signal()
        conn = Signal.like(act.conn, name="act_conn")
        to_start = Signal(signed(18))
        to_end = Signal(signed(18))
        kept = keep_any & (to_start < beat.n) & (to_end > 0)
        first = to_start >= 0
        last = to_end <= beat.n
        done = Signal()

        with m.If(busy & empty):
            m.d.comb += done.eq(1)
        with m.Elif(busy & self.payload.valid):
            m.d.comb += [shift.i.valid.eq(kept),
                         self.payload.ready.eq(~kept | shift.i.ready),
                         shift.i.payload.data.eq(beat.data),
                         shift.i.payload.n.eq(Mux(last, to_end, beat.n)),
                         shift.i.payload.first.eq(first),
                         shift.i.payload.last.eq(last),
                         shift.i.payload.skip.eq(to_start),
                         shift.i.payload.conn.eq(conn)]
            with m.If(self.payload.ready):
                m.d.sync += [to_start.eq(to_start - beat.n), to_end.eq(to_end - beat.n)]
                m.d.comb += done.eq(beat.last)
        with m.If(done):
            m.d.sync += busy.eq(0)
        m.d.comb += self.action.ready.eq(~busy | done)
        with m.If(self.action.valid & self.action.ready):
            m.d.sync += [busy.eq(1), empty.eq(act.length == 0), keep_any.eq(act.keep != 0),
                         conn.eq(act.conn), to_start.eq(act.skip),
                         to_end.eq(act.skip + act.keep)]
        return m

