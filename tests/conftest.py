"""Suite-wide pytest options: ``--wide`` runs the W = 16 and 32 gateware regressions."""

import pytest

from rnic.host.cli.progress import PLAIN_LINE


def pytest_addoption(parser):
    parser.addoption("--wide", action="store_true", default=False,
                     help="also run gateware regressions at W = 16 and 32")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--wide"):
        return
    skip = pytest.mark.skip(reason="W = 16/32 regression: run with --wide")
    for item in items:
        if "wide" in item.keywords:
            item.add_marker(skip)


#: A line of build progress as ``rnic`` writes it on a non-terminal stderr.
PROGRESS_LINE = PLAIN_LINE


@pytest.fixture
def progress_only():
    """A check that a command's stderr is quiet but for build-progress lines: a command that
    happens to build a simulation (a fresh cache) reports one line per phase, and that is all
    it may say."""
    def check(err):
        text = err.decode() if isinstance(err, bytes) else err
        other = [line for line in text.splitlines() if not PROGRESS_LINE.match(line)]
        assert not other, f"stderr has more than build progress: {other}"
    return check


@pytest.fixture
def rnic_in_process():
    """``run(*args)``: ``rnic ARGS`` in this process (click's isolated streams), returning
    (exit status, stdout text, stderr text)."""
    from tests.host.cli.in_process import run_rnic

    def run(*args):
        code, out, err = run_rnic(*args)
        return code, out.decode(), err.decode()
    return run
