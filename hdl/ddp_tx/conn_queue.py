"""A FIFO of connection ids pushed from registers. See :class:`ConnQueue`."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import conn_bits
from ..synth_hints import SyncFIFOBuffered

__all__ = ["ConnQueue"]


class ConnQueue(wiring.Component):
    """A FIFO of connection ids whose pushes are registered first.

    The transmit path has two: the active connections (those with work, each at most
    once: ``depth`` = connections, so it never overflows) and the answered Read Requests
    for ``DdpRx.rr_done`` (``depth`` = connections x Read Request queue depth: the
    unacknowledged ones per connection are at most its IRD, at most that depth, so the
    transmit side never waits for the RX side, which takes ``rr_done`` only between
    segments and may itself be waiting to hand over a Read Request).

    Parameters
    ----------
    connections : int
        Connection contexts (the width of an id).
    depth : int
        Entries.

    Ports
    -----
    push : In(stream(unsigned(conn_bits(connections))))
        Always taken (the FIFO must have room: see above).
    pop : Out(stream(unsigned(conn_bits(connections))))
        The ids in push order.

    Latency, throughput and packet boundaries
    -----------------------------------------
    A push enters the FIFO one cycle after ``push.valid``, from registers (timing: the
    pusher's state decode does not run into the FIFO's level and storage enables), and is
    on ``pop`` 2 cycles later (the FIFO's output register). One push and one pop per cycle.
    """

    def __init__(self, *, connections, depth):
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive integer, not {depth!r}")
        self.depth = depth
        self._bits = conn_bits(connections)
        super().__init__({
            "push": In(stream.Signature(self._bits, always_ready=True)),
            "pop": Out(stream.Signature(self._bits)),
        })

    def elaborate(self, platform):
        m = Module()
        fifo = SyncFIFOBuffered(width=self._bits, depth=self.depth)
        m.submodules.fifo = fifo
        push_q = Signal()
        conn_q = Signal(self._bits)
        m.d.sync += [push_q.eq(self.push.valid), conn_q.eq(self.push.payload)]
        m.d.comb += [fifo.w_en.eq(push_q), fifo.w_data.eq(conn_q),
                     self.pop.payload.eq(fifo.r_data), self.pop.valid.eq(fifo.r_rdy),
                     fifo.r_en.eq(self.pop.ready)]
        return m
