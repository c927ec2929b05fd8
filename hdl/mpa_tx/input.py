"""Input stages of the TX framer: ULPDU beats in, data words (length field in front) out."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import check_width, conn_bits
from .layouts import MpaTxBeat, WordGroup

__all__ = ["fpdu_start_signature", "MpaTxInput"]


def fpdu_start_signature(connections):
    """An FPDU's first beat is accepted (seen from the input stage): ``valid`` for one
    cycle, the ULPDU's ``conn`` and ``length``."""
    return wiring.Signature({"valid": Out(1), "conn": Out(conn_bits(connections)),
                             "length": Out(16)})


class MpaTxInput(wiring.Component):
    """Input registers R, A and B of the TX framer.

    R holds the beat as it came, so that the FPDU's start context (read and computed in
    the two cycles after the accept, from ``start``) is in a register before the FPDU's
    first word reaches B. A shifts the ULPDU octets by 2 (the ULPDU_Length field goes in
    front; a 2-octet carry holds the tail of the previous beat) and zero-masks past ``n``,
    giving up to W/4 + 1 data words per input beat (the last beat of a ULPDU may spill
    one word). B delays them one more cycle and offers them to the word buffer.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connections (width of ``conn``).
    buffer_words : int
        Size of the word buffer.

    Ports
    -----
    i : In(stream.Signature(MpaTxBeat))
        The framer's input.
    o : Out(stream.Signature(WordGroup))
        Register B's words; the buffer takes them when they fit whatever it gives out.
    start : Out(fpdu_start_signature)
        A ULPDU's first beat is accepted on ``i``.
    next_room : Out(range(buffer_words + 1))
        ``o.room`` of the next cycle (of the group in A if it moves to B).
    next_same : Out(1)
        The ULPDU after B's words (in B, else A, else R with its first beat) is of the same
        connection as the ULPDU before it: a run may wait for it.

    Latency 3 (R, A, B), throughput one beat per cycle. ``i.ready`` depends on registers
    only. ULPDU boundaries: a ULPDU's words start a new group (``sof``); the ULPDU after
    it starts in the next beat.
    """

    def __init__(self, *, width, connections, buffer_words):
        self.width = check_width(width)
        self.buffer_words = buffer_words
        super().__init__({
            "i": In(stream.Signature(MpaTxBeat(width=width, connections=connections))),
            "o": Out(stream.Signature(WordGroup(width=width, connections=connections,
                                                buffer_words=buffer_words))),
            "start": Out(fpdu_start_signature(connections)),
            "next_room": Out(range(buffer_words + 1)),
            "next_same": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, L, CAP = self.width, self.width // 4, self.buffer_words
        ip = self.i.payload
        # R: the input beat, registered
        r_valid = Signal()
        rb = Signal.like(ip, name="r_beat")
        r_move = Signal()
        in_accept = Signal()
        # A: 2-octet shift
        a_valid = Signal()
        a = Signal(self.o.payload.shape(), name="a")     # (its room is left 0: B computes it)
        carry = Signal(16)
        # B: the group offered to the buffer
        b_valid = self.o.valid
        b = self.o.payload
        b_push = Signal()
        a_move = Signal()
        m.d.comb += [
            b_push.eq(self.o.valid & self.o.ready),
            a_move.eq(a_valid & (~b_valid | b_push)),
            r_move.eq(r_valid & (~a_valid | a_move)),
            self.i.ready.eq(~r_valid | r_move),
            in_accept.eq(self.i.valid & self.i.ready),
            self.start.valid.eq(in_accept & ip.first),
            self.start.conn.eq(ip.conn),
            self.start.length.eq(ip.length),
        ]
        # ``i_same``: R's beat continues the connection of the last beat A took. Registered
        # with the beat (timing: ``next_same`` heads the word buffer's run logic): while R
        # holds a beat A takes nothing else, so the last beat A took is the one before it:
        # R's, if R's moves on in the accept cycle, else A's.
        i_same = Signal()
        i_first_same = Signal()          # and it is a ULPDU's first beat
        with m.If(in_accept):
            same_now = ip.conn == Mux(r_move, rb.conn, a.conn)
            m.d.sync += [r_valid.eq(1), rb.eq(ip), i_same.eq(same_now),
                         i_first_same.eq(ip.first & same_now)]
        with m.Elif(r_move):
            m.d.sync += r_valid.eq(0)

        carry_in = Mux(rb.first, Cat(rb.length[8:16], rb.length[0:8]), carry)
        lanes = [Mux(rb.n > k, rb.data[8 * k:8 * k + 8], 0) for k in range(W)]
        with m.If(r_move):
            m.d.sync += [
                a_valid.eq(1),
                a.data.eq(Cat(carry_in, *lanes, Const(0, 16))),
                a.cnt.eq(Mux(rb.last, (rb.n + 5) >> 2, L)),
                a.sof.eq(rb.first),
                a.eof.eq(rb.last),
                a.conn.eq(rb.conn),      # also: connection of the last accepted beat
                a.same.eq(i_same),
                carry.eq(rb.data[8 * W - 16:]),
            ]
        with m.Elif(a_move):
            m.d.sync += a_valid.eq(0)
        with m.If(a_move):
            m.d.sync += [
                b_valid.eq(1), b.data.eq(a.data), b.cnt.eq(a.cnt), b.room.eq(CAP - a.cnt),
                b.sof.eq(a.sof),
                b.eof.eq(a.eof), b.conn.eq(a.conn), b.same.eq(a.same),
            ]
        with m.Elif(b_push):
            m.d.sync += b_valid.eq(0)
        m.d.comb += [
            self.next_room.eq(Mux(a_move, CAP - a.cnt, b.room)),
            self.next_same.eq(Mux(b_valid, b.same,
                                  Mux(a_valid, a.same, r_valid & i_first_same))),
        ]
        return m
