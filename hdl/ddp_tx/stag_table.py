"""The transmit side's copy of the STag table. See :class:`TxStagTable`."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..compare import above
from ..rdma_layouts import StagWrite
from ..synth_hints import no_rw_collision
from .layouts import StagRow

__all__ = ["TxStagTable"]


class TxStagTable(wiring.Component):
    """The STag table rows the Read Responder checks a Read Response's source against.

    Parameters
    ----------
    stags : int
        Rows (power of 2); the row of an STag is ``stag % stags``.
    connections : int
        Connection contexts.
    addr_width : int
        Host address width AW: a row is valid only if its region's memory ends inside
        ``2**AW`` (and its TOs below ``2**64``).

    Ports
    -----
    w : In(stream(StagWrite))
        Row writes (``DdpTx.stag_w``).
    hold : In(1)
        The table's read is used in this cycle (the sequencer's DECIDE): a write waits.
    index : In(range(stags))
        The row to read; ``row`` has it in the next cycle.
    row : Out(StagRow)

    Latency, throughput and packet boundaries
    -----------------------------------------
    A write goes through two registers, the write as taken, then the row with the region's
    ends (``base + length``, ``addr + length``) in place of its valid bit, and lands in the table 2 cycles
    after it is taken (timing: the payload comes from a mux of two sources outside the
    block, and the valid bit is a 64-bit adder and a compare: only the compare of the
    registered end is in front of the block RAM's data input). The row waits while
    ``hold``, so that the table needs no logic for a read meeting a write (a row half old,
    half new could pass a check; timing: that logic would sit behind the block RAM's
    output): ``w.ready`` is low in such a cycle when both registers are full. One write
    per cycle otherwise.
    """

    def __init__(self, *, stags, connections, addr_width):
        exact_log2(stags)
        self.stags = stags
        self.connections = connections
        self.addr_width = addr_width
        self._row = StagRow(connections=connections, addr_width=addr_width)
        super().__init__({
            "w": In(stream.Signature(StagWrite(stags=stags, connections=connections))),
            "hold": In(1), "index": In(range(stags)), "row": Out(self._row),
        })

    def elaborate(self, platform):
        m = Module()
        S, SB, AW = self.stags, exact_log2(self.stags), self.addr_width
        # Marked no_rw_collision (synthesis builds no collision logic, rnic.hdl.synth_hints):
        # the row read in a cycle of ``hold`` is the one used, and writes wait then.
        stm = no_rw_collision(Memory(shape=self._row, depth=S, init=[]))
        m.submodules.stag = stm
        st_wr, st_rd = stm.write_port(), stm.read_port(domain="sync")
        m.d.comb += [st_rd.en.eq(1), st_rd.addr.eq(self.index), self.row.eq(st_rd.data)]

        w = self.w
        sw = Signal(StagWrite(stags=S, connections=self.connections), name="sw_q")
        sw_v = Signal()
        wrow = Signal(self._row)
        wrow_i = Signal(SB)
        wrow_v = Signal()
        wrow_ok = Signal()             # the write's valid bit
        wrow_end = Signal(65)          # TO base + length (valid if <= 2**64)
        wrow_aend = Signal(65)         # address + length (valid if <= 2**AW)
        w_adv = Signal()               # the row register takes sw_q
        m.d.comb += [w_adv.eq(~(wrow_v & self.hold)), w.ready.eq(w_adv | ~sw_v)]
        with m.If(w.ready):
            m.d.sync += [sw.eq(w.payload), sw_v.eq(w.valid)]
        with m.If(w_adv):
            m.d.sync += [
                wrow.stag.eq(sw.stag), wrow.base.eq(sw.base), wrow.length.eq(sw.length),
                wrow.delta.eq(sw.addr[:AW] - sw.base[:AW]),
                wrow_ok.eq(sw.valid), wrow_end.eq(sw.base + sw.length),
                wrow_aend.eq(sw.addr + sw.length),
                wrow.rr.eq(sw.remote_read), wrow.conn.eq(sw.conn),
                wrow_i.eq(sw.index[:SB]), wrow_v.eq(sw_v),
            ]
        m.d.comb += [wrow.valid.eq(wrow_ok & ~above(wrow_aend, 1 << AW) & ~above(wrow_end, 1 << 64)),
                     st_wr.addr.eq(wrow_i), st_wr.data.eq(wrow), st_wr.en.eq(wrow_v & ~self.hold)]
        return m
