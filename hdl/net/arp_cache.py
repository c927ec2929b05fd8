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


def _first_of(m, hits, values, count, name):
    """The value of the lowest set bit of ``hits`` (0 if none): the lowest bit isolated,
    then an AND-OR of the values (a chain of multiplexers by index takes several times the
    LUTs)."""
    first = Signal(count, name=f"{name}_first")
    m.d.comb += first.eq(hits & ~(hits - 1))
    value = 0
    for k in range(count):
        value = value | Mux(first[k], values[k], 0)
    return value


class ArpCache(wiring.Component):
    """ARP cache of ``entries`` slots, the gateware of
    :class:`rnic.host.model.arp.ArpCache`.

    Learning (``learn``): an address already in a slot updates that slot's MAC unless it is
    static; a new address takes the lowest free slot, or when none is free the first slot
    that is not static at or after the round-robin pointer, which then moves one past it;
    when every slot is static nothing is learned. The host (``write``) sets any slot
    directly (the register bank's static-entry port; to match the model's
    ``set_static``, the host picks the slot the model would); a write while a learned pair
    is being entered goes first.

    Parameters
    ----------
    entries : int
        Slots, 1 to 64.

    Ports
    -----
    learn : In(stream.Signature(ArpBinding))
        A pair to learn; one at a time (``ready`` is low while a pair is being entered and
        while ``write`` is valid, which goes first).
    write : In(stream.Signature(ArpWrite(entries=entries)))
        Slot ``index`` gets ``ip``/``mac``/``static``, or is freed when ``valid`` is 0;
        always ready.
    lookup_ip : In(32)
    lookup_done : Out(1)
    lookup_hit : Out(1)
    lookup_mac : Out(48)
        The register window's lookup: ``lookup_hit`` and ``lookup_mac`` answer
        ``lookup_ip`` while ``lookup_done``, at most ``2 * entries + 1`` cycles after it
        changed; they show the slots as they were up to ``2 * entries`` cycles before
        (one slot searched per cycle, round robin).
    tx_lookup_ip : In(32)
    tx_lookup_hit : Out(1)
    tx_lookup_mac : Out(48)
        A second lookup (the send path's), one cycle later: ``tx_lookup_hit`` and
        ``tx_lookup_mac`` answer the ``tx_lookup_ip`` of the cycle before (the slots'
        matches are registered; timing).

    Latency: a written entry is in the slots in the next cycle, a learned one 3 cycles
    after it was taken (more when host writes come between); the send path's lookup sees
    either a cycle later. Throughput: one pair learned every 3 cycles.
    """

    def __init__(self, *, entries=8):
        self._entries = check_entries(entries)
        super().__init__({
            "learn": In(stream.Signature(ArpBinding())),
            "write": In(stream.Signature(ArpWrite(entries=entries))),
            "lookup_ip": In(32),
            "lookup_done": Out(1),
            "lookup_hit": Out(1),
            "lookup_mac": Out(48),
            "tx_lookup_ip": In(32),
            "tx_lookup_hit": Out(1),
            "tx_lookup_mac": Out(48),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._entries
        valid = Signal(n)
        static = Signal(n)
        ips = Array(Signal(32, name=f"ip{k}") for k in range(n))
        macs = Array(Signal(48, name=f"mac{k}") for k in range(n))
        pointer = Signal(range(max(n, 2)))

        self._window_lookup(m, valid, ips, macs)
        tx_hits = Signal(n)
        m.d.sync += tx_hits.eq(Cat(*(valid[k] & (ips[k] == self.tx_lookup_ip)
                                     for k in range(n))))
        m.d.comb += [self.tx_lookup_hit.eq(tx_hits.any()),
                     self.tx_lookup_mac.eq(_first_of(m, tx_hits, macs, n, "tx_lookup"))]

        # Learning in three steps (timing: the slot search and the slots' write enables are
        # each a cycle's logic): take the pair; choose its slot from the slots as they are;
        # enter it. A host write in the cycle of a choice or of its entry changes the slots
        # it was chosen from: the choice is made again after it.
        pair = Signal(ArpBinding())
        pending = Signal()
        chosen = Signal()
        slot = Signal(range(max(n, 2)))
        enter = Signal()
        move = Signal()
        new_pointer = Signal.like(pointer)
        m.d.comb += [self.write.ready.eq(1),
                     self.learn.ready.eq(~pending & ~self.write.valid)]
        with m.If(self.learn.valid & self.learn.ready):
            m.d.sync += [pair.eq(self.learn.payload), pending.eq(1), chosen.eq(0)]
        with m.If(self.write.valid):
            w = self.write.payload
            m.d.sync += [valid.bit_select(w.index, 1).eq(w.valid),
                         static.bit_select(w.index, 1).eq(w.static & w.valid),
                         ips[w.index].eq(w.ip), macs[w.index].eq(w.mac), chosen.eq(0)]
        with m.Elif(pending & ~chosen):
            self._choose(m, pair, valid, static, ips, pointer, slot, enter, move, new_pointer)
            m.d.sync += chosen.eq(1)
        with m.Elif(pending):
            m.d.sync += pending.eq(0)
            with m.If(move):
                m.d.sync += pointer.eq(new_pointer)
            with m.If(enter):
                m.d.sync += [valid.bit_select(slot, 1).eq(1), static.bit_select(slot, 1).eq(0),
                             ips[slot].eq(pair.ip), macs[slot].eq(pair.mac)]
        return m

    def _window_lookup(self, m, valid, ips, macs):
        """The register window's lookup: passes over the slots, one slot a cycle from slot
        0, each for the address ``lookup_ip`` had at its start; the first hit of a pass is
        kept, and its end publishes the result. (Area: searching every slot at once takes a
        compare per slot and an AND-OR of all the MACs; this is one IP and one MAC
        multiplexer, one compare.)"""
        n = self._entries
        scan = Signal(range(max(n, 2)))
        scan_ip = Signal(32)
        scan_hit = Signal()
        scan_mac = Signal(48)
        done = Signal()                 # a pass has published (for ``done_ip``)
        done_ip = Signal(32)
        match = Signal()
        m.d.comb += [match.eq(valid.bit_select(scan, 1) & (ips[scan] == scan_ip)),
                     self.lookup_done.eq(done & (done_ip == self.lookup_ip))]
        with m.If(scan == n - 1):
            m.d.sync += [
                scan.eq(0), scan_ip.eq(self.lookup_ip), scan_hit.eq(0),
                self.lookup_hit.eq(scan_hit | match),
                self.lookup_mac.eq(Mux(scan_hit, scan_mac, Mux(match, macs[scan], 0))),
                done.eq(1), done_ip.eq(scan_ip),
            ]
        with m.Else():
            m.d.sync += scan.eq(scan + 1)
            with m.If(match & ~scan_hit):
                m.d.sync += [scan_hit.eq(1), scan_mac.eq(macs[scan])]

    def _choose(self, m, pair, valid, static, ips, pointer, slot, enter, move, new_pointer):
        """Register the slot ``pair`` goes to, whether it is entered, and the round-robin
        pointer's next value if it moves."""
        n = self._entries
        matches = Cat(*(valid[k] & (ips[k] == pair.ip) for k in range(n)))
        known, known_index = _lowest(matches, n)
        free, free_index = _lowest(~valid, n)
        after = Cat(*(~static[k] & (pointer <= k) for k in range(n)))
        late, late_index = _lowest(after, n)
        learned, learned_index = _lowest(~static, n)
        victim = Mux(late, late_index, learned_index)
        m.d.sync += [enter.eq(0), move.eq(0)]
        with m.If(known):
            m.d.sync += [slot.eq(known_index), enter.eq(~static.bit_select(known_index, 1))]
        with m.Elif(free):
            m.d.sync += [slot.eq(free_index), enter.eq(1)]
        with m.Elif(learned):
            m.d.sync += [slot.eq(victim), enter.eq(1), move.eq(1),
                         new_pointer.eq(Mux(victim == n - 1, 0, victim + 1))]
