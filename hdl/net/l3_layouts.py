"""Layouts of the ports between the ARP, IPv4 and ICMP blocks (above the MAC)."""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import Out

from .layouts import FrameBeat, RxDrop, TxDrop

__all__ = ["Route", "ArpBinding", "ArpWrite", "arp_write_layout", "DropEvent", "TxDropEvent",
           "Ipv4TxBeat"]


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


#: A send-path counter event: ``valid`` high for one cycle per dropped packet, ``reason``
#: the :class:`~rnic.hdl.net.layouts.TxDrop` it is counted as.
TxDropEvent = wiring.Signature({"valid": Out(1), "reason": Out(TxDrop)})


class Ipv4TxBeat(data.StructLayout):
    """One beat of a packet for the IPv4 send path (:class:`~rnic.hdl.net.ipv4_tx.Ipv4Tx`).

    The beats carry the whole Ethernet frame as the layer above lays it out: octets 0 .. 33
    (Ethernet and IPv4 headers) are room that the send path fills in, the IP payload (a TCP
    segment) starts at octet 34; ``data``, ``n``, ``first`` and ``last`` as in
    :class:`~rnic.hdl.net.layouts.FrameBeat`. On the ``first`` beat: ``dst`` the
    destination address (big-endian), ``proto`` the IP protocol and ``length`` the IP
    payload's octets (the frame has ``34 + length`` of them).

    Parameters
    ----------
    width : int
        Octets per beat.
    """

    def __init__(self, *, width):
        self.width = width
        frame = {name: field.shape for name, field in FrameBeat(width=width)}
        super().__init__({**frame, "dst": unsigned(32), "proto": unsigned(8),
                          "length": unsigned(16)})
