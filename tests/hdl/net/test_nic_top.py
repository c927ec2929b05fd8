# amaranth: UnusedElaboratable=no
"""NicTop (hdl/nic_top.py): EthernetPort + NetworkLayer + TcpOffload + RnicCore with the Network
and TCP registers.

(a) construction: ports, the core's ``net`` port, NET_CAPS of the core alone;
(b) Verilator through rnic.sim.runner (cocotb module cocotb_nic_top.py) at W = 4: MAC/IP
    programmed over AXI4-Lite, ARP and pings of 0, 56 and 1472 octets as GMII frames, the
    replies byte-identical to NicNetModel's; bad FCS, runt, giant, other MAC, wrong IP, UDP,
    IP options, bad checksum, TCP (good: answered with a RST by the TCP engine, byte-identical
    to the model's; bad checksum, data offset 4); every NET_* counter read back over the bus
    against the model; a static ARP entry written over the bus (lookup window and behaviour); NET_MAX_LEN;
    an ARP request on command.
"""

import pytest
from amaranth.lib import wiring

from rnic.hdl.axi import AXI4LiteSignature, AXI4ReadSignature, AXI4WriteSignature
from rnic.hdl.net.layouts import NETWORK_DROPS
from rnic.hdl.net.gmii import GmiiRx, GmiiTx
from rnic.hdl.nic_top import COUNTER_WORDS, NicTop, counter_word
from rnic.hdl.regbank import NETWORK_BLOCK, TCP_BLOCK, block_signature
from rnic.hdl.rnic_core import RnicCore
from rnic.hdl.tcp.registers import counter_word as tcp_counter_word
from rnic.host.spec.net import RxDrop
from rnic.host.spec.regmap import NET_BLOCK, TCP_COUNTER_WORDS
from rnic.host.spec.regmap import TCP_BLOCK as TCP_REGS


def test_ports():
    members = NicTop(width=4, connections=4).signature.members
    assert members["gmii_rx"].flow == wiring.In and members["gmii_rx"].signature == GmiiRx.flip()
    assert members["gmii_tx"].flow == wiring.Out and members["gmii_tx"].signature == GmiiTx
    assert members["s_axil"].signature == AXI4LiteSignature(addr_width=12).flip()
    assert members["m_axi"].signature == AXI4WriteSignature(addr_width=32, data_width=32)
    assert members["m_axi_rd"].signature == AXI4ReadSignature(addr_width=32, data_width=32)
    for name in ("rx_ulpdu", "irq", "tick", "tcp_active"):
        assert name in members
    # the core's wire ports are joined to TCP inside (WireJoin)
    assert not any(name in members for name in NicTop.JOINED)


def test_without_tcp():
    members = NicTop(width=4, connections=4, tcp=False).signature.members
    assert not any(name.startswith("tcp_") or name == "tick" for name in members)
    assert all(name in members for name in NicTop.JOINED)
    with pytest.raises(TypeError, match="tcp must be a bool"):
        NicTop(width=4, connections=4, tcp=1)


def test_core_net_port_only_with_network():
    alone = RnicCore(width=4, connections=2).signature.members
    assert not any(name in alone for name in ("net", "tcp", "may_send", "tx_started"))
    core = RnicCore(width=4, connections=2, network=True, arp_entries=8)
    net = core.signature.members["net"]
    assert net.flow == wiring.Out and net.signature == block_signature(NETWORK_BLOCK)
    assert set(net.signature.members) == {r.port for r in NET_BLOCK.registers if r.core_facing}
    tcp = core.signature.members["tcp"]
    assert tcp.flow == wiring.Out and tcp.signature == block_signature(TCP_BLOCK)
    assert "tcp_listen" in tcp.signature.members and "tcp_now" in tcp.signature.members
    # TCP's permission to send: all ones until driven
    may_send = core.signature.members["may_send"]
    assert may_send.flow == wiring.In and may_send.init == 0b11
    assert core.signature.members["tx_started"].flow == wiring.Out
    with pytest.raises(TypeError, match="network must be a bool"):
        RnicCore(width=4, network=1)
    with pytest.raises(ValueError, match="arp_entries=65"):
        RnicCore(width=4, network=True, arp_entries=65)


def test_counters():
    """The network layer's drop reasons, and one word of the counter memory per NET_*
    counter register."""
    assert [r.value for r in NETWORK_DROPS] == list(range(RxDrop.ETHERTYPE, RxDrop.TCP_CHECKSUM + 1))
    names = [r.name for r in NET_BLOCK.registers if r.name.startswith(("NET_RX_", "NET_TX_"))]
    words = [counter_word(name) for name in names]
    assert len(set(words)) == len(names) and max(words) < COUNTER_WORDS
    names = [r.name for r in TCP_REGS.registers if r.name.startswith("TCP_DROP_")]
    names += ["TCP_TX_SEGMENTS", "TCP_EVENTS_LOST", "TCP_RETRANSMITS"]
    words = [tcp_counter_word(name) for name in names]
    assert len(set(words)) == len(names) == 15 and max(words) < TCP_COUNTER_WORDS


def test_nic_top_cocotb():
    from rnic.sim.runner import run
    result = run(NicTop, name="nic_top_w4", params={"width": 4, "connections": 4, "arp_entries": 8},
                 test_module="cocotb_nic_top", seed=4, timeout_s=900)
    print(f"build {result.build_s:.1f} s, tests {result.test_s:.1f} s")
