# amaranth: UnusedElaboratable=no
"""The register bank (rnic.hdl.regbank) generated from rnic.host.spec.regmap.

(a) construction: parameter checks, the signature and the Verilog port names;
(b) Amaranth's Python simulator: a quick AXI4-Lite check of every access type and the timing;
(c) Verilator through rnic.sim.runner with cocotbext-axi's AxiLiteMaster (cocotb module cocotb_regbank.py),
    including a random run against rnic.host.driver.regs.BankModel.
"""

import pytest
from amaranth.lib import wiring
from amaranth.sim import Simulator

from rnic.hdl.axi import RESP_OKAY, RESP_SLVERR, AXI4LiteSignature
from rnic.hdl.regbank import RegisterBank, core_signature
from rnic.host.driver import regs
from rnic.host.spec.regmap import MAGIC, REGMAP, VERSION_MAJOR, VERSION_MINOR
from rnic.sim.runner import run, verilog

#: The whole map, Network block included (``network=0`` below: a core without one).
PARAMS = {"width": 8, "connections": 16, "stags": 64, "network": 1, "arp_entries": 8,
          "ird_depth": 16, "ord_depth": 8}


# -- (a) ---------------------------------------------------------------------------

@pytest.mark.parametrize("kw, exc, match", [
    ({"width": 12, "connections": 16}, ValueError, "width=12"),
    ({"width": 8, "connections": 0}, ValueError, "connections=0"),
    ({"width": 8, "connections": 1 << 16}, ValueError, "connections=65536"),
    ({"width": 8, "connections": 16, "stags": 0}, ValueError, "stags=0"),
    ({"width": 8, "connections": "16"}, ValueError, "connections='16'"),
    ({"width": True, "connections": 16}, ValueError, "width=True"),
])
def test_params_checked(kw, exc, match):
    with pytest.raises(exc, match=match):
        RegisterBank(**kw)


def test_positional_params_refused():
    with pytest.raises(TypeError):
        RegisterBank(8, 16)


def test_signature():
    bank = RegisterBank(**PARAMS)
    assert bank.signature.members["s_axil"].flow == wiring.In
    assert bank.signature.members["s_axil"].signature == AXI4LiteSignature(addr_width=12).flip()
    assert bank.signature.members["regs"].signature == core_signature(REGMAP)
    sig = core_signature()
    assert sig.members["ctrl"].signature.members["enable"].flow == wiring.Out
    assert sig.members["ctrl"].signature.members["soft_reset"].flow == wiring.Out
    assert sig.members["status"].signature.members["ready"].flow == wiring.In
    errs = sig.members["err_status"].signature.members
    assert errs["pending"].flow == wiring.Out and errs["pending_set"].flow == wiring.In
    assert "id" not in sig.members and "version" not in sig.members     # constants only
    assert "caps" not in sig.members
    with pytest.raises(ValueError):
        AXI4LiteSignature(addr_width=12, data_width=16)
    # the Python model of the bank has the same default STag table size
    assert RegisterBank(width=8, connections=4).stags == regs.BankModel(width=8, connections=4).params["stags"]


def test_verilog_port_names():
    text = verilog(RegisterBank, PARAMS)
    for port in ("input [11:0] s_axil__awaddr", "input s_axil__awvalid", "output s_axil__awready",
                 "input [31:0] s_axil__wdata", "input [3:0] s_axil__wstrb", "input s_axil__wvalid",
                 "output s_axil__wready", "output [1:0] s_axil__bresp", "output s_axil__bvalid",
                 "input s_axil__bready", "input [11:0] s_axil__araddr", "input s_axil__arvalid",
                 "output s_axil__arready", "output [31:0] s_axil__rdata", "output [1:0] s_axil__rresp",
                 "output s_axil__rvalid", "input s_axil__rready", "input [2:0] s_axil__awprot",
                 "output regs__ctrl__enable", "output regs__ctx_cmd__commit", "input regs__status__ready",
                 "output regs__err_status__pending", "input regs__err_status__pending_set",
                 "output [8:0] regs__ctx_tx__phase", "input [31:0] regs__rx_fpdus__count",
                 "input clk", "input rst"):
        assert port in text, port


# -- (b) ---------------------------------------------------------------------------

class _Axil:
    """Minimal AXI4-Lite master for amaranth.sim testbenches."""

    def __init__(self, ctx, bus):
        self.ctx, self.bus = ctx, bus

    async def write(self, addr, data, strb=0xF):
        ctx, bus = self.ctx, self.bus
        ctx.set(bus.awaddr, addr)
        ctx.set(bus.wdata, data)
        ctx.set(bus.wstrb, strb)
        ctx.set(bus.awvalid, 1)
        ctx.set(bus.wvalid, 1)
        ctx.set(bus.bready, 1)
        await ctx.tick().until(bus.awready & bus.wready)
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        waited = 0
        while not ctx.get(bus.bvalid):
            await ctx.tick()
            waited += 1
        resp = ctx.get(bus.bresp)
        await ctx.tick()
        ctx.set(bus.bready, 0)
        return resp, waited

    async def read(self, addr):
        ctx, bus = self.ctx, self.bus
        ctx.set(bus.araddr, addr)
        ctx.set(bus.arvalid, 1)
        ctx.set(bus.rready, 1)
        await ctx.tick().until(bus.arready)
        ctx.set(bus.arvalid, 0)
        data, resp = await ctx.tick().sample(bus.rdata, bus.rresp).until(bus.rvalid)
        ctx.set(bus.rready, 0)
        return data, resp


def test_amaranth_sim_quick():
    dut = RegisterBank(**PARAMS)
    regs_if = dut.regs
    seen = {}

    async def testbench(ctx):
        bus = _Axil(ctx, dut.s_axil)
        assert await bus.read(0x000) == (MAGIC, RESP_OKAY)
        assert await bus.read(0x004) == (8 << 16 | VERSION_MAJOR << 8 | VERSION_MINOR, RESP_OKAY)
        assert await bus.read(0x008) == (64 << 16 | 16, RESP_OKAY)
        assert await bus.read(regs.QUEUE_CAPS_ADDR) == (8 << 16 | 16, RESP_OKAY)
        # RW with strobes; bvalid is high in the third cycle after the handshake (waited 2
        # more edges after the first)
        resp, waited = await bus.write(regs.SCRATCH_ADDR, 0x11223344)
        assert (resp, waited) == (RESP_OKAY, 2)
        await bus.write(regs.SCRATCH_ADDR, 0xAABBCCDD, 0b1010)
        assert await bus.read(regs.SCRATCH_ADDR + 2) == (0xAA22CC44, RESP_OKAY)
        # RW output to the core
        await bus.write(regs.CTX_TX_ADDR, regs.encode("CTX_TX", markers=1, phase=0x1F0, mulpdu=0xBEEF))
        assert ctx.get(regs_if.ctx_tx.phase) == 0x1F0 and ctx.get(regs_if.ctx_tx.mulpdu) == 0xBEEF
        assert ctx.get(regs_if.ctx_tx.markers) == 1 and ctx.get(regs_if.ctx_tx.crc) == 0
        # RO from the core
        ctx.set(regs_if.rx_fpdus.count, 0xCAFEF00D)
        assert await bus.read(regs.RX_FPDUS_ADDR) == (0xCAFEF00D, RESP_OKAY)
        await bus.write(regs.RX_FPDUS_ADDR, 0)                   # ignored
        assert (await bus.read(regs.RX_FPDUS_ADDR))[0] == 0xCAFEF00D
        # pulse: one cycle, reads 0, CTRL.ENABLE is RW next to it
        await bus.write(regs.CTRL_ADDR, 0b011)
        await ctx.tick().repeat(3)
        assert seen["soft_reset"] == 1
        assert await bus.read(regs.CTRL_ADDR) == (1, RESP_OKAY)
        # W1C
        ctx.set(regs_if.err_status.pending_set, 1)
        await ctx.tick()
        ctx.set(regs_if.err_status.pending_set, 0)
        assert ctx.get(regs_if.err_status.pending) == 1
        await bus.write(regs.ERR_STATUS_ADDR, 1, 0b0000)
        assert (await bus.read(regs.ERR_STATUS_ADDR))[0] == 1
        await bus.write(regs.ERR_STATUS_ADDR, 1)
        assert (await bus.read(regs.ERR_STATUS_ADDR))[0] == 0
        # unmapped
        assert await bus.read(0xFFC) == (0, RESP_SLVERR)
        assert (await bus.write(0x020, 0xFFFFFFFF))[0] == RESP_SLVERR

    async def count_pulses(ctx):
        seen["soft_reset"] = 0
        async for _, _, pulse in ctx.tick().sample(regs_if.ctrl.soft_reset):
            seen["soft_reset"] += pulse

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.add_process(count_pulses)
    sim.run()


def test_without_the_network_layer_its_registers_read_0_and_cost_nothing():
    """A core without the network layer (``network=0``): NET_CAPS says so, the other Network
    registers answer OKAY, read 0 and keep nothing written; the bank has no ports for them."""
    dut = RegisterBank(width=8, connections=16, stags=64)
    assert not [name for name in dut.signature.members["regs"].signature.members
                if name.startswith("net_")]
    full = RegisterBank(**PARAMS).signature.members["regs"].signature.members
    assert "net_mac_hi" in full and "net_rx_good" in full

    async def testbench(ctx):
        bus = _Axil(ctx, dut.s_axil)
        assert await bus.read(REGMAP["NET_CAPS"].addr) == (0, RESP_OKAY)
        for name in ("NET_MAC_HI", "NET_IP", "NET_MAX_LEN", "NET_ARP_ENTRY"):
            addr = REGMAP[name].addr
            assert (await bus.write(addr, 0xFFFFFFFF))[0] == RESP_OKAY
            assert await bus.read(addr) == (0, RESP_OKAY), name

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    model = regs.BankModel(width=8, connections=16)
    model.write32(REGMAP["NET_IP"].addr, 0x0A000001)
    assert model.read32(REGMAP["NET_IP"].addr) == 0


# -- (c) ---------------------------------------------------------------------------

def test_cocotb_axil():
    """ID/version, RW with strobes, RO, pulses, W1C, unmapped, and a random run against BankModel."""
    result = run(RegisterBank, name="regbank", params=PARAMS, test_module="cocotb_regbank",
                 seed=20240611, timeout_s=600)
    assert result.tests >= 7 and result.failed == 0
