"""DDP/RDMAP transmit path (hdl/ddp_tx/) against the golden model rnic.host.model.segment.TxStream.

(a) Elaboration: every width and connections=1024 convert to Verilog; bad parameters raise.
(b) Verilator + cocotb (tests/hdl/cocotb_ddp_tx.py): random work requests of every opcode
    (zero lengths, sizes around the segment room), inbound Read Requests with good and
    failing sources, term reports, random back-pressure and AXI read delays; ULPDUs are
    compared octet for octet with TxStream, completions and rr_done with the model;
    a throughput run (one connection, long Writes). W = 4 and 8; 16 and 32 with --wide.
"""

import pytest
from amaranth.back import verilog

from rnic.hdl.ddp_tx import DdpTx

WANT = ["op0", "op1", "op3", "op4", "op5", "op6", "op0_zero", "op3_zero", "rr", "rr_zero",
        "rr_bad_0", "rr_bad_1", "rr_bad_4", "term_sent", "term_received"]


def test_convert_widths_and_1024():
    for w in (4, 16, 32):
        text = verilog.convert(DdpTx(width=w, connections=4, stags=16, addr_width=20), name="t", emit_src=False)
        assert "m_axi__araddr" in text and "o__payload" in text
    text = verilog.convert(DdpTx(width=8, connections=1024), name="ddp_tx_1024", emit_src=False)
    assert text.count("[1023:0]") >= 1


def test_port_layouts():
    """Opcode and status fields carry the register map's enums at the port fields' widths."""
    from amaranth.hdl import Shape, unsigned

    from rnic.hdl.ddp_tx import TxCompletion, WorkRequest
    from rnic.host.spec.regmap import CqStatus, SqOpcode
    wr, cq = WorkRequest(connections=16), TxCompletion(connections=16)
    assert wr.size == 4 + 1 + 4 + 64 + 32 + 32 + 32 + 64 + 32 + 32
    assert cq.size == 4 + 32 + 8 + 32 + 4
    for field, spec, width in ((wr["opcode"], SqOpcode, 4), (cq["opcode"], SqOpcode, 4),
                               (cq["status"], CqStatus, 8)):
        assert Shape.cast(field.shape) == unsigned(width)
        assert {m.name: m.value for m in field.shape} == {m.name: m.value for m in spec}


def test_bad_parameters():
    import gc
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kw in ({"width": 12}, {"sq_depth": 3}, {"rrq_depth": 0}, {"ord_depth": 5}, {"stags": 6},
                   {"addr_width": 8}):
            with pytest.raises(ValueError):
                DdpTx(**kw)
        gc.collect()


# output beats per cycle with 1460-octet segments (per-segment overhead ~12 cycles)
MIN_EFF = {4: 0.95, 8: 0.9, 16: 0.8, 32: 0.65}

PARAMS = dict(connections=8, sq_depth=8, rrq_depth=4, ord_depth=4, stags=16, addr_width=20)


def _factory(**p):
    return DdpTx(**{k: v for k, v in p.items() if k in PARAMS or k == "width"})


def _run(width):
    from rnic.sim.runner import run
    params = dict(PARAMS, width=width)
    run(_factory, name=f"ddp_tx_w{width}",
        params=dict(params, rounds=12, wrs=5, want=WANT, min_eff=MIN_EFF[width]),
        test_module="cocotb_ddp_tx", seed=width, timeout_s=900)


@pytest.mark.parametrize("width", [4, 8])
def test_ddp_tx_verilator(width):
    _run(width)


@pytest.mark.wide
@pytest.mark.parametrize("width", [16, 32])
def test_ddp_tx_verilator_wide(width):
    _run(width)
