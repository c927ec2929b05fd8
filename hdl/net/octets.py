"""Helpers for the network-layer blocks: octets of a frame held in a register, big-endian
fields of them, and header capture from a W-octet beat stream.

A header register holds frame octet ``p`` in bits ``8p .. 8p+7`` (the order of the lanes of
a :class:`~rnic.hdl.net.layouts.FrameBeat`), so beat ``k`` of a frame fills octets
``k*W .. k*W+W-1`` and a beat of a frame built from a register is a plain word select.
Protocol fields are big-endian: :func:`field` reverses the octets.
"""

from amaranth.hdl import Cat, Const

__all__ = ["octet", "field", "octets_of", "capture", "frame_bits"]


def octet(head, p):
    """Octet ``p`` of the header register ``head``."""
    return head[8 * p:8 * p + 8]


def field(head, offset, length):
    """The big-endian field of ``length`` octets at ``offset`` of ``head``."""
    return Cat(*(octet(head, offset + length - 1 - k) for k in range(length)))


def octets_of(value, length):
    """The ``length`` octets of ``value`` in network order (most significant first), as a
    list of 8-bit values: ``value`` is big-endian, e.g. a MAC address ``int.from_bytes(mac,
    "big")`` or a constant."""
    if isinstance(value, int):
        value = Const(value, 8 * length)
    return [value[8 * (length - 1 - k):8 * (length - k)] for k in range(length)]


def frame_bits(octets):
    """One value holding ``octets`` (8-bit values, frame order) in the register order of
    this module: the first octet in the lowest bits."""
    return Cat(*octets)


def capture(m, head, octets, beat, index, width):
    """Latch the octets ``0 .. octets-1`` of a frame into ``head`` as its beats pass.

    ``beat`` is the beat accepted in this cycle (only its ``data`` is used, the caller
    qualifies the statement with the transfer), ``index`` the number of beats of the frame
    before it. Adds ``sync`` statements to the current ``m`` context.
    """
    for k in range((octets + width - 1) // width):
        with m.If(index == k):
            for lane in range(min(width, octets - k * width)):
                p = k * width + lane
                m.d.sync += octet(head, p).eq(beat.data[8 * lane:8 * lane + 8])
