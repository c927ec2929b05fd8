"""rnic.sim.device: the interactive Verilated RnicCore as a driver device (``--device sim``).

Register access through the harness's AXI4-Lite master; the stream commands (tx_ulpdu ->
tx_wire, rx_wire -> rx_ulpdu with DP_CTRL.BYPASS) against rnic.host.model.fpdu on two connections with
segments cut anywhere and interleaved; a CRC error -> the ERR registers; the register data
port (loopback, source, sink) with the rnic.host.driver.regs sequences alone; the host memory on m_axi
(MR/MW) and the DDP/RDMAP receive path placing Sends and RDMA Writes into it, completions,
a tagged error with its Terminate, against rnic.host.model.sink; the transmit path reading host memory
on m_axi_rd (an RDMA Write and an RDMA Read looped back); the device kind in open_device and
the CLI; the start-up time of a cached build.
"""

import json
import os
import random
import subprocess
import sys
import time

import pytest

from rnic.host.driver import regs
from rnic.host.driver.device import TransportError, open_device, parse_device_spec
from rnic.host.spec.errors import Layer, MpaError
from rnic.host.model.fpdu import FpduEncoder
from rnic.host.model import sink as hs
from rnic.host.spec.regmap import VERSION_MINOR, CqQueue, DpCrc, DpError, SqOpcode
from rnic.host.driver.regs import MpaDirection, Registers
from rnic.host.model.segment import TxStream
from rnic.sim.device import MEM_SIZE, SimDevice, core_sources, device_executable


@pytest.fixture(scope="module")
def sim():
    dev = SimDevice(width=8, connections=16)
    r = Registers(dev)
    r.probe()
    r.soft_reset()
    r.enable()
    yield dev
    dev.close()


def ulpdu(rng, n):
    return bytes([0xC1 if n < 18 or rng.random() < 0.5 else 0x41]) + rng.randbytes(n - 1)


def test_registers_through_the_harness(sim):
    r = Registers(sim)
    info = r.probe()
    assert (info.width, info.connections, info.stags, info.minor) == (8, 16, 256, VERSION_MINOR)
    r.write("SCRATCH", 0xA5A55A5A)
    assert r.read("SCRATCH") == 0xA5A55A5A
    assert r.fields("STATUS")["ready"] == 1
    with pytest.raises(TransportError, match="SLVERR"):
        sim.read32(0xFFC)
    with pytest.raises(TransportError, match="SLVERR"):
        sim.write32(0xFFC, 1)
    with pytest.raises(ValueError):
        sim.push_ulpdu(16, b"x")
    with pytest.raises(ValueError):
        sim.push_segment(0, b"")
    assert sim.cycles > 0 and "sim:width=8" in sim.name


def test_streams_against_the_model(sim):
    rng = random.Random(7)
    r = Registers(sim)
    cfg = {2: MpaDirection(True, True, 508, 4000), 9: MpaDirection(False, True, 0, 4000),
           11: MpaDirection(True, False, 64, 4000)}
    for conn, d in cfg.items():
        r.program_connection(conn, tx=d, rx=d)
    r.write("CTRL", enable=1, clear_counters=1)
    r.dp_configure(bypass=True)
    enc = {c: FpduEncoder(markers=d.markers, crc=d.crc, marker_origin=(-d.phase) % 512)
           for c, d in cfg.items()}
    sent = {c: [] for c in cfg}
    wire = {c: bytearray() for c in cfg}
    markers = 0
    for _ in range(30):
        conn = rng.choice(list(cfg))
        u = ulpdu(rng, rng.choice([14, 18, 100, 600, rng.randrange(18, 1500)]))
        markers += len(enc[conn].layout(len(u)).markers)
        want = enc[conn].encode(u)
        got = sim.transmit(conn, u, expect=len(want))
        assert got == want
        sent[conn].append(u)
        wire[conn] += got
    # receive: every connection's stream cut into random segments, interleaved
    cuts = []
    for conn, w in wire.items():
        pos = 0
        while pos < len(w):
            n = rng.choice([1, 2, 5, 64, 333, 1460])
            cuts.append((conn, bytes(w[pos:pos + n])))
            pos += n
    order = []
    queues = {c: [x for x in cuts if x[0] == c] for c in cfg}
    while any(queues.values()):
        c = rng.choice([c for c, q in queues.items() if q])
        order.append(queues[c].pop(0))
    for conn, seg in order:
        sim.push_segment(conn, seg)
        if rng.random() < 0.3:
            sim.run()
    sim.run()
    for conn in cfg:
        units = sim.take_rx(conn)
        assert [u.data for u in units] == sent[conn]
        assert all(u.error == DpError.NONE and u.crc == (DpCrc.OK if cfg[conn].crc else DpCrc.UNCHECKED)
                   for u in units)
    c = r.counters()
    total = sum(len(w) for w in wire.values())
    assert c["tx_fpdus"] == c["rx_fpdus"] == 30 and c["tx_markers"] == markers
    assert c["tx_octets"] == c["rx_octets"] == total
    assert c["rx_crc_errors"] == 0
    r.dp_configure()


def test_crc_error_sets_the_error_registers(sim):
    r = Registers(sim)
    d = MpaDirection(True, True, 0, 4000)
    r.program_connection(12, tx=d, rx=d)
    r.dp_configure(bypass=True)
    r.clear("ERR_STATUS")
    before = r.read("RX_CRC_ERRORS")
    enc = FpduEncoder(markers=True, crc=True)
    good, bad = b"\x41" + bytes(40), b"\x41" + bytes(range(200))
    w = bytearray(enc.encode(good) + enc.encode(bad))
    w[-20] ^= 1
    units = sim.receive(12, bytes(w))
    assert [(u.data, u.crc, u.error) for u in units][0] == (good, DpCrc.OK, DpError.NONE)
    assert (units[1].crc, units[1].error) == (DpCrc.BAD, DpError.CRC)
    e = r.pop_error()
    assert (e.conn, e.tx, e.layer, e.etype, e.ecode, e.overflow) == (12, False, Layer.LLP, 0, MpaError.CRC,
                                                                    False)
    assert r.read("RX_CRC_ERRORS") == before + 1 and r.pop_error() is None
    st = r.connection_status(12)
    assert st["state"] == regs.ConnState.ERROR and st["ecode"] == MpaError.CRC
    assert sim.receive(12, enc.encode(good)) == []          # nothing more on that connection
    r.dp_configure()


def test_host_memory(sim):
    assert sim.mem_size == MEM_SIZE == 1 << 22
    sim.mem_write(0x1234, b"hello")
    assert sim.mem_read(0x1230, 12) == bytes(4) + b"hello" + bytes(3)
    big = random.Random(1).randbytes(70000)
    sim.mem_write(MEM_SIZE - len(big), big)
    assert sim.mem_read(MEM_SIZE - len(big), len(big)) == big
    for bad in ((MEM_SIZE - 2, 3), (-1, 1)):
        with pytest.raises(ValueError):
            sim.mem_read(*bad)
    with pytest.raises(ValueError):
        sim.mem_write(MEM_SIZE, b"x")


def test_receive_path_places_into_host_memory(sim):
    """DP_CTRL 0: STag and receive buffers written with rnic.host.driver.regs, FPDUs pushed on rx_wire; the
    Sends and the RDMA Write land in the harness's host memory as rnic.host.model.sink places them, CQ_*
    as its completions; a write to an unknown STag: DDP 1/1/0, TERM_* with the model's octets."""
    rng = random.Random(11)
    r = Registers(sim)
    r.dp_configure()
    r.write("CTRL", enable=1)
    conn = 7
    d = MpaDirection(True, True, 96, 2000)
    r.program_connection(conn, tx=d, rx=d, ird=4)
    r.clear("ERR_STATUS")
    while r.poll_cq() is not None or r.pop_terminate() is not None:
        pass
    mem = hs.Memory()
    model = hs.Sink(memory=mem, stream=conn, ird=4)
    stag, base = 0x00C0FF07, 0x80000
    r.write_stag(stag % 256, stag=stag, base=base, length=0x8000, conn=conn, remote_write=True)
    model.register_region(stag=stag, base=base, length=0x8000, access=hs.Access.REMOTE_WRITE)
    for k, (addr, length) in enumerate(((0x10000, 4000), (0x11000, 100))):
        assert r.post_recv(conn, addr, length, 0x700 + k)
        model.post_receive(addr=addr, length=length, buffer_id=0x700 + k)
    tx = TxStream(mulpdu=2000)
    enc = FpduEncoder(markers=True, crc=True, marker_origin=(-96) % 512)
    msgs = (tx.send(rng.randbytes(3500)) + tx.write(rng.randbytes(5000), stag=stag, to=base + 77)
            + tx.send(rng.randbytes(99), solicited=True))
    events = []
    wire = b""
    for u in msgs:
        events += model.receive(u)
        wire += enc.encode(u)
    pos = 0
    while pos < len(wire):
        n = rng.choice([7, 300, 1460])
        sim.push_segment(conn, wire[pos:pos + n])
        pos += n
    sim.run()
    for addr, n in ((0x10000, 4000), (0x11000, 100), (base, 0x8000)):
        assert sim.mem_read(addr, n) == mem.read(addr, n), hex(addr)
    want = [e for e in events if isinstance(e, hs.SendComplete)]
    assert len(want) == 2
    for e in want:
        c = r.poll_cq()
        assert (c.conn, c.queue, c.wr_id, c.length, c.msn, c.status) == (conn, CqQueue.RQ, e.buffer_id,
                                                                         e.length, e.msn, 0)
        assert c.opcode == (SqOpcode.SEND_SE if e.solicited else SqOpcode.SEND) and c.solicited == e.solicited
    assert r.poll_cq() is None
    # an unknown STag: nothing placed, the error and its Terminate
    before = sim.mem_read(0, MEM_SIZE)
    bad = tx.write(b"x" * 64, stag=0x00BAD007, to=base)
    events = model.receive(bad[0])
    assert isinstance(events[0], hs.Error)
    sim.receive(conn, enc.encode(bad[0]))
    assert sim.mem_read(0, MEM_SIZE) == before
    e = r.pop_error()
    assert (e.conn, e.tx, e.layer, e.etype, e.ecode) == (conn, False, 1, 1, 0)
    t = r.pop_terminate()
    assert (t.conn, t.received, t.layer, t.etype, t.ecode) == (conn, False, 1, 1, 0)
    assert t.payload == events[0].terminate[18:]
    assert r.connection_status(conn)["state"] == regs.ConnState.ERROR
    assert r.pop_terminate() is None


def test_data_port_with_registers_alone(sim):
    """What a board does over its UART: program, loop back through the data port, read back."""
    rng = random.Random(3)
    r = Registers(sim)
    d = MpaDirection(True, True, 200, 3000)
    r.program_connection(5, tx=d, rx=d)
    r.program_connection(6, tx=MpaDirection(), rx=MpaDirection(mulpdu=3000))
    r.dp_configure(loopback=True, source=True, sink=True)
    try:
        for i in range(6):
            conn = (5, 6)[i % 2]
            u = ulpdu(rng, rng.randrange(14, 700))
            assert r.dp_send(conn, u)
            sim.run(idle=2000)          # no port moves in this mode: clock long enough to drain
            got = r.dp_recv()
            assert got == regs.DpUlpdu(conn, u, DpCrc.OK if conn == 5 else DpCrc.UNCHECKED, DpError.NONE)
        assert r.dp_recv() is None
        assert not r.dp_send(5, bytes(4 * 513))          # more than the FIFO holds
        out = sim.run()
        assert out.tx == [] and out.rx == []            # the ports stayed idle
    finally:
        r.dp_configure()


def test_device_kind_and_spec():
    dev = open_device("sim:width=8,connections=16")
    try:
        assert (dev.identity.width, dev.identity.connections) == (8, 16)
        assert dev.datapath_factory is not None and dev.spec == "sim:width=8,connections=16"
        dev.reset()
        assert dev.status()["ready"] and dev.status()["enabled"]
    finally:
        dev.close()
    assert parse_device_spec("sim:width=8") == ("sim", "width=8")
    for bad in ("sim:speed=1", "sim:width=x", "sim:width=12"):
        with pytest.raises(ValueError):
            open_device(bad)


def test_cli_regs_and_status():
    def rnic(*args):
        p = subprocess.run([sys.executable, "-m", "rnic.host.cli", *args], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        return p.stdout
    dump = json.loads(rnic("regs", "dump", "--device", "sim", "--json"))
    names = [x["name"] for x in dump["registers"]]
    assert names[0] == "ID" and "DP_RX_STATUS" in names and dump["registers"][0]["value"] == regs.MAGIC
    st = json.loads(rnic("status", "--device", "sim", "--json"))
    assert st["device"] == "sim" and st["identity"]["width"] == 8 and st["ready"]
    assert st["counters"]["rx_fpdus"] == 0 and st["last_error"] is None
    assert rnic("status", "--device", "sim").startswith(f"device sim: RNIC map 0.{VERSION_MINOR}, W=8")


def test_cached_start_is_quick(sim):
    """A second device of the same parameters reuses the built executable: nothing is rebuilt
    (its file is untouched) and it starts in seconds, not the minute a build takes. (The
    bounds leave room for a machine busy with other work.)"""
    built = os.stat(sim.exe).st_mtime_ns
    t0 = time.monotonic()
    exe = device_executable(width=8, connections=16)
    assert exe == sim.exe and time.monotonic() - t0 < 5.0
    t0 = time.monotonic()
    with SimDevice(width=8, connections=16) as dev:
        assert Registers(dev).probe().width == 8
    assert time.monotonic() - t0 < 10.0
    assert os.stat(sim.exe).st_mtime_ns == built
    names = set(core_sources())
    assert {"rnic.hdl.rnic_core", "rnic.hdl.mpa_tx", "rnic.hdl.mpa_rx", "rnic.hdl.regbank",
            "rnic.host.spec.regmap"} <= names
    assert not any(name.startswith("rnic.hdl.top") for name in names)
    assert all(p.is_file() for p in core_sources().values())


def test_transmit_path_reads_host_memory(sim):
    """DP_CTRL.LOOPBACK with the DDP/RDMAP paths: an RDMA Write and an RDMA Read posted with
    rnic.host.driver.regs (post_send) read their payload from the harness's host memory on m_axi_rd, loop
    back into the receive path and land where rnic.host.model.sink places them; CQ_* has their
    completions (queue SQ, their ids)."""
    rng = random.Random(5)
    r = Registers(sim)
    r.dp_configure(loopback=True)
    try:
        conn = 9
        d = MpaDirection(True, True, 40, 500)
        r.program_connection(conn, tx=d, rx=d, ird=2, ord=2)
        r.clear("ERR_STATUS")
        while r.poll_cq() is not None or r.pop_terminate() is not None:
            pass
        mem = hs.Memory()
        model = hs.Sink(memory=mem, stream=conn, ird=2)
        stag, base = 0x00D00D09, 0xA0000
        r.write_stag(stag % 256, stag=stag, base=base, length=0x4000, conn=conn, remote_read=True,
                     remote_write=True)
        model.register_region(stag=stag, base=base, length=0x4000,
                              access=hs.Access.REMOTE_READ | hs.Access.REMOTE_WRITE)
        src, rsrc = rng.randbytes(1300), rng.randbytes(600)
        sim.mem_write(0xB0000, src)
        sim.mem_write(base + 0x2000, rsrc)
        mem.write(base + 0x2000, rsrc)
        assert r.post_send(conn, SqOpcode.RDMA_WRITE, laddr=0xB0000, length=len(src), rstag=stag,
                           rto=base + 0x10, wr_id=0x901)
        sim.run(idle=2000)              # LOOPBACK moves no port: clock long enough to drain
        assert r.post_send(conn, SqOpcode.RDMA_READ, laddr=base + 0x3000, length=len(rsrc), lstag=stag,
                           rstag=stag, rto=base + 0x2000, wr_id=0x902)
        out = sim.run(idle=2000)
        assert out.tx == []                             # looped back inside the core
        tx = TxStream(mulpdu=500)
        for u in tx.write(src, stag=stag, to=base + 0x10):
            model.receive(u)
        for u in TxStream(mulpdu=500).read_response(rsrc, stag=stag, to=base + 0x3000):
            model.receive(u)
        assert sim.mem_read(base, 0x4000) == mem.read(base, 0x4000)
        got = [r.poll_cq(), r.poll_cq()]
        assert [(c.queue, c.wr_id, c.opcode, c.status, c.length) for c in got] == [
            (CqQueue.SQ, 0x901, SqOpcode.RDMA_WRITE, 0, len(src)),
            (CqQueue.SQ, 0x902, SqOpcode.RDMA_READ, 0, len(rsrc))]
        assert r.poll_cq() is None and r.pop_error() is None
    finally:
        r.dp_configure()
