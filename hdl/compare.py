"""Comparisons of wide values shaped for timing. See :func:`wide_less`."""

__all__ = ["wide_less"]


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
