"""Counters of the network layer's dropped frames and packets, one per drop reason."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .l3_layouts import DropEvent, TxDropEvent
from .layouts import RX_COUNTERS, RxDrop, TxDrop

__all__ = ["DropCounters", "NETWORK_DROPS"]

#: The reasons the network layer decides (every :class:`RxDrop` the MAC's counters leave out),
#: in value order: ``ETHERTYPE`` .. ``ICMP_OTHER``.
NETWORK_DROPS = tuple(reason for reason in RxDrop if reason not in RX_COUNTERS)


class DropCounters(wiring.Component):
    """One 32-bit counter per drop reason of ``drop`` events (``NetworkLayer.drop``, or
    ``NetworkLayer.tx_drop`` with :class:`~rnic.hdl.net.layouts.TxDrop` reasons).

    Parameters
    ----------
    reasons : tuple of RxDrop or of TxDrop
        The reasons counted, members of one enumeration, in the order of ``counts``
        (default :data:`NETWORK_DROPS`).

    Ports
    -----
    drop : In(Signature(valid, reason))
        :data:`~rnic.hdl.net.l3_layouts.DropEvent` or
        :data:`~rnic.hdl.net.l3_layouts.TxDropEvent` (by the reasons' enumeration):
        ``valid`` for one cycle per dropped frame with its ``reason``; a reason not in
        ``reasons`` is not counted.
    counts : Out(ArrayLayout(32, len(reasons)))
        ``counts[k]`` the events of ``reasons[k]``, wrapping at 2**32, zeroed by the reset.

    Latency: a count includes an event one cycle after it. Throughput: one event a cycle.
    """

    def __init__(self, *, reasons=NETWORK_DROPS):
        reasons = tuple(reasons)
        kind = type(reasons[0]) if reasons else None
        if kind not in (RxDrop, TxDrop) or any(type(r) is not kind for r in reasons) \
                or len(set(reasons)) != len(reasons):
            raise ValueError(f"reasons must be distinct members of RxDrop or of TxDrop, "
                             f"not {reasons!r}")
        self._reasons = reasons
        event = DropEvent if kind is RxDrop else TxDropEvent
        super().__init__({
            "drop": In(event),
            "counts": Out(data.ArrayLayout(32, len(reasons))),
        })

    @property
    def reasons(self):
        return self._reasons

    def elaborate(self, platform):
        m = Module()
        for k, reason in enumerate(self._reasons):
            with m.If(self.drop.valid & (self.drop.reason == reason)):
                m.d.sync += self.counts[k].eq(self.counts[k] + 1)
        return m
