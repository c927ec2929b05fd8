"""The statistics counters (RX_*, TX_*, ERR_COUNT): see :class:`Counters`."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In
from amaranth.utils import bits_for

from rnic.host.spec.regmap import REGMAP, DpError

from ..counter_memory import CounterMemory
from .layouts import FpduEnd
from .registers import register_signature

__all__ = ["Counters"]

#: Words of the counter memory: a counter register's word address modulo it is its word.
COUNTER_WORDS = 16
#: The counters of single events, kept in the counter memory.
EVENT_COUNTERS = ("rx_fpdus", "rx_crc_errors", "rx_marker_errors", "rx_length_errors", "tx_fpdus",
                  "tx_markers")


def counter_word(name):
    """The counter memory's word of register ``name``."""
    return (REGMAP[name.upper()].addr >> 2) % COUNTER_WORDS


class Counters(wiring.Component):
    """The counters of the register map, zeroed by CTRL.CLEAR_COUNTERS (and the core's reset).

    RX_FPDUS (every ULPDU end with no error, CRC or MARKER), RX_CRC_ERRORS,
    RX_MARKER_ERRORS, RX_LENGTH_ERRORS (TOO_LONG, TOO_SHORT), RX_OCTETS (``rx_octets``),
    TX_FPDUS (``tx_fpdu``), TX_MARKERS (``tx_marker``), TX_OCTETS (``tx_octets``),
    ERR_COUNT (``error``). The 64-bit ones are read as two registers (``*_LO``, ``*_HI``).

    Ports
    -----
    regs : In(register_signature(...))
        CTRL.CLEAR_COUNTERS and the counter registers.
    fpdu_end : In(stream.Signature(FpduEnd, always_ready=True))
    tx_fpdu, tx_marker, error : In(1)
        One event each per cycle.
    tx_octets, rx_octets : In(bits_for(W))
        Octets this cycle.
    araddr : In(REGMAP.addr_width)
        The register bus's read address: the counter memory reads its word for it, which
        is there in the cycle after, when the register bank samples its read-only inputs.

    The counters of single events (RX_FPDUS .. RX_LENGTH_ERRORS, TX_FPDUS, TX_MARKERS) are
    kept in a block RAM (:class:`~rnic.hdl.counter_memory.CounterMemory`; area: a few
    pending bits each instead of 32 flip-flops, an adder and 32 inputs of the bank's read
    multiplexer); the octet counters and ERR_COUNT are registers.

    Latency
    -------
    Each increment is registered first (the counter runs one cycle behind its events:
    handshakes and decodes feeding a 32/64-bit adder were critical paths); a register
    counter shows an event 2 cycles after it, one in the memory up to
    ``COUNTER_WORDS + 3`` cycles after it. CLEAR_COUNTERS is registered too; it drops the
    increments under way.
    """

    #: The register fields the component uses.
    REGISTERS = ("ctrl.clear_counters", "rx_fpdus", "rx_crc_errors", "rx_marker_errors", "rx_length_errors",
                 "rx_octets_lo", "rx_octets_hi", "tx_fpdus", "tx_markers", "tx_octets_lo", "tx_octets_hi",
                 "err_count")

    def __init__(self, *, width, connections):
        self.width = width
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "fpdu_end": In(stream.Signature(FpduEnd(connections=connections), always_ready=True)),
            "tx_fpdu": In(1),
            "tx_marker": In(1),
            "tx_octets": In(bits_for(width)),
            "rx_octets": In(bits_for(width)),
            "error": In(1),
            "araddr": In(REGMAP.addr_width),
        })

    def elaborate(self, platform):
        m = Module()
        r = self.regs
        end, error = self.fpdu_end.valid, self.fpdu_end.payload.error
        err_count = Signal(32, name="err_count")
        tx_octets, rx_octets = Signal(64, name="tx_octets"), Signal(64, name="rx_octets")
        events = {
            "rx_fpdus": end & (error <= DpError.MARKER),
            "rx_crc_errors": end & (error == DpError.CRC),
            "rx_marker_errors": end & (error == DpError.MARKER),
            "rx_length_errors": end & ((error == DpError.TOO_LONG) | (error == DpError.TOO_SHORT)),
            "tx_fpdus": self.tx_fpdu,
            "tx_markers": self.tx_marker,
        }
        assert tuple(events) == EVENT_COUNTERS
        assert len({counter_word(name) for name in events}) == len(events)
        clear = Signal()                         # CTRL.CLEAR_COUNTERS, registered (timing)
        m.d.sync += clear.eq(r.ctrl.clear_counters)
        for counter, inc in ((tx_octets, self.tx_octets), (rx_octets, self.rx_octets),
                             (err_count, self.error)):
            inc_r = Signal(len(inc), name=f"{counter.name}_inc")
            with m.If(clear):
                m.d.sync += [counter.eq(0), inc_r.eq(0)]
            with m.Else():
                m.d.sync += [counter.eq(counter + inc_r), inc_r.eq(inc)]
        m.submodules.memory = memory = CounterMemory(counters=COUNTER_WORDS)
        m.d.comb += [memory.clear.eq(clear),
                     memory.addr.eq(self.araddr[2:][:len(memory.addr)])]
        for name, event in events.items():
            event_r = Signal(name=f"{name}_inc")
            m.d.sync += event_r.eq(event & ~clear)
            m.d.comb += [memory.events[counter_word(name)].eq(event_r),
                         getattr(r, name).count.eq(memory.data)]
        m.d.comb += [
            r.rx_octets_lo.count.eq(rx_octets[:32]), r.rx_octets_hi.count.eq(rx_octets[32:]),
            r.tx_octets_lo.count.eq(tx_octets[:32]), r.tx_octets_hi.count.eq(tx_octets[32:]),
            r.err_count.count.eq(err_count),
        ]
        return m
