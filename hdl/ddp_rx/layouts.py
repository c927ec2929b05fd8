"""Internal payload layouts of the DDP/RDMAP receive path.

The ULPDU entry the ingest queues for the processor (:class:`UlpduEntry`) and the rows of
the processor's memories (:class:`StagRow`, :class:`ConnContext` with its
:class:`QueueState`, :class:`RecvEntry`). The layouts of the host-facing ports are in
:mod:`rnic.hdl.rdma_layouts` (shared with the transmit path and the core).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.utils import exact_log2

from rnic.host.spec.protocol import READ_REQUEST_LEN, TERMINATE_MAX_LEN

from ..beat import conn_bits
from ..mpa_config import RxError
from ..rdma_layouts import Opcode

__all__ = [
    "QN1_CAP", "QN2_CAP", "QN2_BASE", "CTL_BYTES",
    "UlpduEntry", "StagRow", "QueueState", "ConnContext", "RecvEntry",
]

#: Octets of a QN 1 message (RDMA Read Request) and the largest QN 2 message (Terminate).
QN1_CAP = READ_REQUEST_LEN
QN2_CAP = TERMINATE_MAX_LEN
#: The QN 2 message buffer starts at octet 32 of a connection's control buffer.
QN2_BASE = 32
#: Control-message buffer per connection: QN 1 at octets 0..31, QN 2 at 32..95.
CTL_BYTES = 96


class UlpduEntry(data.StructLayout):
    """A complete ULPDU waiting in its slot buffer (or an MPA status without a slot), as the
    ingest queues it for the processor.

    ``len`` counts its octets (0xFFFF: longer), ``ovf`` says it did not fit its slot,
    ``err`` is the deframer's verdict on its last beat (:class:`rnic.hdl.mpa_config.RxError`
    or :data:`rnic.hdl.mpa_rx.RX_ABORTED`; 0 for a good ULPDU).
    """

    def __init__(self, *, slots, connections):
        super().__init__({
            "slot": unsigned(max(1, exact_log2(slots))), "has_slot": unsigned(1),
            "conn": unsigned(conn_bits(connections)), "len": unsigned(16),
            "err": RxError, "ovf": unsigned(1),
        })


class StagRow(data.StructLayout):
    """A row of the STag table: the region's TOs are ``base .. end - 1`` (``end = base +
    length`` is stored rather than the length, so that no check adds them) and TO ``t`` is
    at host address ``t + delta`` (mod ``2**addr_width``: ``delta`` is the region's host
    address minus ``base``); ``rr``/``rw``/``ri``: remote read / remote write / remote
    invalidate access."""

    def __init__(self, *, connections, addr_width):
        super().__init__({
            "stag": unsigned(32), "base": unsigned(64), "end": unsigned(65),
            "delta": unsigned(addr_width),
            "valid": unsigned(1), "rr": unsigned(1), "rw": unsigned(1), "ri": unsigned(1),
            "conn": unsigned(conn_bits(connections)),
        })


class QueueState(data.StructLayout):
    """Reassembly state of the QN 1 / QN 2 message in progress (values <= 52 once checked):
    its MSN, the largest MO and end offset seen (``any``: a segment was seen) and the
    offsets of its last segment (``lv``: the last segment was seen)."""

    def __init__(self):
        super().__init__({
            "msn": unsigned(32), "any": unsigned(1), "max_mo": unsigned(6), "max_end": unsigned(6),
            "lv": unsigned(1), "l_mo": unsigned(6), "l_end": unsigned(6),
        })


class ConnContext(data.StructLayout):
    """Per-connection receive context (one memory row per connection).

    ``stopped``: an error or a Terminate stopped the connection; ``ird``/``rrc``: inbound
    Read Requests allowed / held; ``rbase``: the MSN of the receive buffer at ``head``,
    ``count`` buffers posted; ``q1``/``q2``: the QN 1 / QN 2 message state; ``tm_*``: the
    RDMA Read Response in progress (``tm_v``: its first segment was seen); ``later_done``:
    a message may have ended in a receive buffer behind the head (its completion waits for
    the buffers before it; cleared when the queue runs empty).
    """

    def __init__(self, *, rq_depth):
        db = exact_log2(rq_depth)
        super().__init__({
            "stopped": unsigned(1), "ird": unsigned(14), "rrc": unsigned(14),
            "rbase": unsigned(32), "head": unsigned(max(db, 1)), "count": unsigned(db + 1),
            "q1": QueueState(), "q2": QueueState(),
            "tm_v": unsigned(1), "tm_stag": unsigned(32), "tm_to": unsigned(64), "tm_len": unsigned(32),
            "later_done": unsigned(1),
        })


class RecvEntry(data.StructLayout):
    """A posted receive buffer and the reassembly state of its message (fields as in
    :class:`QueueState`; ``done``: its last segment arrived, with ``opcode`` and, for the
    Send-with-Invalidate kinds, ``inval``/``inval_stag``)."""

    def __init__(self):
        super().__init__({
            "addr": unsigned(64), "length": unsigned(32), "id": unsigned(32),
            "any": unsigned(1), "max_mo": unsigned(32), "max_end": unsigned(32),
            "lv": unsigned(1), "l_mo": unsigned(32), "l_end": unsigned(32),
            "done": unsigned(1), "opcode": Opcode, "inval": unsigned(1), "inval_stag": unsigned(32),
        })
