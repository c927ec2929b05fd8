"""cocotb side of tests/hdl/test_regbank.py: the register bank under cocotbext-axi's AxiLiteMaster.

The core side is reached by name: ``dut.regs__<register>__<field>`` (lower case),
``..._set`` for W1C set inputs. rnic.host.driver.regs.BankModel is the scoreboard of the random test.
"""

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from rnic.host.driver import regs
from rnic.host.spec.regmap import MAGIC, PULSE, REGMAP, RO, RW, VERSION_MAJOR, VERSION_MINOR, W1C
from rnic.sim.streams import TB

PREFIX = "s_axil_"      # from_prefix joins with "_": s_axil__awaddr


class BankTB(TB):
    def __init__(self, dut):
        super().__init__(dut)
        self.pulse_log = []          # (cycle, register, field, value)
        self.bvalid_rises = []       # cycles in which bvalid went high
        for name in ("regs__err_status__pending_set", "regs__err_status__overflow_set",
                     "regs__cq_status__overflow_set"):
            getattr(dut, name).value = 0
        for r in REGMAP:
            for f in r.fields:
                if f.access is RO and f.core_facing:
                    self.port(r.port, f.port).value = 0

    def port(self, register, field):
        return getattr(self.dut, f"regs__{register}__{field}")

    async def start(self):
        await self.reset()
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(self.dut, PREFIX), self.clk, self.rst)
        self.axil.write_if.log.setLevel("WARNING")
        self.axil.read_if.log.setLevel("WARNING")
        cocotb.start_soon(self._monitor())
        await self.cycles(2)

    async def _monitor(self):
        pulses = [(r.port, f.port, self.port(r.port, f.port))
                  for r in REGMAP for f in r.fields if f.access is PULSE]
        bvalid = self.dut.s_axil__bvalid
        prev_b = 0
        edge, ro = RisingEdge(self.clk), ReadOnly()
        while True:
            await edge
            await ro
            cycle = self.cycle()
            for reg_name, field_name, sig in pulses:
                v = int(sig.value)
                if v:
                    self.pulse_log.append((cycle, reg_name, field_name, v))
            b = int(bvalid.value)
            if b and not prev_b:
                self.bvalid_rises.append(cycle)
            prev_b = b

    async def read(self, addr):
        """``(value, resp)`` of one read beat at ``addr``. At an unaligned address the master
        asks for the rest of the word (one beat, araddr unaligned): the value has those
        bytes in place and the lower ones 0."""
        k = addr % 4
        r = await self.axil.read(addr, 4 - k)
        return int.from_bytes(r.data, "little") << (8 * k), r.resp

    async def write(self, addr, data, strobe=0xF):
        """Write the strobed bytes of ``data`` (a 32-bit value) to the word at ``addr``."""
        word = addr & ~3
        lanes = [i for i in range(4) if strobe >> i & 1]
        assert lanes == list(range(lanes[0], lanes[-1] + 1)), "contiguous strobes only"
        payload = bytes((data >> (8 * i)) & 0xFF for i in lanes)
        r = await self.axil.write(word + lanes[0], payload)
        return r.resp

    async def w1c_set(self, register, field, bits):
        sig = self.port(register, field + "_set")
        await RisingEdge(self.clk)
        sig.value = bits
        await RisingEdge(self.clk)
        sig.value = 0


@cocotb.test()
async def id_version_caps(dut):
    """ID magic, VERSION (map version, W), CAPS (connections, STags) and QUEUE_CAPS (IRD, ORD)
    from the build parameters."""
    tb = BankTB(dut)
    await tb.start()
    p = tb.params
    assert await tb.read(regs.ID_ADDR) == (MAGIC, AxiResp.OKAY)
    v, resp = await tb.read(regs.VERSION_ADDR)
    assert resp == AxiResp.OKAY
    assert regs.decode("VERSION", v) == {"minor": VERSION_MINOR, "major": VERSION_MAJOR, "width": p["width"]}
    caps, _ = await tb.read(regs.CAPS_ADDR)
    assert regs.decode("CAPS", caps) == {"connections": p["connections"], "stags": p["stags"]}
    depths, _ = await tb.read(regs.QUEUE_CAPS_ADDR)
    assert regs.decode("QUEUE_CAPS", depths) == {"ird": p["ird_depth"], "ord": p["ord_depth"]}
    # constants ignore writes
    assert await tb.write(regs.ID_ADDR, 0) == AxiResp.OKAY
    assert (await tb.read(regs.ID_ADDR))[0] == MAGIC


@cocotb.test()
async def reset_values(dut):
    """After reset every register reads its map reset value (RO inputs at 0) and RW outputs are reset."""
    tb = BankTB(dut)
    await tb.start()
    model = regs.BankModel(**tb.params)
    for r in REGMAP:
        got = await tb.read(r.addr)
        assert got == (model.read(r.addr)[0], AxiResp.OKAY), r.name
        for f in r.fields:
            if f.access in (RW, W1C) and f.core_facing:
                assert int(tb.port(r.port, f.port).value) == f.reset, (r.name, f.name)


@cocotb.test()
async def rw_byte_strobes(dut):
    """RW registers: full writes, single bytes, half words; read-back and the core-side outputs."""
    tb = BankTB(dut)
    await tb.start()
    out = tb.port("scratch", "value")
    assert await tb.write(regs.SCRATCH_ADDR, 0x11223344) == AxiResp.OKAY
    assert int(out.value) == 0x11223344
    await tb.write(regs.SCRATCH_ADDR, 0xAA << 8, 0b0010)
    assert (await tb.read(regs.SCRATCH_ADDR))[0] == 0x1122AA44
    await tb.write(regs.SCRATCH_ADDR, 0xBEEF << 16, 0b1100)
    assert (await tb.read(regs.SCRATCH_ADDR))[0] == 0xBEEFAA44
    await tb.write(regs.SCRATCH_ADDR, 0x55, 0b0001)
    assert int(out.value) == 0xBEEFAA55
    # reads at unaligned addresses (address bits 1..0 ignored by the bank)
    assert (await tb.read(regs.SCRATCH_ADDR + 3))[0] == 0xBE000000
    assert (await tb.read(regs.SCRATCH_ADDR + 1))[0] == 0xBEEFAA00
    # fields across byte lanes: CTX_TX.PHASE [12:4] spans bytes 0 and 1
    await tb.write(regs.CTX_TX_ADDR, regs.encode("CTX_TX", markers=1, crc=1, phase=0x1FC, mulpdu=0x1234))
    assert (int(tb.port("ctx_tx", "phase").value), int(tb.port("ctx_tx", "mulpdu").value)) == (0x1FC, 0x1234)
    await tb.write(regs.CTX_TX_ADDR, 0, 0b0001)      # byte 0: markers, crc, phase[3:0]
    assert regs.decode("CTX_TX", (await tb.read(regs.CTX_TX_ADDR))[0]) == \
        {"markers": 0, "crc": 0, "phase": 0x1F0, "mulpdu": 0x1234}
    assert int(tb.port("ctx_tx", "phase").value) == 0x1F0
    # unused bits read 0
    await tb.write(regs.CTX_TX_ADDR, 0xFFFFFFFF)
    assert (await tb.read(regs.CTX_TX_ADDR))[0] == REGMAP["CTX_TX"].rw_mask


@cocotb.test()
async def ro_from_core(dut):
    """RO registers read the core's inputs; writes to them are ignored (OKAY)."""
    tb = BankTB(dut)
    await tb.start()
    tb.port("rx_fpdus", "count").value = 0xCAFEF00D
    tb.port("ctx_status", "state").value = 4
    tb.port("ctx_status", "busy").value = 1
    tb.port("ctx_error", "layer").value = 2
    tb.port("ctx_error", "ecode").value = 3
    assert await tb.read(regs.RX_FPDUS_ADDR) == (0xCAFEF00D, AxiResp.OKAY)
    assert regs.decode("CTX_STATUS", (await tb.read(regs.CTX_STATUS_ADDR))[0]) == \
        {"state": 4, "busy": 1, "error": 0}
    assert (await tb.read(regs.CTX_ERROR_ADDR))[0] == 2 << 28 | 3 << 16
    assert await tb.write(regs.RX_FPDUS_ADDR, 0) == AxiResp.OKAY
    assert (await tb.read(regs.RX_FPDUS_ADDR))[0] == 0xCAFEF00D
    tb.port("rx_fpdus", "count").value = 7
    assert (await tb.read(regs.RX_FPDUS_ADDR))[0] == 7


@cocotb.test()
async def pulses_last_one_cycle(dut):
    """A written 1 makes a pulse output high for exactly one cycle, with bvalid; reads return 0."""
    tb = BankTB(dut)
    await tb.start()
    await tb.write(regs.CTX_CMD_ADDR, regs.encode("CTX_CMD", commit=1))
    await tb.cycles(3)
    assert [(r, f, v) for _, r, f, v in tb.pulse_log] == [("ctx_cmd", "commit", 1)]
    assert tb.pulse_log[0][0] == tb.bvalid_rises[-1], "pulse and write response in the same cycle"
    tb.pulse_log.clear()
    await tb.write(regs.CTX_CMD_ADDR, 0)                           # 0: nothing
    await tb.write(regs.CTX_CMD_ADDR, 0xFFFFFF00, 0b1110)         # bit 0's byte strobed off: nothing
    await tb.cycles(3)
    assert tb.pulse_log == []
    assert (await tb.read(regs.CTX_CMD_ADDR))[0] == 0
    # two pulses at once; the RW bit next to them is written too
    await tb.write(regs.CTRL_ADDR, 0b111)
    await tb.cycles(3)
    assert sorted((r, f) for _, r, f, _ in tb.pulse_log) == [("ctrl", "clear_counters"), ("ctrl", "soft_reset")]
    assert len({c for c, *_ in tb.pulse_log}) == 1
    assert (await tb.read(regs.CTRL_ADDR))[0] == 1 and int(tb.port("ctrl", "enable").value) == 1
    # back-to-back strobes: one pulse each
    tb.pulse_log.clear()
    for _ in range(3):
        await tb.write(regs.SQ_CMD_ADDR, 1)
    await tb.cycles(3)
    assert [(r, f) for _, r, f, _ in tb.pulse_log] == [("sq_cmd", "doorbell")] * 3
    assert len({c for c, *_ in tb.pulse_log}) == 3


@cocotb.test()
async def w1c(dut):
    """W1C: set by the core, cleared by writing 1 (strobed bytes only), set wins over clear."""
    tb = BankTB(dut)
    await tb.start()
    pending = tb.port("err_status", "pending")
    await tb.w1c_set("err_status", "pending", 1)
    await tb.cycles(1)
    assert int(pending.value) == 1
    assert (await tb.read(regs.ERR_STATUS_ADDR))[0] == 0b01
    await tb.write(regs.ERR_STATUS_ADDR, 0b10)                 # other bit: no change
    await tb.write(regs.ERR_STATUS_ADDR, 0b01, 0b0000 | 0b0010)  # bit 0's byte strobed off
    assert (await tb.read(regs.ERR_STATUS_ADDR))[0] == 0b01
    await tb.write(regs.ERR_STATUS_ADDR, 0b01)
    assert (await tb.read(regs.ERR_STATUS_ADDR))[0] == 0 and int(pending.value) == 0
    # set and clear in the same cycle: the set wins (set held high across the clearing write)
    tb.port("err_status", "overflow_set").value = 1
    await tb.cycles(2)
    await tb.write(regs.ERR_STATUS_ADDR, 0b10)
    tb.port("err_status", "overflow_set").value = 0
    assert (await tb.read(regs.ERR_STATUS_ADDR))[0] == 0b10
    await tb.write(regs.ERR_STATUS_ADDR, 0b10)
    assert (await tb.read(regs.ERR_STATUS_ADDR))[0] == 0
    # mixed register: CQ_STATUS has RO VALID and W1C OVERFLOW
    tb.port("cq_status", "valid").value = 1
    await tb.w1c_set("cq_status", "overflow", 1)
    assert (await tb.read(regs.CQ_STATUS_ADDR))[0] == 0b11
    await tb.write(regs.CQ_STATUS_ADDR, 0b11)
    assert (await tb.read(regs.CQ_STATUS_ADDR))[0] == 0b01


@cocotb.test()
async def unmapped_addresses(dut):
    """Unmapped addresses answer SLVERR: reads 0, writes dropped (holes, top of the window)."""
    tb = BankTB(dut)
    await tb.start()
    holes = [a for a in range(0, REGMAP.size, 4) if REGMAP.at(a) is None]
    for addr in (0x020, 0x024, 0x03C, 0x0FC, 0x25C, 0x800, REGMAP.size - 4):
        assert addr in holes
        assert await tb.read(addr) == (0, AxiResp.SLVERR), hex(addr)
        assert await tb.write(addr, 0xFFFFFFFF) == AxiResp.SLVERR, hex(addr)
    # nothing changed anywhere
    model = regs.BankModel(**tb.params)
    for r in REGMAP:
        assert (await tb.read(r.addr))[0] == model.read(r.addr)[0], r.name


@cocotb.test()
async def concurrent_read_write(dut):
    """A read and a write in flight together both complete; the read sees the old or new value."""
    tb = BankTB(dut)
    await tb.start()
    await tb.write(regs.SCRATCH_ADDR, 1)
    for i in range(20):
        w = cocotb.start_soon(tb.write(regs.SCRATCH_ADDR, i + 2))
        r = cocotb.start_soon(tb.read(regs.SCRATCH_ADDR))
        v, resp = await r
        assert await w == AxiResp.OKAY and resp == AxiResp.OKAY
        assert v in (i + 1, i + 2)
    assert (await tb.read(regs.SCRATCH_ADDR))[0] == 21


@cocotb.test()
async def random_against_model(dut):
    """Random reads/writes (random registers, strobes, holes), RO inputs and W1C sets vs BankModel."""
    tb = BankTB(dut)
    await tb.start()
    rng = tb.rng
    model = regs.BankModel(**tb.params)
    ro_fields = [(r, f) for r in REGMAP for f in r.fields if f.access is RO and f.core_facing]
    w1c_fields = [(r, f) for r in REGMAP for f in r.fields if f.access is W1C]
    outs = [(r, f) for r in REGMAP for f in r.fields if f.access in (RW, W1C)]
    addrs = [r.addr for r in REGMAP] + [0x024, 0x0F0, 0x300, 0xFFC]
    addrs += [r.addr for r in REGMAP if r.mask(PULSE, W1C)] * 4     # more strobes and clears
    tb.pulse_log.clear()
    for step in range(400):
        op = rng.random()
        if op < 0.1:
            r, f = rng.choice(ro_fields)
            v = rng.getrandbits(f.width)
            tb.port(r.port, f.port).value = v
            model.set_input(r.name, f.name, v)
        elif op < 0.15:
            r, f = rng.choice(w1c_fields)
            await tb.w1c_set(r.port, f.port, 1)
            model.set_w1c(r.name, f.name, 1)
        elif op < 0.55:
            addr = rng.choice(addrs)
            lo = rng.randrange(4)
            hi = rng.randrange(lo, 4)
            strobe = sum(1 << i for i in range(lo, hi + 1)) if rng.random() < 0.5 else 0xF
            data = rng.getrandbits(32)
            resp = await tb.write(addr, data, strobe)
            assert resp == model.write(addr, data, strobe), f"step {step}: write {addr:#x}"
            for r, f in outs:
                assert int(tb.port(r.port, f.port).value) == model.out(r.name, f.name), \
                    f"step {step}: {r.name}.{f.name}"
        else:
            addr = rng.choice(addrs) + rng.randrange(4)
            got = await tb.read(addr)
            value, resp = model.read(addr)
            want = (value >> (8 * (addr % 4)) << (8 * (addr % 4)), AxiResp(resp))
            assert got == want, f"step {step}: read {addr:#x}: {got} != {want}"
    await tb.cycles(3)
    assert [(r, f, v) for _, r, f, v in tb.pulse_log] == model.pulses
    assert len(model.pulses) >= 10
    tb.log.info("%d steps, %d pulses, %d cycles", 400, len(model.pulses), tb.cycle())
