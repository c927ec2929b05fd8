"""What ``rnic`` shows on stderr while a simulation builds or starts.

The simulator layer names the phases of a build (:func:`rnic.sim.runner.build_progress`:
converting to Verilog, verilating, compiling C++, starting, ready); :class:`BuildView`
renders them. On a terminal: one live line (spinner, design, phase, elapsed time; rich),
removed when the design is ready, and one line saying how long a build that compiled took.
Elsewhere (a log, a pipe): one plain line per phase, once a build compiles (the phases
before it are held back until then), so that a cached start adds nothing to a log (nor to
what a test compares). Nothing ever goes to stdout.
"""

import contextlib
import re
import sys
import threading
import time

import click

__all__ = ["BuildView", "sim_build_progress", "PLAIN_LINE"]

#: A plain progress line as written off a terminal, for tools that filter a log:
#: ``rnic bench ddp: [    1.2 s] bench_ddp_w8: verilating``.
PLAIN_LINE = re.compile(r"^rnic(?: [a-z][\w-]*)*: \[ *\d+\.\d s\] \S.*$")

#: Phases that mean "this build compiles" (a cached build never reports them).
COMPILING = frozenset({"verilating", "compiling C++"})


class BuildView:
    """Renders build phases (the callback :meth:`phase`) on ``stream`` (default stderr).

    Parameters
    ----------
    label : str
        What each line starts with (the command path, e.g. ``rnic demo``).
    stream : file
        Where to write (default ``sys.stderr``).
    live : bool or None
        A live rich line (True) or plain lines (False); None: live when ``stream`` is a
        terminal.
    """

    def __init__(self, label="rnic", stream=None, *, live=None):
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.live = _isatty(self.stream) if live is None else live
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._compiling = set()       # designs whose build compiles (not cached)
        self._since = {}              # design -> when its first phase began
        self._pending = []            # plain lines held until some build compiles
        self._loud = False            # a build compiled: plain lines show every phase since
        self._progress = self._task = None
        self._broken = False

    # -- the callback of rnic.sim.runner.build_progress
    def phase(self, phase, what):
        """Show that the build (or start) of ``what`` entered ``phase``."""
        with self._lock:
            if self._broken:
                return
            try:
                self._phase(phase, what)
            except OSError:           # stderr went away: the build goes on without a view
                self._broken = True

    def _phase(self, phase, what):
        now = time.monotonic()
        self._since.setdefault(what, now)
        if phase in COMPILING:
            self._compiling.add(what)
            self._loud = True
        if phase == "ready":
            since = self._since.pop(what)
            if self.live:
                self._stop_live()
                if what in self._compiling:
                    self._line(f"{what}: built in {now - since:.1f} s")
            elif self._loud:
                self._line(self._stamped(now, f"{what}: ready"))
            self._compiling.discard(what)
            self._pending.clear()
            return
        if self.live:
            self._show_live(f"{self.label}: {what}: {phase}")
            return
        self._pending.append(self._stamped(now, f"{what}: {phase}"))
        if self._loud:                # a build compiles: the log shows what happens
            for line in self._pending:
                self._line(line)
            self._pending.clear()

    def say(self, text):
        """One progress line of the command's own (above the live line, if one is shown)."""
        with self._lock:
            if self._broken:
                return
            try:
                self._line(self._stamped(time.monotonic(), text))
            except OSError:
                self._broken = True

    def close(self):
        """Remove the live line, if one is shown."""
        with self._lock:
            with contextlib.suppress(OSError):
                self._stop_live()

    # -- output
    def _stamped(self, now, text):
        return f"[{now - self._t0:7.1f} s] {text}"

    def _line(self, text):
        text = f"{self.label}: {text}"
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _show_live(self, description):
        if self._progress is None:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
            console = Console(file=self.stream, force_terminal=True, highlight=False)
            self._progress = Progress(SpinnerColumn(),
                                      TextColumn("{task.description}", markup=False),
                                      TimeElapsedColumn(), console=console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task(description, total=None)
        else:
            self._progress.update(self._task, description=description, refresh=True)

    def _stop_live(self):
        progress, self._progress = self._progress, None
        if progress is not None:
            progress.stop()


def _isatty(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def sim_build_progress():
    """Show the simulator's build phases on stderr while the block runs; yields the
    :class:`BuildView` (its ``say`` prints the command's own progress lines)."""
    from rnic.sim.runner import build_progress
    ctx = click.get_current_context(silent=True)
    view = BuildView(ctx.command_path if ctx is not None else "rnic")
    try:
        with build_progress(view.phase):
            yield view
    finally:
        view.close()
