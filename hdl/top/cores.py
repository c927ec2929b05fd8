"""The cores a board top can carry besides :class:`~rnic.hdl.rnic_core.RnicCore`: the small
:class:`FramerCore` and each block of the core, or of the TCP engine, alone (:data:`BLOCKS`,
:func:`block_factory`).

A core is given as a factory ``core(width=, connections=)`` that returns the component.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import REGMAP

from ..axi import AXI4LiteSignature
from ..beat import OctetBeat
from ..ddp_rx import DdpRx
from ..ddp_tx import DdpTx
from ..mpa_rx import MpaRxDeframer
from ..mpa_tx import MpaTxBeat, MpaTxFramer
from ..regbank import RegisterBank
from ..tcp import (TcpConnTable, TcpEventEngine, TcpOffload, TcpRxParse, TcpRxPath,
                   TcpTxFrame)

__all__ = ["FramerCore", "BLOCKS", "block_factory", "core_name", "core_ports"]

#: Blocks that ``rnic build --top harness --core <block>`` builds alone: those of the core,
#: then the TCP engine's (its receive parser, connection table, frame builder, event
#: engine, the whole receive path, and the whole engine with its send rings' ports).
BLOCKS = ("ddp_rx", "ddp_tx", "mpa_rx", "mpa_tx", "tcp_rx", "tcp_table", "tcp_tx",
          "tcp_engine", "tcp_rx_path", "tcp_offload")


class FramerCore(wiring.Component):
    """Register bank + MPA TX framer behind RnicCore's ports (TX side only): a small core,
    for builds that test the flow (``rnic build --core framer``).

    Ports: ``s_axil`` (as :class:`~rnic.hdl.regbank.RegisterBank`), ``tx_ulpdu``
    (In, :class:`~rnic.hdl.mpa_tx.MpaTxBeat`), ``tx_wire`` (Out,
    :class:`~rnic.hdl.beat.OctetBeat`). CTX_CMD.COMMIT loads CTX_TX of the
    connection in CONN_SEL into the framer (CTX_STATUS.BUSY until the framer
    took it); CTRL.ENABLE gates ``tx_ulpdu``; TX_FPDUS and TX_OCTETS count;
    SOFT_RESET and CLEAR_COUNTERS zero the counters; STATUS.READY is 1.
    """

    def __init__(self, *, width, connections):
        self.width = width
        self.connections = connections
        self._bank = RegisterBank(width=width, connections=connections)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=REGMAP.addr_width)),
            "tx_ulpdu": In(stream.Signature(MpaTxBeat(width=width, connections=connections))),
            "tx_wire": Out(stream.Signature(OctetBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = bank = self._bank
        m.submodules.framer = framer = MpaTxFramer(width=self.width, connections=self.connections)
        wiring.connect(m, wiring.flipped(self.s_axil), bank.s_axil)
        r = bank.regs

        cfg = framer.cfg
        with m.If(cfg.ready):
            m.d.sync += cfg.valid.eq(0)
        with m.If(r.ctx_cmd.commit):
            m.d.sync += [
                cfg.valid.eq(1),
                cfg.payload.conn.eq(r.conn_sel.conn),
                cfg.payload.markers.eq(r.ctx_tx.markers),
                cfg.payload.crc.eq(r.ctx_tx.crc),
                cfg.payload.phase.eq(r.ctx_tx.phase),
                cfg.payload.mulpdu.eq(r.ctx_tx.mulpdu),
            ]
        enable = r.ctrl.enable
        m.d.comb += [
            framer.i.payload.eq(self.tx_ulpdu.payload),
            framer.i.valid.eq(self.tx_ulpdu.valid & enable),
            self.tx_ulpdu.ready.eq(framer.i.ready & enable),
            self.tx_wire.payload.eq(framer.o.payload),
            self.tx_wire.valid.eq(framer.o.valid),
            framer.o.ready.eq(self.tx_wire.ready),
            r.status.ready.eq(1),
            r.ctx_status.busy.eq(cfg.valid),
        ]
        fpdus = Signal(32)
        octets = Signal(64)
        with m.If(r.ctrl.soft_reset | r.ctrl.clear_counters):
            m.d.sync += [fpdus.eq(0), octets.eq(0)]
        with m.Else():
            with m.If(framer.i.valid & framer.i.ready & framer.i.payload.last):
                m.d.sync += fpdus.eq(fpdus + 1)
            with m.If(framer.o.valid & framer.o.ready):
                m.d.sync += octets.eq(octets + framer.o.payload.n)
        m.d.comb += [
            r.tx_fpdus.count.eq(fpdus),
            r.tx_octets_lo.count.eq(octets[:32]),
            r.tx_octets_hi.count.eq(octets[32:]),
        ]
        return m


def block_factory(name):
    """A factory for one block of :class:`~rnic.hdl.rnic_core.RnicCore` alone (``name`` one of
    :data:`BLOCKS`), with the parameters the core gives it; its ``__name__`` is the block's
    class name."""
    if name not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}, not {name!r}")

    def make(*, width, connections):
        if name == "ddp_rx":
            return DdpRx(width=width, connections=connections, stags=256, slots=4,
                         slot_bytes=2048, rq_depth=8, addr_width=32)
        if name == "ddp_tx":
            return DdpTx(width=width, connections=connections, sq_depth=8, rrq_depth=4,
                         ord_depth=4, stags=256, addr_width=32)
        if name == "mpa_rx":
            return MpaRxDeframer(width=width, connections=connections)
        if name == "tcp_rx":
            return TcpRxParse(width=width)
        if name == "tcp_table":
            return TcpConnTable(connections=connections)
        if name == "tcp_tx":
            return TcpTxFrame(width=width)
        if name == "tcp_engine":
            return TcpEventEngine(connections=connections)
        if name == "tcp_rx_path":
            return TcpRxPath(width=width, connections=connections)
        if name == "tcp_offload":
            return TcpOffload(width=width, connections=connections)
        return MpaTxFramer(width=width, connections=connections)
    make.__name__ = {"ddp_rx": "DdpRx", "ddp_tx": "DdpTx", "mpa_rx": "MpaRxDeframer",
                     "mpa_tx": "MpaTxFramer", "tcp_rx": "TcpRxParse",
                     "tcp_table": "TcpConnTable", "tcp_tx": "TcpTxFrame",
                     "tcp_engine": "TcpEventEngine", "tcp_rx_path": "TcpRxPath",
                     "tcp_offload": "TcpOffload"}[name]
    return make


def core_name(factory):
    """The name of a core factory (a class's name), for reports and messages."""
    return getattr(factory, "__name__", str(factory))


def core_ports(core):
    """``[(path, flow, value)]`` of a component's ports, flattened to signals."""
    return [(path, member.flow, value) for path, member, value in core.signature.flatten(core)]
