"""The register bank: AXI4-Lite slave generated from the register map (:mod:`rnic.host.spec.regmap`).

See :class:`RegisterBank`; its bus is :class:`rnic.hdl.axi.AXI4LiteSignature`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import PULSE, REGMAP, RO, RW, W1C, RegisterMap

from .axi import RESP_OKAY, RESP_SLVERR, AXI4LiteSignature
from .global_buffer import on_global_network
from .synth_hints import register_copies

__all__ = ["RegisterBank", "core_signature", "block_signature", "NETWORK_BLOCK", "TCP_BLOCK"]

#: Title of the register map's block whose fields the network blocks use.
NETWORK_BLOCK = "Network"
#: Title of the register map's block whose fields the TCP engine uses.
TCP_BLOCK = "TCP"


def core_signature(regmap=REGMAP, *, registers=None):
    """Core-side signature of the bank for ``regmap``, seen from the bank.

    ``registers`` (names) limits it to those registers (see :func:`block_signature`).

    One member per register that has core-facing fields (lower-case register
    name), holding one member per field (lower-case field name):
    ``Out(width)`` for RW and PULSE fields, ``In(width)`` for RO fields from
    the core, and for W1C fields ``Out(width)`` (the sticky value) plus
    ``In(width)`` named ``<field>_set``. Constant and build-parameter fields
    have no member.
    """
    regs = {}
    for r in regmap:
        if registers is not None and r.name not in registers:
            continue
        members = {}
        for f in r.fields:
            if not f.core_facing:
                continue
            if f.access is RW:
                members[f.port] = Out(f.width, init=f.reset)
            elif f.access is PULSE:
                members[f.port] = Out(f.width)
            elif f.access is RO:
                members[f.port] = In(f.width)
            elif f.access is W1C:
                members[f.port] = Out(f.width, init=f.reset)
                members[f.port + "_set"] = In(f.width)
        if members:
            regs[r.port] = Out(wiring.Signature(members))
    return wiring.Signature(regs)


def block_signature(title, regmap=REGMAP):
    """The part of :func:`core_signature` that holds the registers of the block ``title``
    (the same members, seen from the bank): what a design passes on to the blocks that
    implement them, e.g. ``RnicCore.net`` (block :data:`NETWORK_BLOCK`)."""
    for b in regmap.blocks:
        if b.title == title:
            return core_signature(regmap, registers={r.name for r in b.registers})
    raise KeyError(f"the register map has no block {title!r}")


class RegisterBank(wiring.Component):
    """AXI4-Lite register bank for the RNIC register map, generated at elaboration.

    Parameters (keyword-only, checked against :data:`rnic.host.spec.regmap.PARAMS`)
    ----------
    width : int
        Datapath width W in octets (4, 8, 16, 32), reported in VERSION.WIDTH.
    connections : int
        Connection contexts (1 .. 65535), reported in CAPS.CONNECTIONS.
    stags : int
        STag table rows (1 .. 65535, default 256), reported in CAPS.STAGS.
    network : int
        1 in a design with the network layer, 0 (default) without; reported in
        NET_CAPS.NETWORK. Without it the other Network registers read 0 and ignore writes
        (no storage, no ports: :meth:`rnic.host.spec.regmap.RegisterMap.decoded`).
    arp_entries : int
        ARP cache slots (0 .. 64, default 0), reported in NET_CAPS.ARP_ENTRIES.
    ird_depth, ord_depth : int
        RDMA Read Requests the core holds per connection inbound and outbound (0 .. 65535,
        default 0: not reported), in QUEUE_CAPS.IRD and .ORD.
    regmap : RegisterMap
        The map (default :data:`rnic.host.spec.regmap.REGMAP`).

    Ports
    -----
    s_axil : In(AXI4LiteSignature(addr_width=12))
        The bus (32-bit data, byte addresses, 4 KiB window). Verilog port
        names ``s_axil__awaddr`` .. ``s_axil__rready``; with cocotbext-axi:
        ``AxiLiteBus.from_prefix(dut, "s_axil_")`` (its separator ``_`` makes
        ``s_axil__awaddr``). ``awprot``/``arprot`` are accepted and ignored.
    regs : Out(core_signature(regmap))
        The core side, by register and field name: ``regs.ctrl.enable``
        (RW, out), ``regs.ctx_cmd.commit`` (PULSE, out), ``regs.status.ready``
        (RO, in), ``regs.err_status.pending`` (W1C value, out) and
        ``regs.err_status.pending_set`` (W1C set, in). Verilog:
        ``regs__ctrl__enable``, ... Connect the core by name.

    Behaviour
    ---------
    As documented in :data:`rnic.host.spec.regmap.ACCESS_DOC` and :data:`rnic.host.spec.regmap.BUS_DOC`:
    RW fields are registers (reset to their map reset value by ``rst``) that
    drive their output; byte strobes select the bytes written. PULSE outputs
    are registered and high for exactly one cycle, carrying the written
    value; reads return 0. W1C fields: ``value <= (value & ~clear) | set``
    every cycle, ``clear`` being the written 1 bits of strobed bytes (set
    wins). RO inputs are sampled in the cycle after the read address is accepted.
    Unmapped addresses: SLVERR, reads return 0, writes do nothing; writes to
    RO registers: OKAY, nothing changes. Reads have no side effects. The soft
    reset (CTRL.SOFT_RESET) is only a pulse to the core: the bank keeps its
    values (only ``rst`` resets it).

    Timing
    ------
    Write channel: ``awready`` and ``wready`` are raised together, in a cycle
    where ``awvalid`` and ``wvalid`` are both high and no write is under way
    or awaiting its response (allowed by AXI: a slave may wait for both
    valids). The write takes effect two cycles after the handshake (the
    address, data and strobes are registered, then the address is decoded
    into registered per-register hit flags): at the end of the second cycle
    after it RW/W1C outputs change and ``bvalid`` is set, so PULSE outputs
    and ``bvalid`` are high together in the third cycle after the handshake
    (3 cycles from handshake to response); ``bvalid`` is held until
    ``bready``. A write is done when its response arrives. Read channel: ``arready``
    is high while ``arvalid`` and no read is under way; ``rdata``/``rvalid``
    follow four cycles later (the address, then the read data mux in three
    register levels; RO inputs are sampled in the cycle after the handshake),
    held until ``rready``. The channels are independent: a read and a write
    can be under way together (the read sees the old or the new value).
    Throughput: one write every 4 cycles and one read every 5 cycles when the
    master's ready/valid are always high.
    """

    def __init__(self, *, width, connections, stags=256, network=0, arp_entries=0,
                 ird_depth=0, ord_depth=0, regmap=REGMAP):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"regmap must be a RegisterMap, not {regmap!r}")
        self.params = {"width": width, "connections": connections, "stags": stags,
                       "network": network, "arp_entries": arp_entries,
                       "ird_depth": ird_depth, "ord_depth": ord_depth}
        regmap.check_params(self.params)
        # a build without the network layer decodes its registers as constants (read 0)
        regmap = regmap.decoded(self.params)
        self.regmap = regmap
        self.width = width
        self.connections = connections
        self.stags = stags
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=regmap.addr_width)),
            "regs": Out(core_signature(regmap)),
        })

    def _port(self, r, f, suffix=""):
        return getattr(getattr(self.regs, r.port), f.port + suffix)

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil
        amap = self.regmap
        word_bits = slice(2, amap.addr_width)

        # ---- write channel
        # Three stages, for timing (the bus master and the registers are far apart on a
        # board, and the decode fans out to every register): the handshake only latches the
        # word address, data and strobes; the next cycle decodes the address into one
        # registered hit flag per register; the cycle after, the hit register takes the
        # data, the pulses are raised and the response is set (bvalid from the next cycle).
        wr_go = Signal()
        wr_s1 = Signal()                        # address, data and strobes are registered
        wr_s2 = Signal()                        # the hit flags are registered: write
        m.d.comb += [
            wr_go.eq(bus.awvalid & bus.wvalid & ~bus.bvalid & ~wr_s1 & ~wr_s2),
            bus.awready.eq(wr_go),
            bus.wready.eq(wr_go),
        ]
        m.d.sync += [wr_s1.eq(wr_go), wr_s2.eq(wr_s1)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        w_word = Signal(amap.addr_width - 2)
        w_data = Signal(32)
        w_strb = Signal(4)
        with m.If(wr_go):
            m.d.sync += [w_word.eq(bus.awaddr[word_bits]), w_data.eq(bus.wdata),
                         w_strb.eq(bus.wstrb)]
        hit = {r.name: Signal(name=f"wr_hit_{r.port}") for r in amap}
        m.d.sync += [h.eq(0) for h in hit.values()]
        with m.If(wr_s1):
            with m.Switch(w_word):
                for r in amap:
                    with m.Case(r.addr >> 2):
                        m.d.sync += hit[r.name].eq(1)
        # Whether the address is mapped, per group of 2**GROUP_BITS words, registered with
        # the hit flags; the response ORs the groups (timing: one flag decoded from every
        # register's address compare would be a long path).
        gb = self.GROUP_BITS
        mapped = {}
        for r in amap:
            word = r.addr >> 2
            mapped[word >> gb] = mapped.get(word >> gb, 0) | 1 << (word & ((1 << gb) - 1))
        w_mapped = Signal(len(mapped))
        with m.If(wr_s1):
            m.d.sync += [w_mapped[k].eq((w_word[gb:] == group)
                                        & Const(members, 1 << gb).bit_select(w_word[:gb], 1))
                         for k, (group, members) in enumerate(mapped.items())]
        with m.If(wr_s2):
            m.d.sync += [bus.bvalid.eq(1),
                         bus.bresp.eq(Mux(w_mapped.any(), RESP_OKAY, RESP_SLVERR))]

        # Byte-lane enable of each bit of the written word.
        bit_en = Signal(32)
        m.d.comb += bit_en.eq(Cat(*(w_strb[i].replicate(8) for i in range(4))))
        wdata = Signal(32)
        m.d.comb += wdata.eq(w_data & bit_en)

        for r in amap:
            for f in r.fields:
                bits = slice(f.offset, f.offset + f.width)
                if f.access is RW:
                    out = self._port(r, f)
                    # per byte lane covered by the field
                    lo = f.offset
                    while lo <= f.msb:
                        hi = min(f.msb + 1, (lo // 8 + 1) * 8)
                        with m.If(hit[r.name] & w_strb[lo // 8]):
                            m.d.sync += out[lo - f.offset:hi - f.offset].eq(w_data[lo:hi])
                        lo = hi
                elif f.access is PULSE:
                    m.d.sync += self._port(r, f).eq(Mux(hit[r.name], wdata[bits], 0))
                elif f.access is W1C:
                    value = self._port(r, f)
                    clear = Mux(hit[r.name], wdata[bits], 0)
                    m.d.sync += value.eq((value & ~clear) | self._port(r, f, "_set"))

        # ---- read channel
        # Four register levels, for timing: the accept cycle registers the word address (the
        # master's address and handshake then feed no decode); the next cycle each group of
        # 2**GROUP_BITS registers (same word address >> GROUP_BITS) selects its member by the
        # low address bits into a group register (the core's RO inputs go through one 8:1
        # mux only); the cycle after, each set of 2**SET_BITS groups selects its group into a
        # set register; the cycle after that, the set is selected into rdata. Reads answer
        # four cycles after the address handshake.
        rd_go = Signal()
        rd_s1 = Signal()                        # the address is registered: select members
        rd_s2 = Signal()                        # the members are registered: select groups
        rd_s3 = Signal()                        # the groups are registered: select the set
        m.d.comb += [
            rd_go.eq(bus.arvalid & ~bus.rvalid & ~rd_s1 & ~rd_s2 & ~rd_s3),
            bus.arready.eq(rd_go),
        ]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        m.d.sync += [rd_s1.eq(rd_go), rd_s2.eq(rd_s1), rd_s3.eq(rd_s2)]
        gb, sb = self.GROUP_BITS, self.SET_BITS
        word = bus.araddr[word_bits]
        # The group's address bits (the upper word address: unmapped ones too), registered
        # level by level; the level's own low bits select within it.
        group = Signal(len(word) - gb)
        group_sel = Signal(len(word) - gb)
        set_sel = Signal(len(word) - gb - sb)
        with m.If(rd_go):
            m.d.sync += group.eq(word[gb:])
        with m.If(rd_s1):
            m.d.sync += group_sel.eq(group)
        with m.If(rd_s2):
            m.d.sync += set_sel.eq(group_sel[sb:])
        # Each group selects its member with its own copy of the low word bits (timing: one
        # register feeding every group's multiplexer would have a large fanout); they are
        # loaded before any read uses them.
        registers = {r.addr >> 2: (self._read_value(r), 1) for r in amap}
        group_keys = list(dict.fromkeys(a >> gb for a in registers))
        member = dict(zip(group_keys, register_copies(gb, len(group_keys), name="rd_member")))
        for copy in member.values():
            with m.If(rd_go):
                m.d.sync += copy.eq(word[:gb])
        # (the enable of every group register, which the core's inputs spread across the
        # die: on a global network, GlobalBuffer)
        group_load = on_global_network(m, rd_s1, name="rd_group_load")
        groups = self._mux_level(m, group_load, registers, gb, lambda g: member[g], "rd_group")
        sets = self._mux_level(m, rd_s2, groups, sb, lambda t: group_sel[:sb], "rd_set")
        with m.If(rd_s3):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(0), bus.rresp.eq(RESP_SLVERR)]
            with m.Switch(set_sel):
                for t, (data, hit) in sets.items():
                    with m.Case(t):
                        m.d.sync += [bus.rdata.eq(data), bus.rresp.eq(Mux(hit, RESP_OKAY, RESP_SLVERR))]
        return m

    @staticmethod
    def _mux_level(m, enable, items, bits, select, name):
        """One register level of the read data multiplexer.

        ``items`` maps an address (in words at the first level, in groups above) to its
        ``(data, hit)``; the items whose addresses agree above the low ``bits`` form a
        group, which selects its member by ``select(group)`` (the low ``bits``) into two
        registers, loaded while ``enable``: the data (0 when no member matches) and the hit
        flag. Returns ``{group: (data, hit)}`` for the next level.
        """
        groups = {}
        for addr, item in items.items():
            groups.setdefault(addr >> bits, []).append((addr & ((1 << bits) - 1), item))
        out = {}
        for g, members in groups.items():
            data, hit = Signal(32, name=f"{name}{g}"), Signal(name=f"{name}_hit{g}")
            with m.If(enable):
                m.d.sync += [data.eq(0), hit.eq(0)]
                with m.Switch(select(g)):
                    for low, (value, present) in members:
                        with m.Case(low):
                            m.d.sync += [data.eq(value), hit.eq(present)]
            out[g] = (data, hit)
        return out

    #: Registers per group of the read data's first mux level (log2).
    GROUP_BITS = 3
    #: Groups per set of the second level (log2).
    SET_BITS = 3

    def _read_value(self, r):
        parts = []
        pos = 0
        for f in r.fields:          # sorted by offset
            if f.offset > pos:
                parts.append(Const(0, f.offset - pos))
            if f.access is PULSE:
                parts.append(Const(0, f.width))
            elif f.const:
                parts.append(Const(f.reset, f.width))
            elif f.param:
                parts.append(Const(self.params[f.param], f.width))
            else:
                parts.append(self._port(r, f))
            pos = f.offset + f.width
        if pos < 32:
            parts.append(Const(0, 32 - pos))
        return Cat(*parts)
