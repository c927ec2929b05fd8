"""The control buffer: per connection, the QN 1 (Read Request) and QN 2 (Terminate) messages."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ..beat import conn_bits
from ..synth_hints import no_rw_collision
from .layouts import CTL_BYTES, QN2_BASE
from .sequencer import Step

__all__ = ["ControlWrite", "ControlBuffer"]


class ControlWrite(data.StructLayout):
    """A placement write into the segment's connection's control buffer: ``row`` of its
    buffer, ``data`` with byte enables ``strb``."""

    def __init__(self, *, width):
        super().__init__({"row": unsigned(7), "data": unsigned(8 * width), "strb": unsigned(width)})


class ControlBuffer(wiring.Component):
    """``96 / width`` rows per connection (block RAM): the QN 1 message at octets 0..31, the
    QN 2 message at 32..95, placed like any untagged payload, read back whole when its last
    segment has arrived, zeroed on a restart and after each Read Request.

    Ports
    -----
    state : In(Step)
    place : In(stream(ControlWrite), always ready)
        The placer's writes (PLACE).
    conn : In(conn)
        The segment's connection.
    request_conn : In(conn)
        The restarted connection (CLEAR_CONTROL zeroes its rows).
    qn : In(2)
        The segment's queue number: READ_MESSAGE reads back 32 (QN 1) or 64 (QN 2) octets.
    rrq_done : In(1)
        The Read Request went out: CLEAR_READ_REQUEST zeroes the QN 1 rows.
    clear_last : Out(1)
        The last row to zero (CLEAR_CONTROL, CLEAR_READ_REQUEST).
    message : Out(8 * 64)
        The message read back (octet 0 in bits 0..7), complete in CHECK_MESSAGE.
    read_last : Out(1)
        In READ_MESSAGE: its last cycle (READ_MESSAGE lasts the message's rows + 2 cycles:
        the read port, then a register).
    last : In(1)
        The segment's L bit: FINISH_UNTAGGED of the last segment of a QN 1 / QN 2 message
        starts the read back (READ_MESSAGE follows).

    Writes are registered in front of the memory's write port (timing: the write data are
    multiplexed from several sources, the placer's byte rotator among them): a write
    requested in one cycle happens at the end of the next. The buffer is read only in
    READ_MESSAGE, after FINISH_UNTAGGED, where no write is pending (so its read port is not
    transparent: a bypass would put the write address compare into the read data path).
    """

    def __init__(self, *, width, connections):
        self.width = width
        self.connections = connections
        self.crows = CTL_BYTES // width
        CB = conn_bits(connections)
        super().__init__({
            "state": In(Step),
            "place": In(stream.Signature(ControlWrite(width=width), always_ready=True)),
            "conn": In(CB), "request_conn": In(CB), "qn": In(2), "rrq_done": In(1),
            "last": In(1),
            "clear_last": Out(1), "message": Out(8 * 64), "read_last": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, C, CROWS, state = self.width, self.connections, self.crows, self.state
        # Marked no_rw_collision (rnic.hdl.synth_hints): read only in READ_MESSAGE, where no
        # write is pending.
        mem = no_rw_collision(Memory(shape=8 * W, depth=C * CROWS, init=[]))
        m.submodules.memory = mem
        wp = mem.write_port(granularity=8)
        rd = mem.read_port(domain="sync")
        wr_addr = Signal(len(wp.addr))
        wr_data = Signal(8 * W)
        wr_en = Signal(len(wp.en))
        m.d.sync += [wp.addr.eq(wr_addr), wp.data.eq(wr_data), wp.en.eq(wr_en)]

        # the first row of the segment's / the restarted connection's buffer, registered for
        # timing (a constant multiply in the address path): the segment's connection is
        # stable from the cycle after IDLE to the end of the segment, the restarted one's
        # from RESTART to the end of CLEAR_CONTROL
        conn_base = Signal(range(C * CROWS + 1))
        request_base = Signal(range(C * CROWS + 1))

        # (shifts and adds: a multiplier would take a DSP block, slower than the adders)
        def times_crows(v):
            return sum(v << b for b in range(bits_for(CROWS)) if CROWS >> b & 1)
        m.d.sync += [conn_base.eq(times_crows(self.conn)),
                     request_base.eq(times_crows(self.request_conn))]

        # zeroing: rows 0 .. clear_rows - 1 of the connection, one per cycle; read back: the
        # QN 1 (32 octets) / QN 2 (64 octets) message from its first row (registered like
        # the others: the queue number is stable from the cycle after DECODE on)
        clear = Signal(range(CROWS + 1))
        clear_rows = Signal(range(CROWS + 1))
        m.d.comb += self.clear_last.eq(clear + 1 >= clear_rows)
        message_base = Signal(range(C * CROWS + 1))
        m.d.sync += message_base.eq(conn_base + Mux(self.qn == 1, 0, QN2_BASE // W))
        # the rows read back pass a register on their way to the message (timing: the block
        # RAM's clock-to-out and the wires to the 512 message registers did not fit in one
        # cycle): row ``count - 2`` is on it, one cycle more per message
        count = Signal(range(64 // W + 3))
        row = Signal(8 * W)
        m.d.sync += row.eq(rd.data)
        m.d.comb += self.read_last.eq(count == Mux(self.qn == 1, 32 // W + 1, 64 // W + 1))

        with m.Switch(state):
            with m.Case(Step.PLACE):
                with m.If(self.place.valid):
                    m.d.comb += [wr_addr.eq(conn_base + self.place.payload.row),
                                 wr_data.eq(self.place.payload.data),
                                 wr_en.eq(self.place.payload.strb)]
            with m.Case(Step.RESTART):
                m.d.sync += [clear.eq(0), clear_rows.eq(CROWS)]
            with m.Case(Step.QUEUE_READ_REQUEST):
                with m.If(self.rrq_done):
                    m.d.sync += [clear.eq(0), clear_rows.eq(32 // W)]
            with m.Case(Step.CLEAR_CONTROL):
                m.d.comb += [wr_addr.eq(request_base + clear), wr_data.eq(0),
                             wr_en.eq((1 << W) - 1)]
                m.d.sync += clear.eq(clear + 1)
            with m.Case(Step.CLEAR_READ_REQUEST):
                m.d.comb += [wr_addr.eq(conn_base + clear), wr_data.eq(0),
                             wr_en.eq((1 << W) - 1)]
                m.d.sync += clear.eq(clear + 1)
            with m.Case(Step.FINISH_UNTAGGED):
                with m.If((self.qn != 0) & self.last):
                    m.d.sync += count.eq(0)
            with m.Case(Step.READ_MESSAGE):
                m.d.comb += [rd.en.eq(1), rd.addr.eq(message_base + count)]
                # the row read two cycles before is on ``row``
                for k in range(64 // W):
                    with m.If(count == k + 2):
                        m.d.sync += self.message[8 * W * k:8 * W * (k + 1)].eq(row)
                m.d.sync += count.eq(count + 1)
        return m
