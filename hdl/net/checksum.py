"""The Internet checksum (RFC 1071) in gateware: the 16-bit words of a W-octet beat added in
one cycle, a plain binary accumulator, and the end-around fold at the end.

A frame of up to 65535 octets has fewer than 2**15 words, so a 32-bit binary sum never
overflows and folding it twice gives the one's complement sum (0 only when every word is
0), exactly :func:`rnic.host.model.ipv4.ones_sum`.
"""

from amaranth.hdl import Cat, Mux, Value

__all__ = ["SUM_BITS", "beat_sum", "fold", "folds_to_ones"]

#: Width of a checksum accumulator.
SUM_BITS = 32


def beat_sum(data, keep, width):
    """The sum (plain binary) of the big-endian 16-bit words of one beat, octet ``j`` taken
    as zero where ``keep[j]`` is 0. Words start at even lanes: a beat starts at an even
    offset of the frame, and the checksummed parts of Ethernet frames (IPv4 header at 14,
    ICMP message at 34) start at even offsets too."""
    if width % 2:
        raise ValueError(f"width must be even, not {width}")
    octets = [Mux(keep[j], data[8 * j:8 * j + 8], 0) for j in range(width)]
    words = [Cat(octets[2 * k + 1], octets[2 * k]) for k in range(width // 2)]
    return _tree(words)


def _tree(terms):
    while len(terms) > 1:
        pairs = [terms[k] + terms[k + 1] for k in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            pairs.append(terms[-1])
        terms = pairs
    return terms[0]


def fold(total):
    """The 16-bit one's complement sum of a binary sum below 2**32 (two end-around folds)."""
    total = Value.cast(total)
    once = total[:16] + total[16:32]
    twice = once[:16] + once[16]
    return twice[:16]


def folds_to_ones(total):
    """``fold(total) == 0xFFFF`` (a checksum that verifies) without an adder.

    With ``lo``, ``hi`` the halves of ``total``: the first fold ``lo + hi`` is at most
    0x1FFFE, and the second fold gives 0xFFFF exactly when ``lo + hi`` is 0xFFFF
    (``hi == ~lo``) or 0x1FFFE (both halves 0xFFFF)."""
    total = Value.cast(total)
    lo, hi = total[:16], total[16:32]
    return (hi == ~lo) | ((lo == 0xFFFF) & (hi == 0xFFFF))
