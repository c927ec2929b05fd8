"""AMBA AXI4 and AXI4-Lite bus signatures, seen from the master (flip them for a slave).

Members carry the AMBA signal names in lower case. A port ``m_axi:
Out(AXI4WriteSignature(...))`` of a component exported by
:func:`amaranth.back.verilog.convert` becomes Verilog ports ``m_axi__awaddr`` ...,
which ``cocotbext.axi.AxiWriteBus.from_prefix(dut, "m_axi_")`` finds (it joins
prefix and name with ``_``).

* :class:`AXI4LiteSignature`: all five channels of AXI4-Lite (register access).
* :class:`AXI4WriteSignature`: the AXI4 write channels (AW, W, B), ID width 1 (always 0).
* :class:`AXI4ReadSignature`: the AXI4 read channels (AR, R), ID width 1 (always 0).
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXI4LiteSignature", "AXI4WriteSignature", "AXI4ReadSignature",
           "RESP_OKAY", "RESP_SLVERR", "RESP_DECERR"]

#: AXI response codes (``bresp`` / ``rresp``).
RESP_OKAY = 0b00
RESP_SLVERR = 0b10
RESP_DECERR = 0b11


class _BusSignature(wiring.Signature):
    """A bus signature parameterised by address and data width (equal when both are)."""

    def __init__(self, members, *, addr_width, data_width):
        if not isinstance(addr_width, int) or addr_width < 2:
            raise ValueError(f"address width must be an integer >= 2, not {addr_width!r}")
        if not isinstance(data_width, int) or data_width < 8 or data_width & (data_width - 1):
            raise ValueError(f"data width must be a power of 2 >= 8, not {data_width!r}")
        self.addr_width = addr_width
        self.data_width = data_width
        super().__init__(members)

    def __eq__(self, other):
        return (type(other) is type(self) and other.addr_width == self.addr_width
                and other.data_width == self.data_width)

    def __hash__(self):
        return hash((type(self), self.addr_width, self.data_width))

    def __repr__(self):
        return f"{type(self).__name__}(addr_width={self.addr_width}, data_width={self.data_width})"


class AXI4LiteSignature(_BusSignature):
    """AXI4-Lite: ``awaddr awprot awvalid awready wdata wstrb wvalid wready bresp bvalid
    bready araddr arprot arvalid arready rdata rresp rvalid rready``; data 32 or 64 bits."""

    def __init__(self, *, addr_width, data_width=32):
        if data_width not in (32, 64):
            raise ValueError(f"AXI4-Lite data width is 32 or 64, not {data_width!r}")
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        }, addr_width=addr_width, data_width=data_width)


class AXI4WriteSignature(_BusSignature):
    """AXI4 write channels: ``awid awaddr awlen awsize awburst awvalid awready wdata wstrb
    wlast wvalid wready bid bresp bvalid bready``."""

    def __init__(self, *, addr_width, data_width):
        super().__init__({
            "awid": Out(1), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
            "wvalid": Out(1), "wready": In(1),
            "bid": In(1), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        }, addr_width=addr_width, data_width=data_width)


class AXI4ReadSignature(_BusSignature):
    """AXI4 read channels: ``arid araddr arlen arsize arburst arvalid arready rid rdata
    rresp rlast rvalid rready``."""

    def __init__(self, *, addr_width, data_width):
        super().__init__({
            "arid": Out(1), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
            "rid": In(1), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
        }, addr_width=addr_width, data_width=data_width)
