"""The C view: firmware/rnic_regs.h (generated) and the driver library firmware/rnic.c.

Compiled with gcc -std=c99 -Wall -Wextra -Werror -pedantic; the test program
firmware/tests/test_rnic.c runs the library against mock MMIO (a plain array,
and hooks emulating the register bank from the header's RNIC_REGISTERS table).
"""

import shutil
import subprocess

import pytest

from rnic.host.driver import regs
from rnic.host.spec import regmap
from rnic.host.tools import codegen

FW = codegen.REPO_ROOT / "firmware"
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]

gcc = shutil.which("gcc")
pytestmark = pytest.mark.skipif(gcc is None, reason="gcc not found on PATH: the C driver library cannot be compiled")


def _cc(*args, cwd):
    out = subprocess.run([gcc, *CFLAGS, f"-I{FW}", *map(str, args)], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, f"gcc {' '.join(map(str, args))} failed:\n{out.stdout}{out.stderr}"
    return out


def test_header_is_generated_and_fresh():
    text = (FW / "rnic_regs.h").read_text()
    assert "DO NOT EDIT" in text
    assert text == codegen.c_header(), "firmware/rnic_regs.h is stale: run python -m rnic.host.tools.codegen --write"


def test_header_standalone(tmp_path):
    """rnic_regs.h compiles on its own, and its constants are the Python ones (printed by C)."""
    names = list(regs.CONSTANTS)
    src = tmp_path / "consts.c"
    src.write_text('#include <stdio.h>\n#include "rnic_regs.h"\nint main(void) {\n' +
                   "".join(f'    printf("%s %lu\\n", "{n}", (unsigned long)(RNIC_{n}));\n' for n in names) +
                   "    return 0;\n}\n")
    _cc(src, "-o", tmp_path / "consts", cwd=tmp_path)
    out = subprocess.run([tmp_path / "consts"], capture_output=True, text=True, check=True).stdout
    got = dict(line.split() for line in out.splitlines())
    assert {k: int(v) for k, v in got.items()} == regs.CONSTANTS


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_library_compiles(tmp_path, opt):
    _cc(opt, "-c", FW / "rnic.c", "-o", tmp_path / "rnic.o", cwd=tmp_path)


def test_driver_against_mock_mmio(tmp_path):
    exe = tmp_path / "test_rnic"
    _cc("-O1", "-g", FW / "rnic.c", FW / "tests" / "test_rnic.c", "-o", exe, cwd=tmp_path)
    out = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"C tests failed:\n{out.stdout}{out.stderr}"
    assert "ALL OK" in out.stdout
    for group in ("probe and read-modify-write: ok", f"register table: {len(regmap.REGMAP)} registers ok",
                  "connection context programming: ok", "errors, counters, STags, queues: ok"):
        assert group in out.stdout, out.stdout


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found: C++ use of the headers not checked")
def test_headers_usable_from_cpp(tmp_path):
    src = tmp_path / "use.cpp"
    src.write_text('#include "rnic.h"\nint f(rnic_dev_t *d) { return rnic_probe(d); }\n')
    out = subprocess.run(["g++", "-std=c++11", "-Wall", "-Wextra", "-Werror", f"-I{FW}", "-fsyntax-only", str(src)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
