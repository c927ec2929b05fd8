"""Board constraints that amaranth-boards lacks (LPF files beside this module; see README.md).

A package so that the files are installed with the project (``pip install .``) and found
by :func:`path` wherever it is installed.
"""

from pathlib import Path

__all__ = ["path"]


def path(name):
    """The constraint file ``name`` (e.g. ``"versa_ecp5.lpf"``); raises FileNotFoundError."""
    p = Path(__file__).resolve().parent / name
    if not p.is_file():
        raise FileNotFoundError(f"constraint file {name!r} is not installed ({p})")
    return p
