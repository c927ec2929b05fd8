"""Comparisons shaped for the ECP5: :func:`wide_less` for timing, :func:`above` for area."""

from amaranth.hdl import Cat, Const

__all__ = ["wide_less", "above"]


def wide_less(a, b):
    """``a < b`` (unsigned) for operands wider than 32 bits, as two 32-bit halves compared side
    by side: two short carry chains and one LUT level in place of one long chain (a 64-bit
    compare is about twice the delay of a 32-bit one on the ECP5's carry chain)."""
    n = max(len(a), len(b))
    a, b = a.as_unsigned(), b.as_unsigned()
    if n <= 32:
        return a < b
    a_hi, b_hi = a[32:n], b[32:n]
    return (a_hi < b_hi) | ((a_hi == b_hi) & (a[:32] < b[:32]))


def above(value, c):
    """``value > c`` (unsigned) for a constant ``c``, as LUT logic: Yosys builds a compare
    with a constant as a carry chain (two COMB cells per two bits), however many compares
    share the value. Here the bits above ``c``'s highest set bit are ORed, that bit ANDed
    with the compare of the bits below it, down to four bits, one LUT4 (many compares of
    one value, as in a thermometer mask, take fewer cells than as carry chains: Yosys
    shares the ORs among the constants). Its depth grows with the set bits of ``c``: for
    constants with more than four, above eight bits, it is Amaranth's compare."""
    value = value.as_unsigned()
    n = len(value)
    if c < 0:
        return Const(1, 1)
    if c >= (1 << n) - 1:
        return Const(0, 1)
    if n <= 4:
        return Cat(*(value == v for v in range(c + 1, 1 << n))).any()
    if bin(c).count("1") > 4 and c.bit_length() > 8:
        return value > c
    k = max(c.bit_length(), 4)
    rest = above(value[:4], c) if k == 4 else \
        value[k - 1] & above(value[:k - 1], c - (1 << (k - 1)))
    return value[k:].any() | rest if k < n else rest
