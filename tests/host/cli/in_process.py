"""``rnic ARGS`` run in the test's own process, so that a Verilated engine or simulation
built by one run is loaded once for a whole test module."""

import sys

from click.testing import CliRunner

from rnic.host.cli import main


def run_rnic(*args, stdin=b""):
    """Run ``rnic ARGS`` with ``stdin`` in click's isolated streams: (exit status, stdout
    bytes, stderr bytes)."""
    code = 0
    with CliRunner().isolation(input=stdin) as streams:
        out, err = streams[0], streams[1]
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue(), err.getvalue()
