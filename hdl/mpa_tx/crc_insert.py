"""CRC stage of the TX framer: the running CRC32c over the lanes, CRC lanes filled in."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import OctetBeat, check_width
from ..crc32c import crc32c_lanes
from .layouts import LaneBeat

__all__ = ["MpaTxCrcInsert"]


class MpaTxCrcInsert(wiring.Component):
    """CRC stage and output register of the TX framer.

    The running CRC32c register of the current FPDU goes over the lanes of each beat,
    restarting where an FPDU starts; a CRC lane gets the complemented register (zeros if
    the connection sends no CRC). For W <= 16 the register after each lane is built in
    closed form (:func:`~rnic.hdl.crc32c.crc32c_lanes`), so the register feeds back through
    one XOR tree; for wider beats the lanes are chained.

    A skid register behind the output register takes a beat only while ``o`` is stalled,
    so that ``o.ready`` reaches no logic but the output and skid registers, and
    ``i.ready`` is a register.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connections (width of ``conn``).

    Ports
    -----
    i : In(stream.Signature(LaneBeat))
        From the lane stage.
    o : Out(stream.Signature(OctetBeat))
        The framer's output.

    Latency 1 (the output register), throughput one beat per cycle while ``o.ready``.
    FPDU boundaries: the CRC restarts at each lane flagged ``start``.
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        super().__init__({
            "i": In(stream.Signature(LaneBeat(width=width, connections=connections))),
            "o": Out(stream.Signature(OctetBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        L = self.width // 4
        r = self.i.payload
        sk_valid = Signal()              # the skid register holds a beat
        r_move = Signal()
        m.d.comb += [self.i.ready.eq(~sk_valid), r_move.eq(self.i.valid & self.i.ready)]
        crc = Signal(32)
        r_lanes = [r.words[32 * k:32 * k + 32] for k in range(L)]
        cins, state = crc32c_lanes(m, crc, r_lanes, [r.start[k] for k in range(L)],
                                   unroll=L <= 4)
        lanes_out = [Mux(r.crc[k], Mux(r.crcen, ~cins[k], 0), r_lanes[k]) for k in range(L)]
        op = self.o.payload
        new_beat = Signal.like(op)
        sk_beat = Signal.like(op)
        m.d.comb += [
            new_beat.data.eq(Cat(*lanes_out)), new_beat.n.eq(r.n), new_beat.first.eq(r.first),
            new_beat.last.eq(r.last), new_beat.conn.eq(r.conn),
        ]
        with m.If(r_move):
            m.d.sync += crc.eq(state)
        with m.If(~self.o.valid | self.o.ready):
            with m.If(sk_valid):
                m.d.sync += [self.o.valid.eq(1), op.eq(sk_beat), sk_valid.eq(0)]
            with m.Elif(r_move):
                m.d.sync += [self.o.valid.eq(1), op.eq(new_beat)]
            with m.Else():
                m.d.sync += self.o.valid.eq(0)
        with m.Elif(r_move):             # o is stalled: the beat waits in the skid register
            m.d.sync += [sk_valid.eq(1), sk_beat.eq(new_beat)]
        return m
