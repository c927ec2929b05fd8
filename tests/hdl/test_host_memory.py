# amaranth: UnusedElaboratable=no
"""HostMemory (hdl/top/host_memory.py): the core's random write and read bursts (random
strobes, back-pressure) on one half of the memory while the host reads and writes words of
the other half through HMEM_ADDR/HMEM_DATA, then each reads what the other wrote: every
octet as a bytearray model says, every core write answered once, no host access lost."""

import random

import pytest
from amaranth.sim import Simulator

from rnic.hdl.axi import RESP_OKAY, RESP_SLVERR
from rnic.hdl.top.host_memory import HostMemory
from rnic.host.spec.board import HMEM_ADDR, HMEM_DATA, HMEM_SIZE
from tests.hdl.axi_master import read_burst, write_burst

OCTETS = 512


class TB:
    """The core's bursts and the host's register accesses on a HostMemory of width ``w``."""

    def __init__(self, w, seed):
        self.w = w
        self.rng = random.Random(seed)
        self.dut = HostMemory(width=w, octets=OCTETS, addr_width=16)
        self.memory = bytearray(OCTETS)
        self.responses = 0

    # -- the core
    async def core_write(self, ctx, addr, data, strobes):
        W = self.w
        beats = [data[k:k + W] for k in range(0, len(data), W)]
        await write_burst(ctx, self.dut.w, addr=addr, beats=beats, strobes=strobes,
                          rng=self.rng, p_valid=0.8)
        for k, beat in enumerate(beats):
            for lane in range(W):
                if strobes[k] >> lane & 1:
                    self.memory[addr + k * W + lane] = beat[lane]

    async def core_read(self, ctx, addr, beats):
        return await read_burst(ctx, self.dut.r, addr=addr, beats=beats, width=self.w,
                                rng=self.rng)

    async def core_responses(self, ctx):
        while True:
            ctx.set(self.dut.w.bready, self.rng.random() < 0.6)
            _, _, bv, br, resp = await ctx.tick().sample(self.dut.w.bvalid, self.dut.w.bready,
                                                         self.dut.w.bresp)
            if bv and br:
                assert resp == RESP_OKAY
                self.responses += 1

    async def core(self, ctx, low, high, rounds):
        """Random bursts inside ``low .. high``; the reads checked against the model."""
        W, rng = self.w, self.rng
        writes = 0
        for _ in range(rounds):
            beats = rng.randint(1, 6)
            addr = rng.randrange(low, high - beats * W + 1, W)
            if rng.random() < 0.5:
                data = rng.randbytes(beats * W)
                await self.core_write(ctx, addr, data, [rng.getrandbits(W) | 1
                                                        for _ in range(beats)])
                writes += 1
            else:
                got = await self.core_read(ctx, addr, beats)
                assert got == bytes(self.memory[addr:addr + beats * W]), hex(addr)
        return writes

    # -- the host
    async def host_write(self, ctx, offset, value):
        s = self.dut.s_axil
        ctx.set(s.awaddr, offset)
        ctx.set(s.wdata, value)
        ctx.set(s.awvalid, 1)
        ctx.set(s.wvalid, 1)
        await ctx.tick().until(s.awready)
        ctx.set(s.awvalid, 0)
        ctx.set(s.wvalid, 0)
        ctx.set(s.bready, 1)
        resp, = await ctx.tick().sample(s.bresp).until(s.bvalid)
        ctx.set(s.bready, 0)
        return resp

    async def host_read(self, ctx, offset):
        s = self.dut.s_axil
        ctx.set(s.araddr, offset)
        ctx.set(s.arvalid, 1)
        await ctx.tick().until(s.arready)
        ctx.set(s.arvalid, 0)
        ctx.set(s.rready, 1)
        data, resp = await ctx.tick().sample(s.rdata, s.rresp).until(s.rvalid)
        ctx.set(s.rready, 0)
        return data, resp

    async def host(self, ctx, low, high, rounds):
        """Runs of consecutive words inside ``low .. high`` written and read back."""
        rng = self.rng
        for _ in range(rounds):
            words = rng.randint(1, 5)
            addr = rng.randrange(low, high - 4 * words + 1, 4)
            assert await self.host_write(ctx, HMEM_ADDR, addr) == RESP_OKAY
            if rng.random() < 0.5:
                for k in range(words):
                    value = rng.getrandbits(32)
                    assert await self.host_write(ctx, HMEM_DATA, value) == RESP_OKAY
                    self.memory[addr + 4 * k:addr + 4 * k + 4] = value.to_bytes(4, "little")
            else:
                for k in range(words):
                    data, resp = await self.host_read(ctx, HMEM_DATA)
                    assert resp == RESP_OKAY
                    assert data.to_bytes(4, "little") == self.memory[addr + 4 * k:][:4]
            assert await self.host_read(ctx, HMEM_ADDR) == ((addr + 4 * words) % OCTETS, RESP_OKAY)


@pytest.mark.parametrize("w", [4, 8])
def test_core_and_host_share_the_memory(w):
    tb = TB(w, seed=w)
    half = OCTETS // 2
    done = {}

    async def core(ctx):
        done["core"] = await tb.core(ctx, 0, half, 60)

    async def host(ctx):
        assert await tb.host_read(ctx, HMEM_SIZE) == (OCTETS, RESP_OKAY)
        assert (await tb.host_read(ctx, 0xC))[1] == RESP_SLVERR
        assert await tb.host_write(ctx, 0x0, 1) == RESP_SLVERR
        await tb.host(ctx, half, OCTETS, 40)
        done["host"] = True

    async def crossed(ctx):
        while len(done) < 2:
            await ctx.tick()
        await ctx.tick().repeat(20)                 # the last responses
        assert tb.responses == done["core"]
        # each side reads what the other wrote
        got = await tb.core_read(ctx, half, half // w)
        assert got == bytes(tb.memory[half:])
        await tb.host(ctx, 0, half, 10)

    sim = Simulator(tb.dut)
    sim.add_clock(1e-8)
    sim.add_testbench(core)
    sim.add_testbench(host)
    sim.add_testbench(tb.core_responses, background=True)
    sim.add_testbench(crossed)
    sim.run()


def test_parameters_checked():
    with pytest.raises(ValueError, match="octets must be a power of 2"):
        HostMemory(width=4, octets=1000)
    with pytest.raises(ValueError, match="addr_width"):
        HostMemory(width=4, octets=1 << 20, addr_width=16)
