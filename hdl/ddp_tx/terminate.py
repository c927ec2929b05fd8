"""The octets of the Terminate segments the transmit path sends. See :class:`TerminateBuilder`."""

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.errors import Layer, RdmapErrorType, RdmapProtectionCode
from rnic.host.spec.regmap import SqOpcode

from ..beat import check_width, conn_bits
from ..compare import above
from ..rdma_layouts import TERM_BYTES, TermReport
from .headers import (OP_TERMINATE, QN_READ_REQUEST, QN_TERMINATE, READ_REQUEST_SEGMENT_LEN, UNTAGGED_HEADER_LEN, octets,
                      padded, untagged_header)
from .layouts import HEADER_MAX, RrEntry

__all__ = ["TerminateBuilder", "TerminateHeaders", "CHECK_TERMINATE_LEN"]

#: Octets of the Terminate of a failed Read Response source check: its header, the 6-octet
#: Terminate control (Layer/EType/ErrorCode, Hdrct, DDP Segment Length), the Read Request's
#: DDP header and its Read Request header.
CHECK_TERMINATE_LEN = UNTAGGED_HEADER_LEN + 6 + READ_REQUEST_SEGMENT_LEN
_HDRCT_MDR = 0xE0        # Terminate Hdrct: M, D and R set (both headers and the segment length follow)
assert UNTAGGED_HEADER_LEN + TERM_BYTES <= HEADER_MAX and CHECK_TERMINATE_LEN <= HEADER_MAX


class TerminateHeaders(data.StructLayout):
    """Both Terminates, as :class:`TerminateBuilder` offers them: ``report`` (of a ``term``
    report) with its length, its first beat's header mask and whether that beat is its last,
    and ``check`` (of a failed source check, :data:`CHECK_TERMINATE_LEN` octets)."""

    def __init__(self, *, width):
        super().__init__({
            "report": 8 * HEADER_MAX, "report_len": 8, "report_hmask": width, "report_last_beat": 1,
            "check": 8 * HEADER_MAX,
        })


class TerminateBuilder(wiring.Component):
    """The Terminate path's datapath: the octets of the two kinds of Terminate (QN 2, the
    next QN 2 MSN, one segment each).

    Parameters
    ----------
    width : int
        Datapath width W in octets.
    connections : int
        Connection contexts.
    addr_width : int
        Host address bits (the width of :class:`~rnic.hdl.ddp_tx.layouts.RrEntry`
        ``src_addr``).

    Ports
    -----
    report : In(TermReport)
        ``DdpTx.term``'s payload (stable while it waits): the Terminate carries its ``tlen``
        octets of ``term``.
    msn : In(32)
        The connection's next QN 2 MSN.
    request : In(RrEntry)
        The Read Request whose Read Response failed its source check, and ``code`` the
        check's RDMAP Remote Protection error code: that Terminate carries M D R, the
        46-octet segment length, the Read Request's DDP header (a single segment: L, QN 1,
        its MSN, MO 0) and its 28-octet Read Request header.
    code : In(RdmapProtectionCode)
    headers : Out(TerminateHeaders)
        Both segments' octets (padded to the header register), as combinational functions of
        the inputs, and the ``report`` Terminate's length, header mask and last-beat flag,
        registered from ``report`` in every cycle.

    Latency, throughput and packet boundaries
    -----------------------------------------
    The ``report`` lengths follow ``report`` by 1 cycle; the octets are combinational. A
    Terminate is one ULPDU, header-only (no payload fetch).
    """

    def __init__(self, *, width, connections, addr_width):
        check_width(width)
        conn_bits(connections)
        self.width = width
        super().__init__({
            "report": In(TermReport(connections=connections)), "msn": In(32),
            "request": In(RrEntry(addr_width=addr_width)), "code": In(RdmapProtectionCode),
            "headers": Out(TerminateHeaders(width=width)),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.width
        rep, rq, out = self.report, self.request, self.headers
        header = untagged_header(1, OP_TERMINATE, Const(0, 32), QN_TERMINATE, self.msn, Const(0, 32))
        report = header + [rep.term[8 * k:8 * k + 8] for k in range(TERM_BYTES)]
        request_ddp = untagged_header(1, SqOpcode.RDMA_READ, Const(0, 32), QN_READ_REQUEST, rq.msn, Const(0, 32))
        request_rdmap = (octets(rq.sink_stag, 4) + octets(rq.sink_to, 8) + octets(rq.size, 4)
                         + octets(rq.src_stag, 4) + octets(rq.src_to, 8))
        control = [Const((Layer.RDMAP << 4) | RdmapErrorType.REMOTE_PROTECTION, 8), self.code,
                   Const(_HDRCT_MDR, 8), Const(0, 8), Const(0, 8), Const(READ_REQUEST_SEGMENT_LEN, 8)]
        check = header + control + request_ddp + request_rdmap
        assert len(check) == CHECK_TERMINATE_LEN
        m.d.comb += [out.report.eq(Cat(*padded(report))), out.check.eq(Cat(*padded(check)))]
        report_len = UNTAGGED_HEADER_LEN + rep.tlen
        m.d.sync += [out.report_len.eq(report_len),
                     out.report_hmask.eq(Cat(*[above(report_len, b) for b in range(W)])),
                     out.report_last_beat.eq(~above(report_len, W))]
        return m
