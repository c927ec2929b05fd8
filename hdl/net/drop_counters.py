"""Counters of the network layer's dropped frames, one per drop reason."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .l3_layouts import DropEvent
from .layouts import RX_COUNTERS, RxDrop

__all__ = ["DropCounters", "NETWORK_DROPS"]

#: The reasons the network layer decides (every :class:`RxDrop` the MAC's counters leave out),
#: in value order: ``ETHERTYPE`` .. ``ICMP_OTHER``.
NETWORK_DROPS = tuple(reason for reason in RxDrop if reason not in RX_COUNTERS)


class DropCounters(wiring.Component):
    """One 32-bit counter per drop reason of ``drop`` events (``NetworkLayer.drop``).

    Parameters
    ----------
    reasons : tuple of RxDrop
        The reasons counted, in the order of ``counts`` (default :data:`NETWORK_DROPS`).

    Ports
    -----
    drop : In(DropEvent)
        ``valid`` for one cycle per dropped frame with its ``reason``; a reason not in
        ``reasons`` is not counted.
    counts : Out(ArrayLayout(32, len(reasons)))
        ``counts[k]`` the events of ``reasons[k]``, wrapping at 2**32, zeroed by the reset.

    Latency: a count includes an event one cycle after it. Throughput: one event a cycle.
    """

    def __init__(self, *, reasons=NETWORK_DROPS):
        reasons = tuple(reasons)
        if not reasons or any(not isinstance(r, RxDrop) for r in reasons) \
                or len(set(reasons)) != len(reasons):
            raise ValueError(f"reasons must be distinct RxDrop members, not {reasons!r}")
        self._reasons = reasons
        super().__init__({
            "drop": In(DropEvent),
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
