"""Suite-wide pytest options: ``--wide`` runs the W = 16 and 32 gateware regressions."""

import pytest


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
