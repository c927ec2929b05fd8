"""AMBA AXI4 and AXI4-Lite bus signatures, seen from the master (flip them for a slave).

Members carry the AMBA signal names in lower case. A port ``m_axi:
Out(AXI4WriteSignature(...))`` of a component exported by
:func:`amaranth.back.verilog.convert` becomes Verilog ports ``m_axi__awaddr`` ...,
which ``cocotbext.axi.AxiWriteBus.from_prefix(dut, "m_axi_")`` finds (it joins
prefix and name with ``_``).

* :class:`AXI4LiteSignature`: all five channels of AXI4-Lite (register access).
* :class:`AXI4WriteSignature`: the AXI4 write channels (AW, W, B), ID width 1 (always 0).
* :class:`AXI4ReadSignature`: the AXI4 read channels (AR, R), ID width 1 (always 0).
* :class:`AXI4LiteSplit`: one AXI4-Lite master to two slaves by an address bit.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXI4LiteSignature", "AXI4WriteSignature", "AXI4ReadSignature", "AXI4LiteSplit",
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


class AXI4LiteSplit(wiring.Component):
    """One AXI4-Lite master to two slaves by address bit ``select_bit``, through registers.

    ``s_axil`` (In, ``addr_width`` bits) -> ``m0`` (bit clear) / ``m1`` (bit
    set), each with ``select_bit`` address bits (the bits above ``select_bit`` are
    dropped). One transaction per channel at a time: ``awready``/``arready`` stay low
    until the open one's response is taken. Every output is a flip-flop (timing: master
    and slaves may be far apart on the die): a request is latched at its handshake with
    ``s_axil`` and offered to its slave from the next cycle; the slave's response is
    latched and offered to the master from the cycle after. Latency: 2 cycles more than
    the slave's on each channel. A write's address and data are taken together
    (``awready`` = ``wready``).
    """

    def __init__(self, *, addr_width, select_bit):
        if not isinstance(select_bit, int) or not 2 <= select_bit < addr_width:
            raise ValueError(f"select_bit must be an integer 2..{addr_width - 1}, "
                             f"not {select_bit!r}")
        self.select_bit = select_bit
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=addr_width)),
            "m0": Out(AXI4LiteSignature(addr_width=select_bit)),
            "m1": Out(AXI4LiteSignature(addr_width=select_bit)),
        })

    def elaborate(self, platform):
        m = Module()
        s, sb = self.s_axil, self.select_bit
        ms = (self.m0, self.m1)

        # write: IDLE (take AW+W) -> REQ (offer to the slave until both are taken) -> RESP
        # (wait for B) -> the response on s until taken
        w_busy, w_sel, aw_left, w_left, b_wait = (Signal(name=n) for n in
                                                   ("w_busy", "w_sel", "aw_left", "w_left", "b_wait"))
        m.d.comb += [s.awready.eq(~w_busy & s.wvalid), s.wready.eq(~w_busy & s.awvalid)]
        with m.If(~w_busy & s.awvalid & s.wvalid):
            m.d.sync += [w_busy.eq(1), w_sel.eq(s.awaddr[sb]), aw_left.eq(1), w_left.eq(1),
                         b_wait.eq(1)]
            for mi in ms:
                m.d.sync += [mi.awaddr.eq(s.awaddr[:sb]), mi.awprot.eq(s.awprot),
                             mi.wdata.eq(s.wdata), mi.wstrb.eq(s.wstrb)]
        for k, mi in enumerate(ms):
            mine = w_sel == k
            m.d.comb += [mi.awvalid.eq(aw_left & mine), mi.wvalid.eq(w_left & mine),
                         mi.bready.eq(b_wait & mine)]
            with m.If(mine):
                # (a handshake needs valid: a slave may hold its ready high while idle)
                with m.If(mi.awvalid & mi.awready):
                    m.d.sync += aw_left.eq(0)
                with m.If(mi.wvalid & mi.wready):
                    m.d.sync += w_left.eq(0)
                with m.If(b_wait & mi.bvalid):
                    m.d.sync += [b_wait.eq(0), s.bvalid.eq(1), s.bresp.eq(mi.bresp)]
        with m.If(s.bvalid & s.bready):
            m.d.sync += [s.bvalid.eq(0), w_busy.eq(0)]

        # read: the same with AR and R
        r_busy, r_sel, ar_left, r_wait = (Signal(name=n) for n in ("r_busy", "r_sel", "ar_left", "r_wait"))
        m.d.comb += s.arready.eq(~r_busy)
        with m.If(~r_busy & s.arvalid):
            m.d.sync += [r_busy.eq(1), r_sel.eq(s.araddr[sb]), ar_left.eq(1), r_wait.eq(1)]
            for mi in ms:
                m.d.sync += [mi.araddr.eq(s.araddr[:sb]), mi.arprot.eq(s.arprot)]
        for k, mi in enumerate(ms):
            mine = r_sel == k
            m.d.comb += [mi.arvalid.eq(ar_left & mine), mi.rready.eq(r_wait & mine)]
            with m.If(mine):
                with m.If(mi.arvalid & mi.arready):
                    m.d.sync += ar_left.eq(0)
                with m.If(r_wait & mi.rvalid):
                    m.d.sync += [r_wait.eq(0), s.rvalid.eq(1), s.rdata.eq(mi.rdata),
                                 s.rresp.eq(mi.rresp)]
        with m.If(s.rvalid & s.rready):
            m.d.sync += [s.rvalid.eq(0), r_busy.eq(0)]
        return m
