"""Payload layouts of the TX framer: its input beat :class:`MpaTxBeat`, its per-connection
context :data:`TX_CONTEXT` and what travels between its stages.

Everything in an MPA stream sits on a 4-octet grid, so inside the framer the unit is a
32-bit word (first octet in bits 0..7); a *data word* is one of an FPDU's words without
markers and CRC: ULPDU_Length and the first 2 ULPDU octets, then 4 ULPDU octets each
(the last one with the pad).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

from ..beat import OctetBeat, conn_bits

__all__ = ["MpaTxBeat", "TX_CONTEXT", "WordGroup", "FpduStart", "WordEntry", "LaneBeat"]


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


class WordGroup(data.StructLayout):
    """Input stage -> word buffer: the data words of one input beat.

    ``data``: up to W/4 + 1 words (``cnt`` of them; the last beat of a ULPDU may spill one
    word); ``room``: the buffer words that must be free for them (buffer size minus
    ``cnt``); ``sof``: the first word is an FPDU's first (the ULPDU_Length word); ``eof``:
    the last word is the FPDU's last data word; ``same``: (with ``sof``) the FPDU is of the
    same connection as the one before.
    """

    def __init__(self, *, width, connections, buffer_words):
        lanes = width // 4
        super().__init__({
            "data": unsigned(32 * (lanes + 1)),
            "cnt": range(lanes + 2),
            "room": range(buffer_words + 1),
            "sof": unsigned(1), "eof": unsigned(1), "conn": unsigned(conn_bits(connections)),
            "same": unsigned(1),
        })


class FpduStart(data.StructLayout):
    """Context -> word buffer: an FPDU's start context and what its first word needs of it.

    ``ctx``: :data:`TX_CONTEXT` at the FPDU's first octet; ``mlanes``: the lanes at phase 0
    if the FPDU starts a beat at lane 0 (markers on); ``qn``: the phase of the following
    beat (``q + W/4``); ``mnext``: the lanes of the following beat at phase 0.
    """

    def __init__(self, *, width):
        lanes = width // 4
        super().__init__({"ctx": TX_CONTEXT, "mlanes": unsigned(lanes), "qn": unsigned(7),
                          "mnext": unsigned(lanes)})


class WordEntry(data.StructLayout):
    """One data word in the word buffer, with flags, so that the lane chain compares no
    connection ids and no phases.

    ``sof``: the first word of an FPDU (the LEN word); ``eof``: its last data word;
    ``cont``: (sof only) same connection as the FPDU before; (sof only:) ``markers``,
    ``crc``, ``mlanes``, ``qn``, ``mnext`` as in :class:`FpduStart`.
    """

    def __init__(self, *, width, connections):
        lanes = width // 4
        super().__init__({
            "data": unsigned(32),
            "sof": unsigned(1),
            "eof": unsigned(1),
            "cont": unsigned(1),
            "conn": unsigned(conn_bits(connections)),
            "markers": unsigned(1), "crc": unsigned(1),
            "mlanes": unsigned(lanes),
            "qn": unsigned(7),
            "mnext": unsigned(lanes),
        })


class LaneBeat(data.StructLayout):
    """Lane stage -> CRC stage: one output beat with its CRC lanes still empty.

    ``words``: the W/4 lanes (unused lanes 0); ``crc`` bit k: lane k carries an FPDU's CRC;
    ``start`` bit k: an FPDU starts in lane k (the CRC restarts); ``crcen``: the run's
    connection sends CRCs; ``n``, ``first``, ``last``, ``conn``: as on the output.
    """

    def __init__(self, *, width, connections):
        lanes = width // 4
        super().__init__({
            "words": unsigned(32 * lanes), "crc": unsigned(lanes), "start": unsigned(lanes),
            "crcen": unsigned(1), "n": range(width + 1),
            "first": unsigned(1), "last": unsigned(1), "conn": unsigned(conn_bits(connections)),
        })
