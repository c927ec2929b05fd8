"""cocotb side of tests/hdl/test_rnic_core.py: RnicCore under cocotbext-axi's AxiLiteMaster.

Everything goes through the registers (rnic.host.spec.regmap names, rnic.host.driver.regs encode/decode);
the expected wire octets, marker counts and errors come from the model (rnic.host.model.fpdu;
rnic.host.model.sink for the DDP/RDMAP receive path, rnic.host.model.segment for the transmit path). Host memory
is one 1 MiB cocotbext-axi memory served by an AxiRamWrite on ``m_axi`` and an AxiRamRead on
``m_axi_rd``, both with random pauses.
"""

import random

import cocotb
from cocotb.triggers import RisingEdge
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiRamRead, AxiRamWrite, AxiReadBus, AxiResp,
                           AxiWriteBus)

from rnic.hdl.beat import OctetBeat
from rnic.hdl.mpa_rx import MpaRxBeat
from rnic.hdl.mpa_tx import MpaTxBeat
from rnic.host.driver import regs
from rnic.host.model import sink as hs
from rnic.host.spec.errors import ErrorInfo, Layer, MpaError
from rnic.host.model.fpdu import FpduDecoder, FpduEncoder, FpduError
from rnic.host.model.rdmap import ReadRequest, Terminate
from rnic.host.spec.regmap import (MAGIC, VERSION_MAJOR, VERSION_MINOR, ConnState, CqQueue, CqStatus, DpCrc,
    DpError, SqOpcode)
from rnic.host.model.segment import TxStream
from rnic.sim.streams import TB, bytes_to_beats

MEM = 1 << 20


def origin_of(phase):
    return (-phase) % 512


def ulpdu(rng, length, tagged=None):
    """A ULPDU whose first octet announces a DDP header it is long enough for."""
    if tagged is None:
        tagged = length < 18 or rng.random() < 0.5
    body = bytes(rng.getrandbits(8) for _ in range(length - 1))
    return bytes([0xC1 if tagged else 0x41]) + body


def info_of(error):
    """The ErrorInfo (layer, etype, ecode) the model reports for a deframer error code."""
    return {DpError.CRC: (Layer.LLP, 0, MpaError.CRC), DpError.MARKER: (Layer.LLP, 0, MpaError.MARKER),
            DpError.TOO_LONG: (Layer.DDP, 0, 0), DpError.TOO_SHORT: (Layer.DDP, 0, 0)}[error]


class CoreTB(TB):
    def __init__(self, dut):
        super().__init__(dut)
        p = self.params
        self.W, self.N = p["width"], p["connections"]
        self.beat = OctetBeat(width=self.W, connections=self.N)
        self.rx_src = self.source("rx_wire", self.beat)
        self.tx_src = self.source("tx_ulpdu", MpaTxBeat(width=self.W, connections=self.N))
        self.tx_snk = self.sink("tx_wire", self.beat)
        self.rx_snk = self.sink("rx_ulpdu", MpaRxBeat(width=self.W, connections=self.N))

    async def start(self):
        await self.reset()
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(self.dut, "s_axil_"), self.clk, self.rst)
        self.axil.write_if.log.setLevel("WARNING")
        self.axil.read_if.log.setLevel("WARNING")
        self.ram = AxiRamWrite(AxiWriteBus.from_prefix(self.dut, "m_axi_"), self.clk, self.rst, size=MEM)
        self.rram = AxiRamRead(AxiReadBus.from_prefix(self.dut, "m_axi_rd_"), self.clk, self.rst,
                               mem=self.ram.mem)
        for ch in (self.ram.aw_channel, self.ram.w_channel, self.ram.b_channel, self.rram.ar_channel,
                   self.rram.r_channel):
            ch.log.setLevel("WARNING")
        self.ram.log.setLevel("WARNING")
        self.rram.log.setLevel("WARNING")
        rng = random.Random(self.rng.random())

        def pauses():
            while True:
                yield rng.random() < 0.3
        for ch in (self.ram.aw_channel, self.ram.w_channel, self.ram.b_channel, self.rram.ar_channel,
                   self.rram.r_channel):
            ch.set_pause_generator(pauses())
        await self.wait_field("STATUS", "READY", 1)

    # -- registers by name
    async def rd(self, name):
        r = await self.axil.read(regs.reg(name).addr, 4)
        assert r.resp == AxiResp.OKAY, name
        return int.from_bytes(r.data, "little")

    async def wr(self, name, value=0, /, **fields):
        word = regs.encode(name, value, **fields)
        r = await self.axil.write(regs.reg(name).addr, word.to_bytes(4, "little"))
        assert r.resp == AxiResp.OKAY, name

    async def fields(self, name):
        return regs.decode(name, await self.rd(name))

    async def wait_field(self, name, field, want, limit=5000):
        for _ in range(limit):
            if (await self.fields(name))[field.lower()] == want:
                return
        raise AssertionError(f"{name}.{field} never became {want}")

    async def program(self, conn, *, tx, rx, state=ConnState.RTS):
        await self.wr("CONN_SEL", conn=conn)
        for name, dct in (("CTX_TX", tx), ("CTX_RX", rx)):
            await self.wr(name, markers=dct["markers"], crc=dct["crc"], phase=dct["phase"],
                          mulpdu=dct.get("mulpdu", 0))
        await self.wr("CTX_STATE", state=state)
        await self.wr("CTX_CMD", commit=1)
        await self.wait_field("CTX_STATUS", "BUSY", 0)

    async def conn_status(self, conn):
        await self.wr("CONN_SEL", conn=conn)
        return {**(await self.fields("CTX_STATUS")), **(await self.fields("CTX_ERROR"))}

    async def counters(self):
        out = {}
        for name in ("RX_FPDUS", "RX_CRC_ERRORS", "RX_MARKER_ERRORS", "RX_LENGTH_ERRORS", "TX_FPDUS",
                     "TX_MARKERS", "ERR_COUNT"):
            out[name.lower()] = await self.rd(name)
        for name in ("RX_OCTETS", "TX_OCTETS"):
            out[name.lower()] = await self.rd(name + "_HI") << 32 | await self.rd(name + "_LO")
        return out

    # -- the data port
    async def dp_send(self, conn, data):
        words = -(-len(data) // 4)
        assert (await self.fields("DP_TX_STATUS"))["free"] >= words
        padded = data + bytes(4 * words - len(data))
        for k in range(words):
            await self.wr("DP_TX_DATA", int.from_bytes(padded[4 * k:4 * k + 4], "little"))
        await self.wr("DP_TX_CONN", conn=conn)
        await self.wr("DP_TX_LEN", len=len(data))
        await self.wr("DP_TX_CMD", send=1)

    async def dp_recv(self, limit=400):
        """(conn, octets, crc, error) of the next ULPDU of the sink (waits), popped."""
        for _ in range(limit):
            st = await self.fields("DP_RX_STATUS")
            if st["valid"]:
                break
        else:
            raise AssertionError("no ULPDU in the data port")
        conn = (await self.fields("DP_RX_CONN"))["conn"]
        out = bytearray()
        words = -(-st["len"] // 4)
        for k in range(words):
            out += (await self.rd("DP_RX_DATA")).to_bytes(4, "little")
            if k < words - 1:
                await self.wr("DP_RX_CMD", next=1)
        await self.wr("DP_RX_CMD", pop=1)
        return conn, bytes(out[:st["len"]]), DpCrc(st["crc"]), DpError(st["error"])

    async def wait_quiet(self, cycles=64):
        await self.cycles(cycles)

    async def settle(self, quiet=200):
        """Wait until the input and the memory bus have been quiet for ``quiet`` cycles."""
        dut = self.dut
        n = 0
        while n < quiet:
            await RisingEdge(self.clk)
            busy = (int(dut.m_axi__awvalid.value) or int(dut.m_axi__wvalid.value)
                    or int(dut.m_axi__bvalid.value) or int(dut.rx_wire__valid.value))
            n = 0 if busy else n + 1

    # -- the DDP/RDMAP receive path's registers
    async def stag_write(self, *, stag, base, length, conn, valid=1, rr=0, rw=1, ri=0, index=None,
                         addr=None):
        """Row of ``stag``: TOs ``base ..`` at host memory ``addr ..`` (default ``base``)."""
        addr = base if addr is None else addr
        await self.wr("STAG_INDEX", index=stag % self.params.get("stags", 256) if index is None else index)
        await self.wr("STAG_KEY", stag=stag)
        await self.wr("STAG_BASE_LO", to=base & 0xFFFFFFFF)
        await self.wr("STAG_BASE_HI", to=base >> 32)
        await self.wr("STAG_LENGTH", length=length)
        await self.wr("STAG_ADDR_LO", addr=addr & 0xFFFFFFFF)
        await self.wr("STAG_ADDR_HI", addr=addr >> 32)
        await self.wr("STAG_ATTR", valid=valid, remote_read=rr, remote_write=rw, remote_inv=ri, conn=conn)
        await self.wr("STAG_CMD", commit=1)
        await self.wait_field("STAG_STATUS", "BUSY", 0)

    async def rq_post(self, conn, addr, length, wr_id):
        await self.wr("RQ_CONN", conn=conn)
        await self.wr("RQ_ADDR_LO", addr=addr & 0xFFFFFFFF)
        await self.wr("RQ_ADDR_HI", addr=addr >> 32)
        await self.wr("RQ_LENGTH", length=length)
        await self.wr("RQ_ID", wr_id=wr_id)
        await self.wr("RQ_CMD", post=1)
        await self.wait_field("RQ_STATUS", "BUSY", 0)

    async def cq_pop(self):
        """The head completion as a dict (None when the queue is empty), popped."""
        if not (await self.fields("CQ_STATUS"))["valid"]:
            return None
        out = dict(await self.fields("CQ_INFO"))
        for name in ("CQ_WR_ID", "CQ_LENGTH", "CQ_INV_STAG", "CQ_MSN", "CQ_STAG"):
            out[name[3:].lower()] = await self.rd(name)
        out["to"] = await self.rd("CQ_TO_HI") << 32 | await self.rd("CQ_TO_LO")
        await self.wr("CQ_CMD", pop=1)
        return out

    async def cq_wait(self, n, *, polls=200, gap=10):
        """Pop completions until ``n`` arrived (polling every ``gap`` cycles, at most ``polls``
        times); returns them, oldest first (fewer if they did not come)."""
        got = []
        for _ in range(polls):
            while len(got) < n and (c := await self.cq_pop()) is not None:
                got.append(c)
            if len(got) == n:
                break
            await self.cycles(gap)
        return got

    async def post(self, conn, opcode, *, laddr=0, length=0, lstag=0, rstag=0, rto=0, inv_stag=0,
                   wr_id=0, signaled=1):
        """Post a work request through SQ_* + SQ_CMD.DOORBELL (waits while SQ_STATUS.BUSY)."""
        await self.wait_field("SQ_STATUS", "BUSY", 0)
        await self.wr("SQ_WR", opcode=opcode, signaled=signaled, conn=conn)
        for name, value in (("SQ_LADDR_LO", laddr & 0xFFFFFFFF), ("SQ_LADDR_HI", laddr >> 32),
                            ("SQ_LENGTH", length), ("SQ_LSTAG", lstag), ("SQ_RSTAG", rstag),
                            ("SQ_RTO_LO", rto & 0xFFFFFFFF), ("SQ_RTO_HI", rto >> 32),
                            ("SQ_INV_STAG", inv_stag), ("SQ_ID", wr_id)):
            await self.wr(name, value)
        await self.wr("SQ_CMD", doorbell=1)

    async def term_pop(self):
        """(TERM_STATUS, TERM_INFO, payload octets) of the head report (None if empty), popped."""
        st = await self.fields("TERM_STATUS")
        if not st["valid"]:
            return None
        info = await self.fields("TERM_INFO")
        raw = b""
        for k in range(13):
            raw += (await self.rd(f"TERM_DATA{k}")).to_bytes(4, "little")
        assert raw[st["len"]:] == bytes(52 - st["len"])          # octets past LEN read 0
        await self.wr("TERM_CMD", pop=1)
        return st, info, raw[:st["len"]]

    async def rrq_pop(self):
        st = await self.fields("RRQ_STATUS")
        if not st["valid"]:
            return None
        out = {"conn": st["conn"], "msn": await self.rd("RRQ_MSN"), "sink_stag": await self.rd("RRQ_SINK_STAG"),
               "sink_to": await self.rd("RRQ_SINK_TO_HI") << 32 | await self.rd("RRQ_SINK_TO_LO"),
               "size": await self.rd("RRQ_SIZE"), "src_stag": await self.rd("RRQ_SRC_STAG"),
               "src_to": await self.rd("RRQ_SRC_TO_HI") << 32 | await self.rd("RRQ_SRC_TO_LO")}
        await self.wr("RRQ_CMD", pop=1)
        return out


@cocotb.test()
async def identity_reset_enable(dut):
    """ID/VERSION/CAPS from the build; READY after the reset sweep; soft reset and READY;
    ENABLE 0 holds the inputs."""
    tb = CoreTB(dut)
    await tb.start()
    assert await tb.rd("ID") == MAGIC
    assert await tb.fields("VERSION") == {"minor": VERSION_MINOR, "major": VERSION_MAJOR, "width": tb.W}
    assert (await tb.fields("CAPS"))["connections"] == tb.N
    assert await tb.fields("DP_TX_STATUS") == {"busy": 0, "free": tb.params["dp_depth"]}
    assert (await tb.fields("DP_RX_STATUS"))["valid"] == 0
    for conn in (0, tb.N - 1):
        st = await tb.conn_status(conn)
        assert st["state"] == ConnState.IDLE and st["error"] == 0 and st["busy"] == 0
    # CONN_SEL out of range: COMMIT ignored, status reads IDLE
    await tb.wr("CONN_SEL", conn=tb.N)
    await tb.wr("CTX_STATE", state=ConnState.RTS)
    await tb.wr("CTX_CMD", commit=1)
    assert (await tb.fields("CTX_STATUS"))["busy"] == 0
    # enable off: the framer input is held
    await tb.wr("CTRL", enable=0)
    tb.tx_src.append({"data": 0x41, "n": 1, "first": 1, "last": 1, "conn": 0, "length": 1})
    await tb.cycles(30)
    assert tb.tx_src.sent == 0
    await tb.wr("CTRL", enable=1)
    await tb.tx_src.wait_idle()
    # soft reset: READY drops while the contexts are rewritten, the bank keeps its values
    await tb.wr("SCRATCH", 0x1234)
    await tb.program(3, tx=dict(markers=1, crc=1, phase=8), rx=dict(markers=1, crc=1, phase=8, mulpdu=100))
    assert (await tb.conn_status(3))["state"] == ConnState.RTS
    await tb.wr("CTRL", enable=1, soft_reset=1)
    assert (await tb.fields("STATUS"))["ready"] == 0
    await tb.wait_field("STATUS", "READY", 1)
    assert (await tb.conn_status(3))["state"] == ConnState.IDLE
    assert await tb.rd("SCRATCH") == 0x1234 and (await tb.fields("CTRL"))["enable"] == 1
    c = await tb.counters()
    assert c["tx_fpdus"] == 0 and c["tx_octets"] == 0


@cocotb.test()
async def loopback_two_connections(dut):
    """Two connections programmed through registers (markers+CRC with a phase, and plain),
    ULPDUs looped back through the data port: ULPDUs and status as sent, counters as the model,
    a WAIT_RX connection opens (RTS) on its first ULPDU."""
    tb = CoreTB(dut)
    await tb.start()
    rng = random.Random(tb.rng.getrandbits(32))
    cfg = {1: dict(markers=1, crc=1, phase=476, mulpdu=2000),
           tb.N - 2: dict(markers=0, crc=0, phase=0, mulpdu=2000)}
    await tb.program(1, tx=cfg[1], rx=cfg[1], state=ConnState.RTS)
    await tb.program(tb.N - 2, tx=cfg[tb.N - 2], rx=cfg[tb.N - 2], state=ConnState.WAIT_RX)
    assert (await tb.conn_status(tb.N - 2))["state"] == ConnState.WAIT_RX
    await tb.wr("DP_CTRL", loopback=1, source=1, sink=1)
    await tb.wr("CTRL", enable=1, clear_counters=1)
    enc = {c: FpduEncoder(markers=bool(d["markers"]), crc=bool(d["crc"]), marker_origin=origin_of(d["phase"]))
           for c, d in cfg.items()}
    markers = 0
    octets = 0
    sent = []
    lengths = [14, 18, 19, 20, 21, 510, 507, 300, 33, 64]
    for i, n in enumerate(lengths):
        conn = list(cfg)[i % 2]
        data = ulpdu(rng, n, tagged=n < 18 or None)
        sent.append((conn, data))
        markers += len(enc[conn].layout(n).markers)
        octets += len(enc[conn].encode(data))
        await tb.dp_send(conn, data)
        got = await tb.dp_recv()
        crc_want = DpCrc.OK if cfg[conn]["crc"] else DpCrc.UNCHECKED
        assert got == (conn, data, crc_want, DpError.NONE), (i, got[0], len(got[1]), got[2:])
    assert len(tb.tx_snk) == 0 and len(tb.rx_snk) == 0            # the ports stayed idle
    c = await tb.counters()
    assert c == {"rx_fpdus": len(sent), "rx_crc_errors": 0, "rx_marker_errors": 0, "rx_length_errors": 0,
                 "tx_fpdus": len(sent), "tx_markers": markers, "err_count": 0,
                 "rx_octets": octets, "tx_octets": octets}, c
    assert markers > 0
    assert (await tb.conn_status(tb.N - 2))["state"] == ConnState.RTS      # fence opened
    assert (await tb.conn_status(1))["state"] == ConnState.RTS
    await tb.wr("CTRL", enable=1, clear_counters=1)
    assert all(v == 0 for v in (await tb.counters()).values())


@cocotb.test()
async def tx_port_matches_model(dut):
    """tx_ulpdu -> tx_wire (LOOPBACK off) on three connections, interleaved at ULPDU granularity,
    with back-pressure: each connection's octets are the model's FPDUs; TX_MARKERS as the model."""
    tb = CoreTB(dut)
    await tb.start()
    rng = random.Random(tb.rng.getrandbits(32))
    tb.tx_snk.backpressure_prob = 0.3
    tb.tx_src.idle_prob = 0.2
    cfg = {0: dict(markers=1, crc=1, phase=0), 2: dict(markers=1, crc=0, phase=500),
           5: dict(markers=0, crc=1, phase=0)}
    for conn, d in cfg.items():
        await tb.program(conn, tx=d, rx=d)
    await tb.wr("DP_CTRL", 0)
    await tb.wr("CTRL", enable=1, clear_counters=1)
    enc = {c: FpduEncoder(markers=bool(d["markers"]), crc=bool(d["crc"]), marker_origin=origin_of(d["phase"]))
           for c, d in cfg.items()}
    want = {c: bytearray() for c in cfg}
    markers = 0
    count = 0
    for _ in range(24):
        conn = rng.choice(list(cfg))
        n = rng.choice([14, 18, 25, 100, 509, 700, rng.randrange(18, 1200)])
        data = ulpdu(rng, n)
        markers += len(enc[conn].layout(n).markers)
        want[conn] += enc[conn].encode(data)
        tb.tx_src.extend(bytes_to_beats(data, tb.W, conn=conn, length=n))
        count += 1
    await tb.tx_src.wait_idle()
    total = sum(len(v) for v in want.values())
    got = {c: bytearray() for c in cfg}
    seen = 0
    for _ in range(20000):
        await RisingEdge(tb.clk)
        while len(tb.tx_snk):
            b = tb.tx_snk.get_nowait()
            got[b["conn"]] += (b["data"] & ((1 << (8 * b["n"])) - 1)).to_bytes(b["n"], "little")
            seen += b["n"]
        if seen >= total:
            break
    for c in cfg:
        assert bytes(got[c]) == bytes(want[c]), c
    c = await tb.counters()
    assert c["tx_fpdus"] == count and c["tx_markers"] == markers and c["tx_octets"] == total


async def _drive_segments(tb, conn, wire, rng):
    """``wire`` into rx_wire as TCP segments of random sizes (cut anywhere)."""
    pos = 0
    while pos < len(wire):
        n = min(len(wire) - pos, rng.choice([1, 3, 7, 64, 200, 1500]))
        tb.rx_src.extend(bytes_to_beats(wire[pos:pos + n], tb.W, conn=conn))
        pos += n
    await tb.rx_src.wait_idle()


async def _collect(tb, want_units, limit=4000):
    beats = []
    units = 0
    for _ in range(limit):
        await RisingEdge(tb.clk)
        while len(tb.rx_snk):
            b = tb.rx_snk.get_nowait()
            beats.append(b)
            units += b["last"]
        if units >= want_units:
            break
    return beats


def _ulpdus(beats):
    """[(conn, octets, crc, error)] from rx_ulpdu beats (status beats included)."""
    out, cur = [], {}
    for b in beats:
        if b["first"]:
            cur[b["conn"]] = bytearray()
        n = b["n"]
        cur[b["conn"]] += (b["data"] & ((1 << (8 * n)) - 1)).to_bytes(n, "little") if n else b""
        if b["last"]:
            out.append((b["conn"], bytes(cur.pop(b["conn"])), DpCrc(b["crc"]), DpError(b["error"])))
    return out


@cocotb.test()
async def rx_errors_and_capture(dut):
    """rx_wire driven by the testbench (LOOPBACK off): a corrupted octet gives a CRC error
    (status on the last beat, as the model), ERR_* capture, CTX_ERROR and ERROR state; a second
    error sets OVERFLOW only; W1C clears; a marker and a length error are captured after that."""
    tb = CoreTB(dut)
    await tb.start()
    rng = random.Random(tb.rng.getrandbits(32))
    tb.rx_snk.backpressure_prob = 0.2
    await tb.wr("DP_CTRL", bypass=1)
    await tb.wr("CTRL", enable=1, clear_counters=1)
    d4 = dict(markers=1, crc=1, phase=132, mulpdu=4000)
    await tb.program(4, tx=d4, rx=d4)
    enc = FpduEncoder(markers=True, crc=True, marker_origin=origin_of(132))
    data = [ulpdu(rng, n) for n in (40, 700, 60)]
    fpdus = [enc.encode(u) for u in data]
    wire = bytearray(b"".join(fpdus))
    hit = len(fpdus[0]) + 300                     # inside the second FPDU
    wire[hit] ^= 0x10
    model = FpduDecoder(markers=True, crc=True, marker_origin=origin_of(132), mulpdu=4000)
    results = model.feed(bytes(wire))
    assert isinstance(results[-1], FpduError) and results[-1].info.ecode == MpaError.CRC
    await _drive_segments(tb, 4, bytes(wire), rng)
    got = _ulpdus(await _collect(tb, 2))
    assert got[0] == (4, data[0], DpCrc.OK, DpError.NONE)
    corrupt = bytearray(data[1])
    # the octets were passed on as received (markers removed): the flipped one is in the ULPDU
    assert got[1][0] == 4 and got[1][2:] == (DpCrc.BAD, DpError.CRC) and len(got[1][1]) == len(data[1])
    assert sum(a != b for a, b in zip(got[1][1], corrupt)) == 1
    assert len(got) == 2
    await tb.cycles(50)
    assert len(tb.rx_snk) == 0                    # nothing more on that connection
    assert await tb.fields("ERR_STATUS") == {"pending": 1, "overflow": 0}
    assert (await tb.fields("ERR_CONN")) == {"conn": 4, "tx": 0}
    want = info_of(DpError.CRC)
    assert await tb.fields("ERR_INFO") == {"layer": want[0], "etype": want[1], "ecode": want[2]}
    st = await tb.conn_status(4)
    assert (st["state"], st["error"], st["layer"], st["ecode"]) == \
        (ConnState.ERROR, 1, Layer.LLP, MpaError.CRC)
    c = await tb.counters()
    assert (c["rx_fpdus"], c["rx_crc_errors"], c["err_count"], c["rx_octets"]) == (2, 1, 1, len(wire))

    # a length error (ULPDU_Length above MULPDU) on connection 6 while PENDING: OVERFLOW only
    d6 = dict(markers=0, crc=1, phase=0, mulpdu=100)
    await tb.program(6, tx=d6, rx=d6)
    enc6 = FpduEncoder(markers=False, crc=True)
    long_one = ulpdu(rng, 101)
    model6 = FpduDecoder(markers=False, crc=True, mulpdu=100).feed(enc6.encode(long_one))
    assert model6[0].info.layer == Layer.DDP
    await _drive_segments(tb, 6, enc6.encode(long_one), rng)
    got = _ulpdus(await _collect(tb, 1))
    assert got == [(6, b"", DpCrc.UNCHECKED, DpError.TOO_LONG)]
    assert await tb.fields("ERR_STATUS") == {"pending": 1, "overflow": 1}
    assert (await tb.fields("ERR_CONN"))["conn"] == 4
    assert (await tb.fields("ERR_INFO"))["ecode"] == MpaError.CRC
    assert await tb.rd("ERR_COUNT") == 2 and await tb.rd("RX_LENGTH_ERRORS") == 1
    st = await tb.conn_status(6)
    assert (st["state"], st["layer"], st["etype"], st["ecode"]) == (ConnState.ERROR, Layer.DDP, 0, 0)

    # W1C: clear both; then a marker error on connection 4 (recommitted) is captured
    await tb.wr("ERR_STATUS", pending=1, overflow=1)
    assert await tb.fields("ERR_STATUS") == {"pending": 0, "overflow": 0}
    await tb.program(4, tx=d4, rx=d4)
    assert (await tb.conn_status(4))["error"] == 0
    enc = FpduEncoder(markers=True, crc=False, marker_origin=origin_of(132))
    d4c = dict(d4, crc=0)
    await tb.program(4, tx=d4c, rx=d4c)
    fp = bytearray(enc.encode(ulpdu(rng, 600)))
    lay = FpduEncoder(markers=True, crc=False, marker_origin=origin_of(132)).layout(600)
    lay_markers = [m for m, _ in lay.markers]
    fp[lay_markers[0] + 3] ^= 0x40                 # FPDUPTR off by 0x40
    res = FpduDecoder(markers=True, crc=False, marker_origin=origin_of(132), mulpdu=4000).feed(bytes(fp))
    assert res[-1].info == ErrorInfo.mpa(MpaError.MARKER, res[-1].info.text)
    await _drive_segments(tb, 4, bytes(fp), rng)
    got = _ulpdus(await _collect(tb, 1))
    assert got[0][0] == 4 and got[0][2:] == (DpCrc.UNCHECKED, DpError.MARKER)
    assert await tb.fields("ERR_STATUS") == {"pending": 1, "overflow": 0}
    assert await tb.fields("ERR_INFO") == {"layer": Layer.LLP, "etype": 0, "ecode": MpaError.MARKER}
    assert await tb.rd("RX_MARKER_ERRORS") == 1 and await tb.rd("ERR_COUNT") == 3
    # the interrupt line follows ERR_STATUS.PENDING when enabled
    assert int(dut.irq.value) == 0
    await tb.wr("INT_ENABLE", err=1)
    await tb.cycles(2)
    assert int(dut.irq.value) == 1
    await tb.wr("ERR_STATUS", pending=1)
    await tb.cycles(2)
    assert int(dut.irq.value) == 0


@cocotb.test()
async def rx_data_port_words(dut):
    """The sink through rx_wire segments: two connections, POP without reading, NEXT/POP,
    length status reports, DP_RX_DATA zero past LEN."""
    tb = CoreTB(dut)
    await tb.start()
    rng = random.Random(tb.rng.getrandbits(32))
    await tb.wr("DP_CTRL", sink=1)
    await tb.wr("CTRL", enable=1)
    d = dict(markers=1, crc=1, phase=0, mulpdu=1000)
    for conn in (7, 8):
        await tb.program(conn, tx=d, rx=d)
    enc = {conn: FpduEncoder(markers=True, crc=True) for conn in (7, 8)}
    first = ulpdu(rng, 61)
    second = ulpdu(rng, 130)
    third = ulpdu(rng, 23)
    await _drive_segments(tb, 7, enc[7].encode(first), rng)
    await _drive_segments(tb, 8, enc[8].encode(second), rng)
    await _drive_segments(tb, 7, enc[7].encode(third), rng)
    await tb.cycles(40)
    st = await tb.fields("DP_RX_STATUS")
    assert (st["valid"], st["len"], st["crc"], st["error"]) == (1, 61, DpCrc.OK, DpError.NONE)
    await tb.wr("DP_RX_CMD", pop=1)                   # drop it unread
    assert await tb.dp_recv() == (8, second, DpCrc.OK, DpError.NONE)
    # read 2 words of the third, then the last word: octets past LEN read 0
    w = []
    for _ in range(6):
        w.append(await tb.rd("DP_RX_DATA"))
        await tb.wr("DP_RX_CMD", next=1)
    assert b"".join(x.to_bytes(4, "little") for x in w)[:23] == third
    assert w[5] >> 24 == 0 and (await tb.fields("DP_RX_STATUS"))["valid"] == 1
    await tb.wr("DP_RX_CMD", pop=1)
    await tb.cycles(4)
    assert (await tb.fields("DP_RX_STATUS"))["valid"] == 0
    # a too-short ULPDU_Length: a status report without octets
    await _drive_segments(tb, 8, FpduEncoder(markers=True, crc=True, offset=enc[8].offset).encode(
        bytes([0x41]) + bytes(9)), rng)
    assert await tb.dp_recv() == (8, b"", DpCrc.UNCHECKED, DpError.TOO_SHORT)


@cocotb.test()
async def ddp_receive_path(dut):
    """The DDP/RDMAP receive path through the registers, against rnic.host.model.sink.Sink: STags and
    receive buffers programmed with STAG_* / RQ_*, FPDUs on rx_wire (cut into segments):
    two Sends (memory, CQ_* with length and MSN), an RDMA Write (memory, no completion), a
    Read Request (RRQ_*), a Read Response (CQ_* SQ/RDMA_READ), a tagged write to an invalid
    STag (DDP 1/1/0 in ERR_*, CTX_ERROR, TERM_* with the model's Terminate payload, nothing
    written, later segments dropped), a received Terminate on another connection (TERM_*
    RECEIVED, CLOSING), a post to a full queue (RQ_STATUS.OVERFLOW), the interrupt sources."""
    tb = CoreTB(dut)
    await tb.start()
    rng = random.Random(tb.rng.getrandbits(32))
    await tb.wr("DP_CTRL", host_reads=1)
    await tb.wr("CTRL", enable=1, clear_counters=1)
    await tb.wr("ERR_STATUS", pending=1, overflow=1)
    mem = hs.Memory()
    sinks, tx, enc = {}, {}, {}
    d = {3: dict(markers=1, crc=1, phase=64, mulpdu=1000), 5: dict(markers=0, crc=1, phase=0, mulpdu=300)}
    for conn, dd in d.items():
        await tb.wr("CTX_IRD_ORD", ird=2, ord=2)
        await tb.program(conn, tx=dd, rx=dd)
        sinks[conn] = hs.Sink(memory=mem, stream=conn, ird=2)
        tx[conn] = TxStream(mulpdu=dd["mulpdu"])
        enc[conn] = FpduEncoder(markers=bool(dd["markers"]), crc=True, marker_origin=origin_of(dd["phase"]))
    regions = {}
    for conn in d:
        sinks[conn]._regions = regions          # one STag table
    rows = [dict(stag=0x12345603, base=0x10000, length=4096, conn=3, rr=1, rw=1),
            dict(stag=0xABCD0105, base=0x30000, length=1000, conn=5, rr=0, rw=1)]
    for row in rows:
        await tb.stag_write(**row)
        acc = (hs.Access.REMOTE_READ if row["rr"] else 0) | (hs.Access.REMOTE_WRITE if row["rw"] else 0)
        sinks[3].register_region(stag=row["stag"], base=row["base"], length=row["length"], access=acc,
                                 stream=row["conn"])
    bufs = [(3, 0x20000, 2000, 0xAA01), (3, 0x20800, 64, 0xAA02), (5, 0x40000, 256, 0xBB01)]
    for conn, addr, length, wr_id in bufs:
        await tb.rq_post(conn, addr, length, wr_id)
        sinks[conn].post_receive(addr=addr, length=length, buffer_id=wr_id)
    assert (await tb.fields("RQ_STATUS"))["overflow"] == 0

    async def deliver(conn, ulpdus):
        """The ULPDUs through the core and the model; returns the model's events."""
        events = []
        wire = b""
        for u in ulpdus:
            events += sinks[conn].receive(u)
            wire += enc[conn].encode(u)
        await _drive_segments(tb, conn, wire, rng)
        await tb.settle()
        return events

    send1 = rng.randbytes(1500)                 # two FPDUs (MULPDU 1000)
    send2 = rng.randbytes(50)
    write = rng.randbytes(777)
    ev = await deliver(3, tx[3].send(send1) + tx[3].write(write, stag=0x12345603, to=0x10123)
                       + tx[3].send(send2, solicited=True))
    want_cq = [e for e in ev if isinstance(e, hs.SendComplete)]
    assert len(want_cq) == 2
    for e, opcode in zip(want_cq, (SqOpcode.SEND, SqOpcode.SEND_SE)):
        got = await tb.cq_pop()
        assert got is not None, "completion missing"
        assert (got["conn"], got["queue"], got["opcode"], got["status"]) == (3, CqQueue.RQ, opcode, 0)
        assert (got["wr_id"], got["length"], got["msn"], got["invalidated"], got["solicited"]) == \
            (e.buffer_id, e.length, e.msn, 0, int(opcode == SqOpcode.SEND_SE)), got
    assert await tb.cq_pop() is None
    assert tb.ram.read(0x20000, 1500) == send1 and tb.ram.read(0x20800, 50) == send2
    assert tb.ram.read(0x10123, 777) == write

    # a Read Request (queued for the responder) and a Read Response (completes on L)
    req = ReadRequest(sink_stag=0x55, sink_to=0x1122334455, size=100, src_stag=0x12345603, src_to=0x10010)
    resp = rng.randbytes(400)
    ev = await deliver(3, tx[3].read_request(req) + tx[3].read_response(resp, stag=0x12345603, to=0x10800))
    rr = [e for e in ev if isinstance(e, hs.ReadRequestQueued)]
    assert len(rr) == 1
    got = await tb.rrq_pop()
    assert got == dict(conn=3, msn=rr[0].msn, sink_stag=0x55, sink_to=0x1122334455, size=100,
                       src_stag=0x12345603, src_to=0x10010), got
    assert await tb.rrq_pop() is None
    await tb.wr("RRQ_DONE_CONN", conn=3)
    await tb.wr("RRQ_CMD", done=1)
    await tb.wait_field("RRQ_STATUS", "DONE_BUSY", 0)
    got = await tb.cq_pop()
    assert (got["queue"], got["opcode"], got["wr_id"], got["stag"], got["to"], got["length"]) == \
        (CqQueue.SQ, SqOpcode.RDMA_READ, 0, 0x12345603, 0x10800, 400), got
    assert tb.ram.read(0x10800, 400) == resp

    # a tagged write to an invalid STag: DDP 1/1/0, nothing placed, the connection stops
    assert (await tb.fields("ERR_STATUS"))["pending"] == 0
    before = tb.ram.read(0, MEM)
    bad = tx[3].write(rng.randbytes(100), stag=0xDEAD0007, to=0x10000)
    ev = await deliver(3, bad + tx[3].send(b"late"))
    errs = [e for e in ev if isinstance(e, hs.Error)]
    assert len(errs) == 1 and (int(errs[0].info.layer), errs[0].info.etype, errs[0].info.ecode) == (1, 1, 0)
    assert tb.ram.read(0, MEM) == before
    assert await tb.fields("ERR_STATUS") == {"pending": 1, "overflow": 0}
    assert await tb.fields("ERR_CONN") == {"conn": 3, "tx": 0}
    assert await tb.fields("ERR_INFO") == {"layer": 1, "etype": 1, "ecode": 0}
    st = await tb.conn_status(3)
    assert (st["state"], st["error"], st["layer"], st["etype"], st["ecode"]) == (ConnState.ERROR, 1, 1, 1, 0)
    t = await tb.term_pop()
    assert t is not None
    tst, tinfo, payload = t
    assert (tst["received"], tst["conn"]) == (0, 3) and tinfo == {"layer": 1, "etype": 1, "ecode": 0}
    assert payload == errs[0].terminate[18:], (payload.hex(), errs[0].terminate[18:].hex())
    assert await tb.term_pop() is None and await tb.cq_pop() is None
    assert await tb.rd("ERR_COUNT") == 1

    # a received Terminate on connection 5: TERM_* RECEIVED, CLOSING, not an error
    term = Terminate.for_error(ErrorInfo(Layer.DDP, 2, 2), bytes([0x41]) + bytes(30)).build()
    ev = await deliver(5, tx[5].message(7, term))
    assert any(isinstance(e, hs.TerminateReceived) for e in ev)
    assert int(dut.irq.value) == 0
    await tb.wr("INT_ENABLE", term=1)
    await tb.cycles(2)
    assert int(dut.irq.value) == 1
    tst, tinfo, payload = await tb.term_pop()
    assert (tst["received"], tst["conn"], payload) == (1, 5, term)
    assert tinfo == {"layer": 1, "etype": 2, "ecode": 2}
    await tb.cycles(2)
    assert int(dut.irq.value) == 0
    st = await tb.conn_status(5)
    assert (st["state"], st["error"]) == (ConnState.CLOSING, 0)
    assert (await tb.fields("ERR_STATUS"))["overflow"] == 0 and await tb.rd("ERR_COUNT") == 1

    # the CQ interrupt source; a post beyond the queue depth is dropped (OVERFLOW, W1C)
    await tb.wr("INT_ENABLE", cq=1)
    await tb.program(5, tx=d[5], rx=d[5])
    sinks[5] = hs.Sink(memory=mem, stream=5, ird=2)
    sinks[5]._regions = regions
    tx[5] = TxStream(mulpdu=300)
    await tb.rq_post(5, 0x40000, 256, 0xBB02)
    msg = rng.randbytes(200)
    await deliver(5, tx[5].send(msg))
    assert int(dut.irq.value) == 1
    got = await tb.cq_pop()
    assert (got["conn"], got["wr_id"], got["length"], got["msn"]) == (5, 0xBB02, 200, 1)
    assert tb.ram.read(0x40000, 200) == msg
    await tb.cycles(2)
    assert int(dut.irq.value) == 0
    for k in range(tb.params.get("rq_depth", 8)):
        await tb.rq_post(5, 0x40000 + 256 * k, 256, k)
    assert (await tb.fields("RQ_STATUS"))["overflow"] == 0
    await tb.rq_post(5, 0x48000, 256, 99)
    await tb.cycles(4)
    assert (await tb.fields("RQ_STATUS"))["overflow"] == 1
    await tb.wr("RQ_STATUS", overflow=1)
    assert (await tb.fields("RQ_STATUS"))["overflow"] == 0

    # CTRL.SOFT_RESET with a ULPDU half received on connection 5: afterwards the receive path
    # starts clean (queues empty, the half ULPDU forgotten) and the STag table is kept
    tx[5] = TxStream(mulpdu=300)
    half = enc[5].encode(tx[5].send(rng.randbytes(250))[0])
    await _drive_segments(tb, 5, half[:len(half) // 2], rng)
    await tb.settle()
    await tb.wr("CTRL", enable=1, soft_reset=1)
    await tb.wait_field("STATUS", "READY", 1)
    assert (await tb.fields("CQ_STATUS"))["valid"] == 0 and (await tb.fields("TERM_STATUS"))["valid"] == 0
    for conn, dd in d.items():
        await tb.program(conn, tx=dd, rx=dd)
        sinks[conn] = hs.Sink(memory=mem, stream=conn, ird=0)
        sinks[conn]._regions = regions
        tx[conn] = TxStream(mulpdu=dd["mulpdu"])
        enc[conn] = FpduEncoder(markers=bool(dd["markers"]), crc=True, marker_origin=origin_of(dd["phase"]))
    await tb.rq_post(5, 0x50000, 300, 0xCC01)
    sinks[5].post_receive(addr=0x50000, length=300, buffer_id=0xCC01)
    msg = rng.randbytes(280)
    write = rng.randbytes(64)
    await deliver(5, tx[5].send(msg))
    await deliver(3, tx[3].write(write, stag=0x12345603, to=0x10F00))
    got = await tb.cq_pop()
    assert (got["conn"], got["wr_id"], got["length"], got["msn"]) == (5, 0xCC01, 280, 1), got
    assert tb.ram.read(0x50000, 280) == msg and tb.ram.read(0x10F00, 64) == write
    assert await tb.cq_pop() is None and (await tb.fields("TERM_STATUS"))["valid"] == 0


@cocotb.test()
async def ddp_transmit_path(dut):
    """The DDP/RDMAP transmit path through the registers, looped back (DP_CTRL.LOOPBACK) into the
    core's own receive path, against rnic.host.model.segment (segments counted in TX_FPDUS) and rnic.host.model.sink
    (placement, receive completion): on one connection a Send, an RDMA Write and an RDMA Read
    posted with SQ_* + SQ_CMD.DOORBELL (payload read from host memory on m_axi_rd); the Read
    Request is answered by the Read Responder (DP_CTRL.HOST_READS 0: RRQ_* stays empty) and its
    Read Response completes the Read work request (CQ_* queue SQ with its SQ_ID); a Read on a
    connection with ORD 0 completes with BAD_REQUEST; an unsignaled Write completes silently."""
    tb = CoreTB(dut)
    await tb.start()
    rng = random.Random(tb.rng.getrandbits(32))
    await tb.wr("DP_CTRL", loopback=1)
    await tb.wr("CTRL", enable=1, clear_counters=1)
    await tb.wr("ERR_STATUS", pending=1, overflow=1)
    conn, mulpdu = 3, 200
    dd = dict(markers=1, crc=1, phase=96, mulpdu=mulpdu)
    await tb.wr("CTX_IRD_ORD", ird=2, ord=2)
    await tb.program(conn, tx=dd, rx=dd)
    await tb.wr("CTX_IRD_ORD", ird=0, ord=0)
    await tb.program(6, tx=dd, rx=dd)
    mem = hs.Memory()
    model = hs.Sink(memory=mem, stream=conn, ird=2)
    seg = TxStream(mulpdu=mulpdu)
    # STag A: remote read/write region (Write target, Read source); STag B: the Read's sink
    stag_a, base_a, stag_b, base_b = 0x00A1B203, 0x10000, 0x00C0DE05, 0x30000
    for stag, base, rr in ((stag_a, base_a, 1), (stag_b, base_b, 0)):
        await tb.stag_write(stag=stag, base=base, length=0x4000, conn=conn, rr=rr, rw=1)
        model.register_region(stag=stag, base=base, length=0x4000, stream=conn,
                              access=(hs.Access.REMOTE_READ if rr else 0) | hs.Access.REMOTE_WRITE)
    src = rng.randbytes(900)
    tb.ram.write(base_a + 0x1000, src)
    mem.write(base_a + 0x1000, src)
    send, write, write2 = rng.randbytes(700), rng.randbytes(1000), rng.randbytes(77)
    tb.ram.write(0x50000, send)
    tb.ram.write(0x51000, write)
    tb.ram.write(0x52000, write2)
    await tb.rq_post(conn, 0x60000, 1024, 0xE001)
    model.post_receive(addr=0x60000, length=1024, buffer_id=0xE001)

    await tb.post(conn, SqOpcode.SEND, laddr=0x50000, length=len(send), wr_id=0x5001)
    await tb.post(conn, SqOpcode.RDMA_WRITE, laddr=0x51000, length=len(write), rstag=stag_a,
                  rto=base_a + 0x100, wr_id=0x5002)
    await tb.post(conn, SqOpcode.RDMA_READ, laddr=base_b + 0x10, length=len(src), lstag=stag_b,
                  rstag=stag_a, rto=base_a + 0x1000, wr_id=0x5003)
    await tb.post(conn, SqOpcode.RDMA_WRITE, laddr=0x52000, length=len(write2), rstag=stag_a,
                  rto=base_a + 0x800, wr_id=0x5004, signaled=0)
    await tb.post(6, SqOpcode.RDMA_READ, laddr=base_b, length=16, lstag=stag_b, rstag=stag_a,
                  rto=base_a, wr_id=0x6001)

    # the model: what the wire carries and what the peer (here: this core) does with it
    req = ReadRequest(sink_stag=stag_b, sink_to=base_b + 0x10, size=len(src), src_stag=stag_a,
                      src_to=base_a + 0x1000)
    ulpdus = seg.send(send) + seg.write(write, stag=stag_a, to=base_a + 0x100) + seg.read_request(req)
    ulpdus += seg.write(write2, stag=stag_a, to=base_a + 0x800)
    events = []
    for u in ulpdus:
        events += model.receive(u)
    queued = [e for e in events if isinstance(e, hs.ReadRequestQueued)]
    assert len(queued) == 1 and queued[0].request == req
    resp = TxStream(mulpdu=mulpdu).read_response(mem.read(base_a + 0x1000, len(src)), stag=stag_b,
                                                 to=base_b + 0x10)
    for u in resp:
        events += model.receive(u)

    got = []
    for _ in range(400):
        c = await tb.cq_pop()
        if c is not None:
            got.append(c)
        if len(got) == 5:
            break
    assert len(got) == 5, got
    assert await tb.cq_pop() is None
    want_rq = [e for e in events if isinstance(e, hs.SendComplete)]
    assert len(want_rq) == 1
    rq = [c for c in got if c["queue"] == CqQueue.RQ]
    assert len(rq) == 1
    assert (rq[0]["conn"], rq[0]["opcode"], rq[0]["wr_id"], rq[0]["length"], rq[0]["msn"], rq[0]["status"]) == \
        (conn, SqOpcode.SEND, want_rq[0].buffer_id, want_rq[0].length, want_rq[0].msn, 0), rq
    sq = sorted(((c["wr_id"], c["conn"], c["opcode"], c["status"], c["length"])
                 for c in got if c["queue"] == CqQueue.SQ))
    assert sq == [(0x5001, conn, SqOpcode.SEND, CqStatus.SUCCESS, len(send)),
                  (0x5002, conn, SqOpcode.RDMA_WRITE, CqStatus.SUCCESS, len(write)),
                  (0x5003, conn, SqOpcode.RDMA_READ, CqStatus.SUCCESS, len(src)),
                  (0x6001, 6, SqOpcode.RDMA_READ, CqStatus.BAD_REQUEST, 0)], sq
    await tb.settle()
    for addr, n in ((0x60000, 1024), (base_a, 0x4000), (base_b, 0x4000)):
        assert tb.ram.read(addr, n) == mem.read(addr, n), hex(addr)
    assert tb.ram.read(0x60000, len(send)) == send and tb.ram.read(base_b + 0x10, len(src)) == src
    assert tb.ram.read(base_a + 0x800, len(write2)) == write2
    assert (await tb.fields("RRQ_STATUS"))["valid"] == 0 and (await tb.fields("TERM_STATUS"))["valid"] == 0
    assert (await tb.fields("ERR_STATUS"))["pending"] == 0
    assert await tb.rd("TX_FPDUS") == len(ulpdus) + len(resp)
    assert await tb.rd("RX_FPDUS") == len(ulpdus) + len(resp)
    assert (await tb.fields("SQ_STATUS")) == {"full": 0, "busy": 0}


@cocotb.test()
async def bad_doorbell_and_cq_overflow(dut):
    """A DOORBELL for a connection the core does not have completes at once with BAD_REQUEST
    (CQ_INFO.CONN as given, even unsignaled) and never reaches the transmit path; a host that
    stops popping loses completions (CQ_STATUS.OVERFLOW, W1C) instead of stalling the data
    paths: with the queue full a Send still goes out, is placed and counted, and the queue
    keeps its oldest completions in order."""
    tb = CoreTB(dut)
    await tb.start()
    await tb.wr("DP_CTRL", loopback=1)
    await tb.wr("CTRL", enable=1, clear_counters=1)
    depth = tb.params.get("cq_depth", 16)
    for conn, wr_id in ((tb.N, 0xBAD0), (0xFFFF, 0xBAD1)):
        await tb.post(conn, SqOpcode.SEND, length=8, wr_id=wr_id, signaled=0)
        (got,) = await tb.cq_wait(1)
        assert (got["conn"], got["queue"], got["opcode"], got["status"], got["wr_id"], got["length"]) == \
            (conn, CqQueue.SQ, SqOpcode.SEND, CqStatus.BAD_REQUEST, wr_id, 0), got
        assert await tb.cq_pop() is None
    assert await tb.rd("TX_FPDUS") == 0

    # fill the queue with error completions, nobody pops: the extra ones are lost
    for k in range(depth + 4):
        await tb.post(tb.N + 1, SqOpcode.RDMA_WRITE, wr_id=k)
    await tb.settle()
    assert (await tb.fields("CQ_STATUS"))["overflow"] == 1
    # the data path does not wait for the host: a Send is sent, looped back and placed
    conn, dd = 2, dict(markers=1, crc=1, phase=0, mulpdu=256)
    await tb.program(conn, tx=dd, rx=dd)
    send = bytes(range(200))
    tb.ram.write(0x20000, send)
    await tb.rq_post(conn, 0x30000, 256, 0xE001)
    await tb.post(conn, SqOpcode.SEND, laddr=0x20000, length=len(send), wr_id=0x5001)
    for _ in range(100):
        if tb.ram.read(0x30000, len(send)) == send:
            break
        await tb.cycles(20)
    assert tb.ram.read(0x30000, len(send)) == send
    assert await tb.rd("TX_FPDUS") == 1 and await tb.rd("RX_FPDUS") == 1
    kept = []
    while (c := await tb.cq_pop()) is not None:
        kept.append(c["wr_id"])
    # the oldest completions, in order (the queue holds depth entries, one more at most)
    assert depth <= len(kept) <= depth + 1 and kept == list(range(len(kept))), kept
    await tb.wr("CQ_STATUS", overflow=1)
    assert (await tb.fields("CQ_STATUS"))["overflow"] == 0
    # with room again, completions are kept
    await tb.rq_post(conn, 0x30400, 256, 0xE002)
    await tb.post(conn, SqOpcode.SEND, laddr=0x20000, length=4, wr_id=0x5002)
    got = [(c["queue"], c["wr_id"], c["status"], c["length"]) for c in await tb.cq_wait(2)]
    assert sorted(got) == [(CqQueue.SQ, 0x5002, CqStatus.SUCCESS, 4),
                           (CqQueue.RQ, 0xE002, CqStatus.SUCCESS, 4)], got
    assert (await tb.fields("CQ_STATUS"))["overflow"] == 0


@cocotb.test()
async def connection_state_gates_transmission(dut):
    """The MPA fence in hardware: work posted to a connection in WAIT_RX (or IDLE) waits,
    nothing of it leaves, while a connection in RTS sends; the connection's first good FPDU
    (here a Send on rx_wire) opens the fence and the held work goes out, in order. A
    connection set to IDLE holds its work until SET_STATE RTS."""
    tb = CoreTB(dut)
    await tb.start()
    rng = random.Random(tb.rng.getrandbits(32))
    await tb.wr("DP_CTRL", host_reads=0)
    await tb.wr("CTRL", enable=1, clear_counters=1)
    dd = dict(markers=1, crc=1, phase=0, mulpdu=400)
    fenced, open_, idle = 4, 5, 6
    await tb.program(fenced, tx=dd, rx=dd, state=ConnState.WAIT_RX)
    await tb.program(open_, tx=dd, rx=dd)
    await tb.program(idle, tx=dd, rx=dd, state=ConnState.IDLE)
    msgs = {k: rng.randbytes(100 + 10 * k) for k in range(4)}
    for k, data in msgs.items():
        tb.ram.write(0x20000 + 0x1000 * k, data)
    await tb.post(fenced, SqOpcode.SEND, laddr=0x20000, length=len(msgs[0]), wr_id=0xF0)
    await tb.post(fenced, SqOpcode.SEND, laddr=0x21000, length=len(msgs[1]), wr_id=0xF1)
    await tb.post(idle, SqOpcode.SEND, laddr=0x23000, length=len(msgs[3]), wr_id=0x60)
    await tb.post(open_, SqOpcode.SEND, laddr=0x22000, length=len(msgs[2]), wr_id=0x50)
    await tb.cycles(400)
    assert await tb.rd("TX_FPDUS") == 1                  # the open connection's Send only
    c = await tb.cq_pop()
    assert (c["conn"], c["wr_id"], c["status"]) == (open_, 0x50, CqStatus.SUCCESS), c
    assert await tb.cq_pop() is None
    assert (await tb.conn_status(fenced))["state"] == ConnState.WAIT_RX

    # the peer's first FPDU (an empty Send into a posted buffer) opens the fence
    await tb.rq_post(fenced, 0x40000, 64, 0xE0)
    enc = FpduEncoder(markers=True, crc=True, marker_origin=origin_of(dd["phase"]))
    await _drive_segments(tb, fenced, enc.encode(TxStream(mulpdu=400).send(b"")[0]), rng)
    got = [(c["conn"], c["queue"], c["wr_id"], c["status"]) for c in await tb.cq_wait(3)]
    assert (await tb.conn_status(fenced))["state"] == ConnState.RTS
    assert sorted(got) == [(fenced, CqQueue.SQ, 0xF0, CqStatus.SUCCESS), (fenced, CqQueue.SQ, 0xF1, CqStatus.SUCCESS),
                           (fenced, CqQueue.RQ, 0xE0, CqStatus.SUCCESS)], got
    assert [g[2] for g in got if g[1] == CqQueue.SQ] == [0xF0, 0xF1]
    assert await tb.rd("TX_FPDUS") == 3
    await tb.cycles(100)
    assert await tb.rd("TX_FPDUS") == 3                  # the idle connection still holds
    await tb.wr("CONN_SEL", conn=idle)
    await tb.wr("CTX_STATE", state=ConnState.RTS)
    await tb.wr("CTX_CMD", set_state=1)
    (c,) = await tb.cq_wait(1)
    assert (c["conn"], c["wr_id"], c["status"]) == (idle, 0x60, CqStatus.SUCCESS), c
    assert await tb.rd("TX_FPDUS") == 4
