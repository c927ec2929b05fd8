"""The statistics counters (RX_*, TX_*, ERR_COUNT): see :class:`Counters`."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In
from amaranth.utils import bits_for

from rnic.host.spec.regmap import DpError

from .layouts import FpduEnd
from .registers import register_signature

__all__ = ["Counters"]


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

    Latency
    -------
    Each increment is registered first (the counter runs one cycle behind its events;
    timing: no handshake or decode in front of a 32/64-bit adder); the counter
    shows an event 2 cycles after it. CLEAR_COUNTERS is registered too; it drops the
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
        })

    def elaborate(self, platform):
        m = Module()
        r = self.regs
        end, error = self.fpdu_end.valid, self.fpdu_end.payload.error
        tx_fpdus, tx_markers, rx_fpdus, rx_crc, rx_marker, rx_length, err_count = (Signal(32, name=n) for n in (
            "tx_fpdus", "tx_markers", "rx_fpdus", "rx_crc_errors", "rx_marker_errors", "rx_length_errors",
            "err_count"))
        tx_octets, rx_octets = Signal(64, name="tx_octets"), Signal(64, name="rx_octets")
        counters = [
            (tx_fpdus, self.tx_fpdu),
            (tx_markers, self.tx_marker),
            (tx_octets, self.tx_octets),
            (rx_octets, self.rx_octets),
            (rx_fpdus, end & (error <= DpError.MARKER)),
            (rx_crc, end & (error == DpError.CRC)),
            (rx_marker, end & (error == DpError.MARKER)),
            (rx_length, end & ((error == DpError.TOO_LONG) | (error == DpError.TOO_SHORT))),
            (err_count, self.error),
        ]
        clear = Signal()                         # CTRL.CLEAR_COUNTERS, registered (timing)
        m.d.sync += clear.eq(r.ctrl.clear_counters)
        for counter, inc in counters:
            inc_r = Signal(len(inc), name=f"{counter.name}_inc")
            with m.If(clear):
                m.d.sync += [counter.eq(0), inc_r.eq(0)]
            with m.Else():
                m.d.sync += [counter.eq(counter + inc_r), inc_r.eq(inc)]
        m.d.comb += [
            r.rx_fpdus.count.eq(rx_fpdus), r.rx_crc_errors.count.eq(rx_crc),
            r.rx_marker_errors.count.eq(rx_marker), r.rx_length_errors.count.eq(rx_length),
            r.rx_octets_lo.count.eq(rx_octets[:32]), r.rx_octets_hi.count.eq(rx_octets[32:]),
            r.tx_fpdus.count.eq(tx_fpdus), r.tx_markers.count.eq(tx_markers),
            r.tx_octets_lo.count.eq(tx_octets[:32]), r.tx_octets_hi.count.eq(tx_octets[32:]),
            r.err_count.count.eq(err_count),
        ]
        return m
