"""Payload layouts of the DDP/RDMAP receive path: the host-facing ports and the internal rows.

Host-facing (the ports of :class:`rnic.hdl.ddp_rx.DdpRx`): :class:`StagWrite`, :class:`RqPost`,
:class:`ConnCtl`, :class:`RrDone`, :class:`Completion`, :class:`ReadRequestOut`,
:class:`TermReport`. Internal: the ULPDU entry the ingest queues for the processor
(:class:`UlpduEntry`), the rows of the processor's memories (:class:`StagRow`,
:class:`ConnContext` with its :class:`QueueState`, :class:`RecvEntry`) and the RDMAP opcode
(:class:`Opcode`).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.utils import ceil_log2, exact_log2

from rnic.host.spec.protocol import READ_REQUEST_LEN, TERMINATE_MAX_LEN, RdmapOpcode

from ..beat import conn_bits
from ..mpa_config import RxError
from ..shapes import shaped_enum

__all__ = [
    "TERM_BYTES", "QN1_CAP", "QN2_CAP", "QN2_BASE", "CTL_BYTES", "Opcode",
    "StagWrite", "RqPost", "ConnCtl", "RrDone", "Completion", "ReadRequestOut", "TermReport",
    "UlpduEntry", "StagRow", "QueueState", "ConnContext", "RecvEntry",
]

#: Octets of the Terminate payload in a :class:`TermReport` (4 + 2 + 18 + 28).
TERM_BYTES = TERMINATE_MAX_LEN
#: Octets of a QN 1 message (RDMA Read Request) and the largest QN 2 message (Terminate).
QN1_CAP = READ_REQUEST_LEN
QN2_CAP = TERMINATE_MAX_LEN
#: The QN 2 message buffer starts at octet 32 of a connection's control buffer.
QN2_BASE = 32
#: Control-message buffer per connection: QN 1 at octets 0..31, QN 2 at 32..95.
CTL_BYTES = 96


#: RDMAP opcodes (RFC 5040 section 4.2) as a layout field type: the low 4 bits of the RDMAP
#: control octet. Members and values are those of the spec layer's ``RdmapOpcode``.
Opcode = shaped_enum(RdmapOpcode, 4, module=__name__, name="Opcode")


# ---------------------------------------------------------------------------- port layouts

class StagWrite(data.StructLayout):
    """One STag table row write (STAG_* registers + STAG_CMD.COMMIT).

    The row of a wire STag is ``stag % stags``; the row matches when ``valid`` and
    its ``stag`` equals the wire STag in full. The region's TOs ``base .. base + length - 1``
    are the host memory ``addr .. addr + length - 1``: a tagged segment with TO ``t`` is
    placed at ``addr + (t - base)``.
    """

    def __init__(self, *, stags, connections):
        super().__init__({
            "index": unsigned(ceil_log2(stags) or 1),
            "stag": unsigned(32), "base": unsigned(64), "length": unsigned(32), "addr": unsigned(64),
            "valid": unsigned(1), "remote_read": unsigned(1), "remote_write": unsigned(1),
            "remote_inv": unsigned(1), "conn": unsigned(conn_bits(connections)),
        })


class RqPost(data.StructLayout):
    """Post a QN 0 receive buffer (RQ_* registers + RQ_CMD.POST)."""

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)),
            "addr": unsigned(64), "length": unsigned(32), "id": unsigned(32),
        })


class ConnCtl(data.StructLayout):
    """Reset a connection's receive context (CTX_CMD.COMMIT): MSNs to 1, queues empty,
    no error, IRD set."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "ird": unsigned(14)})


class RrDone(data.StructLayout):
    """The TX side finished answering one inbound RDMA Read Request of ``conn`` (frees an IRD slot)."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections))})


class Completion(data.StructLayout):
    """Completion of a received message.

    ``opcode`` 3..6: a Send kind filled receive buffer ``wr_id`` (MSN ``msn``) with
    ``length`` octets; ``invalidated``/``inval_stag``: the Send-with-Invalidate
    kinds; ``solicited``: the SE kinds. ``opcode`` 2: the last segment of an RDMA
    Read Response: ``stag``/``to`` of its first segment, ``length`` octets.
    """

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)), "opcode": Opcode,
            "msn": unsigned(32), "wr_id": unsigned(32), "length": unsigned(32),
            "solicited": unsigned(1), "invalidated": unsigned(1), "inval_stag": unsigned(32),
            "stag": unsigned(32), "to": unsigned(64),
        })


class ReadRequestOut(data.StructLayout):
    """A validated inbound RDMA Read Request, for the TX side (it holds an IRD slot until
    ``rr_done``). ``src_addr``: the host address of ``src_to`` in its region as the receive
    path found it (the transmit path checks that the region still maps it there)."""

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)), "msn": unsigned(32),
            "sink_stag": unsigned(32), "sink_to": unsigned(64), "size": unsigned(32),
            "src_stag": unsigned(32), "src_to": unsigned(64), "src_addr": unsigned(64),
        })


class TermReport(data.StructLayout):
    """An error found on the connection (``received = 0``) or a Terminate received from the
    peer (``received = 1``); either way the connection stops (later segments dropped).

    ``term`` holds ``tlen`` octets of a Terminate payload (octet 0 in bits 0..7): for an
    error, the payload this side sends (RFC 5040 section 4.8: Layer/EType/ErrorCode,
    M D R, DDP Segment Length, the offending DDP header, the Read Request header), exactly
    :meth:`rnic.host.model.rdmap.Terminate.for_error`; for a received Terminate, its payload as
    received. The octets from ``tlen`` on are 0. ``layer``/``etype``/``ecode`` repeat the
    error (or the received one's).
    """

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)), "received": unsigned(1),
            "layer": unsigned(4), "etype": unsigned(4), "ecode": unsigned(8),
            "tlen": unsigned(6), "term": unsigned(8 * TERM_BYTES),
        })


# ---------------------------------------------------------------------------- internal layouts

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
