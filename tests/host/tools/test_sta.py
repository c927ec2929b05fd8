"""rnic.host.tools.sta: static timing from an SDF, on a hand-written netlist with known answers.

Two paths end at register ``dst`` (bits 0 and 1): from ``a`` through one LUT and from
``b`` through two; ``c`` -> ``dst2`` is short. The real flow is checked against
nextpnr's own critical path in tests/host/test_build.py.
"""

import pytest

from rnic.host.tools import sta

_SDF = r"""(DELAYFILE
  (SDFVERSION "3.0")
  (DESIGN "top")
  (DIVIDER /)
  (TIMESCALE 1ps)
  (CELL
    (CELLTYPE "top")
    (INSTANCE )
    (DELAY
      (ABSOLUTE
        (INTERCONNECT \$gbuf\$clk/CLKO core.a_TRELLIS_FF_Q/CLK (0:0:0) (0:0:0))
        (INTERCONNECT \$gbuf\$clk/CLKO core.b_TRELLIS_FF_Q/CLK (0:0:0) (0:0:0))
        (INTERCONNECT \$gbuf\$clk/CLKO core.c_TRELLIS_FF_Q/CLK (0:0:0) (0:0:0))
        (INTERCONNECT \$gbuf\$clk/CLKO core.dst_TRELLIS_FF_Q/CLK (0:0:0) (0:0:0))
        (INTERCONNECT \$gbuf\$clk/CLKO core.dst_TRELLIS_FF_Q_1/CLK (0:0:0) (0:0:0))
        (INTERCONNECT \$gbuf\$clk/CLKO core.dst2_TRELLIS_FF_Q/CLK (0:0:0) (0:0:0))
        (INTERCONNECT other_clk/CLKO core.x_TRELLIS_FF_Q/CLK (0:0:0) (0:0:0))
        (INTERCONNECT core.a_TRELLIS_FF_Q/Q lut1/A (1000:1500:2000) (1000:1500:2000))
        (INTERCONNECT lut1/F core.dst_TRELLIS_FF_Q/DI (500:500:500) (500:500:500))
        (INTERCONNECT core.b_TRELLIS_FF_Q/Q lut2/B (3000:3000:3000) (3000:3000:3000))
        (INTERCONNECT lut2/F lut3/C (2000:2000:2000) (2000:2000:2000))
        (INTERCONNECT lut3/F core.dst_TRELLIS_FF_Q_1/DI (1000:1000:1000) (1000:1000:1000))
        (INTERCONNECT lut3/F core.x_TRELLIS_FF_Q/DI (1000:1000:1000) (1000:1000:1000))
        (INTERCONNECT core.c_TRELLIS_FF_Q/Q core.dst2_TRELLIS_FF_Q/DI (100:100:100) (100:100:100))
      )
    )
  )
  (CELL (CELLTYPE "TRELLIS_COMB") (INSTANCE lut1)
    (DELAY (ABSOLUTE
        (IOPATH A F (100:150:200) (100:150:200))
    )))
  (CELL (CELLTYPE "TRELLIS_COMB") (INSTANCE lut2)
    (DELAY (ABSOLUTE
        (IOPATH B F (200:200:200) (200:200:200))
    )))
  (CELL (CELLTYPE "TRELLIS_COMB") (INSTANCE lut3)
    (DELAY (ABSOLUTE
        (IOPATH C F (200:200:200) (200:200:200))
    )))
"""


def _ff(name):
    return f"""  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE {name})
    (DELAY
      (ABSOLUTE
        (IOPATH CLK Q (300:350:400) (300:350:400))
      )
    )
    (TIMINGCHECK
      (SETUPHOLD (posedge DI) (posedge CLK) (100:100:100) (0:0:0))
      (SETUPHOLD (posedge LSR) (posedge CLK) (300:300:300) (0:0:0))
    )
    )
"""


@pytest.fixture
def sdf(tmp_path):
    names = ["core.a_TRELLIS_FF_Q", "core.b_TRELLIS_FF_Q", "core.c_TRELLIS_FF_Q", "core.dst_TRELLIS_FF_Q",
             "core.dst_TRELLIS_FF_Q_1", "core.dst2_TRELLIS_FF_Q", "core.x_TRELLIS_FF_Q"]
    p = tmp_path / "top.sdf"
    p.write_text(_SDF + "".join(_ff(n) for n in names) + ")\n")
    return p


def test_arrival_slack_and_path(sdf):
    endpoints, clock = sta.analyse(sdf, 5.0)
    assert clock == "$gbuf$clk/CLKO"      # the clock with the most registers
    # b: 400 clk-to-q + 3000 + 200 + 2000 + 200 + 1000 = 6800, setup 100 -> slack 5000 - 6900
    worst = endpoints[0]
    assert worst.node == "core.dst_TRELLIS_FF_Q_1/DI" and worst.start == "core.b_TRELLIS_FF_Q/Q"
    assert worst.arrival_ps == 6800 and worst.setup_ps == 100 and worst.slack_ps == -1900
    assert [n for n, _ in worst.path] == ["core.b_TRELLIS_FF_Q/Q", "lut2/B", "lut2/F", "lut3/C", "lut3/F",
                                          "core.dst_TRELLIS_FF_Q_1/DI"]
    # a: 400 + 2000 + 200 + 500 = 3100 (the maximum corner)
    a = next(e for e in endpoints if e.node == "core.dst_TRELLIS_FF_Q/DI")
    assert a.arrival_ps == 3100 and a.slack_ps == 1800
    # x is clocked by the other clock: not an endpoint of this one
    assert all(not e.node.startswith("core.x") for e in endpoints)
    assert len(endpoints) == 3 and [e.slack_ps for e in endpoints] == sorted(e.slack_ps for e in endpoints)


def test_other_clock(sdf):
    endpoints, clock = sta.analyse(sdf, 5.0, clock="other_clk/CLKO")
    # x's launch is not in this clock: nothing arrives at it from a register of its own clock
    assert clock == "other_clk/CLKO" and endpoints == []


def test_groups_by_signal(sdf):
    endpoints, _ = sta.analyse(sdf, 3.0)
    groups = sta.group(endpoints)
    # at 3 ns: b -> dst (6.9 ns) and a -> dst (3.2 ns) fail, c -> dst2 (0.6 ns) does not
    assert [(g.start, g.end, g.endpoints) for g in groups] == [("core.b", "core.dst", 1), ("core.a", "core.dst", 1)]
    assert groups[0].to_json()["slack_ns"] == -3.9 and groups[0].to_json()["delay_ns"] == 6.9
    every = sta.group(endpoints, failing_only=False)
    assert ("core.c", "core.dst2") in {(g.start, g.end) for g in every}
    lines = sta.format_groups(groups, 1, verbose=True)
    assert "core.b -> core.dst" in lines[0] and "-3.90 ns" in lines[0]
    assert any("lut3/F" in line for line in lines) and lines[-1] == "  ... 1 more groups"


def test_signal_names():
    assert sta.signal_name("core.ddp.row_q_TRELLIS_FF_Q_12") == "core.ddp.row_q"
    assert sta.signal_name("core.ctx.0.0$DPRAM_COMB3") == "core.ctx.0.0"
    assert sta.signal_name("plain") == "plain"
