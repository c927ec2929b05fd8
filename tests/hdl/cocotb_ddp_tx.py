"""cocotb side of tests/hdl/test_ddp_tx.py: rnic.hdl.ddp_tx.DdpTx against rnic.host.model.segment.TxStream.

Host memory is a cocotbext-axi AxiRamRead (1 MiB of random octets) with random pauses on
AR and R. Each round:

* Phase A, at a quiescent start: connection restarts (``cfg``: random MULPDU 72..1200,
  ORD 0..3) and STag table rows; then random work requests of every opcode (Write, Read,
  the four Send kinds, invalid opcodes; zero lengths and sizes around the segment room)
  on every connection, and inbound Read Requests (``rrq``) on some, sometimes ending
  with one whose source fails the TX STag check (that connection gets no work requests
  that round). A responder answers each Read Request seen on ``o`` with ``read_done``
  after a random delay (sometimes with a different length: LOCAL_LENGTH). Random
  back-pressure on ``o``, ``cq`` and ``rr_done``.
  Scoreboard per connection: the ULPDUs that are not Read Responses equal, octet for
  octet, TxStream's segments of the work requests in order (a failed source check adds
  its Terminate, after which nothing follows); the Read Response ULPDUs equal
  TxStream's read_response segments of the Read Requests in order; ``length`` on each
  first beat; completions (wr_id, status, length, opcode) and ``rr_done`` counts.
* Phase B: on a few connections a Read whose request is not answered, then a
  ``term`` report (received 0: the Terminate must appear with the next QN 2 MSN;
  received 1: nothing is sent), then more work requests and a Read Request: nothing
  more is sent on the connection, the Read completes with FLUSHED / REMOTE_ERROR, the
  later work requests with FLUSHED, the Read Request gets no ``rr_done``.
"""

import collections
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiRamRead, AxiReadBus

from rnic.hdl.ddp_tx import ReadDone, TxCompletion, TxConnCfg, WorkRequest
from rnic.hdl.mpa_tx import MpaTxBeat
from rnic.hdl.rdma_layouts import ReadRequestOut, RrDone, StagWrite, TermReport
from rnic.host.model.rdmap import Opcode, ReadRequest, Terminate
from rnic.host.model.segment import TxStream, segment, ulpdu
from rnic.sim.streams import TB

MEM = 1 << 20
SUCCESS, LOCAL_LENGTH, BAD_REQUEST, REMOTE_ERROR, FLUSHED = 0, 1, 3, 4, 5


class TxTB(TB):
    def __init__(self, dut):
        super().__init__(dut)
        p = self.params
        self.W = p["width"]
        self.C = p["connections"]
        self.S = p["stags"]
        self.SQD = p["sq_depth"]
        self.RQD = p["rrq_depth"]
        C = self.C
        self.wr = self.source("wr", WorkRequest(connections=C), idle_prob=0.2)
        self.cfg = self.source("cfg", TxConnCfg(connections=C))
        self.stag_w = self.source("stag_w", StagWrite(stags=self.S, connections=C))
        self.rrq = self.source("rrq", ReadRequestOut(connections=C), idle_prob=0.3)
        self.term = self.source("term", TermReport(connections=C))
        self.read_done = self.source("read_done", ReadDone(connections=C))
        bp = p.get("bp", 0.3)
        self.beats = []
        self.out = collections.defaultdict(list)       # conn -> [ulpdu bytes]
        self.o = self.sink("o", MpaTxBeat(width=self.W, connections=C), backpressure_prob=bp,
                           callback=self._beat)
        self.cq = self.sink("cq", TxCompletion(connections=C), backpressure_prob=bp)
        self.rr_done = self.sink("rr_done", RrDone(connections=C), backpressure_prob=bp)
        self.mem = None
        self.mute = set()
        self.to_answer = collections.deque()
        self.n_ulpdus = 0
        self.n_beats = 0
        self.coverage = collections.Counter()

    # -- output collection ------------------------------------------------------------
    def _beat(self, b):
        self.n_beats += 1
        if self.beats:
            assert not b["first"] and b["conn"] == self.beats[0]["conn"], f"ULPDUs interleave: {b}"
        else:
            assert b["first"], f"ULPDU without first beat: {b}"
        self.beats.append(b)
        if not b["last"]:
            assert b["n"] == self.W, f"short beat inside a ULPDU: {b}"
            return
        data = bytearray()
        for x in self.beats:
            data += (x["data"] & ((1 << (8 * x["n"])) - 1)).to_bytes(x["n"], "little")
        first = self.beats[0]
        self.beats = []
        assert first["length"] == len(data), f"length {first['length']} != {len(data)} octets"
        c = first["conn"]
        self.out[c].append(bytes(data))
        self.n_ulpdus += 1
        if not data[0] & 0x80 and data[1] & 0xF == 1 and c not in self.mute:
            req = ReadRequest.parse(data[18:46])
            self.to_answer.append((c, req))

    async def responder(self):
        """Answer Read Requests (read_done) after random delays, in order."""
        rng = random.Random(self.rng.random())
        while True:
            await self.cycles(rng.randint(1, 40))
            while self.to_answer and rng.random() < 0.7:
                c, req = self.to_answer.popleft()
                self.read_done.append(dict(conn=c, length=answer_length(req)))

    async def start(self):
        await self.reset()
        self.ram = AxiRamRead(AxiReadBus.from_prefix(self.dut, "m_axi_"), self.clk, self.rst, size=MEM)
        self.ram.log.setLevel("WARNING")
        for ch in (self.ram.ar_channel, self.ram.r_channel):
            ch.log.setLevel("WARNING")
        self.mem = self.rng.randbytes(MEM)
        self.ram.write(0, self.mem)
        bp = self.params.get("axi_bp", 0.3)
        rng = random.Random(self.rng.random())

        def pauses():
            while True:
                yield rng.random() < bp
        if bp:
            self.ram.ar_channel.set_pause_generator(pauses())
            self.ram.r_channel.set_pause_generator(pauses())
        cocotb.start_soon(self.responder())
        await self.cycles(2)

    async def quiesce(self, quiet=100):
        for d in (self.wr, self.cfg, self.stag_w, self.rrq, self.term, self.read_done):
            await d.wait_idle()
        dut = self.dut
        n = 0
        edge, ro = RisingEdge(self.clk), ReadOnly()
        while n < quiet:
            await edge
            await ro
            busy = (int(dut.o__valid.value) or int(dut.cq__valid.value) or int(dut.rr_done__valid.value)
                    or int(dut.m_axi__arvalid.value) or int(dut.m_axi__rvalid.value)
                    or self.to_answer or not self.read_done.idle() or not self.wr.idle()
                    or not self.rrq.idle())
            n = 0 if busy else n + 1

    def take_completions(self):
        got = list(self.cq.items)
        self.cq.items.clear()
        return got

    def take_rr_done(self):
        got = collections.Counter(x["conn"] for x in self.rr_done.items)
        self.rr_done.items.clear()
        return got


def answer_length(req):
    """The responder's Read Response length: the request's, or one more when the sink STag
    ends in 0xF (a LOCAL_LENGTH completion)."""
    return (req.size + 1) & 0xFFFFFFFF if req.sink_stag & 0xF == 0xF else req.size


class Conn:
    """Model state of one connection."""

    def __init__(self, mulpdu, ord_):
        self.tx = TxStream(mulpdu=mulpdu)
        self.mulpdu = mulpdu
        self.ord = ord_
        self.stopped = False


def rreq_term(rr, code):
    hdr = ulpdu(Opcode.RDMA_READ_REQUEST, ReadRequest(**{k: rr[k] for k in (
        "sink_stag", "sink_to", "size", "src_stag", "src_to")}), msn=rr["msn"])
    return Terminate(layer=0, etype=1, ecode=code, m=True, d=True, r=True, ddp_segment_length=46,
                     ddp_header=hdr[:18], rdmap_header=hdr[18:46]).build()


@cocotb.test()
async def random_traffic(dut):
    tb = TxTB(dut)
    await tb.start()
    rng = tb.rng
    C, S = tb.C, tb.S
    rounds = tb.params.get("rounds", 6)
    wrs_per = tb.params.get("wrs", 5)
    conns = {}
    rows = [None] * S
    wr_id = [1]
    bad_turn = [0]

    def write_row(i, row):
        rows[i] = row
        tb.stag_w.append(dict(index=i, stag=row["stag"], base=row["base"], length=row["length"],
                              addr=row["addr"], valid=int(row["valid"]), remote_read=int(row["rr"]),
                              remote_write=1, conn=row["conn"]))

    def random_row(i):
        length = rng.choice([rng.randint(1, 64), rng.randint(64, 4096), rng.randint(4096, 40000)])
        addr = rng.randrange(0, MEM - length)
        # TOs: VA-based (the address), zero-based, or anywhere below 2**64
        kind = rng.random()
        base = addr if kind < 0.4 else 0 if kind < 0.6 else rng.randrange(0, (1 << 64) - length)
        return dict(stag=(rng.getrandbits(32) & ~(S - 1)) | i, base=base, addr=addr,
                    length=length, valid=rng.random() < 0.85, rr=rng.random() < 0.8,
                    conn=i % C if rng.random() < 0.7 else rng.randrange(C))

    def addr_of(r, to):
        """Where row ``r`` puts TO ``to`` (the Read Request's ``src_addr`` from the RX side)."""
        return (r["addr"] + to - r["base"]) % (1 << 64)

    for i in range(S):
        write_row(i, random_row(i))

    def reset(c):
        mulpdu = rng.choice([rng.randint(72, 160), rng.randint(72, 400), rng.randint(400, 1200)])
        ord_ = rng.choice([0, 1, 1, 2, 3, 8])
        conns[c] = Conn(mulpdu, ord_)
        tb.cfg.append(dict(conn=c, mulpdu=mulpdu, ord=ord_))

    def post(c, op, **kw):
        w = dict(opcode=op, signaled=int(rng.random() < 0.8), conn=c, laddr=0, length=0, lstag=0,
                 rstag=0, rto=0, inv_stag=0, wr_id=wr_id[0])
        w.update(kw)
        wr_id[0] += 1
        tb.wr.append(w)
        return w

    def size_for(c, hlen):
        room = conns[c].mulpdu - hlen
        return max(0, rng.choice([0, rng.randint(1, 20), room + rng.randint(-2, 2),
                                  2 * room + rng.randint(-2, 2), rng.randint(0, 1500)]))

    def expect_wr(c, w, exp_sq, exp_cq):
        """Model a work request: its ULPDUs and completion."""
        st = conns[c]
        op, n = w["opcode"], w["length"]
        tb.coverage[f"op{op}"] += 1
        if n == 0:
            tb.coverage[f"op{op}_zero"] += 1
        data = tb.mem[w["laddr"]:w["laddr"] + n]
        if op == 0:
            exp_sq += st.tx.write(data, stag=w["rstag"], to=w["rto"])
        elif op in (3, 4, 5, 6):
            exp_sq += st.tx.message(op, data, inval_stag=w["inv_stag"] if op in (4, 6) else 0)
        elif op == 1 and st.ord:
            req = ReadRequest(sink_stag=w["lstag"], sink_to=w["laddr"], size=n, src_stag=w["rstag"],
                              src_to=w["rto"])
            exp_sq += st.tx.read_request(req)
            got = answer_length(req)
            status = SUCCESS if got == n else LOCAL_LENGTH
            if status != SUCCESS or w["signaled"]:
                exp_cq.append((c, w["wr_id"], status, got, 1))
            return
        else:
            exp_cq.append((c, w["wr_id"], BAD_REQUEST, 0, op))
            return
        if w["signaled"]:
            exp_cq.append((c, w["wr_id"], SUCCESS, n, op))

    def random_wr(c):
        op = rng.choice([0, 0, 1, 3, 3, 4, 5, 6, 0, 3, 1] + ([2, 7, 9, 15] if rng.random() < 0.2 else []))
        hlen = 14 if op == 0 else 18
        n = size_for(c, hlen)
        laddr = rng.randrange(0, MEM - n)
        return post(c, op, laddr=laddr, length=n, lstag=rng.getrandbits(32), rstag=rng.getrandbits(32),
                    rto=rng.getrandbits(64) if op != 0 else rng.getrandbits(63),
                    inv_stag=rng.getrandbits(32) if op in (4, 6) else 0)

    def good_rr(c):
        own = [r for r in rows if r["valid"] and r["rr"] and r["conn"] == c]
        size = rng.choice([0, rng.randint(1, 16), size_for(c, 14), size_for(c, 14)])
        if not own:
            size = 0
        if size == 0:
            src_stag, src_to, src_addr = rng.getrandbits(32), rng.getrandbits(64), 0
        else:
            r = rng.choice(own)
            size = min(size, r["length"])
            src_stag, src_to = r["stag"], r["base"] + rng.randint(0, r["length"] - size)
            src_addr = addr_of(r, src_to)
        return dict(conn=c, msn=rng.getrandbits(32), sink_stag=rng.getrandbits(32),
                    sink_to=rng.getrandbits(63), size=size, src_stag=src_stag, src_to=src_to,
                    src_addr=src_addr)

    def bad_rr(c):
        """A Read Request whose source fails the check; returns (request, code)."""
        own = [r for r in rows if r["valid"] and r["rr"] and r["conn"] == c]
        base = dict(conn=c, msn=rng.getrandbits(32), sink_stag=rng.getrandbits(32),
                    sink_to=rng.getrandbits(63), src_addr=0)
        kinds = ["invalid", "mismatch"]
        if own:
            kinds += ["bounds", "wrap", "wrap", "low", "moved"]
        if any(r["valid"] and r["conn"] != c for r in rows):
            kinds.append("assoc")
        if any(r["valid"] and not r["rr"] and r["conn"] == c for r in rows):
            kinds.append("access")
        # rotate through the kinds so that every code is reached in a short run
        order = ["bounds", "invalid", "wrap", "assoc", "access", "mismatch", "low", "moved"]
        k = None
        for j in range(len(order)):
            cand = order[(bad_turn[0] + j) % len(order)]
            if cand in kinds:
                k = cand
                break
        bad_turn[0] += 1
        if k == "invalid":
            cand = [r for r in rows if not r["valid"]]
            r = rng.choice(cand) if cand else rows[0]
            stag = r["stag"] if cand else rows[0]["stag"] ^ S     # same row, other STag
            return dict(base, size=rng.randint(1, 100), src_stag=stag, src_to=r["base"]), 0
        if k == "mismatch":
            r = rng.choice(rows)
            return dict(base, size=rng.randint(1, 100), src_stag=r["stag"] ^ (S << rng.randint(0, 20)),
                        src_to=r["base"]), 0
        if k == "assoc":
            r = rng.choice([r for r in rows if r["valid"] and r["conn"] != c])
            return dict(base, size=1, src_stag=r["stag"], src_to=r["base"]), 3
        if k == "access":
            r = rng.choice([r for r in rows if r["valid"] and not r["rr"] and r["conn"] == c])
            return dict(base, size=1, src_stag=r["stag"], src_to=r["base"]), 2
        r = rng.choice(own)
        if k == "moved":
            # inside the region, but the RX side mapped it elsewhere (the region was
            # registered again at another address since)
            to = r["base"] + rng.randrange(r["length"])
            return dict(base, size=1, src_stag=r["stag"], src_to=to,
                        src_addr=addr_of(r, to) ^ (64 << rng.randrange(8))), 1
        if k == "wrap":
            return dict(base, size=rng.randint(2, 100), src_stag=r["stag"],
                        src_to=(1 << 64) - 1), 4
        if k == "low":
            return dict(base, size=1, src_stag=r["stag"], src_to=max(0, r["base"] - 1)) \
                if r["base"] else dict(base, size=r["length"] + 1, src_stag=r["stag"], src_to=0), 1
        # (the read ends 1-3 octets past the region's end; its size is at most the region's
        # length, so it starts at or above the base and the TO is never negative)
        sz = rng.randint(1, min(50, r["length"]))
        return dict(base, size=sz, src_stag=r["stag"], src_to=r["base"] + r["length"] - sz + rng.randint(1, 3)), 1

    total_wrs = 0
    for rnd in range(rounds):
        # ---------------- phase A
        for c in range(C):
            if rnd == 0 or conns[c].stopped or rng.random() < 0.3:
                reset(c)
        if rnd and rng.random() < 0.5:
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(S)
                write_row(i, random_row(i))
        await tb.quiesce(10)
        exp_sq = {c: [] for c in range(C)}
        exp_rr = {c: [] for c in range(C)}
        exp_cq = []
        exp_rrd = collections.Counter()
        term_last = set()
        plans = {}
        for c in range(C):
            wrs = [] if rng.random() < 0.2 else [random_wr(c) for _ in range(rng.randint(0, wrs_per))]
            rrs = []
            if rng.random() < 0.5:
                rrs = [good_rr(c) for _ in range(rng.randint(1, tb.RQD))]
            bad = None
            if not wrs and rng.random() < 0.6:
                bad = bad_rr(c)
            plans[c] = (wrs, rrs, bad)
        # queue the inbound Read Requests (at most rrq_depth waiting per connection)
        for c in range(C):
            wrs, rrs, bad = plans[c]
            total_wrs += len(wrs)
            for w in wrs:
                expect_wr(c, w, exp_sq[c], exp_cq)
            st = conns[c]
            for r in rrs:
                exp_rr[c] += segment(Opcode.RDMA_READ_RESPONSE, tb.mem[r["src_addr"]:r["src_addr"] + r["size"]],
                                     mulpdu=st.mulpdu, stag=r["sink_stag"], to=r["sink_to"])
                exp_rrd[c] += 1
                tb.coverage["rr_zero" if r["size"] == 0 else "rr"] += 1
            if bad is not None:
                r, code = bad
                exp_sq[c] += st.tx.message(Opcode.TERMINATE, rreq_term(r, code))
                st.stopped = True
                term_last.add(c)
                tb.coverage[f"rr_bad_{code}"] += 1
        # Read Requests go in round-robin order so no connection's queue overflows
        pending = {c: list(plans[c][1]) + ([plans[c][2][0]] if plans[c][2] else []) for c in range(C)}
        feeder_done = [False]

        async def feed_rrq():
            sent = collections.Counter()
            done_before = collections.Counter()
            while any(pending.values()):
                for c in range(C):
                    if pending[c]:
                        # at most rrq_depth not yet answered: wait for rr_done
                        answered = done_before[c] + sum(1 for x in tb.rr_done.items if x["conn"] == c)
                        if sent[c] - answered < tb.RQD:
                            tb.rrq.append(pending[c].pop(0))
                            sent[c] += 1
                await tb.cycles(5)
            feeder_done[0] = True
        cocotb.start_soon(feed_rrq())
        while not feeder_done[0]:
            await tb.cycles(50)
        await tb.quiesce()
        got_cq = sorted(tuple(x[k] for k in ("conn", "wr_id", "status", "length", "opcode"))
                        for x in tb.take_completions())
        assert got_cq == sorted(exp_cq), f"round {rnd}: completions\n got {got_cq}\n exp {sorted(exp_cq)}"
        got_rrd = tb.take_rr_done()
        assert got_rrd == exp_rrd, f"round {rnd}: rr_done got {got_rrd} exp {exp_rrd}"
        for c in range(C):
            got = tb.out.pop(c, [])
            g_rr = [u for u in got if u[0] & 0x80 and u[1] & 0xF == 2]
            g_sq = [u for u in got if not (u[0] & 0x80 and u[1] & 0xF == 2)]
            open_tagged = None      # opcode of a tagged message in progress
            for u in got:
                if u[0] & 0x80:
                    assert open_tagged in (None, u[1] & 0xF), \
                        f"round {rnd} conn {c}: tagged messages interleave ({open_tagged} / {u[1] & 0xF})"
                    open_tagged = None if u[0] & 0x40 else u[1] & 0xF
                    tb.coverage["tagged_segment"] += 1
            check_list(rnd, c, "read responses", g_rr, exp_rr[c])
            check_list(rnd, c, "ULPDUs", g_sq, exp_sq[c])
            if c in term_last:
                assert got[-1] == exp_sq[c][-1], f"round {rnd} conn {c}: something after the Terminate"
        tb.log.info("round %d: %d ULPDUs so far, %d work requests", rnd, tb.n_ulpdus, total_wrs)

        # ---------------- phase B: term reports
        doomed = [c for c in range(C) if not conns[c].stopped and conns[c].ord and rng.random() < 0.3]
        exp_cq = []
        for c in doomed:
            st = conns[c]
            tb.mute.add(c)
            w = post(c, 1, laddr=rng.randrange(MEM), length=rng.randint(0, 500), lstag=rng.getrandbits(32),
                     rstag=rng.getrandbits(32), rto=rng.getrandbits(64))
            exp = st.tx.read_request(ReadRequest(sink_stag=w["lstag"], sink_to=w["laddr"], size=w["length"],
                                                 src_stag=w["rstag"], src_to=w["rto"]))
            while len(tb.out[c]) < 1:
                await tb.cycles(10)
            received = rng.random() < 0.4
            tlen = rng.randint(4, 52)
            tbytes = rng.randbytes(tlen)
            tb.term.append(dict(conn=c, received=int(received), layer=tbytes[0] >> 4, etype=tbytes[0] & 0xF,
                                ecode=tbytes[1] if tlen > 1 else 0, tlen=tlen,
                                term=int.from_bytes(tbytes, "little")))
            await tb.term.wait_idle()
            if not received:
                exp += st.tx.message(Opcode.TERMINATE, tbytes)
            exp_cq.append((c, w["wr_id"], REMOTE_ERROR if received else FLUSHED, 0, 1))
            tb.coverage["term_received" if received else "term_sent"] += 1
            for _ in range(2):
                w2 = random_wr(c)
                exp_cq.append((c, w2["wr_id"], FLUSHED, 0, w2["opcode"]))
            tb.rrq.append(good_rr(c))
            st.stopped = True
            await tb.quiesce(20)
            got = tb.out.pop(c, [])
            check_list(rnd, c, "ULPDUs after term", got, exp)
        await tb.quiesce()
        tb.mute.clear()
        got_cq = sorted(tuple(x[k] for k in ("conn", "wr_id", "status", "length", "opcode"))
                        for x in tb.take_completions())
        assert got_cq == sorted(exp_cq), f"round {rnd} B: completions\n got {got_cq}\n exp {sorted(exp_cq)}"
        assert not tb.take_rr_done(), "rr_done for a stopped connection"
        for c in range(C):
            assert not tb.out.get(c), f"round {rnd}: output on {c} after the term phase"
    tb.log.info("%d ULPDUs, %d beats, %d work requests, coverage %s", tb.n_ulpdus, tb.n_beats, total_wrs,
                dict(tb.coverage))
    for k in tb.params.get("want", []):
        assert tb.coverage[k], f"never covered: {k}"


def check_list(rnd, c, what, got, exp):
    if got == exp:
        return
    for i, (g, e) in enumerate(zip(got, exp)):
        if g != e:
            raise AssertionError(f"round {rnd} conn {c}: {what} #{i} differs\n got {g.hex()}\n exp {e.hex()}")
    raise AssertionError(f"round {rnd} conn {c}: {what}: got {len(got)}, expected {len(exp)}"
                         f"\n got {[g[:20].hex() for g in got]}\n exp {[e[:20].hex() for e in exp]}")


@cocotb.test()
async def throughput(dut):
    """One connection, long RDMA Writes, no back-pressure, memory without pauses: output beats
    per cycle from the first to the last beat (logged; at least ``min_eff``)."""
    tb = TxTB(dut)
    tb.o.backpressure_prob = 0
    tb.wr.idle_prob = 0
    tb.params["axi_bp"] = 0
    await tb.start()
    mulpdu = tb.params.get("tp_mulpdu", 1460)
    tb.cfg.append(dict(conn=1, mulpdu=mulpdu, ord=1))
    await tb.quiesce(5)
    n, size = 12, 6000
    cycles = []
    dut_o = tb.dut

    async def watch():
        edge, ro = RisingEdge(tb.clk), ReadOnly()
        while True:
            await edge
            await ro
            if int(dut_o.o__valid.value) and int(dut_o.o__ready.value):
                cycles.append(tb.cycle())
    cocotb.start_soon(watch())
    tx = TxStream(mulpdu=mulpdu)
    exp = []
    for k in range(n):
        laddr = 4096 * k + 3 * k
        tb.wr.append(dict(opcode=0, signaled=1, conn=1, laddr=laddr, length=size, rstag=5, rto=k * size,
                          wr_id=k))
        exp += tx.write(tb.mem[laddr:laddr + size], stag=5, to=k * size)
    await tb.quiesce()
    got = tb.out.pop(1, [])
    check_list(0, 1, "throughput ULPDUs", got, exp)
    span = cycles[-1] - cycles[0] + 1
    eff = len(cycles) / span
    octets = sum(len(u) for u in got)
    tb.log.info("throughput: %d ULPDUs, %d beats in %d cycles: %.3f beats/cycle, %.3f octets/(cycle*W)",
                len(got), len(cycles), span, eff, octets / (span * tb.W))
    assert eff >= tb.params.get("min_eff", 0.9), f"{eff:.3f} beats per cycle"
