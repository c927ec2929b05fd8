"""The build commands the docs print and their figures (rnic.host.tools.build_docs,
``rnic build --documented``)."""

import json
import subprocess

import pytest

from rnic.host.cli.build import build_cmd
from rnic.host.tools import build_docs
from rnic.host.tools.build_docs import (BEGIN, END, DocumentedCommand, builds_bitstream,
                                        documented_commands, figures_markdown, read_figures,
                                        run_documented, write_figures)

README = """# x

Install, then:

```sh
rnic build --board ecpix5 --top nic   # the NIC
rnic demo
$ rnic build --top harness --place-only
```

Outside a code block, rnic build --board nowhere is prose.

~~~
rnic build --board ecpix5 --top nic
rnic build --sweep
~~~
"""

BUILD_MD = f"""# Builds

```
rnic build --board versa_ecp5 --top ethernet --seed 3
```

{BEGIN}
old table
{END}

The rest.
"""


def _report(board="ecpix5", met=True):
    return {"board": board, "device": "LFE5UM5G-85F", "speed": "8", "top": "nic", "width": 4,
            "seed": 1, "timing_met": met, "bitstream": "/x/top.bit",
            "clocks": [{"domain": "sync", "fmax_mhz": 122.3, "constraint_mhz": 100.0},
                       {"domain": "eth_rx", "fmax_mhz": 183.3, "constraint_mhz": 125.0}],
            "resources": {"lut4": {"used": 30836, "available": 83640, "percent": 36.9},
                          "ff": {"used": 26000}, "bram": {"used": 58}},
            "seconds": {"pnr": 930.0}}


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(README)
    (tmp_path / "docs" / "build.md").write_text(BUILD_MD)
    return tmp_path


def test_commands_found_in_code_blocks(tree):
    """Only fenced lines, a prompt and a trailing comment dropped, each command once, in the
    order of the README then the docs."""
    found = documented_commands(tree)
    assert [(c.file, c.line, c.text) for c in found] == [
        ("README.md", 6, "rnic build --board ecpix5 --top nic"),
        ("README.md", 8, "rnic build --top harness --place-only"),
        ("README.md", 15, "rnic build --sweep"),
        ("docs/build.md", 4, "rnic build --board versa_ecp5 --top ethernet --seed 3"),
    ]
    assert [builds_bitstream(c) for c in found] == [True, False, False, True]


def test_run_and_table(tree, monkeypatch):
    """Each bitstream command runs as written plus --json --out; the rows carry its figures,
    a miss or a failure is a row that did not meet; the table goes between the markers and
    reads back."""
    runs = []

    def fake_run(argv, capture_output, text):
        runs.append(argv)
        args = argv[argv.index("build") + 1:]
        if "versa_ecp5" in args:
            return subprocess.CompletedProcess(argv, 2, "", "rnic build: error: no route\n")
        return subprocess.CompletedProcess(argv, 0, json.dumps(_report()), "")

    monkeypatch.setattr(build_docs.subprocess, "run", fake_run)
    commands = documented_commands(tree)
    rows = run_documented(commands, out_root=tree / "out", jobs=1)
    assert [r["command"] for r in rows] == [
        "rnic build --board ecpix5 --top nic",
        "rnic build --board versa_ecp5 --top ethernet --seed 3"]
    first = runs[0][runs[0].index("build") + 1:]
    assert first[:4] == ["--board", "ecpix5", "--top", "nic"] and first[4:6] == ["--json", "--out"]
    assert rows[0]["met"] and rows[0]["pnr_minutes"] == 15.5 and rows[0]["lut4"] == 30836
    assert not rows[1]["met"] and rows[1]["error"] == "rnic build: error: no route"
    table = figures_markdown(rows)
    assert "sync 122.3 / 100 (1.22)<br>eth_rx 183.3 / 125 (1.47)" in table
    assert "| failed: rnic build: error: no route |" in table
    page = tree / "docs" / "build.md"
    write_figures(rows, page)
    text = page.read_text()
    assert "old table" not in text and text.endswith(f"{END}\n\nThe rest.\n")
    assert read_figures(page) == rows
    (tree / "docs" / "other.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="has no figures markers"):
        write_figures(rows, tree / "docs" / "other.md")
    assert read_figures(tree / "docs" / "other.md") == []


def test_the_documented_builds_are_valid_commands():
    """Every build command the README and the docs print is a valid ``rnic build`` command
    line that does not excuse a timing miss, and the two the NIC's users need are among them
    as written (a bare ``rnic build``: the whole NIC on the ECPIX-5 85F)."""
    commands = documented_commands()
    texts = {c.text for c in commands}
    assert "rnic build" in texts
    assert "rnic build --board ecpix5 --width 8 --top core" in texts
    for command in commands:
        build_cmd.make_context("build", list(command.args))      # raises on a bad option
        assert "--allow-timing-fail" not in command.args, command


def test_the_figures_table_is_of_the_documented_builds():
    """The figures in docs/build.md are one row per documented bitstream command, made by
    ``rnic build --documented --update-docs``, and each met timing as written; the whole NIC
    on the ECPIX-5 (a bare ``rnic build``) meets every clock with 10 % to spare after at most
    45 minutes of place and route (two thirds of the device's LUT4 and three quarters of its
    block RAM)."""
    page = build_docs.docs_root() / build_docs.FIGURES_PAGE
    rows = read_figures(page)
    expected = [c.text for c in documented_commands() if builds_bitstream(c)]
    assert [r["command"] for r in rows] == expected
    for row in rows:
        assert row["met"], row
        assert all(c["fmax_mhz"] >= c["constraint_mhz"] for c in row["clocks"]), row
    nic = next(r for r in rows if r["command"] == "rnic build")
    assert {c["domain"] for c in nic["clocks"]} == {"sync", "eth_rx", "eth_tx"}
    assert all(c["fmax_mhz"] >= 1.10 * c["constraint_mhz"] for c in nic["clocks"]), nic
    assert nic["pnr_minutes"] <= 45, nic


def test_command_text():
    assert DocumentedCommand("README.md", 1, ("--top", "nic")).text == "rnic build --top nic"
