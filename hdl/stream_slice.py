"""A register slice for ``lib.stream`` streams: cuts every combinational path between two blocks.

See :class:`StreamSlice`.
"""

from amaranth.hdl import Module, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamSlice"]


class StreamSlice(wiring.Component):
    """Full-throughput register slice (a skid buffer) on a valid/ready stream.

    ``o.valid``/``o.payload`` and ``i.ready`` are flip-flop outputs, so neither the
    forward path (payload, valid) nor the backward path (ready) of a stream runs
    combinationally through the slice. Used between the blocks of the core, where a
    ``ready`` computed deep inside one block fed the handshake logic of the other
    (:mod:`rnic.hdl.rnic_core`). Amaranth has no such block in ``lib.stream``, and
    ``lib.fifo.SyncFIFOBuffered`` of depth 2 reaches a full beat per cycle only with a
    combinational ``w_rdy`` from the read side; hence this one.

    Parameters
    ----------
    shape : shape-like
        The payload shape (e.g. a ``data.StructLayout``).

    Ports
    -----
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))

    full_rate : bool
        ``True`` (default): the skid buffer above. ``False``: one register only
        (half the flip-flops), ``i.ready`` = not ``o.valid``: one beat every two
        cycles, for control streams whose payload is wide and whose beats are rare.

    Latency one cycle (a beat taken at ``i`` is on ``o`` in the next cycle);
    throughput one beat per cycle while ``o.ready`` is high (``full_rate``); order
    and payloads kept. When ``o`` stalls, the one beat already accepted is held in a
    second register and ``i.ready`` falls in the next cycle; nothing is lost or
    duplicated. The slice does not look at the payload (packet boundaries pass
    untouched).
    """

    def __init__(self, shape, *, full_rate=True):
        self.shape = shape
        self.full_rate = bool(full_rate)
        Shape.cast(shape)                        # raises a TypeError for a non-shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        if not self.full_rate:
            m.d.comb += i.ready.eq(~o.valid)
            with m.If(i.valid & ~o.valid):
                m.d.sync += [o.valid.eq(1), o.payload.eq(i.payload)]
            with m.Elif(o.ready):
                m.d.sync += o.valid.eq(0)
            return m
        skid_valid = Signal()
        skid = Signal(self.shape)
        m.d.comb += i.ready.eq(~skid_valid)
        take = i.valid & i.ready
        # The payload registers load whatever ``i.payload`` is while they are free, not only
        # on ``take`` (timing: ``i.valid``, often the end of a long handshake path, then
        # reaches only the two valid flags, not the clock enables of the wide payloads; a
        # payload loaded without its valid is never offered).
        with m.If(~skid_valid):
            m.d.sync += skid.eq(i.payload)
        with m.If(~o.valid | o.ready):
            # the output register is free (or freed this cycle): the oldest beat goes there
            with m.If(skid_valid):
                m.d.sync += [o.payload.eq(skid), o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [o.payload.eq(i.payload), o.valid.eq(take)]
        with m.Elif(take):
            m.d.sync += skid_valid.eq(1)
        return m
