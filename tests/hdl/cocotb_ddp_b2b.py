"""cocotb side of tests/hdl/test_ddp_b2b.py: two nodes back to back, checked against a model.

Per node a cocotbext-axi AxiRam (1 MiB, random initial octets, random pauses on every
channel). Per connection and direction: MPA markers/CRC/phase random, TX MULPDU random
(80..500), ORD random 1..4 (the peer's IRD is 4). Per node and connection the STag table
holds a Write target region, a Read source region, a Read sink region and invalidation
victims (rewritten each round). The wire octets of each direction are re-cut into random
TCP segments (1..300 octets, connections interleaved). Each round posts receive buffers,
then random work requests on both nodes at once (Sends of the four kinds into the peer's
buffers, Writes into the peer's target region, Reads from the peer's source region into
the local sink region; zero lengths and sizes around MULPDU), waits for every
completion and compares: work request completions on both nodes (wr_id, status, length,
opcode), received-Send completions in order (buffer id, MSN, length, opcode, solicited,
invalidated STag), and both memories octet for octet.
"""

import collections
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiBus, AxiRam

from rnic.hdl.beat import OctetBeat
from rnic.hdl.ddp_tx import TxCompletion, TxConnCfg, WorkRequest
from rnic.hdl.mpa_config import MpaConfig
from rnic.hdl.rdma_layouts import Completion, ConnCtl, RqPost, StagWrite
from rnic.sim.streams import TB, bytes_to_beats

MEM = 1 << 20
NODES = ("a", "b")
PEER = {"a": "b", "b": "a"}
WREG, SREG, KREG, RBUF, SRC = 0x00000, 0x10000, 0x20000, 0x30000, 0x38000
AREA = 0x40000          # per connection
INV_ROWS = 4


class Node:
    def __init__(self, tb, x):
        C, S, W = tb.C, tb.S, tb.W
        self.x = x
        self.wr = tb.source(f"{x}_wr", WorkRequest(connections=C), idle_prob=0.2)
        self.txcfg = tb.source(f"{x}_txcfg", TxConnCfg(connections=C))
        self.stag = tb.source(f"{x}_stag", StagWrite(stags=S, connections=C))
        self.rqpost = tb.source(f"{x}_rqpost", RqPost(connections=C))
        self.rxctl = tb.source(f"{x}_rxctl", ConnCtl(connections=C))
        self.fcfg = tb.source(f"{x}_fcfg", MpaConfig(connections=C))
        self.dcfg = tb.source(f"{x}_dcfg", MpaConfig(connections=C))
        self.wi = tb.source(f"{x}_wi", OctetBeat(width=W, connections=C), idle_prob=0.1)
        bp = tb.params.get("bp", 0.2)
        self.tcq = tb.sink(f"{x}_tcq", TxCompletion(connections=C), backpressure_prob=bp)
        self.rcq = tb.sink(f"{x}_rcq", Completion(connections=C), backpressure_prob=bp)
        self.wire = collections.defaultdict(bytearray)      # conn -> octets sent, not yet delivered
        self.wo = tb.sink(f"{x}_wo", OctetBeat(width=W, connections=C), backpressure_prob=bp,
                          callback=self._wo)
        self.ram = None
        self.mem = None           # model memory
        self.rows = {}            # (conn, kind) -> stag
        self.sends_rx = collections.Counter()   # received Sends per conn since reset (MSN - 1)
        self.wire_octets = 0

    def _wo(self, b):
        n = b["n"]
        self.wire[b["conn"]] += (b["data"] & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
        self.wire_octets += n

    def drivers(self):
        return (self.wr, self.txcfg, self.stag, self.rqpost, self.rxctl, self.fcfg, self.dcfg, self.wi)


class B2B(TB):
    def __init__(self, dut):
        super().__init__(dut)
        p = self.params
        self.W, self.C, self.S = p["width"], p["connections"], p["stags"]
        self.nodes = {x: Node(self, x) for x in NODES}

    async def start(self):
        await self.reset()
        rng = random.Random(self.rng.random())
        bp = self.params.get("axi_bp", 0.2)
        for x, nd in self.nodes.items():
            nd.ram = AxiRam(AxiBus.from_prefix(self.dut, f"{x}_axi_"), self.clk, self.rst, size=MEM)
            for part in (nd.ram.write_if, nd.ram.read_if):
                part.log.setLevel("WARNING")
            for ch in (nd.ram.write_if.aw_channel, nd.ram.write_if.w_channel, nd.ram.write_if.b_channel,
                       nd.ram.read_if.ar_channel, nd.ram.read_if.r_channel):
                ch.log.setLevel("WARNING")
                if bp:
                    ch.set_pause_generator(self._pauses(random.Random(rng.random()), bp))
            init = self.rng.randbytes(MEM)
            nd.ram.write(0, init)
            nd.mem = bytearray(init)
        for x in NODES:
            cocotb.start_soon(self.pump(self.nodes[x], self.nodes[PEER[x]], random.Random(rng.random())))
        await self.cycles(2)

    @staticmethod
    def _pauses(rng, bp):
        while True:
            yield rng.random() < bp

    async def pump(self, src, dst, rng):
        """Move src's wire octets into dst's deframer as random TCP segments."""
        while True:
            ready = [c for c, buf in src.wire.items() if buf]
            if not ready:
                await self.cycles(rng.randint(1, 8))
                continue
            c = rng.choice(ready)
            buf = src.wire[c]
            cut = min(len(buf), rng.choice([rng.randint(1, 16), rng.randint(1, 300), rng.randint(200, 1500)]))
            chunk = bytes(buf[:cut])
            del buf[:cut]
            dst.wi.extend(bytes_to_beats(chunk, self.W, conn=c))
            await dst.wi.wait_idle()

    async def quiesce(self, quiet=200):
        dut = self.dut
        n = 0
        edge, ro = RisingEdge(self.clk), ReadOnly()
        sigs = []
        for x in NODES:
            sigs += [getattr(dut, f"{x}_{s}") for s in ("wo__valid", "tcq__valid", "rcq__valid", "axi__awvalid",
                                                       "axi__arvalid", "axi__rvalid", "axi__bvalid")]
        while n < quiet:
            await edge
            await ro
            busy = any(int(s.value) for s in sigs) or any(
                not d.idle() for nd in self.nodes.values() for d in nd.drivers()) or any(
                buf for nd in self.nodes.values() for buf in nd.wire.values())
            n = 0 if busy else n + 1


@cocotb.test()
async def b2b_random(dut):
    tb = B2B(dut)
    await tb.start()
    rng = tb.rng
    C, S = tb.C, tb.S
    nodes = tb.nodes
    rounds = tb.params.get("rounds", 3)
    wrs_per = tb.params.get("wrs", 8)
    mulpdu = {}
    ords = {}
    wr_id = [1]
    buf_id = [0x1000]

    # --- connection setup (both directions of each connection)
    row_of = {}
    for x in NODES:
        nd = nodes[x]
        idx = 0
        for c in range(C):
            for kind in ["w", "s", "k"] + [f"i{j}" for j in range(INV_ROWS)]:
                row_of[(x, c, kind)] = idx
                nd.rows[(c, kind)] = (rng.getrandbits(27) << 5) | idx
                idx += 1
        assert idx <= S

    def write_row(x, c, kind, base, length, rr, rw, valid=1, ri=0):
        i = row_of[(x, c, kind)]
        nodes[x].stag.append(dict(index=i, stag=nodes[x].rows[(c, kind)], base=base, length=length,
                                  addr=base, valid=valid, remote_read=rr, remote_write=rw,
                                  remote_inv=ri, conn=c))

    def setup(x, c):
        """Direction x -> peer on connection c: MPA both ends, x's TX, the peer's RX."""
        y = PEER[x]
        markers, crc = rng.random() < 0.5, rng.random() < 0.8
        phase = 4 * rng.randrange(128)
        mulpdu[(x, c)] = rng.choice([rng.randint(80, 160), rng.randint(80, 500), 500])
        ords[(x, c)] = rng.randint(1, 4)
        nodes[x].fcfg.append(dict(conn=c, markers=markers, crc=crc, phase=phase))
        nodes[y].dcfg.append(dict(conn=c, markers=markers, crc=crc, phase=phase, mulpdu=512))
        nodes[x].txcfg.append(dict(conn=c, mulpdu=mulpdu[(x, c)], ord=ords[(x, c)]))
        nodes[y].rxctl.append(dict(conn=c, ird=4))
        nodes[y].sends_rx[c] = 0
        tb.log.info("%s->%s conn %d: markers %d crc %d phase %d mulpdu %d ord %d", x, y, c, markers, crc,
                    phase, mulpdu[(x, c)], ords[(x, c)])

    for x in NODES:
        for c in range(C):
            area = c * AREA
            write_row(x, c, "w", area + WREG, 0x10000, 0, 1)
            write_row(x, c, "s", area + SREG, 0x10000, 1, 0)
            write_row(x, c, "k", area + KREG, 0x10000, 0, 1)
            setup(x, c)
    await tb.quiesce(20)

    def size_for(x, c, hlen):
        room = mulpdu[(x, c)] - hlen
        return max(0, rng.choice([0, rng.randint(1, 20), room + rng.randint(-2, 2), 2 * room + rng.randint(-2, 2),
                                  rng.randint(0, 1500)]))

    totals = collections.Counter()
    for rnd in range(rounds):
        exp_tcq = {x: [] for x in NODES}
        exp_rcq = {x: collections.defaultdict(list) for x in NODES}
        posts = {x: [] for x in NODES}
        for x in NODES:
            y = PEER[x]
            for c in range(C):
                area_y = c * AREA
                area_x = c * AREA
                for j in range(INV_ROWS):     # fresh invalidation victims at the peer
                    write_row(y, c, f"i{j}", area_y + SRC + 16 * j, 8, 0, 1, ri=1)
                inv_free = list(range(INV_ROWS))
                rbuf = area_y + RBUF
                wdst = area_y + WREG
                ksink = area_x + KREG
                sends = 0
                for _ in range(rng.randint(0, wrs_per)):
                    op = rng.choice([0, 1, 3, 4, 5, 6, 0, 1, 3])
                    if op in (3, 4, 5, 6) and sends >= 8:
                        op = 0
                    if op in (4, 6) and not inv_free:
                        op = 3
                    hlen = 14 if op == 0 else 18
                    n = size_for(x, c, hlen)
                    w = dict(opcode=op, signaled=int(rng.random() < 0.85), conn=c, laddr=0, length=n, lstag=0,
                             rstag=0, rto=0, inv_stag=0, wr_id=wr_id[0])
                    wr_id[0] += 1
                    totals[f"op{op}"] += 1
                    if op == 1:
                        n = min(n, 0x10000 - (ksink - area_x - KREG))
                        src = area_y + SREG + rng.randint(0, 0x10000 - n)
                        w.update(length=n, lstag=nodes[x].rows[(c, "k")], laddr=ksink,
                                 rstag=nodes[y].rows[(c, "s")], rto=src)
                        nodes[x].mem[ksink:ksink + n] = nodes[y].mem[src:src + n]
                        ksink += n + rng.randint(0, 9)
                    else:
                        laddr = area_x + SRC + rng.randint(0, 0x8000 - n) if n <= 0x8000 else area_x
                        n = min(n, 0x8000)
                        w.update(length=n, laddr=laddr)
                        data = nodes[x].mem[laddr:laddr + n]
                        if op == 0:
                            n = min(n, 0x10000 - (wdst - area_y - WREG))
                            data = data[:n]
                            w.update(length=n, rstag=nodes[y].rows[(c, "w")], rto=wdst)
                            nodes[y].mem[wdst:wdst + n] = data
                            wdst += n + rng.randint(0, 9)
                        else:
                            cap = n + rng.choice([0, rng.randint(0, 20)])
                            bid = buf_id[0]
                            buf_id[0] += 1
                            posts[y].append(dict(conn=c, addr=rbuf, length=cap, id=bid))
                            nodes[y].mem[rbuf:rbuf + n] = data
                            rbuf += cap + rng.randint(0, 9)
                            sends += 1
                            nodes[y].sends_rx[c] += 1
                            inv = 0
                            if op in (4, 6):
                                j = inv_free.pop(rng.randrange(len(inv_free)))
                                inv = nodes[y].rows[(c, f"i{j}")]
                                w["inv_stag"] = inv
                            exp_rcq[y][c].append(dict(conn=c, opcode=op, msn=nodes[y].sends_rx[c], wr_id=bid,
                                                      length=n, solicited=int(op in (5, 6)),
                                                      invalidated=int(op in (4, 6)), inval_stag=inv))
                    if n == 0:
                        totals["zero"] += 1
                    if w["signaled"]:
                        exp_tcq[x].append((c, w["wr_id"], 0, n, op))
                    posts[x].append(("wr", w))
        # receive buffers first (at a quiescent point), then the work requests, interleaved
        for x in NODES:
            for p in posts[x]:
                if not isinstance(p, tuple):
                    nodes[x].rqpost.append(p)
        await tb.quiesce(20)
        for x in NODES:
            per_conn = collections.defaultdict(collections.deque)
            for p in posts[x]:
                if isinstance(p, tuple):
                    per_conn[p[1]["conn"]].append(p[1])
            while per_conn:
                c = rng.choice(list(per_conn))
                nodes[x].wr.append(per_conn[c].popleft())
                if not per_conn[c]:
                    del per_conn[c]
        # wait for every completion
        want = {x: len(exp_tcq[x]) for x in NODES}
        for _ in range(tb.params.get("wait", 4000)):
            await tb.cycles(100)
            if all(len(nodes[x].tcq.items) >= want[x] for x in NODES):
                break
        await tb.quiesce()
        for x in NODES:
            nd = nodes[x]
            got = sorted(tuple(g[k] for k in ("conn", "wr_id", "status", "length", "opcode")) for g in nd.tcq.items)
            nd.tcq.items.clear()
            if got != sorted(exp_tcq[x]) and tb.params.get("debug"):
                for path in tb.params["debug"]:
                    h = dut
                    try:
                        for part in path.split("."):
                            h = getattr(h, part)
                        tb.log.warning("DEBUG %s = %s", path, h.value)
                    except AttributeError as e:
                        tb.log.warning("DEBUG %s: %s", path, e)
            if got != sorted(exp_tcq[x]):
                missing = sorted(set(exp_tcq[x]) - set(got))
                extra = sorted(set(got) - set(exp_tcq[x]))
                raise AssertionError(f"round {rnd} node {x}: work completions: missing {missing}, unexpected {extra}")
            rc = collections.defaultdict(list)
            for g in nd.rcq.items:
                rc[g["conn"]].append(g)
            nd.rcq.items.clear()
            for c in range(C):
                exp = exp_rcq[x][c]
                assert len(rc[c]) == len(exp), \
                    f"round {rnd} node {x} conn {c}: {len(rc[c])} receive completions, expected {len(exp)}"
                for g, e in zip(rc[c], exp):
                    assert all(g[k] == v for k, v in e.items()), \
                        f"round {rnd} node {x}: receive completion\n got {g}\n exp {e}"
            got_mem = nd.ram.read(0, MEM)
            if got_mem != bytes(nd.mem):
                diff = [i for i in range(MEM) if got_mem[i] != nd.mem[i]]
                raise AssertionError(f"round {rnd} node {x}: memory differs at {len(diff)} octets, first {diff[:8]}")
        tb.log.info("round %d done: wire octets a->b %d, b->a %d, work requests %s", rnd, nodes["a"].wire_octets,
                    nodes["b"].wire_octets, dict(totals))

        # ---- error: a Write to an STag the peer does not know. The peer's RX reports DDP 1/0,
        # its TX sends a Terminate and stops; this side's RX receives the Terminate and its TX
        # stops: later work requests on that connection complete FLUSHED on both sides,
        # nothing more is placed. Then the connection is restarted in both directions.
        if rnd + 1 < rounds and rng.random() < tb.params.get("err_prob", 0.5):
            c = rng.randrange(C)
            x = rng.choice(NODES)
            y = PEER[x]
            bad = nodes[y].rows[(c, "w")] ^ (1 << 31)          # same row, other STag
            w = dict(opcode=0, signaled=1, conn=c, laddr=c * AREA + SRC, length=rng.randint(1, 100), lstag=0,
                     rstag=bad, rto=c * AREA + WREG, inv_stag=0, wr_id=wr_id[0])
            wr_id[0] += 1
            nodes[x].wr.append(w)
            await tb.quiesce()
            flushed = {x: [], y: []}
            for z in (x, y):
                for _ in range(2):
                    v = dict(opcode=rng.choice([0, 3, 1]), signaled=0, conn=c, laddr=c * AREA + SRC, length=8,
                             lstag=nodes[z].rows[(c, "k")], rstag=nodes[PEER[z]].rows[(c, "s")],
                             rto=c * AREA + SREG, inv_stag=0, wr_id=wr_id[0])
                    wr_id[0] += 1
                    nodes[z].wr.append(v)
                    flushed[z].append((c, v["wr_id"], 5, 0, v["opcode"]))
            before = (nodes["a"].wire_octets, nodes["b"].wire_octets)
            await tb.quiesce()
            assert (nodes["a"].wire_octets, nodes["b"].wire_octets) == before, "wire traffic after the Terminates"
            for z in NODES:
                got = sorted(tuple(g[k] for k in ("conn", "wr_id", "status", "length", "opcode"))
                             for g in nodes[z].tcq.items)
                nodes[z].tcq.items.clear()
                exp = sorted(([(c, w["wr_id"], 0, w["length"], 0)] if z == x else []) + flushed[z])
                assert got == exp, f"round {rnd} error on {x} conn {c}: node {z} completions\n got {got}\n exp {exp}"
                assert not nodes[z].rcq.items, f"receive completions after the error: {list(nodes[z].rcq.items)}"
                assert nodes[z].ram.read(0, MEM) == bytes(nodes[z].mem), f"node {z}: memory changed by the error"
            totals["terminated"] += 1
            for z in NODES:
                setup(z, c)
            await tb.quiesce(20)
