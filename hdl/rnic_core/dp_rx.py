"""The data port's receive side (DP_RX_*): see :class:`DataPortRx`."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In
from amaranth.utils import bits_for

from ..mpa_rx import MpaRxBeat
from ..synth_hints import SyncFIFOBuffered
from .layouts import DpRxEntry
from .registers import register_signature

__all__ = ["DataPortRx"]


class DataPortRx(wiring.Component):
    """ULPDUs received through the registers (DP_CTRL.SINK): the DP RX data FIFO of 32-bit
    words and the RX status FIFO of :class:`DpRxEntry` (conn, length, CRC, error per
    ULPDU), read through DP_RX_STATUS, DP_RX_CONN and DP_RX_DATA.

    The writer splits each beat of ``i`` into ceil(n / 4) words (octets beyond ``n``
    zeroed) and, at a ``last`` beat, pushes the ULPDU's entry (its length the sum of its
    beats' ``n``). A ULPDU is kept whole only if ULPDUs of different connections do not
    interleave at ``i``, and must fit the data FIFO. The reader shows the head entry
    (DP_RX_STATUS.VALID while there is one) and the head word (DP_RX_DATA);
    DP_RX_CMD.NEXT drops the head word, DP_RX_CMD.POP drops the head entry and the words
    of its ULPDU not yet dropped by NEXT (DP_RX_STATUS.VALID is 0 until they are gone).

    Ports
    -----
    regs : In(register_signature(...))
        DP_RX_STATUS, DP_RX_CONN, DP_RX_DATA, DP_RX_CMD.
    i : In(stream.Signature(MpaRxBeat))
        ULPDUs, ``first`` .. ``last``, the verdict on the last beat.

    Latency and throughput
    ----------------------
    A beat is taken when the previous one was written: one word per cycle, a W-octet
    beat every W/4 + 1 cycles (``i`` not ready meanwhile). The views are registers (see
    :class:`~rnic.hdl.rnic_core.completion_queue.CompletionQueue`): one cycle behind the
    FIFOs.
    """

    #: The register fields the component uses.
    REGISTERS = ("dp_rx_status", "dp_rx_conn", "dp_rx_data", "dp_rx_cmd")

    def __init__(self, *, width, connections, depth, ulpdus):
        self.width = width
        self.connections = connections
        self.depth = depth
        self.ulpdus = ulpdus
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "i": In(stream.Signature(MpaRxBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        W, N = self.width, self.connections
        K = W // 4
        r, i = self.regs, self.i
        m.submodules.dp_rx_fifo = rx_fifo = SyncFIFOBuffered(width=32, depth=self.depth)
        stat_layout = DpRxEntry(connections=N)
        m.submodules.dp_rx_stat = rx_stat = SyncFIFOBuffered(width=stat_layout.size, depth=self.ulpdus)

        # ---- writer: the beat in u_beat, word by word; the entry after the last beat
        u_valid = Signal()
        u_beat = Signal(MpaRxBeat(width=W, connections=N))
        u_lane = Signal(range(K + 1))
        u_len = Signal(16)
        m.d.comb += i.ready.eq(~u_valid)
        with m.If(i.valid & i.ready):
            m.d.sync += [u_valid.eq(1), u_beat.eq(i.payload), u_lane.eq(0), u_len.eq(u_len + i.payload.n)]
        u_words = (u_beat.n + 3) >> 2
        u_word = u_beat.data.word_select(u_lane, 32)
        keep = Signal(32)
        octets_here = Signal(bits_for(W))
        m.d.comb += octets_here.eq(u_beat.n - (u_lane << 2))
        m.d.comb += keep.eq(Cat(*(Mux(octets_here > j, 0xFF, 0) for j in range(4))))
        m.d.comb += rx_fifo.w_data.eq(u_word & keep)
        stat_in = Signal(stat_layout)
        m.d.comb += [stat_in.conn.eq(u_beat.conn), stat_in.len.eq(u_len), stat_in.crc.eq(u_beat.crc),
                     stat_in.error.eq(u_beat.error), rx_stat.w_data.eq(stat_in)]
        with m.If(u_valid):
            with m.If(u_lane < u_words):
                m.d.comb += rx_fifo.w_en.eq(1)
                with m.If(rx_fifo.w_rdy):
                    m.d.sync += u_lane.eq(u_lane + 1)
            with m.Elif(u_beat.last):
                m.d.comb += rx_stat.w_en.eq(1)
                with m.If(rx_stat.w_rdy):
                    m.d.sync += [u_valid.eq(0), u_len.eq(0)]
            with m.Else():
                m.d.sync += u_valid.eq(0)

        # ---- reader: the head entry, NEXT and POP
        head = Signal(stat_layout)
        m.d.comb += head.eq(rx_stat.r_data)
        skipping = Signal()
        skip = Signal(16)
        consumed = Signal(16)
        head_valid = rx_stat.r_rdy & ~skipping
        m.d.sync += [                            # registered views
            r.dp_rx_status.valid.eq(head_valid),
            r.dp_rx_status.crc.eq(Mux(head_valid, head.crc, 0)),
            r.dp_rx_status.error.eq(Mux(head_valid, head.error, 0)),
            r.dp_rx_status.len.eq(Mux(head_valid, head.len, 0)),
            r.dp_rx_conn.conn.eq(Mux(head_valid, head.conn, 0)),
            r.dp_rx_data.data.eq(Mux(rx_fifo.r_rdy, rx_fifo.r_data, 0)),
        ]
        head_words = Signal(17)
        m.d.comb += head_words.eq((head.len + 3) >> 2)
        with m.If(skipping):
            with m.If(skip == 0):
                m.d.sync += skipping.eq(0)
            with m.Elif(rx_fifo.r_rdy):
                m.d.comb += rx_fifo.r_en.eq(1)
                m.d.sync += skip.eq(skip - 1)
        with m.Elif(r.dp_rx_cmd.pop & head_valid):
            m.d.comb += rx_stat.r_en.eq(1)
            m.d.sync += [consumed.eq(0), skipping.eq(1),
                         skip.eq(Mux(head_words > consumed, head_words - consumed, 0))]
        with m.Elif(r.dp_rx_cmd.next & rx_fifo.r_rdy):
            m.d.comb += rx_fifo.r_en.eq(1)
            m.d.sync += consumed.eq(consumed + 1)
        return m
