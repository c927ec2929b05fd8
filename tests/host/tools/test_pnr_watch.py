"""Watching nextpnr's log (rnic.host.tools.pnr_watch): a too-full device, a stalled router."""

import pytest

from rnic.host.tools.pnr_watch import FULL_LUT_PERCENT, PnrWatch

_UTIL = """Info: Logic utilisation before packing:
Info:     Total LUT4s:     {used}/{avail}    {pct}%
Info:         logic LUTs:  21070/{avail}    25%
"""
_HEADER = """Info: Routing..
Info:            |   (re-)routed arcs  |   delta    | remaining|       time spent     |
Info:    IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) total(sec)|
"""


def _row(iteration, arcs, total):
    return (f"Info: {iteration:9d} | {100:8d} {900:10d} | {100:4d} {-12:5d} | {arcs:9d}| "
            f"{1.5:10.02f} {total:10.02f}|\n")


def test_utilisation_and_full_warning(tmp_path):
    log = tmp_path / "top.tim"
    watch = PnrWatch(log)
    assert watch.poll() == [] and watch.lut4 is None and not watch.full
    log.write_text(_UTIL.format(used=29418, avail=43848, pct=67))
    watch.poll()
    assert watch.lut4 == (29418, 43848) and watch.full
    warning = watch.full_warning("LFE5UM-45F")
    assert warning.startswith("the design uses 67 % of the LFE5UM-45F's LUT4 (29418/43848); "
                              f"above {FULL_LUT_PERCENT:.0f} %")
    assert "--board ecpix5" in warning
    roomy = PnrWatch(log, full_percent=70)
    roomy.poll()
    assert not roomy.full and roomy.full_warning("LFE5UM-45F") is None


def test_a_converging_route_is_not_stalled(tmp_path):
    log = tmp_path / "top.tim"
    watch = PnrWatch(log, stall_seconds=600)
    log.write_text(_UTIL.format(used=30000, avail=83640, pct=35) + _HEADER)
    watch.poll()
    assert not watch.full
    with open(log, "a") as f:
        for i, (arcs, t) in enumerate([(50000, 10), (20000, 300), (20500, 800), (9000, 1000)]):
            f.write(_row(1000 * (i + 1), arcs, t))
    watch.poll()
    assert (watch.arcs_left, watch.fewest_arcs, watch.fewest_at) == (9000, 9000, 1000.0)
    assert not watch.stalled()


def test_a_stalled_route(tmp_path):
    """Arcs left stop falling: stalled once the router has gone stall_seconds past its
    fewest; a half-written row waits for its end."""
    log = tmp_path / "top.tim"
    watch = PnrWatch(log, stall_seconds=600)
    text = _UTIL.format(used=29418, avail=43848, pct=67) + _HEADER
    text += _row(1000, 30000, 100) + _row(2000, 26107, 400) + _row(3000, 31975, 900)
    last = _row(4000, 28000, 1001)
    log.write_text(text + last[:20])
    watch.poll()
    assert watch.fewest_arcs == 26107 and not watch.stalled()
    with open(log, "a") as f:
        f.write(last[20:])
    watch.poll()
    assert watch.router_seconds == 1001.0 and watch.stalled()
    message = watch.stall_message("LFE5UM-45F")
    assert message.startswith("the router stalled: 28000 arcs left after 1001 s, and no fewer "
                              "than 26107 since 400 s; the design uses 67 %")
    never = PnrWatch(log, stall_seconds=0)
    never.poll()
    assert not never.stalled()


def test_parameters_checked(tmp_path):
    with pytest.raises(ValueError, match="stall_seconds must be >= 0, not -1"):
        PnrWatch(tmp_path / "x", stall_seconds=-1)
