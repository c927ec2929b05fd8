"""Which of a connection's timers are due, and its next deadline."""

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .seq import seq_at_or_after, seq_before
from .stage import staged

__all__ = ["TcpTimersDue", "TIMERS"]

#: The timers of a connection, in the order the model's ``_timers`` runs them.
TIMERS = ("tw", "rto", "persist", "delack")


class TcpTimersDue(wiring.Component):
    """The deadlines of the model's ``_timers`` (:class:`rnic.host.model.tcp_engine.TcpEngine`):
    TIME-WAIT (``tw``), retransmission (``rto``), persist and delayed ACK. A timer is due
    when it runs (``*_armed``) and ``now`` is at or after its deadline (compared as
    sequence numbers: the time base wraps); the connection's next deadline for
    :class:`~rnic.hdl.tcp.timer_table.TcpTimerTable` is the earliest of those that run (a
    tournament: two pairs, then their winners).

    Latency: :data:`LATENCY` cycles from inputs that hold still (:mod:`~rnic.hdl.tcp.stage`).

    Ports
    -----
    tw_armed, rto_armed, persist_armed, delack_armed : In(1)
    tw_at, rto_at, persist_at, delack_at, now : In(32)
    tw_due, rto_due, persist_due, delack_due : Out(1)
    armed : Out(1)
    deadline : Out(32)
        The earliest deadline of the timers that run (``armed``).
    """

    def __init__(self):
        ports = {"now": In(32), "armed": Out(1), "deadline": Out(32)}
        for name in TIMERS:
            ports.update({f"{name}_armed": In(1), f"{name}_at": In(32),
                          f"{name}_due": Out(1)})
        super().__init__(ports)

    #: Cycles from the inputs to the outputs.
    LATENCY = 2

    def elaborate(self, platform):
        m = Module()
        for name in TIMERS:
            passed = staged(m, seq_at_or_after(m, self.now, getattr(self, f"{name}_at"), name),
                            f"{name}_passed")
            m.d.comb += getattr(self, f"{name}_due").eq(getattr(self, f"{name}_armed")
                                                        & passed)
        # 1: the earlier of each pair; 2: which of the two is earlier
        pairs = [self._earlier(m, *TIMERS[k:k + 2]) for k in (0, 2)]
        (armed_a, at_a), (armed_b, at_b) = pairs
        b_first = staged(m, seq_before(m, at_b, at_a, "final"), "final_first")
        m.d.comb += [self.armed.eq(armed_a | armed_b),
                     self.deadline.eq(Mux(armed_b & (~armed_a | b_first), at_b, at_a))]
        return m

    def _earlier(self, m, a, b):
        """The earlier running timer of ``a`` and ``b`` (registered): whether either runs,
        and its deadline."""
        armed_a, at_a = getattr(self, f"{a}_armed"), getattr(self, f"{a}_at")
        armed_b, at_b = getattr(self, f"{b}_armed"), getattr(self, f"{b}_at")
        b_first = seq_before(m, at_b, at_a, f"{b}_before_{a}")
        armed = staged(m, armed_a | armed_b, f"{a}_{b}_armed")
        at = staged(m, Mux(armed_b & (~armed_a | b_first), at_b, at_a), f"{a}_{b}_at", 32)
        return armed, at
