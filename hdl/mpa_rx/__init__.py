"""MPA receive deframer: TCP payload segments in, ULPDUs with per-FPDU status out.

See :class:`MpaRxDeframer` (module :mod:`.deframer`), whose pipeline stages are one
component each: :class:`~.realign.MpaRxRealign`, :class:`~.parse.MpaRxParse`,
:class:`~.crc_precompute.MpaRxCrcPrecompute`, :class:`~.crc_accumulate.MpaRxCrcAccumulate`,
:class:`~.verdict.MpaRxVerdict`, :class:`~.step_split.MpaRxStepSplit`,
:class:`~.output.MpaRxOutput` and :class:`~.output_buffer.MpaRxOutputBuffer`. The payload
layout of the output stream is :class:`MpaRxBeat`; the per-connection contexts (one
memory per stage that keeps one) are :class:`MpaRxAlignCtx`, :class:`MpaRxParseCtx`,
:class:`MpaRxCrcCtx` and :class:`MpaRxOutCtx`.
"""

from ..crc32c import crc32c_word_model
from .crc_accumulate import MpaRxCrcCtx
from .deframer import MpaRxDeframer
from .layouts import RX_ABORTED, MpaRxBeat
from .output import MpaRxOutCtx
from .parse import MpaRxParseCtx
from .realign import MpaRxAlignCtx

__all__ = ["MpaRxBeat", "MpaRxDeframer", "RX_ABORTED", "MpaRxAlignCtx", "MpaRxParseCtx",
           "MpaRxCrcCtx", "MpaRxOutCtx", "crc32c_word_model"]
