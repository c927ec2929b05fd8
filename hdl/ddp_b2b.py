"""Two RNIC data paths back to back, for tests and benchmarks.

:class:`B2BTop` is a pair of nodes ``a`` and ``b``, each DdpTx -> MpaTxFramer ->
(wire) -> peer's MpaRxDeframer -> peer's DdpRx, with the RX side's Read Requests,
``rr_done``, error reports and Read Response completions wired to the node's own TX
side. The wire (``X_wo`` out, ``X_wi`` in) and each node's memory port (``X_axi``) are
top-level ports, so a testbench moves the wire octets (re-cut into TCP segments as it
likes) and attaches a memory model (tests/hdl/cocotb_ddp_b2b.py).

:class:`DdpBenchTop` wraps a :class:`B2BTop` for ``rnic bench ddp`` (host/tools/bench.py,
sim/cocotb_bench_ddp.py): the wires are connected in hardware (a's framer output
straight into b's deframer and back: every run of whole FPDUs the framer emits is one
TCP segment), and each node's memory is a pair of AXI slaves that never back-pressure:
a pattern memory for reads (octet at address ``A`` is :func:`pattern_octet` ``(A)``) and
a checking sink for writes. Placement is checked in hardware, octet for octet, against
a memory compare's model: the benchmark places every message at the same address its
payload is read from on the sending node, in one contiguous range, so a correct run
writes exactly the octets ``base .. base + n - 1``, each once, in ascending order, each
equal to ``pattern_octet`` of its address. Anything else (a gap, a repeat, a hole in a
strobe mask, a wrong octet) counts in ``X_errors`` and latches the first bad address.
Counters (``X_placed`` octets, write beats, first/last write cycle, wire octets and
TCP segments out of the framer, receive completions) make the figures.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .beat import check_width, OctetBeat, conn_bits
from .axi import AXI4ReadSignature, AXI4WriteSignature
from .ddp_rx import DdpRx
from .ddp_tx import DdpTx, TxCompletion, TxConnCfg, WorkRequest
from .mpa_config import MpaConfig
from .mpa_rx import MpaRxDeframer
from .mpa_tx import MpaTxFramer
from .rdma_layouts import Completion, ConnCtl, RqPost, StagWrite

__all__ = ["NODES", "B2BTop", "DdpBenchTop", "pattern_octet", "pattern_bytes"]

#: Node names of :class:`B2BTop`.
NODES = ("a", "b")


def _pow2(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 2 or v & (v - 1):
        raise ValueError(f"{name} must be a power of 2 (>= 2), not {v!r}")


def _check_params(width, connections, stags, addr_width, slots, slot_bytes, rq_depth, sq_depth,
                  rrq_depth, ord_depth):
    check_width(width)
    conn_bits(connections)
    for name, v in (("stags", stags), ("slots", slots), ("slot_bytes", slot_bytes),
                    ("rq_depth", rq_depth), ("sq_depth", sq_depth), ("rrq_depth", rrq_depth),
                    ("ord_depth", ord_depth)):
        _pow2(name, v)
    if isinstance(addr_width, bool) or not isinstance(addr_width, int) or not 13 <= addr_width <= 64:
        raise ValueError(f"addr_width must be an int in 13..64, not {addr_width!r}")


def _axi_members(addr_width, data_width):
    """Union of the AXI4 write and read channel members (one port for an AxiRam)."""
    w = AXI4WriteSignature(addr_width=addr_width, data_width=data_width)
    r = AXI4ReadSignature(addr_width=addr_width, data_width=data_width)
    return {**dict(w.members.items()), **dict(r.members.items())}, w, r


class B2BTop(wiring.Component):
    """Two nodes ``a`` and ``b``. Ports per node X (X = a, b):

    ``X_wr``, ``X_txcfg`` (DdpTx), ``X_stag`` (to both DdpRx and DdpTx STag tables),
    ``X_rqpost``, ``X_rxctl`` (DdpRx), ``X_fcfg`` (framer), ``X_dcfg`` (deframer);
    outputs ``X_tcq`` (work request completions), ``X_rcq`` (received Send completions;
    Read Response completions go to the node's DdpTx ``read_done``), ``X_wo`` (the
    framer's TCP payload) and input ``X_wi`` (TCP payload into the deframer); ``X_axi``
    the node's memory port (AW/W/B from DdpRx, AR/R from DdpTx).

    Parameters (keyword only) are those of :class:`rnic.hdl.ddp_tx.DdpTx` and
    :class:`rnic.hdl.ddp_rx.DdpRx`: ``width`` (4, 8, 16, 32), ``connections``, ``stags``,
    ``addr_width`` (13..64), ``slots``, ``slot_bytes`` (>= every connection's MULPDU),
    ``rq_depth``, ``sq_depth``, ``rrq_depth``, ``ord_depth`` (powers of 2).
    """

    def __init__(self, *, width=8, connections=2, stags=32, addr_width=20, slots=4, slot_bytes=512,
                 rq_depth=8, sq_depth=8, rrq_depth=4, ord_depth=4):
        _check_params(width, connections, stags, addr_width, slots, slot_bytes, rq_depth, sq_depth,
                      rrq_depth, ord_depth)
        self.p = dict(width=width, connections=connections, stags=stags, addr_width=addr_width,
                      slots=slots, slot_bytes=slot_bytes, rq_depth=rq_depth, sq_depth=sq_depth,
                      rrq_depth=rrq_depth, ord_depth=ord_depth)
        C = connections
        members, _, _ = _axi_members(addr_width, 8 * width)
        sig = {}
        for x in NODES:
            sig.update({
                f"{x}_wr": In(stream.Signature(WorkRequest(connections=C))),
                f"{x}_txcfg": In(stream.Signature(TxConnCfg(connections=C))),
                f"{x}_stag": In(stream.Signature(StagWrite(stags=stags, connections=C))),
                f"{x}_rqpost": In(stream.Signature(RqPost(connections=C))),
                f"{x}_rxctl": In(stream.Signature(ConnCtl(connections=C))),
                f"{x}_fcfg": In(stream.Signature(MpaConfig(connections=C))),
                f"{x}_dcfg": In(stream.Signature(MpaConfig(connections=C))),
                f"{x}_tcq": Out(stream.Signature(TxCompletion(connections=C))),
                f"{x}_rcq": Out(stream.Signature(Completion(connections=C))),
                f"{x}_wo": Out(stream.Signature(OctetBeat(width=width, connections=C))),
                f"{x}_wi": In(stream.Signature(OctetBeat(width=width, connections=C))),
                f"{x}_axi": Out(wiring.Signature(members)),
            })
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        p = self.p
        W, C = p["width"], p["connections"]
        _, wsig, rsig = _axi_members(p["addr_width"], 8 * W)
        for x in NODES:
            tx = DdpTx(width=W, connections=C, sq_depth=p["sq_depth"], rrq_depth=p["rrq_depth"],
                       ord_depth=p["ord_depth"], stags=p["stags"], addr_width=p["addr_width"])
            rx = DdpRx(width=W, connections=C, stags=p["stags"], slots=p["slots"], slot_bytes=p["slot_bytes"],
                       rq_depth=p["rq_depth"], addr_width=p["addr_width"])
            fr = MpaTxFramer(width=W, connections=C)
            de = MpaRxDeframer(width=W, connections=C)
            m.submodules[f"{x}_tx"] = tx
            m.submodules[f"{x}_rx"] = rx
            m.submodules[f"{x}_fr"] = fr
            m.submodules[f"{x}_de"] = de
            port = lambda name: getattr(self, f"{x}_{name}")  # noqa: E731
            wiring.connect(m, wiring.flipped(port("wr")), tx.wr)
            wiring.connect(m, wiring.flipped(port("txcfg")), tx.cfg)
            wiring.connect(m, wiring.flipped(port("rqpost")), rx.rq_post)
            wiring.connect(m, wiring.flipped(port("rxctl")), rx.ctl)
            wiring.connect(m, wiring.flipped(port("fcfg")), fr.cfg)
            wiring.connect(m, wiring.flipped(port("dcfg")), de.cfg)
            wiring.connect(m, wiring.flipped(port("tcq")), tx.cq)
            wiring.connect(m, wiring.flipped(port("wo")), fr.o)
            wiring.connect(m, wiring.flipped(port("wi")), de.i)
            wiring.connect(m, tx.o, fr.i)
            wiring.connect(m, de.o, rx.i)
            wiring.connect(m, rx.rrq, tx.rrq)
            wiring.connect(m, tx.rr_done, rx.rr_done)
            wiring.connect(m, rx.term, tx.term)
            # STag writes to both tables (DdpTx's is always ready)
            st = port("stag")
            m.d.comb += [
                rx.stag_w.payload.eq(st.payload), tx.stag_w.payload.eq(st.payload),
                rx.stag_w.valid.eq(st.valid), tx.stag_w.valid.eq(st.valid & rx.stag_w.ready),
                st.ready.eq(rx.stag_w.ready),
            ]
            # RX completions: Read Responses complete the TX side's Reads, the rest go out
            rcq = port("rcq")
            is_rr = rx.cq.payload.opcode == 2
            m.d.comb += [
                rcq.payload.eq(rx.cq.payload),
                tx.read_done.payload.conn.eq(rx.cq.payload.conn),
                tx.read_done.payload.length.eq(rx.cq.payload.length),
                rcq.valid.eq(rx.cq.valid & ~is_rr),
                tx.read_done.valid.eq(rx.cq.valid & is_rr),
                rx.cq.ready.eq(is_rr & tx.read_done.ready | ~is_rr & rcq.ready),
            ]
            axi = port("axi")
            for name, mem in wsig.members.items():
                if mem.flow == Out:
                    m.d.comb += getattr(axi, name).eq(getattr(rx.m_axi, name))
                else:
                    m.d.comb += getattr(rx.m_axi, name).eq(getattr(axi, name))
            for name, mem in rsig.members.items():
                if mem.flow == Out:
                    m.d.comb += getattr(axi, name).eq(getattr(tx.m_axi, name))
                else:
                    m.d.comb += getattr(tx.m_axi, name).eq(getattr(axi, name))
        return m


# ---------------------------------------------------------------------------- benchmark top

def pattern_octet(addr):
    """Octet at address ``addr`` of the bench's pattern memory (also what the checker expects)."""
    return ((addr & 0xFF) ^ (((addr >> 8) * 0x9D) & 0xFF) ^ (((addr >> 16) * 0x3B) & 0xFF)) & 0xFF


def pattern_bytes(addr, n):
    """``n`` octets of the pattern memory from ``addr``."""
    return bytes(pattern_octet(addr + k) for k in range(n))


def _pattern_hw(a):
    """Amaranth expression of :func:`pattern_octet` for an address value ``a``."""
    return (a[:8] ^ (a[8:] * 0x9D)[:8] ^ (a[16:] * 0x3B)[:8])[:8]


class _PatternReadSlave(wiring.Component):
    """AXI4 read slave whose memory holds :func:`pattern_octet` at every address.

    AR always ready while its 4-entry queue has room; R beats back to back, bursts too (the
    next burst's first beat follows the last beat of the one before; INCR bursts,
    full-width beats; beat k reads the aligned burst address + W*k).
    """

    def __init__(self, *, width, addr_width):
        self.width = width
        self.addr_width = addr_width
        super().__init__({"axi": In(AXI4ReadSignature(addr_width=addr_width, data_width=8 * width))})

    def elaborate(self, platform):
        m = Module()
        W, AW = self.width, self.addr_width
        axi = self.axi
        q = SyncFIFOBuffered(width=AW + 8, depth=4)
        m.submodules.q = q
        m.d.comb += [
            q.w_data.eq(axi.araddr | (axi.arlen << AW)), q.w_en.eq(axi.arvalid),
            axi.arready.eq(q.w_rdy),
        ]
        busy = Signal()
        addr = Signal(AW)
        left = Signal(9)
        last_taken = Signal()
        m.d.comb += last_taken.eq(busy & axi.rready & (left == 1))
        lanes = [_pattern_hw((addr + k)[:AW]) for k in range(W)]
        m.d.comb += [
            axi.rid.eq(0), axi.rresp.eq(0), axi.rvalid.eq(busy), axi.rlast.eq(left == 1),
            axi.rdata.eq(Cat(*lanes)),
        ]
        with m.If(q.r_rdy & (~busy | last_taken)):
            m.d.comb += q.r_en.eq(1)
            m.d.sync += [busy.eq(1), addr.eq(q.r_data[:AW] & ~Const(W - 1, AW)),
                         left.eq(q.r_data[AW:] + 1)]
        with m.Elif(last_taken):
            m.d.sync += busy.eq(0)
        with m.Elif(busy & axi.rready):
            m.d.sync += [addr.eq(addr + W), left.eq(left - 1)]
        return m


class _CheckWriteSlave(wiring.Component):
    """AXI4 write slave (never back-pressures) that checks placement.

    ``load`` (a pulse) sets the next expected address to ``base`` and clears the
    counters. Every W beat (paired with its AW; single-beat bursts) must carry strobes
    that form one contiguous run of lanes starting exactly at the next expected address,
    and every strobed octet must equal :func:`pattern_octet` of its address; then the
    next expected address advances by the strobed count. A violation increments
    ``errors`` and the first one latches ``bad_addr`` (the beat's word address).
    """

    def __init__(self, *, width, addr_width):
        self.width = width
        self.addr_width = addr_width
        super().__init__({
            "axi": In(AXI4WriteSignature(addr_width=addr_width, data_width=8 * width)),
            "cycle": In(32), "load": In(1), "base": In(addr_width),
            "placed": Out(32), "beats": Out(32), "errors": Out(32), "bad_addr": Out(addr_width),
            "first_w": Out(32), "last_w": Out(32), "next": Out(addr_width),
        })

    def elaborate(self, platform):
        m = Module()
        W, AW = self.width, self.addr_width
        axi = self.axi
        # AW queue; a W beat pairs with the oldest queued AW or, with the queue empty, with
        # the AW offered in the same cycle (no bubble when both come together).
        q = SyncFIFOBuffered(width=AW, depth=16)
        m.submodules.q = q
        w_addr = Signal(AW)
        w_go = Signal()
        bypass = Signal()
        m.d.comb += [
            bypass.eq(~q.r_rdy & axi.awvalid),
            w_addr.eq(Mux(q.r_rdy, q.r_data, axi.awaddr)),
            axi.wready.eq(q.r_rdy | axi.awvalid),
            w_go.eq(axi.wvalid & axi.wready),
            q.r_en.eq(w_go & q.r_rdy),
            q.w_data.eq(axi.awaddr),
            q.w_en.eq(axi.awvalid & ~(bypass & axi.wvalid)),
            axi.awready.eq(Mux(bypass & axi.wvalid, 1, q.w_rdy)),
        ]
        # B responses owed
        owed = Signal(16)
        m.d.comb += [axi.bvalid.eq(owed != 0), axi.bid.eq(0), axi.bresp.eq(0)]
        m.d.sync += owed.eq(owed + w_go - (axi.bvalid & axi.bready))

        word = Signal(AW)
        m.d.comb += word.eq(w_addr & ~Const(W - 1, AW))
        strb = axi.wstrb
        count = Signal(range(W + 1))
        m.d.comb += count.eq(sum(strb[k] for k in range(W)))
        start = Signal(AW)              # next - word: lane of the first strobe expected
        m.d.comb += start.eq(self.next - word)
        lane0 = start[:max(1, (W - 1).bit_length())]
        below = ((Const(1, W + 1) << lane0) - 1)[:W]      # lanes before the expected first one
        run = Signal(W)
        m.d.comb += run.eq(strb >> lane0)
        shape_ok = Signal()
        m.d.comb += shape_ok.eq((start < W) & ((strb & below) == 0) & ((run & (run + 1)[:W]) == 0)
                                & (count != 0))
        data_ok = Signal()
        lane_ok = [~strb[k] | (axi.wdata[8 * k:8 * k + 8] == _pattern_hw((word + k)[:AW])) for k in range(W)]
        m.d.comb += data_ok.eq(Cat(*lane_ok).all())
        ok = Signal()
        m.d.comb += ok.eq(shape_ok & data_ok)
        with m.If(self.load):
            m.d.sync += [self.next.eq(self.base), self.placed.eq(0), self.beats.eq(0), self.errors.eq(0),
                         self.bad_addr.eq(0), self.first_w.eq(0), self.last_w.eq(0)]
        with m.Elif(w_go):
            m.d.sync += [self.placed.eq(self.placed + count), self.beats.eq(self.beats + 1),
                         self.last_w.eq(self.cycle), self.next.eq(self.next + count)]
            with m.If(self.beats == 0):
                m.d.sync += self.first_w.eq(self.cycle)
            with m.If(~ok):
                m.d.sync += self.errors.eq(self.errors + 1)
                with m.If(self.errors == 0):
                    m.d.sync += self.bad_addr.eq(word)
        return m


class DdpBenchTop(wiring.Component):
    """:class:`B2BTop` with the wires and the memories inside, for ``rnic bench ddp``.

    Ports per node X (a, b): ``X_wr``, ``X_txcfg``, ``X_stag``, ``X_rqpost``, ``X_rxctl``,
    ``X_fcfg``, ``X_dcfg``, ``X_tcq`` as on :class:`B2BTop`; ``X_rcq`` is taken inside
    (always ready): ``X_rcq_count`` counts receive completions, ``X_rcq_octets`` sums
    their lengths. Memory checker (see :class:`_CheckWriteSlave`): inputs ``X_load``,
    ``X_base``; outputs ``X_placed``, ``X_beats``, ``X_errors``, ``X_bad_addr``,
    ``X_first_w``, ``X_last_w``, ``X_next``. Wire counters of X's framer output:
    ``X_wire_octets``, ``X_wire_beats``, ``X_wire_segs`` (TCP segments = the framer's runs
    of whole FPDUs, ``last`` beats), ``X_wire_maxseg`` (octets of the longest run) and
    ``X_wire_stalls`` (cycles the peer's deframer held a beat back), cleared by ``X_load``. ``cycle``: free-running cycle counter (from reset).

    Parameters (keyword only) are those of :class:`B2BTop`; defaults suit EMSS 1460
    (``slot_bytes`` 2048 >= MULPDU 1442) and up to 1024 receive buffers posted ahead.
    """

    def __init__(self, *, width=8, connections=1, stags=4, addr_width=24, slots=4, slot_bytes=2048,
                 rq_depth=1024, sq_depth=8, rrq_depth=4, ord_depth=4):
        _check_params(width, connections, stags, addr_width, slots, slot_bytes, rq_depth, sq_depth,
                      rrq_depth, ord_depth)
        self.p = dict(width=width, connections=connections, stags=stags, addr_width=addr_width,
                      slots=slots, slot_bytes=slot_bytes, rq_depth=rq_depth, sq_depth=sq_depth,
                      rrq_depth=rrq_depth, ord_depth=ord_depth)
        C, AW = connections, addr_width
        sig = {"cycle": Out(32)}
        for x in NODES:
            sig.update({
                f"{x}_wr": In(stream.Signature(WorkRequest(connections=C))),
                f"{x}_txcfg": In(stream.Signature(TxConnCfg(connections=C))),
                f"{x}_stag": In(stream.Signature(StagWrite(stags=stags, connections=C))),
                f"{x}_rqpost": In(stream.Signature(RqPost(connections=C))),
                f"{x}_rxctl": In(stream.Signature(ConnCtl(connections=C))),
                f"{x}_fcfg": In(stream.Signature(MpaConfig(connections=C))),
                f"{x}_dcfg": In(stream.Signature(MpaConfig(connections=C))),
                f"{x}_tcq": Out(stream.Signature(TxCompletion(connections=C))),
                f"{x}_load": In(1), f"{x}_base": In(AW),
                f"{x}_placed": Out(32), f"{x}_beats": Out(32), f"{x}_errors": Out(32),
                f"{x}_bad_addr": Out(AW), f"{x}_first_w": Out(32), f"{x}_last_w": Out(32),
                f"{x}_next": Out(AW), f"{x}_wire_octets": Out(32), f"{x}_wire_segs": Out(32),
                f"{x}_wire_beats": Out(32), f"{x}_wire_maxseg": Out(32), f"{x}_wire_stalls": Out(32),
                f"{x}_rcq_count": Out(32), f"{x}_rcq_octets": Out(32),
            })
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        p = self.p
        W, AW = p["width"], p["addr_width"]
        m.submodules.b2b = top = B2BTop(**p)
        m.d.sync += self.cycle.eq(self.cycle + 1)
        _, wsig, rsig = _axi_members(AW, 8 * W)
        for x in NODES:
            y = "b" if x == "a" else "a"
            port = lambda name, x=x: getattr(self, f"{x}_{name}")       # noqa: E731
            inner = lambda name, x=x: getattr(top, f"{x}_{name}")       # noqa: E731
            for name in ("wr", "txcfg", "stag", "rqpost", "rxctl", "fcfg", "dcfg"):
                wiring.connect(m, wiring.flipped(port(name)), inner(name))
            wiring.connect(m, wiring.flipped(port("tcq")), inner("tcq"))
            # wire: x's framer straight into y's deframer
            wo, wi = inner("wo"), getattr(top, f"{y}_wi")
            m.d.comb += [wi.payload.eq(wo.payload), wi.valid.eq(wo.valid), wo.ready.eq(wi.ready)]
            run_len = Signal(32)
            run_now = Signal(32)
            m.d.comb += run_now.eq(Mux(wo.payload.first, 0, run_len) + wo.payload.n)
            with m.If(port("load")):
                m.d.sync += [port("wire_octets").eq(0), port("wire_segs").eq(0), port("wire_beats").eq(0),
                             port("wire_maxseg").eq(0), run_len.eq(0), port("wire_stalls").eq(0)]
            with m.Elif(wo.valid & ~wo.ready):
                m.d.sync += port("wire_stalls").eq(port("wire_stalls") + 1)
            with m.Elif(wo.valid & wo.ready):
                m.d.sync += [port("wire_octets").eq(port("wire_octets") + wo.payload.n),
                             port("wire_segs").eq(port("wire_segs") + wo.payload.last),
                             port("wire_beats").eq(port("wire_beats") + 1), run_len.eq(run_now)]
                with m.If(run_now > port("wire_maxseg")):
                    m.d.sync += port("wire_maxseg").eq(run_now)
            # receive completions: always taken, counted
            rcq = inner("rcq")
            m.d.comb += rcq.ready.eq(1)
            with m.If(port("load")):
                m.d.sync += [port("rcq_count").eq(0), port("rcq_octets").eq(0)]
            with m.Elif(rcq.valid):
                m.d.sync += [port("rcq_count").eq(port("rcq_count") + 1),
                             port("rcq_octets").eq(port("rcq_octets") + rcq.payload.length)]
            # memory: pattern reads, checked writes
            rd = _PatternReadSlave(width=W, addr_width=AW)
            wr = _CheckWriteSlave(width=W, addr_width=AW)
            m.submodules[f"{x}_rd"] = rd
            m.submodules[f"{x}_wrchk"] = wr
            axi = inner("axi")
            for name, mem in rsig.members.items():
                if mem.flow == Out:
                    m.d.comb += getattr(rd.axi, name).eq(getattr(axi, name))
                else:
                    m.d.comb += getattr(axi, name).eq(getattr(rd.axi, name))
            for name, mem in wsig.members.items():
                if mem.flow == Out:
                    m.d.comb += getattr(wr.axi, name).eq(getattr(axi, name))
                else:
                    m.d.comb += getattr(axi, name).eq(getattr(wr.axi, name))
            m.d.comb += [wr.cycle.eq(self.cycle), wr.load.eq(port("load")), wr.base.eq(port("base"))]
            for name in ("placed", "beats", "errors", "bad_addr", "first_w", "last_w", "next"):
                m.d.comb += port(name).eq(getattr(wr, name))
        return m
