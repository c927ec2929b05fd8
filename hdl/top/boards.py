"""The boards ``rnic build`` knows: which amaranth-boards platform, which of its resources
the tops use, and what the board's RGMII PHY needs from the FPGA."""

from __future__ import annotations

import dataclasses
import importlib

__all__ = ["Board", "BOARDS", "VERSA_ECP5_LEDS", "ECPIX5_LEDS"]


@dataclasses.dataclass(frozen=True)
class Board:
    """What the tops need to know about one amaranth-boards platform.

    ``rgmii_tx_clk_delay_ps`` is the delay the FPGA adds to the RGMII transmit clock it
    forwards to the PHY (:class:`~rnic.hdl.net.rgmii.RgmiiTx` ``clk_delay_ps``): 0 where the
    PHY is strapped to add the transmit delay itself, 2000 (a quarter of the 8 ns period)
    where it is not. The receive delay is always the PHY's.

    ``nic_tcp`` and ``host_memory`` are what the NIC top
    (:class:`~rnic.hdl.top.nic.NicBoardTop`) puts on the board unless told: its TCP engine
    where the whole NIC fits the device, and octets of on-chip host memory for the
    registered regions (0: none).
    """
    name: str
    platform: str                  # "module:Class"
    title: str
    clock: str                     # input clock resource (its Clock() gives the frequency)
    reset: str | None              # reset button resource (active-high after the board's inversion)
    uart: tuple = ("uart", 0)
    eth: tuple | None = ("eth_rgmii", 0)
    leds: tuple = ()               # ((resource, number, subsignal or None), ...), in the order
                                   # of the top's LED_FUNCTIONS
    rgmii_tx_clk_delay_ps: int = 0
    nic_tcp: bool = False
    host_memory: int = 0

    def platform_class(self):
        module, _, cls = self.platform.partition(":")
        return getattr(importlib.import_module(module), cls)

    def make_platform(self):
        return self.platform_class()()


#: The Versa's eight LEDs, in order.
VERSA_ECP5_LEDS = tuple(("led", i, None) for i in range(8))

#: The ECPIX-5's four RGB LEDs as eight single colours, in order.
ECPIX5_LEDS = (("rgb_led", 0, "g"), ("rgb_led", 1, "g"), ("rgb_led", 2, "b"), ("rgb_led", 0, "r"),
               ("rgb_led", 3, "g"), ("rgb_led", 3, "b"), ("rgb_led", 2, "g"), ("rgb_led", 1, "b"))

# RGMII transmit clock delay: the Versa's RTL8211E PHYs are strapped to add both RGMII
# delays (LiteX's Versa target sets tx_delay = rx_delay = 0); the ECPIX-5's PHY adds the
# receive delay but not the transmit delay (litex-boards lambdaconcept_ecpix5.py keeps
# LiteEth's tx_delay = 2 ns and sets rx_delay = 0).
# The NIC with TCP takes about two thirds of the 85F's LUT4 and half its block RAM; 128 KiB
# of host memory are 64 more DP16KD (of 208). On the 45F devices (43848 LUT4, 108 DP16KD)
# the NIC fits without TCP only.
BOARDS = {
    "versa_ecp5": Board(
        "versa_ecp5", "amaranth_boards.versa_ecp5:VersaECP5Platform",
        "Lattice ECP5 Versa (LFE5UM-45F-8BG381)", clock="clk100", reset="rst",
        leds=VERSA_ECP5_LEDS, rgmii_tx_clk_delay_ps=0),
    "ecpix5": Board(
        "ecpix5", "amaranth_boards.ecpix5:ECPIX585Platform",
        "LambdaConcept ECPIX-5 (LFE5UM5G-85F-8BG554)", clock="clk100", reset="rst",
        leds=ECPIX5_LEDS, rgmii_tx_clk_delay_ps=2000, nic_tcp=True, host_memory=128 << 10),
    "ecpix5_45": Board(
        "ecpix5_45", "amaranth_boards.ecpix5:ECPIX545Platform",
        "LambdaConcept ECPIX-5 (LFE5UM5G-45F-8BG554)", clock="clk100", reset="rst",
        leds=ECPIX5_LEDS, rgmii_tx_clk_delay_ps=2000),
}
