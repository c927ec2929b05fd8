"""The plan of a queue head's next DDP segment, in three register stages. See :class:`SegmentPlanner`."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..beat import check_width
from ..compare import above
from .layouts import PlanHead, SegmentPlan

__all__ = ["SegmentPlanner"]


class SegmentPlanner(wiring.Component):
    """The next segment of one queue head's message: its length, flags, addresses and the
    start values of the emitter and the payload fetch.

    Parameters
    ----------
    width : int
        Datapath width W in octets.
    addr_width : int
        Host address width AW.
    headers : tuple of int
        The header length of the head's segments (one value), or two: the first when
        ``head.tagged``, else the second (the send queue: 14 for an RDMA Write, 18 for a Send).

    Ports
    -----
    head : In(PlanHead)
        The head's message, stable while the planner works (the sequencer's registers).
    limits : In(1)
        Stage 0 (the sequencer's READ_HEADS): register the segment room
        (``mulpdu`` - header) and its end (``off`` + room) per header length.
    first : In(1)
        Stage 1 (DECIDE): register the segment's last flag, the octets left, the room, the
        payload address and TO, and from the low address bits the rotation and the
        header-only beats.
    plan : Out(SegmentPlan)
        The plan: ``last``, ``addr``, ``to``, ``rot`` from stage 1, the rest from stage 2,
        which registers its values from stage 1's in every cycle.

    Latency, throughput and packet boundaries
    -----------------------------------------
    ``plan`` is complete 2 cycles after ``first`` (one step per cycle, so that no cycle of a
    segment start does more than one adder and compare; the segment is the message's last
    if ``length <= off + room``, compared in parallel with the subtraction). One plan per
    segment; a message is planned again before each of its segments. A zero-length message
    (or the empty rest of one) plans one header-only segment.
    """

    def __init__(self, *, width, addr_width, headers):
        check_width(width)
        if (not isinstance(headers, tuple) or len(headers) not in (1, 2)
                or not all(isinstance(h, int) and 0 < h < 256 for h in headers)):
            raise ValueError(f"headers must be one or two header lengths in octets, not {headers!r}")
        self.width = width
        self.addr_width = addr_width
        self.headers = headers
        super().__init__({
            "head": In(PlanHead()), "limits": In(1), "first": In(1),
            "plan": Out(SegmentPlan(width=width, addr_width=addr_width)),
        })

    def _by_header(self, values):
        """``values[0]`` if there is one header length, else the one of ``head.tagged``."""
        return values[0] if len(values) == 1 else Mux(self.head.tagged, values[0], values[1])

    def elaborate(self, platform):
        m = Module()
        W, LW, AW = self.width, exact_log2(self.width), self.addr_width
        h, p = self.head, self.plan

        # stage 0: room and end of the segment per header length, from the context
        rooms = [Signal(16, name=f"room{hl}") for hl in self.headers]
        ends = [Signal(33, name=f"lim{hl}") for hl in self.headers]
        with m.If(self.limits):
            for hl, room, end in zip(self.headers, rooms, ends):
                m.d.sync += [room.eq(h.mulpdu - hl), end.eq(h.off + (h.mulpdu - hl))]

        # stage 1: the segment from the message; the rotation and the header-only beats from
        # the low address bits alone (small adders)
        rem = Signal(16)               # octets left of the message (a last segment's payload)
        room = Signal(16)
        eqoff = Signal()               # nothing is left
        lo_m1 = Signal(signed(LW + 2))  # lo - 1, lo + W - 1, W - lo: registered so that
        lo_w = Signal(LW + 1)           # stage 2 has one adder
        w_lo = Signal(LW + 1)
        k = Signal(8)                   # header-only beats
        lo = Signal(LW, name="lo")
        hlen = Signal(8, name="hl")
        rot = Signal(LW, name="rot_d")
        with m.If(self.first):
            m.d.comb += [lo.eq(h.base[:LW] + h.off[:LW]),
                         hlen.eq(self._by_header(self.headers)), rot.eq((lo - hlen)[:LW])]
            m.d.sync += [p.rot.eq(rot), k.eq((rot + hlen - lo) >> LW),
                         lo_m1.eq(lo - 1), lo_w.eq(lo + (W - 1)), w_lo.eq(W - lo)]
            m.d.sync += [
                p.last.eq(self._by_header([h.length <= end for end in ends])),
                rem.eq((h.length - h.off)[:16]), room.eq(self._by_header(rooms)),
                eqoff.eq(h.length == h.off),
                p.addr.eq((h.base + h.off)[:AW]), p.to.eq((h.to + h.off)[:64]),
            ]

        # stage 2: the emitter's and the payload fetch's start values
        def by_hl(f):
            return self._by_header([f(hl) for hl in self.headers])
        n = Signal(16, name="n_d")
        nz = Signal(name="nz_d")       # the segment has payload
        endw = Signal(18)              # index of the last memory word
        m.d.comb += [n.eq(Mux(p.last, rem, room)), nz.eq(~(p.last & eqoff)), endw.eq((n + lo_m1) >> LW)]
        m.d.sync += [
            p.n.eq(n),
            p.tot.eq(n + by_hl(lambda v: Const(v, 8))),
            p.t.eq(1 - k),
            p.lastw.eq(Mux(nz, endw, -1)),
            p.pre.eq((k == 0) & nz),
            # need = 0 <= t <= endw with t = 1 - k
            p.need.eq(nz & ((k == 1) | ((k == 0) & (n > w_lo)))),
            p.last_beat.eq(by_hl(lambda v: ~above(n, W - v))),
            p.tmask.eq(by_hl(lambda v: Cat(*[above(n, b - v) for b in range(W)]))),
            p.hmask.eq(by_hl(lambda v: Const(sum(1 << b for b in range(W) if v > b), W))),
            p.words.eq(Mux(nz, (n + lo_w) >> LW, 0)),
            p.to4k.eq((4096 - Cat(Const(0, LW), p.addr[LW:12])) >> LW),
        ]
        return m
