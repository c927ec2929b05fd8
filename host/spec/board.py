"""The address map behind a board top's UART bridge (stdlib only).

The gateware end is :class:`rnic.hdl.top.board_logic.BoardLogic` (and
:class:`rnic.hdl.top.host_memory.HostMemory`), the host end
:class:`rnic.host.driver.uart.UartTransport`.

=============  ============================================================================
addresses      what
=============  ============================================================================
0x0000-0x0FFF  the core's (or NIC's) registers, :mod:`rnic.host.spec.regmap`
0x1000-0x1FFF  the board registers (BRD_*, :mod:`rnic.hdl.top.board_logic`)
0x2000-0x3FFF  the host memory's window (HMEM_*, below), on tops with host memory
=============  ============================================================================

The host memory window: the on-chip memory behind the core's AXI4 masters (registered
regions, receive buffers, the sources of Sends and Writes), reached word by word.

======  ==========  ==  =========================================================================
offset  name        rw  content
======  ==========  ==  =========================================================================
0x00    HMEM_SIZE   ro  octets of the memory (a power of 2); the core's address ``a`` is octet
                        ``a mod HMEM_SIZE``
0x04    HMEM_ADDR   rw  octet address of the next HMEM_DATA access (bits 1..0 read 0)
0x08    HMEM_DATA   rw  the 32-bit word at HMEM_ADDR (octet HMEM_ADDR in bits 7..0), read or
                        written; each access adds 4 to HMEM_ADDR
======  ==========  ==  =========================================================================

Other offsets of the window answer SLVERR.
"""

__all__ = ["BOARD_BASE", "BOARD_ID", "HOST_MEMORY_BASE", "HMEM_SIZE", "HMEM_ADDR", "HMEM_DATA",
           "BRIDGE_ADDR_WIDTH", "NIC_CLOCK_HZ"]

#: Where the board registers start on the UART bridge's bus.
BOARD_BASE = 0x1000
#: BRD_ID: "BRD0".
BOARD_ID = 0x42524430
#: Where the host memory's window starts on the UART bridge's bus.
HOST_MEMORY_BASE = 0x2000
#: Offsets of the host memory window's registers.
HMEM_SIZE, HMEM_ADDR, HMEM_DATA = 0x00, 0x04, 0x08
#: Address bits of the UART bridge's bus: without host memory, with it.
BRIDGE_ADDR_WIDTH = {False: 13, True: 14}
#: The NIC board top's core clock (``sync``): two thirds of the Ethernet side's 125 MHz, from
#: one 500 MHz VCO. At W = 4 the core moves 2.67 Gb/s, 2.7 times its 1 Gb/s line; the NIC
#: with TCP and host memory on the ECPIX-5 85F (66 % of its LUT4) reaches about 100 MHz
#: after routing, which leaves this clock its margin.
NIC_CLOCK_HZ = 250e6 / 3
