"""The data port's transmit side (DP_TX_*): see :class:`DataPortTx`."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ..beat import conn_bits
from ..mpa_tx import MpaTxBeat
from ..synth_hints import SyncFIFOBuffered
from .registers import register_signature

__all__ = ["DataPortTx"]


class DataPortTx(wiring.Component):
    """ULPDUs sent through the registers: the DP TX FIFO of 32-bit words, and the sender
    that turns them into beats.

    ``push`` puts a word into the FIFO (the core feeds it every write handshake at
    DP_TX_DATA, zero words included). DP_TX_CMD.SEND (while not DP_TX_STATUS.BUSY, for
    a DP_TX_LEN above 0 and DP_TX_CONN below ``connections``; otherwise ignored) sends a
    ULPDU of DP_TX_LEN octets on DP_TX_CONN from the next ceil(LEN / 4) words: W / 4
    words per beat, the first octet of each word in its low byte, ``length`` = LEN on
    every beat. DP_TX_STATUS.BUSY is 1 until its last beat was taken; DP_TX_STATUS.FREE
    counts the free words.

    Ports
    -----
    regs : In(register_signature(...))
        DP_TX_STATUS, DP_TX_CMD, DP_TX_LEN, DP_TX_CONN.
    push : In(stream.Signature(32, always_ready=True))
    o : Out(stream.Signature(MpaTxBeat))
        One ULPDU per SEND, ``first`` .. ``last``.

    Latency and throughput
    ----------------------
    A pushed word enters the FIFO one cycle later (registered: the handshake and the
    address decode come from the bus master). The sender moves one word per cycle and
    offers a beat in the cycle after its last word: a beat every W/4 + 1 cycles, its
    speed that of the register writes feeding the FIFO.
    """

    #: The register fields the component uses.
    REGISTERS = ("dp_tx_status", "dp_tx_cmd", "dp_tx_len", "dp_tx_conn")

    def __init__(self, *, width, connections, depth):
        self.width = width
        self.connections = connections
        self.depth = depth
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "push": In(stream.Signature(unsigned(32), always_ready=True)),
            "o": Out(stream.Signature(MpaTxBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        W, N = self.width, self.connections
        K = W // 4
        r, o = self.regs, self.o
        m.submodules.dp_tx_fifo = tx_fifo = SyncFIFOBuffered(width=32, depth=self.depth)
        m.d.sync += [tx_fifo.w_data.eq(self.push.payload), tx_fifo.w_en.eq(self.push.valid)]
        m.d.comb += r.dp_tx_status.free.eq(self.depth - tx_fifo.level)

        t_busy = Signal()
        t_conn = Signal(conn_bits(N))
        t_len = Signal(16)
        t_left = Signal(16)                     # octets not yet put into a beat
        t_first = Signal()
        t_lane = Signal(range(K))
        t_n = Signal(bits_for(W))
        t_data = Signal(8 * W)
        t_full = Signal()                       # the beat is complete and offered
        t_last = Signal()
        m.d.comb += r.dp_tx_status.busy.eq(t_busy)
        with m.If(r.dp_tx_cmd.send & ~t_busy & (r.dp_tx_len.len != 0) & (r.dp_tx_conn.conn < N)):
            m.d.sync += [t_busy.eq(1), t_conn.eq(r.dp_tx_conn.conn), t_len.eq(r.dp_tx_len.len),
                         t_left.eq(r.dp_tx_len.len), t_first.eq(1), t_lane.eq(0), t_n.eq(0),
                         t_data.eq(0), t_full.eq(0), t_last.eq(0)]
        take_word = t_busy & ~t_full & tx_fifo.r_rdy
        m.d.comb += tx_fifo.r_en.eq(take_word)
        word_octets = Mux(t_left < 4, t_left, 4)
        with m.If(take_word):
            m.d.sync += [
                t_data.word_select(t_lane, 32).eq(tx_fifo.r_data),
                t_n.eq(t_n + word_octets),
                t_left.eq(t_left - word_octets),
                t_lane.eq(t_lane + 1),
            ]
            with m.If((t_lane == K - 1) | (t_left <= 4)):
                m.d.sync += [t_full.eq(1), t_last.eq(t_left <= 4)]
        m.d.comb += [
            o.valid.eq(t_full),
            o.payload.data.eq(t_data), o.payload.n.eq(t_n), o.payload.first.eq(t_first),
            o.payload.last.eq(t_last), o.payload.conn.eq(t_conn), o.payload.length.eq(t_len),
        ]
        with m.If(o.valid & o.ready):
            m.d.sync += [t_full.eq(0), t_first.eq(0), t_lane.eq(0), t_n.eq(0), t_data.eq(0)]
            with m.If(t_last):
                m.d.sync += t_busy.eq(0)
        return m
