"""Traffic for the core on a board: a pseudo-random ULPDU source and a signature register
that takes everything a sink sees, so that the whole data path is exercised and nothing of
it is optimised away."""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, Value

from ..beat import conn_bits

__all__ = ["Lfsr", "Signature32", "UlpduSource"]


class Lfsr(Elaboratable):
    """32-bit Galois LFSR (x^32 + x^22 + x^2 + x + 1): ``value`` starts at ``seed`` (not 0)
    and steps every cycle ``en`` is high."""

    TAPS = 0x80200003

    def __init__(self, *, seed=0xACE1_2468):
        if not isinstance(seed, int) or not 0 < seed < 1 << 32:
            raise ValueError(f"seed must be a nonzero 32-bit integer, not {seed!r}")
        self.seed = seed
        self.en = Signal(init=1)
        self.value = Signal(32, init=seed)

    def elaborate(self, platform):
        m = Module()
        v = self.value
        with m.If(self.en):
            m.d.sync += v.eq(Mux(v[0], (v >> 1) ^ self.TAPS, v >> 1))
        return m


def _fold(value, width=32):
    """XOR of the ``width``-bit slices of ``value`` (zero-padded)."""
    value = Value.cast(value)
    out = Const(0, width)
    for i in range(0, len(value), width):
        chunk = value[i:i + width]
        out = out ^ chunk
    return out


class Signature32(Elaboratable):
    """32-bit multiple-input signature register: ``sig <= rotl(sig, 1) ^ fold(data)`` when ``en``."""

    def __init__(self, width):
        self.data = Signal(width)
        self.en = Signal()
        self.value = Signal(32)

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.value.eq(Cat(self.value[31], self.value[:31]) ^ _fold(self.data))
        return m


class UlpduSource(Elaboratable):
    """Pseudo-random ULPDUs for a ``tx_ulpdu`` stream of any layout with the usual fields.

    Drives, when the layout has them: ``data`` (LFSR words; each ULPDU starts
    with the octets 0x41 0x43, a DDP untagged/last control octet and an RDMAP
    Send, so that a receiver checking the DDP header length accepts it),
    ``n``, ``first``, ``last``, ``conn`` (LFSR & ``conn_mask``, below
    ``connections``), ``length`` (18..1041 octets, on every beat of the
    ULPDU); other fields are 0. A ULPDU, once started, is finished even if
    ``enable`` drops; ``enable`` acts a cycle late. The output is registered.
    """

    MIN_LENGTH = 18              # an untagged DDP header
    DDP_CONTROL = 0x41
    RDMAP_CONTROL = 0x43

    def __init__(self, stream_port, *, width, connections):
        self.port = stream_port
        self.width = width
        self.connections = connections
        self.enable = Signal()
        self.conn_mask = Signal(16, init=0xFFFF)
        self.beats = Signal(32)

    def elaborate(self, platform):
        m = Module()
        m.submodules.lfsr = lfsr = Lfsr(seed=0x1234_5678)
        m.d.comb += lfsr.en.eq(0)
        W = self.width
        port = self.port
        layout = port.payload.shape()
        fields = dict(layout) if hasattr(layout, "__iter__") else {}

        left = Signal(16)                   # octets left in the current ULPDU (0: between ULPDUs)
        length = Signal(16)
        conn = Signal(conn_bits(self.connections))
        busy = Signal()
        # the next ULPDU's length and whether it is more than one beat, registered from the
        # LFSR every cycle (timing: no adder and compare in front of the beat logic); a
        # length may so come from the LFSR's value of the cycle before, which is as random
        lfsr_len = Signal(16)
        m.d.comb += lfsr_len.eq(lfsr.value[4:14] + self.MIN_LENGTH)
        new_len = Signal(16)
        new_multi = Signal()
        m.d.sync += [new_len.eq(lfsr_len), new_multi.eq(lfsr_len > W)]
        left_multi = Signal()               # left > W
        new_conn = Signal.like(conn)
        raw = lfsr.value[16:16 + len(conn)] & self.conn_mask[:len(conn)]
        if self.connections & (self.connections - 1):
            m.d.comb += new_conn.eq(Mux(raw < self.connections, raw, raw - self.connections))
        else:
            m.d.comb += new_conn.eq(raw)

        cur_len = Mux(busy, length, new_len)
        cur_left = Mux(busy, left, new_len)
        cur_multi = Mux(busy, left_multi, new_multi)
        n = Mux(cur_multi, W, cur_left)
        words = Cat(*[lfsr.value ^ (0x9E3779B9 * (i + 1) & 0xFFFFFFFF)
                      for i in range((8 * W + 31) // 32)])
        # a ULPDU starts like a DDP segment: untagged + last, DV 1; RDMAP Send
        header = Cat(Const(self.DDP_CONTROL, 8), Const(self.RDMAP_CONTROL, 8), words[16:8 * W])
        values = {
            "data": Mux(busy, words[:8 * W], header),
            "n": n,
            "first": ~busy,
            "last": ~cur_multi,
            "conn": Mux(busy, conn, new_conn),
            "length": cur_len,
        }
        # generated beat -> output register (so that nothing combinational reaches the core)
        gen = Signal(layout)
        for name in fields:
            m.d.comb += getattr(gen, name).eq(values.get(name, 0))
        out_valid = Signal()
        out_payload = Signal(layout)
        m.d.comb += [port.valid.eq(out_valid), port.payload.eq(out_payload)]
        # the enable comes from the register bank across the die: registered here first
        # (timing: it gates the clock enables of every register below)
        enable = Signal()
        m.d.sync += enable.eq(self.enable)
        gen_valid = busy | enable
        load = ~out_valid | port.ready
        with m.If(port.valid & port.ready):
            m.d.sync += self.beats.eq(self.beats + 1)
        with m.If(load):
            m.d.sync += [out_valid.eq(gen_valid), out_payload.eq(gen)]
        with m.If(load & gen_valid):
            m.d.comb += lfsr.en.eq(1)
            with m.If(~cur_multi):
                m.d.sync += busy.eq(0)
            with m.Else():
                m.d.sync += [busy.eq(1), left.eq(cur_left - W), left_multi.eq(cur_left > 2 * W),
                             length.eq(cur_len), conn.eq(Mux(busy, conn, new_conn))]
        return m
