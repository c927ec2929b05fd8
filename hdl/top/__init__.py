"""The board tops: what ``rnic build`` puts on an ECP5 board, one module per top.

=====================================  ==========================================================
``rnic build --top``                   class
=====================================  ==========================================================
``nic`` (the default)                  :class:`~.nic.NicBoardTop`: RGMII port, MAC,
                                       ARP/IPv4/ICMP, TCP (where it fits), the RNIC core and
                                       its host memory, registers and memory over the UART
``core``                               :class:`~.core.CoreBoardTop`: a core with its registers
                                       over the UART and a traffic loopback, no network
``harness`` (and ``--sweep``)          :class:`~.harness.CoreHarness`: a core alone between
                                       registers, for its fmax and size
``ethernet``                           :class:`~.ethernet.EthernetBoardTop`: RGMII port, MAC and
                                       the network layer answering ARP and ping, no core
=====================================  ==========================================================

The other modules:

* :mod:`.boards`: :class:`~.boards.Board` and :data:`~.boards.BOARDS`, the boards and the
  resources the tops use (clock, reset, UART, RGMII port and its transmit clock delay,
  LEDs);
* :mod:`.rgmii_board`: :class:`~.rgmii_board.RgmiiBoard`, the base of the tops with an
  RGMII port, and the pieces every top uses (PLL and resets, PHY reset, ``eth_rx``
  domain, UART pins, LEDs);
* :mod:`.board_logic`: :class:`~.board_logic.BoardLogic`, the platform-independent part of
  the ``core`` and ``nic`` tops (UART bridge, the BRD_* board registers, traffic);
* :mod:`.host_memory`: :class:`~.host_memory.HostMemory`, the on-chip memory behind the
  core's AXI4 masters that the host reaches through the UART bridge;
* :mod:`.traffic`: the pseudo-random ULPDU source and the signature register;
* :mod:`.cores`: the cores besides the RNIC core (:class:`~.cores.FramerCore`, each block
  of the core alone: :data:`~.cores.BLOCKS`).

:class:`~.ethernet.RgmiiNetStack` is the ``ethernet`` top without clocks and pins, for the
simulator; :class:`rnic.hdl.nic_top.NicTop` is the NIC without pins.
"""

from .board_logic import BOARD_BASE, BOARD_ID, BoardLogic, BoardRegisters
from .boards import BOARDS, Board
from .core import CoreBoardTop
from .cores import BLOCKS, FramerCore, block_factory, core_name
from .ethernet import EthernetBoardTop, RgmiiNetStack
from .harness import CoreHarness
from .host_memory import HostMemory
from .nic import NicBoardTop
from .rgmii_board import RgmiiBoard

__all__ = [
    "Board", "BOARDS", "NicBoardTop", "CoreBoardTop", "CoreHarness", "EthernetBoardTop",
    "RgmiiNetStack", "RgmiiBoard", "BoardLogic", "BoardRegisters", "HostMemory", "BOARD_ID",
    "BOARD_BASE",
    "FramerCore", "BLOCKS", "block_factory", "core_name",
]
