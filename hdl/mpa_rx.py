"""MPA receive deframer: TCP payload segments in, ULPDUs with per-FPDU status out.

See :class:`MpaRxDeframer`. The payload layout of the output stream is
:class:`MpaRxBeat`; the per-connection contexts kept in memory (one per
pipeline stage) are :class:`MpaRxAlignCtx`, :class:`MpaRxParseCtx`,
:class:`MpaRxCrcCtx` and :class:`MpaRxOutCtx`.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from .beat import WIDTHS, OctetBeat, conn_bits
from .crc32c import CRC32C_INIT
from .mpa_config import CrcStatus, MpaConfig, RxError

__all__ = ["MpaRxBeat", "MpaRxDeframer", "RX_ABORTED", "MpaRxAlignCtx", "MpaRxParseCtx",
           "MpaRxCrcCtx", "MpaRxOutCtx", "crc32c_word_model"]

#: ``error`` code of an *abort beat*: the connection's ``cfg`` was rewritten while one
#: of its ULPDUs was partly output (not a member of :class:`RxError` yet).
RX_ABORTED = int(getattr(RxError, "ABORTED", 5))

# FPDU state of a connection (field ``st`` of the context).
_ST_LEN = 0    # next non-marker word is the first word of an FPDU (ULPDU_Length + 2 octets)
_ST_DATA = 1   # inside the ULPDU (``left`` words incl. the one with the pad still to come)
_ST_CRC = 2    # ULPDU and pad complete; next non-marker word is the CRC


def _obuf_depth(width):
    """Output FIFO depth (beats): 4 up to W = 8, 8 above; a step needs 2 free entries."""
    return 4 if width <= 8 else 8


class MpaRxBeat(data.StructLayout):
    """Payload of the deframer's output stream ``o``.

    Fields, in this order from bit 0 (the first five are those of
    :class:`~hdl.beat.OctetBeat`, at the same offsets):

    ``data`` (8*W)
        ULPDU octets, the first one in lane 0 (``data[0:8]``).
    ``n`` (bits_for(W))
        Valid octets, lanes ``0 .. n-1``. ``W`` on every beat but the last of
        a ULPDU; 1..W on the last beat of a delivered ULPDU; 0 only on a
        *status beat* (below).
    ``first``, ``last`` (1 each)
        ``first`` .. ``last`` delimit one ULPDU (= one FPDU).
    ``conn`` (conn_bits(connections))
        Connection id.
    ``crc`` (2)
        :class:`~hdl.mpa_config.CrcStatus`, meaningful on ``last`` beats only
        (0 elsewhere): UNCHECKED with CRC off, OK or BAD with CRC on.
    ``error`` (3)
        :class:`~hdl.mpa_config.RxError`, meaningful on ``last`` beats only
        (0 elsewhere). Not NONE: the ULPDU must not be delivered, and this was
        the connection's last beat until its ``cfg`` is written again.

    A *status beat* (``first = last = 1``, ``n = 0``, ``data = 0``,
    ``crc = UNCHECKED``) reports an error found in the ULPDU_Length field,
    before any ULPDU octet was output: ``error`` is TOO_LONG (above MULPDU)
    or TOO_SHORT (below the 14-octet tagged / 18-octet untagged DDP header
    announced by the T bit of the first ULPDU octet).

    CRC and marker errors arrive on the ``last`` beat of the ULPDU they
    concern (whose octets have been passed through already): ``error`` =
    CRC with ``crc`` = BAD, or ``error`` = MARKER with ``crc`` = OK or
    UNCHECKED.

    An *abort beat* (``first = 0``, ``last = 1``, ``n = 0``, ``data = 0``,
    ``crc = UNCHECKED``, ``error`` = :data:`RX_ABORTED` (5)) ends a ULPDU
    of which some beats were output when the host rewrote the connection's
    ``cfg`` (e.g. a connection torn down in the middle of an FPDU). It is
    the only beat with ``first = 0`` and ``n = 0``.

    So ``n = 0`` only on ``last`` beats that carry an error; every beat
    with ``n = 0`` is to be ignored apart from its status.
    """

    def __init__(self, *, width, connections):
        if width not in WIDTHS:
            raise ValueError(f"width must be one of {WIDTHS}, not {width!r}")
        self.width = width
        self.connections = connections
        super().__init__({
            "data":  unsigned(8 * width),
            "n":     unsigned(bits_for(width)),
            "first": unsigned(1),
            "last":  unsigned(1),
            "conn":  unsigned(conn_bits(connections)),
            "crc":   unsigned(2),
            "error": unsigned(3),
        })


# ---------------------------------------------------------------------------- contexts
# One memory per pipeline stage, one row per connection; each stage loads its row
# with the first beat of a segment and writes it back with the last.

class MpaRxAlignCtx(data.StructLayout):
    """Stage 1 (realign) context: 0..3 octets not yet forming a word, first in bits 0..7."""

    def __init__(self):
        super().__init__({"lo": unsigned(24), "lo_n": unsigned(2)})


class MpaRxParseCtx(data.StructLayout):
    """Stage 2 (parse) context.

    ``phase``: word index of the next word in the 512-octet marker interval (0: marker);
    ``st``: ``_ST_*``; ``left``: ULPDU words still to come after the first word (incl.
    the one with the pad); ``lastn``: ``(ULPDU_Length + 1) % 4``, content octets in the
    last ULPDU word minus 1; ``dist``: words from the ULPDU_Length field to the next word
    (its expected FPDUPTR / 4). Flags kept with them (so that the parse loop compares
    nothing), for the W/4 words i of a beat: ``mkv`` bit i: ``phase == -i mod 128``
    (word i of a full beat is a marker); ``leqv`` bit i: ``left == i + 1``.
    """

    def __init__(self, *, width=32):
        k = width // 4
        super().__init__({
            "markers": unsigned(1), "mulpdu": unsigned(16), "phase": unsigned(7),
            "st": unsigned(2), "left": unsigned(15), "lastn": unsigned(2), "dist": unsigned(14),
            "mkv": unsigned(k), "leqv": unsigned(k),
        })


class MpaRxCrcCtx(data.StructLayout):
    """Stage 3 (CRC) context: raw CRC32c register of the current FPDU; a marker of it was bad."""

    def __init__(self):
        super().__init__({"crc_en": unsigned(1), "crc": unsigned(32), "merr": unsigned(1)})


class MpaRxOutCtx(data.StructLayout):
    """Stage 5 (output) context.

    ``carry``, ``cw``: ``cw`` (0..K+1) words of the current FPDU not yet output, markers
    removed; the ULPDU octets start at octet 2 of ``carry[0]`` (the ULPDU_Length word,
    or a word whose first 2 octets went out with the previous beat). ``opened``: a beat
    of the current ULPDU was output (its ``last`` not yet). ``err``: an error was reported (drop everything).
    ``complete``: the last ULPDU word of the current FPDU is in the carry; ``lastn``: its
    content octets minus 1.
    """

    def __init__(self, *, width):
        k = width // 4
        super().__init__({
            "carry": unsigned(32 * (k + 1)), "cw": unsigned(bits_for(k + 1)),
            "opened": unsigned(1), "err": unsigned(1), "complete": unsigned(1),
            "lastn": unsigned(2),
        })


# ---------------------------------------------------------------------------- stage payloads

class _ParseTag(data.StructLayout):
    """Per word, from the parser: what the word is."""

    def __init__(self):
        super().__init__({
            "cov": unsigned(1),      # covered by the CRC (marker, length word, ULPDU word)
            "mark": unsigned(1),     # marker
            "len": unsigned(1),      # first word of an FPDU (ULPDU_Length + 2 octets)
            "data": unsigned(1),     # other ULPDU word
            "crcw": unsigned(1),     # CRC word (end of an FPDU)
            "mbad": unsigned(1),     # marker whose FPDUPTR is wrong
            "lenerr": unsigned(3),   # length word: RxError TOO_LONG / TOO_SHORT, else 0
            "lastd": unsigned(1),    # last ULPDU word (with the pad)
            "lastn": unsigned(2),    # lastd: content octets in it minus 1
        })


class _CrcTag(data.StructLayout):
    def __init__(self):
        super().__init__({
            "p": _ParseTag(),
            "calc": unsigned(32),    # crcw: the CRC value computed over the FPDU
            "merr": unsigned(1),     # crcw: a marker of the FPDU was bad
        })


class _OutTag(data.StructLayout):
    """Per word, for the output stage."""

    def __init__(self):
        super().__init__({
            "data": unsigned(1),     # ULPDU content word (length word or ULPDU word)
            "end": unsigned(1),      # ends an FPDU (CRC word, or length word with an error)
            "lenend": unsigned(1),   # end at a length word (status beat, n = 0)
            "err": unsigned(3),      # end: RxError
            "crcst": unsigned(2),    # end: CrcStatus
            "lastd": unsigned(1),
            "lastn": unsigned(2),
        })


def _stage_payload(k, connections, tag):
    fields = {
        "words": unsigned(32 * k),
        "first": unsigned(1),
        "last": unsigned(1),
        "conn": unsigned(conn_bits(connections)),
        "cfg": unsigned(1),          # a cfg write (no words; its payload in words[0:27])
    }
    if tag is None:
        fields["nw"] = unsigned(bits_for(k))
    else:
        fields["tags"] = data.ArrayLayout(tag, k)
    return data.StructLayout(fields)


# cfg payload packed into words[0:27] of a cfg op
_CFG_MARKERS, _CFG_CRC, _CFG_PHASE, _CFG_MULPDU = 0, 1, 2, 11


#: Reflected CRC32c polynomial (Castagnoli).
_CRC32C_POLY_REV = 0x82F63B78


def crc32c_word_model(state, word):
    """Raw (reflected) CRC32c register after one 32-bit ``word`` (first octet in bits 0..7).

    The classic LSB-first software update: after all words of ``data`` from
    ``CRC32C_INIT``, ``state ^ 0xFFFFFFFF == crc32c.crc32c(data)``.
    """
    crc = state ^ word
    for _ in range(32):
        crc = (crc >> 1) ^ (_CRC32C_POLY_REV if crc & 1 else 0)
    return crc


_CRC_MASKS = None


def _crc_masks():
    global _CRC_MASKS
    if _CRC_MASKS is None:
        cols = [crc32c_word_model(1 << j, 0) for j in range(32)]
        _CRC_MASKS = tuple(sum(((cols[j] >> i) & 1) << j for j in range(32)) for i in range(32))
    return _CRC_MASKS


_MPOW_MASKS = {}


def _mpow_masks(c):
    """Masks of M^c (M: the CRC register update for a zero word): bit i of M^c(s) is the
    parity of ``s & masks[i]``."""
    if c not in _MPOW_MASKS:
        cols = []
        for j in range(32):
            v = 1 << j
            for _ in range(c):
                v = crc32c_word_model(v, 0)
            cols.append(v)
        _MPOW_MASKS[c] = tuple(sum(((cols[j] >> i) & 1) << j for j in range(32))
                               for i in range(32))
    return _MPOW_MASKS[c]


def _parity_matrix(x, masks):
    bits = []
    for mask in masks:
        terms = [x[j] for j in range(32) if (mask >> j) & 1]
        acc = terms[0] if terms else Const(0, 1)
        for t in terms[1:]:
            acc = acc ^ t
        bits.append(acc)
    return Cat(*bits)


def _crc32c_step(state, word):
    """Combinational :func:`crc32c_word_model`: bit i = parity of ``(state ^ word) & mask_i``.

    (Local on purpose: at the time of writing, ``hdl.crc32c.crc32c_step`` is right for
    one step from ``CRC32C_INIT`` only; chained steps disagree with the ``crc32c``
    package because its matrix treats the register as unreflected.)
    """
    x = state ^ word
    bits = []
    for mask in _crc_masks():
        terms = [x[j] for j in range(32) if (mask >> j) & 1]
        acc = terms[0]
        for t in terms[1:]:
            acc = acc ^ t
        bits.append(acc)
    return Cat(*bits)


def _prefix_counts(m, name, bits):
    """Signals: for each i in 0..len(bits), the number of set bits among ``bits[:i]``."""
    out = []
    acc = Const(0, 4)
    for i in range(len(bits) + 1):
        s = Signal(range(len(bits) + 1), name=f"{name}{i}")
        m.d.comb += s.eq(acc)
        out.append(s)
        if i < len(bits):
            acc = s + bits[i]
    return out


def _context_memory(m, name, layout, depth, *, load_en, load_addr, take, in_first, in_conn,
                    conn, done, reg, extra=1):
    """Context memory of one stage: (current context view, write port).

    The row of a beat is read one stage ahead, when the beat enters the stage before
    (``load_en``, ``load_addr``), and registered when the stage takes the beat
    (``take``), so that no memory output is on a logic path (block RAM outputs are
    slow). The read port is transparent to the write port (a row written in the cycle
    it is read gives the new value). Only the beat the stage processes right before
    can write the row after it was read; so ``reg`` (the stage's own copy of the
    context of the last beat it processed, ``done``) is used instead of the row for a
    beat of the same connection, and for every beat but a segment's first (and
    ``extra`` must hold to use the row). That choice is made when the beat is taken
    (``in_first``, ``in_conn``; ``conn`` is the connection of the stage's beat).
    """
    mem = Memory(shape=layout, depth=depth, init=[])
    m.submodules[name] = mem
    wr = mem.write_port()
    rd = mem.read_port(domain="sync", transparent_for=(wr,))
    rdreg = Signal(layout, name=f"{name}_rd")
    last_valid = Signal(name=f"{name}_lvalid")
    last_conn = Signal.like(conn, name=f"{name}_lconn")
    use_reg = Signal(name=f"{name}_use")
    cur = Signal(layout, name=f"{name}_cur")
    m.d.comb += [
        rd.addr.eq(load_addr),
        rd.en.eq(load_en),
        cur.eq(Mux(use_reg & extra, rdreg.as_value(), reg.as_value())),
    ]
    with m.If(take):
        m.d.sync += [
            rdreg.eq(rd.data),
            use_reg.eq(in_first & ~Mux(done, conn == in_conn,
                                       last_valid & (last_conn == in_conn))),
        ]
    with m.If(done):
        m.d.sync += [last_valid.eq(1), last_conn.eq(conn)]
    return cur, wr


class MpaRxDeframer(wiring.Component):
    """MPA FPDU receiver (RFC 5044): markers and CRC checked and removed, ULPDUs out.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connections with a context (each context memory has this many rows;
        1024 costs block RAM, not logic).

    Ports
    -----
    cfg : In(stream.Signature(MpaConfig(connections=...)))
        Writes the RX configuration of ``cfg.conn`` (``markers``, ``crc``,
        ``phase`` = stream offset of the next octet minus the marker origin,
        mod 512, a multiple of 4; ``mulpdu``) and resets its context: no
        leftover octets, the next octet starts an FPDU, no error. Write it
        before a connection's first octet and to restart it after an error.
        The write is ordered with the segments on ``i``: it takes effect
        after every segment accepted before it and before every one accepted
        after it. It is held off (``ready`` low) while a TCP segment of the
        same connection is open (its ``first`` beat accepted, its ``last`` not
        yet); when both ``cfg`` and ``i`` are valid, ``cfg`` goes first. It
        travels down the pipeline like a one-beat segment without octets
        (one cycle of each stage). If the connection had a ULPDU of which
        some beats were output but not the ``last`` one, the write ends it
        with an *abort beat* (see :class:`MpaRxBeat`). A connection whose
        ``cfg`` was never written reports TOO_LONG (MULPDU 0) or TOO_SHORT
        on its first FPDU.
    i : In(stream.Signature(OctetBeat(width=W, connections=...)))
        TCP payload as segments: ``first`` .. ``last`` is one segment of one
        connection (``conn``). A segment may end anywhere, at any octet (inside
        a marker, the length field, the ULPDU, the pad or the CRC); the next
        segment of that connection may follow segments of other connections.
        Beats other than a segment's last should be full (``n = W``); a short
        inner beat is also handled correctly.
    o : Out(stream.Signature(MpaRxBeat(width=W, connections=...)))
        The ULPDUs, with the ULPDU_Length field, markers, pad and CRC removed,
        one ULPDU per ``first`` .. ``last``, lanes from 0, full beats but the
        last; per-FPDU status (``crc``, ``error``) on the ``last`` beat. See
        :class:`MpaRxBeat`, which also defines the *status beat* (``n = 0``)
        used for length errors and the *abort beat*.

    Operation
    ---------
    An input register, then a pipeline of six stages; four of them are
    per-connection machines with their own context memory (one row per
    connection). A stage reads the row of a beat when the beat enters the
    stage before it and registers it when it takes the beat, so no memory
    output is on a logic path; it keeps the context in a register while a
    segment lasts (and uses that register instead of the row when a beat
    follows one of the same connection, whose write-back the read may have
    missed) and writes it back with the segment's last beat. The read port
    is transparent to the write port.

    1. realign (:class:`MpaRxAlignCtx`): the 0..3 leftover octets and the
       beat make up to W/4 whole 32-bit words. Every FPDU and marker starts
       on this grid, so the rest is a machine over words, unrolled over the
       W/4 words of a beat.
    2. parse (:class:`MpaRxParseCtx`): each word is a marker (by the marker
       phase), the first word of an FPDU (ULPDU_Length and 2 ULPDU octets),
       a ULPDU word (the last one incl. the pad) or the CRC word; FPDUPTRs
       and the ULPDU_Length limits are checked here (as flags). An FPDU may
       end and the next start in one beat.
    3. CRC precompute (no context): the CRC register is linear, so the part
       of each word's CRC state that depends on the words alone is computed
       here.
    4. CRC (:class:`MpaRxCrcCtx`): adds the part that depends on the state
       at the beat's start; gives the computed CRC at each CRC word.
    5. verdict (no context): CRC comparison, error precedence.
    6. output (:class:`MpaRxOutCtx`), behind a 2-beat buffer and a
       register stage that fetches its context and prepares each step from
       the tags alone (which words the step covers: a beat holding a second
       FPDU end after a clean one goes through in two steps; where the FPDU
       ends; the words of the current and of the next ULPDU, each
       compacted, markers and CRC removed), so that the step itself only
       appends the compacted words to the connection's output carry;
       output beats are the carry shifted by the 2 octets of
       ULPDU_Length. A ULPDU's final octets (at most W) are held back in the
       context, also across segment boundaries, until its CRC word has been
       seen, so that the ``last`` beat carries the verdict; all other ULPDU
       octets are passed through as soon as they make a full beat
       (cut-through: FPDUs up to 64 KB are not buffered). After an error
       this stage drops everything of the connection (the stages before it
       go on parsing what follows as FPDUs; it is dropped).

    Then an output FIFO of 4 beats (8 at W >= 16).

    Checks, per FPDU, in the order of the reference model
    (:class:`host.fpdu.FpduDecoder`): ULPDU_Length > MULPDU (TOO_LONG),
    ULPDU_Length below the DDP header its first octet's T bit announces
    (TOO_SHORT); both reported with a status beat as soon as the word
    holding the length field is complete. At the CRC word: CRC mismatch
    with CRC on (error CRC, crc BAD), else a marker whose FPDUPTR (its 2 low
    bits ignored) differs from its distance to the ULPDU_Length field, or
    from 0 for a marker right before the length field (error MARKER). The
    reserved marker octets are not checked. After an error nothing more is
    output on that connection; its input octets are consumed and dropped
    until ``cfg`` rewrites it.

    Latency
    -------
    If the input beat that completes an output beat is accepted at clock
    edge t, that output beat is valid on ``o`` from edge t + 9 (accepted at
    t + 10 at the earliest), if it is the first beat in the output FIFO.

    Throughput
    ----------
    One input beat per cycle, with no idle cycles needed between segments,
    connections or FPDUs, as long as ``o`` accepts. The output stage may
    produce 2 beats in a cycle (a full beat and the last beat of a ULPDU);
    it waits while fewer than 2 output FIFO entries are free. Since every
    FPDU carries at least 6 octets (length field, CRC) that produce no
    output, the output does not limit the input on long traffic. Exception:
    when one beat holds the ends of two FPDUs without error (possible only
    at W >= 16, with FPDUs of at most W octets), the output stage takes one
    cycle per FPDU end, stalling the pipeline one cycle per extra end. A
    ``cfg`` write takes one beat slot. ``i.ready`` and ``cfg.ready`` come
    from registers and the ``cfg`` port only.

    Timing: no memory output is on a logic path; the loops of the parse and
    output stages compare nothing (flags kept in the context, steps
    prepared one stage ahead). In the core on an LFE5UM-45F speed 8 its
    paths are no longer the critical ones at W = 4 and 8 (figures in
    docs/build.md). 1024 connections cost 14 DP16KD at W = 8.
    """

    def __init__(self, *, width, connections=16):
        if width not in WIDTHS:
            raise ValueError(f"width must be one of {WIDTHS}, not {width!r}")
        if not isinstance(connections, int) or connections < 1:
            raise TypeError(f"connections must be a positive integer, not {connections!r}")
        self.width = width
        self.connections = connections
        super().__init__({
            "cfg": In(stream.Signature(MpaConfig(connections=connections))),
            "i":   In(stream.Signature(OctetBeat(width=width, connections=connections))),
            "o":   Out(stream.Signature(MpaRxBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        K = W // 4
        N = self.connections
        beat_layout = OctetBeat(width=W, connections=N)
        out_layout = MpaRxBeat(width=W, connections=N)
        p1_layout = _stage_payload(K, N, None)
        p2_layout = _stage_payload(K, N, _ParseTag())
        p2r_layout = data.StructLayout({**{n: f.shape for n, f in p2_layout},
                                        "r": data.ArrayLayout(unsigned(32), K + 1)})
        p3_layout = _stage_payload(K, N, _CrcTag())
        p4_layout = _stage_payload(K, N, _OutTag())
        cnt_bits = bits_for(K)
        p5_layout = data.StructLayout({      # S4's beat: what does not need the context
            "cwords": unsigned(32 * K),      # current ULPDU's words in this step, compacted
            "nwords": unsigned(32 * K),      # next ULPDU's words (after the end), compacted
            "nc": unsigned(cnt_bits), "nn": unsigned(cnt_bits),
            "first": unsigned(1), "last": unsigned(1), "cfg": unsigned(1),
            "conn": unsigned(conn_bits(N)),
            "has_end": unsigned(1),          # an FPDU ends in this step
            "lenend": unsigned(1), "err": unsigned(3), "crcst": unsigned(2), "bad": unsigned(1),
            "lastd_c": unsigned(1), "lastn_c": unsigned(2),   # last word of the current ULPDU
            "lastd_n": unsigned(1), "lastn_n": unsigned(2),   # ... of the next one
        })

        # ============================================================ pipeline registers
        vin = Signal()                                  # input register
        bin_ = Signal(beat_layout)
        cin = Signal()                                  # it holds a cfg op
        cpin = Signal(MpaConfig(connections=N))
        v0 = Signal()
        b0 = Signal(beat_layout)
        c0 = Signal()                                   # S0 holds a cfg op
        cp0 = Signal(MpaConfig(connections=N))
        v1, p1 = Signal(), Signal(p1_layout)
        vq, q = Signal(), Signal(p2_layout)
        v2, p2 = Signal(), Signal(p2r_layout)
        v3, p3 = Signal(), Signal(p3_layout)
        v4a, p4a = Signal(), Signal(p4_layout)          # S4's context fetch, step split
        wo4 = Signal(range(max(K, 2)))                  # A: first word of p4a still to go
        v4, p4 = Signal(), Signal(p5_layout)

        # output FIFO
        depth = _obuf_depth(W)
        obuf = [Signal(out_layout.size, name=f"obuf{j}") for j in range(depth)]
        o_rp = Signal(range(depth))
        o_wp = Signal(range(depth))
        o_cnt = Signal(range(depth + 1))
        fifo_room = Signal()
        m.d.comb += fifo_room.eq(o_cnt <= depth - 2)

        # ============================================================ pipeline control
        cut4 = Signal()         # A: p4a goes to S4 in two steps (a second FPDU end)
        a_release = Signal()
        step4 = Signal()
        s4_done = Signal()
        sk = [Signal(p4_layout, name=f"skid{j}") for j in range(2)]
        sk_rp = Signal()
        sk_wp = Signal()
        sk_cnt = Signal(range(3))
        sk_head = Signal(p4_layout)
        sk_pop = Signal()
        a_move = Signal()
        m.d.comb += [
            sk_head.eq(Mux(sk_rp, sk[1].as_value(), sk[0].as_value())),
            a_move.eq(v4a & (~v4 | s4_done)),
            a_release.eq(a_move & ~cut4),
            sk_pop.eq((sk_cnt != 0) & (~v4a | a_release)),
        ]
        done = [Signal(name=f"done{s}") for s in range(6)]
        rdy = [Signal(name=f"rdy{s}") for s in range(6)]  # stage s can take a beat
        m.d.comb += [
            step4.eq(v4 & fifo_room),
            s4_done.eq(step4),
            # stage S3 hands over to S4 through a 2-entry buffer, so that the ready of the
            # stages before it comes from registers (S4 is the only stage that stalls)
            rdy[5].eq(sk_cnt != 2),
        ]
        for s, v in reversed(list(enumerate([v0, v1, vq, v2, v3]))):
            m.d.comb += [done[s].eq(v & rdy[s + 1]), rdy[s].eq(~v | rdy[s + 1])]
        done_in = Signal()
        rdy_in = Signal()
        m.d.comb += [done_in.eq(vin & rdy[0]), rdy_in.eq(~vin | rdy[0])]

        # input arbitration: a cfg write waits while a segment of its connection is open
        seg_open = Signal()
        seg_conn = Signal(beat_layout["conn"].shape)
        cfg = self.cfg.payload
        cfg_take = Signal()
        i_take = Signal()
        cfg_block = Signal()
        cfg_go = Signal()
        m.d.comb += [
            cfg_block.eq(seg_open & (seg_conn == cfg.conn)),
            cfg_go.eq(self.cfg.valid & ~cfg_block),
            self.cfg.ready.eq(rdy_in & ~cfg_block),
            cfg_take.eq(cfg_go & rdy_in),
            self.i.ready.eq(rdy_in & ~cfg_go),
            i_take.eq(self.i.valid & self.i.ready),
        ]
        with m.If(i_take):
            m.d.sync += [seg_open.eq(~self.i.payload.last), seg_conn.eq(self.i.payload.conn)]
        with m.If(cfg_take):
            m.d.sync += [
                vin.eq(1), cin.eq(1), cpin.eq(cfg),
                bin_.data.eq(0), bin_.n.eq(0), bin_.first.eq(1), bin_.last.eq(1),
                bin_.conn.eq(cfg.conn),
            ]
        with m.Elif(i_take):
            m.d.sync += [vin.eq(1), cin.eq(0), bin_.eq(self.i.payload)]
        with m.Elif(done_in):
            m.d.sync += vin.eq(0)
        with m.If(done_in):
            m.d.sync += [v0.eq(1), c0.eq(cin), cp0.eq(cpin), b0.eq(bin_)]
        with m.Elif(done[0]):
            m.d.sync += v0.eq(0)

        # ============================================================ S0: realign
        ctx0_reg = Signal(MpaRxAlignCtx())
        cur0, wr0p = _context_memory(
            m, "ctx_align", MpaRxAlignCtx(), N,
            load_en=cfg_take | i_take, load_addr=Mux(cfg_go, cfg.conn, self.i.payload.conn),
            take=done_in, in_first=bin_.first, in_conn=bin_.conn, conn=b0.conn, done=done[0],
            reg=ctx0_reg)
        cat = Signal(8 * (W + 3))
        with m.Switch(cur0.lo_n):
            for k in range(4):
                with m.Case(k):
                    m.d.comb += cat.eq(Cat(cur0.lo[:8 * k], b0.data) if k else b0.data)
        total = Signal(range(W + 4))
        nwords = Signal(range(K + 1))
        m.d.comb += [total.eq(cur0.lo_n + b0.n), nwords.eq(total >> 2)]
        nxt0 = Signal(MpaRxAlignCtx())
        with m.Switch(nwords):
            for j in range(K + 1):
                with m.Case(j):
                    m.d.comb += nxt0.lo.eq(cat[32 * j:32 * j + 24])
        m.d.comb += nxt0.lo_n.eq(Mux(c0, 0, total[:2]))
        with m.If(done[0]):
            m.d.sync += ctx0_reg.eq(nxt0)
        m.d.comb += [wr0p.en.eq(done[0] & b0.last), wr0p.addr.eq(b0.conn), wr0p.data.eq(nxt0)]
        with m.If(done[0]):
            m.d.sync += [
                v1.eq(1),
                p1.words.eq(Mux(c0, Cat(cp0.markers, cp0.crc, cp0.phase, cp0.mulpdu),
                                cat[:32 * K])),
                p1.nw.eq(Mux(c0, 0, nwords)),
                p1.first.eq(b0.first), p1.last.eq(b0.last), p1.conn.eq(b0.conn), p1.cfg.eq(c0),
            ]
        with m.Elif(done[1]):
            m.d.sync += v1.eq(0)

        # ============================================================ S1: parse
        ctx1_reg = Signal(MpaRxParseCtx(width=W))
        cur1, wr1p = _context_memory(
            m, "ctx_parse", MpaRxParseCtx(width=W), N,
            load_en=done_in, load_addr=bin_.conn,
            take=done[0], in_first=b0.first, in_conn=b0.conn, conn=p1.conn, done=done[1],
            reg=ctx1_reg)
        words1 = [p1.words[32 * i:32 * i + 32] for i in range(K)]

        def chain(name, shape):
            return [Signal(shape, name=f"{name}{i}") for i in range(K + 1)]
        # The parse loop is kept short: per word only the FPDU state (2 bits) and the
        # last FPDU event in the beat (none / length word j / CRC word) are chained;
        # the counters (left, dist) follow from them and from values precomputed from
        # the registered words and the context.
        nw1 = p1.nw
        vld = [Signal(name=f"pv{i}") for i in range(K)]
        mk = [Signal(name=f"pmark{i}") for i in range(K)]     # markers, by the phase
        ulen = [Cat(w[8:16], w[0:8]) for w in words1]         # ULPDU_Length (big endian)
        lval = [Signal(15, name=f"lval{j}") for j in range(K)]  # ULPDU words after the 1st
        lnv = [Signal(2, name=f"lnv{j}") for j in range(K)]
        for i in range(K):
            m.d.comb += [
                vld[i].eq(i < nw1),
                mk[i].eq(vld[i] & cur1.markers & cur1.mkv[i]),
                lval[i].eq((ulen[i] + 1) >> 2),
                lnv[i].eq((ulen[i] + 1)[:2]),
            ]
        # equality flags: context left == k + 1, length word j's left == k + 1
        leq0 = [Signal(name=f"leq0_{k}") for k in range(K)]
        leqj = [[Signal(name=f"leq{j}_{k}") for k in range(K)] for j in range(K)]
        for k in range(K):
            m.d.comb += leq0[k].eq(cur1.leqv[k])
            for j in range(K):
                m.d.comb += leqj[j][k].eq(lval[j] == k + 1)
        dist0p = [Signal(14, name=f"dist0p{i}") for i in range(K + 1)]
        for i in range(K + 1):
            m.d.comb += dist0p[i].eq(cur1.dist + i)

        def count(flags):
            acc = Const(0, 4)
            for f in flags:
                acc = acc + f
            return acc

        def pick(flags, idx, name):
            """flags[idx] for a small Amaranth value idx (0 beyond the list)."""
            sig = Signal(name=name)
            with m.Switch(idx):
                for k, f in enumerate(flags):
                    with m.Case(k):
                        m.d.comb += sig.eq(f)
            return sig

        st = chain("st", 2)
        evn = chain("evn", 1)          # no length or CRC word before word i in this beat
        evc = chain("evc", 1)          # the last one was a CRC word
        evl = [[Signal(name=f"evl{i}_{j}") for j in range(K)] for i in range(K + 1)]
        isdata = [Signal(name=f"pdata{i}") for i in range(K)]
        m.d.comb += [st[0].eq(cur1.st), evn[0].eq(1), evc[0].eq(0)]
        tags2 = Signal(data.ArrayLayout(_ParseTag(), K))
        for i in range(K):
            w = words1[i]
            t = tags2[i]
            ptr14 = Cat(w[26:32], w[16:24])       # FPDUPTR (big endian) >> 2
            t_bit = w[23]                         # T bit of the first ULPDU octet
            # left == 1 before word i (meaningful for a ULPDU word)
            left1 = Signal(name=f"left1_{i}")
            terms = [evn[i] & pick(leq0, i - count(mk[:i]), f"eqn{i}")]
            for j in range(i):
                terms.append(evl[i][j] & pick(leqj[j], (i - j - 1) - count(mk[j + 1:i]),
                                              f"eql{i}_{j}"))
            m.d.comb += left1.eq(Cat(*terms).any())
            # a marker at word i is bad: its FPDUPTR / 4 differs from the expected one
            # (each candidate compared beside the chain, which only selects)
            mbad_i = Signal(name=f"pmbad{i}")
            m.d.comb += mbad_i.eq(Mux(cur1.st == _ST_LEN, ptr14 != cur1.dist,
                                      ptr14 != dist0p[i]))
            for j in range(i):
                with m.If(evl[i][j]):
                    m.d.comb += mbad_i.eq(ptr14 != i - j)
            with m.If(evc[i]):
                m.d.comb += mbad_i.eq(ptr14 != 0)
            lastn_i = Signal(2, name=f"plastn{i}")
            m.d.comb += lastn_i.eq(cur1.lastn)
            for j in range(i):
                with m.If(evl[i][j]):
                    m.d.comb += lastn_i.eq(lnv[j])

            m.d.comb += [st[i + 1].eq(st[i]), evn[i + 1].eq(evn[i]), evc[i + 1].eq(evc[i])]
            m.d.comb += [evl[i + 1][j].eq(evl[i][j]) for j in range(K)]
            with m.If(vld[i]):
                with m.If(mk[i]):
                    m.d.comb += [t.cov.eq(1), t.mark.eq(1), t.mbad.eq(mbad_i)]
                with m.Elif(st[i] == _ST_LEN):
                    # (after a length error the parse goes on with garbage; stage 5 drops it)
                    m.d.comb += [t.cov.eq(1), t.len.eq(1), st[i + 1].eq(_ST_DATA),
                                 evn[i + 1].eq(0), evc[i + 1].eq(0)]
                    m.d.comb += [evl[i + 1][j].eq(j == i) for j in range(K)]
                    with m.If(ulen[i] > cur1.mulpdu):
                        m.d.comb += t.lenerr.eq(RxError.TOO_LONG)
                    with m.Elif(ulen[i] < Mux(t_bit, 14, 18)):
                        m.d.comb += t.lenerr.eq(RxError.TOO_SHORT)
                with m.Elif(st[i] == _ST_DATA):
                    m.d.comb += [t.cov.eq(1), t.data.eq(1), isdata[i].eq(1)]
                    with m.If(left1):
                        m.d.comb += [st[i + 1].eq(_ST_CRC), t.lastd.eq(1), t.lastn.eq(lastn_i)]
                with m.Else():
                    m.d.comb += [t.crcw.eq(1), st[i + 1].eq(_ST_LEN),
                                 evn[i + 1].eq(0), evc[i + 1].eq(1)]
                    m.d.comb += [evl[i + 1][j].eq(0) for j in range(K)]
        # context after the beat
        left_a = Signal(15)
        dist_a = Signal(14)
        lastn_a = Signal(2)
        # (the subtractions run beside the parse chain; its data word count only selects)
        left0m = [Signal(15, name=f"left0m{c}") for c in range(K + 1)]
        lvalm = [[Signal(15, name=f"lval{j}m{c}") for c in range(K - j)] for j in range(K)]
        for c in range(K + 1):
            m.d.comb += left0m[c].eq(cur1.left - c)
        for j in range(K):
            for c in range(K - j):
                m.d.comb += lvalm[j][c].eq(lval[j] - c)

        def pick_value(values, idx, sig):
            with m.Switch(idx):
                for c, val in enumerate(values):
                    with m.Case(c):
                        m.d.comb += sig.eq(val)

        m.d.comb += [
            dist_a.eq(Mux(cur1.st == _ST_LEN, cur1.dist, cur1.dist + nw1)),
            lastn_a.eq(cur1.lastn),
        ]
        with m.If(evn[K]):
            pick_value(left0m, count(isdata), left_a)
        for j in range(K):
            with m.If(evl[K][j]):
                pick_value(lvalm[j], count(isdata[j + 1:]), left_a)
                m.d.comb += [dist_a.eq(nw1 - j), lastn_a.eq(lnv[j])]
        with m.If(evc[K]):
            m.d.comb += [left_a.eq(0), dist_a.eq(0)]
        # the flags of the new context, from candidates compared beside the chain
        leqv_a = Signal(K)
        eql0 = [Signal(name=f"eql0_{v}") for v in range(2 * K + 1)]    # left == v
        eqlj = [[Signal(name=f"eql{j}v{v}") for v in range(2 * K + 1)] for j in range(K)]
        for v in range(1, 2 * K + 1):
            m.d.comb += eql0[v].eq(cur1.left == v)
            for j in range(K):
                m.d.comb += eqlj[j][v].eq(lval[j] == v)
        with m.If(evn[K]):
            with m.Switch(count(isdata)):
                for c in range(K + 1):
                    with m.Case(c):
                        m.d.comb += leqv_a.eq(Cat(*[eql0[k + 1 + c] for k in range(K)]))
        for j in range(K):
            with m.If(evl[K][j]):
                with m.Switch(count(isdata[j + 1:])):
                    for c in range(K - j):
                        with m.Case(c):
                            m.d.comb += leqv_a.eq(Cat(*[eqlj[j][k + 1 + c] for k in range(K)]))
        with m.If(evc[K]):
            m.d.comb += leqv_a.eq(0)
        eqp = [Signal(name=f"eqp{v}") for v in range(2 * K)]       # phase == -v mod 128
        for v in range(2 * K):
            m.d.comb += eqp[v].eq(cur1.phase == (-v) % 128)
        mkv_a = Signal(K)
        with m.Switch(nw1):
            for c in range(K + 1):
                with m.Case(c):
                    m.d.comb += mkv_a.eq(Cat(*[eqp[i + c] for i in range(K)]))
        cfg_phase = Signal(7)
        m.d.comb += cfg_phase.eq(p1.words[_CFG_PHASE + 2:_CFG_PHASE + 9])
        nxt1 = Signal(MpaRxParseCtx(width=W))
        cfgw1 = p1.words[:32]
        with m.If(p1.cfg):
            m.d.comb += [
                nxt1.markers.eq(cfgw1[_CFG_MARKERS]),
                nxt1.mulpdu.eq(cfgw1[_CFG_MULPDU:_CFG_MULPDU + 16]),
                nxt1.phase.eq(cfg_phase),
                nxt1.st.eq(_ST_LEN),
                nxt1.mkv.eq(Cat(*[cfg_phase == (-i) % 128 for i in range(K)])),
            ]
        with m.Else():
            m.d.comb += [
                nxt1.markers.eq(cur1.markers), nxt1.mulpdu.eq(cur1.mulpdu),
                nxt1.phase.eq(cur1.phase + nw1), nxt1.st.eq(st[K]), nxt1.left.eq(left_a),
                nxt1.lastn.eq(lastn_a), nxt1.dist.eq(dist_a),
                nxt1.mkv.eq(mkv_a), nxt1.leqv.eq(leqv_a),
            ]
        with m.If(done[1]):
            m.d.sync += [
                ctx1_reg.eq(nxt1),
                vq.eq(1), q.words.eq(p1.words), q.first.eq(p1.first), q.last.eq(p1.last),
                q.conn.eq(p1.conn), q.cfg.eq(p1.cfg), q.tags.eq(tags2),
            ]
        with m.Elif(done[2]):
            m.d.sync += vq.eq(0)
        m.d.comb += [wr1p.en.eq(done[1] & p1.last), wr1p.addr.eq(p1.conn), wr1p.data.eq(nxt1)]

        # ============================================================ S1b: CRC precompute
        # The CRC register is linear: after word i, state_i = r_i ^ M^c_i(s), with s the
        # register at the beat's start, c_i the CRC-covered words before i (no CRC word
        # before i; else the M^c(s) term is 0) and r_i the chain of the words alone
        # (from 0, from CRC32C_INIT after a CRC word). r needs no context: computed here,
        # so that stage S2 only has the M^c(s) term in its loop.
        wq = [q.words[32 * i:32 * i + 32] for i in range(K)]
        r = [Signal(32, name=f"r{i}") for i in range(K + 1)]
        m.d.comb += r[0].eq(0)
        for i in range(K):
            t = q.tags[i]
            m.d.comb += r[i + 1].eq(Mux(t.crcw, CRC32C_INIT,
                                        Mux(t.cov, _crc32c_step(r[i], wq[i]), r[i])))
        with m.If(done[2]):
            m.d.sync += [
                v2.eq(1), p2.words.eq(q.words), p2.first.eq(q.first), p2.last.eq(q.last),
                p2.conn.eq(q.conn), p2.cfg.eq(q.cfg), p2.tags.eq(q.tags),
            ]
            m.d.sync += [p2.r[i].eq(r[i]) for i in range(K + 1)]
        with m.Elif(done[3]):
            m.d.sync += v2.eq(0)

        # ============================================================ S2: CRC
        ctx2_reg = Signal(MpaRxCrcCtx())
        cur2, wr2p = _context_memory(
            m, "ctx_crc", MpaRxCrcCtx(), N,
            load_en=done[1], load_addr=p1.conn,
            take=done[2], in_first=q.first, in_conn=q.conn, conn=p2.conn, done=done[3],
            reg=ctx2_reg)
        # M^c(s) for c = 0..K (M: the CRC step matrix, linear in the register)
        mpow_s = [Signal(32, name=f"mpow{c}") for c in range(K + 1)]
        for c in range(K + 1):
            m.d.comb += mpow_s[c].eq(_parity_matrix(cur2.crc, _mpow_masks(c)))
        crc, merr = chain("crc", 32), chain("merr", 1)
        cnt = chain("ccnt", range(K + 1))      # CRC-covered words before word i
        live = chain("clive", 1)               # no CRC word yet in this beat
        m.d.comb += [merr[0].eq(cur2.merr), cnt[0].eq(0), live[0].eq(1)]
        for i in range(K + 1):
            term = Signal(32, name=f"sterm{i}")
            with m.Switch(cnt[i]):
                for c in range(i + 1):
                    with m.Case(c):
                        m.d.comb += term.eq(mpow_s[c])
            m.d.comb += crc[i].eq(p2.r[i] ^ Mux(live[i], term, 0))
        tags3 = Signal(data.ArrayLayout(_CrcTag(), K))
        for i in range(K):
            t = p2.tags[i]
            m.d.comb += [tags3[i].p.eq(t), tags3[i].calc.eq(~crc[i]), tags3[i].merr.eq(merr[i])]
            m.d.comb += [
                live[i + 1].eq(live[i] & ~t.crcw),
                cnt[i + 1].eq(cnt[i] + t.cov),
                merr[i + 1].eq(Mux(t.crcw, 0, merr[i] | t.mbad)),
            ]
        nxt2 = Signal(MpaRxCrcCtx())
        with m.If(p2.cfg):
            m.d.comb += [nxt2.crc_en.eq(p2.words[_CFG_CRC]), nxt2.crc.eq(CRC32C_INIT)]
        with m.Else():
            m.d.comb += [nxt2.crc_en.eq(cur2.crc_en), nxt2.crc.eq(crc[K]), nxt2.merr.eq(merr[K])]
        crc_en3 = Signal()
        with m.If(done[3]):
            m.d.sync += [
                ctx2_reg.eq(nxt2),
                v3.eq(1), p3.words.eq(p2.words), p3.first.eq(p2.first), p3.last.eq(p2.last),
                p3.conn.eq(p2.conn), p3.cfg.eq(p2.cfg), p3.tags.eq(tags3),
                crc_en3.eq(cur2.crc_en),
            ]
        with m.Elif(done[4]):
            m.d.sync += v3.eq(0)
        m.d.comb += [wr2p.en.eq(done[3] & p2.last), wr2p.addr.eq(p2.conn), wr2p.data.eq(nxt2)]

        # ============================================================ S3: verdict
        words3 = [p3.words[32 * i:32 * i + 32] for i in range(K)]
        tags4 = Signal(data.ArrayLayout(_OutTag(), K))
        for i in range(K):
            t = p3.tags[i]
            o = tags4[i]
            bad = Signal(name=f"crcbad{i}")
            m.d.comb += [
                bad.eq(crc_en3 & (words3[i] != t.calc)),
                o.data.eq((t.p.len & (t.p.lenerr == 0)) | t.p.data),
                o.lastd.eq(t.p.lastd),
                o.lastn.eq(t.p.lastn),
            ]
            with m.If(t.p.crcw):
                m.d.comb += [
                    o.end.eq(1),
                    o.crcst.eq(Mux(crc_en3, Mux(bad, CrcStatus.BAD, CrcStatus.OK),
                                   CrcStatus.UNCHECKED)),
                    o.err.eq(Mux(bad, RxError.CRC, Mux(t.merr, RxError.MARKER, RxError.NONE))),
                ]
            with m.Elif(t.p.len & (t.p.lenerr != 0)):
                m.d.comb += [o.end.eq(1), o.lenend.eq(1), o.err.eq(t.p.lenerr),
                             o.crcst.eq(CrcStatus.UNCHECKED)]
        p3out = Signal(p4_layout)
        m.d.comb += [
            p3out.words.eq(p3.words), p3out.first.eq(p3.first), p3out.last.eq(p3.last),
            p3out.conn.eq(p3.conn), p3out.cfg.eq(p3.cfg), p3out.tags.eq(tags4),
        ]
        for j in range(2):
            with m.If(done[4] & (sk_wp == j)):
                m.d.sync += sk[j].eq(p3out)
        m.d.sync += [
            sk_wp.eq(sk_wp ^ done[4]),
            sk_rp.eq(sk_rp ^ sk_pop),
            sk_cnt.eq(sk_cnt + done[4] - sk_pop),
        ]
        with m.If(sk_pop):
            m.d.sync += [v4a.eq(1), p4a.eq(sk_head)]
        with m.Elif(a_release):
            m.d.sync += v4a.eq(0)

        # ============================================================ A: step split
        # Everything of S4's step that does not need the context is worked out here from
        # p4a's tags: which words the step covers (from wo4; a beat with an FPDU end after
        # a clean one goes to S4 in two steps), where the FPDU ends, and the words of the
        # current and of the next ULPDU, each compacted (markers, CRC removed).
        words_a = [p4a.words[32 * i:32 * i + 32] for i in range(K)]
        tga = p4a.tags
        inr = [Signal(name=f"inr{i}") for i in range(K)]
        end = [Signal(name=f"end{i}") for i in range(K)]
        for i in range(K):
            m.d.comb += [inr[i].eq(i >= wo4), end[i].eq(inr[i] & tga[i].end)]
        pre_end = [Signal(name=f"pre_end{i}") for i in range(K + 1)]   # an end before word i
        m.d.comb += pre_end[0].eq(0)
        for i in range(K):
            m.d.comb += pre_end[i + 1].eq(pre_end[i] | end[i])
        first_end = [end[i] & ~pre_end[i] for i in range(K)]
        e1 = Signal(range(K + 1))       # index after the first end word
        end_lenend = Signal()
        end_err = Signal(3)
        end_crc = Signal(2)
        for i in reversed(range(K)):
            with m.If(first_end[i]):
                m.d.comb += [e1.eq(i + 1), end_lenend.eq(tga[i].lenend),
                             end_err.eq(tga[i].err), end_crc.eq(tga[i].crcst)]
        end_bad = Signal()
        m.d.comb += [
            end_bad.eq(end_err != RxError.NONE),
            # a second end after a clean first one: this step stops after the first
            cut4.eq(Cat(*[end[i] & pre_end[i] for i in range(K)]).any() & ~end_bad),
        ]
        kc = [Signal(name=f"kc{i}") for i in range(K)]   # word of the current ULPDU
        kn = [Signal(name=f"kn{i}") for i in range(K)]   # word of the ULPDU after the end
        for i in range(K):
            m.d.comb += [
                kc[i].eq(inr[i] & tga[i].data & ~pre_end[i]),
                kn[i].eq(inr[i] & tga[i].data & pre_end[i] & ~cut4 & ~end_bad),
            ]
        pc = _prefix_counts(m, "pc", kc)
        pn = _prefix_counts(m, "pn", kn)
        cw_a = [Signal(32, name=f"cwa{j}") for j in range(K)]
        nw_a = [Signal(32, name=f"nwa{j}") for j in range(K)]
        for j in range(K):
            src_c = 0
            src_n = 0
            for i in range(j, K):
                src_c = src_c | Mux(kc[i] & (pc[i] == j), words_a[i], 0)
                src_n = src_n | Mux(kn[i] & (pn[i] == j), words_a[i], 0)
            m.d.comb += [cw_a[j].eq(src_c), nw_a[j].eq(src_n)]
        lastd_c = Signal()
        lastn_now = Signal(2)
        lastd_n = Signal()
        lastn_n = Signal(2)
        for i in range(K):
            with m.If(kc[i] & tga[i].lastd):
                m.d.comb += [lastd_c.eq(1), lastn_now.eq(tga[i].lastn)]
            with m.If(kn[i] & tga[i].lastd):
                m.d.comb += [lastd_n.eq(1), lastn_n.eq(tga[i].lastn)]
        with m.If(a_move):
            m.d.sync += [
                v4.eq(1),
                p4.cwords.eq(Cat(*cw_a)), p4.nwords.eq(Cat(*nw_a)),
                p4.nc.eq(pc[K]), p4.nn.eq(pn[K]),
                p4.first.eq(p4a.first & (wo4 == 0)), p4.last.eq(p4a.last & ~cut4),
                p4.cfg.eq(p4a.cfg), p4.conn.eq(p4a.conn),
                p4.has_end.eq(pre_end[K]), p4.lenend.eq(end_lenend), p4.err.eq(end_err),
                p4.crcst.eq(end_crc), p4.bad.eq(end_bad),
                p4.lastd_c.eq(lastd_c), p4.lastn_c.eq(lastn_now),
                p4.lastd_n.eq(lastd_n), p4.lastn_n.eq(lastn_n),
                wo4.eq(Mux(cut4, e1, 0)),
            ]
        with m.Elif(s4_done):
            m.d.sync += v4.eq(0)

        # ============================================================ S4: output
        ctx4_reg = Signal(MpaRxOutCtx(width=W))
        cur4, wr4p = _context_memory(
            m, "ctx_out", MpaRxOutCtx(width=W), N,
            load_en=sk_pop, load_addr=sk_head.conn,
            take=a_move, in_first=p4a.first & (wo4 == 0), in_conn=p4a.conn, conn=p4.conn,
            done=step4, reg=ctx4_reg)
        cwords = [p4.cwords[32 * j:32 * j + 32] for j in range(K)]
        has_end = Signal()      # an FPDU ends in this step (and counts: no earlier error)
        m.d.comb += has_end.eq(p4.has_end & ~cur4.err)
        cwin = Signal(range(2 * K + 2))
        m.d.comb += cwin.eq(cur4.cw + p4.nc)

        # completion of the current ULPDU (its last word seen, in the carry or now)
        lastn_c = Signal(2)
        complete = Signal()
        m.d.comb += [
            lastn_c.eq(Mux(p4.lastd_c, p4.lastn_c, cur4.lastn)),
            complete.eq(Mux(has_end, ~p4.lenend, cur4.complete | p4.lastd_c)),
        ]

        # the window: the carry's cw words, then this step's words of the current ULPDU
        carry_words = [cur4.carry[32 * p:32 * p + 32] for p in range(K + 1)]
        win = [Signal(32, name=f"win{p}") for p in range(2 * K + 1)]
        for p in range(2 * K):
            with m.Switch(cur4.cw):
                for c in range(K + 2):
                    with m.Case(c):
                        if p < c:
                            m.d.comb += win[p].eq(carry_words[p])
                        elif p - c < K:
                            m.d.comb += win[p].eq(cwords[p - c])
        m.d.comb += win[2 * K].eq(0)

        # ULPDU octets in the window if complete: 4 * cwin - 2 - (3 - lastn_c). A full
        # beat goes out if the window holds more than one beat's worth, i.e. if
        # cwin >= K + 1 and, when complete, u_oct > W: cwin >= K + 2, or cwin == K + 1
        # with lastn_c >= 2.
        u_oct = Signal(range(8 * K + 8))
        full = Signal()
        m.d.comb += [
            u_oct.eq(4 * cwin + lastn_c - 5),
            full.eq(~cur4.err & ~p4.cfg & (cwin >= K + 1) &
                    (~complete | (cwin >= K + 2) | lastn_c[1])),
        ]
        fin = [Signal(32, name=f"fin{j}") for j in range(K + 1)]
        for j in range(K + 1):
            m.d.comb += fin[j].eq(Mux(full, win[K + j], win[j]))

        full_beat = Signal(out_layout)
        last_beat = Signal(out_layout)
        m.d.comb += [
            full_beat.data.eq(Cat(*win[:K + 1])[16:16 + 8 * W]),
            full_beat.n.eq(W),
            full_beat.first.eq(~cur4.opened),
            full_beat.conn.eq(p4.conn),
        ]
        with m.If(p4.cfg):    # a cfg write to a connection with a partly output ULPDU
            m.d.comb += [
                last_beat.last.eq(1),
                last_beat.conn.eq(p4.conn),
                last_beat.crc.eq(CrcStatus.UNCHECKED),
                last_beat.error.eq(RX_ABORTED),
            ]
        with m.Elif(p4.lenend):
            m.d.comb += [
                last_beat.first.eq(1),
                last_beat.last.eq(1),
                last_beat.conn.eq(p4.conn),
                last_beat.crc.eq(CrcStatus.UNCHECKED),
                last_beat.error.eq(p4.err),
            ]
        with m.Else():
            m.d.comb += [
                last_beat.data.eq(Cat(*fin)[16:16 + 8 * W]),
                last_beat.n.eq(u_oct - Mux(full, W, 0)),
                last_beat.first.eq(~cur4.opened & ~full),
                last_beat.last.eq(1),
                last_beat.conn.eq(p4.conn),
                last_beat.crc.eq(p4.crcst),
                last_beat.error.eq(p4.err),
            ]
        abort = Signal()
        m.d.comb += abort.eq(p4.cfg & cur4.opened & ~cur4.err)

        nxt4 = Signal(MpaRxOutCtx(width=W))
        with m.If(p4.cfg):
            pass                # all zero: nothing in the carry, no error
        with m.Elif(has_end):
            m.d.comb += [
                nxt4.carry.eq(p4.nwords),
                nxt4.cw.eq(p4.nn),
                nxt4.err.eq(p4.bad),
                nxt4.complete.eq(p4.lastd_n),
                nxt4.lastn.eq(p4.lastn_n),
            ]
        with m.Else():
            m.d.comb += [
                nxt4.carry.eq(Cat(*fin)),
                nxt4.cw.eq(cwin - Mux(full, K, 0)),
                nxt4.opened.eq(cur4.opened | full),
                nxt4.err.eq(cur4.err),
                nxt4.complete.eq(cur4.complete | p4.lastd_c),
                nxt4.lastn.eq(lastn_c),
            ]
        with m.If(step4):
            m.d.sync += ctx4_reg.eq(nxt4)
        m.d.comb += [wr4p.en.eq(s4_done & p4.last), wr4p.addr.eq(p4.conn), wr4p.data.eq(nxt4)]

        # ============================================================ output FIFO
        wr0 = Signal()
        wr1 = Signal()
        slot0 = Signal(out_layout.size)
        m.d.comb += [
            wr0.eq(step4 & (full | has_end | abort)),
            wr1.eq(step4 & full & has_end),
            slot0.eq(Mux(full, full_beat.as_value(), last_beat.as_value())),
        ]
        rd = Signal()
        m.d.comb += [
            self.o.valid.eq(o_cnt != 0),
            self.o.payload.eq(Array(obuf)[o_rp]),
            rd.eq(self.o.valid & self.o.ready),
        ]
        wp1 = Signal(range(depth))
        m.d.comb += wp1.eq(o_wp + 1)
        # (entries o_wp and o_wp + 1 are free whenever S4 steps: written on every step,
        # kept only if the write pointer moves past them)
        for j in range(depth):
            with m.If(step4 & (o_wp == j)):
                m.d.sync += obuf[j].eq(slot0)
            with m.If(step4 & (wp1 == j)):
                m.d.sync += obuf[j].eq(last_beat.as_value())
        m.d.sync += [
            o_wp.eq(o_wp + wr0 + wr1),
            o_rp.eq(o_rp + rd),
            o_cnt.eq(o_cnt + wr0 + wr1 - rd),
        ]
        return m
