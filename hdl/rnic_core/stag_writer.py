"""STag table row writes (STAG_*): see :class:`StagWriter`."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..rdma_layouts import StagWrite
from .registers import register_signature
from .slices import slice_into

__all__ = ["StagWriter"]


class StagWriter(wiring.Component):
    """Writes a row of the receive path's STag table and of the transmit path's copy.

    STAG_CMD.COMMIT (while ``ready``, STAG_STATUS.BUSY 0 and STAG_INDEX below ``stags``;
    otherwise ignored) latches STAG_INDEX, STAG_KEY, STAG_BASE, STAG_LENGTH, STAG_ADDR and STAG_ATTR
    (a row whose CONN is not below ``connections`` is written invalid) and offers the
    row on ``rx`` and ``tx``; STAG_STATUS.BUSY is 1 until both took it. An STag the
    receive path invalidated (a received Send with Invalidate) comes in on
    ``invalidate`` and goes to ``tx`` only, after a host write that waits.

    Ports
    -----
    regs : In(register_signature(...))
        STAG_CMD, STAG_INDEX, STAG_KEY, STAG_BASE_LO/HI, STAG_LENGTH, STAG_ADDR_LO/HI, STAG_ATTR,
        STAG_STATUS.
    ready : In(1)
        The core is ready (STATUS.READY).
    invalidate : In(stream.Signature(StagWrite))
    rx : Out(stream.Signature(StagWrite))
        To :class:`~rnic.hdl.ddp_rx.DdpRx` ``stag_w``.
    tx : Out(stream.Signature(StagWrite))
        To :class:`~rnic.hdl.ddp_tx.DdpTx` ``stag_w``.

    Latency and throughput
    ----------------------
    ``rx`` from the cycle after the COMMIT pulse; ``tx`` through a half-rate register
    slice (timing: DdpTx's table works out the region's end from the payload, after the
    multiplexer here), one cycle later. One row at a time.
    """

    #: The register fields the component uses.
    REGISTERS = ("stag_cmd", "stag_index", "stag_key", "stag_base_lo", "stag_base_hi", "stag_length",
                 "stag_addr_lo", "stag_addr_hi", "stag_attr", "stag_status")

    def __init__(self, *, stags, connections):
        self.stags = stags
        self.connections = connections
        row = StagWrite(stags=stags, connections=connections)
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "ready": In(1),
            "invalidate": In(stream.Signature(row)),
            "rx": Out(stream.Signature(row)),
            "tx": Out(stream.Signature(row)),
        })

    def elaborate(self, platform):
        m = Module()
        r = self.regs
        sw = self.rx
        tsw = slice_into(m, "dtx_stag_slice", wiring.flipped(self.tx), full_rate=False)
        stag_pend = Signal()
        stag_pend_tx = Signal()
        row = Signal(StagWrite(stags=self.stags, connections=self.connections))
        inv = self.invalidate
        m.d.comb += [sw.payload.eq(row), tsw.payload.eq(Mux(stag_pend_tx, row, inv.payload))]
        with m.If(r.stag_cmd.commit & self.ready & ~stag_pend & ~stag_pend_tx
                  & (r.stag_index.index < self.stags)):
            m.d.sync += [
                stag_pend.eq(1), stag_pend_tx.eq(1), row.index.eq(r.stag_index.index),
                row.stag.eq(r.stag_key.stag), row.base.eq(Cat(r.stag_base_lo.to, r.stag_base_hi.to)),
                row.length.eq(r.stag_length.length),
                row.addr.eq(Cat(r.stag_addr_lo.addr, r.stag_addr_hi.addr)),
                row.valid.eq(r.stag_attr.valid & (r.stag_attr.conn < self.connections)),
                row.remote_read.eq(r.stag_attr.remote_read), row.remote_write.eq(r.stag_attr.remote_write),
                row.remote_inv.eq(r.stag_attr.remote_inv), row.conn.eq(r.stag_attr.conn),
            ]
        with m.Else():
            with m.If(sw.ready):
                m.d.sync += stag_pend.eq(0)
            with m.If(tsw.ready):
                m.d.sync += stag_pend_tx.eq(0)
        m.d.comb += [sw.valid.eq(stag_pend), tsw.valid.eq(stag_pend_tx | inv.valid),
                     inv.ready.eq(~stag_pend_tx & tsw.ready),
                     r.stag_status.busy.eq(stag_pend | stag_pend_tx)]
        return m
