"""A registered merge of ``lib.stream`` streams of single-beat items: see :class:`StreamMerge`."""

from amaranth.hdl import Module, Shape
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamMerge"]


class StreamMerge(wiring.Component):
    """Merges ``inputs`` streams into one, the lowest-numbered waiting input first.

    For streams whose items are single beats and rare (descriptors, requests): an item is
    taken from an input only into an empty output register, so ``o.ready`` (often the end
    of a deep path in the consumer) reaches no input's ``ready``, and ``o.payload`` holds
    still while ``o.valid``. ``lib.stream`` has no merge.

    Parameters
    ----------
    shape : shape-like
        The payload shape.
    inputs : int
        Number of inputs (at least 2).

    Ports
    -----
    i : In(stream.Signature(shape)).array(inputs)
        Input ``k``'s ``ready`` does not depend on its ``valid``.
    o : Out(stream.Signature(shape))
        Registered.

    Latency one cycle. Throughput one item per two cycles; input ``k`` waits while a lower
    one has items (a fixed priority: the caller bounds how often the first one offers).
    """

    def __init__(self, shape, *, inputs=2):
        if not isinstance(inputs, int) or inputs < 2:
            raise ValueError(f"inputs must be an integer of at least 2, not {inputs!r}")
        Shape.cast(shape)                    # raises a TypeError for a non-shape
        self.shape = shape
        self._inputs = inputs
        super().__init__({"i": In(stream.Signature(shape)).array(inputs),
                          "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        free = ~self.o.valid
        waiting = 0                         # some lower input has an item
        for port in self.i:
            m.d.comb += port.ready.eq(free & ~waiting)
            with m.If(port.valid & port.ready):
                m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(port.payload)]
            waiting = waiting | port.valid
        return m
