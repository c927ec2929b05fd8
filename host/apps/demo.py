"""``rnic demo``: two RNICs over loopback TCP, one with its data path in the simulated hardware.

A is the initiator, on the software RNIC (the reference model); B is the
responder, on the Verilated RnicCore with its whole data path (MPA, DDP/RDMAP)
in the gateware (:class:`rnic.host.net.rnic_offload.OffloadRnic`) unless
``device="none"``. They connect
with RFC 6581 enhanced setup (Rev 2, IRD/ORD, peer-to-peer with a zero-length
RDMA Write RTR, markers and CRC both ways), then run Send, RDMA Write and
RDMA Read in both directions and check every placed octet. The result has the
schema of :func:`rnic.host.apps.demo_model.demo_result` (the same for every device).
"""

import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from rnic.host.apps.demo_model import demo_result
from rnic.host.net import cm
from rnic.host.spec.regmap import CqQueue
from rnic.host.net.rnic_sw import Access, SoftwareRnic

__all__ = ["run_tcp_demo"]

TIMEOUT = 10.0
STAG = 0x1000
SOURCE_STAG = 0x2001                 # (its own row of a device's STag table)


def _negotiate():
    kw = dict(rev=2, crc=True, markers=True, ird=4, ord=4, timeout=TIMEOUT)
    pi = cm.ConnParams(p2p=True, rtr={"write"}, private_data=b"rnic demo A", **kw)
    pr = cm.ConnParams(private_data=b"rnic demo B", **kw)
    with socket.create_server(("127.0.0.1", 0)) as lst:
        c = socket.create_connection(lst.getsockname(), timeout=TIMEOUT)
        s, _ = lst.accept()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(cm.accept, s, pr)
        ni = cm.connect(c, pi)
        nr = fut.result(timeout=TIMEOUT)
    return ni, nr


def _received(rnic, n):
    out, deadline = [], time.monotonic() + TIMEOUT
    while len(out) < n and time.monotonic() < deadline:
        out += [c for c in rnic.poll(timeout=0.2) if c.queue == CqQueue.RQ and c.ok]
    return [rnic.data(c) for c in out]


def _exchange(src, dst, name, checks, moved):
    """``src`` sends, writes into and reads from ``dst``; every octet is checked."""
    region = os.urandom(16384)
    dst.register_region(STAG, len(region), to=0, data=region)
    for _ in range(2):
        dst.post_recv(8192)
    msg, block = os.urandom(3000), os.urandom(6000)
    # the Send and the Write from the sender's registered buffer (no copy)
    src.register_region(SOURCE_STAG, len(msg) + len(block), to=0, data=msg + block,
                        access=Access.NONE)
    ids = [src.send(length=len(msg), local_stag=SOURCE_STAG, local_to=0),
           src.write(length=len(block), stag=STAG, to=8192, local_stag=SOURCE_STAG,
                     local_to=len(msg)),
           src.read(4096, stag=STAG, to=0), src.read(len(block), stag=STAG, to=8192)]
    got = src.wait(ids, timeout=TIMEOUT)
    ok = all(c.ok for c in got.values())
    checks.append((f"{name}: completions ok", ok))
    checks.append((f"{name}: Send landed in the receive buffer", _received(dst, 1) == [msg]))
    checks.append((f"{name}: RDMA Write placed at STag {STAG:#x} TO 8192",
                   dst.read_memory(dst.region(STAG).address(8192), len(block)) == block))
    checks.append((f"{name}: RDMA Read returned the region", ok and src.data(got[ids[2]]) == region[:4096]))
    checks.append((f"{name}: RDMA Read returned the written data",
                   ok and src.data(got[ids[3]]) == block))
    moved[name] = {"send": len(msg), "write": len(block), "read": 4096 + len(block)}


def run_tcp_demo(*, device="sim"):
    """Run the demo; returns a :func:`~rnic.host.apps.demo_model.demo_result` (``ok`` says
    whether every check held)."""
    t0 = time.monotonic()
    checks, moved = [], {}
    dev = None
    if device == "sim":
        from rnic.sim.device import SimDevice
        from rnic.host.driver.device import Device
        from rnic.host.net.rnic_offload import OffloadRnic, offload_datapath
        dev = Device(SimDevice(width=8, connections=16), spec="sim")
        dev.datapath_factory = offload_datapath
        dev.identify()
        dev.reset()
    t_dev = time.monotonic() - t0
    try:
        ni, nr = _negotiate()
        a = SoftwareRnic(ni, linger=0.5)
        b = OffloadRnic(nr, dev, conn=1, linger=0.5) if dev else SoftwareRnic(nr, linger=0.5)
        try:
            b.start()
            a.start()
            _exchange(a, b, "A->B", checks, moved)
            _exchange(b, a, "B->A", checks, moved)
            checks.append(("no protocol error on either side", a.error is None and b.error is None))
            stats = {"a": dict(a.stats), "b": dict(b.stats)}
            error = a.error if a.error is not None else b.error
        finally:
            a.close(timeout=2.0)
            b.close(timeout=2.0)
        counters = dev.counters() if dev else None
        if dev:
            # B's data path is the core's: its counts are the core's counters, checked
            # against what A's software decoder and encoder counted
            stats["b"] = {k: counters[k] for k in ("tx_fpdus", "tx_octets", "tx_markers",
                                                   "rx_fpdus", "rx_octets")}
            rtr = ni.rtr_wire or b""          # A's RTR, sent by its connection setup
            checks.append(("the core framed B's FPDUs and deframed A's (every one)",
                           counters["tx_fpdus"] == stats["a"]["rx_fpdus"] > 0
                           and counters["tx_octets"] == stats["a"]["rx_octets"]
                           and counters["rx_fpdus"] == stats["a"]["tx_fpdus"] + bool(rtr) > 0
                           and counters["rx_octets"] == stats["a"]["tx_octets"] + len(rtr)
                           and counters["err_count"] == 0 and counters["rx_crc_errors"] == 0))
    finally:
        if dev:
            dev.close()
    return demo_result(
        ok=all(ok for _, ok in checks),
        device=device,
        negotiated={
            "rev": ni.rev, "markers_a_to_b": ni.markers_tx, "markers_b_to_a": ni.markers_rx,
            "crc": ni.crc, "ird": ni.ird, "ord": ni.ord, "p2p": ni.p2p, "rtr": ni.rtr,
            "peer_private_data": ni.peer_private_data.hex(),
        },
        mulpdu=ni.mulpdu,
        moved=moved,
        traffic=_traffic(stats, moved),
        stats=stats,
        hardware_counters=counters,
        terminate=None if error is None else error.to_json(),
        seconds={"device_start": round(t_dev, 2) if dev else None,
                 "total": round(time.monotonic() - t0, 2)},
        checks=[{"check": n, "ok": ok} for n, ok in checks],
    )


def _traffic(stats, moved):
    """The ``traffic`` of the schema from both ends' counters (TCP segments: not counted)."""
    wire = stats["a"]["tx_octets"] + stats["b"]["tx_octets"]
    payload = sum(sum(m.values()) for m in moved.values())
    return {"fpdus": stats["a"]["tx_fpdus"] + stats["b"]["tx_fpdus"], "tcp_segments": None,
            "markers": stats["a"]["tx_markers"] + stats["b"]["tx_markers"],
            "wire_octets": wire, "payload_octets": payload,
            "payload_per_wire_octet": round(payload / wire, 4) if wire else None}
