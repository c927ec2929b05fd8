"""A board's on-chip memory for the host's registered regions. See :class:`HostMemory`."""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2

from rnic.host.spec.board import HMEM_ADDR, HMEM_DATA, HMEM_SIZE
from rnic.host.spec.limits import check_width

from ..axi import (RESP_OKAY, RESP_SLVERR, AXI4LiteSignature, AXI4ReadSignature,
                   AXI4WriteSignature)
from ..axi_ram import AxiRam

__all__ = ["HostMemory"]


class HostMemory(wiring.Component):
    """``octets`` of block RAM behind the core's AXI4 masters, which the host reads and
    writes through the HMEM_* registers (:mod:`rnic.host.spec.board`) over the UART bridge:
    on a board it is the host memory of an RNIC, where registered regions, receive buffers
    and the sources of Sends and Writes live.

    The core's write port (``w``, placement) and read port (``r``, payload and Read
    Responses) are an :class:`~rnic.hdl.axi_ram.AxiRam`'s: a beat a cycle each. A host
    access is a one-beat burst put between the core's bursts, before the core's next one:
    it waits until the core's write burst has ended and its responses were taken (a
    write), or until no read beat is under way (a read); the core's bursts are never cut.
    A host read answers a few cycles after its request; every HMEM_DATA access moves
    HMEM_ADDR on by 4, so consecutive words take one request each.

    Parameters
    ----------
    width : int
        The core's datapath width W in octets (its memory word).
    octets : int
        Size of the memory, a power of 2 of at least ``4 * width``.
    addr_width : int
        Address bits of the core's AXI4 ports (the memory repeats through them).
    reg_addr_width : int
        Address bits of ``s_axil`` (the window of the bridge's bus; default 13).

    Ports
    -----
    w : In(AXI4WriteSignature(addr_width=, data_width=8 * width))
    r : In(AXI4ReadSignature(addr_width=, data_width=8 * width))
    s_axil : In(AXI4LiteSignature(addr_width=reg_addr_width))
    """

    def __init__(self, *, width, octets, addr_width=32, reg_addr_width=13):
        self.width = check_width(width)
        if (isinstance(octets, bool) or not isinstance(octets, int) or octets < 4 * width
                or octets & (octets - 1)):
            raise ValueError(f"octets must be a power of 2 of at least {4 * width}, "
                             f"not {octets!r}")
        if not isinstance(addr_width, int) or not ceil_log2(octets) <= addr_width <= 64:
            raise ValueError(f"addr_width must be an integer {ceil_log2(octets)}..64, "
                             f"not {addr_width!r}")
        self.octets = octets
        self.addr_width = addr_width
        bus = dict(addr_width=addr_width, data_width=8 * width)
        self.ram = AxiRam(depth=octets // width, **bus)
        super().__init__({"w": In(AXI4WriteSignature(**bus)), "r": In(AXI4ReadSignature(**bus)),
                          "s_axil": In(AXI4LiteSignature(addr_width=reg_addr_width))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ram = self.ram
        addr = Signal(ceil_log2(self.octets) - 2)       # HMEM_ADDR's word
        advance = Signal()                             # an HMEM_DATA access took its word
        with m.If(advance):
            m.d.sync += addr.eq(addr + 1)
        lanes = self.width // 4
        lane = addr[:ceil_log2(lanes)] if lanes > 1 else 0
        self._host_writes(m, addr, lane, advance)
        self._host_reads(m, addr, lane, advance)
        return m

    def _host_writes(self, m, addr, lane, advance):
        """HMEM_ADDR and HMEM_DATA writes; a data write is a one-beat burst into the RAM
        while the core's write channel is between bursts with no response owed."""
        s, core, ram = self.s_axil, self.w, self.ram.w
        taken = Signal()                     # the request is in, its answer not yet
        word = Signal(32)
        issue = Signal()                     # an HMEM_DATA write waits for the RAM
        owed_host = Signal()                 # its response comes next from the RAM
        core_burst = Signal()                # the core's burst has its address taken
        core_owed = Signal(9)                # the core's responses owed
        grant = issue & ~core_burst & (core_owed == 0) & ~owed_host
        strobe = Const(0xF, self.width) << (lane * 4) if self.width > 4 else 0xF
        m.d.comb += [s.awready.eq(~taken & s.wvalid), s.wready.eq(~taken & s.awvalid)]
        with m.If(~taken & s.awvalid & s.wvalid):
            m.d.sync += taken.eq(1)
            with m.Switch(s.awaddr):
                with m.Case(HMEM_ADDR):
                    m.d.sync += [addr.eq(s.wdata[2:]), s.bvalid.eq(1), s.bresp.eq(RESP_OKAY)]
                with m.Case(HMEM_DATA):
                    m.d.sync += [word.eq(s.wdata), issue.eq(1)]
                with m.Default():
                    m.d.sync += [s.bvalid.eq(1), s.bresp.eq(RESP_SLVERR)]
        with m.If(s.bvalid & s.bready):
            m.d.sync += [s.bvalid.eq(0), taken.eq(0)]

        # the core's channels pass through, but in a cycle the host has them
        core_beat = core.wvalid & core.wready
        m.d.comb += [
            ram.awvalid.eq(Mux(grant, 1, core.awvalid)),
            ram.awaddr.eq(Mux(grant, addr << 2, core.awaddr)),
            ram.awlen.eq(Mux(grant, 0, core.awlen)),
            ram.awsize.eq(core.awsize), ram.awburst.eq(core.awburst), ram.awid.eq(0),
            ram.wvalid.eq(Mux(grant, 1, core.wvalid)),
            ram.wdata.eq(Mux(grant, word.replicate(self.width // 4), core.wdata)),
            ram.wstrb.eq(Mux(grant, strobe, core.wstrb)),
            ram.wlast.eq(grant | core.wlast),
            core.awready.eq(ram.awready & ~grant), core.wready.eq(ram.wready & ~grant),
            ram.bready.eq(Mux(owed_host, 1, core.bready)),
            core.bvalid.eq(ram.bvalid & ~owed_host), core.bresp.eq(ram.bresp), core.bid.eq(0),
        ]
        # core_burst follows the RAM's own "held" (AxiRam._writes): an address taken whose
        # beats have not all come
        core_aw = core.awvalid & core.awready
        with m.If(core_beat & core.wlast):
            m.d.sync += core_burst.eq(0)
        with m.If(core_aw & ~(core_beat & ~core_burst)):
            m.d.sync += core_burst.eq(1)
        with m.Elif(core_aw & ~core.wlast):
            m.d.sync += core_burst.eq(1)
        m.d.sync += core_owed.eq(core_owed + (core_beat & core.wlast)
                                 - (core.bvalid & core.bready))
        with m.If(grant):
            m.d.comb += advance.eq(1)
            m.d.sync += [issue.eq(0), owed_host.eq(1)]
        with m.If(owed_host & ram.bvalid):
            m.d.sync += [owed_host.eq(0), s.bvalid.eq(1), s.bresp.eq(RESP_OKAY)]

    def _host_reads(self, m, addr, lane, advance):
        """HMEM_SIZE, HMEM_ADDR and HMEM_DATA reads; a data read is a one-beat burst from
        the RAM while no read beat is under way."""
        s, core, ram = self.s_axil, self.r, self.ram.r
        taken = Signal()
        issue = Signal()                     # an HMEM_DATA read waits for the RAM
        host_owns = Signal()                 # the RAM's burst under way is the host's
        read_lane = Signal(range(self.width // 4)) if self.width > 4 else 0
        # the RAM takes an address when no burst is active; no beat may wait either, as
        # the owner of the beats changes with the address taken
        grant = issue & ram.arready & ~ram.rvalid
        m.d.comb += s.arready.eq(~taken)
        with m.If(~taken & s.arvalid):
            m.d.sync += taken.eq(1)
            with m.Switch(s.araddr):
                with m.Case(HMEM_SIZE):
                    m.d.sync += [s.rvalid.eq(1), s.rdata.eq(self.octets), s.rresp.eq(RESP_OKAY)]
                with m.Case(HMEM_ADDR):
                    m.d.sync += [s.rvalid.eq(1), s.rdata.eq(addr << 2), s.rresp.eq(RESP_OKAY)]
                with m.Case(HMEM_DATA):
                    m.d.sync += issue.eq(1)
                with m.Default():
                    m.d.sync += [s.rvalid.eq(1), s.rdata.eq(0), s.rresp.eq(RESP_SLVERR)]
        with m.If(s.rvalid & s.rready):
            m.d.sync += [s.rvalid.eq(0), taken.eq(0)]

        m.d.comb += [
            ram.arvalid.eq(Mux(grant, 1, core.arvalid)),
            ram.araddr.eq(Mux(grant, addr << 2, core.araddr)),
            ram.arlen.eq(Mux(grant, 0, core.arlen)),
            ram.arsize.eq(core.arsize), ram.arburst.eq(core.arburst), ram.arid.eq(0),
            core.arready.eq(ram.arready & ~grant),
            ram.rready.eq(Mux(host_owns, 1, core.rready)),
            core.rvalid.eq(ram.rvalid & ~host_owns), core.rdata.eq(ram.rdata),
            core.rlast.eq(ram.rlast), core.rresp.eq(ram.rresp), core.rid.eq(0),
        ]
        with m.If(ram.arvalid & ram.arready):
            m.d.sync += host_owns.eq(grant)
        with m.If(grant):
            m.d.comb += advance.eq(1)
            m.d.sync += issue.eq(0)
            if self.width > 4:
                m.d.sync += read_lane.eq(lane)
        with m.If(host_owns & ram.rvalid):
            m.d.sync += [s.rvalid.eq(1), s.rresp.eq(RESP_OKAY),
                         s.rdata.eq(ram.rdata.word_select(read_lane, 32))]
