"""GlobalBuffer: a DCCA on an ECP5, a wire elsewhere."""

import types

from amaranth.back import rtlil
from amaranth.sim import Simulator

from rnic.hdl.global_buffer import GlobalBuffer


def netlist(family):
    return rtlil.convert(GlobalBuffer(), platform=types.SimpleNamespace(family=family))


def test_a_dcca_on_an_ecp5():
    text = netlist("ecp5")
    assert "cell \\DCCA \\dcca" in text
    assert "connect \\CLKI \\i" in text and "connect \\CLKO \\o" in text


def test_a_wire_in_simulation_and_on_other_devices():
    for family in ("machxo2", None):
        assert "DCCA" not in netlist(family)
    gb = GlobalBuffer()
    sim = Simulator(gb)

    async def bench(ctx):
        for value in (1, 0, 1):
            ctx.set(gb.i, value)
            assert ctx.get(gb.o) == value

    sim.add_testbench(bench)
    sim.run()
