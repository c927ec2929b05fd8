"""UART receiver and transmitter (8 data bits, no parity, 1 stop bit: 8N1).

See :class:`UARTRx`, :class:`UARTTx` and :func:`uart_divisor`. Amaranth 0.5
has no UART in its standard library; these are small, self-contained and
clocked by the ``sync`` domain. Both take the bit period in clock cycles
(``divisor``); :func:`uart_divisor` computes it from a clock frequency and a
baud rate and refuses a pair whose rate error would break the link.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["uart_divisor", "UARTRx", "UARTTx", "MAX_RATE_ERROR"]

#: Largest relative baud rate error :func:`uart_divisor` accepts (1.5 %: the
#: receiver samples mid-bit, so both ends together may be off by about 4.5 %
#: over the 9.5 bit times up to the stop bit's sample; 1.5 % on our side leaves
#: the rest to the other end).
MAX_RATE_ERROR = 0.015

#: Smallest bit period in clock cycles (the receiver needs a middle to sample).
MIN_DIVISOR = 4


def uart_divisor(clk_freq, baud):
    """Bit period in clock cycles for ``baud`` at ``clk_freq`` Hz.

    Raises ValueError when the rounded divisor is below :data:`MIN_DIVISOR`
    or the resulting rate is off by more than :data:`MAX_RATE_ERROR`.
    """
    if not clk_freq > 0 or not baud > 0:
        raise ValueError(f"clock frequency and baud rate must be positive, not {clk_freq!r}, {baud!r}")
    divisor = round(clk_freq / baud)
    if divisor < MIN_DIVISOR:
        raise ValueError(f"{baud} baud is too fast for a {clk_freq / 1e6:g} MHz clock "
                         f"(at most {clk_freq / MIN_DIVISOR:.0f} baud)")
    error = abs(clk_freq / divisor - baud) / baud
    if error > MAX_RATE_ERROR:
        raise ValueError(f"{baud} baud at {clk_freq / 1e6:g} MHz is off by {100 * error:.2f} % "
                         f"(divisor {divisor}); at most {100 * MAX_RATE_ERROR:g} % is allowed")
    return divisor


def _check_divisor(divisor):
    if not isinstance(divisor, int) or divisor < MIN_DIVISOR:
        raise ValueError(f"divisor must be an integer >= {MIN_DIVISOR}, not {divisor!r}")


class UARTTx(wiring.Component):
    """UART transmitter, 8N1, LSB first.

    Parameters
    ----------
    divisor : int
        Bit period in clock cycles (>= 4).

    Ports
    -----
    i : ``In(stream.Signature(8))``
        Octets to send. ``ready`` is high while the transmitter is idle; an
        octet accepted at a clock edge starts its start bit on ``tx`` at that
        edge, so back-to-back octets leave with no gap (10 bit periods each).
    tx : ``Out(1)``
        The line (idle high).
    busy : ``Out(1)``
        An octet is being sent.
    """

    def __init__(self, *, divisor):
        _check_divisor(divisor)
        self.divisor = divisor
        super().__init__({
            "i": In(stream.Signature(8)),
            "tx": Out(1, init=1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        shreg = Signal(9, init=0x1FF)          # data bits then the stop bit, LSB goes out next
        bits = Signal(range(10))               # bits left after the current one
        timer = Signal(range(self.divisor))

        m.d.comb += [
            self.i.ready.eq(~self.busy),
        ]
        with m.If(~self.busy):
            with m.If(self.i.valid):
                m.d.sync += [
                    self.busy.eq(1),
                    self.tx.eq(0),                          # start bit
                    shreg.eq(Cat(self.i.payload, 1)),
                    bits.eq(9),
                    timer.eq(self.divisor - 1),
                ]
        with m.Else():
            with m.If(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            with m.Elif(bits != 0):
                m.d.sync += [
                    self.tx.eq(shreg[0]),
                    shreg.eq(Cat(shreg[1:], 1)),
                    bits.eq(bits - 1),
                    timer.eq(self.divisor - 1),
                ]
            with m.Else():                                  # stop bit done
                m.d.sync += self.busy.eq(0)
        return m


class UARTRx(wiring.Component):
    """UART receiver, 8N1, LSB first, with a two-flip-flop synchroniser on ``rx``.

    A falling edge starts a frame; the start bit is checked again half a bit
    later (a shorter low pulse is ignored), then every bit is sampled in its
    middle. The octet is offered on ``o`` after the stop bit's middle if the
    stop bit is high; otherwise ``framing_error`` pulses, the octet is dropped
    and the receiver waits for the line to go high again (so a break, the line
    held low, gives one framing error and no octets).

    Parameters
    ----------
    divisor : int
        Bit period in clock cycles (>= 4).

    Ports
    -----
    rx : ``In(1)``
        The line (asynchronous; idle high).
    o : ``Out(stream.Signature(8))``
        Received octets. The receiver cannot wait: ``o.valid`` stays high
        until ``o.ready``, and an octet that completes while the previous one
        is still waiting replaces it and pulses ``overrun``.
    framing_error : ``Out(1)``
        One-cycle pulse: a stop bit was low (octet dropped).
    overrun : ``Out(1)``
        One-cycle pulse: an octet was lost because ``o`` was not read in time.
    """

    def __init__(self, *, divisor):
        _check_divisor(divisor)
        self.divisor = divisor
        super().__init__({
            "rx": In(1, init=1),
            "o": Out(stream.Signature(8)),
            "framing_error": Out(1),
            "overrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)

        timer = Signal(range(self.divisor))
        bits = Signal(range(9))
        shreg = Signal(8)

        m.d.sync += [self.framing_error.eq(0), self.overrun.eq(0)]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        with m.FSM(name="uart_rx"):
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += timer.eq(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(rx):                         # glitch, not a start bit
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [timer.eq(self.divisor - 1), bits.eq(8)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [shreg.eq(Cat(shreg[1:], rx)), timer.eq(self.divisor - 1),
                                 bits.eq(bits - 1)]
                    with m.If(bits == 1):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(rx):
                    m.d.sync += [self.o.payload.eq(shreg), self.o.valid.eq(1),
                                 self.overrun.eq(self.o.valid & ~self.o.ready)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += self.framing_error.eq(1)
                    m.next = "BREAK"
            with m.State("BREAK"):
                with m.If(rx):
                    m.next = "IDLE"
        return m
