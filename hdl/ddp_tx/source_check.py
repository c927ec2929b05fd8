"""The Read Responder's check of a Read Response's source region. See :class:`SourceCheck`."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.errors import RdmapProtectionCode

from ..beat import conn_bits
from ..compare import wide_less
from .layouts import CheckSteps, RrEntry, StagRow

__all__ = ["SourceCheck"]


class SourceCheck(wiring.Component):
    """Checks a Read Request's source (``src_stag``/``src_to``/``size``) against its row of the
    TX STag table before the first segment of its Read Response, as ``DdpRx`` checks the
    Request: the row is valid with that STag, of the same connection, with the remote read
    right, the TO does not wrap, the source lies inside the region's TOs, and the region
    still maps ``src_to`` to the ``src_addr`` the RX side worked out (the Read Response
    reads from there). A failure means the region changed after the RX side validated the
    Request.

    Parameters
    ----------
    connections : int
        Connection contexts.
    addr_width : int
        Host address width AW.

    Ports
    -----
    row : In(StagRow)
        The row of ``request.src_stag``, registered in the ``load`` step.
    request : In(RrEntry)
        The Read Request (stable during the check).
    conn : In(range(connections))
        The connection it came on.
    step : In(CheckSteps)
        One step per cycle, in order: ``load`` the row and the source's end, ``compare``
        (the region's end, the lower bound, the row's checks), ``decide``.
    fail : Out(1)
        The check failed (registered in ``decide``),
    code : Out(RdmapProtectionCode)
        and why: the RDMAP Remote Protection error code of the first failing test in the
        order INVALID_STAG, STAG_NOT_ASSOCIATED, ACCESS_RIGHTS, TO_WRAP, BASE_BOUNDS (out of
        the region, or mapped elsewhere now; INVALID_STAG when it passes).

    Latency, throughput and packet boundaries
    -----------------------------------------
    3 cycles, one per step (timing: the block RAM's output, then the adders and wide
    compares, then the priority of the results, each behind registers); ``fail`` and
    ``code`` hold from the cycle after ``decide`` until the next check. One check per Read
    Response, before its first non-empty segment.
    """

    def __init__(self, *, connections, addr_width):
        self.addr_width = addr_width
        self._row = StagRow(connections=connections, addr_width=addr_width)
        super().__init__({
            "row": In(self._row), "request": In(RrEntry(addr_width=addr_width)),
            "conn": In(conn_bits(connections)), "step": In(CheckSteps()),
            "fail": Out(1), "code": Out(RdmapProtectionCode),
        })

    def elaborate(self, platform):
        m = Module()
        AW = self.addr_width
        rq = self.request
        srow = Signal(self._row)
        s_ends = Signal(65)            # src_to + size
        s_rend = Signal(65)            # row base + length
        s_lo_ok = Signal()             # src_to >= row base
        s_same = Signal()              # the row maps src_to to src_addr
        s_bad0 = Signal()              # row invalid or another STag
        s_bad3 = Signal()              # row of another connection
        s_bad2 = Signal()              # no remote read right
        s_bad4 = Signal()              # src_to + size wraps
        with m.If(self.step.load):
            m.d.sync += [srow.eq(self.row), s_ends.eq(rq.src_to + rq.size)]
        with m.If(self.step.compare):
            m.d.sync += [s_rend.eq(srow.base + srow.length),
                         s_lo_ok.eq(~wide_less(rq.src_to, srow.base)),
                         s_same.eq((rq.src_addr[:AW] - rq.src_to[:AW])[:AW] == srow.delta),
                         s_bad0.eq(~srow.valid | (srow.stag != rq.src_stag)),
                         s_bad3.eq(srow.conn != self.conn), s_bad2.eq(~srow.rr), s_bad4.eq(s_ends[64])]
        with m.If(self.step.decide):
            in_space = s_lo_ok & ~wide_less(s_rend, s_ends) & s_same
            code = RdmapProtectionCode
            with m.If(s_bad0):
                m.d.sync += self.code.eq(code.INVALID_STAG)
            with m.Elif(s_bad3):
                m.d.sync += self.code.eq(code.STAG_NOT_ASSOCIATED)
            with m.Elif(s_bad2):
                m.d.sync += self.code.eq(code.ACCESS_RIGHTS)
            with m.Elif(s_bad4):
                m.d.sync += self.code.eq(code.TO_WRAP)
            with m.Elif(~in_space):
                m.d.sync += self.code.eq(code.BASE_BOUNDS)
            with m.Else():
                m.d.sync += self.code.eq(code.INVALID_STAG)
            m.d.sync += self.fail.eq(s_bad0 | s_bad3 | s_bad2 | s_bad4 | ~in_space)
        return m
