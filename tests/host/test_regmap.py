"""The register map (host.regmap): validity, its checks, the generated files, and host.regs."""

import dataclasses
import subprocess
import sys

import pytest

from host import regmap as rm
from host import regs
from host.regmap import PULSE, REGMAP, RO, RW, W1C, Block, Field, Register, RegisterMap, RegMapError


# -- the map itself -------------------------------------------------------------

def test_map_is_valid_and_sane():
    assert REGMAP.validate() is REGMAP
    assert REGMAP["ID"].addr == 0 and REGMAP["ID"].reset == rm.MAGIC == 0x69575250
    assert rm.MAGIC.to_bytes(4, "big") == b"iWRP"
    addrs = [r.addr for r in REGMAP]
    assert len(set(addrs)) == len(addrs) and all(a % 4 == 0 and a < REGMAP.size for a in addrs)
    for r in REGMAP:
        used = 0
        for f in r.fields:
            assert used & f.mask == 0, (r.name, f.name)
            used |= f.mask
            assert 0 <= f.reset <= f.max
        assert r.reset == sum(f.reset << f.offset for f in r.fields)
        assert REGMAP.at(r.addr + 3) is r
    assert REGMAP.at(0xFFC) is None
    assert set(REGMAP.params_used()) == {"width", "connections", "stags"}


def test_map_has_what_the_rnic_needs():
    """The windows of the brief, with the fields the gateware blocks use."""
    names = {r.name for r in REGMAP}
    for need in ("ID", "VERSION", "CAPS", "CTRL", "STATUS", "CONN_SEL", "CTX_TX", "CTX_RX",
                 "CTX_IRD_ORD", "CTX_STATE", "CTX_CMD", "CTX_STATUS", "CTX_ERROR", "ERR_STATUS",
                 "ERR_CONN", "ERR_INFO", "ERR_COUNT", "RX_FPDUS", "TX_FPDUS", "RX_CRC_ERRORS",
                 "RX_MARKER_ERRORS", "RX_OCTETS_LO", "RX_OCTETS_HI", "TX_OCTETS_LO", "TX_OCTETS_HI",
                 "STAG_INDEX", "STAG_KEY", "STAG_BASE_LO", "STAG_BASE_HI", "STAG_LENGTH", "STAG_ATTR",
                 "STAG_CMD", "RQ_CONN", "RQ_ADDR_LO", "RQ_ADDR_HI", "RQ_LENGTH", "RQ_ID", "RQ_CMD",
                 "SQ_WR", "SQ_LADDR_LO", "SQ_LADDR_HI", "SQ_LENGTH", "SQ_RSTAG", "SQ_RTO_LO", "SQ_RTO_HI",
                 "SQ_INV_STAG", "SQ_ID", "SQ_CMD", "CQ_STATUS", "CQ_WR_ID", "CQ_INFO", "CQ_LENGTH", "CQ_CMD"):
        assert need in names, need
    assert REGMAP["CTX_CMD"].field("COMMIT").access is PULSE
    assert REGMAP["STAG_CMD"].field("COMMIT").access is PULSE
    assert REGMAP["RQ_CMD"].field("POST").access is PULSE
    assert REGMAP["SQ_CMD"].field("DOORBELL").access is PULSE
    assert REGMAP["CQ_CMD"].field("POP").access is PULSE
    assert REGMAP["ERR_STATUS"].field("PENDING").access is W1C
    assert REGMAP["CTRL"].field("SOFT_RESET").access is PULSE
    assert REGMAP["CTRL"].field("ENABLE").access is RW
    # the context window carries every MpaConfig field of the MPA blocks
    from hdl.mpa_config import MpaConfig
    cfg = dict(MpaConfig(connections=16))
    for direction in ("CTX_TX", "CTX_RX"):
        for name, fld in cfg.items():
            if name == "conn":
                assert REGMAP["CONN_SEL"].field("CONN").width >= fld.width
            else:
                assert REGMAP[direction].field(name).width == fld.width, (direction, name)
    # the Terminate layout: Layer(4) EType(4) ErrorCode(8) from bit 31 down
    for name in ("ERR_INFO", "CTX_ERROR"):
        r = REGMAP[name]
        assert (r.field("LAYER").offset, r.field("ETYPE").offset, r.field("ECODE").offset) == (28, 24, 16)
    # build parameters: the widths of hdl.beat, and the RDMAP opcodes of the model
    from hdl.beat import WIDTHS
    assert tuple(rm.PARAMS["width"]) == WIDTHS
    from host import rdmap
    for op in rm.SqOpcode:
        assert rdmap.opcode_name(int(op)) != "unknown"


def _one(*fields, addr=0x10, access=RW, name="R"):
    return RegisterMap([Block("b", "", (Register(name, addr, access, "", tuple(fields)),))])


@pytest.mark.parametrize("build, match", [
    (lambda: RegisterMap([Block("b", "", (Register("A", 0x10), Register("B", 0x10)))]), "overlaps A"),
    (lambda: RegisterMap([Block("b", "", (Register("A", 0x10), Register("A", 0x14)))]), "used twice"),
    (lambda: _one(addr=0x12), "not 4-aligned"),
    (lambda: _one(addr=0x1000), "outside"),
    (lambda: _one(name="lower"), "C identifier"),
    (lambda: _one(Field("A", 0, 8), Field("B", 4, 8)), "overlaps R.A"),
    (lambda: _one(Field("A", 30, 4)), "does not fit a 32-bit"),
    (lambda: _one(Field("A", 0, 2, reset=4)), "reset 0x4 does not fit"),
    (lambda: _one(Field("A", 0, 1, access=PULSE, reset=1)), "pulse field resets to 0"),
    (lambda: _one(Field("A", 0, 8, const=True)), "only RO fields"),
    (lambda: _one(Field("A", 0, 8, param="width"), access=RO, name="P"), None),
    (lambda: _one(Field("A", 0, 4, param="connections"), access=RO), "cannot hold every legal"),
    (lambda: _one(Field("A", 0, 8, param="nope"), access=RO), "unknown build parameter"),
    (lambda: _one(Field("A", 0, 2, enum={"X": 4})), "enum X=4 does not fit"),
    (lambda: _one(Field("A", 0, 1, access=W1C), Field("A_SET", 1, 1)), "port name a_set used twice"),
    (lambda: _one(Field("A", 0, 1), Field("A", 1, 1)), "used twice"),
    (lambda: _one(Field("IF", 0, 1)), "interface member"),
    (lambda: RegisterMap([Block("b", "", (Register("X", 0x10, fields=(Field("Y_ADDR", 0, 1),)),
                                          Register("X_Y", 0x14, fields=(Field("Z", 0, 1),))))]), None),
    (lambda: RegisterMap([Block("b", "", (Register("X", 0x10, fields=(Field("RESET", 0, 1),
                                                                            Field("B", 1, 1))),
                                          Register("X_RESET", 0x14, fields=(Field("B", 0, 1),))))]),
     "produced twice"),
    (lambda: Register("R", 0, fields=(Field("A", 0, 4, reset=3),), reset=5), "disagrees"),
])
def test_bad_maps_raise(build, match):
    if match is None:
        build()                   # legal
        return
    with pytest.raises(RegMapError, match=match):
        build()


def test_check_params():
    REGMAP.check_params({"width": 8, "connections": 1024, "stags": 256})
    with pytest.raises(ValueError, match="width=12"):
        REGMAP.check_params({"width": 12, "connections": 4, "stags": 1})
    with pytest.raises(ValueError, match="connections=0"):
        REGMAP.check_params({"width": 8, "connections": 0, "stags": 1})
    with pytest.raises(ValueError, match="connections=65536"):
        REGMAP.check_params({"width": 8, "connections": 65536, "stags": 1})
    with pytest.raises(TypeError, match="'stags' is required"):
        REGMAP.check_params({"width": 8, "connections": 4})
    with pytest.raises(TypeError, match="unknown build parameter"):
        REGMAP.check_params({"width": 8, "connections": 4, "stags": 1, "depth": 3})


# -- generated files ---------------------------------------------------------------

def test_generated_files_are_fresh():
    """The committed C header and Markdown reference are what the map generates now."""
    stale = rm.stale_files()
    assert not stale, f"stale generated files {stale}: run python -m host.regmap --write"


def test_generator_cli(tmp_path):
    out = subprocess.run([sys.executable, "-m", "host.regmap", "--check"], cwd=rm.REPO_ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # --write into a scratch tree, then --check detects an edit
    changed = rm.write_generated(tmp_path)
    assert sorted(changed) == sorted(rm.generated_files())
    assert rm.write_generated(tmp_path) == []
    assert rm.stale_files(tmp_path) == []
    (tmp_path / "firmware/rnic_regs.h").write_text("/* edited */\n")
    assert rm.stale_files(tmp_path) == ["firmware/rnic_regs.h"]
    c = subprocess.run([sys.executable, "-m", "host.regmap", "--print", "c"], cwd=rm.REPO_ROOT,
                       capture_output=True, text=True, check=True).stdout
    assert c == rm.c_header()


def test_c_header_content():
    h = rm.c_header()
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
    md = rm.markdown()
    assert md.startswith("# RNIC registers")
    for r in REGMAP:
        assert f"| `{r.addr:#05x}` | [{r.name}](#{r.name.lower()}) |" in md
        assert f"### {r.name}\n" in md
        for f in r.fields:
            assert f"| {f.bits} | {f.name} |" in md
    assert "build parameter `width`" in md
    assert "2 `LLP`" in md


# -- host.regs: constants and helpers from the map ------------------------------------

def test_python_constants_match_c_header():
    h = rm.c_header()
    for name, value in regs.CONSTANTS.items():
        assert getattr(regs, name) == value
        assert f"#define RNIC_{name} " in h
    assert regs.CTX_TX_ADDR == 0x44 and regs.ID_RESET == regs.MAGIC


def test_encode_decode_merge():
    v = regs.encode("CTX_TX", markers=1, crc=True, phase=12, mulpdu=1000)
    assert v == 1 | 2 | 12 << 4 | 1000 << 16
    assert regs.decode("CTX_TX", v) == {"markers": 1, "crc": 1, "phase": 12, "mulpdu": 1000}
    assert regs.encode("CTX_STATE", state="wait_rx") == rm.ConnState.WAIT_RX
    assert regs.encode("CTX_STATE", state=rm.ConnState.ERROR) == 4
    with pytest.raises(ValueError, match="does not fit"):
        regs.encode("CTX_TX", phase=512)
    with pytest.raises(KeyError, match="no field"):
        regs.encode("CTX_TX", nope=1)
    with pytest.raises(KeyError, match="no value named"):
        regs.encode("CTX_STATE", state="BOGUS")
    # RMW keeps RW bits only: W1C and pulse bits of the old value are not written back
    assert regs.merge("CTRL", 0b111, enable=0) == 0
    assert regs.merge("CTRL", 0b111) == 0b001
    assert regs.merge("CQ_STATUS", 0b11) == 0


def _device(**kw):
    model = regs.BankModel(width=8, connections=16, stags=64, **kw)
    return model, regs.Registers(model, polls=5)


def test_bank_model_semantics():
    m, _ = _device()
    assert m.read(0) == (rm.MAGIC, regs.OKAY)
    assert m.read(regs.VERSION_ADDR)[0] == 8 << 16 | rm.VERSION_MAJOR << 8 | rm.VERSION_MINOR
    assert m.read(regs.CAPS_ADDR)[0] == 64 << 16 | 16
    assert m.read(0xFFC) == (0, regs.SLVERR) and m.write(0xFFC, 1) == regs.SLVERR
    assert m.write(regs.ID_ADDR, 0) == regs.OKAY and m.read(0)[0] == rm.MAGIC
    m.write(regs.SCRATCH_ADDR, 0x11223344)
    m.write(regs.SCRATCH_ADDR, 0xAABBCCDD, 0b0101)
    assert m.read(regs.SCRATCH_ADDR)[0] == 0x11BB33DD
    m.set_w1c("ERR_STATUS", "PENDING", 1)
    m.write(regs.ERR_STATUS_ADDR, 1, 0b0000)           # strobed off: nothing cleared
    assert m.out("err_status", "pending") == 1
    m.write(regs.ERR_STATUS_ADDR, 2)                   # other bit
    assert m.out("err_status", "pending") == 1
    m.write(regs.ERR_STATUS_ADDR, 1)
    assert m.out("err_status", "pending") == 0
    m.write(regs.CTRL_ADDR, 0b111)
    assert m.pulses == [("ctrl", "soft_reset", 1), ("ctrl", "clear_counters", 1)]
    assert m.read(regs.CTRL_ADDR)[0] == 1
    with pytest.raises(ValueError):
        m.set_input("CTRL", "ENABLE", 1)


def test_driver_sequences_on_the_model():
    def core(model, register, field, value):
        if (register, field) == ("ctx_cmd", "commit"):
            model.set_input("CTX_STATUS", "STATE", model.out("ctx_state", "state"))
        if (register, field) == ("ctrl", "soft_reset"):
            model.set_input("STATUS", "READY", 1)
    m, dev = _device(on_pulse=core)
    info = dev.probe()
    assert (info.width, info.connections, info.stags, info.major) == (8, 16, 64, rm.VERSION_MAJOR)
    dev.soft_reset()
    dev.enable()
    assert m.out("ctrl", "enable") == 1
    tx = regs.MpaDirection(markers=True, crc=True, phase=8, mulpdu=1400)
    rx = regs.MpaDirection(markers=False, crc=True, phase=0, mulpdu=64768)
    dev.program_connection(5, tx=tx, rx=rx, ird=4, ord=2, state="RTS")
    assert m.out("conn_sel", "conn") == 5
    assert (m.out("ctx_tx", "phase"), m.out("ctx_tx", "mulpdu"), m.out("ctx_rx", "markers")) == (8, 1400, 0)
    assert (m.out("ctx_ird_ord", "ird"), m.out("ctx_ird_ord", "ord")) == (4, 2)
    assert m.pulses[-1] == ("ctx_cmd", "commit", 1)
    assert dev.connection_status(5)["state"] is rm.ConnState.RTS
    with pytest.raises(ValueError, match="out of range"):
        dev.program_connection(16)
    with pytest.raises(ValueError, match="multiple of 4"):
        regs.MpaDirection(phase=6)
    m.set_input("CTX_STATUS", "BUSY", 1)
    with pytest.raises(TimeoutError):
        dev.program_connection(1)
    # errors
    assert dev.pop_error() is None
    m.set_input("ERR_CONN", "CONN", 7)
    m.set_input("ERR_INFO", "LAYER", 2)
    m.set_input("ERR_INFO", "ECODE", 2)
    m.set_w1c("ERR_STATUS", "PENDING", 1)
    m.set_w1c("ERR_STATUS", "OVERFLOW", 1)
    e = dev.pop_error()
    assert (e.conn, e.tx, e.layer, e.etype, e.ecode, e.overflow) == (7, False, 2, 0, 2, True)
    assert dev.fields("ERR_STATUS") == {"pending": 0, "overflow": 0}
    # 64-bit counters
    m.set_input("RX_OCTETS_HI", "COUNT", 3)
    m.set_input("RX_OCTETS_LO", "COUNT", 5)
    assert dev.counters()["rx_octets"] == 3 << 32 | 5
    # queues
    assert dev.post_send(2, rm.SqOpcode.RDMA_WRITE, laddr=0x1_0000_0004, length=64, rstag=0x1234,
                         rto=0x2_0000_0000, wr_id=9)
    assert (m.out("sq_laddr_hi", "addr"), m.out("sq_rto_hi", "to"), m.out("sq_id", "wr_id")) == (1, 2, 9)
    m.set_input("RQ_STATUS", "FULL", 1)
    assert not dev.post_recv(2, 0x1000, 256, 1)
    assert dev.poll_cq() is None
    m.set_input("CQ_STATUS", "VALID", 1)
    m.set_input("CQ_WR_ID", "WR_ID", 9)
    m.set_input("CQ_INFO", "QUEUE", 0)
    m.set_input("CQ_LENGTH", "LENGTH", 64)
    c = dev.poll_cq()
    assert (c.wr_id, c.length, c.status) == (9, 64, 0)
    assert m.pulses[-1] == ("cq_cmd", "pop", 1)
    # a wrong device
    m2, dev2 = _device()
    m2.read32 = lambda addr: 0xDEADBEEF
    with pytest.raises(regs.DeviceMismatch, match="magic"):
        dev2.probe()


def test_context_from_negotiated():
    ctx = {"role": "responder", "markers_tx": True, "markers_rx": False, "crc": True,
           "tx_marker_origin": 0, "rx_marker_origin": 0, "tx_fpdu_offset": 520, "rx_fpdu_offset": 0,
           "mulpdu": 1400, "ird": None, "ord": 3}
    kw = regs.context_from_negotiated(ctx)
    assert kw["tx"] == regs.MpaDirection(True, True, 8, 1400)
    assert kw["rx"].mulpdu == 64768 and not kw["rx"].markers
    assert (kw["ird"], kw["ord"], kw["state"]) == (0x3FFF, 3, rm.ConnState.WAIT_RX)
    assert regs.context_from_negotiated({**ctx, "role": "initiator"})["state"] is rm.ConnState.RTS


def test_field_dataclass_helpers():
    f = REGMAP["CTX_TX"].field("phase")
    assert (f.bits, f.mask, f.port, f.max) == ("[12:4]", 0x1FF0, "phase", 511)
    assert REGMAP["CTRL"].access_summary == "rw/pulse"
    assert REGMAP["CTRL"].rw_mask == 1 and REGMAP["CTRL"].mask(PULSE) == 6
    assert "ctx_tx" in REGMAP and "nope" not in REGMAP
    with pytest.raises(KeyError):
        REGMAP["nope"]
    assert dataclasses.replace(f, name="X").name == "X"
