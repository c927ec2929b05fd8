"""DDP/RDMAP receive path: parse, validate, place, complete (RFC 5041 / RFC 5040).

:class:`DdpRx` sits behind the MPA deframer and turns ULPDUs into AXI4 writes to host
memory, completions, queued RDMA Read Requests and error / Terminate reports. Its parts:

* :mod:`.ingest`: :class:`~.ingest.Ingest`, the deframer's beats into slot buffers and a
  queue of complete ULPDUs;
* :mod:`.processor`: :class:`~.processor.SegmentProcessor`, one segment at a time, made of
  the :class:`~.sequencer.Sequencer` (its FSM) and the datapaths it steers:
  :class:`~.header.HeaderReader`, :class:`~.validator.Validator`, the tables
  (:class:`~.stag_table.StagTable`, :class:`~.receive_queue.ReceiveQueue`,
  :class:`~.contexts.ContextTable`, :class:`~.control_buffer.ControlBuffer`), the
  :class:`~.placer.Placer` (which streams a segment's payload while the sequencer checks
  the next) with the :class:`~.axi_writer.AxiWriter`, the :class:`~.reporter.Reporter` and
  the :class:`~.completion_gate.CompletionGate` (completions wait there for their writes'
  B responses);
* :mod:`.layouts` (the internal rows), :mod:`.errors` (the error ids).

The payloads of its host-facing ports are in :mod:`rnic.hdl.rdma_layouts` (shared with the
transmit path and the core); this package re-exports them.
"""

from ..rdma_layouts import (
    TERM_BYTES, Completion, ConnCtl, ReadRequestOut, RqPost, RrDone, StagWrite, TermReport,
)
from .errors import error_word
from .receive_path import DdpRx

__all__ = [
    "StagWrite", "RqPost", "ConnCtl", "RrDone", "Completion",
    "ReadRequestOut", "TermReport", "DdpRx", "TERM_BYTES",
    "error_word",
]
