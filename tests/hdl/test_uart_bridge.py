# amaranth: UnusedElaboratable=no
"""The UART (rnic.hdl.uart) and the UART-to-AXI4-Lite bridge (rnic.hdl.uart_bridge), in Amaranth's simulator.

The bridge tests put the host driver on one end and the register bank on the
other: rnic.host.driver.device.Device -> rnic.host.driver.uart.UartTransport (the protocol
encoder/decoder) -> an in-memory serial pipe -> octets bit-banged onto the
simulated ``rx`` pin -> UARTBridge -> AXI4-Lite -> RegisterBank, and back
from the ``tx`` pin. The host runs in a thread; the simulation runs in the
test's thread and advances the clock while the host waits.
"""

import queue
import random
import threading
import time

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from rnic.hdl.regbank import RegisterBank
from rnic.hdl.uart import UARTRx, UARTTx, uart_divisor
from rnic.hdl.uart_bridge import UARTBridge
from rnic.host.driver import regs
from rnic.host.driver.device import Device, TransportError
from rnic.host.spec.regmap import MAGIC, PULSE, REGMAP, RO, RW
from rnic.host.driver.uart import (STATUS_DECERR, STATUS_OKAY, STATUS_SLVERR, STATUS_TIMEOUT, Codec,
    UartTransport)

CLK = 8_000_000
BAUD = 2_000_000          # 4 clock cycles per bit: fast to simulate
DIV = CLK // BAUD
PARAMS = {"width": 8, "connections": 16, "stags": 64}
BREAK = object()


# -- the UART alone ---------------------------------------------------------------

def test_divisor():
    assert uart_divisor(125e6, 115200) == 1085
    assert uart_divisor(100e6, 3_000_000) == 33
    with pytest.raises(ValueError, match="too fast"):
        uart_divisor(10e6, 5_000_000)
    with pytest.raises(ValueError, match="off by"):
        uart_divisor(10e6, 1_400_000)      # 7.14 cycles per bit
    with pytest.raises(ValueError):
        UARTTx(divisor=3)


@pytest.mark.parametrize("divisor", [4, 5, 7])
def test_uart_loopback(divisor):
    """UARTTx -> UARTRx: every octet back, back to back, then a break: one framing error."""
    m = Module()
    m.submodules.tx = tx = UARTTx(divisor=divisor)
    m.submodules.rx = rx = UARTRx(divisor=divisor)
    line_low = [False]
    data = [random.Random(divisor).randrange(256) for _ in range(24)] + [0x00, 0xFF, 0x55]
    got, errors = [], []

    async def send(ctx):
        for b in data:
            ctx.set(tx.i.payload, b)
            ctx.set(tx.i.valid, 1)
            await ctx.tick().until(tx.i.ready)
        ctx.set(tx.i.valid, 0)
        await ctx.tick().until(~tx.busy)
        await ctx.tick().repeat(4 * divisor)
        line_low[0] = True                           # break: 30 bit times low
        await ctx.tick().repeat(30 * divisor)
        line_low[0] = False
        await ctx.tick().repeat(20 * divisor)

    async def wire(ctx):
        async for _, _, t in ctx.tick().sample(tx.tx):
            ctx.set(rx.rx, 0 if line_low[0] else t)

    async def receive(ctx):
        ctx.set(rx.o.ready, 1)
        async for _, _, valid, payload, ferr, ovr in ctx.tick().sample(
                rx.o.valid, rx.o.payload, rx.framing_error, rx.overrun):
            if valid:
                got.append(payload)
            if ferr:
                errors.append("framing")
            if ovr:
                errors.append("overrun")

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(send)
    sim.add_process(wire)
    sim.add_process(receive)
    sim.run()
    assert got == data
    assert errors == ["framing"]


# -- the bridge ------------------------------------------------------------------------

class PipePort:
    """Host end of an in-memory serial line (the port interface UartTransport uses)."""

    def __init__(self):
        self.to_dev = queue.Queue()
        self.from_dev = queue.Queue()
        self.breaks = 0

    def write(self, data):
        for b in data:
            self.to_dev.put(b)

    def read(self, n, timeout):
        out = bytearray()
        deadline = time.monotonic() + timeout
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                out.append(self.from_dev.get(timeout=left))
            except queue.Empty:
                break
        return bytes(out)

    def discard_input(self):
        while True:
            try:
                self.from_dev.get_nowait()
            except queue.Empty:
                return

    def send_break(self):
        self.breaks += 1
        self.to_dev.put(BREAK)

    def close(self):
        pass


def run_bridge(host, *, slave="bank", bridge_kw=None, timeout_s=120, top=None):
    """Simulate UARTBridge (+ RegisterBank) while ``host(port, bank)`` runs in a thread.

    ``top``: simulate this component instead (it has ``rx``/``tx`` UART pins).
    Returns what ``host`` returned; re-raises what it raised.
    """
    m = Module()
    bank = None
    if top is not None:
        m.submodules.top = bridge = top
    else:
        m.submodules.bridge = bridge = UARTBridge(clk_freq=CLK, baud=BAUD, addr_width=12,
                                                  frame_timeout=200 / CLK, **(bridge_kw or {}))
    if top is None and slave == "bank":
        m.submodules.bank = bank = RegisterBank(**PARAMS)
        wiring.connect(m, bridge.m_axil, bank.s_axil)
    port = PipePort()
    result, failure = {}, []
    done = threading.Event()

    def host_thread():
        try:
            result["value"] = host(port, bank)
        except BaseException as e:       # noqa: BLE001 - re-raised in the test thread
            failure.append(e)
        finally:
            done.set()

    async def drive_rx(ctx):
        ctx.set(bridge.rx, 1)
        started = time.monotonic()
        while True:
            try:
                item = port.to_dev.get_nowait()
            except queue.Empty:
                if done.is_set():
                    return
                if time.monotonic() - started > timeout_s:
                    raise TimeoutError("host side did not finish")
                await ctx.tick().repeat(DIV)
                continue
            if item is BREAK:
                ctx.set(bridge.rx, 0)
                await ctx.tick().repeat(30 * DIV)
                ctx.set(bridge.rx, 1)
                await ctx.tick().repeat(2 * DIV)
                continue
            for bit in [0] + [(item >> i) & 1 for i in range(8)] + [1]:
                ctx.set(bridge.rx, bit)
                await ctx.tick().repeat(DIV)

    async def watch_tx(ctx):
        prev = 1
        while True:
            await ctx.tick()
            t = ctx.get(bridge.tx)
            if prev and not t:                          # start bit
                await ctx.tick().repeat(DIV // 2)
                value = 0
                for i in range(8):
                    await ctx.tick().repeat(DIV)
                    value |= ctx.get(bridge.tx) << i
                await ctx.tick().repeat(DIV)
                assert ctx.get(bridge.tx) == 1, "stop bit"
                port.from_dev.put(value)
                t = 1
            prev = t

    sim = Simulator(m)
    sim.add_clock(1 / CLK)
    sim.add_testbench(drive_rx)
    sim.add_testbench(watch_tx, background=True)
    thread = threading.Thread(target=host_thread, daemon=True)
    thread.start()
    sim.run()
    thread.join(5)
    if failure:
        raise failure[0]
    return result.get("value")


def _transport(port):
    return UartTransport(port, timeout=30.0, retries=1, name="uart:sim")


def _raw(port, request, n, timeout=30.0):
    port.write(request)
    return port.read(n, timeout)


def test_bridge_register_map():
    """The whole register map over UART, against rnic.host.driver.regs.BankModel: reads, RW writes, W1C, pulses."""
    def host(port, bank):
        t = _transport(port)
        dev = Device(t, spec="uart:sim")
        ident = dev.identify()
        model = regs.BankModel(**PARAMS)
        rng = random.Random(5044)
        checked = 0
        for r in REGMAP:
            assert t.read32(r.addr) == model.read32(r.addr), r.name
            if any(f.access is RW for f in r.fields):
                value = rng.getrandbits(32)
                t.write32(r.addr, value)
                model.write32(r.addr, value)
                assert t.read32(r.addr) == model.read32(r.addr), r.name
                t.write32(r.addr, 0)
                model.write32(r.addr, 0)
            elif r.name != "CTRL" and all(f.access in (RO, PULSE) for f in r.fields):
                # a write to a read-only register answers OKAY and changes nothing;
                # pulse registers fire only for 1 bits (0 here)
                t.write32(r.addr, 0)
                assert t.read32(r.addr) == model.read32(r.addr), r.name
            checked += 1
        # W1C with nothing pending reads 0 and writing 1 clears nothing
        t.write32(regs.ERR_STATUS_ADDR, 0xFFFFFFFF)
        assert t.read32(regs.ERR_STATUS_ADDR) == 0
        return ident, checked

    ident, checked = run_bridge(host)
    assert ident.width == 8 and ident.connections == 16 and ident.stags == 64
    assert checked == len(list(REGMAP))


def test_bridge_errors_and_status():
    """SLVERR for an unmapped register, DECERR beyond the bus, the status octet, the ping."""
    def host(port, bank):
        t = _transport(port)
        assert t.addr_width == 12
        assert t.read32(0) == MAGIC
        with pytest.raises(TransportError, match="SLVERR"):
            t.read32(0xFFC)
        with pytest.raises(TransportError, match="SLVERR"):
            t.write32(0x020, 1)
        with pytest.raises(TransportError, match="DECERR"):
            t.read32(0x1000)
        # raw frames: answer layout
        assert _raw(port, Codec.read(0x000), 6) == b"r" + MAGIC.to_bytes(4, "big") + bytes([STATUS_OKAY])
        assert _raw(port, Codec.read(0x2000), 6) == b"r\0\0\0\0" + bytes([STATUS_DECERR])
        assert _raw(port, Codec.write(0xFFC, 5), 2) == b"w" + bytes([STATUS_SLVERR])
        assert _raw(port, Codec.write(regs.SCRATCH_ADDR, 0x12345678), 2) == b"w\0"
        assert _raw(port, Codec.read(regs.SCRATCH_ADDR), 6) == b"r\x12\x34\x56\x78\0"
        assert _raw(port, Codec.ping(), 3) == b"p\x01\x0c"
    run_bridge(host)


def test_bridge_resync():
    """Garbage between frames is dropped; a partial frame times out; a break aborts a frame."""
    def host(port, bank):
        t = _transport(port)
        # garbage: no answer, then a normal access
        port.write(b"\x00\xffxyz\x13")
        assert port.read(1, 0.5) == b""
        assert t.read32(0) == MAGIC
        # partial write frame, then silence longer than the frame timeout (200 cycles)
        port.write(Codec.write(regs.SCRATCH_ADDR, 0xDEADBEEF)[:4])
        assert port.read(1, 1.0) == b""
        assert t.read32(regs.SCRATCH_ADDR) == 0            # the write never happened
        # partial frame aborted by a break: the octets after it start a new frame
        port.write(Codec.write(regs.SCRATCH_ADDR, 0xDEADBEEF)[:5])
        port.send_break()
        assert _raw(port, Codec.read(regs.SCRATCH_ADDR), 6) == b"r\0\0\0\0\0"
        t.write32(regs.SCRATCH_ADDR, 0xCAFE)
        assert t.read32(regs.SCRATCH_ADDR) == 0xCAFE
    run_bridge(host)


def test_bridge_write_out_of_step_reported():
    def host(port, bank):
        t = _transport(port)
        port.write(Codec.ping())                           # leaves 'p' 01 0c in front of the answer
        time.sleep(0.5)
        with pytest.raises(TransportError, match="out of step"):
            t.write32(regs.SCRATCH_ADDR, 1)
        assert t.read32(0) == MAGIC                         # resynchronised
    run_bridge(host)


def test_bridge_bus_timeout():
    """A slave that never answers: TIMEOUT status after bus_timeout cycles, the bridge goes on."""
    def host(port, bank):
        assert _raw(port, Codec.ping(), 3) == b"p\x01\x0c"
        assert _raw(port, Codec.read(0x10), 6) == b"r\0\0\0\0" + bytes([STATUS_TIMEOUT])
        assert _raw(port, Codec.write(0x10, 1), 2) == b"w" + bytes([STATUS_TIMEOUT])
        assert _raw(port, Codec.ping(), 3) == b"p\x01\x0c"
    run_bridge(host, slave=None, bridge_kw={"bus_timeout": 64})


@pytest.mark.parametrize("core_name", ["framer", "rnic"])
def test_board_logic_over_uart(core_name):
    """The board top's logic (rnic.hdl.top.BoardLogic) from the driver, over the UART: core
    registers at 0x0000, board registers at 0x1000, pseudo-random ULPDUs from the source through
    the core (TX framer; with RnicCore, looped back from tx_wire into the RX deframer) into the
    sink, counted on both sides and, with RnicCore, without a receive error."""
    from rnic.hdl.rnic_core import RnicCore
    from rnic.hdl.top import BOARD_BASE, BOARD_ID, BoardLogic, FramerCore

    core = FramerCore if core_name == "framer" else RnicCore
    dut = BoardLogic(width=4, connections=4, clk_freq=CLK, baud=BAUD, core=core,
                     frame_timeout=200 / CLK)

    def host(port, _):
        t = _transport(port)
        assert t.addr_width == 13
        dev = Device(t, spec="uart:sim")
        ident = dev.identify()
        assert (ident.width, ident.connections) == (4, 4)
        brd = lambda i: t.read32(BOARD_BASE + 4 * i)            # noqa: E731
        assert brd(0) == BOARD_ID and brd(1) == CLK
        assert (brd(2) >> 3) & 1 == (core_name == "rnic")     # which core
        with pytest.raises(TransportError, match="SLVERR"):
            brd(8)
        with pytest.raises(TransportError, match="DECERR"):
            t.read32(0x2000)                                    # beyond the 13-bit bus
        assert t.mem_size == 0                                  # no host memory
        # wait for READY, connection 0 with markers and CRC both ways, then the data path on
        for _ in range(50):
            if t.read32(regs.STATUS_ADDR) & 1:
                break
        t.write32(regs.CONN_SEL_ADDR, 0)
        for name in ("CTX_TX", "CTX_RX"):
            t.write32(getattr(regs, f"{name}_ADDR"),
                      regs.encode(name, markers=1, crc=1, phase=0, mulpdu=2048))
        t.write32(regs.CTX_CMD_ADDR, regs.encode("CTX_CMD", commit=1))
        t.write32(regs.CTRL_ADDR, regs.encode("CTRL", enable=1))
        t.write32(BOARD_BASE + 0x0C, 0x0000_0001)               # source on, connection mask 0
        assert brd(3) == 1
        time.sleep(1.0)
        t.write32(BOARD_BASE + 0x0C, 0)                         # source off
        time.sleep(0.3)                                         # let the pipeline drain
        return {
            "tx_beats": brd(4), "rx_beats": brd(5), "sig": brd(6), "bridge_errors": brd(7),
            "tx_fpdus": t.read32(regs.TX_FPDUS_ADDR), "tx_octets": t.read32(regs.TX_OCTETS_LO_ADDR),
            "rx_fpdus": t.read32(regs.RX_FPDUS_ADDR), "err_status": t.read32(regs.ERR_STATUS_ADDR),
            "err_count": t.read32(regs.ERR_COUNT_ADDR), "err_info": hex(t.read32(regs.ERR_INFO_ADDR)),
            "rx_crc_errors": t.read32(regs.RX_CRC_ERRORS_ADDR),
            "rx_marker_errors": t.read32(regs.RX_MARKER_ERRORS_ADDR),
            "rx_length_errors": t.read32(regs.RX_LENGTH_ERRORS_ADDR),
            "rx_octets": t.read32(regs.RX_OCTETS_LO_ADDR),
        }

    got = run_bridge(host, top=dut)
    assert got["tx_beats"] > 0 and got["rx_beats"] > 0 and got["sig"] != 0, got
    assert got["tx_fpdus"] > 0 and got["tx_octets"] > 0, got
    assert got["bridge_errors"] == 1, got                      # the break that resynchronised
    if core_name == "rnic":
        assert got["rx_octets"] == got["tx_octets"], str(got)     # the loopback carried it all
        assert got["rx_fpdus"] > 0 and got["rx_fpdus"] <= got["tx_fpdus"], str(got)
        assert got["err_status"] == 0 and got["err_count"] == 0, str(got)


def test_board_logic_host_memory_over_uart():
    """A board top's host memory (BoardLogic ``memory``) from the driver, over the UART: the
    bridge's bus grows to 14 bits, the core's and the board's registers stay where they were,
    and UartTransport reads and writes the memory at any octet address and length, the words
    around a partial one kept, nothing beyond its end."""
    from rnic.hdl.rnic_core import RnicCore
    from rnic.hdl.top import BOARD_BASE, BOARD_ID, BoardLogic
    from rnic.host.spec.board import HMEM_ADDR, HOST_MEMORY_BASE

    dut = BoardLogic(width=4, connections=4, clk_freq=CLK, baud=BAUD, core=RnicCore,
                     frame_timeout=200 / CLK, memory=64)
    with pytest.raises(ValueError, match="memory needs a core with AXI4 masters"):
        from rnic.hdl.top import FramerCore
        BoardLogic(width=4, connections=4, clk_freq=CLK, core=FramerCore, memory=1024)

    def host(port, _):
        t = _transport(port)
        assert t.addr_width == 14
        assert Device(t, spec="uart:sim").identify().connections == 4
        assert t.read32(BOARD_BASE) == BOARD_ID
        assert t.mem_size == 64
        rng = random.Random(5040)
        image = bytearray(rng.randbytes(64))
        t.mem_write(0, image)
        for addr, n in ((5, 11), (0, 3), (61, 3), (32, 4), (22, 1)):
            data = rng.randbytes(n)
            t.mem_write(addr, data)
            image[addr:addr + n] = data
        assert t.mem_read(0, 64) == bytes(image)
        assert t.mem_read(7, 9) == bytes(image[7:16])
        with pytest.raises(TransportError, match="beyond the board's host memory"):
            t.mem_write(62, b"abcd")
        assert t.mem_read(60, 4) == bytes(image[60:])       # unchanged
        t.write32(HOST_MEMORY_BASE + HMEM_ADDR, 0x27)
        assert t.read32(HOST_MEMORY_BASE + HMEM_ADDR) == 0x24    # a word's address
        with pytest.raises(TransportError, match="SLVERR"):
            t.read32(HOST_MEMORY_BASE + 0x10)
        return True

    assert run_bridge(host, top=dut)
