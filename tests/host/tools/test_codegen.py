"""The generated views of the register map (rnic.host.tools.codegen): C header and Markdown."""

import subprocess
import sys


from rnic.host.spec.regmap import REGMAP
from rnic.host.tools import codegen


# -- generated files ---------------------------------------------------------------

def test_generated_files_are_fresh():
    """The committed C header and Markdown reference are what the map generates now."""
    stale = codegen.stale_files()
    assert not stale, f"stale generated files {stale}: run python -m rnic.host.tools.codegen --write"


def test_generator_cli(tmp_path):
    out = subprocess.run([sys.executable, "-m", "rnic.host.tools.codegen", "--check"], cwd=codegen.REPO_ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # --write into a scratch tree, then --check detects an edit
    changed = codegen.write_generated(tmp_path)
    assert sorted(changed) == sorted(codegen.generated_files())
    assert codegen.write_generated(tmp_path) == []
    assert codegen.stale_files(tmp_path) == []
    (tmp_path / "firmware/rnic_regs.h").write_text("/* edited */\n")
    assert codegen.stale_files(tmp_path) == ["firmware/rnic_regs.h"]
    c = subprocess.run([sys.executable, "-m", "rnic.host.tools.codegen", "--print", "c"], cwd=codegen.REPO_ROOT,
                       capture_output=True, text=True, check=True).stdout
    assert c == codegen.c_header()


def test_c_header_content():
    h = codegen.c_header()
    assert "DO NOT EDIT" in h.splitlines()[1]
    assert "#ifndef RNIC_REGS_H" in h and "#define RNIC_REGS_H" in h and h.rstrip().endswith("#endif /* RNIC_REGS_H */")
    assert "#define RNIC_ID_ADDR 0x00000000u" in h
    assert "#define RNIC_ID_RESET 0x69575250u" in h
    assert "#define RNIC_CTX_TX_PHASE_SHIFT 4u" in h
    assert "#define RNIC_CTX_TX_PHASE_MASK 0x00001ff0u" in h
    assert "#define RNIC_CTX_STATE_STATE_RTS 1u" in h
    assert "#define RNIC_ERR_INFO_LAYER_LLP 2u" in h
    assert "#define RNIC_CTRL_RW_MASK 0x00000001u" in h
    for r in REGMAP:
        assert f"#define RNIC_{r.name}_ADDR 0x{r.addr:08x}u" in h
        assert f"    X({r.name}, 0x{r.addr:08x}u," in h


def test_markdown_content():
    md = codegen.markdown()
    assert md.startswith("# RNIC registers")
    for r in REGMAP:
        assert f"| `{r.addr:#05x}` | [{r.name}](#{r.name.lower()}) |" in md
        assert f"### {r.name}\n" in md
        for f in r.fields:
            assert f"| {f.bits} | {f.name} |" in md
    assert "build parameter `width`" in md
    assert "2 `LLP`" in md
