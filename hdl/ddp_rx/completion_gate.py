"""The completion gate: completions held until every write before them is acknowledged."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..rdma_layouts import Completion
from ..synth_hints import SyncFIFOBuffered

__all__ = ["COUNT_BITS", "CompletionGate"]

#: Width of the wrapping write counters the gate compares (writes handed to the placer,
#: writes acknowledged on B). Fewer than ``2**(COUNT_BITS - 1)`` writes are ever between
#: them: at most 128 unacknowledged, and the placement of one slot.
COUNT_BITS = 16


class CompletionGate(wiring.Component):
    """Takes a completion as soon as the sequencer has it and offers it on ``o`` once every
    placement write handed over before it has its B response, so that the sequencer goes
    on with the next segments meanwhile. Completions leave in the order they came.

    Parameters
    ----------
    connections : int
    depth : int
        Completions held (a small queue: only the B latency of a message's last writes
        is waited for).

    Ports
    -----
    i : In(stream(Completion))
        From the sequencer (COMPLETE_SEND, COMPLETE_READ_RESPONSE); ``ready`` while the
        queue has room.
    o : Out(stream(Completion))
        To DdpRx's ``cq``.
    written : In(COUNT_BITS)
        Writes to host memory handed to the placer so far (wrapping): a completion taken
        on ``i`` waits for this many B responses.
    acked : In(COUNT_BITS)
        B responses so far (wrapping).
    empty : Out(1)
        No completion held (registered): error reports wait for it, so that they never
        overtake an earlier completion.

    Latency: a completion whose writes are all acknowledged is on ``o`` three cycles after
    its handshake on ``i`` (the queue's output register, the registered fence compare);
    one every two cycles (a new head waits a cycle for its compare). The completions
    wait with their fences in one queue in distributed RAM (why not block RAM:
    :class:`~rnic.hdl.synth_hints.SyncFIFOBuffered`).
    """

    def __init__(self, *, connections, depth=4):
        if not isinstance(depth, int) or depth < 2:
            raise ValueError(f"depth must be an integer >= 2, not {depth!r}")
        self.depth = depth
        self._entry = data.StructLayout({"cq": Completion(connections=connections),
                                         "fence": COUNT_BITS})
        super().__init__({
            "i": In(stream.Signature(Completion(connections=connections))),
            "o": Out(stream.Signature(Completion(connections=connections))),
            "written": In(COUNT_BITS), "acked": In(COUNT_BITS),
            "empty": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.queue = q = SyncFIFOBuffered(width=self._entry.size, depth=self.depth)
        head = self._entry(q.r_data)
        # the head's writes are acknowledged: ``acked`` has reached its fence (the wrapping
        # difference is below half the counters' range)
        # difference is below half the counters' range). Registered, so that the compare is
        # not in series with the queue's read enable: it holds for a head that stayed (the
        # counter only moves on), and a new head waits a cycle for it.
        due = Signal(COUNT_BITS)
        head_acked = Signal()
        pop = Signal()
        m.d.comb += [
            q.w_data.eq(Cat(self.i.payload.as_value(), self.written)),
            q.w_en.eq(self.i.valid), self.i.ready.eq(q.w_rdy),
            due.eq(self.acked - head.fence),
            self.o.payload.eq(head.cq),
            self.o.valid.eq(q.r_rdy & head_acked),
            q.r_en.eq(self.o.ready & head_acked),
            pop.eq(q.r_en & q.r_rdy),
        ]
        m.d.sync += head_acked.eq(q.r_rdy & ~pop & ~due[-1])
        m.d.sync += self.empty.eq((q.level == 0) & ~(self.i.valid & self.i.ready))
        return m
