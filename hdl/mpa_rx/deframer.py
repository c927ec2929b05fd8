"""The MPA receive deframer: TCP payload segments in, ULPDUs with per-FPDU status out."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import OctetBeat, check_width, conn_bits
from ..mpa_config import MpaConfig
from .crc_accumulate import MpaRxCrcAccumulate
from .crc_precompute import MpaRxCrcPrecompute
from .layouts import MpaRxBeat
from .output import MpaRxOutput
from .output_buffer import MpaRxOutputBuffer
from .parse import MpaRxParse
from .realign import MpaRxRealign
from .step_split import MpaRxStepSplit
from .verdict import MpaRxVerdict

__all__ = ["MpaRxDeframer"]


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
    An input register, then a pipeline of stages, one component each
    (docstrings there); four of them are per-connection machines with their
    own context memory (one row per connection). A stage reads the row of a
    beat while the beat is in the stage before it and registers it when it
    takes the beat, so no memory output is on a logic path; it writes every
    beat's context back, one cycle after the beat, from a register. The
    write-backs a read may have missed (those of the stage's last three
    beats and of the beat it is finishing) are kept in registers and used
    instead of the row for a beat of their connection (see
    :func:`~rnic.hdl.mpa_rx.stage.context_memory`).

    1. :class:`~rnic.hdl.mpa_rx.realign.MpaRxRealign` (input register,
       ``cfg``/segment arbitration; context :class:`MpaRxAlignCtx`): the
       0..3 leftover octets and the beat make up to W/4 whole 32-bit words.
       Every FPDU and marker starts on this grid, so the rest is a machine
       over words, unrolled over the W/4 words of a beat.
    2. :class:`~rnic.hdl.mpa_rx.parse.MpaRxParse` (:class:`MpaRxParseCtx`):
       FPDU delineation, marker removal and check, length check. Each word
       is a marker (by the marker phase), the first word of an FPDU
       (ULPDU_Length and 2 ULPDU octets), a ULPDU word (the last one incl.
       the pad) or the CRC word; FPDUPTRs and the ULPDU_Length limits are
       checked here (as flags). An FPDU may end and the next start in one
       beat. (What depends on a word alone, ULPDU_Length + 1 in words and
       the like, is worked out by stage 1.)
    3. :class:`~rnic.hdl.mpa_rx.crc_precompute.MpaRxCrcPrecompute` (no
       context): the CRC register is linear, so the part of each word's CRC
       state that depends on the words alone is computed here (unrolled over
       pairs of words), with the selections of stage 4.
    4. :class:`~rnic.hdl.mpa_rx.crc_accumulate.MpaRxCrcAccumulate`
       (:class:`MpaRxCrcCtx`): adds the part that depends on the state at
       the beat's start; gives the computed CRC at each CRC word.
    5. :class:`~rnic.hdl.mpa_rx.verdict.MpaRxVerdict` (no context): CRC
       comparison, error precedence.
    6. :class:`~rnic.hdl.mpa_rx.step_split.MpaRxStepSplit` (no context),
       behind a 2-beat buffer: prepares each step of the output stage from
       the tags alone (which words the step covers: a beat holding a second
       FPDU end after a clean one goes through in two steps; where the FPDU
       ends; the words of the current and of the next ULPDU, each
       compacted, markers and CRC removed).
    7. :class:`~rnic.hdl.mpa_rx.output.MpaRxOutput` (:class:`MpaRxOutCtx`):
       appends the compacted words to the connection's output carry; output
       beats are the carry shifted by the 2 octets of ULPDU_Length. A
       ULPDU's final octets (at most W) are held back in the context, also
       across segment boundaries, until its CRC word has been seen, so that
       the ``last`` beat carries the verdict; all other ULPDU octets are
       passed through as soon as they make a full beat (cut-through: FPDUs
       up to 64 KB are not buffered). After an error this stage drops
       everything of the connection (the stages before it go on parsing
       what follows as FPDUs; it is dropped).

    Then :class:`~rnic.hdl.mpa_rx.output_buffer.MpaRxOutputBuffer`, an
    output FIFO of 4 beats (8 at W >= 16).

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
    tree and one AND-XOR level. Block RAM is read with one port per memory;
    distributed RAM (16 connections) has two read ports per memory, the realign
    one three.
    """


    def __init__(self, *, width, connections=16):
        check_width(width)
        conn_bits(connections)   # validates
        self.width = width
        self.connections = connections
        super().__init__({
            "cfg": In(stream.Signature(MpaConfig(connections=connections))),
            "i":   In(stream.Signature(OctetBeat(width=width, connections=connections))),
            "o":   Out(stream.Signature(MpaRxBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        params = dict(width=self.width, connections=self.connections)
        m.submodules.realign = realign = MpaRxRealign(**params)
        m.submodules.parse = parse = MpaRxParse(**params)
        m.submodules.crc_precompute = crc_precompute = MpaRxCrcPrecompute(**params)
        m.submodules.crc = crc = MpaRxCrcAccumulate(**params)
        m.submodules.verdict = verdict = MpaRxVerdict(**params)
        m.submodules.step_split = step_split = MpaRxStepSplit(**params)
        m.submodules.output = output = MpaRxOutput(**params)
        m.submodules.output_buffer = output_buffer = MpaRxOutputBuffer(**params)
        wiring.connect(m, wiring.flipped(self.cfg), realign.cfg)
        wiring.connect(m, wiring.flipped(self.i), realign.i)
        wiring.connect(m, realign.o, parse.i)
        wiring.connect(m, realign.ahead, parse.ahead)
        wiring.connect(m, parse.o, crc_precompute.i)
        wiring.connect(m, crc_precompute.o, crc.i)
        wiring.connect(m, crc_precompute.ahead, crc.ahead)
        wiring.connect(m, crc.o, verdict.i)
        wiring.connect(m, verdict.o, step_split.i)
        wiring.connect(m, step_split.o, output.i)
        wiring.connect(m, step_split.ahead, output.ahead)
        wiring.connect(m, output.w, output_buffer.w)
        m.d.comb += output.room.eq(output_buffer.room)
        wiring.connect(m, output_buffer.o, wiring.flipped(self.o))
        return m
