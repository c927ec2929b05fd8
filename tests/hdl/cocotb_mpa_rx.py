"""cocotb testbench of MpaRxDeframer (run by test_mpa_rx.py through rnic.sim.runner on Verilator).

Scenarios and the scoreboard come from test_mpa_rx.py (rnic.host.model.fpdu is the golden model).
Params: width, connections.
"""

import cocotb

from rnic.hdl.beat import OctetBeat
from rnic.hdl.mpa_config import MpaConfig
from rnic.hdl.mpa_rx import MpaRxBeat
from rnic.sim.streams import TB

import test_mpa_rx as T


class RxTB(TB):
    def __init__(self, dut, *, idle=0.0, backpressure=0.0):
        super().__init__(dut)
        self.width = W = self.params["width"]
        conns = self.params["connections"]
        self.src = self.source("i", OctetBeat(width=W, connections=conns), idle_prob=idle)
        self.cfg = self.source("cfg", MpaConfig(connections=conns), idle_prob=idle)
        self.sb = None
        self.snk = self.sink("o", MpaRxBeat(width=W, connections=conns),
                             backpressure_prob=backpressure, callback=self._beat)

    def _beat(self, beat):
        self.sb.beat(beat)

    async def run(self, sc, *, timeout_cycles=None):
        """Send ``sc``; return (input beats, cycles from first to last input beat)."""
        self.sb = T.Scoreboard(self.width, sc.expect)
        await self.reset()
        start = None
        for kind, val in sc.items:
            if kind == "cfg":
                await self.src.wait_idle()      # keep cfg ordered after earlier data
                await self.cfg.send(val)
            else:
                if start is None:
                    start = self.cycle()
                self.src.append(val)
        await self.src.wait_idle()
        span = self.cycle() - start
        limit = timeout_cycles or (20 * sc.beats + 5000)
        waited = 0
        while self.sb.pending() and waited < limit:
            await self.cycles(50)
            waited += 50
        await self.cycles(50)
        self.sb.check_done()
        return sc.beats, span


def _seed(tb):
    return tb.rng.randrange(1 << 30)


@cocotb.test()
async def random_traffic_with_errors(dut):
    tb = RxTB(dut, idle=0.2, backpressure=0.3)
    W = tb.width
    sc = T.make_scenario(_seed(tb), W, n_conns=8, fpdus_per_conn=10, corrupt_prob=0.5)
    beats, span = await tb.run(sc)
    tb.log.info(f"W={W}: {beats} beats, {tb.sb.units} units, {span} cycles")


@cocotb.test()
async def small_fpdus(dut):
    """Only small FPDUs (several per beat at W >= 16), short segments."""
    tb = RxTB(dut, idle=0.1, backpressure=0.2)
    W = tb.width
    rng = tb.rng
    sc = T.Scenario(W)
    segs = {}
    for c in rng.sample(range(16), 5):
        sizes = [rng.randint(14, 40) for _ in range(40)]
        corrupt = rng.choice(["", "", "crc", "marker", "long", "short"])
        cs = T.random_conn_stream(rng, c, n_fpdus=0, sizes=sizes, corrupt=corrupt,
                                  markers=True if corrupt == "marker" else None,
                                  crc=True if corrupt == "crc" else None)
        sc.add_cfg(cs)
        segs[c] = T.cut_segments(rng, cs.stream, W)
    T.interleave(rng, sc, segs)
    beats, span = await tb.run(sc)
    tb.log.info(f"W={W}: {beats} beats, {tb.sb.units} units")


@cocotb.test()
async def split_every_position(dut):
    tb = RxTB(dut, idle=0.05, backpressure=0.1)
    sc = T.split_scenario(_seed(tb), tb.width)
    await tb.run(sc)


@cocotb.test()
async def efficiency(dut):
    """Long traffic (ULPDUs of 14..1400 octets, average ~700; TCP segments of 500..9000
    octets), markers and CRC on, no idle, no back-pressure; counted from the first
    input beat (the cfg writes before it excluded) until all input beats are accepted."""
    tb = RxTB(dut)
    W = tb.width
    sc = T.make_scenario(_seed(tb), W, n_conns=3, fpdus_per_conn=30, big_segments=True,
                         markers=True, crc=True, dist="uniform")
    beats, span = await tb.run(sc)
    eff = beats / span
    tb.log.info(f"W={W}: {beats} input beats in {span} cycles: {eff:.4f} beats/cycle, "
                f"{sc.octets / (span * W):.4f} of W octets/cycle")
    assert eff >= 0.99, eff


@cocotb.test()
async def reset_midstream(dut):
    """Connections reconfigured in the middle of FPDUs (abort beats), then reused."""
    tb = RxTB(dut, idle=0.1, backpressure=0.3)
    sc = T.reset_scenario(_seed(tb), tb.width, rounds=10, n_conns=5)
    await tb.run(sc)
