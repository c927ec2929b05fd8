"""Layouts of the DDP/RDMAP transmit path: its host-facing ports and the records its stages pass.

Port layouts (:class:`rnic.hdl.ddp_tx.DdpTx`): :class:`WorkRequest`, :class:`TxConnCfg`,
:class:`ReadDone`, :class:`TxCompletion`. Register-map enums as field shapes of the port
fields' widths: :data:`SqOpcode` (4 bits), :data:`CqStatus` (8 bits). The rest are
internal: the per-connection context (:class:`TxContext`), an outstanding Read
(:class:`ReadEntry`), a queued Read Request (:class:`RrEntry`), a row of the TX STag table
(:class:`StagRow`), the plan of a queue head's next segment (:class:`SegmentPlan`), the
kind of segment that starts (:class:`SegmentKind`) and what the emitter
(:class:`EmitStart`) and the payload fetch (:class:`FetchStart`) load.
"""

import types

from amaranth.hdl import Cat, signed, unsigned
from amaranth.lib import data, enum
from amaranth.utils import exact_log2

from rnic.host.spec import regmap

from ..beat import check_width, conn_bits

__all__ = [
    "SqOpcode", "CqStatus", "WorkRequest", "TxConnCfg", "ReadDone", "TxCompletion",
    "TxContext", "RrEntry", "ReadEntry", "StagRow", "PlanHead", "SegmentPlan", "SegmentKind", "CheckSteps",
    "EmitStart", "FetchStart", "HEADER_MAX", "check_depths",
]

#: Octets of the header register: an 18-octet untagged header and a 52-octet Terminate
#: payload, rounded up.
HEADER_MAX = 72


def check_depths(**depths):
    """Raise ValueError naming the first of the keyword arguments that is no power of 2 >= 2."""
    for name, v in depths.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 2 or v & (v - 1):
            raise ValueError(f"{name} must be a power of 2 (>= 2), not {v!r}")


def _sized(spec_enum, width):
    """The register-map enum ``spec_enum`` as an Amaranth ``IntEnum`` of ``width`` bits: the
    same members and values, for a field wider than its values need (the CQ_INFO/SQ_WR
    fields the ports mirror)."""
    def members(namespace):
        for member in spec_enum:
            namespace[member.name] = member.value
    sized = types.new_class(spec_enum.__name__, (enum.IntEnum,), {"shape": unsigned(width)}, members)
    sized.__doc__ = f":class:`rnic.host.spec.regmap.{spec_enum.__name__}` as a {width}-bit field shape."
    sized.__module__ = __name__
    return sized


#: :class:`rnic.host.spec.regmap.SqOpcode` as a 4-bit field (``SQ_WR.OPCODE``).
SqOpcode = _sized(regmap.SqOpcode, 4)
#: :class:`rnic.host.spec.regmap.CqStatus` as an 8-bit field (``CQ_INFO.STATUS``).
CqStatus = _sized(regmap.CqStatus, 8)


# ---------------------------------------------------------------------------- port layouts

class WorkRequest(data.StructLayout):
    """One work request (the SQ_* registers + SQ_CMD.DOORBELL).

    ``opcode`` is :class:`rnic.host.spec.regmap.SqOpcode`: RDMA_WRITE (``length`` octets from
    ``laddr`` to the peer's ``rstag``/``rto``), RDMA_READ (``length`` octets from the peer's
    ``rstag``/``rto`` into the local sink ``lstag``/``laddr``: the Read Request carries Data
    Sink STag = ``lstag``, Data Sink TO = ``laddr``), SEND, SEND_INV (invalidates
    ``inv_stag``), SEND_SE, SEND_SE_INV; other values complete with BAD_REQUEST.
    ``signaled``: complete on success too (errors always do).
    """

    def __init__(self, *, connections):
        super().__init__({
            "opcode": SqOpcode, "signaled": unsigned(1), "conn": unsigned(conn_bits(connections)),
            "laddr": unsigned(64), "length": unsigned(32), "lstag": unsigned(32),
            "rstag": unsigned(32), "rto": unsigned(64), "inv_stag": unsigned(32), "wr_id": unsigned(32),
        })


class TxConnCfg(data.StructLayout):
    """(Re)start a connection's transmit context (CTX_CMD.COMMIT): MSNs of QN 0/1/2 to 1,
    queues empty, no Read outstanding, not stopped; ``mulpdu`` (largest ULPDU_Length sent,
    at least 72 so that a Terminate fits one segment) and ``ord``."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "mulpdu": unsigned(16),
                          "ord": unsigned(14)})


class ReadDone(data.StructLayout):
    """The RX side completed an RDMA Read Response message (``DdpRx.cq`` with opcode 2):
    ``length`` octets arrived. Completes the connection's oldest outstanding Read."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "length": unsigned(32)})


class TxCompletion(data.StructLayout):
    """A finished work request (CQ_* registers with CQ_INFO.QUEUE = SQ).

    ``status`` is :class:`rnic.host.spec.regmap.CqStatus`; ``length`` the octets transferred
    (0 unless SUCCESS or LOCAL_LENGTH); ``opcode`` the work request's.
    """

    def __init__(self, *, connections):
        super().__init__({
            "conn": unsigned(conn_bits(connections)), "wr_id": unsigned(32), "status": CqStatus,
            "length": unsigned(32), "opcode": SqOpcode,
        })


# ---------------------------------------------------------------------------- internal layouts

class TxContext(data.StructLayout):
    """Transmit state of one connection (a row of the context memory).

    ``msn0``/``msn1``/``msn2``: next MSN of QN 0 (Sends), 1 (Read Requests), 2
    (Terminates). ``stopped``: nothing more is sent (``rterm``: because a Terminate was
    received). ``inlist``: the connection is in the active-connection FIFO. ``last_sq``: the
    send queue had the connection's last segment (the Read Responder has the next).
    ``sq_*``: send queue head index, entries, octets of the head message sent; ``rr_*`` the
    same of the Read Request queue (``rr_started``: the head's Read Response is under way,
    its source checked); ``rd_head``/``nreads``: the oldest outstanding Read, and how many.
    """

    def __init__(self, *, sq_depth, rrq_depth, ord_depth):
        sb, qb, ob = exact_log2(sq_depth), exact_log2(rrq_depth), exact_log2(ord_depth)
        super().__init__({
            "mulpdu": unsigned(16), "ord": unsigned(14),
            "msn0": unsigned(32), "msn1": unsigned(32), "msn2": unsigned(32),
            "stopped": unsigned(1), "rterm": unsigned(1), "inlist": unsigned(1), "last_sq": unsigned(1),
            "sq_head": unsigned(max(sb, 1)), "sq_count": unsigned(sb + 1), "sq_off": unsigned(32),
            "rr_head": unsigned(max(qb, 1)), "rr_count": unsigned(qb + 1), "rr_off": unsigned(32),
            "rr_started": unsigned(1),
            "rd_head": unsigned(max(ob, 1)), "nreads": unsigned(ob + 1),
        })


class RrEntry(data.StructLayout):
    """An inbound Read Request in its connection's queue: the fields of
    :class:`rnic.hdl.rdma_layouts.ReadRequestOut` the Read Response and a source check's
    Terminate use. Without ``conn`` (the queue's rows are the connection's) and with
    ``src_addr`` cut to ``addr_width`` bits: at ``addr_width`` 32 a row is 288 bits, eight
    DP16KD instead of nine (each is at most 36 bits wide)."""

    def __init__(self, *, addr_width):
        self.addr_width = addr_width
        super().__init__({
            "msn": unsigned(32), "sink_stag": unsigned(32), "sink_to": unsigned(64),
            "size": unsigned(32), "src_stag": unsigned(32), "src_to": unsigned(64),
            "src_addr": unsigned(addr_width),
        })

    def of(self, request):
        """The fields of ``request`` (a :class:`~rnic.hdl.rdma_layouts.ReadRequestOut` view) as an
        :class:`RrEntry` value."""
        return data.View(self, Cat(request[name][:field.width] for name, field in self))


class ReadEntry(data.StructLayout):
    """An outstanding RDMA Read: what its completion reports."""

    def __init__(self):
        super().__init__({"wr_id": unsigned(32), "length": unsigned(32), "signaled": unsigned(1)})


class StagRow(data.StructLayout):
    """A row of the TX STag table: the region of TOs ``base .. base + length - 1`` of ``stag``,
    TO ``t`` at host address ``t + delta`` (mod ``2**addr_width``), ``valid``: it exists, its
    memory ends inside the address space and its TOs below ``2**64``; ``rr``: remote read
    right, ``conn``: the connection it belongs to."""

    def __init__(self, *, connections, addr_width):
        super().__init__({
            "stag": unsigned(32), "base": unsigned(64), "length": unsigned(32),
            "delta": unsigned(addr_width),
            "valid": unsigned(1), "rr": unsigned(1), "conn": unsigned(conn_bits(connections)),
        })


class PlanHead(data.StructLayout):
    """A queue head's message as :class:`rnic.hdl.ddp_tx.planner.SegmentPlanner` sees it:
    payload address ``base`` and ``to`` (TO of a tagged message) of octet 0, ``length``
    octets, ``off`` sent, the connection's ``mulpdu``; ``tagged`` selects the first of the
    planner's two header lengths."""

    def __init__(self):
        super().__init__({"base": unsigned(64), "to": unsigned(64), "length": unsigned(32),
                          "off": unsigned(32), "mulpdu": unsigned(16), "tagged": unsigned(1)})


class SegmentPlan(data.StructLayout):
    """The next segment of a queue head (:class:`rnic.hdl.ddp_tx.planner.SegmentPlanner`).

    ``last``: the message's last segment; ``n`` payload octets; ``addr``/``to`` host address
    and TO of its first payload octet; ``rot``, ``tot``, ``t``, ``lastw``, ``pre``, ``need``,
    ``last_beat``, ``hmask``, ``tmask``: the emitter's start values
    (:class:`EmitStart`); ``words``/``to4k``: the payload fetch's (:class:`FetchStart`).
    """

    def __init__(self, *, width, addr_width):
        lw = exact_log2(check_width(width))
        super().__init__({
            "last": unsigned(1), "n": unsigned(16), "addr": unsigned(addr_width), "to": unsigned(64),
            "rot": unsigned(lw), "tot": unsigned(17), "t": signed(20), "lastw": signed(20),
            "pre": unsigned(1), "need": unsigned(1), "last_beat": unsigned(1),
            "hmask": unsigned(width), "tmask": unsigned(width),
            "words": unsigned(18), "to4k": unsigned(13 - lw + 1),
        })


class SegmentKind(data.StructLayout):
    """One-hot flags of the segment that starts (registers, set on the way into the state
    that starts it): ``write``/``send`` (the send queue head's, tagged or untagged, both
    with ``sq``), ``read_response``, ``read_request``, ``terminate`` (of a ``term`` report),
    ``check_terminate`` (a failed Read Response source check); ``payload``: ``sq`` or
    ``read_response``; ``any``: one of them."""

    def __init__(self):
        super().__init__({name: unsigned(1) for name in (
            "sq", "write", "send", "read_response", "read_request", "terminate", "check_terminate",
            "payload", "any")})


class CheckSteps(data.StructLayout):
    """The steps of :class:`rnic.hdl.ddp_tx.source_check.SourceCheck`, one per cycle: ``load``
    the STag row, ``compare``, ``decide``."""

    def __init__(self):
        super().__init__({"load": unsigned(1), "compare": unsigned(1), "decide": unsigned(1)})


class EmitStart(data.StructLayout):
    """What :class:`rnic.hdl.ddp_tx.emitter.SegmentEmitter` loads when a segment starts.

    ``header``: header and inline payload octets, octet 0 in bits 0..7, ``header_len`` of
    them; ``total``: octets of the ULPDU (its ULPDU_Length); ``conn``; ``rot``: octets of the
    first memory word that precede the payload; ``t``: index of the memory word the first
    beat ends in; ``lastw``: index of the last memory word (-1: none); ``pre``: load word 0
    before the first beat; ``need``/``last_beat``/``hmask``/``tmask``: the first beat's
    per-beat conditions (see the emitter).
    """

    def __init__(self, *, width, connections):
        lw = exact_log2(check_width(width))
        super().__init__({
            "header": unsigned(8 * HEADER_MAX), "header_len": range(HEADER_MAX + 1),
            "total": unsigned(17), "conn": unsigned(conn_bits(connections)),
            "rot": unsigned(lw), "t": signed(20), "lastw": signed(20),
            "pre": unsigned(1), "need": unsigned(1), "last_beat": unsigned(1),
            "hmask": unsigned(width), "tmask": unsigned(width),
        })


class FetchStart(data.StructLayout):
    """What :class:`rnic.hdl.ddp_tx.fetch.PayloadFetch` loads when a payload segment starts:
    the W-aligned ``addr`` of its first memory word, ``words`` to read, ``to4k`` words from
    ``addr`` to the next 4 KiB boundary."""

    def __init__(self, *, width, addr_width):
        lw = exact_log2(check_width(width))
        super().__init__({"addr": unsigned(addr_width), "words": unsigned(18),
                          "to4k": unsigned(13 - lw + 1)})
