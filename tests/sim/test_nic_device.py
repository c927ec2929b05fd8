"""The simulated NIC (sim/nic_device.py, sim/nic_harness.cpp): NicTop on Verilator behind pipes.

Frames in and out through the harness (it pads, adds and checks preamble, SFD and FCS), the
registers as a Transport, the device kind ``nicsim``, the cached start, that the harness
stops clocking when nothing is left to simulate, and the simulation speed (printed).
"""

import time

import pytest
from scapy.layers.l2 import ARP, Ether

from rnic.host.driver.device import open_device
from rnic.host.driver.regs import Registers
from rnic.host.model.network_layer import NicNetModel
from rnic.host.spec.net import DEFAULT_NIC_IP, RxDrop
from rnic.sim.nic_device import IDLE_RUN, MAX_FRAME, NicSimDevice

PEER_MAC = "52:54:00:00:07:01"


@pytest.fixture(scope="module")
def nic():
    dev = NicSimDevice()           # (builds on the first run of the sources)
    yield dev
    dev.close()


def arp_request():
    return bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=PEER_MAC)
                 / ARP(op=1, hwsrc=PEER_MAC, psrc="169.254.7.1", pdst=DEFAULT_NIC_IP))


def test_frames_and_registers(nic):
    regs = Registers(nic)
    assert regs.net_caps().network
    before = regs.net_rx_counters()
    frame = arp_request()                                   # 42 octets: padded to 60
    (want,) = NicNetModel().receive(frame + bytes(18)).replies
    nic.send_frame(frame)
    assert nic.frames(count=1, timeout=10) == [want]
    nic.send_frame(bytes(Ether(dst="02:00:0a:07:00:02", src=PEER_MAC)) + bytes(2000))   # giant
    nic.run(5000)
    after = regs.net_rx_counters()
    assert after[RxDrop.NONE] == before[RxDrop.NONE] + 1
    assert after[RxDrop.GIANT] == before[RxDrop.GIANT] + 1
    assert nic.frames(timeout=0.2) == []
    assert nic.bad_frames == 0
    for bad in (b"", bytes(MAX_FRAME + 1)):
        with pytest.raises(ValueError, match="octets"):
            nic.send_frame(bad)


def test_arp_request_on_command(nic):
    """A register write starts traffic too: the harness clocks on until the frame is out."""
    Registers(nic).arp_request("169.254.7.1")
    (frame,) = nic.frames(count=1, timeout=10)
    want = NicNetModel().arp_request("169.254.7.1")
    assert frame == want and Ether(frame)[ARP].op == 1


def test_idle_harness_stops_clocking(nic):
    nic.send_frame(arp_request())
    assert len(nic.frames(count=1, timeout=10)) == 1
    deadline = time.monotonic() + 30
    last = nic.stats()["cycles"]
    while True:                       # the idle run after the reply ends ...
        time.sleep(0.2)
        now = nic.stats()["cycles"]
        if now == last:
            break
        last = now
        assert time.monotonic() < deadline, "the harness keeps clocking"
    time.sleep(0.5)                   # ... and then nothing is clocked (the harness blocks)
    assert nic.stats()["cycles"] == last
    assert last >= IDLE_RUN


def test_speed_and_cached_start(nic):
    stats0 = nic.stats()
    nic.run(200_000)
    stats1 = nic.stats()
    rate = (stats1["cycles"] - stats0["cycles"]) / (stats1["sim_s"] - stats0["sim_s"])
    t0 = time.monotonic()
    second = NicSimDevice()           # the build is cached now
    start_s = time.monotonic() - t0
    try:
        assert second.read32(0) == 0x69575250          # ID: "iWRP"
    finally:
        second.close()
    print(f"NicTop W=4: {rate / 1e3:.0f} k cycles/s; cached start {start_s:.2f} s")
    assert rate > 10_000
    assert start_s < 10


def test_device_kind():
    with open_device("nicsim") as dev:
        assert Registers(dev.transport).net_caps().network
        assert dev.read_register("NET_IP")["value"] == 0xA9FE0702       # 169.254.7.2
    with pytest.raises(ValueError, match="nicsim"):
        open_device("nicsim:width=4,bogus=1")
