"""Layouts of the ports between the ARP, IPv4 and ICMP blocks (above the MAC)."""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import Out

from .layouts import RxDrop

__all__ = ["Route", "ArpBinding", "ArpWrite", "arp_write_layout", "DropEvent"]


class Route(enum.Enum, shape=unsigned(2)):
    """Where the receive classifier sends a frame."""
    DROP = 0
    ARP = 1
    ECHO = 2
    TCP = 3


class ArpBinding(data.StructLayout):
    """An IPv4 address and the MAC address it maps to (both big-endian: the first octet on
    the wire in the top bits)."""

    def __init__(self):
        super().__init__({"ip": unsigned(32), "mac": unsigned(48)})


class ArpWrite(data.StructLayout):
    """A write of one ARP cache slot from the host: slot ``index`` gets ``ip`` -> ``mac``,
    ``static`` (never replaced nor updated by learning) or learned; ``valid`` 0 frees it.

    Parameters
    ----------
    entries : int
        Slots of the cache.
    """

    def __init__(self, *, entries):
        super().__init__({
            "index": unsigned(max(1, (entries - 1).bit_length())),
            "valid": unsigned(1),
            "static": unsigned(1),
            "ip": unsigned(32),
            "mac": unsigned(48),
        })


def arp_write_layout(entries):
    """:class:`ArpWrite` for ``entries`` slots."""
    return ArpWrite(entries=entries)


#: A counter event: ``valid`` high for one cycle per dropped frame, ``reason`` the
#: :class:`~rnic.hdl.net.layouts.RxDrop` it is counted as (never stalls, unlike a stream).
DropEvent = wiring.Signature({"valid": Out(1), "reason": Out(RxDrop)})
