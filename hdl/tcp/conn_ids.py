"""Which connection ids are free, and the lowest of them (the model's ``_listener`` gives a
new connection the lowest free id)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..beat import conn_bits

__all__ = ["TcpConnIds", "lowest_set"]


def lowest_set(m, bits, name, base=0):
    """``(any, index)`` of the lowest set bit of ``bits`` (``index`` counts from
    ``base``), as a tree of halves: log2 levels deep."""
    if len(bits) == 1:
        return bits[0], base
    half = len(bits) // 2
    lo_any, lo_index = lowest_set(m, bits[:half], f"{name}l", base)
    hi_any, hi_index = lowest_set(m, bits[half:], f"{name}h", base + half)
    index = Signal(range(base + len(bits)), name=f"{name}_index")
    m.d.comb += index.eq(Mux(lo_any, lo_index, hi_index))
    return lo_any | hi_any, index


class TcpConnIds(wiring.Component):
    """The connection ids in use, and the lowest free one.

    Parameters
    ----------
    connections : int

    Ports
    -----
    any_free : Out(1)
    free_id : Out(conn_bits(connections))
        The lowest id not in use (``any_free``), registered.
    take : In(1)
        ``free_id`` is used from now on.
    release : In(1)
    release_id : In(conn_bits(connections))
        ``release_id`` is free from now on (``take`` wins when both name one id).
    in_use : Out(1)
        Some id is in use, registered.

    Latency: ``any_free`` and ``free_id`` follow a take or a release 2 cycles later. All
    ids start free.
    """

    def __init__(self, *, connections):
        self._connections = connections
        bits = conn_bits(connections)
        super().__init__({
            "any_free": Out(1),
            "free_id": Out(bits),
            "take": In(1),
            "release": In(1),
            "release_id": In(bits),
            "in_use": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        used = Signal(self._connections)
        with m.If(self.release):
            m.d.sync += used.bit_select(self.release_id, 1).eq(0)
        with m.If(self.take):
            m.d.sync += used.bit_select(self.free_id, 1).eq(1)
        found, index = lowest_set(m, ~used, "free")
        m.d.sync += [self.any_free.eq(found), self.free_id.eq(index),
                     self.in_use.eq(used.any())]
        return m
