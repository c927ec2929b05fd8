"""The first rules the engine applies to a segment of a synchronized connection: the
acceptability test, RST and SYN (RFC 5961), and the ACK field's range."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec import tcp_engine as spec

from .layouts import TcpDrop, TcpFlags, TcpState
from .seq import seq_after, seq_before, window_left
from .stage import staged

__all__ = ["TcpRxCheck", "RxVerdict", "RxCheckTcb", "RxCheckSeg"]

class RxVerdict(enum.Enum, shape=unsigned(2)):
    """What the engine does with the segment: go on to the ACK's effects, the window and
    the text (ACCEPT); drop it (DROP) or drop it and send an ACK at once (DROP_ACK), both
    counted as ``reason``; or reset the connection (RESET: a RST exactly at RCV.NXT)."""
    ACCEPT = 0
    DROP = 1
    DROP_ACK = 2
    RESET = 3


class RxCheckTcb(data.StructLayout):
    """The connection's fields the checks read."""

    def __init__(self):
        super().__init__({"state": TcpState, "rcv_nxt": 32, "rcv_adv": 32, "snd_una": 32,
                          "snd_max": 32, "max_snd_wnd": 32})


class RxCheckSeg(data.StructLayout):
    """The segment's fields the checks read (``length`` its payload octets)."""

    def __init__(self):
        super().__init__({"seq": 32, "ack": 32, "flags": TcpFlags(), "length": 16})


class TcpRxCheck(wiring.Component):
    """The checks of :meth:`rnic.host.model.tcp_engine.TcpEngine` on a segment of a
    synchronized connection, in its order, up to the ACK field's effects:

    1. acceptability (RFC 9293 section 3.10.7.4: the four cases, RCV.WND the window last
       advertised, ``rcv_adv - rcv_nxt``, 0 if negative, the segment's length counting SYN
       and FIN; an empty segment up to the window's right edge included, as the model):
       unacceptable is DROP_ACK (NOT_ACCEPTABLE), or DROP for a RST; in
       TIME-WAIT an unacceptable FIN also restarts the wait (``restart_time_wait``);
    2. a RST in TIME-WAIT: DROP (TIME_WAIT_RST, RFC 1337);
    3. a RST: RESET exactly at RCV.NXT, else DROP_ACK (CHALLENGE_ACK, RFC 5961 section 3.2);
    4. a SYN: DROP_ACK (CHALLENGE_ACK, RFC 5961 section 4.2);
    5. no ACK: DROP (NO_ACK);
    6. an ACK of octets never sent (after SND.MAX): DROP_ACK (BAD_ACK); one before
       SND.UNA - MAX.SND.WND: DROP (OLD_ACK, RFC 5961 section 5.2);
    7. else ACCEPT.

    Latency: :data:`LATENCY` cycle from inputs that hold still
    (:mod:`~rnic.hdl.tcp.stage`): the sequence-number comparisons, then the order of the
    checks.

    Ports
    -----
    tcb : In(RxCheckTcb)
    seg : In(RxCheckSeg)
    verdict : Out(RxVerdict)
    reason : Out(TcpDrop)
        Why, for DROP and DROP_ACK.
    restart_time_wait : Out(1)
    """

    def __init__(self):
        super().__init__({
            "tcb": In(RxCheckTcb()),
            "seg": In(RxCheckSeg()),
            "verdict": Out(RxVerdict),
            "reason": Out(TcpDrop),
            "restart_time_wait": Out(1),
        })

    #: Cycles from the inputs to the outputs.
    LATENCY = 1

    def elaborate(self, platform):
        m = Module()
        tcb, seg = self.tcb, self.seg
        flags = seg.flags
        acceptable = staged(m, self._acceptable(m, tcb, seg), "acceptable")
        time_wait = tcb.state == spec.TcpState.TIME_WAIT

        after_max = staged(m, seq_after(m, seg.ack, tcb.snd_max, "past_max"), "after_max")
        oldest = staged(m, tcb.snd_una - tcb.max_snd_wnd, "oldest", 32)
        too_old = seq_before(m, seg.ack, oldest, "past_oldest")
        at_rcv_nxt = staged(m, seg.seq == tcb.rcv_nxt, "at_rcv_nxt")

        def verdict(value, reason=None):
            m.d.comb += self.verdict.eq(value)
            if reason is not None:
                m.d.comb += self.reason.eq(reason)

        with m.If(~acceptable):
            verdict(RxVerdict.DROP_ACK, spec.TcpDrop.NOT_ACCEPTABLE)
            with m.If(flags.rst):
                verdict(RxVerdict.DROP)
            with m.Elif(time_wait & flags.fin):
                m.d.comb += self.restart_time_wait.eq(1)
        with m.Elif(flags.rst & time_wait):
            verdict(RxVerdict.DROP, spec.TcpDrop.TIME_WAIT_RST)
        with m.Elif(flags.rst):
            with m.If(at_rcv_nxt):
                verdict(RxVerdict.RESET)
            with m.Else():
                verdict(RxVerdict.DROP_ACK, spec.TcpDrop.CHALLENGE_ACK)
        with m.Elif(flags.syn):
            verdict(RxVerdict.DROP_ACK, spec.TcpDrop.CHALLENGE_ACK)
        with m.Elif(~flags.ack):
            verdict(RxVerdict.DROP, spec.TcpDrop.NO_ACK)
        with m.Elif(after_max):
            verdict(RxVerdict.DROP_ACK, spec.TcpDrop.BAD_ACK)
        with m.Elif(too_old):
            verdict(RxVerdict.DROP, spec.TcpDrop.OLD_ACK)
        with m.Else():
            verdict(RxVerdict.ACCEPT)
        return m

    @staticmethod
    def _acceptable(m, tcb, seg):
        """The four cases of the acceptability test."""
        span = window_left(m, tcb.rcv_adv, tcb.rcv_nxt, "span")   # RCV.WND as advertised
        length = Signal(18)                 # sequence space: octets, SYN and FIN
        m.d.comb += length.eq(seg.length + seg.flags.syn + seg.flags.fin)
        first_in = Signal(32)
        last_in = Signal(32)
        m.d.comb += [first_in.eq(seg.seq - tcb.rcv_nxt),
                     last_in.eq(seg.seq + length - 1 - tcb.rcv_nxt)]
        ok = Signal()
        with m.If(length == 0):
            m.d.comb += ok.eq(first_in <= span)    # up to the right edge (Linux's rule)
        with m.Else():
            m.d.comb += ok.eq((span != 0) & ((first_in < span) | (last_in < span)))
        return ok
