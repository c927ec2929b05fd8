# amaranth: UnusedElaboratable=no
"""The RNIC core (rnic.hdl.rnic_core): register bank + MPA TX framer + MPA RX deframer + glue.

(a) construction: parameter checks, signature, Verilog port names;
(b) Verilator through rnic.sim.runner with cocotbext-axi's AxiLiteMaster (cocotb module
    cocotb_rnic_core.py): identity/reset/enable, two connections looped back through the
    register data port against rnic.host.model.fpdu (ULPDUs, status, counters, the MPA fence), the
    tx_ulpdu -> tx_wire port path against FpduEncoder, RX errors driven on rx_wire (CRC,
    length, marker) -> ERR_* capture/overflow/W1C, CTX_ERROR, counters, irq, the
    data port's RX commands, and the DDP/RDMAP receive path (STag table and receive
    queue written through the registers, FPDUs on rx_wire, host memory a cocotbext-axi
    AxiRamWrite on m_axi): Sends (memory, CQ_*), an RDMA Write, a Read Request (RRQ_*), a
    Read Response, a write to an invalid STag (DDP 1/1/0 in ERR_*, CTX_ERROR, TERM_* with
    the model's Terminate octets, nothing written), a received Terminate, RQ overflow, irq
    sources, all against rnic.host.model.sink.Sink; the DDP/RDMAP transmit path (LOOPBACK into the core's
    own receive path, payload read by a cocotbext-axi AxiRamRead on m_axi_rd sharing the
    memory): a Send, an RDMA Write, an RDMA Read (answered by the Read Responder) and an
    unsignaled Write posted through SQ_* + doorbell, a Read with ORD 0 (BAD_REQUEST), checked
    against rnic.host.model.segment (TX_FPDUS) and rnic.host.model.sink (memory, CQ_* entries of both queues).
    W = 8 by default; W = 4 and 32 with --wide.
(c) two cores back to back (rnic.hdl.rnic_pair, cocotb module cocotb_rnic_pair.py): Sends, an RDMA
    Write and an RDMA Read from one to the other and a Send back, all through the registers,
    each node's memory a cocotbext-axi AxiRamWrite + AxiRamRead; then a Write to an unknown
    STag: the Terminate crosses the wire (ERROR on one side, CLOSING and TERM_* on the other,
    later work requests FLUSHED); against rnic.host.model.segment and rnic.host.model.sink.
"""

import pytest
from amaranth.lib import wiring

from rnic.hdl.beat import OctetBeat
from rnic.hdl.axi import AXI4LiteSignature, AXI4ReadSignature, AXI4WriteSignature
from rnic.hdl.mpa_rx import MpaRxBeat
from rnic.hdl.mpa_tx import MpaTxBeat
from rnic.hdl.rnic_core import RnicCore
from rnic.host.spec.regmap import DpCrc, DpError
from rnic.sim.runner import run


@pytest.mark.parametrize("kw, match", [
    ({"width": 12}, "width=12"),
    ({"width": 8, "connections": 0}, "connections=0"),
    ({"width": 8, "stags": 1 << 16}, "stags=65536"),
    ({"width": 8, "dp_depth": 1}, "dp_depth"),
    ({"width": 8, "dp_ulpdus": True}, "dp_ulpdus"),
    ({"width": 8, "stags": 100}, "stags must be a power of 2"),
    ({"width": 8, "rq_depth": 6}, "rq_depth must be a power of 2"),
    ({"width": 8, "ddp_slots": 1}, "ddp_slots"),
    ({"width": 8, "ddp_slot_bytes": 3000}, "ddp_slot_bytes must be a power of 2"),
    ({"width": 32, "ddp_slot_bytes": 32}, "ddp_slot_bytes"),
    ({"width": 8, "cq_depth": 1}, "cq_depth"),
    ({"width": 8, "rrq_depth": 5000}, "rrq_depth"),
    ({"width": 8, "term_depth": 1.5}, "term_depth"),
    ({"width": 8, "addr_width": 65}, "addr_width"),
    ({"width": 8, "addr_width": 12}, "addr_width"),
    ({"width": 8, "sq_depth": 6}, "sq_depth must be a power of 2"),
    ({"width": 8, "ird_depth": 1}, "ird_depth"),
    ({"width": 8, "ord_depth": 2048}, "ord_depth"),
])
def test_params_checked(kw, match):
    with pytest.raises(ValueError, match=match):
        RnicCore(**kw)


def test_keyword_only():
    with pytest.raises(TypeError):
        RnicCore(8, 16)


def test_signature():
    core = RnicCore(width=4, connections=3)
    members = core.signature.members
    assert members["s_axil"].flow == wiring.In
    assert members["s_axil"].signature == AXI4LiteSignature(addr_width=12).flip()
    assert members["tx_ulpdu"].flow == wiring.In
    assert members["tx_ulpdu"].signature.members["payload"].shape == MpaTxBeat(width=4, connections=3)
    assert members["tx_wire"].flow == wiring.Out
    assert members["tx_wire"].signature.members["payload"].shape == OctetBeat(width=4, connections=3)
    assert members["rx_wire"].flow == wiring.In
    assert members["rx_ulpdu"].signature.members["payload"].shape == MpaRxBeat(width=4, connections=3)
    assert members["irq"].flow == wiring.Out
    assert members["m_axi"].flow == wiring.Out
    assert members["m_axi"].signature == AXI4WriteSignature(addr_width=32, data_width=32)
    assert RnicCore(width=8, addr_width=20).signature.members["m_axi"].signature == \
        AXI4WriteSignature(addr_width=20, data_width=64)
    assert members["m_axi_rd"].flow == wiring.Out
    assert members["m_axi_rd"].signature == AXI4ReadSignature(addr_width=32, data_width=32)


def test_dp_enums_match_the_deframer():
    from rnic.hdl.mpa_config import CrcStatus, RxError
    from rnic.hdl.mpa_rx import RX_ABORTED
    assert {e.name: int(e) for e in DpCrc} == {e.name: int(e) for e in CrcStatus}
    assert {e.name: int(e) for e in RxError}.items() <= {e.name: int(e) for e in DpError}.items()
    assert DpError.ABORTED == RX_ABORTED


@pytest.mark.parametrize("width", [
    8,
    pytest.param(4, marks=pytest.mark.wide),
    pytest.param(32, marks=pytest.mark.wide),
])
def test_core_cocotb(width):
    run(RnicCore, name=f"rnic_core_w{width}",
        params={"width": width, "connections": 16, "dp_depth": 512},
        test_module="cocotb_rnic_core", timeout_s=600)


def test_pair_params_and_ports():
    from rnic.hdl.rnic_pair import RnicPair
    with pytest.raises(ValueError, match="sq_depth"):
        RnicPair(width=8, sq_depth=3)
    members = RnicPair(width=8, connections=4, addr_width=20).signature.members
    for x in ("a", "b"):
        assert members[f"{x}_m_axi_rd"].signature == AXI4ReadSignature(addr_width=20, data_width=64)
        assert members[f"{x}_s_axil"].flow == wiring.In


def test_pair_cocotb():
    """Two cores back to back (rnic.hdl.rnic_pair, cocotb module cocotb_rnic_pair.py): Sends, an RDMA
    Write and an RDMA Read between them through the registers, a Terminate over the wire."""
    from rnic.hdl.rnic_pair import RnicPair
    run(RnicPair, name="rnic_pair_w8",
        params={"width": 8, "connections": 4, "stags": 16, "dp_depth": 16, "dp_ulpdus": 4,
                "addr_width": 20},
        test_module="cocotb_rnic_pair", timeout_s=600)
