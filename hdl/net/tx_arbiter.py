"""Frame-atomic round robin of several frame streams into one."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.limits import check_width

from .layouts import FrameBeat

__all__ = ["TxArbiter"]


class TxArbiter(wiring.Component):
    """Merges ``inputs`` frame streams into ``o`` a whole frame at a time, round robin.

    When no frame is under way, the next input after the one served last that has a beat
    waiting is chosen; it keeps ``o`` until its ``last`` beat is taken. Once a beat is
    presented on ``o`` the choice holds, so ``o`` keeps the stream rules under
    back-pressure.

    Parameters
    ----------
    width : int
        Octets per beat, one of :data:`rnic.host.spec.limits.WIDTHS`.
    inputs : int
        Number of input streams, at least 1.

    Ports
    -----
    i : In(stream.Signature(FrameBeat(width))).array(inputs)
    o : Out(stream.Signature(FrameBeat(width)))

    Latency: combinational (a beat passes in the cycle it is taken). Throughput: one beat
    per cycle, no idle cycle between frames.
    """

    def __init__(self, *, width, inputs):
        self._width = check_width(width)
        if isinstance(inputs, bool) or not isinstance(inputs, int) or inputs < 1:
            raise ValueError(f"inputs must be an int of at least 1, not {inputs!r}")
        self._inputs = inputs
        beat = stream.Signature(FrameBeat(width=width))
        super().__init__({"i": In(beat).array(inputs), "o": Out(beat)})

    def elaborate(self, platform):
        m = Module()
        n = self._inputs
        held = Signal()                      # a frame is under way on o (or presented)
        grant = Signal(range(max(n, 2)))     # the input that has o, or was served last
        waiting = Cat(*(port.valid for port in self.i))

        # The first input with a beat waiting after ``grant``, wrapping around.
        pick = Signal(range(max(n, 2)))
        for step in reversed(range(1, n + 1)):
            candidate = Signal(range(max(n, 2)), name=f"candidate{step}")
            m.d.comb += candidate.eq(Mux(grant + step >= n, grant + step - n, grant + step))
            with m.If(waiting.bit_select(candidate, 1)):
                m.d.comb += pick.eq(candidate)
        chosen = Mux(held, grant, pick)
        for k, port in enumerate(self.i):
            with m.If(chosen == k):
                m.d.comb += [self.o.valid.eq(port.valid), self.o.payload.eq(port.payload),
                             port.ready.eq(self.o.ready)]
        with m.If(self.o.valid):
            m.d.sync += [grant.eq(chosen), held.eq(~(self.o.ready & self.o.payload.last))]
        return m
