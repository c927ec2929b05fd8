"""DP_CTRL and CTRL.ENABLE inside the core: see :class:`CoreControl`."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .layouts import DpControl
from .registers import register_signature

__all__ = ["CoreControl"]


class CoreControl(wiring.Component):
    """Registered copies of DP_CTRL's bits and of CTRL.ENABLE for the core's components
    (timing: the bank's flip-flops are far from most of their users).

    Ports
    -----
    regs : In(register_signature(...))
        DP_CTRL, CTRL.ENABLE.
    sweeping : In(1)
        The reset sweep runs.
    dp : Out(DpControl)
        DP_CTRL, and ``use_ddp`` = neither SINK nor BYPASS.
    enable : Out(1)
        CTRL.ENABLE and not ``sweeping``: the data path may take beats.

    Latency: the outputs follow their registers one cycle later.
    """

    #: The register fields the component uses.
    REGISTERS = ("dp_ctrl", "ctrl.enable")

    def __init__(self):
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "sweeping": In(1),
            "dp": Out(DpControl()),
            "enable": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        c, dp = self.regs.dp_ctrl, self.dp
        m.d.sync += [
            dp.loopback.eq(c.loopback), dp.source.eq(c.source), dp.sink.eq(c.sink),
            dp.bypass.eq(c.bypass), dp.host_reads.eq(c.host_reads),
            dp.use_ddp.eq(~c.sink & ~c.bypass),
            self.enable.eq(~self.sweeping & self.regs.ctrl.enable),
        ]
        return m
