"""cocotb side of tests/hdl/test_mpa_tx.py: MpaTxFramer on Verilator against rnic.host.model.fpdu.

Params (``$RNIC_PARAMS``): ``width``, ``connections``. Traffic generation and the
scoreboard (``make_traffic``, ``model``, ``input_beats``, ``check_output``) come from
test_mpa_tx.py, so both simulators check exactly the same rules.
"""

import cocotb

from rnic.hdl.beat import OctetBeat
from rnic.hdl.mpa_config import MpaConfig
from rnic.hdl.mpa_tx import MpaTxBeat
from rnic.sim.streams import TB, assert_drained
from test_mpa_tx import check_output, input_beats, make_traffic, model


class FramerTB(TB):
    def __init__(self, dut, *, idle_prob=0.0, backpressure_prob=0.0):
        super().__init__(dut)
        self.W = self.params["width"]
        self.connections = self.params["connections"]
        self.cfg = self.source("cfg", MpaConfig(connections=self.connections))
        self.src = self.source("i", MpaTxBeat(width=self.W, connections=self.connections),
                               idle_prob=idle_prob)
        self.beats = []
        self.cycles_seen = []
        self.snk = self.sink("o", OctetBeat(width=self.W, connections=self.connections),
                             backpressure_prob=backpressure_prob, callback=self._got)

    def _got(self, beat):
        self.beats.append(beat)
        self.cycles_seen.append(self.cycle())

    async def configure(self, configs):
        for conn, cfg in configs.items():
            self.cfg.append({"conn": conn, "markers": int(cfg["markers"]), "crc": int(cfg["crc"]),
                             "phase": cfg["phase"], "mulpdu": self.rng.getrandbits(16)})
        await self.cfg.wait_idle()

    async def run_traffic(self, configs, seq, *, timeout_cycles=2_000_000):
        """Send ``seq`` and wait for all expected octets; return the output beats."""
        self.beats.clear()
        self.cycles_seen.clear()
        await self.configure(configs)
        exp, _, _ = model(configs, seq)
        total = sum(len(v) for v in exp.values())
        for conn, ulpdu in seq:
            self.src.extend(input_beats(self.W, conn, ulpdu))
        start = self.cycle()
        while sum(b["n"] for b in self.beats) < total:
            await self.cycles(64)
            assert self.cycle() - start < timeout_cycles, "timeout waiting for the output"
        await self.cycles(64)                # anything extra shows up in check_output
        assert_drained(self.src)
        return list(self.beats)


@cocotb.test()
async def random_connections(dut):
    """16 connections interleaved, random markers/CRC/phases, idles and back-pressure."""
    tb = FramerTB(dut, idle_prob=0.2, backpressure_prob=0.3)
    await tb.reset()
    conns = list(range(tb.connections))
    configs, seq = make_traffic(tb.rng, conns=conns, count=120, same_run_prob=0.5)
    beats = await tb.run_traffic(configs, seq)
    cov = check_output(tb.W, beats, configs, seq)
    tb.log.info("W=%d: %d beats, %d runs (%d with several FPDUs), coverage %s",
                tb.W, len(beats), cov["runs"], cov["multi_fpdu_runs"], cov)


@cocotb.test()
async def reconfigure_and_small(dut):
    """Small ULPDUs with markers; then every connection is reconfigured (new phase, context
    reset) and a second batch must match a fresh model."""
    tb = FramerTB(dut, idle_prob=0.1, backpressure_prob=0.4)
    await tb.reset()
    conns = [1, 4, 9, tb.connections - 1]
    for round_ in range(2):
        configs, seq = make_traffic(tb.rng, conns=conns, count=80, max_len=64, small_prob=0.7,
                                    markers=True, crc=bool(round_), same_run_prob=0.7)
        beats = await tb.run_traffic(configs, seq)
        check_output(tb.W, beats, configs, seq)


@cocotb.test()
async def longest_ulpdus(dut):
    """ULPDU_Length 64768 (the MULPDU limit) with markers, 65535 without, back to back."""
    tb = FramerTB(dut, idle_prob=0.05, backpressure_prob=0.1)
    await tb.reset()
    seq = [(0, tb.rng.randbytes(64768)), (0, tb.rng.randbytes(5)), (1, tb.rng.randbytes(65535)),
           (0, tb.rng.randbytes(64768))]
    configs = {0: dict(markers=True, crc=True, phase=136),
               1: dict(markers=False, crc=True, phase=0)}
    beats = await tb.run_traffic(configs, seq)
    check_output(tb.W, beats, configs, seq)


@cocotb.test()
async def throughput(dut):
    """One connection, markers and CRC on, lengths 1..1400, no idles, no back-pressure:
    wire octets / (cycles * W) from the first output beat to the last."""
    tb = FramerTB(dut)
    await tb.reset()
    seq = [(2, tb.rng.randbytes(tb.rng.randint(1, 1400))) for _ in range(150)]
    configs = {2: dict(markers=True, crc=True, phase=4 * tb.rng.randrange(128))}
    beats = await tb.run_traffic(configs, seq)
    check_output(tb.W, beats, configs, seq)
    cycles = tb.cycles_seen[-1] - tb.cycles_seen[0] + 1
    octets = sum(b["n"] for b in beats)
    eff = octets / (cycles * tb.W)
    tb.log.info("W=%d: %d octets in %d cycles: efficiency %.4f", tb.W, octets, cycles, eff)
    # W = 32 is bounded by the input (one beat per cycle, each ULPDU's last beat partial)
    assert eff >= (0.985 if tb.W >= 32 else 0.99), eff
