"""RDMA between the host's software RNIC (the golden model, as the peer) and the simulated
NIC over the NIC's own TCP (rnic.host.net.nic_tcp): the NIC accepts the connection, MPA is
negotiated through its stream port (revision 2, markers, CRC, RFC 6581 peer-to-peer with a
Write RTR), the connection is committed to FPDUs before the Reply goes out, and from then on
``NicRnic`` only posts work and takes completions: Sends, RDMA Writes and RDMA Reads both
ways carry every octet, and both ends close cleanly. The peer's TCP is the model's engine
(in wall time, like the NIC's time base), bridged to the software RNIC's socket.
"""

import concurrent.futures
import socket
import threading
import time

import pytest

from rnic.host.apps.demo import _exchange
from rnic.host.driver.device import Device
from rnic.host.model.tcp_engine import TcpEngine
from rnic.host.net import cm
from rnic.host.net.listener import Listener
from rnic.host.net.nic_tcp import NicListening, NicRnic, nic_accept, wait_accepted
from rnic.host.net.rnic_sw import SoftwareRnic
from rnic.host.net.transfer import make_datapath
from rnic.host.spec.net import DEFAULT_NIC_IP
from rnic.host.spec.tcp_engine import TcpState
from rnic.host.tools.bench_tcp import PEER_IP, peer_frame
from tests.sim.test_nic_tcp import PEER_TIMERS, open_nic, segment

RDMA_PORT = 4792
TIMEOUT = 60


class TcpBridge(threading.Thread):
    """The model's TCP engine as the peer's TCP: what the software RNIC writes to its end of
    a socket pair goes out through the engine, what the engine delivers comes back; the
    NIC's frames in, the engine's out, its timers in wall time. The peer's FIN and the NIC's
    close pass through."""

    def __init__(self, nic, port=RDMA_PORT, local_port=45000):
        super().__init__(daemon=True, name="tcp-bridge")
        self.port, self.local_port = port, local_port
        self.nic, self.tcp = nic, TcpEngine(ip=PEER_IP, connections=1, **PEER_TIMERS)
        self.app, self._end = socket.socketpair()
        self._end.setblocking(False)
        self.t0, self.stop, self.error = time.monotonic(), threading.Event(), None

    def now(self):
        return int((time.monotonic() - self.t0) * 1000) + 1

    def run(self):
        try:
            self._run()
        except Exception as exc:        # noqa: BLE001 - the test reports it
            self.error = exc

    def _run(self):
        outs = self.tcp.connect(0, remote_ip=DEFAULT_NIC_IP, remote_port=self.port,
                                local_port=self.local_port, now=self.now())
        pending, app_eof, fin_passed = b"", False, False
        while not self.stop.is_set():
            for f in self.nic.frames(timeout=0.001):
                outs += self.tcp.receive(DEFAULT_NIC_IP, segment(f), self.now())
            state = self.tcp.state(0)
            if not app_eof:
                try:
                    data = self._end.recv(1 << 16)
                    pending += data
                    app_eof = not data
                except BlockingIOError:
                    pass
            if pending and state in (TcpState.ESTABLISHED, TcpState.CLOSE_WAIT):
                pending = pending[self.tcp.write(0, pending):]
            if app_eof and not pending and state in (TcpState.ESTABLISHED,
                                                     TcpState.CLOSE_WAIT):
                outs += self.tcp.close(0, self.now())
            data = self.tcp.read(0)
            if data:
                self._end.setblocking(True)
                self._end.sendall(data)
                self._end.setblocking(False)
            if not fin_passed and state in (TcpState.CLOSE_WAIT, TcpState.LAST_ACK,
                                            TcpState.CLOSED, TcpState.TIME_WAIT):
                fin_passed = True
                self._end.shutdown(socket.SHUT_WR)
            outs += self.tcp.poll(self.now())
            for s in outs:
                self.nic.send_frame(peer_frame(s))
            outs = []


@pytest.fixture(scope="module")
def nic():
    dev, regs = open_nic()
    regs.tcp_listen(2, RDMA_PORT)
    yield dev
    dev.close()


def test_software_rnic_to_the_nic(nic):
    device = Device(nic)
    kw = dict(rev=2, crc=True, markers=True, ird=4, ord=4, timeout=TIMEOUT)
    bridge = TcpBridge(nic)
    bridge.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            peer_neg = ex.submit(cm.connect, bridge.app,
                                 cm.ConnParams(p2p=True, rtr={"write"}, private_data=b"peer",
                                               **kw), send_rtr=False)
            conn = wait_accepted(device, TIMEOUT)
            neg = nic_accept(device, conn, cm.ConnParams(private_data=b"nic", **kw))
            ours = NicRnic(neg, device, conn=conn)
            ours.start()                # (the Reply goes out once the data path runs)
            peer = SoftwareRnic(peer_neg.result(timeout=TIMEOUT), linger=0.5)
        assert (neg.role, neg.markers_tx, neg.crc, neg.p2p, neg.rtr) == (
            "responder", True, True, True, "write")
        checks, moved = [], {}
        _exchange(peer, ours, "peer to NIC", checks, moved)
        _exchange(ours, peer, "NIC to peer", checks, moved)
        assert all(ok for _, ok in checks), [name for name, ok in checks if not ok]
        tcb = device.regs.tcp_connection(conn)
        assert tcb.mss == 1460 and neg.emss == 1460
        ours.close(timeout=10)
        peer.close(timeout=10)
        assert ours.error is None and peer.error is None, (ours.error, peer.error)
        assert bridge.error is None, bridge.error
    finally:
        bridge.stop.set()
        bridge.join(5)


def test_listener_on_the_nic(nic):
    """``rnic listen``'s Listener on the NIC's own listening port: the peer's connection is
    negotiated in its own thread (its id the NIC's), served by the NIC's data path: the
    peer's Send lands in a posted buffer and its RDMA Write in the region."""
    device = Device(nic)
    port, served, done = 4793, {}, threading.Event()

    def handler(acc):
        assert acc.outcome == "connected", acc.error
        dp = make_datapath(acc.neg, device, conn=acc.conn)
        served["conn"], served["dp"] = acc.conn, dp
        dp.register_region(0x2000, 8192, to=0)
        dp.post_recv(4096)
        done.wait(TIMEOUT)
        dp.close(timeout=10)

    bridge = TcpBridge(nic, port, 46000)
    with NicListening(device, port, slot=3) as srv:
        listener = Listener(srv, cm.ConnParams(timeout=TIMEOUT), handler=handler,
                            contexts=4).start()
        bridge.start()
        try:
            peer = SoftwareRnic(cm.connect(bridge.app, cm.ConnParams(crc=True,
                                                                     timeout=TIMEOUT)),
                                linger=0.5)
            block, msg = bytes(range(256)) * 16, b"hello NIC listener"
            ids = [peer.write(block, stag=0x2000, to=1024), peer.send(msg)]
            got = peer.wait(ids, timeout=TIMEOUT)
            assert all(c.ok for c in got.values()), got
            dp = served["dp"]
            received = []
            deadline = time.monotonic() + TIMEOUT
            while not received and time.monotonic() < deadline:
                received = [c for c in dp.poll(timeout=0.2) if c.ok]
            assert [dp.data(c) for c in received] == [msg]
            assert dp.read_memory(dp.region(0x2000).address(1024), len(block)) == block
            tcb = device.regs.tcp_connection(served["conn"])
            assert (tcb.local_port, tcb.remote_port) == (port, 46000)
            done.set()
            peer.close(timeout=10)
        finally:
            done.set()
            listener.stop()
            listener.join(10)
            bridge.stop.set()
            bridge.join(5)
