"""The NIC's ARP cache: a few slots searched in parallel, filled by learning (round-robin
replacement that skips static entries) and by the host."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .l3_layouts import ArpBinding, ArpWrite

__all__ = ["ArpCache", "check_entries"]


def check_entries(entries):
    """``entries`` if it is a slot count between 1 and 64, else ValueError naming it."""
    if isinstance(entries, bool) or not isinstance(entries, int) or not 1 <= entries <= 64:
        raise ValueError(f"entries must be an int from 1 to 64, not {entries!r}")
    return entries


def _lowest(bits, count):
    """(any, index of the lowest set bit) of the ``count`` 1-bit values ``bits``."""
    index, found = 0, 0
    for k in reversed(range(count)):
        with_bit = bits[k]
        index = Mux(with_bit, k, index)
        found = with_bit | found
    return found, index


class ArpCache(wiring.Component):
    """ARP cache of ``entries`` slots, the gateware of
    :class:`rnic.host.model.arp.ArpCache`.

    Learning (``learn``): an address already in a slot updates that slot's MAC unless it is
    static; a new address takes the lowest free slot, or when none is free the first slot
    that is not static at or after the round-robin pointer, which then moves one past it;
    when every slot is static nothing is learned. The host (``write``) sets any slot
    directly (the register bank's static-entry port; to match the model's
    ``set_static``, the host picks the slot the model would). Lookups (``lookup_*``) are
    combinational.

    Parameters
    ----------
    entries : int
        Slots, 1 to 64.

    Ports
    -----
    learn : In(stream.Signature(ArpBinding))
        A pair to learn; taken in one cycle (``ready`` is low only while ``write`` is
        valid, which goes first).
    write : In(stream.Signature(ArpWrite(entries=entries)))
        Slot ``index`` gets ``ip``/``mac``/``static``, or is freed when ``valid`` is 0;
        always ready.
    lookup_ip : In(32)
    lookup_hit : Out(1)
    lookup_mac : Out(48)
        ``lookup_hit`` and ``lookup_mac`` for ``lookup_ip`` in the same cycle.

    Latency: a learned or written entry is seen by a lookup in the next cycle.
    """

    def __init__(self, *, entries=8):
        self._entries = check_entries(entries)
        super().__init__({
            "learn": In(stream.Signature(ArpBinding())),
            "write": In(stream.Signature(ArpWrite(entries=entries))),
            "lookup_ip": In(32),
            "lookup_hit": Out(1),
            "lookup_mac": Out(48),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._entries
        valid = Signal(n)
        static = Signal(n)
        ips = Array(Signal(32, name=f"ip{k}") for k in range(n))
        macs = Array(Signal(48, name=f"mac{k}") for k in range(n))
        pointer = Signal(range(max(n, 2)))

        hits = Cat(*(valid[k] & (ips[k] == self.lookup_ip) for k in range(n)))
        hit, hit_index = _lowest(hits, n)
        m.d.comb += [self.lookup_hit.eq(hit), self.lookup_mac.eq(macs[hit_index])]

        m.d.comb += [self.write.ready.eq(1), self.learn.ready.eq(~self.write.valid)]
        with m.If(self.write.valid):
            w = self.write.payload
            m.d.sync += [valid.bit_select(w.index, 1).eq(w.valid),
                         static.bit_select(w.index, 1).eq(w.static & w.valid),
                         ips[w.index].eq(w.ip), macs[w.index].eq(w.mac)]
        with m.Elif(self.learn.valid):
            self._learn(m, valid, static, ips, macs, pointer)
        return m

    def _learn(self, m, valid, static, ips, macs, pointer):
        n = self._entries
        pair = self.learn.payload
        matches = Cat(*(valid[k] & (ips[k] == pair.ip) for k in range(n)))
        known, known_index = _lowest(matches, n)
        free, free_index = _lowest(~valid, n)
        after = Cat(*(~static[k] & (pointer <= k) for k in range(n)))
        late, late_index = _lowest(after, n)
        learned, learned_index = _lowest(~static, n)
        victim = Mux(late, late_index, learned_index)

        slot = Signal(range(max(n, 2)))
        enter = Signal()
        with m.If(known):
            m.d.comb += [slot.eq(known_index), enter.eq(~static.bit_select(known_index, 1))]
        with m.Elif(free):
            m.d.comb += [slot.eq(free_index), enter.eq(1)]
        with m.Elif(learned):
            m.d.comb += [slot.eq(victim), enter.eq(1)]
            m.d.sync += pointer.eq(Mux(victim == n - 1, 0, victim + 1))
        with m.If(enter):
            m.d.sync += [valid.bit_select(slot, 1).eq(1), static.bit_select(slot, 1).eq(0),
                         ips[slot].eq(pair.ip), macs[slot].eq(pair.mac)]
