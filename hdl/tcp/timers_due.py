"""Which of a connection's receive-side timers are due, and its next deadline."""

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .seq import seq_at_or_after, seq_before
from .stage import staged

__all__ = ["TcpTimersDue"]


class TcpTimersDue(wiring.Component):
    """The TIME-WAIT and delayed-ACK steps of the model's ``_timers``
    (:class:`rnic.host.model.tcp_engine.TcpEngine`): a timer is due when ``now`` is at or
    after its deadline (compared as sequence numbers: the time base wraps), and the
    connection's next deadline for :class:`~rnic.hdl.tcp.timer_table.TcpTimerTable` is
    the earlier of the two that run.

    The retransmission and persist timers are the send side's: they are not among these.

    Latency: :data:`LATENCY` cycle from inputs that hold still (:mod:`~rnic.hdl.tcp.stage`).

    Ports
    -----
    tw_armed, delack_armed : In(1)
    tw_at, delack_at, now : In(32)
    tw_due, delack_due : Out(1)
    armed : Out(1)
    deadline : Out(32)
        The earliest deadline of the timers that run (``armed``).
    """

    def __init__(self):
        super().__init__({
            "tw_armed": In(1), "tw_at": In(32), "delack_armed": In(1), "delack_at": In(32),
            "now": In(32),
            "tw_due": Out(1), "delack_due": Out(1), "armed": Out(1), "deadline": Out(32),
        })

    #: Cycles from the inputs to the outputs.
    LATENCY = 1

    def elaborate(self, platform):
        m = Module()
        tw_due = staged(m, seq_at_or_after(m, self.now, self.tw_at, "tw"), "tw_passed")
        delack_due = staged(m, seq_at_or_after(m, self.now, self.delack_at, "delack"),
                            "delack_passed")
        delack_first = staged(m, seq_before(m, self.delack_at, self.tw_at, "first"),
                              "delack_first")
        m.d.comb += [
            self.tw_due.eq(self.tw_armed & tw_due),
            self.delack_due.eq(self.delack_armed & delack_due),
            self.armed.eq(self.tw_armed | self.delack_armed),
            self.deadline.eq(Mux(self.delack_armed & (~self.tw_armed | delack_first),
                                 self.delack_at, self.tw_at)),
        ]
        return m
