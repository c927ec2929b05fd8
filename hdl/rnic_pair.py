# amaranth: UnusedElaboratable=no
"""Two RNIC cores back to back, for tests: :class:`RnicPair`."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import REGMAP

from .axi import AXI4LiteSignature, AXI4ReadSignature, AXI4WriteSignature
from .rnic_core import RnicCore

__all__ = ["RnicPair", "PAIR_NODES"]

PAIR_NODES = ("a", "b")


class RnicPair(wiring.Component):
    """Two :class:`~rnic.hdl.rnic_core.RnicCore` instances ``a`` and ``b`` whose TCP payload
    ports are wired to each other (``a.tx_wire`` -> ``b.rx_wire`` and back: every run of
    whole FPDUs one core sends is one TCP segment for the other).

    Parameters are those of :class:`~rnic.hdl.rnic_core.RnicCore` (keyword-only, checked by it),
    the same for both cores.

    Ports, per node X (``a``, ``b``): ``X_s_axil`` (its register bus), ``X_m_axi`` (AXI4
    write master) and ``X_m_axi_rd`` (AXI4 read master) of its host memory, ``X_irq``.
    The cores' ``tx_ulpdu`` ports are idle and their ``rx_ulpdu`` ports always ready
    (clear DP_CTRL.BYPASS to use the DDP/RDMAP receive path).
    """

    def __init__(self, **params):
        self.params = params
        probe = RnicCore(**params)           # checks the parameters (never elaborated)
        aw, W = probe.addr_width, probe.width
        sig = {}
        for x in PAIR_NODES:
            sig.update({
                f"{x}_s_axil": In(AXI4LiteSignature(addr_width=REGMAP.addr_width)),
                f"{x}_m_axi": Out(AXI4WriteSignature(addr_width=aw, data_width=8 * W)),
                f"{x}_m_axi_rd": Out(AXI4ReadSignature(addr_width=aw, data_width=8 * W)),
                f"{x}_irq": Out(1),
            })
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        cores = {}
        for x in PAIR_NODES:
            cores[x] = core = RnicCore(**self.params)
            m.submodules[x] = core
            wiring.connect(m, wiring.flipped(getattr(self, f"{x}_s_axil")), core.s_axil)
            wiring.connect(m, core.m_axi, wiring.flipped(getattr(self, f"{x}_m_axi")))
            wiring.connect(m, core.m_axi_rd, wiring.flipped(getattr(self, f"{x}_m_axi_rd")))
            m.d.comb += [getattr(self, f"{x}_irq").eq(core.irq), core.tx_ulpdu.valid.eq(0),
                         core.rx_ulpdu.ready.eq(1)]
        wiring.connect(m, cores["a"].tx_wire, cores["b"].rx_wire)
        wiring.connect(m, cores["b"].tx_wire, cores["a"].rx_wire)
        return m
