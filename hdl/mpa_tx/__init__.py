"""MPA TX framer: ULPDUs in, FPDUs (length, pad, markers, CRC32c) out.

See :class:`MpaTxFramer` (module :mod:`.framer`), whose stages are one component each:
:class:`~.input.MpaTxInput` (input registers), :class:`~.context.MpaTxContext`
(per-connection context and start-context queue), :class:`~.word_buffer.MpaTxWordBuffer`,
:class:`~.lanes.MpaTxLanes` (marker insertion, word lanes) and
:class:`~.crc_insert.MpaTxCrcInsert` (CRC and output register). Its input payload is
:class:`MpaTxBeat`, its per-connection context :data:`TX_CONTEXT`.
"""

from .framer import MpaTxFramer
from .layouts import TX_CONTEXT, MpaTxBeat

__all__ = ["MpaTxBeat", "MpaTxFramer", "TX_CONTEXT"]
