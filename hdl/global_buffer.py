"""A high-fanout signal on the device's clock network (see :class:`GlobalBuffer`)."""

from amaranth.hdl import Const, Instance, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["GlobalBuffer", "on_global_network"]


class GlobalBuffer(wiring.Component):
    """``o`` follows ``i``; on an ECP5 through a clock buffer (DCCA), so that nextpnr routes
    ``o`` on one of the device's global networks instead of the general routing.

    For a domain's reset, or a register's clock enable, that goes to hundreds or thousands of
    slices: routed in the general routing, such a net takes a share of the wires of every
    tile its loads cover, wires their logic needs. nextpnr puts a DCCA's output on a global
    network, which reaches any slice input (it promotes only clocks by itself). An ECP5 has
    8 global networks that reach slice inputs other than clocks; the design's clocks take
    some of them.

    Ports
    -----
    i : In(1)
    o : Out(1)

    Latency: none (a wire in simulation and on other platforms; on an ECP5 the clock
    network's delay, which nextpnr times).
    """

    i: In(1)
    o: Out(1)

    def elaborate(self, platform):
        m = Module()
        if getattr(platform, "family", None) == "ecp5":
            m.submodules.dcca = Instance("DCCA", i_CLKI=self.i, i_CE=Const(1), o_CLKO=self.o)
        else:
            m.d.comb += self.o.eq(self.i)
        return m


def on_global_network(m, signal, *, name):
    """``signal`` through a :class:`GlobalBuffer`, submodule ``name`` of ``m``: its output."""
    m.submodules[name] = buffer = GlobalBuffer()
    m.d.comb += buffer.i.eq(signal)
    return buffer.o
