"""Watching nextpnr-ecp5 while it runs: how full the device is, and whether its router still
makes progress.

:class:`PnrWatch` reads nextpnr's log (``top.tim``) as it grows. From the utilisation
nextpnr prints before packing it knows the design's share of the device's LUT4
(:attr:`PnrWatch.lut4`); above :data:`FULL_LUT_PERCENT` a design is too full for the router
to finish reliably on an ECP5 (routes converge at some seeds and stall at others), and
:meth:`PnrWatch.full_warning` says so in one line. From router1's progress table (one row
per 1000 iterations: arcs routed, arcs left in the queue, seconds) it tracks the fewest arcs
left so far; :meth:`PnrWatch.stalled` is true when that minimum has not fallen for
``stall_seconds`` of the router's own time, the sign of a route that will not converge.
(nextpnr's ``router2`` prints no such table: with it there is no stall detection.)
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["PnrWatch", "FULL_LUT_PERCENT", "STALL_SECONDS"]

#: Above this share of the device's LUT4, nextpnr's router does not finish reliably.
FULL_LUT_PERCENT = 60.0
#: Router seconds without a new fewest-arcs-left before a route counts as stalled.
STALL_SECONDS = 20 * 60

_LUT_LINE = re.compile(r"Total LUT4s:\s+(\d+)/\s*(\d+)")
# router1: "   IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) total(sec)|"
_ROUTER_ROW = re.compile(r"^Info:\s+(\d+) \|\s+\d+\s+\d+ \|\s+-?\d+\s+-?\d+ \|\s+(\d+)\|"
                         r"\s+[0-9.]+\s+([0-9.]+)\|")


class PnrWatch:
    """Follows one nextpnr log file (see the module documentation).

    Parameters
    ----------
    path : path-like
        nextpnr's ``--log`` file; it may not exist yet.
    stall_seconds : float
        Router seconds without a new fewest-arcs-left that make :meth:`stalled` true
        (0: never).
    full_percent : float
        LUT4 share above which :attr:`full` is true.
    """

    def __init__(self, path, *, stall_seconds=STALL_SECONDS, full_percent=FULL_LUT_PERCENT):
        if stall_seconds < 0:
            raise ValueError(f"stall_seconds must be >= 0, not {stall_seconds!r}")
        self.path = Path(path)
        self.stall_seconds = stall_seconds
        self.full_percent = full_percent
        self.lut4 = None            #: (used, available) before packing, once printed
        self.arcs_left = None       #: arcs in the router's queue at its last row
        self.fewest_arcs = None     #: the fewest arcs left of any row so far
        self.fewest_at = None       #: router seconds at that row
        self.router_seconds = 0.0   #: router seconds at the last row
        self._offset = 0
        self._partial = ""

    @property
    def lut_percent(self):
        """The design's share of the device's LUT4 (None until nextpnr printed it)."""
        if self.lut4 is None or not self.lut4[1]:
            return None
        return 100.0 * self.lut4[0] / self.lut4[1]

    @property
    def full(self):
        """Whether the design is above :attr:`full_percent` of the device's LUT4."""
        return self.lut_percent is not None and self.lut_percent > self.full_percent

    def poll(self):
        """Read what the log gained since the last call; returns the lines read."""
        try:
            with open(self.path, errors="replace") as f:
                f.seek(self._offset)
                text = f.read()
                self._offset = f.tell()
        except OSError:
            return []
        text = self._partial + text
        lines = text.split("\n")
        self._partial = lines.pop()          # an unfinished last line waits for the rest
        for line in lines:
            self.feed(line)
        return lines

    def feed(self, line):
        """Take one line of the log."""
        if self.lut4 is None:
            mo = _LUT_LINE.search(line)
            if mo:
                self.lut4 = (int(mo.group(1)), int(mo.group(2)))
                return
        mo = _ROUTER_ROW.match(line)
        if mo:
            arcs, seconds = int(mo.group(2)), float(mo.group(3))
            self.arcs_left, self.router_seconds = arcs, seconds
            if self.fewest_arcs is None or arcs < self.fewest_arcs:
                self.fewest_arcs, self.fewest_at = arcs, seconds

    def stalled(self):
        """Whether the router has gone ``stall_seconds`` without a new fewest arcs left."""
        return (self.stall_seconds > 0 and self.fewest_at is not None
                and self.router_seconds - self.fewest_at >= self.stall_seconds)

    def full_warning(self, device):
        """One line for a design above :attr:`full_percent` of ``device``'s LUT4 (else
        None)."""
        if not self.full:
            return None
        used, available = self.lut4
        return (f"the design uses {self.lut_percent:.0f} % of the {device}'s LUT4 "
                f"({used}/{available}); above {self.full_percent:.0f} % nextpnr's router "
                "often does not finish: build for a larger device (--board ecpix5) or try "
                "several placements (--seeds 1-6)")

    def stall_message(self, device):
        """One line for a stalled route."""
        fullness = (f"; the design uses {self.lut_percent:.0f} % of the {device}'s LUT4"
                    if self.lut_percent is not None else "")
        return (f"the router stalled: {self.arcs_left} arcs left after "
                f"{self.router_seconds:.0f} s, and no fewer than {self.fewest_arcs} since "
                f"{self.fewest_at:.0f} s{fullness}. A design this full does not route at "
                "this placement: build for a larger device (--board ecpix5), try several "
                "placements (--seeds 1-6), or wait longer (--stall-minutes)")
