"""rnic.host.driver.device: driver sequences over the in-process model and over the TCP register server."""

import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from rnic.host.net import cm
from rnic.host.driver import device as driver
from rnic.host.driver import regs, transport
from rnic.host.driver.device import Device, WorkRequest, open_device, parse_device_spec
from rnic.host.driver.model import ModelTransport
from rnic.host.driver.transport import (DeviceError, DeviceMismatch, QueueFull, SocketTransport,
                                        TransportError, TransportServer)
from rnic.host.spec.errors import ErrorInfo
from rnic.host.spec.regmap import MAGIC, ConnState, CqQueue, CqStatus, SqOpcode


def negotiated_pair(pi=None, pr=None):
    a, b = socket.socketpair()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(cm.accept, b, pr or cm.ConnParams(timeout=3))
        ni = cm.connect(a, pi or cm.ConnParams(timeout=3))
        nr = fut.result(timeout=5)
    return ni, nr


@pytest.fixture
def model():
    t = ModelTransport(width=8, connections=16, stags=8, rq_depth=2, sq_depth=2)
    return t, Device(t, polls=5)


@pytest.fixture
def served():
    """A model served over TCP on 127.0.0.1 and a Device talking to it through SocketTransport."""
    t = ModelTransport(width=16, connections=4, stags=8)
    with TransportServer(t, 0).start() as server:
        dev = Device(SocketTransport("127.0.0.1", server.port, timeout=3.0))
        yield t, dev, server
        dev.close()


def exercise(t, dev):
    """Every driver sequence against a ModelTransport ``t`` (possibly remote through ``dev``)."""
    core = t.core
    ident = dev.identify()
    assert ident.magic == MAGIC and ident.major == regs.CONSTANTS["VERSION_MAJOR_RESET"]
    assert (ident.connections, ident.stags) == (t.bank.params["connections"], t.bank.params["stags"])
    dev.reset()
    assert dev.regs.field("CTRL", "ENABLE") == 1
    assert ("ctrl", "soft_reset", 1) in t.bank.pulses
    # connection context from a real MPA negotiation (markers one way, CRC, IRD/ORD)
    ni, nr = negotiated_pair(cm.ConnParams(markers=True, ird=3, ord=2, timeout=3),
                             cm.ConnParams(ird=5, ord=1, timeout=3))
    try:
        kw = dev.program_connection(1, nr)
        assert kw["state"] == ConnState.WAIT_RX            # responder before the first FPDU
        assert kw["tx"].markers is True and kw["rx"].markers is False and kw["tx"].crc
        assert dev.connection(1) == {"conn": 1, "state": "WAIT_RX", "busy": False, "error": None}
        ctx = core.contexts[1]
        assert (ctx.ird, ctx.ord, ctx.tx.mulpdu) == (nr.ird, nr.ord, nr.mulpdu)
        kw = dev.program_connection(2, ni.context())
        assert kw["state"] == ConnState.RTS and dev.connection(2)["state"] == "RTS"
    finally:
        ni.close()
        nr.close()
    dev.set_state(2, "closing")
    assert dev.connection(2)["state"] == "CLOSING"
    # STag table
    row = dev.register_stag(0x1234, base=0x1_0000_0000, length=4096, conn=1, remote_write=True,
                            addr=0x2000)
    assert core.stags[row] == {"stag": 0x1234, "base": 0x1_0000_0000, "addr": 0x2000, "length": 4096,
                               "valid": True, "remote_read": False, "remote_write": True,
                               "remote_inv": False, "conn": 1}
    assert dev.register_stag(0x1234, base=0, length=8, conn=1, remote_read=True) == row
    row2 = dev.register_stag(0x5678, base=0, length=8, conn=1)
    assert row2 != row
    dev.invalidate_stag(0x5678)
    assert core.stags[row2]["valid"] is False
    # queues
    dev.post_receive(1, 0x2000, 256, wr_id=7)
    dev.post_send(WorkRequest("rdma_write", conn=1, laddr=0x3000, length=16, rstag=0x99,
                              rto=1 << 40, wr_id=8))
    assert list(core.rq[1]) == [{"addr": 0x2000, "length": 256, "wr_id": 7}]
    wr = core.sq[1][0]
    assert (wr["opcode"], wr["rto"], wr["rstag"], wr["wr_id"], wr["signaled"]) == \
        (SqOpcode.RDMA_WRITE, 1 << 40, 0x99, 8, True)
    assert dev.poll_cq() == []
    core.complete(conn=1, wr_id=8, opcode=SqOpcode.RDMA_WRITE, queue=CqQueue.SQ, length=16)
    core.complete(conn=1, wr_id=7, opcode=SqOpcode.SEND_INV, queue=CqQueue.RQ, length=5,
                  invalidated=True, inv_stag=0x1234)
    assert not core.sq[1] and not core.rq[1]             # retired
    c1, c2 = dev.poll_cq()
    assert (c1.wr_id, c1.opcode, c1.queue, c1.status, c1.length, c1.conn) == \
        (8, SqOpcode.RDMA_WRITE, CqQueue.SQ, CqStatus.SUCCESS, 16, 1)
    assert (c2.wr_id, c2.queue, c2.invalidated, c2.inv_stag) == (7, CqQueue.RQ, True, 0x1234)
    # errors: the first is captured, later ones set OVERFLOW, popping clears
    assert dev.read_errors() == [] and dev.last_error() is None
    core.report_error(1, ErrorInfo.ddp(1, 0, "invalid STag"))
    core.report_error(2, (0, 2, 7))
    assert dev.last_error() == {"conn": 1, "tx": False, "layer": 1, "etype": 1, "ecode": 0,
                                "overflow": True}
    assert dev.connection(1)["error"] == {"layer": 1, "etype": 1, "ecode": 0}
    assert dev.connection(1)["state"] == "ERROR"
    (e,) = dev.read_errors()
    assert (e.conn, e.layer, e.etype, e.ecode, e.overflow) == (1, 1, 1, 0, True)
    assert dev.last_error() is None
    # counters, 64-bit ones joined
    core.set_counters(rx_fpdus=3, rx_octets=(5 << 32) | 7)
    core.add_counters(tx_fpdus=2)
    c = dev.counters()
    assert (c["rx_fpdus"], c["rx_octets"], c["tx_fpdus"], c["err_count"]) == (3, (5 << 32) | 7, 2, 2)
    st = dev.status()
    assert st["identity"]["magic"] == "0x69575250" and st["enabled"] and st["ready"]
    assert [x["conn"] for x in st["connections"]] == [1, 2]
    dev.regs.pulse("CTRL", "CLEAR_COUNTERS")
    assert dev.counters()["rx_fpdus"] == 0
    # registers by name
    assert dev.write_register("SCRATCH", 0xCAFEF00D) == 0xCAFEF00D
    assert dev.read_register("SCRATCH")["value"] == 0xCAFEF00D
    dev.write_register("CTX_TX.MULPDU", 1400)
    assert dev.read_register("CTX_TX.MULPDU") == {"name": "CTX_TX.MULPDU", "addr": 0x44, "value": 1400}
    assert dev.read_register("CTX_TX")["fields"]["mulpdu"] == 1400
    with pytest.raises(ValueError, match="read-only"):
        dev.write_register("ID", 1)
    with pytest.raises(ValueError, match="does not fit"):
        dev.write_register("CTX_STATE.STATE", 8)
    with pytest.raises(KeyError):
        dev.read_register("NOPE")
    names = [r["name"] for r in dev.dump()]
    assert names[:3] == ["ID", "VERSION", "CAPS"] and "CTX_CMD" not in names
    # soft reset empties the core
    dev.reset()
    assert not core.contexts and dev.status()["connections"] == []


def test_driver_sequences_on_the_model(model):
    t, dev = model
    exercise(t, dev)


def test_driver_sequences_over_the_socket_transport(served):
    t, dev, server = served
    exercise(t, dev)
    assert dev.transport.name == f"tcp:127.0.0.1:{server.port}"


def test_queue_full_and_stag_table_full(model):
    t, dev = model
    dev.reset()
    dev.post_receive(0, 0, 8, 1)
    dev.post_receive(0, 0, 8, 2)
    with pytest.raises(QueueFull, match="receive queue"):
        dev.post_receive(0, 0, 8, 3)
    dev.post_send(WorkRequest(SqOpcode.SEND, wr_id=1))
    dev.post_send(WorkRequest("send", wr_id=2))
    with pytest.raises(QueueFull, match="send queue"):
        dev.post_send(WorkRequest("send", wr_id=3))
    for i in range(8):
        dev.register_stag(100 + i, base=0, length=1)
    with pytest.raises(QueueFull, match="STag table full"):
        dev.register_stag(200, base=0, length=1)
    with pytest.raises(ValueError, match="unknown work request opcode"):
        WorkRequest("frobnicate")
    with pytest.raises(ValueError, match="does not fit"):
        WorkRequest("send", wr_id=1 << 32)


def test_identify_mismatch_is_clear():
    class Wrong(ModelTransport):
        def read32(self, addr):
            return 0xDEADBEEF if addr == regs.ID_ADDR else super().read32(addr)

    with pytest.raises(DeviceMismatch, match=r"not an RNIC: the ID register reads 0xdeadbeef"):
        Device(Wrong()).identify()

    class NewMajor(ModelTransport):
        def read32(self, addr):
            v = super().read32(addr)
            return v | (7 << 8) if addr == regs.VERSION_ADDR else v

    with pytest.raises(DeviceMismatch, match=r"version 7\.\d+ on the device, this driver knows major"):
        Device(NewMajor()).identify()
    assert issubclass(DeviceMismatch, regs.DeviceMismatch)


def test_identify_reads_the_rdma_read_depths():
    """QUEUE_CAPS bounds the IRD a connection negotiates (Device.read_limit); a device with
    an older map, or one that reports none, sets no bound."""
    dev = Device(ModelTransport(ird_depth=8, ord_depth=4))
    ident = dev.identify()
    assert (ident.ird_depth, ident.ord_depth) == (8, 4)
    assert ident.to_json()["ird_depth"] == 8 and dev.read_limit == 8
    assert Device(ModelTransport()).identify().ird_depth is None
    assert Device(ModelTransport()).read_limit is None

    class OldMap(ModelTransport):
        def read32(self, addr):
            if addr == regs.QUEUE_CAPS_ADDR:
                raise TransportError("SLVERR")
            v = super().read32(addr)
            return (v & ~0xFF) | 12 if addr == regs.VERSION_ADDR else v

    old = Device(OldMap(ird_depth=8))
    assert old.identify().ird_depth is None and old.read_limit is None


def test_socket_transport_errors():
    t = ModelTransport()
    with TransportServer(t, 0).start() as server:
        st = SocketTransport("127.0.0.1", server.port, timeout=2.0)
        assert st.read32(0) == MAGIC
        with pytest.raises(TransportError, match="SLVERR"):
            st.read32(0xFFC)
        with pytest.raises(TransportError, match="SLVERR"):
            st.write32(0xFFC, 1)
        st.close()
        st.close()
        with pytest.raises(TransportError, match="closed"):
            st.read32(0)
        # raw protocol: unknown requests and bad numbers answer ERR, the connection survives
        with socket.create_connection(("127.0.0.1", server.port), timeout=2) as s:
            f = s.makefile("rwb")
            assert f.readline() == b"RNIC-REGS 1\n"
            for req, want in ((b"X\n", b"ERR unknown"), (b"R zz\n", b"ERR bad number"),
                              (b"W 0x1c 0x1ffffffff\n", b"ERR value"),
                              (b"W 0x1c 0x5\n", b"OK\n"), (b"R 0x1c\n", b"OK 0x00000005\n")):
                f.write(req)
                f.flush()
                assert f.readline().startswith(want)
    # a server that is not a register server
    with socket.create_server(("127.0.0.1", 0)) as lst:
        def answer():
            c, _ = lst.accept()
            c.sendall(b"SSH-2.0-nope\n")
            c.close()
        th = threading.Thread(target=answer)
        th.start()
        with pytest.raises(DeviceError, match="not a register server"):
            SocketTransport("127.0.0.1", lst.getsockname()[1], timeout=2.0)
        th.join()
    with socket.create_server(("127.0.0.1", 0)) as lst:
        port = lst.getsockname()[1]
    with pytest.raises(DeviceError, match="cannot reach"):
        SocketTransport("127.0.0.1", port, timeout=1.0)


def test_serve_transport_once_and_ready_callback():
    t = ModelTransport()
    ports = []
    done = threading.Event()

    def run():
        transport.serve_transport(t, 0, once=True, ready=lambda s: ports.append(s.port))
        done.set()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    for _ in range(100):
        if ports:
            break
        threading.Event().wait(0.02)
    dev = open_device(f"tcp:127.0.0.1:{ports[0]}")
    assert dev.identity.width == 8
    dev.write_register("SCRATCH", 42)
    dev.close()
    assert done.wait(3.0)
    assert t.bank.out("scratch", "value") == 42


def test_open_device_registry():
    assert open_device("none") is None
    dev = open_device("model")
    assert isinstance(dev.transport, ModelTransport) and dev.identity.connections == 16
    dev = open_device("model:width=4,connections=2,stags=4")
    assert (dev.identity.width, dev.identity.connections, dev.identity.stags) == (4, 2, 4)
    sim = open_device("sim")
    try:
        assert sim.identity.width == 8 and sim.identity.connections == 16
    finally:
        sim.transport.close()
    for bad in ("", "foo", "tcp:", "tcp:127.0.0.1", "tcp:127.0.0.1:0", "tcp:host:99999", "none:x"):
        with pytest.raises(ValueError):
            parse_device_spec(bad)
    assert parse_device_spec("tcp:127.0.0.1:7000") == ("tcp", "127.0.0.1:7000")
    with pytest.raises(ValueError, match="bad parameter 'speed=9'"):
        open_device("model:speed=9")
    with pytest.raises(ValueError, match="bad parameter"):
        parse_device_spec("model:width")      # malformed specs fail before anything is opened
    # the simulation engineer plugs the sim in like this
    saved = dict(driver.device_kinds())
    try:
        driver.register_device_kind("sim", lambda arg, **kw: ModelTransport(width=32))
        assert open_device("sim").identity.width == 32
        with pytest.raises(ValueError):
            driver.register_device_kind("none", lambda arg: None)
    finally:
        driver.DEVICE_KINDS.clear()
        driver.DEVICE_KINDS.update(saved)


def test_model_core_cq_overflow_and_wrong_identity_closes():
    t = ModelTransport(cq_depth=1)
    dev = Device(t)
    dev.reset()
    t.core.complete(wr_id=1, opcode=SqOpcode.SEND, queue=CqQueue.SQ)
    t.core.complete(wr_id=2, opcode=SqOpcode.SEND, queue=CqQueue.SQ)
    assert dev.regs.field("CQ_STATUS", "OVERFLOW") == 1
    assert [c.wr_id for c in dev.poll_cq()] == [1]
    dev.regs.clear("CQ_STATUS", "OVERFLOW")
    assert dev.regs.field("CQ_STATUS", "OVERFLOW") == 0


def test_model_core_doorbell_for_a_missing_connection_completes_bad_request():
    """As the core: a DOORBELL whose SQ_WR.CONN is not below CAPS.CONNECTIONS completes at
    once with BAD_REQUEST (unsignaled too, CQ_INFO.CONN as given); an RQ post there is
    ignored."""
    t = ModelTransport()
    dev = Device(t)
    dev.reset()
    r = dev.regs
    n = r.field("CAPS", "CONNECTIONS")
    for conn in (n, 0xFFFF):
        r.write("SQ_WR", opcode=SqOpcode.RDMA_WRITE, signaled=0, conn=conn)
        r.write("SQ_ID", wr_id=0x77)
        r.write("SQ_CMD", doorbell=1)
        c = r.poll_cq()
        assert (c.conn, c.queue, c.opcode, c.status, c.wr_id, c.length) == \
            (conn, CqQueue.SQ, SqOpcode.RDMA_WRITE, CqStatus.BAD_REQUEST, 0x77, 0)
        assert r.poll_cq() is None
    r.write("RQ_CONN", conn=n)
    r.write("RQ_CMD", post=1)
    assert n not in t.core.rq


class _MemoryTransport(ModelTransport):
    """The model's registers with host memory behind them, as the simulated NIC has."""

    mem_size = 1 << 16

    def __init__(self):
        super().__init__()
        self.mem = bytearray(self.mem_size)

    def mem_read(self, addr, n):
        return bytes(self.mem[addr:addr + n])

    def mem_write(self, addr, data):
        self.mem[addr:addr + len(data)] = data


def test_socket_transport_host_memory():
    """A register server passes host memory through (MS, MR, MW in chunks), so that a data
    path on a served NIC reaches the memory its core places into; a served device without
    memory says so."""
    served = _MemoryTransport()
    data = bytes(range(256)) * 40                   # over two chunks
    with transport.TransportServer(served).start() as srv:
        st = SocketTransport(srv.host, srv.port)
        try:
            assert st.mem_size == 1 << 16
            st.mem_write(0x100, data)
            assert served.mem[0x100:0x100 + len(data)] == data
            assert st.mem_read(0x100, len(data)) == data
        finally:
            st.close()
    with transport.TransportServer(ModelTransport()).start() as srv:
        st = SocketTransport(srv.host, srv.port)
        try:
            assert st.mem_size == 0
            with pytest.raises(TransportError, match="no host memory"):
                st.mem_read(0, 4)
        finally:
            st.close()
