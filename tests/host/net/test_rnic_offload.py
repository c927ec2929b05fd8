"""rnic.host.net.rnic_offload: DDP/RDMAP of a connection in the simulated core, TCP in the host.

Endpoints over loopback TCP: the software RNIC (the reference model) against the offloaded
data path in each role, and two offloaded connections of one simulated device against each
other; Sends, RDMA Writes and RDMA Reads both ways with markers and CRC on and off and each
RFC 6581 RTR kind: every octet arrives (the software peer's decoder checks the core's
framing, its sink the core's DDP/RDMAP headers; the core's receive path checks and places
the peer's), completions carry what the software RNIC's do. A peer's RDMA Write to an STag
the core does not know -> the core's Terminate (DDP 1/0) reaches the peer, both sides end
with that error and outstanding work is flushed; the peer's Terminate reaches the core.
"""

import os
import socket
import time
from functools import partial

import pytest

from rnic.host.driver.device import Device
from rnic.host.net import cm
from rnic.host.net.rnic_offload import OffloadRnic, offload_datapath
from rnic.host.net.rnic_sw import Access, SoftwareRnic
from rnic.host.net.transfer import make_datapath, shared_state
from rnic.host.spec.errors import DdpErrorType, Layer
from rnic.host.spec.regmap import CqQueue, CqStatus, SqOpcode

from tests.host.net import loopback
from tests.host.net.loopback import T, events, rq_completions, sim_device

# (an initiator's RTR goes out through its data path, the core's send queue)
negotiate = partial(loopback.negotiate, send_rtr=False)


@pytest.fixture(scope="module")
def device():
    with sim_device(offload_datapath) as dev:
        yield dev


def received(rnic, n, timeout=T):
    """The next ``n`` RQ completions (waits for them)."""
    out = rq_completions(rnic, n, timeout)
    assert len(out) == n, out
    return out


def endpoint(neg, device, conn):
    if conn is None:
        return SoftwareRnic(neg, linger=0.5)
    dp = make_datapath(neg, device, conn=conn, linger=0.5)
    assert isinstance(dp, OffloadRnic)
    return dp


SIDES = {"offload_initiator": (1, None), "offload_responder": (None, 2), "both_offload": (3, 4)}
COMBOS = [
    # (side, initiator markers, responder markers, crc, p2p, rtr)
    ("offload_initiator", True, True, True, True, "send"),
    ("offload_initiator", False, True, False, True, "read"),
    ("offload_responder", True, False, True, True, "read"),
    ("offload_responder", False, False, True, True, "send"),
    ("offload_responder", False, False, False, False, None),
    ("both_offload", True, True, True, True, "write"),
    ("both_offload", False, True, False, True, "read"),
]


@pytest.mark.parametrize("side,mi,mr,crc,p2p,rtr", COMBOS)
def test_transfers_through_the_core(device, side, mi, mr, crc, p2p, rtr):
    kw = dict(rev=2, crc=crc, timeout=T, emss=1460)
    pi = cm.ConnParams(markers=mi, p2p=p2p, rtr={rtr} if rtr else cm.RTR_TYPES, **kw)
    pr = cm.ConnParams(markers=mr, **kw)
    ni, nr = negotiate(pi, pr)
    a, b = (endpoint(n, device, c) for n, c in zip((ni, nr), SIDES[side]))
    before = device.counters()
    try:
        src_b, src_a = os.urandom(5000), os.urandom(3000)
        # b's region at the TOs of a virtual address of another machine, a's zero-based:
        # the core maps both to where their memory is
        rb = b.register_region(None, 16384, to=0x7F5A_1234_5000, data=src_b)
        ra = a.register_region(None, 8192, to=0, data=src_a)
        for dp in (a, b):
            for _ in range(4):
                dp.post_recv(4096)
            dp.start()
        big, empty = os.urandom(4000), b""          # several FPDUs at MULPDU ~1440
        ids = [a.send(b"hello"), a.send(big), a.send(empty),
               a.write(b"WRITTEN!", stag=rb.stag, to=rb.base + 9000),
               a.write(big, stag=rb.stag, to=rb.base + 10000),
               a.read(5000, stag=rb.stag, to=rb.base),
               a.post_send("send_se", b"solicited")]
        got = a.wait(ids, timeout=10)
        assert all(got[i].ok for i in ids), got
        assert [got[i].opcode for i in ids] == [SqOpcode.SEND] * 3 + [SqOpcode.RDMA_WRITE] * 2 + [
            SqOpcode.RDMA_READ, SqOpcode.SEND_SE]
        assert [got[i].length for i in ids] == [5, 4000, 0, 8, 4000, 5000, 9]
        assert a.data(got[ids[5]]) == src_b                   # the Read's data
        rq = received(b, 4)
        assert [c.opcode for c in rq] == [SqOpcode.SEND] * 3 + [SqOpcode.SEND_SE]
        assert [b.data(c) for c in rq] == [b"hello", big, b"", b"solicited"]
        assert rq[3].solicited
        assert b.read_memory(rb.address(rb.base + 9000), 8) == b"WRITTEN!"
        assert b.read_memory(rb.address(rb.base + 10000), 4000) == big
        # and the other way, with a Send with Invalidate of a's region last
        bids = [b.send(big), b.write(b"from b", stag=ra.stag, to=ra.base + 100),
                b.read(3000, stag=ra.stag, to=ra.base),
                b.post_send("send_inv", b"bye", inval_stag=ra.stag)]
        bgot = b.wait(bids, timeout=10)
        assert all(bgot[i].ok for i in bids), bgot
        assert b.data(bgot[bids[2]]) == src_a[:100] + b"from b" + src_a[106:]   # Write, then Read
        arq = received(a, 2)
        assert [a.data(c) for c in arq] == [big, b"bye"]
        assert arq[1].inval_stag == ra.stag and arq[1].opcode == SqOpcode.SEND_INV
        assert a.read_memory(ra.address(ra.base + 100), 6) == b"from b"
        assert not a.region(ra.stag).valid if isinstance(a, SoftwareRnic) else True
    finally:
        a.close()
        b.close()
    assert (a.state, b.state) == ("closed", "closed"), (a.error, b.error)
    after = device.counters()
    offloaded = sum(c is not None for c in SIDES[side])
    assert after["tx_fpdus"] - before["tx_fpdus"] >= 13 * offloaded // 2
    assert after["rx_crc_errors"] == before["rx_crc_errors"]


def test_invalidated_region_refuses_the_peer(device):
    """A Send with Invalidate from the peer invalidates the core's STag: a later RDMA Write to
    it is refused by the core (DDP 1/0 Terminate to the peer), the core's side ends in error
    and its posted buffers complete FLUSHED."""
    kw = dict(rev=2, crc=True, timeout=T, emss=1460)
    ni, nr = negotiate(cm.ConnParams(markers=False, p2p=True, rtr={"write"}, **kw),
                       cm.ConnParams(markers=False, **kw))
    a, b = SoftwareRnic(ni, linger=0.5), endpoint(nr, device, 5)
    try:
        rb = b.register_region(None, 4096, to=None, data=bytes(64))
        for _ in range(3):
            b.post_recv(256)
        b.start()
        a.wait(a.post_send("send_inv", b"x", inval_stag=rb.stag), timeout=T)
        (c,) = received(b, 1)
        assert c.inval_stag == rb.stag
        a.write(b"too late", stag=rb.stag, to=rb.base)
        (ev, *_) = events(a, "terminate_received")
        assert (ev.info.layer, ev.info.etype, ev.info.ecode) == (Layer.DDP, DdpErrorType.TAGGED, 0)
        (ev, *_) = events(b, "terminate_sent")
        assert (ev.info.layer, ev.info.etype, ev.info.ecode) == (Layer.DDP, DdpErrorType.TAGGED, 0)
        assert b.wait_closed(T) and b.state == "error"
        flushed = [c for c in b.poll(timeout=1.0) if c.queue == CqQueue.RQ]
        assert len(flushed) == 2 and all(c.status == CqStatus.FLUSHED for c in flushed)
        assert b.read_memory(rb.address(rb.base), 8) == bytes(8)      # nothing placed
    finally:
        a.close()
        b.close()


def test_peer_terminate_reaches_the_core(device):
    """The core's RDMA Write to an STag the peer does not have: the peer's Terminate is
    reported by the core (terminate_received), an outstanding Read completes REMOTE_ERROR or
    FLUSHED, posting after it completes FLUSHED."""
    kw = dict(rev=2, crc=True, timeout=T, emss=1460)
    ni, nr = negotiate(cm.ConnParams(markers=True, p2p=True, rtr={"send"}, **kw),
                       cm.ConnParams(markers=True, **kw))
    a, b = endpoint(ni, device, 6), SoftwareRnic(nr, linger=0.5)
    try:
        b.post_recv(64)
        b.start()
        a.wait(a.send(b"first"), timeout=T)
        a.write(b"nowhere", stag=0x0BADBAD, to=0)
        (ev, *_) = events(a, "terminate_received")
        assert (ev.info.layer, ev.info.etype, ev.info.ecode) == (Layer.DDP, DdpErrorType.TAGGED, 0)
        assert ev.terminate is not None and ev.terminate.d
        assert a.wait_closed(T) and a.state == "error"
        c = a.wait(a.send(b"after"), timeout=T)
        assert c.status == CqStatus.FLUSHED
    finally:
        a.close()
        b.close()


def test_regions_and_queues(device):
    """Regions: STag and TO chosen by the data path (TO = device address) or given (any
    64-bit TO, mapped by the core); memory outside the device and an STag whose table row is
    taken are refused. Queues: more
    work requests and receive buffers than the core's SQ/RQ hold wait in the host and go in
    order; unsignaled work requests do not complete."""
    kw = dict(rev=2, crc=False, timeout=T, emss=1460)
    ni, nr = negotiate(cm.ConnParams(markers=False, **kw), cm.ConnParams(markers=False, **kw))
    a, b = endpoint(ni, device, 7), SoftwareRnic(nr, linger=0.5)
    try:
        r1 = a.register_region(None, 4096, to=None, access=Access.REMOTE_READ)
        assert r1.base == r1.addr and r1.stag
        # any TO: the core maps it to the region's memory (STAG_ADDR)
        r2 = a.register_region(0x0042_00F1, 256, to=0x7F5A_0000_1000, data=b"mapped")
        assert r2.base == 0x7F5A_0000_1000 and r2.addr < device.transport.mem_size
        assert a.read_memory(r2.address(0x7F5A_0000_1000), 6) == b"mapped"
        with pytest.raises(ValueError, match="outside the device's memory"):
            a.register_region(0x0043_0002, 256, addr=device.transport.mem_size - 100)
        with pytest.raises(ValueError, match="row 241 of the STag table"):
            a.register_region(0x0044_00F1, 256, to=None)        # row of 0x0042_00F1
        n = 40                                  # beyond the core's SQ (16 work requests)
        for _ in range(n):
            b.post_recv(64)
        b.start()
        ids = [a.send(i.to_bytes(4, "big"), signaled=i % 8 == 7) for i in range(n)]
        got = []
        deadline = time.monotonic() + 20
        while len(got) < n // 8 and time.monotonic() < deadline:
            got += a.poll(timeout=0.2)
        assert [c.wr_id for c in got] == ids[7::8] and all(c.ok for c in got)
        rq = received(b, n)
        assert [b.data(c) for c in rq] == [i.to_bytes(4, "big") for i in range(n)]
    finally:
        a.close()
        b.close()
    assert a.state == "closed"


def test_refuses_what_it_cannot_do(device):
    """A device without stream and memory access, and a responder whose first FPDU was read
    in software (its effect would be lost to the core), are refused with a clear error."""
    kw = dict(rev=2, crc=False, timeout=T, emss=1460)
    ni, nr = negotiate(cm.ConnParams(markers=False, p2p=True, rtr={"send"}, **kw),
                       cm.ConnParams(markers=False, **kw))
    with pytest.raises(TypeError, match="stream and memory access"):
        OffloadRnic(nr, Device(object(), spec="dummy"))
    a = SoftwareRnic(ni, linger=0.2)
    assert ni.rtr_pending is False              # the software RNIC sent the RTR at once
    nr.wait_first_fpdu(timeout=T)
    with pytest.raises(ValueError, match="already read the first FPDU"):
        OffloadRnic(nr, device, conn=8)
    a.close()
    nr.close()


def test_initiator_holds_its_first_fpdu_back(device):
    """ConnParams.first_fpdu_delay holds the offloaded initiator's RTR back as the software
    RNIC's (Linux siw can miss an FPDU that arrives right after its Reply)."""
    kw = dict(rev=2, crc=True, timeout=T, emss=1460)
    ni, nr = negotiate(cm.ConnParams(markers=False, p2p=True, rtr={"write"}, first_fpdu_delay=1.0, **kw),
                       cm.ConnParams(markers=False, **kw))
    t_negotiated = time.monotonic()             # after the Reply went out
    a = endpoint(ni, device, 10)
    try:
        a.start()
        rec = nr.wait_first_fpdu(timeout=T)
        assert time.monotonic() - t_negotiated >= 0.9
        assert nr.rtr_ulpdu == rec.ulpdu and nr.rtr == "write"
    finally:
        a.close()
        nr.close()


def test_closed_fence_is_not_polled_without_peer_octets(device, monkeypatch):
    """While the responder waits for the initiator's RTR (the MPA fence closed) it does not
    read CTX_STATUS over and over (a register read over a board's UART takes milliseconds);
    it looks after the peer's octets come, and its Send goes out once the fence opens."""
    kw = dict(rev=2, crc=True, timeout=T, emss=1460)
    ni, nr = negotiate(cm.ConnParams(markers=False, p2p=True, rtr={"write"}, **kw),
                       cm.ConnParams(markers=False, **kw))
    calls = []
    status = device.regs.connection_status
    monkeypatch.setattr(device.regs, "connection_status",
                        lambda conn: calls.append(conn) or status(conn))
    b, a = endpoint(nr, device, 11), None
    try:
        b.start()
        wid = b.send(b"after the fence")
        time.sleep(1.0)
        assert calls == []
        a = SoftwareRnic(ni, linger=0.5)          # sends the RTR
        a.post_recv(64)
        a.start()
        (c,) = received(a, 1)
        assert a.data(c) == b"after the fence"
        assert b.wait([wid], timeout=T)[wid].ok
        assert 1 <= len(calls) <= 50, len(calls)
    finally:
        b.close()
        if a is not None:
            a.close()
        ni.close()


def test_first_fpdu_terminate_with_zero_crc_field(device):
    """Linux siw sends the Terminate of a failed setup before it turns CRC on: a responder's
    first FPDU that is a Terminate with a zero CRC field is reported as received (as the
    software RNIC does), not refused by the core as a CRC error."""
    from rnic.host.model.fpdu import FpduEncoder
    from rnic.host.model.rdmap import Opcode, Terminate
    from rnic.host.model.segment import ulpdu
    from rnic.host.spec.errors import ErrorInfo, MpaError
    kw = dict(rev=2, crc=True, timeout=T, emss=1460)
    ni, nr = negotiate(cm.ConnParams(markers=False, p2p=True, rtr={"write"}, **kw),
                       cm.ConnParams(markers=False, **kw))
    b = endpoint(nr, device, 9)
    try:
        b.post_recv(64)
        b.start()
        term = Terminate.for_error(ErrorInfo.mpa(MpaError.NO_MATCHING_RTR, "no RTR"))
        fpdu = FpduEncoder(markers=False, crc=False).encode(ulpdu(Opcode.TERMINATE, term.build(), qn=2))
        assert fpdu[-4:] == bytes(4)
        ni.sock.sendall(fpdu[:5])               # in two pieces: the FPDU is gathered first
        time.sleep(0.05)
        ni.sock.sendall(fpdu[5:])
        (ev, *_) = events(b, "terminate_received")
        assert ev.terminate == term and nr.zero_crc_terminate
        assert (ev.info.layer, ev.info.ecode) == (Layer.LLP, MpaError.NO_MATCHING_RTR)
        ni.sock.shutdown(socket.SHUT_WR)
        assert b.wait_closed(T) and b.state == "error"
        assert device.counters()["rx_crc_errors"] == 0
    finally:
        b.close()
        ni.close()


def test_work_requests_from_registered_memory(device):
    """Sends and Writes name their data by a local STag and TO: the core reads it where the
    application registered it, so a send queue of 64 KiB Writes as deep as perftest's
    takes no device memory beyond the regions (more than the device's memory holds, were
    each copied), and every octet arrives."""
    ni, nr = negotiate(*(cm.ConnParams(rev=2, timeout=T, emss=1460) for _ in range(2)))
    a, b = endpoint(ni, device, 5), endpoint(nr, device, 6)
    books = shared_state(device).memory
    size, depth = 65536, 72                     # 4.5 MiB of Writes
    try:
        src = os.urandom(size)
        ra = a.register_region(None, size, to=None, data=src, access=Access.NONE)
        rb = b.register_region(None, size, to=None, access=Access.REMOTE_WRITE)
        b.post_recv(4096)
        for dp in (a, b):
            dp.start()
        assert depth * size > books.size
        free = books.free_octets
        ids = [a.write(length=size, stag=rb.stag, to=rb.base, local_stag=ra.stag,
                       local_to=ra.base) for _ in range(depth)]
        ids.append(a.send(length=1000, local_stag=ra.stag, local_to=ra.base + 5))
        assert books.free_octets == free                  # nothing allocated per request
        got = a.wait(ids, timeout=60)
        assert all(c.ok for c in got.values()), got
        assert [got[i].length for i in ids] == [size] * depth + [1000]
        assert b.read_memory(rb.addr, size) == src
        assert [b.data(c) for c in received(b, 1)] == [src[5:1005]]
        with pytest.raises(ValueError, match="not inside a registered region"):
            a.send(length=2, local_stag=ra.stag, local_to=ra.base + size - 1)
    finally:
        a.close()
        b.close()
    assert (a.state, b.state) == ("closed", "closed"), (a.error, b.error)
