"""The ``rnic`` command line.

Exit status everywhere: 0 ok, 1 failure, 2 usage (bad option, unreadable
input; one line on stderr), 3 a protocol error found in the input
(``rnic decode``).

One module per command group: :mod:`~rnic.host.cli.codec` (decode, encode),
:mod:`~rnic.host.cli.demo`, :mod:`~rnic.host.cli.conn` (listen, connect),
:mod:`~rnic.host.cli.rping`, :mod:`~rnic.host.cli.perftest` (imported when used),
:mod:`~rnic.host.cli.regs` (regs, status, serve), :mod:`~rnic.host.cli.build`,
:mod:`~rnic.host.cli.bench`; what they share is :mod:`~rnic.host.cli.common`. They import
the rest of rnic inside the commands, so that ``rnic --help`` starts fast.
"""

import sys

import click

from rnic.host.cli.bench import bench
from rnic.host.cli.build import build_cmd
from rnic.host.cli.codec import ENGINES, decode, encode
from rnic.host.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_PROTOCOL, EXIT_USAGE
from rnic.host.cli.conn import connect, listen
from rnic.host.cli.demo import demo
from rnic.host.cli.regs import regs, serve, status
from rnic.host.cli.rping import rping

__all__ = ["main", "cli", "ENGINES", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_PROTOCOL"]


class _LazyGroup(click.Group):
    """A group whose ``lazy`` commands are imported only when used (fast CLI start)."""

    lazy = {"perftest": ("rnic.host.cli.perftest", "perftest")}

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
      rnic demo                              # end-to-end run of the protocol model
      rnic encode msgs.jsonl -o stream.bin --markers
      rnic decode stream.bin --markers       # one JSON object per FPDU
      rnic encode msgs.jsonl | rnic decode   # round trip
      rnic listen --port 7000 --once         # accept one MPA connection, serve it
      rnic connect 127.0.0.1:7000 --send 68656c6c6f --read 4 --stag 0x1000
      rnic status --device model             # register view of a device
      rnic status --device uart:/dev/ttyUSB1 # a board running the bitstream, over its UART
      rnic build --board versa_ecp5          # bitstream and fmax/resource report
    rnic rping -c -a 127.0.0.1 -p 7174 -C 3 -v   # rping against a siw (or rnic) server
    rnic perftest write 127.0.0.1 -p 18515   # perftest's ib_write_bw -R as client
    """


for _command in (decode, encode, demo, listen, connect, rping, regs, status, serve, build_cmd,
                 bench):
    cli.add_command(_command)
del _command


def main(argv=None):
    """Console entry point: click with one-line usage errors and fixed exit codes."""
    try:
        rv = cli.main(args=argv, prog_name="rnic", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "rnic"
        click.echo(f"{where}: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"rnic: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    except click.Abort:
        click.echo("rnic: aborted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(EXIT_OK)
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)
