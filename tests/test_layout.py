"""The project's layout promises: one import namespace, layers that only point down, a
distribution that carries every package, caches outside the source tree and site-packages.
"""

import ast
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: import name -> folder, as pyproject.toml maps them
PACKAGE_DIR = PYPROJECT["tool"]["setuptools"]["package-dir"]
FOLDERS = {folder: name for name, folder in PACKAGE_DIR.items()}


def _source_files():
    for folder in FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _imports(path):
    """``(lineno, module)`` of every absolute import in ``path`` (relative ones excluded)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.lineno, node.module


def test_layer_contracts_hold():
    """``lint-imports`` (import-linter, contracts in pyproject.toml): every import points down
    the layers, the gateware imports only the spec layer, and no import cycle exists."""
    out = subprocess.run([sys.executable, "-c",
                          "import sys; from importlinter.cli import lint_imports; "
                          "sys.exit(lint_imports(no_cache=True, no_logo=True))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "3 kept, 0 broken" in out.stdout


def test_every_package_folder_is_in_the_distribution():
    """A folder with an ``__init__.py`` that pyproject.toml does not list would be silently
    missing from the wheel (setuptools only ships the packages it is told about)."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    on_disk = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            on_disk.add(".".join([name, *rel.parts]))
    assert on_disk == listed, f"missing from pyproject.toml: {sorted(on_disk - listed)}; " \
                              f"listed but not on disk: {sorted(listed - on_disk)}"


def test_sources_use_the_one_namespace():
    """Nothing imports the folders by their own names (``import host`` works only by accident,
    from a checkout's root, and never after ``pip install``)."""
    bad = []
    for path in list(_source_files()) + sorted((ROOT / "tests").rglob("*.py")):
        for lineno, module in _imports(path):
            if module.split(".")[0] in FOLDERS:
                bad.append(f"{path.relative_to(ROOT)}:{lineno}: {module}")
    assert not bad, "imports outside the rnic namespace:\n" + "\n".join(bad)


def test_spec_layer_is_stdlib_only():
    """The lowest layer (imported by the gateware too) needs nothing but the standard library."""
    bad = []
    for path in sorted((ROOT / "host" / "spec").rglob("*.py")):
        for lineno, module in _imports(path):
            top = module.split(".")[0]
            if top not in sys.stdlib_module_names and not module.startswith("rnic.host.spec"):
                bad.append(f"{path.relative_to(ROOT)}:{lineno}: {module}")
    assert not bad, "non-stdlib imports in rnic.host.spec:\n" + "\n".join(bad)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built from a copy of the sources (setuptools builds in the tree it is given)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(src)], check=True, capture_output=True, timeout=600)
    (whl,) = out.glob("*.whl")
    return whl


def _wheel_path(path):
    """Where a source file lands in the wheel: ``hdl/beat.py`` -> ``rnic/hdl/beat.py``."""
    rel = path.relative_to(ROOT)
    return "/".join([*FOLDERS[rel.parts[0]].split("."), *rel.parts[1:]])


def test_wheel_carries_every_file_under_one_name(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"rnic"}
    want = {_wheel_path(p) for p in _source_files()}
    want |= {f"rnic/sim/{p.name}" for p in (ROOT / "sim").glob("*.cpp")}
    missing = want - set(names)
    assert not missing, f"not in the wheel: {sorted(missing)}"
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "rnic = rnic.host.cli:main" in entry_points
    assert "sim = rnic.sim.device:DEVICE_KIND" in entry_points


def test_installed_wheel_has_one_import_name(wheel, tmp_path):
    """Installed from the wheel (without the checkout on the path), ``rnic`` imports and the
    folder names do not."""
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True, capture_output=True, timeout=600)
    assert {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")} <= {"bin", "rnic"}
    probe = ("import importlib, sys\n"
             "sys.path = [p for p in sys.path if p not in ('', '.')]\n"
             "import rnic.host.spec.regmap\n"
             "assert rnic.host.spec.regmap.__file__.startswith(sys.argv[1]), rnic.host.__file__\n"
             "for name in ('host', 'hdl', 'sim'):\n"
             "    try:\n"
             "        importlib.import_module(name)\n"
             "    except ModuleNotFoundError:\n"
             "        continue\n"
             "    raise SystemExit(f'import {name} works')\n")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", probe, str(site)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_simulation_cache_is_outside_the_tree(monkeypatch, tmp_path):
    """The Verilator build cache is in the user cache directory (or $RNIC_SIM_BUILD), never
    inside the installed package or the source tree."""
    from rnic.sim import runner
    monkeypatch.delenv("RNIC_SIM_BUILD", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = runner.build_root()
    assert root == tmp_path / "cache" / "open-iwarp-rnic" / "sim"
    import rnic.sim
    assert Path(rnic.sim.__file__).resolve().parent not in root.parents
    assert ROOT not in root.parents
    monkeypatch.setenv("RNIC_SIM_BUILD", str(tmp_path / "elsewhere"))
    assert runner.build_root() == tmp_path / "elsewhere"


def test_build_products_go_to_the_working_directory(monkeypatch, tmp_path):
    from rnic.host.tools.build import BuildConfig
    monkeypatch.chdir(tmp_path)
    cfg = BuildConfig(board="versa_ecp5", width=8, connections=16)
    assert cfg.directory().parent == tmp_path / "build"


def test_no_function_is_longer_than_300_lines():
    """Small components: no function or method of the project (tests included) reaches 300
    lines; a longer one is a block that wants splitting into named stages."""
    long = []
    for path in list(_source_files()) + sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines >= 300:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "\n".join(long)


def test_editable_install_runs_the_checkout():
    """``pip install -e .`` (the README's developer install) maps ``rnic.*`` onto the folders
    of this checkout, so that an edit takes effect without reinstalling."""
    import rnic.hdl
    import rnic.host
    here = Path(rnic.host.__file__).resolve().parent
    if ROOT not in here.parents:
        pytest.skip(f"rnic is installed from {here}, not editable from this checkout")
    assert here == ROOT / "host"
    assert Path(rnic.hdl.__file__).resolve().parent == ROOT / "hdl"


def test_every_source_path_the_docs_name_exists():
    """README.md and docs/*.md name files and folders of the tree (``hdl/ddp_rx/``,
    ``tests/host/tools/test_bench.py``); a move that forgets them leaves readers nowhere."""
    import re
    pattern = re.compile(r"(?<![\w./-])((?:hdl|host|sim|tests|constraints|firmware)/[\w./-]*\w/?)")
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for path in pattern.findall(line):
                if not (ROOT / path).exists():
                    missing.append(f"{doc.name}:{n}: {path}")
    assert not missing, "\n".join(missing)
