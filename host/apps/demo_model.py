"""End-to-end run of the protocol model: what ``rnic demo`` shows.

Two RNICs (initiator A, responder B) entirely in the reference model:

1. MPA setup: A's Request and B's Reply (Rev 2, IRD/ORD, markers, CRC, peer-
   to-peer with a zero-length RDMA Write RTR) are built, sent as octets,
   parsed back and negotiated.
2. A sends Sends, an RDMA Write and an RDMA Read Request, segmented to the
   MULPDU of a 1460-octet EMSS, framed into FPDUs with markers and CRC; the
   octet stream is cut into random TCP segments, deframed, validated and
   placed by B's data sink. B answers the Read with Read Response segments
   that A places.
3. A Write to an STag that B never registered: B's sink reports the error
   and produces the Terminate, which A decodes.

Every step is checked (memories, completions, error codes); the result says
what was checked and whether it held.

The result has one schema whichever device ran the demo (:func:`demo_result`, used by
:func:`rnic.host.apps.demo.run_tcp_demo` too): the keys of :data:`RESULT_KEYS`, facts a
run does not have being None.
"""

import random
import time

from rnic.host.model import mpa_frames, rdmap
from rnic.host.spec.errors import ErrorInfo, Layer
from rnic.host.model.fpdu import FpduDecoder, FpduEncoder, FpduError, mulpdu
from rnic.host.model.rdmap import ReadRequest
from rnic.host.model.segment import TxStream
from rnic.host.model.sink import Access, Error, Memory, ReadRequestQueued, ReadResponseComplete, \
    SendComplete, Sink

__all__ = ["run_demo", "demo_result", "RESULT_KEYS", "NEGOTIATED_KEYS", "TRAFFIC_KEYS",
           "MOVED_KEYS"]

EMSS = 1460

#: The keys of a demo result, for every device (``rnic demo --help`` describes them).
RESULT_KEYS = ("ok", "device", "negotiated", "mulpdu", "moved", "traffic", "stats",
               "hardware_counters", "terminate", "seconds", "checks")
#: The keys of ``negotiated`` (what MPA setup agreed on, as A sees it).
NEGOTIATED_KEYS = ("rev", "markers_a_to_b", "markers_b_to_a", "crc", "ird", "ord", "p2p", "rtr",
                   "peer_private_data", "request_octets", "reply_octets")
#: The keys of ``traffic`` (the FPDU streams of both directions together).
TRAFFIC_KEYS = ("fpdus", "tcp_segments", "markers", "wire_octets", "payload_octets",
                "payload_per_wire_octet")
#: The keys of each direction of ``moved`` ("A->B": A sends to, writes into and reads from B).
MOVED_KEYS = ("send", "write", "read")


def _shaped(obj, keys, what):
    if obj is None:
        return None
    unknown = set(obj) - set(keys)
    if unknown:
        raise ValueError(f"{what}: unknown keys {sorted(unknown)}")
    return {k: obj.get(k) for k in keys}


def demo_result(**facts):
    """A demo result in its one schema: every key of :data:`RESULT_KEYS` (nested:
    :data:`NEGOTIATED_KEYS`, :data:`TRAFFIC_KEYS`, :data:`MOVED_KEYS`), None for a fact
    not given; ValueError for a key outside the schema."""
    out = _shaped(facts, RESULT_KEYS, "demo result")
    out["negotiated"] = _shaped(out["negotiated"], NEGOTIATED_KEYS, "negotiated")
    out["traffic"] = _shaped(out["traffic"], TRAFFIC_KEYS, "traffic")
    if out["moved"] is not None:
        out["moved"] = {name: _shaped(m, MOVED_KEYS, f"moved {name}")
                        for name, m in out["moved"].items()}
    return out


class _Wire:
    """One direction: FPDU framing, random TCP segmentation, deframing into a sink."""

    def __init__(self, *, markers, crc, rng):
        self.enc = FpduEncoder(markers=markers, crc=crc)
        self.dec = FpduDecoder(markers=markers, crc=crc, mulpdu=mulpdu(EMSS, markers=markers))
        self.rng = rng
        self.octets = 0
        self.fpdus = 0
        self.markers = 0
        self.segments = 0
        self.payload = 0

    def carry(self, ulpdus, sink):
        stream = b"".join(self.enc.encode(u) for u in ulpdus)
        self.octets += len(stream)
        events = []
        pos = 0
        while pos < len(stream):
            cut = min(len(stream), pos + self.rng.randint(1, EMSS))
            self.segments += 1
            for item in self.dec.feed(stream[pos:cut]):
                if isinstance(item, FpduError):
                    raise AssertionError(f"deframer error: {item.info}")
                self.fpdus += 1
                self.markers += len(item.markers)
                events.extend(sink.receive(item.ulpdu))
            pos = cut
        return events


def _negotiate(checks):
    request = mpa_frames.MpaFrame(kind="request", markers=True, crc=True, enhanced=True, rev=2,
                                  ird=4, ord=4, p2p=True, rtr_write=True,
                                  private_data=b"rnic demo")
    reply = mpa_frames.MpaFrame(kind="reply", markers=True, crc=True, enhanced=True, rev=2,
                                ird=4, ord=4, p2p=True, rtr_write=True, private_data=b"ok")
    req_octets, rep_octets = mpa_frames.build(request), mpa_frames.build(reply)
    got_req = mpa_frames.parse(req_octets, expect="request")
    got_rep = mpa_frames.parse(rep_octets, expect="reply")
    checks.append(("MPA Request/Reply round trip", got_req == request and got_rep == reply))
    return {
        "rev": min(got_req.rev, got_rep.rev),
        "markers_a_to_b": got_req.markers,
        "markers_b_to_a": got_rep.markers,
        "crc": got_req.crc or got_rep.crc,
        "ird": got_rep.ird, "ord": got_req.ord,
        "p2p": got_req.p2p and got_rep.p2p,
        "rtr": "write" if got_rep.rtr_write else None,
        "request_octets": len(req_octets), "reply_octets": len(rep_octets),
        "peer_private_data": got_rep.private_data.hex(),
    }


def run_demo(*, seed=1):
    """Run the demo; returns a :func:`demo_result` (``ok`` says whether every check held)."""
    t0 = time.monotonic()
    rng = random.Random(seed)
    checks = []
    conn = _negotiate(checks)
    mul = mulpdu(EMSS, markers=True)

    mem_a, mem_b = Memory(), Memory()
    sink_a = Sink(memory=mem_a, ird=conn["ird"])
    sink_b = Sink(memory=mem_b, ird=conn["ird"])
    a_to_b = _Wire(markers=conn["markers_a_to_b"], crc=conn["crc"], rng=rng)
    b_to_a = _Wire(markers=conn["markers_b_to_a"], crc=conn["crc"], rng=rng)
    tx_a, tx_b = TxStream(mulpdu=mul), TxStream(mulpdu=mul)

    # B's memory: receive buffers, a writable region, a readable region.
    for i in range(3):
        sink_b.post_receive(addr=0x1000 + i * 0x2000, length=0x2000)
    sink_b.register_region(stag=0x0100_0001, base=0x10_0000, length=0x1_0000,
                           access=Access.REMOTE_WRITE)
    src = bytes(rng.randrange(256) for _ in range(20000))
    mem_b.write(0x40_0000, src)
    sink_b.register_region(stag=0x0200_0002, base=0, length=len(src),
                           access=Access.REMOTE_READ, addr=0x40_0000)
    # A's read sink (written remotely by the Read Response).
    sink_a.register_region(stag=0x0300_0003, base=0x8000, length=len(src),
                           access=Access.REMOTE_WRITE, addr=0x80_0000)

    sends = [b"hello, iWARP", bytes(rng.randrange(256) for _ in range(5000))]
    write = bytes(rng.randrange(256) for _ in range(30000))
    ulpdus = [*tx_a.write(b"", stag=0x0100_0001, to=0x10_0000)]  # zero-length Write: the RTR
    for s in sends:
        ulpdus += tx_a.send(s)
    ulpdus += tx_a.write(write, stag=0x0100_0001, to=0x10_0000 + 0x100)
    req = ReadRequest(sink_stag=0x0300_0003, sink_to=0x8000, size=len(src),
                      src_stag=0x0200_0002, src_to=0)
    ulpdus += tx_a.read_request(req)
    events_b = a_to_b.carry(ulpdus, sink_b)
    a_to_b.payload = len(write) + sum(map(len, sends)) + 28

    completions = [e for e in events_b if isinstance(e, SendComplete)]
    checks.append(("Sends completed in order with their lengths",
                   [c.length for c in completions] == [len(s) for s in sends]))
    checks.append(("Send payloads placed in the receive buffers",
                   all(mem_b.read(0x1000 + i * 0x2000, len(s)) == s for i, s in enumerate(sends))))
    checks.append(("RDMA Write placed", mem_b.read(0x10_0000 + 0x100, len(write)) == write))
    queued = [e for e in events_b if isinstance(e, ReadRequestQueued)]
    checks.append(("Read Request queued at B", len(queued) == 1 and queued[0].request == req))

    # B answers the read from its source region; A places it.
    r = sink_b.pop_read_request()
    events_a = b_to_a.carry(tx_b.read_response(mem_b.read(0x40_0000 + r.src_to, r.size),
                                               stag=r.sink_stag, to=r.sink_to), sink_a)
    b_to_a.payload = r.size
    checks.append(("RDMA Read Response placed at A", mem_a.read(0x80_0000, len(src)) == src))
    checks.append(("Read completed at A", any(isinstance(e, ReadResponseComplete) for e in events_a)))

    # A Write to an STag B never registered: B reports DDP 1/0 and builds a Terminate.
    bad = a_to_b.carry(tx_a.write(b"x" * 64, stag=0x0DEA_D000, to=0), sink_b)
    err = next((e for e in bad if isinstance(e, Error)), None)
    term = None
    if err is not None:
        _, payload = _split_terminate(err.terminate)
        term = rdmap.Terminate.parse(payload)
    checks.append(("invalid STag -> Terminate DDP/tagged/invalid STag",
                   term is not None and (term.layer, term.etype, term.ecode) == (Layer.DDP, 1, 0)))

    wire = a_to_b.octets + b_to_a.octets
    payload = a_to_b.payload + b_to_a.payload
    return demo_result(
        ok=all(ok for _, ok in checks),
        device="model",
        negotiated=conn,
        mulpdu=mul,
        moved={"A->B": {"send": sum(map(len, sends)), "write": len(write), "read": len(src)},
               "B->A": {"send": 0, "write": 0, "read": 0}},
        traffic={
            "fpdus": a_to_b.fpdus + b_to_a.fpdus,
            "tcp_segments": a_to_b.segments + b_to_a.segments,
            "markers": a_to_b.markers + b_to_a.markers,
            "wire_octets": wire,
            "payload_octets": payload,
            "payload_per_wire_octet": round(payload / wire, 4),
        },
        terminate=None if term is None else ErrorInfo(term.layer, term.etype, term.ecode,
                                                     err.info.text).to_json(),
        seconds={"device_start": None, "total": round(time.monotonic() - t0, 2)},
        checks=[{"check": name, "ok": ok} for name, ok in checks],
    )


def _split_terminate(ulpdu):
    from rnic.host.model import ddp
    return ddp.parse(ulpdu)
