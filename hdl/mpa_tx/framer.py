"""The MPA TX framer: ULPDUs in, FPDUs (length, pad, markers, CRC32c) out."""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import OctetBeat, check_width, conn_bits
from ..mpa_config import MpaConfig
from .context import MpaTxContext
from .crc_insert import MpaTxCrcInsert
from .input import MpaTxInput
from .lanes import MpaTxLanes
from .layouts import MpaTxBeat
from .word_buffer import MpaTxWordBuffer, buffer_words

__all__ = ["MpaTxFramer"]


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
    fpdu_runs : bool
        Every run on ``o`` is one FPDU (default: FPDUs of one connection that
        follow each other share a run), for a TCP engine that cuts its
        segments at run ends. At W = 4 it costs nothing (an FPDU fills whole
        beats); at larger W, the lanes after an FPDU's end in its last beat.

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
    beat. With ``fpdu_runs`` every FPDU ends its run.

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
    CRC32c is computed word-wise. The stages are one component each
    (docstrings there):

    * :class:`~rnic.hdl.mpa_tx.input.MpaTxInput`, input registers R, A, B:
      R holds the beat as it came, so that the FPDU's start context is in a
      register before the FPDU's first word reaches B; A shifts the ULPDU
      octets by 2 (the LEN field goes in front) and zero-masks past ``n``,
      giving up to W/4 + 1 data words per input beat; B offers them to the
      word buffer.
    * :class:`~rnic.hdl.mpa_tx.context.MpaTxContext`: the per-connection
      context (phase in words, markers, crc; :data:`TX_CONTEXT`) in a memory
      with one read and one write port, read when a ULPDU's first beat is
      accepted; the phase after the FPDU is computed in closed form two
      cycles later and written back (the two writes a read cannot see are
      forwarded from registers, so back-to-back ULPDUs need no idle cycle).
      The start context waits in a three-entry queue, with its first word's
      marker lanes precomputed, and travels with the FPDU's first data word;
      nothing else needs to persist between ULPDUs because FPDUs are whole at
      the input.
    * :class:`~rnic.hdl.mpa_tx.word_buffer.MpaTxWordBuffer` (a power of 2
      >= 3 W/4 words, circular) decouples the input rate (data words) from
      the output rate (data words plus markers and CRCs). It takes B's words
      when they fit regardless of what the output takes this cycle, so no
      combinational path runs from ``o.ready`` to ``i.ready``. Words carry
      precomputed flags (first and last word of an FPDU, "same connection as
      the FPDU before", the marker lanes of a run starting with this FPDU),
      so that the lane logic compares no connection ids and no phases.
    * :class:`~rnic.hdl.mpa_tx.lanes.MpaTxLanes`, marker insertion: fills
      the W/4 lanes in order: each lane is a marker (its lane is known per
      beat: a run is one connection and advances its phase by W/4 words per
      beat), the next data word, or the CRC (after the FPDU's last data
      word). It registers the chosen words with per-lane "CRC here" / "FPDU
      starts here" flags.
    * :class:`~rnic.hdl.mpa_tx.crc_insert.MpaTxCrcInsert` runs the CRC
      register over the lanes and fills in the CRC lanes. For W <= 16 the
      register after each lane is built in closed form (M^k of the register
      XOR precomputed word terms, M the linear one-word update), so the
      register feeds back through one XOR tree; for wider beats the lanes
      are chained.

    Timing: the lane chain starts at the window registers and ends at their load
    multiplexer. The connection contexts are in distributed RAM for 16 connections and in
    block RAM for 1024.
    """

    def __init__(self, *, width, connections=16, fpdu_runs=False):
        check_width(width)
        conn_bits(connections)   # validates
        self.width = width
        self.connections = connections
        self.fpdu_runs = fpdu_runs
        super().__init__({
            "cfg": In(stream.Signature(MpaConfig(connections=connections))),
            "i":   In(stream.Signature(MpaTxBeat(width=width, connections=connections))),
            "o":   Out(stream.Signature(OctetBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        params = dict(width=self.width, connections=self.connections)
        m.submodules.input = inp = MpaTxInput(**params, buffer_words=buffer_words(self.width))
        m.submodules.context = context = MpaTxContext(**params)
        m.submodules.word_buffer = word_buffer = MpaTxWordBuffer(**params)
        m.submodules.lanes = lanes = MpaTxLanes(**params, fpdu_runs=self.fpdu_runs)
        m.submodules.crc = crc = MpaTxCrcInsert(**params)
        wiring.connect(m, wiring.flipped(self.i), inp.i)
        wiring.connect(m, wiring.flipped(self.cfg), context.cfg)
        wiring.connect(m, inp.start, context.start)
        wiring.connect(m, inp.o, word_buffer.i)
        wiring.connect(m, context.o, word_buffer.starts)
        wiring.connect(m, lanes.o, crc.i)
        wiring.connect(m, crc.o, wiring.flipped(self.o))
        m.d.comb += [
            word_buffer.next_room.eq(inp.next_room),
            word_buffer.pop.eq(lanes.pop),
            lanes.window.eq(word_buffer.window),
            lanes.have.eq(word_buffer.have),
            lanes.next_same.eq(inp.next_same),
        ]
        return m
