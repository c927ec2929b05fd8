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
    with a constant as a carry chain, two COMB cells per two bits, however many compares
    share the value; here the low four bits are compared by equality terms (one LUT4 for
    any constant) and the high bits by an OR or one compare per distinct high part, which
    Yosys shares among the constants (a thermometer mask of 52 octets of a 7-bit length
    was 129 CCU2C, it is about 80 LUT4)."""
    value = value.as_unsigned()
    n = len(value)
    if c < 0:
        return Const(1, 1)
    if c >= (1 << n) - 1:
        return Const(0, 1)
    low = min(4, n)
    lo, lo_c, hi_c = value[:low], c & ((1 << low) - 1), c >> low
    lo_gt = Cat(*(lo == v for v in range(lo_c + 1, 1 << low))).any()
    if n == low:
        return lo_gt
    hi = value[low:]
    if hi_c == 0:
        return hi.any() | lo_gt
    hi_gt = Cat(*(hi == v for v in range(hi_c + 1, 1 << len(hi)))).any() if len(hi) <= 4 \
        else hi > hi_c
    return hi_gt | ((hi == hi_c) & lo_gt)
