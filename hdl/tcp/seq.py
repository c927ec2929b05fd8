"""Sequence-number comparisons in gateware: 32-bit numbers that wrap, compared as
:func:`rnic.host.model.tcp.seq_diff` does (``a`` after ``b`` when ``(a - b) mod 2**32`` is
in ``1 .. 2**31 - 1``, before it when it is ``2**31`` or more). Each helper adds the
difference as a named 32-bit signal to ``m`` and returns the comparison."""

from amaranth.hdl import Signal

__all__ = ["seq_distance", "seq_after", "seq_at_or_after", "seq_before", "window_left"]


def seq_distance(m, a, b, name):
    """``(a - b) mod 2**32`` as a 32-bit signal named ``name``."""
    diff = Signal(32, name=name)
    m.d.comb += diff.eq(a - b)
    return diff


def seq_after(m, a, b, name):
    """``seq_gt(a, b)``."""
    diff = seq_distance(m, a, b, name)
    return ~diff[31] & (diff != 0)


def seq_at_or_after(m, a, b, name):
    """``seq_geq(a, b)``."""
    return ~seq_distance(m, a, b, name)[31]


def seq_before(m, a, b, name):
    """``seq_lt(a, b)``."""
    return seq_distance(m, a, b, name)[31]


def window_left(m, edge, start, name):
    """``max(seq_diff(edge, start), 0)``: the octets from ``start`` to ``edge``, 0 when
    ``edge`` is behind (a window's room)."""
    diff = seq_distance(m, edge, start, f"{name}_diff")
    room = Signal(32, name=name)
    m.d.comb += room.eq(diff & ~diff[31].replicate(32))
    return room
