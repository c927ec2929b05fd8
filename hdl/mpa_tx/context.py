"""Per-connection context of the TX framer: marker phase and switches, start-context queue."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import check_width, conn_bits
from ..mpa_config import MpaConfig
from .input import fpdu_start_signature
from .layouts import TX_CONTEXT, FpduStart

__all__ = ["start_queue_signature", "MpaTxContext"]


def start_queue_signature(width):
    """The head of the start-context queue (seen from the queue): ``head``, the oldest
    FPDU start context, taken with ``pop``; the queue is never empty when its FPDU's first
    word is taken."""
    return wiring.Signature({"head": Out(FpduStart(width=width)), "pop": In(1)})


class MpaTxContext(wiring.Component):
    """Per-connection context of the TX framer and the queue of FPDU start contexts.

    The context (:data:`TX_CONTEXT`: phase in words, markers, crc) is a memory with one
    row per connection, one plain synchronous read port (block RAM without transparency
    logic) and one write port. It is read when a ULPDU's first beat is accepted
    (``start``), registered, and two cycles later the phase after the FPDU is computed in
    closed form and written back: markers take one word in every 128, so the end phase
    follows from the FPDU's word count mod 127 (reduced from ``length`` in the two cycles
    after the accept) with one 8-bit add, no loop. The two writes a read cannot see (in
    the two cycles after it, from the ULPDUs accepted just before, or from ``cfg``) are
    forwarded from registers, so back-to-back ULPDUs of the same or different connections
    need no idle cycle, and the memory's output only feeds a register.

    Cycle by cycle, for a first beat accepted at t: t, the read (address ``start.conn``)
    and the FPDU's data word count N = ceil((2 + length) / 4) + 1; t+1, the read data
    registered, which of the writes at t and t+1 hit the connection registered too, N
    reduced mod 127 and mod 128; t+2, the start context (the newest of the write at t+1,
    the one at t, the row read), the end phase written back and the start context queued.

    The start contexts wait in a queue of three registers (one per first beat in the
    input registers R, A and B: a context is queued at t+2, when its first beat may still
    be in R) with their first word's phase facts (:class:`~rnic.hdl.mpa_tx.layouts.FpduStart`),
    until their first word enters the word buffer.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Rows of the context memory.

    Ports
    -----
    cfg : In(stream.Signature(MpaConfig))
        The framer's ``cfg`` port; ``ready`` is low in the cycle of a write-back.
    start : In(fpdu_start_signature)
        A ULPDU's first beat is accepted.
    o : Out(start_queue_signature)
        The queue's head, taken when the FPDU's first word enters the word buffer.
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        self.connections = connections
        super().__init__({
            "cfg": In(stream.Signature(MpaConfig(connections=connections))),
            "start": In(fpdu_start_signature(connections)),
            "o": Out(start_queue_signature(width)),
        })

    def elaborate(self, platform):
        m = Module()
        cb = conn_bits(self.connections)
        m.submodules.ctx = ctx_mem = memory.Memory(shape=TX_CONTEXT, depth=self.connections,
                                                   init=[])
        wp = ctx_mem.write_port()
        rp = ctx_mem.read_port()
        m.d.comb += rp.addr.eq(self.start.conn)
        nwords = Signal(15)
        m.d.comb += nwords.eq((self.start.length + 9) >> 2)
        p1_valid = Signal()
        p1_conn = Signal(cb)
        p1_nwords = Signal(15)
        m.d.sync += [
            p1_valid.eq(self.start.valid),
            p1_conn.eq(self.start.conn),
            p1_nwords.eq(nwords),
        ]
        # the last two writes to the context memory
        wh1_valid = Signal()
        wh1_addr = Signal(cb)
        wh1_data = Signal(TX_CONTEXT)
        wh2_data = Signal(TX_CONTEXT)
        m.d.sync += [
            wh1_valid.eq(wp.en), wh1_addr.eq(wp.addr), wh1_data.eq(wp.data),
            wh2_data.eq(wh1_data),
        ]
        p2_valid = Signal()
        p2_conn = Signal(cb)
        ctx_r = Signal(TX_CONTEXT)
        sel1 = Signal()           # the write in cycle t+1 hits our connection
        sel2 = Signal()           # the write in cycle t hits our connection
        m.d.sync += [
            p2_valid.eq(p1_valid), p2_conn.eq(p1_conn), ctx_r.eq(rp.data),
            sel1.eq(wp.en & (wp.addr == p1_conn)),
            sel2.eq(wh1_valid & (wh1_addr == p1_conn)),
        ]
        start = Signal(TX_CONTEXT)
        with m.If(sel1):
            m.d.comb += start.eq(wh1_data)
        with m.Elif(sel2):
            m.d.comb += start.eq(wh2_data)
        with m.Else():
            m.d.comb += start.eq(ctx_r)
        q_end = self._end_phase(m, p1_nwords, start)

        cfg = self.cfg
        m.d.comb += cfg.ready.eq(~p2_valid)
        with m.If(p2_valid):
            m.d.comb += [
                wp.addr.eq(p2_conn),
                wp.data.q.eq(q_end),
                wp.data.markers.eq(start.markers),
                wp.data.crc.eq(start.crc),
                wp.en.eq(1),
            ]
        with m.Elif(cfg.valid):
            m.d.comb += [
                wp.addr.eq(cfg.payload.conn),
                wp.data.q.eq(cfg.payload.phase[2:9]),
                wp.data.markers.eq(cfg.payload.markers),
                wp.data.crc.eq(cfg.payload.crc),
                wp.en.eq(1),
            ]
        self._queue(m, p2_valid, start)
        return m

    def _end_phase(self, m, p1_nwords, start):
        """The phase after the FPDU of ``p1_nwords`` data words (registered at t+1) that
        starts at ``start`` (t+2)."""
        # t+1: N mod 127 (128 = 1 mod 127), N mod 127 + 1, and the end phase for a start
        # phase of 0, side by side from the folded sum n_y = N[0:7] + N[7:14] + N[14]
        # (0..255, one adder with N[14] as its carry in; N < 2**15), which is N mod 127
        # after subtracting 127 once or (254, 255) twice
        n_y = Signal(8)
        m.d.comb += n_y.eq(p1_nwords[0:7] + p1_nwords[7:14] + p1_nwords[14])
        n_wrap = Signal()
        n_wrap2 = Signal()
        m.d.comb += [n_wrap.eq(n_y >= 127), n_wrap2.eq(n_y >= 254)]
        p2_n127 = Signal(7)
        p2_n128 = Signal(7)
        p2_qe0 = Signal(7)        # end phase with markers if the start phase is 0
        p2_n127p1 = Signal(8)
        m.d.sync += [
            p2_n127.eq(Mux(n_wrap2, n_y - 254, Mux(n_wrap, n_y - 127, n_y))),
            p2_n128.eq(p1_nwords[0:7]),
            p2_qe0.eq(Mux((n_y == 0) | (n_y == 127) | (n_y == 254), 0,
                          Mux(n_wrap2, n_y - 253, Mux(n_wrap, n_y - 126, n_y + 1)))),
            p2_n127p1.eq(Mux(n_wrap2, n_y - 253, Mux(n_wrap, n_y - 126, n_y + 1))),
        ]
        # Markers: a period of 128 words is a marker (phase 0) and 127 other words; with
        # u = content words of the period already used (q0 - 1, or 0 if q0 is 0)
        # r = (u + N) mod 127 and the end phase is 0 if r == 0 (the next word is a marker),
        # else r + 1 (an FPDU never ends with a marker). For q0 >= 1 with A = q0 + N mod 127:
        # no wrap (A < 128): r + 1 = A; wrap: r + 1 = A - 127 = A[0:7] + 1.
        q0 = start.q
        sum_a = Signal(8)
        sum_b = Signal(8)
        m.d.comb += [sum_a.eq(q0 + p2_n127), sum_b.eq(q0 + p2_n127p1)]
        q_end = Signal(7)
        with m.If(~start.markers):
            m.d.comb += q_end.eq(q0 + p2_n128)
        with m.Elif(q0 == 0):
            m.d.comb += q_end.eq(p2_qe0)
        with m.Elif(sum_a[7]):
            m.d.comb += q_end.eq(Mux(sum_a[0:7] == 0, 0, sum_b[0:7]))
        with m.Else():
            m.d.comb += q_end.eq(Mux(sum_a == 1, 0, sum_a[0:7]))
        return q_end

    def _queue(self, m, push, new_ctx):
        """The start-context queue: ``new_ctx`` pushed with ``push``, the head on ``o``."""
        L = self.width // 4
        CQ = 3
        cq = [Signal(TX_CONTEXT, name=f"cq{k}") for k in range(CQ)]
        cq_f = [Signal(2 * L + 7, name=f"cq_facts{k}") for k in range(CQ)]
        cq_n = Signal(range(CQ + 1))

        def phase_facts(c):
            # (q + k) mod 128 == 0 as q == -k mod 128: compares with constants, no adder
            return Cat(Cat(*[c.markers & (c.q == (-k) % 128) for k in range(L)]),
                       (c.q + L)[0:7], Cat(*[c.q == (-L - k) % 128 for k in range(L)]))
        new_f = Signal(2 * L + 7)
        m.d.comb += new_f.eq(phase_facts(new_ctx))
        facts = cq_f[0]
        head = self.o.head
        pop = self.o.pop
        m.d.comb += [
            head.ctx.eq(cq[0]),
            head.mlanes.eq(facts[:L]), head.qn.eq(facts[L:L + 7]), head.mnext.eq(facts[L + 7:]),
        ]
        # a shift register: a pop moves every entry down; the push goes to the first free
        # entry after the pop (entry cq_n - pop)
        with m.If(pop):
            m.d.sync += [e.eq(n) for e, n in zip(cq[:-1], cq[1:])]
            m.d.sync += [e.eq(n) for e, n in zip(cq_f[:-1], cq_f[1:])]
        with m.If(push):
            with m.Switch(cq_n - pop):
                for k in range(CQ):
                    with m.Case(k):
                        m.d.sync += [cq[k].eq(new_ctx), cq_f[k].eq(new_f)]
        m.d.sync += cq_n.eq(cq_n + push - pop)
