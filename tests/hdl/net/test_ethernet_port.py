"""EthernetPort (MAC, buffers, clock crossings, width converters) on Verilator with
cocotbext-eth GMII models and scapy frames; cocotb side in cocotb_ethernet_port.py."""

import pytest

from rnic.hdl.net.ethernet_port import EthernetPort


def _verilator(width, lengths="sample", testcase=None):
    from rnic.sim.runner import run
    result = run(EthernetPort, name=f"ethernet_port_w{width}", params={"width": width},
                 test_module="cocotb_ethernet_port", seed=width, timeout_s=1800,
                 testcase=testcase, extra_env={"RNIC_ETH_LENGTHS": lengths})
    print(f"W={width}: build {result.build_s:.1f} s, tests {result.test_s:.1f} s")
    return result


@pytest.mark.parametrize("width", [4, 8])
def test_ethernet_port(width):
    _verilator(width)


@pytest.mark.wide
@pytest.mark.parametrize("width", [16, 32])
def test_ethernet_port_wide(width):
    _verilator(width)


@pytest.mark.wide
@pytest.mark.slow
@pytest.mark.parametrize("width", [4, 8])
def test_every_frame_length(width):
    """Every length 60..1514 both ways at line rate (slow: run with --wide)."""
    _verilator(width, lengths="all", testcase="good_frames_line_rate")
