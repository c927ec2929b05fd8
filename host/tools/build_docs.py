"""The build commands the README and the docs print, run as written, and the table of their
figures in docs/build.md.

Every ``rnic build`` line of a fenced code block in ``README.md`` and ``docs/*.md`` is a
promise that the command, typed as it is, builds a bitstream that meets timing.
:func:`documented_commands` finds them; :func:`run_documented` runs those that make a
bitstream (not ``--place-only``, ``--sweep`` or ``--help``), each as ``rnic build ...
--json --out DIR``, and gives one row of figures per command: fmax against the constraint
of every clock, LUT4/FF/DP16KD, place-and-route minutes. :func:`figures_markdown` makes the
table and :func:`write_figures` puts it into docs/build.md between :data:`BEGIN` and
:data:`END` (``rnic build --documented --update-docs``). The test suite checks that the
table has exactly one row per documented command and that every row met its clocks.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["DocumentedCommand", "documented_commands", "builds_bitstream", "run_documented",
           "figures_markdown", "write_figures", "read_figures", "docs_root", "BEGIN", "END",
           "FIGURES_PAGE"]

#: The page that holds the figures table, relative to the docs root.
FIGURES_PAGE = "docs/build.md"
BEGIN = "<!-- figures: made by `rnic build --documented --update-docs`; do not edit -->"
END = "<!-- end of figures -->"
_FENCE = re.compile(r"^\s*(```|~~~)")
#: Options after which a command makes no bitstream.
_NO_BITSTREAM = {"--place-only", "--sweep", "--help", "-h", "--documented"}


@dataclasses.dataclass(frozen=True)
class DocumentedCommand:
    """One ``rnic build`` line of the docs: where it is and its arguments after ``rnic build``."""
    file: str
    line: int
    args: tuple

    @property
    def text(self):
        return " ".join(("rnic", "build") + self.args)


def docs_root():
    """The folder with README.md and docs/: the source tree of an editable install, else the
    working directory."""
    tree = Path(__file__).resolve().parents[2]
    if (tree / "README.md").is_file() and (tree / "docs").is_dir():
        return tree
    return Path.cwd()


def _doc_files(root):
    root = Path(root)
    files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    return [f for f in files if f.is_file()]


def documented_commands(root=None):
    """Every ``rnic build`` command in the fenced code blocks of ``root``'s README.md and
    docs/*.md, in order (a ``# comment`` after it is not part of it; a command given twice
    is listed once)."""
    root = Path(root) if root is not None else docs_root()
    found, seen = [], set()
    for path in _doc_files(root):
        fenced = False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _FENCE.match(line):
                fenced = not fenced
                continue
            text = line.strip().removeprefix("$ ")
            if not fenced or not text.startswith("rnic build"):
                continue
            words = shlex.split(text, comments=True)
            if words[:2] != ["rnic", "build"]:
                continue
            args = tuple(words[2:])
            if args in seen:
                continue
            seen.add(args)
            found.append(DocumentedCommand(str(path.relative_to(root)), number, args))
    return found


def builds_bitstream(command):
    """Whether ``command`` makes a bitstream (and so must meet timing as written)."""
    return not any(a.split("=")[0] in _NO_BITSTREAM for a in command.args)


def _slug(command):
    return re.sub(r"[^A-Za-z0-9]+", "-", " ".join(command.args)).strip("-") or "default"


def _run_one(command, out_root):
    out = Path(out_root) / _slug(command)
    argv = [sys.executable, "-m", "rnic.host.cli", "build", *command.args, "--json",
            "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = None
    error = None
    if proc.returncode != 0:
        error = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    return _row(command, report, error)


def _row(command, report, error):
    row = {"command": command.text, "file": command.file, "met": False, "error": error}
    if report is None:
        return row
    res = report.get("resources", {})
    row.update({
        "board": report["board"], "device": f"{report['device']}-{report['speed']}",
        "top": report["top"], "width": report["width"], "seed": report["seed"],
        "clocks": [{"domain": c["domain"], "fmax_mhz": c["fmax_mhz"],
                    "constraint_mhz": c["constraint_mhz"]} for c in report["clocks"]],
        "lut4": res.get("lut4", {}).get("used"), "lut4_percent": res.get("lut4", {}).get("percent"),
        "ff": res.get("ff", {}).get("used"), "bram": res.get("bram", {}).get("used"),
        "pnr_minutes": round(report["seconds"]["pnr"] / 60, 1),
        "met": bool(report["timing_met"]) and error is None and report.get("bitstream") is not None,
    })
    return row


def run_documented(commands, *, out_root, jobs=2, progress=None):
    """Run each of ``commands`` that builds a bitstream (``rnic build ARGS --json --out
    OUT_ROOT/<args>``), ``jobs`` at a time; returns one row per command, in order."""
    say = progress or (lambda text: None)
    todo = [c for c in commands if builds_bitstream(c)]

    def one(command):
        say(f"building: {command.text}")
        row = _run_one(command, out_root)
        say(f"{'met' if row['met'] else 'NOT MET'}: {command.text}")
        return row

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, todo))


def _clock_cell(clock):
    fmax, con = clock["fmax_mhz"], clock["constraint_mhz"]
    if fmax is None or not con:
        return f"{clock['domain']} -"
    return f"{clock['domain']} {fmax:.1f} / {con:g} ({fmax / con:.2f})"


def figures_markdown(rows):
    """The figures table (Markdown) of :func:`run_documented`'s rows."""
    lines = ["| command | device | clocks: fmax / constraint MHz (ratio) | LUT4 (%) | FF | "
             "DP16KD | place and route | met |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "board" not in r:
            lines.append(f"| `{r['command']}` | | failed: {r['error']} | | | | | no |")
            continue
        clocks = "<br>".join(_clock_cell(c) for c in r["clocks"])
        lines.append(f"| `{r['command']}` | {r['device']} | {clocks} | {r['lut4']} "
                     f"({r['lut4_percent']:.1f} %) | {r['ff']} | {r['bram']} | "
                     f"{r['pnr_minutes']:.1f} min | {'yes' if r['met'] else 'no'} |")
    return "\n".join(lines) + "\n"


def write_figures(rows, page):
    """Put the table of ``rows`` into ``page`` between :data:`BEGIN` and :data:`END`, with
    the rows as JSON in a comment (what :func:`read_figures` and the tests read)."""
    page = Path(page)
    text = page.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{page} has no figures markers ({BEGIN!r} ... {END!r})")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    data = json.dumps(rows, separators=(",", ":"))
    page.write_text(f"{head}{BEGIN}\n{figures_markdown(rows)}\n<!-- rows: {data} -->\n"
                    f"{END}{tail}")


def read_figures(page):
    """The rows :func:`write_figures` put into ``page`` (an empty list when there are none)."""
    text = Path(page).read_text()
    if BEGIN not in text or END not in text:
        return []
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    mo = re.search(r"<!-- rows: (.*?) -->", block, re.S)
    return json.loads(mo.group(1)) if mo else []
