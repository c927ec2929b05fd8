"""Back-to-back bench: two RNIC data paths whose TX streams feed each other's RX.

Each node is DdpTx -> MpaTxFramer -> (wire) -> peer's MpaRxDeframer -> peer's DdpRx, with
the RX side's Read Requests, rr_done, error reports and Read Response completions wired
to its own TX side (:class:`rnic.hdl.ddp_b2b.B2BTop`). The cocotb module
(tests/hdl/cocotb_ddp_b2b.py) moves the wire octets between the nodes re-cut into
random TCP segments, gives each node a cocotbext-axi AxiRam (DdpRx writes, DdpTx reads),
posts random work requests (all Send kinds, RDMA Write, RDMA Read, zero lengths, sizes
around MULPDU) on both sides at once, with markers and CRC on or off per direction, and
checks every completion on both sides and both memories against a model computed from
the work requests (the placement the RFCs prescribe). Rounds also provoke an error (a
Write to an unknown STag): the peer's RX reports it, its TX sends the Terminate, this
side's RX receives it and both TX sides stop (FLUSHED), then the connection restarts.
W = 8; 4 and 32 with --wide.
"""

import pytest

from rnic.hdl.ddp_b2b import B2BTop


PARAMS = dict(connections=2, stags=32, addr_width=20, slots=4, slot_bytes=512, rq_depth=8,
              sq_depth=8, rrq_depth=4, ord_depth=4)


def _factory(**p):
    return B2BTop(**{k: v for k, v in p.items() if k in PARAMS or k == "width"})


def test_b2b_converts():
    from amaranth.back import verilog
    text = verilog.convert(B2BTop(width=4), name="b2b", emit_src=False)
    assert "a_axi__araddr" in text and "b_axi__awaddr" in text and "a_wo__payload" in text


def _run(width):
    from rnic.sim.runner import run
    run(_factory, name=f"ddp_b2b_w{width}", params=dict(PARAMS, width=width, rounds=8, wrs=12),
        test_module="cocotb_ddp_b2b", seed=width, timeout_s=900)


@pytest.mark.parametrize("width", [8])
def test_ddp_b2b_verilator(width):
    _run(width)


@pytest.mark.wide
@pytest.mark.parametrize("width", [4, 32])
def test_ddp_b2b_verilator_wide(width):
    _run(width)
