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

from .beat import check_width, OctetBeat, conn_bits
from .crc32c import CRC32C_INIT
from .mpa_config import CrcStatus, MpaConfig, RxError
from .synth_hints import no_rw_collision

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
    :class:`~rnic.hdl.beat.OctetBeat`, at the same offsets):

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
        :class:`~rnic.hdl.mpa_config.CrcStatus`, meaningful on ``last`` beats only
        (0 elsewhere): UNCHECKED with CRC off, OK or BAD with CRC on.
    ``error`` (3)
        :class:`~rnic.hdl.mpa_config.RxError`, meaningful on ``last`` beats only
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
        check_width(width)
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
    of the current ULPDU was output (its ``last`` not yet). ``err``: an error was
    reported (drop everything). ``complete``: the last ULPDU word of the current FPDU is
    in the carry; ``lastn``: its content octets minus 1. ``short``: ``complete &
    ~lastn[1]`` (kept for the full beat decision, see the output stage).
    """

    def __init__(self, *, width):
        k = width // 4
        super().__init__({
            "carry": unsigned(32 * (k + 1)), "cw": unsigned(bits_for(k + 1)),
            "opened": unsigned(1), "err": unsigned(1), "complete": unsigned(1),
            "lastn": unsigned(2), "short": unsigned(1),
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


def _mpow_const(value, c):
    """M^c(value) for a constant (M: the CRC register update for a zero word)."""
    for _ in range(c):
        value = crc32c_word_model(value, 0)
    return value


def _parity_matrix(x, masks):
    bits = []
    for mask in masks:
        terms = [x[j] for j in range(32) if (mask >> j) & 1]
        acc = terms[0] if terms else Const(0, 1)
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


#: A context memory with more rows than this is taken to be block RAM (as Yosys maps them
#: on the ECP5), a smaller one distributed RAM (LUTs); see :func:`_context_memory`.
_LUTRAM_MAX_ROWS = 64


def _context_memory(m, name, layout, depth, *, load_en, load_addr, take, in_conn, valid, conn,
                    done, nxt, load_pick=None, load_picked=None, own_loop=False):
    """Context memory of one stage: returns ``cur``, the context register of the stage's beat.

    The row of a beat is read one stage ahead, while the beat is in the stage before (it
    enters it with ``load_en``, connection ``load_addr``; then ``in_conn``), and the
    context is registered into ``cur`` when the stage takes the beat (``take``), so that
    no memory output is on a logic path and the stage's loop (``cur`` -> its logic ->
    ``nxt``, the context after the stage's beat ``conn``, done with ``done``) has no
    multiplexer in front (timing). Every beat writes its context back, one cycle after
    it is done, from a register (``{name}_h1``; timing: no context logic in front of the
    memory's write port). ``load_addr`` may be a pair of connections (a, b), of which b
    enters if ``load_pick``; ``load_picked`` is a register that says so once the beat is
    in the stage before.

    Block RAM (more than ``_LUTRAM_MAX_ROWS`` rows) is read once, when the beat enters
    the stage before, and its output register holds the row until the take (one enable
    pin per block). Distributed RAM is read in every cycle (timing: the enable of its
    read data registers, one flip-flop per bit, would depend on the pipeline's
    handshakes), through a port addressed with the connection entering and one with
    ``in_conn``, for a beat that waited in the stage before (``{name}_load_d``: which one).

    Either way a read misses the write-backs of the beats done in the two cycles before
    it and in the cycle of the take (the stage holds one beat at a time): the stage keeps
    its last three write-backs (``h1`` newest .. ``h3``) with their connections and
    takes the context of the newest one of the beat's connection: ``nxt`` if the beat it
    holds (``valid``; it is done if a beat is taken) is of that connection, else ``h1``,
    ``h2``, ``h3``, else the row read. The read data is never used when the read collided
    with a write of its row (that write-back is one of ``h1`` .. ``h3``): the memory is
    marked :func:`~rnic.hdl.synth_hints.no_rw_collision`. Which one of ``h1`` .. ``h3`` and
    the row it is, is compared one cycle ahead (``{name}_sel``; timing: no compare on
    the way to ``cur``, the row read goes through one multiplexer level in front of the
    choice of ``nxt``).

    ``cur`` is loaded with ``Mux(same, nxt, fwd)`` on a take; with ``own_loop`` the
    stage does it, and ``(cur, same, fwd)`` is returned.
    """
    # no_rw_collision: a row read in the cycle it is written is replaced by h1..h3 (above)
    mem = no_rw_collision(Memory(shape=layout, depth=depth, init=[]))
    m.submodules[name] = mem
    wr = mem.write_port()
    if isinstance(load_addr, tuple):
        conn_a, conn_b = load_addr
        entering = Mux(load_pick, conn_b, conn_a)
    else:
        conn_a, conn_b = load_addr, None
        entering = load_addr
    load_d = Signal(name=f"{name}_load_d")         # the stage before loaded a beat at the
    m.d.sync += load_d.eq(load_en)                  # last edge
    if depth > _LUTRAM_MAX_ROWS:
        rd = mem.read_port(domain="sync")
        m.d.comb += [rd.addr.eq(entering), rd.en.eq(load_en)]
        rd_data = rd.data.as_value()
    else:
        if conn_b is None:
            rd_a = mem.read_port(domain="sync")
            m.d.comb += rd_a.addr.eq(conn_a)
            rd_new = rd_a.data.as_value()
        else:
            rd_a, rd_b = mem.read_port(domain="sync"), mem.read_port(domain="sync")
            m.d.comb += [rd_a.addr.eq(conn_a), rd_b.addr.eq(conn_b)]
            rd_new = Mux(load_picked, rd_b.data.as_value(), rd_a.data.as_value())
        rd_old = mem.read_port(domain="sync")
        m.d.comb += rd_old.addr.eq(in_conn)
        rd_data = Mux(load_d, rd_new, rd_old.data.as_value())
    cur = Signal(layout, name=f"{name}_cur")
    hist = [(Signal(layout, name=f"{name}_h{k}"), Signal.like(conn, name=f"{name}_hc{k}"),
             Signal(name=f"{name}_hv{k}")) for k in (1, 2, 3)]
    done_d = Signal(name=f"{name}_done_d")         # the stage finished a beat at the last edge
    # timing: the write-back is registered (h1) and written in the next cycle
    m.d.sync += done_d.eq(done)
    with m.If(done):
        m.d.sync += [hist[0][0].eq(nxt), hist[0][1].eq(conn), hist[0][2].eq(1)]
        for k in (1, 2):
            m.d.sync += [hist[k][0].eq(hist[k - 1][0]), hist[k][1].eq(hist[k - 1][1]),
                         hist[k][2].eq(hist[k - 1][2])]
    m.d.comb += [wr.en.eq(done_d), wr.addr.eq(hist[0][1]), wr.data.eq(hist[0][0])]

    # Which one of h1..h3 and the row read is the newest of the connection of the beat in
    # the stage before, for the next cycle: compared for each way the registers compared
    # may change (the stage finishes its beat or not: the history shifts; the stage
    # before loads a beat or not, of connection a or b), chosen by the handshakes, and
    # registered (timing: no compare and no choice on the way to cur; the handshakes
    # come late, the candidates are kept by synthesis so that their choice stays last).
    def sel_vector(hist_next, in_next, nm):       # one-hot: h1, h2, h3, row read
        match = [hv & (hc == in_next) for hc, hv in hist_next]
        sig = Signal(4, name=nm, attrs={"keep": 1})
        m.d.comb += sig.eq(Cat(match[0], ~match[0] & match[1], ~match[0] & ~match[1] & match[2],
                               ~Cat(*match).any()))
        return sig
    hist_keep = [(hc, hv) for _, hc, hv in hist]
    hist_shift = [(conn, Const(1, 1))] + hist_keep[:2]
    sel_next = {}
    for d, hn in ((0, hist_keep), (1, hist_shift)):
        loaded = sel_vector(hn, conn_a, f"{name}_sel{d}a")
        if conn_b is not None:
            loaded = Mux(load_pick, sel_vector(hn, conn_b, f"{name}_sel{d}b"), loaded)
        sel_next[d] = Mux(load_en, loaded, sel_vector(hn, in_conn, f"{name}_sel{d}"))
    sel = Signal(4, name=f"{name}_sel")
    m.d.sync += sel.eq(Mux(done, sel_next[1], sel_next[0]))
    hfwd = Const(0, len(cur.as_value()))            # the newest of h1..h3
    for k, (h, _, _) in enumerate(hist):
        hfwd = hfwd | Mux(sel[k], h.as_value(), 0)
    fwd = Signal(layout, name=f"{name}_fwd")
    m.d.comb += fwd.eq(Mux(sel[3], rd_data, hfwd))
    # same: the stage's beat is of the connection of the beat in the stage before
    same = Signal(name=f"{name}_same")
    m.d.comb += same.eq(valid & (conn == in_conn))
    if own_loop:
        return cur, same, fwd
    with m.If(take):
        m.d.sync += cur.eq(Mux(same, nxt.as_value(), fwd.as_value()))
    return cur


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
    connection). A stage reads the row of a beat while the beat is in the
    stage before it and registers it when it takes the beat, so no memory
    output is on a logic path; it writes every beat's context back, one
    cycle after the beat, from a register. The write-backs a read may have
    missed (those of the stage's last three beats and of the beat it is
    finishing) are kept in registers and used instead of the row for a beat
    of their connection (see ``_context_memory``).

    1. realign (:class:`MpaRxAlignCtx`): the 0..3 leftover octets and the
       beat make up to W/4 whole 32-bit words. Every FPDU and marker starts
       on this grid, so the rest is a machine over words, unrolled over the
       W/4 words of a beat.
    2. parse (:class:`MpaRxParseCtx`): each word is a marker (by the marker
       phase), the first word of an FPDU (ULPDU_Length and 2 ULPDU octets),
       a ULPDU word (the last one incl. the pad) or the CRC word; FPDUPTRs
       and the ULPDU_Length limits are checked here (as flags). An FPDU may
       end and the next start in one beat. (What depends on a word alone,
       ULPDU_Length + 1 in words and the like, is worked out by stage 1.)
    3. CRC precompute (no context): the CRC register is linear, so the part
       of each word's CRC state that depends on the words alone is computed
       here (unrolled over pairs of words), with the selections of stage 4.
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
    (:class:`rnic.host.model.fpdu.FpduDecoder`): ULPDU_Length > MULPDU (TOO_LONG),
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

    Timing: no memory output is on a logic path, no context logic on a
    memory's write port; a stage's loop (its context register, its logic,
    the context register) has no multiplexer in front and one behind it,
    whose select and other inputs come from registers through one or two
    levels (which write-back to use is decided one cycle ahead; distributed
    RAM is read in every cycle, so that no read depends on the handshakes);
    the loops of the parse and output stages compare nothing (flags kept in
    the context, steps prepared one stage ahead), the CRC loop is one parity
    tree and one AND-XOR level. Alone (W = 8, between harness registers) on
    an LFE5UM-45F speed 8: 166 to 168 MHz with 16 connections (nextpnr seeds
    1 to 3), 146 MHz with 1024 (docs/build.md for the core). 1024
    connections cost 14 DP16KD at W = 8 (block RAM is read with one port
    per memory; with 16 connections the distributed RAM has two read ports
    per memory, the realign one three).
    """

    def __init__(self, *, width, connections=16):
        check_width(width)
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
        pre_layout = data.StructLayout({      # S1's values of a word, worked out by S0
            "lvalm": data.ArrayLayout(unsigned(15), K),   # c: ((ULPDU_Length + 1) >> 2) - c
            "lnv": unsigned(2),                           # (ULPDU_Length + 1) % 4
            "leq": unsigned(2 * K + 1),                   # bit v: (ULPDU_Length + 1) >> 2 == v
            "short": unsigned(1),                         # below the DDP header (T bit)
            "ptrm": unsigned(14),                         # FPDUPTR / 4 - (word index)
        })
        p1_layout = data.StructLayout({
            **{n: f.shape for n, f in _stage_payload(K, N, None)},
            "pre": data.ArrayLayout(pre_layout, K),
        })
        p2_layout = _stage_payload(K, N, _ParseTag())
        p2r_layout = data.StructLayout({      # S2's beat: + what S1b works out
            **{n: f.shape for n, f in p2_layout},
            "r": data.ArrayLayout(unsigned(32), K + 1),       # r_i (see S1b)
            "sel": data.ArrayLayout(unsigned(K + 1), K + 1),  # bit c: M^c(s) at word i
            "live": unsigned(K + 1),                          # no CRC word before word i
            "pm": unsigned(K + 1),                            # bad marker, no CRC word after
        })
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
            "ftab": unsigned(2 * (K + 2)),   # whether a full beat goes out, by cw, short of
                                             # the context (see S4)
            "cwt": data.ArrayLayout(unsigned(bits_for(K + 1)), 2 * (K + 2)),  # cw after, by
                                             # cw and the full beat decision
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
        v1, p1 = Signal(name="v1"), Signal(p1_layout, name="p1")
        vq, q = Signal(name="vq"), Signal(p2_layout, name="q")
        v2, p2 = Signal(name="v2"), Signal(p2r_layout, name="p2")
        v3, p3 = Signal(name="v3"), Signal(p3_layout, name="p3")
        v4a, p4a = Signal(name="v4a"), Signal(p4_layout, name="p4a")  # S4's context, step split
        wo4 = Signal(range(max(K, 2)))                  # A: first word of p4a still to go
        v4, p4 = Signal(name="v4"), Signal(p5_layout, name="p4")

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
        sk_room = Signal(init=1)
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
            rdy[5].eq(sk_room),
        ]
        # sk_room = (sk_cnt != 2), registered (timing: every handshake depends on it)
        with m.Switch(sk_cnt):
            with m.Case(2):
                m.d.sync += sk_room.eq(sk_pop)
            with m.Case(1):
                m.d.sync += sk_room.eq(~done[4] | sk_pop)
            with m.Default():
                m.d.sync += sk_room.eq(1)
        # (each ready flat over the stages after it, not chained: timing)
        vs = [vin, v0, v1, vq, v2, v3]
        for s, v in enumerate(vs[1:]):
            m.d.comb += [done[s].eq(v & rdy[s + 1]),
                         rdy[s].eq(~Cat(*vs[s + 1:]).all() | rdy[5])]
        done_in = Signal()
        rdy_in = Signal()
        m.d.comb += [done_in.eq(vin & rdy[0]), rdy_in.eq(~Cat(*vs).all() | rdy[5])]

        # input arbitration: a cfg write waits while a segment of its connection is open
        seg_open = Signal()
        seg_conn = Signal(beat_layout["conn"].shape)
        cfg = self.cfg.payload
        i_take = Signal()
        cfg_block = Signal()
        cfg_go = Signal()
        m.d.comb += [
            cfg_block.eq(seg_open & (seg_conn == cfg.conn)),
            cfg_go.eq(self.cfg.valid & ~cfg_block),
            self.cfg.ready.eq(rdy_in & ~cfg_block),
            self.i.ready.eq(rdy_in & ~cfg_go),
            i_take.eq(self.i.valid & self.i.ready),
        ]
        with m.If(i_take):
            m.d.sync += [seg_open.eq(~self.i.payload.last), seg_conn.eq(self.i.payload.conn)]
        # The input register loads whenever it may take something (timing: its enable does
        # not depend on the valids of the ports; vin says whether it holds a beat).
        with m.If(rdy_in):
            m.d.sync += [vin.eq(cfg_go | self.i.valid), cin.eq(cfg_go), cpin.eq(cfg)]
            with m.If(cfg_go):
                m.d.sync += [
                    bin_.data.eq(0), bin_.n.eq(0), bin_.first.eq(1), bin_.last.eq(1),
                    bin_.conn.eq(cfg.conn),
                ]
            with m.Else():
                m.d.sync += bin_.eq(self.i.payload)
        with m.If(done_in):
            m.d.sync += [v0.eq(1), c0.eq(cin), cp0.eq(cpin), b0.eq(bin_)]
        with m.Elif(done[0]):
            m.d.sync += v0.eq(0)

        # ============================================================ S0: realign
        def lval_is(u, v):
            """(u + 1) >> 2 == v (ULPDU words after the first, of length u), without an
            adder (timing: no carry chain in front of the compare)."""
            if v == 0:
                return (u[2:] == 0) & (u[:2] != 3)
            return (u == 4 * v - 1) | ((u[2:] == v) & (u[:2] != 3))

        nxt0 = Signal(MpaRxAlignCtx())
        # (the input register loads whenever rdy_in: a segment's beat or a cfg op, cin)
        cur0 = _context_memory(
            m, "ctx_align", MpaRxAlignCtx(), N,
            load_en=rdy_in, load_addr=(self.i.payload.conn, cfg.conn), load_pick=cfg_go,
            load_picked=cin,
            take=done_in, in_conn=bin_.conn, valid=v0, conn=b0.conn, done=done[0], nxt=nxt0)
        cat = Signal(8 * (W + 3))
        with m.Switch(cur0.lo_n):
            for k in range(4):
                with m.Case(k):
                    m.d.comb += cat.eq(Cat(cur0.lo[:8 * k], b0.data) if k else b0.data)
        total = Signal(range(W + 4))
        nwords = Signal(range(K + 1))
        m.d.comb += [total.eq(cur0.lo_n + b0.n), nwords.eq(total >> 2)]
        with m.Switch(nwords):
            for j in range(K + 1):
                with m.Case(j):
                    m.d.comb += nxt0.lo.eq(cat[32 * j:32 * j + 24])
        m.d.comb += nxt0.lo_n.eq(Mux(c0, 0, total[:2]))
        with m.If(done[0]):
            m.d.sync += [
                v1.eq(1),
                p1.words.eq(Mux(c0, Cat(cp0.markers, cp0.crc, cp0.phase, cp0.mulpdu),
                                cat[:32 * K])),
                p1.nw.eq(Mux(c0, 0, nwords)),
                p1.first.eq(b0.first), p1.last.eq(b0.last), p1.conn.eq(b0.conn), p1.cfg.eq(c0),
            ]
            # timing: the values of S1 that depend on a word alone (adders, compares of
            # the ULPDU_Length field) are worked out here, beside S0's short loop
            for j in range(K):
                w = cat[32 * j:32 * j + 32]
                u = Cat(w[8:16], w[0:8])          # ULPDU_Length (big endian)
                pre = p1.pre[j]
                m.d.sync += [
                    pre.lnv.eq((u + 1)[:2]),
                    pre.short.eq(u < Mux(w[23], 14, 18)),
                    pre.ptrm.eq(Cat(w[26:32], w[16:24]) - j),
                    pre.leq.eq(Cat(*[lval_is(u, v) for v in range(2 * K + 1)])),
                ]
                # ((u + 1) >> 2) - c in one adder
                m.d.sync += [pre.lvalm[c].eq((u + (1 - 4 * c) % (1 << 17))[2:17])
                             for c in range(K)]
        with m.Elif(done[1]):
            m.d.sync += v1.eq(0)

        # ============================================================ S1: parse
        nxt1 = Signal(MpaRxParseCtx(width=W))
        cur1 = _context_memory(
            m, "ctx_parse", MpaRxParseCtx(width=W), N,
            load_en=done_in, load_addr=bin_.conn,
            take=done[0], in_conn=b0.conn, valid=v1, conn=p1.conn, done=done[1], nxt=nxt1)
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
        lnv = [p1.pre[j].lnv for j in range(K)]
        for i in range(K):
            m.d.comb += [
                vld[i].eq(i < nw1),
                mk[i].eq(vld[i] & cur1.markers & cur1.mkv[i]),
            ]
        # equality flags: context left == k + 1, length word j's left == k + 1
        leq0 = [Signal(name=f"leq0_{k}") for k in range(K)]
        leqj = [[Signal(name=f"leq{j}_{k}") for k in range(K)] for j in range(K)]
        for k in range(K):
            m.d.comb += leq0[k].eq(cur1.leqv[k])
            for j in range(K):
                m.d.comb += leqj[j][k].eq(p1.pre[j].leq[k + 1])

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
            # (FPDUPTR / 4 - i, from S0, against dist: ptr14 != dist + i without an adder)
            m.d.comb += mbad_i.eq(Mux(cur1.st == _ST_LEN, ptr14 != cur1.dist,
                                      p1.pre[i].ptrm != cur1.dist))
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
                    with m.Elif(p1.pre[i].short):
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
                m.d.comb += lvalm[j][c].eq(p1.pre[j].lvalm[c])

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
                m.d.comb += eqlj[j][v].eq(p1.pre[j].leq[v])
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
                vq.eq(1), q.words.eq(p1.words), q.first.eq(p1.first), q.last.eq(p1.last),
                q.conn.eq(p1.conn), q.cfg.eq(p1.cfg), q.tags.eq(tags2),
            ]
        with m.Elif(done[2]):
            m.d.sync += vq.eq(0)

        # ============================================================ S1b: CRC precompute
        # The CRC register is linear: after word i, state_i = r_i ^ M^c_i(s), with s the
        # register at the beat's start, c_i the CRC-covered words before i (no CRC word
        # before i; else the M^c(s) term is 0) and r_i the chain of the words alone
        # (from 0, from CRC32C_INIT after a CRC word). r needs no context: computed here,
        # so that stage S2 only has the M^c(s) term in its loop. Timing: r is not chained
        # word by word (a CRC step per word) but unrolled over pairs of words: r_i is an
        # XOR of M^e(w_j) (each one parity tree of the word) and of constants, gated by
        # the tags, over the words of its pair and r at the pair's start (from W = 16).
        # The selections of stage S2 (which M^c(s) at word i, whether a CRC word came
        # before it, the marker errors of the beat) are worked out here from the tags.
        wq = [q.words[32 * i:32 * i + 32] for i in range(K)]
        r = [Signal(32, name=f"r{i}") for i in range(K + 1)]
        srcs = {f"w{i}": wq[i] for i in range(K)}     # sources (names: values)
        srcs.update({f"r{i}": r[i] for i in range(K + 1)})
        pvec = {}                                      # M^e(source), e >= 1

        def lin_value(state):
            acc = Const(0, 32)
            for src, es in state.items():
                for e, cond in es.items():
                    if src == "init":
                        val = Const(_mpow_const(CRC32C_INIT, e), 32)
                    elif e == 0:
                        val = srcs[src]
                    else:
                        if (src, e) not in pvec:
                            pvec[src, e] = Signal(32, name=f"crc_{src}_m{e}")
                            m.d.comb += pvec[src, e].eq(_parity_matrix(srcs[src],
                                                                       _mpow_masks(e)))
                        val = pvec[src, e]
                    acc = acc ^ Mux(cond, val, 0)
            return acc

        state = {}                        # source -> {exponent: condition}: r_i
        m.d.comb += r[0].eq(0)
        for i in range(K):
            if i and i % 2 == 0:          # a new pair starts from r_i
                state = {f"r{i}": {0: Const(1, 1)}}
            t = q.tags[i]
            nstate = {}

            def add(src, e, cond):
                es = nstate.setdefault(src, {})
                es[e] = es[e] | cond if e in es else cond
            for src, es in state.items():
                for e, cond in es.items():
                    add(src, e + 1, cond & t.cov)
                    add(src, e, cond & ~t.cov & ~t.crcw)
            add(f"w{i}", 1, t.cov)
            add("init", 0, t.crcw)
            state = nstate
            m.d.comb += r[i + 1].eq(lin_value(state))
        live_b = [Signal(name=f"blive{i}") for i in range(K + 1)]   # no CRC word before i
        cnt_b = [Signal(range(K + 1), name=f"bcnt{i}") for i in range(K + 1)]
        pm_b = [Signal(name=f"bpm{i}") for i in range(K + 1)]   # a bad marker, since the CRC word
        m.d.comb += [live_b[0].eq(1), cnt_b[0].eq(0), pm_b[0].eq(0)]
        for i in range(K):
            t = q.tags[i]
            m.d.comb += [
                live_b[i + 1].eq(live_b[i] & ~t.crcw),
                cnt_b[i + 1].eq(cnt_b[i] + t.cov),
                pm_b[i + 1].eq(~t.crcw & (pm_b[i] | t.mbad)),
            ]
        with m.If(done[2]):
            m.d.sync += [
                v2.eq(1), p2.words.eq(q.words), p2.first.eq(q.first), p2.last.eq(q.last),
                p2.conn.eq(q.conn), p2.cfg.eq(q.cfg), p2.tags.eq(q.tags),
            ]
            for i in range(K + 1):
                # a cfg op (no words) makes the register CRC32C_INIT, the marker error 0
                live_i = live_b[i] & ~q.cfg if i == K else live_b[i]
                m.d.sync += [
                    p2.r[i].eq(Mux(q.cfg, CRC32C_INIT, r[i]) if i == K else r[i]),
                    p2.sel[i].eq(Cat(*[live_i & (cnt_b[i] == c) for c in range(K + 1)])),
                    p2.live[i].eq(live_i),
                    p2.pm[i].eq(pm_b[i]),
                ]
        with m.Elif(done[3]):
            m.d.sync += v2.eq(0)

        # ============================================================ S2: CRC
        nxt2 = Signal(MpaRxCrcCtx())
        cur2, same2, fwd2 = _context_memory(
            m, "ctx_crc", MpaRxCrcCtx(), N,
            load_en=done[1], load_addr=p1.conn,
            take=done[2], in_conn=q.conn, valid=v2, conn=p2.conn, done=done[3], nxt=nxt2,
            own_loop=True)
        # M^c(s) for c = 0..K (M: the CRC step matrix, linear in the register)
        mpow_s = [Signal(32, name=f"mpow{c}") for c in range(K + 1)]
        for c in range(K + 1):
            m.d.comb += mpow_s[c].eq(_parity_matrix(cur2.crc, _mpow_masks(c)))
        crc = [Signal(32, name=f"crc{i}") for i in range(K + 1)]
        merr = [Signal(name=f"merr{i}") for i in range(K + 1)]
        for i in range(K + 1):
            term = Const(0, 32)
            for c in range(K + 1):
                term = term ^ Mux(p2.sel[i][c], mpow_s[c], 0)
            m.d.comb += [
                crc[i].eq(p2.r[i] ^ term),
                merr[i].eq((cur2.merr & p2.live[i]) | p2.pm[i]),
            ]
        tags3 = Signal(data.ArrayLayout(_CrcTag(), K))
        for i in range(K):
            m.d.comb += [tags3[i].p.eq(p2.tags[i]), tags3[i].calc.eq(~crc[i]),
                         tags3[i].merr.eq(merr[i])]
        m.d.comb += [
            nxt2.crc_en.eq(Mux(p2.cfg, p2.words[_CFG_CRC], cur2.crc_en)),
            nxt2.crc.eq(crc[K]),
            nxt2.merr.eq(merr[K]),
        ]
        # the loop: the next beat's context is nxt2 (same connection) or fwd2; for the CRC
        # register that choice is folded into the terms (timing: the M^c(s) terms go
        # through one AND-XOR level, with no multiplexer behind it)
        with m.If(done[2]):
            term = Const(0, 32)
            for c in range(K + 1):
                term = term ^ Mux(p2.sel[K][c] & same2, mpow_s[c], 0)
            m.d.sync += [
                cur2.crc.eq(term ^ Mux(same2, p2.r[K], fwd2.crc)),
                cur2.crc_en.eq(Mux(same2, nxt2.crc_en, fwd2.crc_en)),
                cur2.merr.eq(Mux(same2, nxt2.merr, fwd2.merr)),
            ]
        crc_en3 = Signal()
        with m.If(done[3]):
            m.d.sync += [
                v3.eq(1), p3.words.eq(p2.words), p3.first.eq(p2.first), p3.last.eq(p2.last),
                p3.conn.eq(p2.conn), p3.cfg.eq(p2.cfg), p3.tags.eq(tags3),
                crc_en3.eq(cur2.crc_en),
            ]
        with m.Elif(done[4]):
            m.d.sync += v3.eq(0)

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
        # (the words after the end are dropped if the end is bad or if the step stops
        # there; then only their count, nn, and completion are forced to 0, timing: the
        # compaction does not wait for that decision; no carry word beyond cw is used)
        drop_n = Signal()
        m.d.comb += drop_n.eq(cut4 | end_bad)
        for i in range(K):
            m.d.comb += [
                kc[i].eq(inr[i] & tga[i].data & ~pre_end[i]),
                kn[i].eq(inr[i] & tga[i].data & pre_end[i]),
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
        # S4's decision whether a full beat goes out (see there), worked out here for every
        # value of the context fields it depends on (timing: S4 only selects)
        # (``~complete | lastn[1]`` after the step's words, from the context's short if the
        # last word is not in this step; the context is complete if an FPDU ends then)
        ftab = []
        for c in range(K + 2):
            for short in range(2):
                cwin_c = c + pc[K]
                ftab.append(~p4a.cfg & ~end_lenend & (cwin_c >= K + 1) &
                            ((cwin_c >= K + 2) | Mux(lastd_c, lastn_now[1], not short)))
        cwt = [(c + pc[K] - f * K)[:len(p4.cwt[0])] for f in range(2) for c in range(K + 2)]
        with m.If(a_move):
            m.d.sync += [
                v4.eq(1),
                p4.cwords.eq(Cat(*cw_a)), p4.nwords.eq(Cat(*nw_a)),
                p4.nc.eq(pc[K]), p4.nn.eq(Mux(drop_n, 0, pn[K])),
                p4.first.eq(p4a.first & (wo4 == 0)), p4.last.eq(p4a.last & ~cut4),
                p4.cfg.eq(p4a.cfg), p4.conn.eq(p4a.conn),
                p4.has_end.eq(pre_end[K]), p4.lenend.eq(end_lenend), p4.err.eq(end_err),
                p4.crcst.eq(end_crc), p4.bad.eq(end_bad),
                p4.lastd_c.eq(lastd_c), p4.lastn_c.eq(lastn_now),
                p4.lastd_n.eq(lastd_n & ~drop_n), p4.lastn_n.eq(Mux(drop_n, 0, lastn_n)),
                wo4.eq(Mux(cut4, e1, 0)),
                p4.ftab.eq(Cat(*ftab)),
                p4.cwt.eq(Cat(*cwt)),
            ]
        with m.Elif(s4_done):
            m.d.sync += v4.eq(0)

        # ============================================================ S4: output
        nxt4 = Signal(MpaRxOutCtx(width=W))
        cur4, same4, fwd4 = _context_memory(
            m, "ctx_out", MpaRxOutCtx(width=W), N,
            load_en=sk_pop, load_addr=sk_head.conn,
            take=a_move, in_conn=p4a.conn, valid=v4, conn=p4.conn, done=step4, nxt=nxt4,
            own_loop=True)
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
        # with lastn_c >= 2. (Worked out by stage A for every cw and short of the context,
        # timing; also 0 on a cfg op and a length error, where the window is empty; the
        # error of the context is the one term left here.)
        u_oct = Signal(range(8 * K + 8))
        full = Signal()
        m.d.comb += [
            u_oct.eq(4 * cwin + lastn_c - 5),
            full.eq(~cur4.err & p4.ftab.bit_select(Cat(cur4.short, cur4.cw), 1)),
        ]
        fin = [Signal(32, name=f"fin{j}") for j in range(K + 1)]
        for j in range(K + 1):
            m.d.comb += fin[j].eq(Mux(full, win[K + j], win[j]))

        # The step writes up to two beats: a full beat or the last one of a ULPDU (slot 0),
        # and after a full beat the last one (slot 1, kept only with an FPDU end). Their
        # data does not depend on ``full`` (timing): slot 0 holds the window's first beat
        # (zero on a status or abort beat, which never follows a full beat), slot 1 its
        # second one.
        beat0 = Signal(out_layout)
        beat1 = Signal(out_layout)
        m.d.comb += [
            beat0.data.eq(Mux(p4.cfg | p4.lenend, 0, Cat(*win[:K + 1])[16:16 + 8 * W])),
            beat0.conn.eq(p4.conn),
            beat1.data.eq(Cat(*win[K:])[16:16 + 8 * W]),
            beat1.n.eq(u_oct - W),
            beat1.last.eq(1),
            beat1.conn.eq(p4.conn),
            beat1.crc.eq(p4.crcst),
            beat1.error.eq(p4.err),
        ]
        with m.If(full):
            m.d.comb += [beat0.n.eq(W), beat0.first.eq(~cur4.opened)]
        with m.Elif(p4.cfg):    # a cfg write to a connection with a partly output ULPDU
            m.d.comb += [
                beat0.last.eq(1),
                beat0.crc.eq(CrcStatus.UNCHECKED),
                beat0.error.eq(RX_ABORTED),
            ]
        with m.Elif(p4.lenend):
            m.d.comb += [
                beat0.first.eq(1),
                beat0.last.eq(1),
                beat0.crc.eq(CrcStatus.UNCHECKED),
                beat0.error.eq(p4.err),
            ]
        with m.Else():
            m.d.comb += [
                beat0.n.eq(u_oct),
                beat0.first.eq(~cur4.opened),
                beat0.last.eq(1),
                beat0.crc.eq(p4.crcst),
                beat0.error.eq(p4.err),
            ]
        abort = Signal()
        m.d.comb += abort.eq(p4.cfg & cur4.opened & ~cur4.err)

        cw_cont = Signal.like(cur4.cw)      # cw after a step that goes on (table of stage A)
        with m.Switch(Cat(cur4.cw, full)):
            for f in range(2):
                for c in range(K + 2):
                    with m.Case(c | f << len(cur4.cw)):
                        m.d.comb += cw_cont.eq(p4.cwt[f * (K + 2) + c])
        with m.If(p4.cfg):
            pass                # all zero: nothing in the carry, no error
        with m.Elif(has_end):
            m.d.comb += [
                nxt4.carry.eq(p4.nwords),
                nxt4.cw.eq(p4.nn),
                nxt4.err.eq(p4.bad),
                nxt4.complete.eq(p4.lastd_n),
                nxt4.lastn.eq(p4.lastn_n),
                nxt4.short.eq(p4.lastd_n & ~p4.lastn_n[1]),
            ]
        with m.Else():
            m.d.comb += [
                nxt4.carry.eq(Cat(*fin)),
                nxt4.cw.eq(cw_cont),
                nxt4.opened.eq(cur4.opened | full),
                nxt4.err.eq(cur4.err),
                nxt4.complete.eq(cur4.complete | p4.lastd_c),
                nxt4.lastn.eq(lastn_c),
                nxt4.short.eq((cur4.complete | p4.lastd_c) & ~lastn_c[1]),
            ]
        # the loop: the next step's context is nxt4 (same connection) or fwd4; for the
        # fields that depend on the full beat decision that choice is made beside it
        # (timing: behind ``full`` only one multiplexer level)
        cont = Signal()         # same connection, no cfg op, no FPDU end: the carry goes on
        m.d.comb += cont.eq(same4 & ~p4.cfg & ~has_end)
        with m.If(a_move):
            m.d.sync += [
                cur4.carry.eq(Mux(cont, Cat(*fin),
                                  Mux(same4, Mux(p4.cfg, 0, p4.nwords), fwd4.carry))),
                cur4.cw.eq(Mux(cont, cw_cont,
                               Mux(same4, Mux(p4.cfg, 0, p4.nn), fwd4.cw))),
                cur4.opened.eq(Mux(cont, cur4.opened | full, ~same4 & fwd4.opened)),
                cur4.err.eq(Mux(same4, nxt4.err, fwd4.err)),
                cur4.complete.eq(Mux(same4, nxt4.complete, fwd4.complete)),
                cur4.lastn.eq(Mux(same4, nxt4.lastn, fwd4.lastn)),
                cur4.short.eq(Mux(same4, nxt4.short, fwd4.short)),
            ]

        # ============================================================ output FIFO
        wr0 = Signal()
        wr1 = Signal()
        m.d.comb += [
            wr0.eq(step4 & (full | has_end | abort)),
            wr1.eq(step4 & full & has_end),
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
                m.d.sync += obuf[j].eq(beat0)
            with m.If(step4 & (wp1 == j)):
                m.d.sync += obuf[j].eq(beat1)
        m.d.sync += [
            o_wp.eq(o_wp + wr0 + wr1),
            o_rp.eq(o_rp + rd),
            o_cnt.eq(o_cnt + wr0 + wr1 - rd),
        ]
        return m
