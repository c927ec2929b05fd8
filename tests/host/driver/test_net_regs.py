"""The driver's network helpers (rnic.host.driver.regs.Registers.set_mac .. arp_lookup) against
the bank model and the in-process model device, and the Network block's C/Python constants."""

import ipaddress

import pytest

from rnic.host.driver import regs
from rnic.host.driver.model import ModelTransport
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX, RxDrop, TxDrop
from rnic.host.spec.regmap import NET_RX_COUNTERS
from rnic.host.tools import codegen


def _device(**params):
    model = regs.BankModel(width=4, connections=4, stags=16, **params)
    return model, regs.Registers(model, polls=5)


def test_constants_in_the_c_header():
    h = codegen.c_header()
    for name in ("NET_CAPS_ADDR", "NET_MAC_HI_ADDR", "NET_IP_IP_RESET", "NET_RX_GOOD_ADDR",
                 "NET_RX_ICMP_OTHER_ADDR", "NET_ARP_CMD_WRITE_MASK", "NET_ARP_LOOKUP_HIT_MASK"):
        assert f"#define RNIC_{name} " in h
    assert regs.NET_IP_RESET == 0xA9FE0702 and regs.NET_MAX_LEN_RESET == 1514
    assert regs.NET_RX_GOOD_ADDR + 4 * RxDrop.ICMP_OTHER == regs.NET_RX_ICMP_OTHER_ADDR
    assert (regs.NET_RX_TCP_HEADER_ADDR, regs.NET_RX_TCP_CHECKSUM_ADDR) == (0x478, 0x47C)
    assert "#define RNIC_NET_RX_TCP_CHECKSUM_ADDR 0x0000047cu" in h


def test_reset_addresses_are_the_spec_defaults():
    _, dev = _device(network=1, arp_entries=8)
    assert dev.get_mac() == DEFAULT_NIC_MAC
    assert dev.get_ip() == ipaddress.IPv4Address(DEFAULT_NIC_IP)
    assert dev.get_prefix() == DEFAULT_PREFIX
    assert dev.field("NET_MAX_LEN", "LEN") == 1514
    assert dev.net_caps() == regs.NetCaps(network=True, arp_entries=8)


def test_without_network_layer_caps_read_zero():
    model, dev = _device()
    assert dev.net_caps() == regs.NetCaps(network=False, arp_entries=0)
    assert all(v == 0 for v in dev.net_rx_counters().values())
    with pytest.raises(regs.DeviceMismatch, match="no network layer"):
        dev.write_arp(0, "10.0.0.1", b"\x02" * 6)


def test_set_mac_and_ip_land_in_the_registers():
    model, dev = _device(network=1, arp_entries=8)
    dev.set_mac("02:11:22:33:44:55")
    assert model.out("net_mac_hi", "mac") == 0x0211 and model.out("net_mac_lo", "mac") == 0x22334455
    assert dev.get_mac() == bytes.fromhex("021122334455")
    dev.set_mac(bytes.fromhex("a0b1c2d3e4f5"))
    assert dev.get_mac() == bytes.fromhex("a0b1c2d3e4f5")
    dev.set_ip("10.1.2.3", prefix=16)
    assert model.out("net_ip", "ip") == 0x0A010203 and model.out("net_prefix", "prefix") == 16
    assert dev.get_ip() == ipaddress.IPv4Address("10.1.2.3") and dev.get_prefix() == 16
    dev.set_max_len(1000)
    assert model.out("net_max_len", "len") == 1000
    assert dev.get_gateway() is None
    dev.set_gateway("10.1.0.1")
    assert model.out("net_gateway", "ip") == 0x0A010001
    assert dev.get_gateway() == ipaddress.IPv4Address("10.1.0.1")
    dev.set_gateway(None)
    assert dev.get_gateway() is None
    for bad in ("02:11:22:33:44", "zz:11:22:33:44:55", b"\x00" * 7):
        with pytest.raises(ValueError):
            dev.set_mac(bad)
    with pytest.raises(ValueError, match="prefix"):
        dev.set_ip("10.1.2.3", prefix=33)
    with pytest.raises(ValueError):
        dev.set_ip("10.1.2.300")


def test_counters_keyed_by_reason():
    model, dev = _device(network=1, arp_entries=8)
    for reason, name in NET_RX_COUNTERS:
        model.set_input(name, "COUNT", 1000 + reason)
    model.set_input("NET_RX_TCP", "COUNT", 7)
    model.set_input("NET_TX_FRAMES", "COUNT", 8)
    model.set_input("NET_TX_DROPPED", "COUNT", 9)
    rx = dev.net_rx_counters()
    assert list(rx) == list(RxDrop)
    assert rx == {reason: 1000 + reason for reason in RxDrop}
    model.set_input("NET_TX_NO_ROUTE", "COUNT", 10)
    model.set_input("NET_TX_ARP_MISS", "COUNT", 11)
    assert dev.net_counters() == {"rx": rx, "rx_tcp": 7, "tx_frames": 8, "tx_dropped": 9,
                                  "tx_drops": {TxDrop.NO_ROUTE: 10, TxDrop.ARP_MISS: 11}}


def test_write_arp_fires_one_write_with_the_entry():
    model, dev = _device(network=1, arp_entries=8)
    dev.write_arp(5, "169.254.7.1", "02:00:0a:07:00:01")
    assert model.pulses == [("net_arp_cmd", "write", 1)]
    assert model.out("net_arp_entry", "index") == 5
    assert model.out("net_arp_entry", "valid") == 1 and model.out("net_arp_entry", "static") == 1
    assert model.out("net_arp_ip", "ip") == 0xA9FE0701
    assert model.out("net_arp_mac_hi", "mac") == 0x0200 and model.out("net_arp_mac_lo", "mac") == 0x0A070001
    with pytest.raises(ValueError, match="ARP slot 8"):
        dev.write_arp(8, "169.254.7.1", b"\x02" * 6)


def test_arp_request_waits_for_the_previous_one():
    model, dev = _device(network=1, arp_entries=8)
    dev.arp_request("169.254.7.9")
    assert model.pulses == [("net_arp_cmd", "request", 1)] and model.out("net_arp_ip", "ip") == 0xA9FE0709
    model.set_input("NET_ARP_STATUS", "REQUEST_BUSY", 1)
    with pytest.raises(TimeoutError):
        dev.arp_request("169.254.7.9")


def test_model_device_arp_cache():
    dev = regs.Registers(ModelTransport(width=4, connections=4, network=1, arp_entries=4))
    assert dev.net_caps() == regs.NetCaps(True, 4)
    assert dev.arp_lookup("169.254.7.1") is None
    dev.write_arp(1, "169.254.7.1", "02:00:0a:07:00:01")
    dev.write_arp(2, "169.254.7.3", "02:00:0a:07:00:03", static=False)
    assert dev.arp_lookup("169.254.7.1") == bytes.fromhex("02000a070001")
    assert dev.arp_lookup("169.254.7.3") == bytes.fromhex("02000a070003")
    dev.write_arp(1, "169.254.7.1", b"\x00" * 6, valid=False)
    assert dev.arp_lookup("169.254.7.1") is None
    assert regs.Registers(ModelTransport()).net_caps().network is False
