"""DDP/RDMAP layouts and constants shared by the receive path (:mod:`rnic.hdl.ddp_rx`), the
transmit path (:mod:`rnic.hdl.ddp_tx`) and the core (:mod:`rnic.hdl.rnic_core`).

The payloads of the host-facing ports of :class:`rnic.hdl.ddp_rx.DdpRx`, which the core's
register blocks drive and read and of which the transmit path takes some unchanged:
:class:`StagWrite` (also into the transmit path's STag table), :class:`RqPost`,
:class:`ConnCtl`, :class:`RrDone` (from the transmit path), :class:`Completion`,
:class:`ReadRequestOut` (to the transmit path) and :class:`TermReport` (to the transmit
path, which sends the Terminate it holds); :data:`TERM_BYTES`, the Terminate payload a
:class:`TermReport` carries; :class:`Opcode`, the RDMAP opcode as a field type.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.utils import ceil_log2

from rnic.host.spec.protocol import TERMINATE_MAX_LEN, RdmapOpcode

from .beat import conn_bits
from .shapes import shaped_enum

__all__ = [
    "TERM_BYTES", "Opcode",
    "StagWrite", "RqPost", "ConnCtl", "RrDone", "Completion", "ReadRequestOut", "TermReport",
]

#: Octets of the Terminate payload in a :class:`TermReport` (4 + 2 + 18 + 28).
TERM_BYTES = TERMINATE_MAX_LEN

#: RDMAP opcodes (RFC 5040 section 4.2) as a layout field type: the low 4 bits of the RDMAP
#: control octet. Members and values are those of the spec layer's ``RdmapOpcode``.
Opcode = shaped_enum(RdmapOpcode, 4, module=__name__, name="Opcode")


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
