"""Payload layouts of the deframer: its output beat :class:`MpaRxBeat` and the beats that
travel between its stages (words of a beat, each with what the stages found out about it).

Between the stages a beat is a group of up to K = W/4 32-bit words (the first octet of
a word in bits 0..7) of one connection, with ``first``/``last`` of the TCP segment it
came from, or a ``cfg`` op: a write of the connection's configuration, travelling down
the pipeline in the place of a beat, its payload packed into ``words`` (see
:data:`CFG_MARKERS` ..).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.utils import bits_for

from ..beat import check_width, conn_bits
from ..mpa_config import CrcStatus, RxError

__all__ = ["MpaRxBeat", "RX_ABORTED", "WordFacts", "AlignedBeat", "ParseTag", "ParsedBeat",
           "CrcPreparedBeat", "CrcTag", "CrcBeat", "OutTag", "VerdictBeat", "OutputStep",
           "CFG_MARKERS", "CFG_CRC", "CFG_PHASE", "CFG_MULPDU"]

#: ``error`` code of an *abort beat*: the connection's ``cfg`` was rewritten while one
#: of its ULPDUs was partly output.
RX_ABORTED = RxError.ABORTED

#: Bit offsets of a cfg op's fields in ``words`` (``markers``, ``crc``, ``phase``, ``mulpdu``).
CFG_MARKERS, CFG_CRC, CFG_PHASE, CFG_MULPDU = 0, 1, 2, 11


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
        :data:`~rnic.hdl.mpa_config.CrcStatus`, meaningful on ``last`` beats only
        (0 elsewhere): UNCHECKED with CRC off, OK or BAD with CRC on.
    ``error`` (3)
        :data:`~rnic.hdl.mpa_config.RxError`, meaningful on ``last`` beats only
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
            "crc":   CrcStatus,
            "error": RxError,
        })


def _words_beat(width, connections, **fields):
    """Fields of a beat between two stages: its words, ``first``/``last`` of its segment,
    ``conn``, ``cfg`` (a cfg op: no words, its payload in ``words[0:27]``), then ``fields``."""
    return {
        "words": unsigned(8 * width),
        "first": unsigned(1),
        "last": unsigned(1),
        "conn": unsigned(conn_bits(connections)),
        "cfg": unsigned(1),
        **fields,
    }


class WordFacts(data.StructLayout):
    """What the parse stage needs of a word taken as a ULPDU_Length word, worked out from the
    word alone by the realign stage (timing: no adder or compare of the field in the parse
    loop). ``u`` is the ULPDU_Length field (big endian, octets 0 and 1).

    ``lvalm[c]``: ``((u + 1) >> 2) - c`` (ULPDU words after the first, minus c);
    ``lnv``: ``(u + 1) % 4``; ``leq`` bit v: ``(u + 1) >> 2 == v``; ``short``: u is below
    the DDP header its T bit announces; ``ptrm``: the word's FPDUPTR / 4 minus its index.
    """

    def __init__(self, *, width):
        k = width // 4
        super().__init__({
            "lvalm": data.ArrayLayout(unsigned(15), k),
            "lnv": unsigned(2),
            "leq": unsigned(2 * k + 1),
            "short": unsigned(1),
            "ptrm": unsigned(14),
        })


class AlignedBeat(data.StructLayout):
    """Realign -> parse: ``nw`` whole words of the connection's stream, with their
    :class:`WordFacts` in ``pre``."""

    def __init__(self, *, width, connections):
        k = width // 4
        super().__init__(_words_beat(width, connections, nw=unsigned(bits_for(k)),
                                     pre=data.ArrayLayout(WordFacts(width=width), k)))


class ParseTag(data.StructLayout):
    """Per word, from the parse stage: what the word is.

    ``cov``: covered by the CRC (marker, length word, ULPDU word); ``mark``: a marker;
    ``len``: the first word of an FPDU (ULPDU_Length + 2 octets); ``data``: another ULPDU
    word; ``crcw``: the CRC word (end of an FPDU); ``mbad``: a marker whose FPDUPTR is
    wrong; ``lenerr``: a length word's error (TOO_LONG, TOO_SHORT, else NONE); ``lastd``:
    the last ULPDU word (with the pad), ``lastn``: its content octets minus 1.
    """

    def __init__(self):
        super().__init__({
            "cov": unsigned(1), "mark": unsigned(1), "len": unsigned(1), "data": unsigned(1),
            "crcw": unsigned(1), "mbad": unsigned(1), "lenerr": RxError,
            "lastd": unsigned(1), "lastn": unsigned(2),
        })


class ParsedBeat(data.StructLayout):
    """Parse -> CRC precompute: the words, each with its :class:`ParseTag`."""

    def __init__(self, *, width, connections):
        super().__init__(_words_beat(width, connections,
                                     tags=data.ArrayLayout(ParseTag(), width // 4)))


class CrcPreparedBeat(data.StructLayout):
    """CRC precompute -> CRC: a :class:`ParsedBeat` and, for i = 0..K (before word i; K:
    after the beat), the parts of the CRC register that need no context.

    ``r[i]``: the register from the words alone; ``sel[i]`` bit c: M^c(s) of the register s
    at the beat's start is in the register at i; ``live`` bit i: no CRC word before word i;
    ``pm`` bit i: a bad marker, since the last CRC word, before word i.
    """

    def __init__(self, *, width, connections):
        k = width // 4
        super().__init__({
            **{n: f.shape for n, f in ParsedBeat(width=width, connections=connections)},
            "r": data.ArrayLayout(unsigned(32), k + 1),
            "sel": data.ArrayLayout(unsigned(k + 1), k + 1),
            "live": unsigned(k + 1),
            "pm": unsigned(k + 1),
        })


class CrcTag(data.StructLayout):
    """Per word, from the CRC stage: its :class:`ParseTag`; on a CRC word the CRC computed
    over the FPDU (``calc``) and whether a marker of the FPDU was bad (``merr``)."""

    def __init__(self):
        super().__init__({"p": ParseTag(), "calc": unsigned(32), "merr": unsigned(1)})


class CrcBeat(data.StructLayout):
    """CRC -> verdict: the words with their :class:`CrcTag`; ``crc_en``: the connection
    checks the CRC."""

    def __init__(self, *, width, connections):
        super().__init__(_words_beat(width, connections,
                                     tags=data.ArrayLayout(CrcTag(), width // 4),
                                     crc_en=unsigned(1)))


class OutTag(data.StructLayout):
    """Per word, from the verdict stage, for the output.

    ``data``: a ULPDU content word (length word or ULPDU word); ``end``: ends an FPDU
    (CRC word, or length word with an error); ``lenend``: the end is at a length word (a
    status beat, n = 0); ``err``, ``crcst``: the end's status; ``lastd``, ``lastn`` as in
    :class:`ParseTag`.
    """

    def __init__(self):
        super().__init__({
            "data": unsigned(1), "end": unsigned(1), "lenend": unsigned(1),
            "err": RxError, "crcst": CrcStatus, "lastd": unsigned(1), "lastn": unsigned(2),
        })


class VerdictBeat(data.StructLayout):
    """Verdict -> step split: the words with their :class:`OutTag`."""

    def __init__(self, *, width, connections):
        super().__init__(_words_beat(width, connections,
                                     tags=data.ArrayLayout(OutTag(), width // 4)))


class OutputStep(data.StructLayout):
    """Step split -> output: one step of the output stage, everything of it that does not
    need the output context.

    ``cwords``, ``nc``: the current ULPDU's words in this step, compacted (markers and CRC
    removed); ``nwords``, ``nn``: the next ULPDU's (after an FPDU end); ``has_end``: an FPDU
    ends in this step, with ``lenend``, ``err``, ``crcst``, ``bad`` (``err`` not NONE);
    ``lastd_c``/``lastn_c``: the last word of the current ULPDU is in this step, its
    content octets minus 1; ``lastd_n``/``lastn_n``: of the next one; ``ftab``: whether a
    full beat goes out, by the context's ``cw`` and ``short``; ``cwt``: ``cw`` after the
    step, by the context's ``cw`` and the full beat decision.
    """

    def __init__(self, *, width, connections):
        k = width // 4
        cnt = unsigned(bits_for(k))
        super().__init__({
            "cwords": unsigned(32 * k), "nwords": unsigned(32 * k), "nc": cnt, "nn": cnt,
            "first": unsigned(1), "last": unsigned(1), "cfg": unsigned(1),
            "conn": unsigned(conn_bits(connections)),
            "has_end": unsigned(1), "lenend": unsigned(1), "err": RxError, "crcst": CrcStatus,
            "bad": unsigned(1),
            "lastd_c": unsigned(1), "lastn_c": unsigned(2),
            "lastd_n": unsigned(1), "lastn_n": unsigned(2),
            "ftab": unsigned(2 * (k + 2)),
            "cwt": data.ArrayLayout(unsigned(bits_for(k + 1)), 2 * (k + 2)),
        })
