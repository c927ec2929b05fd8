# amaranth: UnusedElaboratable=no
"""AXI4LiteSplit (rnic.hdl.axi) in Amaranth's simulator: random reads and writes from a
master through one split (or two, chained as on a board top with host memory) to register
slaves with random latencies, some holding ready high while idle, against a model."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from rnic.hdl.axi import RESP_OKAY, RESP_SLVERR, AXI4LiteSplit


class SlaveModel:
    """A register slave on an AXI4-Lite bus: ``words`` words, SLVERR beyond them; ``eager``
    holds awready/wready/arready high while idle (as AXI allows), else raises them a random
    while after valid. Answers after 0..``delay`` cycles."""

    def __init__(self, bus, *, words, eager, rng, delay=3):
        self.bus, self.words, self.eager, self.rng, self.delay = bus, words, eager, rng, delay
        self.mem = {}

    def _ready(self, ctx, valid):
        return 1 if self.eager else int(bool(ctx.get(valid)) and self.rng.random() < 0.5)

    async def _wait(self, ctx):
        await ctx.tick().repeat(self.rng.randint(1, self.delay + 1))

    async def reads(self, ctx):
        bus = self.bus
        while True:
            ctx.set(bus.arready, self._ready(ctx, bus.arvalid))
            _, _, valid, ready, addr = await ctx.tick().sample(bus.arvalid, bus.arready,
                                                               bus.araddr)
            if not (valid and ready):
                continue
            ctx.set(bus.arready, 0)
            await self._wait(ctx)
            word = addr >> 2
            ctx.set(bus.rdata, self.mem.get(word, 0))
            ctx.set(bus.rresp, RESP_OKAY if word < self.words else RESP_SLVERR)
            ctx.set(bus.rvalid, 1)
            await ctx.tick().until(bus.rready)
            ctx.set(bus.rvalid, 0)

    async def writes(self, ctx):
        bus = self.bus
        while True:
            addr = data = None
            while addr is None or data is None:
                ctx.set(bus.awready, int(addr is None) & self._ready(ctx, bus.awvalid))
                ctx.set(bus.wready, int(data is None) & self._ready(ctx, bus.wvalid))
                _, _, awv, awr, awaddr, wv, wr, wdata = await ctx.tick().sample(
                    bus.awvalid, bus.awready, bus.awaddr, bus.wvalid, bus.wready, bus.wdata)
                if awv and awr:
                    addr = awaddr
                if wv and wr:
                    data = wdata
            ctx.set(bus.awready, 0)
            ctx.set(bus.wready, 0)
            await self._wait(ctx)
            word = addr >> 2
            if word < self.words:
                self.mem[word] = data
            ctx.set(bus.bresp, RESP_OKAY if word < self.words else RESP_SLVERR)
            ctx.set(bus.bvalid, 1)
            await ctx.tick().until(bus.bready)
            ctx.set(bus.bvalid, 0)


async def until(ctx, condition, *signals, limit=200):
    """The values of ``signals`` at the clock edge where ``condition`` holds, within
    ``limit`` cycles (a lost transaction fails the test instead of hanging it)."""
    for _ in range(limit):
        _, _, *values, hit = await ctx.tick().sample(*signals, condition)
        if hit:
            return values
    raise AssertionError(f"no handshake within {limit} cycles: a transaction was lost")


class TB:
    """``splits``: the address widths of the chained splits, outermost first; the slaves are
    the leaves (the last split's two, and each earlier split's other side)."""

    def __init__(self, *, chained, eager, seed):
        self.rng = random.Random(seed)
        self.m = m = Module()
        if chained:
            m.submodules.outer = outer = AXI4LiteSplit(addr_width=14, select_bit=13)
            m.submodules.inner = inner = AXI4LiteSplit(addr_width=13, select_bit=12)
            wiring.connect(m, outer.m0, inner.s_axil)
            self.bus = outer.s_axil
            # (base, slave bus, address bits)
            leaves = [(0x0000, inner.m0, 12), (0x1000, inner.m1, 12), (0x2000, outer.m1, 13)]
        else:
            m.submodules.split = split = AXI4LiteSplit(addr_width=13, select_bit=12)
            self.bus = split.s_axil
            leaves = [(0x0000, split.m0, 12), (0x1000, split.m1, 12)]
        self.slaves = [(base, bits, SlaveModel(bus, words=64, eager=eager[i % len(eager)],
                                               rng=self.rng))
                       for i, (base, bus, bits) in enumerate(leaves)]
        self.span = leaves[-1][0] + (1 << leaves[-1][2])
        self.model = {}                          # address -> word
        self.checked = 0

    def _slave(self, addr):
        for base, bits, slave in self.slaves:
            if base <= addr < base + (1 << bits):
                return slave, addr - base
        raise AssertionError(addr)

    async def master(self, ctx, transactions):
        bus, rng = self.bus, self.rng
        for _ in range(transactions):
            # mostly the slaves' first words (so that reads see writes), sometimes beyond
            base, bits, _ = rng.choice(self.slaves)
            offset = 4 * rng.randrange(80) if rng.random() < 0.9 else rng.randrange(1 << bits) & ~3
            addr = base + offset
            in_range = offset < 4 * 64
            if rng.random() < 0.5:
                data = rng.getrandbits(32)
                ctx.set(bus.awaddr, addr)
                ctx.set(bus.wdata, data)
                ctx.set(bus.wstrb, 0xF)
                ctx.set(bus.awvalid, 1)
                ctx.set(bus.wvalid, 1)
                await until(ctx, bus.awready & bus.wready)
                ctx.set(bus.awvalid, 0)
                ctx.set(bus.wvalid, 0)
                ctx.set(bus.bready, 1)
                resp, = await until(ctx, bus.bvalid, bus.bresp)
                ctx.set(bus.bready, 0)
                assert resp == (RESP_OKAY if in_range else RESP_SLVERR), hex(addr)
                if in_range:
                    self.model[addr] = data
            else:
                ctx.set(bus.araddr, addr)
                ctx.set(bus.arvalid, 1)
                await until(ctx, bus.arready)
                ctx.set(bus.arvalid, 0)
                await ctx.tick().repeat(rng.randint(1, 3))      # the master not ready at once
                ctx.set(bus.rready, 1)
                data, resp = await until(ctx, bus.rvalid, bus.rdata, bus.rresp)
                ctx.set(bus.rready, 0)
                assert resp == (RESP_OKAY if in_range else RESP_SLVERR), hex(addr)
                if in_range:
                    assert data == self.model.get(addr, 0), hex(addr)
                    self.checked += 1
            await ctx.tick().repeat(rng.randint(1, 3))

    def run(self, transactions=300):
        sim = Simulator(self.m)
        sim.add_clock(1e-8)
        for _, _, slave in self.slaves:
            sim.add_testbench(slave.reads, background=True)
            sim.add_testbench(slave.writes, background=True)

        async def bench(ctx):
            await self.master(ctx, transactions)
        sim.add_testbench(bench)
        sim.run()
        # every write reached its slave and no other
        for base, bits, slave in self.slaves:
            want = {(a - base) >> 2: d for a, d in self.model.items()
                    if base <= a < base + (1 << bits)}
            assert slave.mem == want, hex(base)


@pytest.mark.parametrize("chained", [False, True])
@pytest.mark.parametrize("eager", [(False,), (True,), (True, False)])
def test_split_routes_every_transaction(chained, eager):
    """Each read and write reaches the slave its address selects, once, with the address bits
    below the select bit; the answer comes back to the master; slaves that hold ready high
    while idle (another split, the host memory's window) lose nothing."""
    tb = TB(chained=chained, eager=eager, seed=5040 + 10 * chained + len(eager) + eager[0])
    tb.run()
    assert tb.checked > 50


def test_parameters_checked():
    with pytest.raises(ValueError, match="select_bit must be an integer 2..12, not 13"):
        AXI4LiteSplit(addr_width=13, select_bit=13)  # noqa
