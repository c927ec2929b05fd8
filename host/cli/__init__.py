"""The ``rnic`` command line.

Exit status everywhere: 0 ok, 1 failure, 2 usage (bad option, unreadable or
undecodable input; one line on stderr), 3 a protocol error found in the input
(``rnic decode``). A closed standard output (``rnic decode big.bin | head -1``)
ends the command quietly with 0: its reader had what it wanted (ripgrep does the same);
an interrupt (Ctrl-C) ends with 130. An error nobody foresaw is one
line and status 1 (``RNIC_TRACEBACK=1`` shows the traceback).

One module per command group: :mod:`~rnic.host.cli.codec` (decode, encode),
:mod:`~rnic.host.cli.demo`, :mod:`~rnic.host.cli.conn` (listen, connect),
:mod:`~rnic.host.cli.rping`, :mod:`~rnic.host.cli.perftest` (imported when used),
:mod:`~rnic.host.cli.regs` (regs, status, serve), :mod:`~rnic.host.cli.nic_sim`,
:mod:`~rnic.host.cli.build`,
:mod:`~rnic.host.cli.bench`; what they share is :mod:`~rnic.host.cli.common`. They import
the rest of rnic inside the commands, so that ``rnic --help`` starts fast.
"""

import os
import sys

import click

from rnic.host.cli.bench import bench
from rnic.host.cli.build import build_cmd
from rnic.host.cli.codec import ENGINES, decode, encode
from rnic.host.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_PIPE, EXIT_PROTOCOL, EXIT_USAGE
from rnic.host.cli.conn import connect, listen
from rnic.host.cli.demo import demo
from rnic.host.cli.nic_sim import nic_sim
from rnic.host.cli.regs import regs, serve, status
from rnic.host.cli.rping import rping

__all__ = ["main", "cli", "ENGINES", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_PROTOCOL",
           "EXIT_PIPE"]


class _PipeClosed(Exception):
    """A BrokenPipeError on its way to :func:`main` (click would turn it into status 1)."""


class _LazyGroup(click.Group):
    """A group whose ``lazy`` commands are imported only when used (fast CLI start)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _PipeClosed(exc) from exc

    lazy = {"perftest": ("rnic.host.cli.perftest", "perftest"), "tcp": ("rnic.host.cli.tcp", "tcp")}

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is None and name in self.lazy:
            import importlib
            module, attr = self.lazy[name]
            try:
                cmd = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                return None
            self.add_command(cmd, name)
        return cmd


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="open-iwarp-rnic", prog_name="rnic")
def cli():
    """Open iWARP RNIC: reference model, gateware simulation and host tools.

    \b
    Examples:
      rnic demo                              # end-to-end run over TCP, B on the simulated core
      rnic encode msgs.jsonl -o stream.bin --markers   # (rnic encode --help: the line format)
      rnic decode stream.bin --markers       # one JSON object per FPDU
      rnic encode msgs.jsonl | rnic decode   # round trip
      rnic listen --port 7000 --once         # accept one MPA connection, serve it
      rnic connect 127.0.0.1:7000 --send 68656c6c6f --read 4 --stag 0x1000
      rnic status --device model             # a fresh in-process model, from reset
      rnic serve --port 7100 &               # registers that live on between commands:
      rnic regs write SCRATCH 0x5a --device tcp:127.0.0.1:7100
      rnic status --device uart:/dev/ttyUSB1 # a board running the bitstream, over its UART
      rnic nic-sim --wire 17702:17701 --echo 7   # the simulated NIC on a virtual cable (siw VM)
      rnic tcp status --device tcp:127.0.0.1:7200  # its TCP connections and counters
      rnic build --board versa_ecp5          # bitstream and fmax/resource report
      rnic rping -c -a 127.0.0.1 -p 7174 -C 3 -v   # rping against a siw (or rnic) server
      rnic perftest write 127.0.0.1 -p 18515 # perftest's ib_write_bw -R as client

    Exit status: 0 ok, 1 failure, 2 usage (one line on stderr), 3 a protocol
    error in the input (rnic decode); 0, quietly, when the reader of the
    standard output went away (e.g. head).
    """


for _command in (decode, encode, demo, listen, connect, rping, regs, status, serve, build_cmd,
                 bench, nic_sim):
    cli.add_command(_command)
del _command


def main(argv=None):
    """Console entry point: click with one-line errors and the fixed exit statuses."""
    pipe_closed = False
    try:
        rv = cli.main(args=argv, prog_name="rnic", standalone_mode=False)
    except click.exceptions.Exit as exc:
        rv = exc.exit_code
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "rnic"
        rv = _error(f"{where}: error: {exc.format_message()}", EXIT_USAGE)
    except click.ClickException as exc:
        rv = _error(f"rnic: error: {exc.format_message()}", EXIT_USAGE)
    except click.Abort:
        rv = _error("rnic: aborted", 130)
    except _PipeClosed as exc:          # stdout's reader went away (| head), or a socket's
        pipe_closed = _closed(sys.stdout)
        rv = EXIT_PIPE if pipe_closed else _unforeseen(exc.__cause__)
    except Exception as exc:            # noqa: BLE001 - one line, not a traceback, for a user
        rv = _unforeseen(exc)
    try:
        sys.stdout.flush()              # what is still buffered, while errors can be handled
    except BrokenPipeError:
        pipe_closed, rv = True, EXIT_PIPE
    except (AttributeError, ValueError, OSError):
        pass
    if pipe_closed:
        _silence()
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)


def _error(text, status):
    """Print one error line on stderr (unless stderr is gone too); returns ``status``."""
    try:
        click.echo(text, err=True)
    except OSError:
        pass
    return status


def _unforeseen(exc):
    """An exception no command turned into a message: one line, status 1."""
    if os.environ.get("RNIC_TRACEBACK"):
        import traceback
        traceback.print_exception(exc)
    text = str(exc) or type(exc).__name__
    return _error(f"rnic: error: {text} ({type(exc).__name__}; RNIC_TRACEBACK=1 shows where)",
                  EXIT_FAILURE)


def _closed(stream):
    """Whether ``stream`` is a pipe (or socket) whose reader has gone away."""
    import select
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (AttributeError, ValueError, OSError):
        return False


def _silence():
    """Point stdout (and stderr, if its reader went too) at /dev/null: a closed pipe ends
    the command quietly, as it does ``cat``, and the flush at exit cannot fail again
    ("Exception ignored ... BrokenPipeError")."""
    null = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        if stream is sys.stdout or _closed(stream):
            try:
                os.dup2(null, stream.fileno())
            except (AttributeError, ValueError, OSError):
                pass
    os.close(null)
