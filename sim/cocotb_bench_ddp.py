"""cocotb side of ``rnic bench ddp`` (host/tools/bench.py): a stream of messages from node a to b.

The DUT is :class:`rnic.hdl.ddp_b2b.DdpBenchTop` (wires and memories inside, checked in
hardware). Parameters (``rnic.sim.runner.sim_params``): ``phases``, a list of
``{"op": "write"|"send", "size": octets, "count": messages}``; ``mulpdu``, ``phase``
(marker phase), ``markers``, ``crc``, ``base``, ``out`` (path of the JSON results),
``skew`` (tests of the bench only: read each message that many octets off, which the
checker must catch).

Per phase, on connection 0: (re)configure both MPA ends, a's DdpTx (MULPDU) and b's
DdpRx (IRD 4), point b's placement checker at ``base`` and clear the counters, post
``count`` receive buffers on b (Sends: buffer k at ``base + k*size``), then post the
``count`` work requests on a back to back (message k from ``laddr = base + k*size``; a
Write goes to b's STag at TO = the same address; only the last is signaled), wait for
the completion, every octet placed and (Sends) every receive completion, and record the
hardware counters. A wrong completion, a placement error reported by the checker, a
count that differs or a timeout fails the test (so the bench fails).
"""

import json

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge, Timer

from rnic.hdl.ddp_tx import TxCompletion, TxConnCfg, WorkRequest
from rnic.hdl.mpa_config import MpaConfig
from rnic.hdl.rdma_layouts import ConnCtl, RqPost, StagWrite
from rnic.sim.streams import TB, unpack

STAG = 0x5A5A5A01          # row 1 of a 4-row table
REGION = 0x800000
OPCODE = {"write": 0, "send": 3}
_STREAMS = ("wr", "txcfg", "stag", "rqpost", "rxctl", "fcfg", "dcfg")


class Bench(TB):
    def __init__(self, dut):
        super().__init__(dut)
        p = self.params
        self.W, self.C, self.S = p["width"], p["connections"], p["stags"]
        C, S = self.C, self.S
        for x in ("a", "b"):
            for s in _STREAMS:
                getattr(dut, f"{x}_{s}__valid").value = 0
            getattr(dut, f"{x}_tcq__ready").value = 0
            getattr(dut, f"{x}_load").value = 0
            getattr(dut, f"{x}_base").value = 0
        self.wr = self.source("a_wr", WorkRequest(connections=C))
        self.txcfg = self.source("a_txcfg", TxConnCfg(connections=C))
        self.fcfg = self.source("a_fcfg", MpaConfig(connections=C))
        self.dcfg = self.source("b_dcfg", MpaConfig(connections=C))
        self.rxctl = self.source("b_rxctl", ConnCtl(connections=C))
        self.stag = self.source("b_stag", StagWrite(stags=S, connections=C))
        self.rqpost = self.source("b_rqpost", RqPost(connections=C))
        self.tcq_layout = TxCompletion(connections=C)
        self.edge = RisingEdge(self.clk)

    def val(self, name):
        return int(getattr(self.dut, name).value)

    async def settle(self):
        """Wait for an edge and the end of its delta cycles (counters are then stable)."""
        await self.edge
        await ReadOnly()

    async def drain(self, *drivers):
        for d in drivers:
            await d.wait_idle()
        await self.cycles(4)


@cocotb.test()
async def bench_ddp(dut):
    tb = Bench(dut)
    p = tb.params
    await tb.reset()
    await tb.cycles(2)
    base = p.get("base", 0x100000)
    results = []
    wr_id = 1
    for ph in p["phases"]:
        op, size, count = ph["op"], ph["size"], ph["count"]
        # connection (re)start, both ends, and the target region
        tb.fcfg.append(dict(conn=0, markers=int(p["markers"]), crc=int(p["crc"]), phase=p["phase"]))
        tb.dcfg.append(dict(conn=0, markers=int(p["markers"]), crc=int(p["crc"]), phase=p["phase"],
                            mulpdu=p["mulpdu"]))
        tb.txcfg.append(dict(conn=0, mulpdu=p["mulpdu"], ord=4))
        tb.rxctl.append(dict(conn=0, ird=4))
        tb.stag.append(dict(index=STAG % tb.S, stag=STAG, base=base, addr=base, length=REGION,
                            valid=1, remote_read=0, remote_write=1, conn=0))
        await tb.drain(tb.fcfg, tb.dcfg, tb.txcfg, tb.rxctl, tb.stag)
        for x in ("a", "b"):
            getattr(dut, f"{x}_base").value = base
            getattr(dut, f"{x}_load").value = 1
        await tb.edge
        for x in ("a", "b"):
            getattr(dut, f"{x}_load").value = 0
        if op == "send":
            for k in range(count):
                tb.rqpost.append(dict(conn=0, addr=base + k * size, length=size, id=k))
            await tb.drain(tb.rqpost)
        await ReadOnly()
        start = tb.val("cycle")
        await tb.edge
        last_id = None
        for k in range(count):
            a = base + k * size
            last = k == count - 1
            w = dict(opcode=OPCODE[op], signaled=int(last), conn=0, laddr=a + p.get("skew", 0), length=size,
                     lstag=0, rstag=STAG if op == "write" else 0, rto=a if op == "write" else 0, inv_stag=0,
                     wr_id=wr_id)
            if last:
                last_id = wr_id
            wr_id += 1
            tb.wr.append(w)
        total = count * size
        # expected cycles at one payload octet per lane per cycle, generously bounded
        limit = p.get("timeout_cycles") or (20 * (total // tb.W) + 200 * count + 20000)
        step = 512
        waited = 0
        while True:
            await Timer(step * tb.period_ns, unit="ns")
            await tb.settle()
            waited += step
            done = (tb.val("a_tcq__valid") and tb.val("b_placed") >= total
                    and (op != "send" or tb.val("b_rcq_count") >= count))
            if done or tb.val("b_errors"):
                break
            if waited > limit:
                raise AssertionError(
                    f"{op} {size} x {count}: timeout after {waited} cycles: placed {tb.val('b_placed')} "
                    f"of {total}, tcq valid {tb.val('a_tcq__valid')}, rcq {tb.val('b_rcq_count')}, "
                    f"wire octets {tb.val('a_wire_octets')}, a_wr pending {len(tb.wr)}")
        for _ in range(64):            # nothing more may arrive
            await tb.settle()
        row = {k: tb.val(f"b_{k}") for k in ("placed", "beats", "errors", "bad_addr", "first_w", "last_w", "next",
                                              "rcq_count", "rcq_octets")}
        row.update(op=op, size=size, count=count, start=start,
                   wire_octets=tb.val("a_wire_octets"), wire_segs=tb.val("a_wire_segs"),
                   wire_beats=tb.val("a_wire_beats"), wire_maxseg=tb.val("a_wire_maxseg"),
                   wire_stalls=tb.val("a_wire_stalls"),
                   back_wire_octets=tb.val("b_wire_octets"), a_placed=tb.val("a_placed"),
                   a_errors=tb.val("a_errors"), end=tb.val("cycle"))
        cq = unpack(tb.tcq_layout, int(getattr(dut, "a_tcq__payload").value)) \
            if tb.val("a_tcq__valid") else None
        row["completion"] = cq and {k: int(cq[k]) for k in ("conn", "wr_id", "status", "length", "opcode")}
        results.append(row)
        tb.log.info("phase %s", row)
        problems = []
        if row["errors"]:
            problems.append(f"{row['errors']} placement errors, first at word {row['bad_addr']:#x}")
        if row["placed"] != total or row["next"] != base + total:
            problems.append(f"placed {row['placed']} octets up to {row['next']:#x}, "
                            f"expected {total} up to {base + total:#x}")
        if row["a_placed"] or row["a_errors"] or row["back_wire_octets"]:
            problems.append("traffic in the b -> a direction")
        want_cq = {"conn": 0, "wr_id": last_id, "status": 0, "length": size, "opcode": OPCODE[op]}
        if row["completion"] != want_cq:
            problems.append(f"completion {row['completion']}, expected {want_cq}")
        want_rcq = (count, total) if op == "send" else (0, 0)
        if (row["rcq_count"], row["rcq_octets"]) != want_rcq:
            problems.append(f"receive completions {row['rcq_count']} ({row['rcq_octets']} octets), "
                            f"expected {want_rcq[0]} ({want_rcq[1]} octets)")
        row["problems"] = problems
        with open(p["out"], "w") as f:
            json.dump(results, f)
        assert not problems, f"{op} {size} x {count}: " + "; ".join(problems)
        # take the completion
        await tb.edge
        getattr(dut, "a_tcq__ready").value = 1
        await tb.edge
        getattr(dut, "a_tcq__ready").value = 0
        await tb.cycles(8)
