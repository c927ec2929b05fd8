"""rnic.host.driver.regs: constants, field helpers, the bank model and driver sequences, from the map."""

import dataclasses

import pytest

from rnic.host.driver import regs
from rnic.host.spec import regmap as rm
from rnic.host.spec.regmap import PULSE, REGMAP
from rnic.host.tools import codegen


# -- rnic.host.driver.regs: constants and helpers from the map ------------------------------------

def test_python_constants_match_c_header():
    h = codegen.c_header()
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
