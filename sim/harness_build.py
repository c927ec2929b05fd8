"""The C++ harnesses as compiled, and the index that finds a simulated device's executable.

Harness text (:func:`harness_text`). A harness (``sim/fast_harness.cpp``,
``sim/device_harness.cpp``, ``sim/nic_harness.cpp``) is a template: a line holding only a
marker ``//@NAME@`` is replaced by the code a build generates for it, indented like the
marker, and ``//@COMMON@`` by :data:`HARNESS_COMMON` (``sim/harness_common.h``: the port
access every harness uses, and behind ``HARNESS_INTERACTIVE`` what the interactive ones
share). Pasting instead of ``#include`` keeps each harness one translation unit whose whole
text is in its build directory and in :class:`rnic.sim.fast.FastSim`'s build hash.

The index (:func:`cached_executable`). A :class:`rnic.sim.fast.FastSim` build is found by a
hash of its Verilog and C++, so finding it means converting the design to Verilog first,
which for the RNIC core takes longer than starting the simulation. The simulated devices
(:mod:`rnic.sim.device`, :mod:`rnic.sim.nic_device`) skip the conversion: an index file
``<build root>/index/<name>-<key>`` holds the path of the finished executable, where the key
(:func:`source_key`) hashes what the build depends on:

* the source files: the design's modules (:func:`module_sources`: the top's module and the
  ``rnic.hdl``/``rnic.host`` modules it imports, transitively), the device's module and
  harness, :data:`HARNESS_COMMON`, ``sim/fast.py`` and this module;
* the build parameters;
* the Amaranth and Verilator versions, and the build class's Verilator arguments and make
  variables.

The executable itself is FastSim's (``<build root>/fast-<name>-<hash>/obj/Vfast``); an entry
whose executable is gone counts as missing. Builders of the same ``name`` take the lock
``<build root>/index/<name>.lock`` (``fcntl``) and look again once they hold it, so
concurrent processes (pytest-xdist workers, two commands) build once and the others start
from the entry; the FastSim build takes its own lock on its directory as well.
``RNIC_SIM_REBUILD=1`` ignores the index (and FastSim's stamp): it builds again and points
the entry at the result. The build root is :func:`rnic.sim.runner.build_root` unless a caller
names one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from pathlib import Path

from rnic.sim.runner import _locked, _safe, _truthy, build_root, report_phase

__all__ = ["HARNESS_COMMON", "harness_text", "interactive_decls", "module_sources",
           "source_key", "cached_executable", "index_path"]

#: What the C++ harnesses share, pasted at their line ``//@COMMON@``.
HARNESS_COMMON = Path(__file__).resolve().parent / "harness_common.h"

_MARKER = re.compile(r"(\s*)//@(\w+)@\s*")


def harness_text(path, markers=None):
    """The C++ harness at ``path`` as compiled: every line that holds only a marker
    ``//@NAME@`` replaced by the lines of the code strings ``markers[NAME]`` (indented like
    the marker; an empty list removes the line), ``//@COMMON@`` by :data:`HARNESS_COMMON`.
    KeyError for a marker that ``markers`` does not name."""
    repl = {"COMMON": [HARNESS_COMMON.read_text()], **(markers or {})}
    lines = []
    for line in Path(path).read_text().splitlines():
        m = _MARKER.fullmatch(line)
        if m is None:
            lines.append(line)
            continue
        for code in repl[m.group(2)]:
            lines.extend(m.group(1) + c for c in code.splitlines())
    return "\n".join(lines) + "\n"


def interactive_decls():
    """The build constants (``//@DECLS@`` lines) that the interactive part of
    :data:`HARNESS_COMMON` needs: where STATUS.READY is, for its reset sequence."""
    from rnic.host.spec.regmap import REGMAP
    status = REGMAP["STATUS"]
    return [f"#define STATUS_ADDR {status.addr:#x}u",
            f"#define STATUS_READY_MASK {status.field('READY').mask:#x}u"]


# ---------------------------------------------------------------------------
# the sources a build depends on

#: An import statement (at any indentation); parsing the files instead would double the
#: start-up time of a cached device.
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]+(?:\(([^)]*)\)|([\w ,\t]+))"
                     r"|import[ \t]+([.\w]+))", re.M)


def _imported_modules(name, prefixes):
    """Names of the modules starting with one of ``prefixes`` that module ``name`` imports,
    resolved by the import system without running them."""
    spec = importlib.util.find_spec(name)
    package = name if spec.submodule_search_locations else name.rpartition(".")[0]
    out = []
    for m in _IMPORT.finditer(Path(spec.origin).read_text()):
        base, names = m.group(1) or m.group(4), m.group(2) or m.group(3)
        if base.startswith("."):
            base = importlib.util.resolve_name(base, package)
        if not base.startswith(prefixes):
            continue
        out.append(base)
        if names and importlib.util.find_spec(base).submodule_search_locations is not None:
            for item in names.split(","):           # ``from package import module``
                sub = f"{base}.{item.split(' as ')[0].strip()}"
                if sub != f"{base}." and importlib.util.find_spec(sub) is not None:
                    out.append(sub)
    return out


def module_sources(root):
    """``{module name: file}`` of ``root`` and the ``rnic.hdl`` / ``rnic.host`` modules it
    imports, transitively: what a Verilog build of ``root``'s design depends on."""
    todo, seen = [root], {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen[name] = Path(importlib.util.find_spec(name).origin)
        todo += [m for m in _imported_modules(name, ("rnic.hdl", "rnic.host")) if m not in seen]
    return dict(sorted(seen.items()))


def source_key(params, files, build):
    """Hash of the ``files`` (``{name: path}``) with :data:`HARNESS_COMMON`, ``sim/fast.py``
    and this module, the ``params``, the Amaranth and Verilator versions and the Verilator
    arguments and make variables of ``build`` (a :class:`rnic.sim.fast.FastSim` class): the
    index key of a finished executable."""
    from importlib.metadata import version
    here = Path(__file__).resolve().parent
    own = {"harness_common": HARNESS_COMMON, "harness_build": here / "harness_build.py",
           "fast": here / "fast.py"}
    h = hashlib.sha256()
    for name, f in {**files, **own}.items():
        h.update(name.encode() + b"\0" + Path(f).read_bytes() + b"\0")
    h.update(repr(sorted(params.items())).encode())
    h.update(f"amaranth {version('amaranth')} verilator {version('verilator')}".encode())
    h.update(" ".join(build.verilator_args + build.make_vars).encode())
    return h.hexdigest()[:20]


# ---------------------------------------------------------------------------
# the index

def index_path(root, name, key):
    """The index entry of build ``name`` with key ``key`` under the build root ``root``."""
    return Path(root) / "index" / f"{_safe(name)}-{key}"


def _indexed(index):
    """The executable ``index`` points at, None if there is no entry or no such file."""
    try:
        exe = Path(index.read_text().strip())
    except FileNotFoundError:
        return None
    return exe if exe.is_file() else None


def cached_executable(build, *, name, params, sources, build_dir=None):
    """Path of the executable of ``build(**params, build_dir=root)`` (a
    :class:`rnic.sim.fast.FastSim` subclass; ``root``: ``build_dir`` or
    :func:`rnic.sim.runner.build_root`), from the index when an entry for ``name`` and the
    key of ``params`` and ``sources`` (``{name: path}``, see :func:`source_key`) is there,
    else built (or waited for, when another process builds it) and entered. ``name`` is what
    progress reports call it."""
    root = Path(build_dir).resolve() if build_dir is not None else build_root()
    index = index_path(root, name, source_key(params, sources, build))
    rebuild = _truthy(os.environ.get("RNIC_SIM_REBUILD"))
    exe = None if rebuild else _indexed(index)
    if exe is not None:
        return exe
    with _locked(index.parent / f"{_safe(name)}.lock"):
        exe = None if rebuild else _indexed(index)
        if exe is not None:
            return exe
        # (importing the design's Amaranth code is part of the conversion's wait)
        report_phase("converting to Verilog", name)
        exe = build(**params, build_dir=root).exe
        tmp = index.with_name(f".{index.name}.{os.getpid()}")
        tmp.write_text(f"{exe}\n")
        os.replace(tmp, index)
        return exe
