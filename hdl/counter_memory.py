"""Event counters kept in a block RAM, read one at a time. See :class:`CounterMemory`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from rnic.host.spec.regmap import REGMAP

__all__ = ["CounterMemory", "register_word", "count_registers"]


def register_word(name, words):
    """The word of counter register ``name`` in a counter memory of ``words`` words: its
    word address modulo ``words``."""
    return (REGMAP[name].addr >> 2) % words


def count_registers(m, counters, words, events, regs):
    """Each event of ``events`` (``{counter register name: event}``) into its word of the
    counter memory ``counters`` (of ``words`` words; no two registers may share a word),
    and the memory's read data into each register's COUNT field of ``regs`` (the register
    bank's block)."""
    assert len({register_word(name, words) for name in events}) == len(events)
    for name, event in events.items():
        m.d.comb += [counters.events[register_word(name, words)].eq(event),
                     getattr(regs, name.lower()).count.eq(counters.data)]


class CounterMemory(wiring.Component):
    """``counters`` 32-bit event counters in one block RAM, for a register bank's read-only
    counters: each counter costs a few pending bits in registers, not 32 flip-flops, an
    adder and 32 inputs of the bank's read multiplexer.

    Parameters
    ----------
    counters : int
        Counters (2 .. 512).

    Ports
    -----
    events : In(counters)
        Bit ``k``: one event of counter ``k`` in this cycle (any number of counters at once).
        The events pass a register first (the event logic of the blocks around is not in
        series with the sweep's adder and multiplexer).
    addr : In(range(counters)), data : Out(32)
        A read port: ``data`` is counter ``addr`` as it was in the memory in the cycle before
        (the count of the events up to its last sweep; read the next cycle).
    clear : In(1)
        Zero every counter: the events from the cycle after ``clear`` on are counted. The
        next sweep zeroes the memory (``counters`` cycles); until a counter's word is
        zeroed it reads 0. The ``sync`` reset clears them the same way.

    Latency and throughput
    ----------------------
    Every counter has ``bits_for(counters)`` pending bits, its events since its last
    sweep; a sweep visits one counter a cycle, round robin: it reads the counter's word
    and takes its pending count (the events of that cycle included), and writes their sum
    back in the next cycle. A counter so shows an event at most ``counters + 3`` cycles
    after it. Every counter takes one event a cycle; the counts wrap at ``2**32``.
    """

    def __init__(self, *, counters):
        if isinstance(counters, bool) or not isinstance(counters, int) or not 2 <= counters <= 512:
            raise ValueError(f"counters must be an integer in 2 .. 512, not {counters!r}")
        self.counters = counters
        super().__init__({"events": In(counters), "addr": In(range(counters)), "data": Out(32),
                          "clear": In(1)})

    def elaborate(self, platform):
        m = Module()
        N = self.counters
        # (block RAM: one word per counter, whatever its depth; a sweep port and a read port)
        m.submodules.memory = mem = Memory(shape=32, depth=N, init=[])
        mem.attrs["ram_style"] = "block"
        sweep_rd = mem.read_port()
        bus_rd = mem.read_port()
        wr = mem.write_port()
        # a counter whose word the clearing sweep has not zeroed yet reads 0
        stale = Signal(N, init=(1 << N) - 1)
        # (the stale bit as in the cycle of the read, as the word read is: a word zeroed in
        # that very cycle still reads its old value, and must read 0)
        read_stale = Signal()
        m.d.sync += read_stale.eq(self.clear | stale.bit_select(self.addr, 1))
        m.d.comb += [bus_rd.addr.eq(self.addr),
                     self.data.eq(Mux(read_stale, 0, bus_rd.data))]

        # Pending counts: between two sweeps of a counter pass N cycles, N events at most.
        pending = [Signal(bits_for(N), name=f"pending{k}") for k in range(N)]
        events = Signal(N)
        m.d.sync += events.eq(Mux(self.clear, 0, self.events))
        at = Signal(range(N))               # the counter this cycle's sweep reads
        taken = Signal(bits_for(N))         # its pending count, with this cycle's event
        m.d.sync += at.eq(Mux(at == N - 1, 0, at + 1))
        m.d.comb += sweep_rd.addr.eq(at)
        with m.Switch(at):
            for k in range(N):
                with m.Case(k):
                    m.d.comb += taken.eq(pending[k] + events[k])
        for k in range(N):
            with m.If(at == k):
                m.d.sync += pending[k].eq(0)
            with m.Else():
                m.d.sync += pending[k].eq(pending[k] + events[k])

        # the write-back, a cycle later: zero (clearing) or the word read, plus the count
        # (the word is written N cycles before it is read again: no read of a pending write)
        back_at = Signal(range(N))
        back_add = Signal(bits_for(N))
        back_en = Signal()
        m.d.sync += [back_at.eq(at), back_add.eq(taken), back_en.eq(1)]
        clearing = Signal(init=1)           # a sweep that zeroes the words it writes
        clear_left = Signal(range(N + 1), init=N)
        word = Mux(clearing, 0, sweep_rd.data)
        m.d.comb += [wr.addr.eq(back_at), wr.data.eq(word + back_add), wr.en.eq(back_en)]
        with m.If(back_en & clearing):
            m.d.sync += stale.bit_select(back_at, 1).eq(0)
        with m.If(self.clear):
            m.d.sync += [clearing.eq(1), clear_left.eq(N), stale.eq((1 << N) - 1)]
            m.d.sync += [p.eq(0) for p in pending]
            m.d.sync += back_en.eq(0)
        with m.Elif(back_en & clearing):
            m.d.sync += clear_left.eq(clear_left - 1)
            with m.If(clear_left == 1):
                m.d.sync += clearing.eq(0)
        return m
