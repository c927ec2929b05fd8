"""MPA TX framer: ULPDUs in, FPDUs (length, pad, markers, CRC32c) out.

See :class:`MpaTxFramer`.
"""

from functools import lru_cache

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..beat import check_width, OctetBeat, conn_bits
from ..crc32c import CRC32C_INIT, crc32c_words_model
from ..mpa_config import MpaConfig
from ..synth_hints import register_copies

__all__ = ["MpaTxBeat", "MpaTxFramer", "TX_CONTEXT"]


def _crc_f(x):
    """The word update is linear in register ^ word: register' = f(register ^ word)."""
    return crc32c_words_model(x, [0])


@lru_cache(maxsize=None)
def _crc_masks(power=1):
    """Masks of f^power: output bit i = parity(x & masks[i])."""
    cols = []
    for j in range(32):
        x = 1 << j
        for _ in range(power):
            x = _crc_f(x)
        cols.append(x)
    return tuple(sum(((c >> i) & 1) << j for j, c in enumerate(cols)) for i in range(32))


def _crc_apply(x, power=1):
    """Combinational f^power(x) (32 XOR trees)."""
    x = Value.cast(x)
    bits = []
    for mask in _crc_masks(power):
        terms = [x[j] for j in range(32) if (mask >> j) & 1]
        acc = terms[0]
        for t in terms[1:]:
            acc = acc ^ t
        bits.append(acc)
    return Cat(*bits)


def _crc_const(power):
    """f^power(CRC32C_INIT), a constant."""
    x = CRC32C_INIT
    for _ in range(power):
        x = _crc_f(x)
    return x


def _crc_step(state, word):
    """Combinational CRC32c register update by one word, f(state ^ word).

    Same function as :func:`rnic.hdl.crc32c.crc32c_step` (the matrices come from
    :func:`rnic.hdl.crc32c.crc32c_words_model`), written on ``state ^ word`` (32 XOR
    inputs per bit instead of 64) and next to the powers f^p that the closed
    form of :func:`_crc_lanes` needs.
    """
    return _crc_apply(Value.cast(state) ^ Value.cast(word))


def _crc_lanes(m, state, words, starts, *, unroll):
    """CRC registers over the word lanes of one beat.

    ``state`` is the register before lane 0, ``starts[k]`` restarts the CRC at lane k.
    Returns ``(cins, after)``: the register before each lane (after the restart, so a CRC
    lane sends ``~cins[k]``) and the register after the last lane. Lanes after a CRC lane
    of the same FPDU do not occur (an FPDU ends with its CRC), so the CRC lane's own
    update is never used.

    With ``unroll`` the register before/after lane k is built in closed form,
    ``f^(k-j)(INIT or state) ^ XOR_i f^(k-i)(w_i)`` (j = last restart), which puts one
    XOR tree between the state register and its next value instead of one per lane
    (O(L^2) trees: used for W <= 16); otherwise the lanes are chained.
    """
    L = len(words)
    cins = []
    if not unroll:
        for k in range(L):
            cin = Signal(32, name=f"crc_in{k}")
            m.d.comb += cin.eq(Mux(starts[k], CRC32C_INIT, state))
            cins.append(cin)
            state = _crc_step(cin, words[k])
        return cins, state
    fw = {}                       # (i, p): f^p(w_i)

    def word_term(i, p):
        if (i, p) not in fw:
            sig = Signal(32, name=f"crc_w{i}_p{p}")
            m.d.comb += sig.eq(_crc_apply(words[i], p))
            fw[(i, p)] = sig
        return fw[(i, p)]

    fs = {}                       # p: f^p(state)

    def state_term(p):
        if p not in fs:
            sig = Signal(32, name=f"crc_s_p{p}")
            m.d.comb += sig.eq(_crc_apply(state, p))
            fs[p] = sig
        return fs[p]

    def register_before(k):
        """Register before lane k, ignoring a restart at lane k itself."""
        if k == 0:
            return Value.cast(state)
        # base: from the last restart j < k (constant), else from 'state'
        base = state_term(k)
        for j in range(k):        # later j wins: build from the oldest
            base = Mux(starts[j], _crc_const(k - j), base)
        acc = base
        for i in range(k):
            dropped = 0
            for j in range(i + 1, k):
                dropped = dropped | starts[j]
            acc = acc ^ Mux(dropped, 0, word_term(i, k - i))
        sig = Signal(32, name=f"crc_before{k}")
        m.d.comb += sig.eq(acc)
        return sig

    for k in range(L):
        cin = Signal(32, name=f"crc_in{k}")
        m.d.comb += cin.eq(Mux(starts[k], CRC32C_INIT, register_before(k)))
        cins.append(cin)
    # after the last lane = "before lane L"
    base = state_term(L)
    for j in range(L):
        base = Mux(starts[j], _crc_const(L - j), base)
    acc = base
    for i in range(L):
        dropped = 0
        for j in range(i + 1, L):
            dropped = dropped | starts[j]
        acc = acc ^ Mux(dropped, 0, word_term(i, L - i))
    return cins, acc


class MpaTxBeat(data.StructLayout):
    """Input beat of :class:`MpaTxFramer`: the :class:`~rnic.hdl.beat.OctetBeat` fields plus ``length``.

    Fields ``data``, ``n``, ``first``, ``last``, ``conn`` as in
    :class:`~rnic.hdl.beat.OctetBeat` (in that order, at the same offsets), then
    ``length`` (16 bits): the ULPDU_Length of the ULPDU, valid on its ``first``
    beat (ignored on the others).
    """

    def __init__(self, *, width, connections):
        base = OctetBeat(width=width, connections=connections)
        self.width = width
        self.connections = connections
        fields = {name: field.shape for name, field in base}
        fields["length"] = unsigned(16)
        super().__init__(fields)


#: Per-connection TX context (one memory row per connection): the marker phase of the
#: next octet in 32-bit words (``phase // 4``), and the ``markers``/``crc`` switches.
TX_CONTEXT = data.StructLayout({"q": unsigned(7), "markers": unsigned(1), "crc": unsigned(1)})


class MpaTxFramer(wiring.Component):
    """MPA FPDU framer (RFC 5044 section 4 and 5) for many connections.

    Takes ULPDUs (DDP segments) and emits the TCP payload octet stream of each
    connection: per ULPDU one FPDU = ULPDU_Length (16 bit, big endian), the
    ULPDU, 0..3 zero pad octets so that the FPDU (markers included) is a
    multiple of 4 octets, then the CRC32c of the FPDU from its first octet (a
    leading marker included) through the pad, markers included, sent least
    significant octet first (4 zero octets when the connection's ``crc`` is 0).
    With ``markers`` on, a marker (2 zero octets, 16-bit big-endian FPDUPTR) is
    inserted at every stream position whose phase is 0 modulo 512; FPDUPTR
    counts the octets from the FPDU's ULPDU_Length field to the marker. A
    marker at an FPDU boundary belongs to the following FPDU (FPDUPTR 0, first
    octet of that FPDU, inside its CRC); a marker right after the pad is inside
    the CRC. The output is byte-for-byte what :class:`rnic.host.model.fpdu.FpduEncoder`
    gives with ``marker_origin = -phase mod 512``.

    Parameters
    ----------
    width : int
        Octets per beat W, one of 4, 8, 16, 32.
    connections : int
        Number of connections (>= 1); the context is one memory row per
        connection, so 1024 connections cost a 1024 x 9 bit memory, not logic.

    Ports
    -----
    cfg : ``In(stream.Signature(MpaConfig(connections=...)))``
        Sets ``markers``, ``crc`` and ``phase`` (stream offset of the next octet
        relative to the marker origin, mod 512, a multiple of 4; the two low
        bits are ignored) of connection ``conn`` and thereby resets its TX
        context; ``mulpdu`` is ignored. Write it while the connection has no
        ULPDU inside the framer (before its first octet). ``ready`` is low in
        the cycle that writes a ULPDU's end phase back (two cycles after its
        first beat was accepted): the memory has one write port.
    i : ``In(stream.Signature(MpaTxBeat(width=, connections=)))``
        ULPDUs, each from a ``first`` to a ``last`` beat, all of one ``conn``;
        ``length`` on the ``first`` beat must equal the number of octets
        (1..65535; zero-length ULPDUs are not supported: a beat always carries
        at least one octet). Beats are full except the last (``n == W``).
        ULPDUs of different connections may follow each other in any order but
        do not interleave inside a ULPDU.
    o : ``Out(stream.Signature(OctetBeat(width=, connections=)))``
        TCP payload: runs of whole FPDUs of one connection, ``first`` on the
        first beat of a run, ``last`` on its last; every beat but the last of a
        run is full, the last one carries ``n`` = 4, 8, ... octets.

    Packet boundaries (how runs are cut)
    ------------------------------------
    When an FPDU ends inside a beat (or at its end), the next FPDU of the
    *same* connection continues the run (and fills the rest of that beat) if
    it is already waiting: its first word is in the framer's word buffer, its
    first beat is in one of the two input registers, or it is offered on
    ``i`` right now (``i.valid`` with ``first``). If the next waiting ULPDU
    belongs to another connection, or nothing is waiting, the run ends with
    that beat (``last``, possibly partial). The framer never waits for input
    that is not there yet to fill a beat; it only waits (a few cycles) for a
    waiting ULPDU of the same connection to move through its input registers,
    and, inside an FPDU, for the FPDU's own octets. A marker at an FPDU
    boundary is sent with the following FPDU, so a run never ends with a
    marker. A new run (and so a new connection) always starts at lane 0 of a
    beat.

    Latency and throughput
    ----------------------
    Latency 6 cycles: a beat transferred on ``i`` at a clock edge can leave on
    ``o`` at the 6th edge after it (input registers R, A and B, word buffer,
    beat register, CRC/output register; a skid register behind the output
    register takes a beat only while ``o`` is stalled, so that
    ``o.ready`` reaches no logic but the output and skid registers).
    Throughput: one output beat per cycle while ``o.ready`` is high and
    ULPDUs are available; FPDU and connection boundaries cost no cycle by
    themselves (a new connection's run starts in the cycle after the
    previous run's last beat). The input is
    back-pressured as needed (per ULPDU the output carries 6..9 octets, plus
    markers, more than the input); ``i.ready`` depends on registers only.
    Measured with one connection, markers and CRC on, random ULPDU lengths
    1..1400, no idles and no back-pressure: wire octets / (cycles * W) = 1.0
    at W = 4 and 8, 0.9999 at W = 16, 0.996 at W = 32. At W = 32 the input is
    the limit: it moves one beat per cycle and each ULPDU's last beat is
    partial. Very short ULPDUs are input-bound at every width.

    Design
    ------
    Everything in an MPA stream sits on a 4-octet grid (markers are 4 octets
    every 512, FPDUs are multiples of 4, the marker origin is a multiple of 4),
    so the framer is a *word machine*: W/4 32-bit word lanes per beat, every
    output word is one of marker, LEN + 2 ULPDU octets, 4 ULPDU octets (the
    last one may carry the pad), CRC. All muxes work on words, not octets, and
    CRC32c is computed word-wise.

    * Input register R holds the beat as it came, so that the FPDU's start
      context (read and computed in the two cycles after the accept) is in a
      register before the FPDU's first word reaches register B.
    * Input register A shifts the ULPDU octets by 2 (the LEN field goes in
      front; a 2-octet carry register holds the tail of the previous beat) and
      zero-masks past ``n``, giving up to W/4 + 1 "data words" per input beat
      (the last beat may spill one word). Register B delays them one more
      cycle, until the FPDU's start context is known, and appends them to the
      word buffer.
    * The per-connection context (phase in words, markers, crc) is a
      :class:`~amaranth.lib.memory.Memory` (one row per connection, block RAM)
      with one plain synchronous read port and one write port. It is read
      when a ULPDU's first beat is accepted (address ``i.conn``), registered,
      and two cycles later the phase after the FPDU is computed in closed form
      and written back: markers take one word in every 128, so the end phase
      follows from the FPDU's word count mod 127 (reduced from ``length`` in
      the two cycles after the accept) with one 8-bit add, no loop. The two writes a read
      cannot see (the ones in the two cycles after it, from the ULPDUs
      accepted just before, or from ``cfg``) are forwarded from registers, so
      back-to-back ULPDUs of the same or different connections need no idle
      cycle, and the RAM output only feeds a register (the RAM's clock-to-out
      is slow on ECP5). The start context waits in a three-entry queue of
      registers, with its first word's marker lanes precomputed, and travels
      with the FPDU's first data word; nothing else needs to persist between
      ULPDUs because FPDUs are whole at the input.
    * The word buffer (a power of 2 >= 3 W/4 words, circular) decouples the
      input rate (data words) from the output rate (data words plus markers
      and CRCs). Register B pushes when a whole beat fits regardless of what
      the output takes this cycle, so no combinational path runs from
      ``o.ready`` to ``i.ready``; the extra words of buffer keep the output fed
      at one beat per cycle despite this. Words carry precomputed flags (first
      and last word of an FPDU, "same connection as the FPDU before", the
      marker lanes of a run starting with this FPDU), so that the lane logic
      compares no connection ids and no phases.
    * The lane stage fills the W/4 lanes in order: each lane is a marker (its
      lane is known per beat: a run is one connection and advances its phase
      by W/4 words per beat), the next data word, or the CRC (after the
      FPDU's last data word). It registers the chosen words with per-lane
      "CRC here" / "FPDU starts here" flags.
    * The CRC stage then runs the CRC register over the lanes and fills in the
      CRC lanes. For W <= 16 the register after each lane is built in closed
      form (f^k of the register XOR precomputed word terms, f the linear
      one-word update), so the register feeds back through one XOR tree; for
      wider beats the lanes are chained.

    Measured on ECP5 (LFE5UM-45F, speed grade 8, Yosys synth_ecp5 + nextpnr,
    out of context, W = 8): 1024 connections 2.7k LUT4, 1.06k FFs, one DP16KD,
    Fmax 138..148 MHz over placement seeds; 16 connections 2.6k LUT4 (context
    in distributed RAM), 135 MHz. (Figures from before the changes listed in
    docs/build.md, which has the core's: the lane chain now starts at the
    window registers and ends at their load multiplexer.)
    """

    def __init__(self, *, width, connections=16):
        check_width(width)
        conn_bits(connections)   # validates
        self.width = width
        self.connections = connections
        super().__init__({
            "cfg": In(stream.Signature(MpaConfig(connections=connections))),
            "i":   In(stream.Signature(MpaTxBeat(width=width, connections=connections))),
            "o":   Out(stream.Signature(OctetBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        L = W // 4                       # word lanes per beat
        CAP = 1 << ceil_log2(3 * L)      # word buffer entries (a power of 2 >= 3 W/4)
        cb = conn_bits(self.connections)

        entry = data.StructLayout({
            "data": unsigned(32),
            "sof": unsigned(1),          # first word of an FPDU (the LEN word)
            "eof": unsigned(1),          # last data word of an FPDU
            "cont": unsigned(1),         # sof only: same connection as the FPDU before
            "conn": unsigned(cb),
            "markers": unsigned(1), "crc": unsigned(1),                     # sof only
            "mlanes": unsigned(L),       # sof only: lanes at phase 0 if the FPDU starts at lane 0
            "qn": unsigned(7),           # sof only: q + L (phase of the following beat)
            "mnext": unsigned(L),        # sof only: lanes of the following beat at phase 0
        })

        # -- per-connection context ------------------------------------------------
        m.submodules.ctx = ctx_mem = memory.Memory(shape=TX_CONTEXT, depth=self.connections, init=[])
        wp = ctx_mem.write_port()
        rp = ctx_mem.read_port()

        ip = self.i.payload

        # -- stage R: the input beat, registered. The context pipeline starts at the input's
        # accept; the data reaches register B only a cycle after the FPDU's start context is
        # registered (timing: no path from the context memory's forwarding into the words).
        r_valid = Signal()
        rb = Signal.like(ip, name="r_beat")
        r_move = Signal()
        in_accept = Signal()

        # -- stage A: input register, 2-octet shift --------------------------------
        a_valid = Signal()
        a_data = Signal(32 * (L + 1))
        a_cnt = Signal(range(L + 2))
        a_sof = Signal()
        a_eof = Signal()
        a_conn = Signal(cb)              # also: connection of the last accepted beat
        a_same = Signal()                # a_sof: same connection as the ULPDU before
        carry = Signal(16)

        # -- stage B: second register; pushes into the word buffer ------------------
        b_valid = Signal()
        b_data = Signal(32 * (L + 1))
        b_cnt = Signal(range(L + 2))
        b_room = Signal(range(CAP + 1))  # CAP - b_cnt: B pushes if the buffer holds <= b_room
        b_sof = Signal()
        b_eof = Signal()
        b_conn = Signal(cb)
        b_same = Signal()

        # -- word buffer (circular) -------------------------------------------------
        cnt = Signal(range(CAP + 1))
        # the read pointer, one copy per buffer position it selects from (timing: its
        # fanout, every bit of L buffer multiplexers)
        rd_ptrs = register_copies(ceil_log2(CAP), L, name="rd_ptr")
        wr_ptr = Signal(range(CAP))
        buf = [Signal(entry, name=f"buf{j}") for j in range(CAP)]

        b_push = Signal()
        a_move = Signal()
        accept = Signal()
        b_fits = Signal(init=1)          # registered cnt <= b_room (see the buffer update)
        m.d.comb += [
            b_push.eq(b_valid & b_fits),
            a_move.eq(a_valid & (~b_valid | b_push)),
            r_move.eq(r_valid & (~a_valid | a_move)),
            self.i.ready.eq(~r_valid | r_move),
            in_accept.eq(self.i.valid & self.i.ready),
            accept.eq(r_move),
        ]
        with m.If(in_accept):
            m.d.sync += [r_valid.eq(1), rb.eq(ip)]
        with m.Elif(r_move):
            m.d.sync += r_valid.eq(0)
        i_same = Signal()                # R's ULPDU continues the last one A took's connection
        m.d.comb += i_same.eq(rb.conn == a_conn)

        carry_in = Mux(rb.first, Cat(rb.length[8:16], rb.length[0:8]), carry)
        lanes = [Mux(rb.n > k, rb.data[8 * k:8 * k + 8], 0) for k in range(W)]
        with m.If(accept):
            m.d.sync += [
                a_valid.eq(1),
                a_data.eq(Cat(carry_in, *lanes, Const(0, 16))),
                a_cnt.eq(Mux(rb.last, (rb.n + 5) >> 2, L)),
                a_sof.eq(rb.first),
                a_eof.eq(rb.last),
                a_conn.eq(rb.conn),
                a_same.eq(i_same),
                carry.eq(rb.data[8 * W - 16:]),
            ]
        with m.Elif(a_move):
            m.d.sync += a_valid.eq(0)
        with m.If(a_move):
            m.d.sync += [
                b_valid.eq(1), b_data.eq(a_data), b_cnt.eq(a_cnt), b_room.eq(CAP - a_cnt),
                b_sof.eq(a_sof),
                b_eof.eq(a_eof), b_conn.eq(a_conn), b_same.eq(a_same),
            ]
        with m.Elif(b_push):
            m.d.sync += b_valid.eq(0)

        # -- context pipeline (one ULPDU start per cycle at most) --------------------
        # t   first beat accepted: read address = i.conn (plain synchronous read, so the
        #     memory maps to block RAM without transparency logic); the FPDU's words without
        #     markers, N = ceil((2 + len) / 4) + 1, are counted.
        # t+1 read data registered (ctx_r); which of the writes in cycles t and t+1 (that
        #     the read cannot see) hit our connection is registered too; N is reduced mod
        #     127 and mod 128.
        # t+2 start context = the newest of {write at t+1, write at t, ctx_r}; end phase
        #     computed from it and written back; start context queued for the FPDU's first
        #     word. A ULPDU of the same connection in the very next cycle picks the
        #     written value up through this forwarding.
        m.d.comb += rp.addr.eq(ip.conn)
        nwords = Signal(15)
        m.d.comb += nwords.eq((ip.length + 9) >> 2)
        p1_valid = Signal()
        p1_conn = Signal(cb)
        p1_nwords = Signal(15)
        m.d.sync += [
            p1_valid.eq(in_accept & ip.first),
            p1_conn.eq(ip.conn),
            p1_nwords.eq(nwords),
        ]
        # t+1: N mod 127 (128 = 1 mod 127), N mod 127 + 1, and the end phase for a start
        # phase of 0, side by side from the folded sum n_y = N[0:7] + N[7:14] + N[14]
        # (0..255, one adder with N[14] as its carry in; N < 2**15), which is N mod 127
        # after subtracting 127 once or (254, 255) twice
        n_y = Signal(8)
        m.d.comb += n_y.eq(p1_nwords[0:7] + p1_nwords[7:14] + p1_nwords[14])
        n_wrap = Signal()
        n_wrap2 = Signal()
        m.d.comb += [n_wrap.eq(n_y >= 127), n_wrap2.eq(n_y >= 254)]

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
        p2_n127 = Signal(7)
        p2_n128 = Signal(7)
        p2_qe0 = Signal(7)        # end phase with markers if the start phase is 0
        p2_n127p1 = Signal(8)
        ctx_r = Signal(TX_CONTEXT)
        sel1 = Signal()           # the write in cycle t+1 hits our connection
        sel2 = Signal()           # the write in cycle t hits our connection
        m.d.sync += [
            p2_valid.eq(p1_valid), p2_conn.eq(p1_conn),
            p2_n127.eq(Mux(n_wrap2, n_y - 254, Mux(n_wrap, n_y - 127, n_y))),
            p2_n128.eq(p1_nwords[0:7]), ctx_r.eq(rp.data),
            p2_qe0.eq(Mux((n_y == 0) | (n_y == 127) | (n_y == 254), 0,
                          Mux(n_wrap2, n_y - 253, Mux(n_wrap, n_y - 126, n_y + 1)))),
            p2_n127p1.eq(Mux(n_wrap2, n_y - 253, Mux(n_wrap, n_y - 126, n_y + 1))),
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
        q0 = start.q

        # End phase. Markers: a period of 128 words is a marker (phase 0) and 127 other
        # words; with u = content words of the period already used (q0 - 1, or 0 if q0 is 0)
        # r = (u + N) mod 127 and the end phase is 0 if r == 0 (the next word is a marker),
        # else r + 1 (an FPDU never ends with a marker). For q0 >= 1 with A = q0 + N mod 127:
        # no wrap (A < 128): r + 1 = A; wrap: r + 1 = A - 127 = A[0:7] + 1.
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

        # Start contexts wait here for their first word to leave stage B, with the first
        # word's phase facts (marker lanes, the next beat's phase and marker lanes), all
        # registers (timing: the words take no logic from the context pipeline). At most
        # three are pending, one per sof beat in stages R, A and B: the start context of a
        # ULPDU accepted at t is computed at t+2 and queued at the end of t+2 (its first
        # beat may still be in R then), and that beat reaches B at t+3 at the earliest.
        CQ = 3
        new_ctx = start
        cq = [Signal(TX_CONTEXT, name=f"cq{k}") for k in range(CQ)]
        cq_f = [Signal(2 * L + 7, name=f"cq_facts{k}") for k in range(CQ)]
        cq_n = Signal(range(CQ + 1))
        ctx_now = cq[0]
        def phase_facts(c):
            # (q + k) mod 128 == 0 as q == -k mod 128: compares with constants, no adder
            return Cat(Cat(*[c.markers & (c.q == (-k) % 128) for k in range(L)]),
                       (c.q + L)[0:7], Cat(*[c.q == (-L - k) % 128 for k in range(L)]))
        new_f = Signal(2 * L + 7)
        m.d.comb += new_f.eq(phase_facts(new_ctx))
        facts = cq_f[0]
        now_mlanes, now_qn, now_mnext = facts[:L], facts[L:L + 7], facts[L + 7:]
        cq_pop = Signal()
        m.d.comb += cq_pop.eq(b_push & b_sof)
        # a shift register: a pop moves every entry down; the push goes to the first free
        # entry after the pop (entry cq_n - pop)
        with m.If(cq_pop):
            m.d.sync += [e.eq(n) for e, n in zip(cq[:-1], cq[1:])]
            m.d.sync += [e.eq(n) for e, n in zip(cq_f[:-1], cq_f[1:])]
        with m.If(p2_valid):
            with m.Switch(cq_n - cq_pop):
                for k in range(CQ):
                    with m.Case(k):
                        m.d.sync += [cq[k].eq(new_ctx), cq_f[k].eq(new_f)]
        m.d.sync += cq_n.eq(cq_n + p2_valid - cq_pop)

        a_words = []
        for j in range(L + 1):
            w = Signal(entry, name=f"b_word{j}")
            m.d.comb += [
                w.data.eq(b_data[32 * j:32 * j + 32]),
                w.sof.eq(b_sof if j == 0 else 0),
                w.eof.eq(b_eof & (b_cnt == j + 1)),
                w.conn.eq(b_conn),
                w.cont.eq(b_same),
            ]
            if j == 0:
                m.d.comb += [
                    w.markers.eq(ctx_now.markers), w.crc.eq(ctx_now.crc),
                    w.mlanes.eq(now_mlanes), w.qn.eq(now_qn), w.mnext.eq(now_mnext),
                ]
            a_words.append(w)

        # -- output stage: fill the word lanes of one beat -------------------------
        busy = Signal()        # inside an FPDU (its first word was sent)
        ddone = Signal()       # all data words of the FPDU sent, CRC still due
        fptr = Signal(15)      # words from the FPDU's LEN word to lane 0 of the next beat
        q = Signal(7)          # run open: phase of the next beat's lane 0, in words
        qmask = Signal(L)      # run open: lanes of the next beat at phase 0
        mk = Signal()          # run open: the run's connection has markers
        crcen = Signal()       # run open: ... and CRC
        conn = Signal(cb)      # run open: the run's connection
        run_open = Signal()    # a run started and its last beat is not sent yet

        # The first L + 1 words of the buffer, in registers (timing: no multiplexer by
        # rd_ptr in front of the lane chain, whose result moves rd_ptr): window[k] is
        # buf[rd_ptr + k] wherever have[k] (cnt > k); see the word buffer update below.
        window = [Signal(entry, name=f"window{k}") for k in range(L + 1)]
        have = [Signal(name=f"have{k}") for k in range(L + 1)]     # window word k is valid

        # Per-beat facts that do not depend on the lane chain: a run carries one connection
        # (so one markers/crc setting), and since every beat of a run but the last is full,
        # the phase advances by L words per beat: the marker lanes are known up front.
        # A new run starts at lane 0 with the window's first word (precomputed mask).
        bt_mk = Signal()
        bt_crcen = Signal()
        bt_conn = Signal(cb)
        marker_at = Signal(L)
        m.d.comb += [
            bt_mk.eq(Mux(run_open, mk, window[0].markers)),
            bt_crcen.eq(Mux(run_open, crcen, window[0].crc)),
            bt_conn.eq(Mux(run_open, conn, window[0].conn)),
            marker_at.eq(Mux(run_open, qmask & Cat(*([mk] * L)), window[0].mlanes)),
        ]

        # Is the ULPDU after the buffer's words (in stage B, else A, else on the input) of
        # the same connection as the last word in the buffer? Precomputed flags, so that no
        # connection ids are compared in the lane chain.
        outside_same = Signal()
        m.d.comb += outside_same.eq(Mux(b_valid, b_same,
                                        Mux(a_valid, a_same, r_valid & rb.first & i_same)))

        # FPDUPTR of a marker in lane s: fptr + s if its FPDU started before this beat, else
        # counted by the chain from the FPDU's start lane ('rel', a few bits).
        fptr_at = [Signal(16, name=f"fptr_at{k}") for k in range(L + 1)]
        m.d.comb += [f.eq(fptr + k) for k, f in enumerate(fptr_at)]

        st = dict(busy=busy, ddone=ddone, lseen=Const(1, 1), inb=Const(0, 1),
                  rel=Const(0, range(L + 1)), rd=Const(0, range(L + 2)),
                  ended=Const(0, 1), stall=Const(0, 1))
        shapes = dict(busy=1, ddone=1, lseen=1, inb=1, rel=range(L + 1), rd=range(L + 2),
                      ended=1, stall=1)
        out_words = []
        out_used = []
        lane_crc = []          # the lane carries the CRC (filled in by the CRC stage)
        lane_start = []        # an FPDU starts in the lane (CRC restarts)
        after = None

        for s in range(L + 1):
            head = Signal(entry, name=f"head{s}")
            in_buf = Signal(name=f"in_buf{s}")
            if s == 0:
                m.d.comb += [head.eq(window[0]), in_buf.eq(have[0])]
            else:
                with m.Switch(st["rd"]):
                    for k in range(s + 1):
                        with m.Case(k):
                            m.d.comb += [head.eq(window[k]), in_buf.eq(have[k])]

            # 1. between FPDUs: start the next one, end the run, or wait
            start = Signal(name=f"start{s}")
            ended = Signal(name=f"ended{s}")
            stall = Signal(name=f"stall{s}")
            m.d.comb += [ended.eq(st["ended"]), stall.eq(st["stall"])]
            with m.If(~st["ended"] & ~st["stall"] & ~st["busy"]):
                if s == 0:
                    with m.If(in_buf):
                        m.d.comb += start.eq(1)
                    with m.Else():
                        m.d.comb += stall.eq(1)       # nothing to send (or next FPDU not in yet)
                elif s < L:
                    with m.If(in_buf):
                        with m.If(head.cont):
                            m.d.comb += start.eq(1)
                        with m.Else():
                            m.d.comb += ended.eq(1)
                    with m.Elif(outside_same):
                        m.d.comb += stall.eq(1)       # same connection, a cycle or two away
                    with m.Else():
                        m.d.comb += ended.eq(1)
                else:
                    # after the last lane: does the run go on in the next beat?
                    with m.If(in_buf):
                        m.d.comb += ended.eq(~head.cont)
                    with m.Else():
                        m.d.comb += ended.eq(~outside_same)
            if s == L:
                after = dict(st)
                after["ended"] = ended
                after["stall"] = stall
                break

            # 2. the FPDU's state, fresh if it starts in this lane
            ef = {}
            for key, init in (("inb", 1), ("rel", 0), ("lseen", 0), ("ddone", 0)):
                sig = Signal(shapes[key], name=f"e_{key}{s}")
                m.d.comb += sig.eq(Mux(start, init, st[key]))
                ef[key] = sig
            e_busy = st["busy"] | start

            # 3. this lane's word
            word = Signal(32, name=f"word{s}")
            use = Signal(name=f"use{s}")
            is_crc = Signal(name=f"is_crc{s}")
            nx = {k: Signal(shapes[k], name=f"{k}{s + 1}") for k in shapes}
            m.d.comb += [
                nx["busy"].eq(e_busy), nx["ddone"].eq(ef["ddone"]), nx["lseen"].eq(ef["lseen"]),
                nx["inb"].eq(ef["inb"]), nx["rel"].eq(ef["rel"]), nx["rd"].eq(st["rd"]),
                nx["ended"].eq(ended), nx["stall"].eq(stall),
            ]
            ptr = Signal(16, name=f"ptr{s}")
            m.d.comb += ptr.eq(Mux(ef["inb"], ef["rel"], fptr_at[s]) << 2)
            with m.If(e_busy & ~ended & ~stall):
                with m.If(marker_at[s]):
                    m.d.comb += [
                        word.eq(Cat(Const(0, 16), ptr[8:16], ptr[0:8])),
                        use.eq(1),
                        nx["rel"].eq(ef["rel"] + ef["lseen"]),
                    ]
                with m.Elif(~ef["ddone"]):
                    with m.If(in_buf):
                        m.d.comb += [
                            word.eq(head.data),
                            use.eq(1),
                            nx["rd"].eq(st["rd"] + 1),
                            nx["ddone"].eq(head.eof),
                            nx["lseen"].eq(1),
                            nx["rel"].eq(ef["rel"] + 1),
                        ]
                    with m.Else():
                        m.d.comb += nx["stall"].eq(1)     # FPDU octets not in yet
                with m.Else():
                    m.d.comb += [
                        is_crc.eq(1),
                        use.eq(1),
                        nx["busy"].eq(0),
                        nx["ddone"].eq(0),
                    ]
            out_words.append(word)
            out_used.append(use)
            lane_crc.append(is_crc)
            lane_start.append(start)
            st = nx

        # -- beat register (lanes chosen, CRC lanes still empty) ---------------------
        r_valid = Signal()
        r_words = Signal(32 * L)
        r_crc = Signal(L)
        r_start = Signal(L)
        r_crcen = Signal()
        r_n = Signal(range(W + 1))
        r_first = Signal()
        r_last = Signal()
        r_conn = Signal(cb)
        r_move = Signal()
        sk_valid = Signal()              # output skid register holds a beat
        # (the skid makes the beat register's move, and so the lane chain's load, depend
        # on registers only, not on o.ready)
        m.d.comb += r_move.eq(r_valid & ~sk_valid)

        beat_ok = Signal()
        m.d.comb += beat_ok.eq(~after["stall"])
        r_free = Signal()
        m.d.comb += r_free.eq(~r_valid | r_move)
        load = Signal()
        m.d.comb += load.eq(beat_ok & r_free)
        nused = Signal(range(L + 1))
        m.d.comb += nused.eq(sum(out_used))
        with m.If(r_free):
            # loaded whenever free (valid or not): keeps the lane chain off the clock enables
            m.d.sync += [
                r_valid.eq(beat_ok),
                r_words.eq(Cat(*[Mux(u, w, 0) for w, u in zip(out_words, out_used)])),
                r_crc.eq(Cat(*lane_crc)),
                r_start.eq(Cat(*lane_start)),
                r_crcen.eq(bt_crcen),
                r_n.eq(nused << 2),
                r_first.eq(~run_open),
                r_last.eq(after["ended"]),
                r_conn.eq(bt_conn),
            ]
        q_next = Signal(7)
        qmask_next = Signal(L)
        m.d.comb += [
            q_next.eq(Mux(run_open, q + L, window[0].qn)),
            qmask_next.eq(Mux(run_open, Cat(*[(q + L + k)[0:7] == 0 for k in range(L)]),
                              window[0].mnext)),
        ]
        with m.If(load):
            m.d.sync += [
                run_open.eq(~after["ended"]),
                busy.eq(after["busy"]), ddone.eq(after["ddone"]),
                fptr.eq(Mux(after["inb"], after["rel"], fptr_at[L])),
                q.eq(q_next), qmask.eq(qmask_next),
                mk.eq(bt_mk), crcen.eq(bt_crcen), conn.eq(bt_conn),
            ]

        # -- CRC stage and output register --------------------------------------------
        # The running CRC of the current FPDU goes over the lanes (restarting where an FPDU
        # starts); a CRC lane gets the complemented register (or zeros with CRC off).
        crc = Signal(32)
        r_lanes = [r_words[32 * k:32 * k + 32] for k in range(L)]
        cins, state = _crc_lanes(m, crc, r_lanes, [r_start[k] for k in range(L)], unroll=L <= 4)
        lanes_out = [Mux(r_crc[k], Mux(r_crcen, ~cins[k], 0), r_lanes[k]) for k in range(L)]
        op = self.o.payload
        new_beat = Signal.like(op)
        sk_beat = Signal.like(op)
        m.d.comb += [
            new_beat.data.eq(Cat(*lanes_out)), new_beat.n.eq(r_n), new_beat.first.eq(r_first),
            new_beat.last.eq(r_last), new_beat.conn.eq(r_conn),
        ]
        with m.If(r_move):
            m.d.sync += crc.eq(state)
        with m.If(~self.o.valid | self.o.ready):
            with m.If(sk_valid):
                m.d.sync += [self.o.valid.eq(1), op.eq(sk_beat), sk_valid.eq(0)]
            with m.Elif(r_move):
                m.d.sync += [self.o.valid.eq(1), op.eq(new_beat)]
            with m.Else():
                m.d.sync += self.o.valid.eq(0)
        with m.Elif(r_move):             # o is stalled: the beat waits in the skid register
            m.d.sync += [sk_valid.eq(1), sk_beat.eq(new_beat)]

        # -- word buffer update: the output takes 'pop' words, stage B appends its words
        pop = Signal(range(L + 1))
        m.d.comb += pop.eq(Mux(load, after["rd"], 0))
        pushed = Signal(range(L + 2))
        m.d.comb += pushed.eq(Mux(b_push, b_cnt, 0))
        m.d.sync += [
            cnt.eq(cnt - pop + pushed),
            *[p.eq(p + pop) for p in rd_ptrs],
        ]
        # The window registers and flags of the next cycle, for every possible pop p (from
        # registers and the pushed words only), then chosen by pop, the lane chain's
        # result (timing: one multiplexer level behind the chain). Word j from the head,
        # after the push: buf[rd_ptr + j] if j < cnt (the window's register for j <= L),
        # else pushed word j - cnt (written at wr_ptr = rd_ptr + cnt); a position beyond
        # the pushed words is not valid and its value does not matter.
        pos = []
        for j in range(2 * L + 1):
            v = Signal(entry, name=f"wpos{j}")
            if j > L:
                with m.Switch(rd_ptrs[j - L - 1]):
                    for e in range(CAP):
                        with m.Case(e):
                            m.d.comb += v.eq(buf[(e + j) % CAP])
            else:
                m.d.comb += v.eq(window[j])
            with m.Switch(cnt):
                for c in range(max(0, j - L), j + 1):
                    with m.Case(c):
                        m.d.comb += v.eq(a_words[j - c])
            pos.append(v)
        room_next = Signal.like(b_room)
        m.d.comb += room_next.eq(Mux(a_move, CAP - a_cnt, b_room))
        with m.Switch(pop):
            for p_ in range(L + 1):
                with m.Case(p_):
                    m.d.sync += [window[k].eq(pos[p_ + k]) for k in range(L + 1)]
                    # (with and without the push side by side: b_push is the later input)
                    kept = cnt - p_
                    grown = kept + b_cnt
                    m.d.sync += [have[k].eq(Mux(b_push, grown > k, kept > k)) for k in range(L + 1)]
                    m.d.sync += b_fits.eq(Mux(b_push, grown <= room_next, kept <= room_next))
        with m.If(b_push):
            m.d.sync += wr_ptr.eq(wr_ptr + b_cnt)
        for e in range(CAP):
            off = Signal(range(CAP), name=f"woff{e}")
            m.d.comb += off.eq(e - wr_ptr)
            with m.If(b_push & (off < b_cnt)):
                with m.Switch(off):
                    for k in range(L + 1):
                        with m.Case(k):
                            m.d.sync += buf[e].eq(a_words[k])

        return m
