"""cocotb side of tests/sim/test_runner.py: a FIFO of OctetBeats must pass every beat in order."""

import os
import time

import cocotb
from cocotb.simtime import get_sim_time

from rnic.hdl.beat import OctetBeat
from rnic.sim.streams import TB, assert_drained, beats_to_units, bytes_to_beats


class FifoTB(TB):
    def __init__(self, dut, *, idle_prob, backpressure_prob):
        super().__init__(dut)
        self.layout = OctetBeat(width=self.params["width"], connections=self.params["connections"])
        self.src = self.source("i", self.layout, idle_prob=idle_prob)
        self.snk = self.sink("o", self.layout, backpressure_prob=backpressure_prob)


async def _run_units(dut, count, idle_prob, backpressure_prob):
    tb = FifoTB(dut, idle_prob=idle_prob, backpressure_prob=backpressure_prob)
    await tb.reset()
    W = tb.params["width"]
    units = []
    for _ in range(count):
        conn = tb.rng.randrange(tb.params["connections"])
        data = tb.rng.randbytes(tb.rng.randint(1, 6 * W))
        units.append((conn, data))
        tb.src.extend(bytes_to_beats(data, W, conn=conn))
    expected_beats = tb.src.queued
    t0, c0 = time.perf_counter(), tb.cycle()
    await tb.src.wait_idle()
    while tb.snk.received < expected_beats:
        await tb.cycles(1)
    cycles, wall = tb.cycle() - c0, time.perf_counter() - t0
    got = beats_to_units(list(tb.snk.items))
    tb.snk.items.clear()
    assert got == units, "units differ"
    assert_drained(tb.src, tb.snk)
    tb.log.info("%d beats in %d cycles, %.0f cycles/s (idle %.2f, backpressure %.2f, stalls %d)",
                expected_beats, cycles, cycles / wall, idle_prob, backpressure_prob, tb.snk.stall_cycles)
    return expected_beats, cycles


@cocotb.test()
async def random_traffic(dut):
    """Random units with idle cycles and back-pressure arrive complete and in order."""
    await _run_units(dut, 200, 0.3, 0.3)


@cocotb.test()
async def full_rate(dut):
    """No idles, no back-pressure: the FIFO moves one beat per cycle."""
    beats, cycles = await _run_units(dut, 100, 0.0, 0.0)
    assert cycles <= beats + 4, f"{beats} beats took {cycles} cycles"


@cocotb.test()
async def sees_params(dut):
    tb = TB(dut)
    assert tb.params["width"] * 8 + 4 + 2 + 2 >= len(dut.i__payload) > tb.params["width"] * 8
    assert tb.params["marker"] == "smoke"


@cocotb.test()
async def fails_on_request(dut):
    """Fails when the pytest side asks (checks that failures are reported)."""
    TB(dut)
    if os.environ.get("SMOKE_FAIL"):
        assert 1 + 1 == 3, "deliberate failure"


@cocotb.test()
async def internals_visible(dut):
    """With internals=True the FIFO's own signals are reachable (run only for that build)."""
    TB(dut)
    assert int(dut.fifo.level.value) == 0
