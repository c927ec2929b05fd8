"""A block RAM behind AXI4 write and read channels. See :class:`AxiRam`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In
from amaranth.utils import ceil_log2

from .axi import RESP_OKAY, AXI4ReadSignature, AXI4WriteSignature

__all__ = ["AxiRam"]


class AxiRam(wiring.Component):
    """``depth`` words of ``data_width`` bits in a block RAM, an AXI4 slave on separate
    write and read channels (they work independently: one write port, one read port).

    Addresses are byte addresses of full-width words: an access at ``addr`` is word
    ``(addr // (data_width // 8)) % depth`` (the memory repeats through the address space);
    bursts are INCR of full-width beats (``awsize``/``arsize`` and ``*burst`` are taken as
    such), ``wstrb`` selects the octets written. IDs are 0; responses are OKAY.

    Parameters
    ----------
    data_width : int
        Bits of a word (a multiple of 8).
    addr_width : int
        Bits of an address.
    depth : int
        Words (a power of 2).

    Ports
    -----
    w : In(AXI4WriteSignature(addr_width=, data_width=))
    r : In(AXI4ReadSignature(addr_width=, data_width=))

    Throughput: a write beat per cycle (single-beat bursts included: a beat is taken with
    its address); a read beat per cycle, the first a cycle after the address.
    """

    def __init__(self, *, data_width, addr_width, depth):
        if not isinstance(data_width, int) or data_width <= 0 or data_width % 8:
            raise ValueError(f"data_width must be a positive multiple of 8, not {data_width!r}")
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of 2 (at least 2), not {depth!r}")
        self._data_width = data_width
        self._depth = depth
        bus = dict(addr_width=addr_width, data_width=data_width)
        super().__init__({"w": In(AXI4WriteSignature(**bus)), "r": In(AXI4ReadSignature(**bus))})

    def elaborate(self, platform):
        m = Module()
        octets = self._data_width // 8
        m.submodules.memory = memory = Memory(shape=self._data_width, depth=self._depth,
                                              init=[])
        wr = memory.write_port(granularity=8)
        rd = memory.read_port()
        shift = ceil_log2(octets)
        index_bits = ceil_log2(self._depth)
        self._writes(m, wr, shift, index_bits)
        self._reads(m, rd, shift, index_bits)
        return m

    def _writes(self, m, wr, shift, index_bits):
        """A beat is written in the cycle it is taken: the first of a burst with its
        address (``wready`` follows ``awvalid`` then), the others at the held address; each
        burst's last beat owes a response."""
        w = self.w
        held = Signal()                         # a burst's address is taken, beats remain
        at = Signal(index_bits)
        owed = Signal(8)                        # responses owed
        beat = w.wvalid & w.wready
        take_aw = w.awvalid & w.awready
        m.d.comb += [w.awready.eq((~held | (w.wvalid & w.wlast)) & (owed != 0xFF)),
                     w.wready.eq(held | (w.awvalid & w.awready)),
                     w.bvalid.eq(owed != 0), w.bresp.eq(RESP_OKAY), w.bid.eq(0),
                     wr.addr.eq(Mux(held, at, w.awaddr[shift:][:index_bits])),
                     wr.data.eq(w.wdata), wr.en.eq(Mux(beat, w.wstrb, 0))]
        m.d.sync += owed.eq(owed + (beat & w.wlast) - (w.bvalid & w.bready))
        with m.If(beat):
            m.d.sync += at.eq(wr.addr + 1)
            with m.If(w.wlast):
                m.d.sync += held.eq(0)
        with m.If(take_aw & ~(beat & ~held)):
            # an address taken without its first beat (or while the held burst ends)
            m.d.sync += [held.eq(1), at.eq(w.awaddr[shift:][:index_bits])]
        with m.Elif(take_aw & ~w.wlast):
            m.d.sync += held.eq(1)

    def _reads(self, m, rd, shift, index_bits):
        """A burst's beats in order: the word read in the cycle its beat is made valid."""
        r = self.r
        active = Signal()
        at = Signal(index_bits)
        left = Signal(8)
        fire = active & (~r.rvalid | r.rready)
        m.d.comb += [r.arready.eq(~active), r.rresp.eq(RESP_OKAY), r.rid.eq(0),
                     rd.addr.eq(at), rd.en.eq(fire), r.rdata.eq(rd.data)]
        with m.If(r.rvalid & r.rready):
            m.d.sync += r.rvalid.eq(0)
        with m.If(r.arvalid & r.arready):
            m.d.sync += [active.eq(1), at.eq(r.araddr[shift:][:index_bits]), left.eq(r.arlen)]
        with m.If(fire):
            m.d.sync += [r.rvalid.eq(1), r.rlast.eq(left == 0), at.eq(at + 1),
                         left.eq(left - 1), active.eq(left != 0)]
