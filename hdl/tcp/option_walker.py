"""The receive parser's option stage: a segment's TCP options walked one option a cycle."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.tcp import MAX_OPTIONS_LEN, MAX_WINDOW_SCALE, OPTION_LEN, TcpOption

from .layouts import TcpHeaderInfo, TcpSegInfo

__all__ = ["TcpOptionWalker"]


class TcpOptionWalker(wiring.Component):
    """Walks the options of each header of ``i`` and reports the segment on ``o``.

    The rules are the model's (:func:`rnic.host.model.tcp.parse_options`): EOL ends the
    list, NOP is one octet, every other option is skipped by its length octet, and MSS,
    window scale and SACK-permitted are taken when their length is the one they must have
    (the last one counts; a shift above 14 counts as 14). A length octet that is missing,
    below 2 or runs past the options makes them malformed: ``bad_options``, and the option
    fields are 0. A ``truncated`` header is reported with ``bad_options``.

    Ports
    -----
    i : In(stream.Signature(TcpHeaderInfo))
        Headers; each is taken (``ready``) in the cycle its report goes into ``o``.
    o : Out(stream.Signature(TcpSegInfo))
        Registered.

    Latency and throughput: a header is reported ``k + j + 2`` cycles after it became
    valid, with ``k`` options of which ``j`` have a length octet (one cycle to start, one
    for an EOL or NOP, two for an option with a length octet: its octets registered, then
    its step; one to report), if ``o`` is free; 40 option octets hold at most 40 options
    or 20 with a length octet, so a segment takes at most 42 cycles here.
    """

    def __init__(self):
        super().__init__({
            "i": In(stream.Signature(TcpHeaderInfo())),
            "o": Out(stream.Signature(TcpSegInfo())),
        })

    def elaborate(self, platform):
        m = Module()
        hdr = self.i.payload
        started = Signal()
        at = Signal(range(MAX_OPTIONS_LEN + 1))     # offset of the option under the cursor
        left = Signal(range(MAX_OPTIONS_LEN + 1))   # octets of options from it to the end
        ended = Signal()                            # EOL, or malformed
        bad = Signal()
        # an option with a length octet takes two cycles: its octets are registered
        # (``looked``), then its step is decided from them, so the cursor's multiplexers
        # and the length's compares and sums never share a cycle; EOL and NOP take one
        looked = Signal()
        kind_was = Signal(8)
        length_was = Signal(8)
        value_was = Signal(16)
        found = {"mss": Signal(16), "ws_present": Signal(), "ws": Signal.like(self.o.payload.ws),
                 "sack_permitted": Signal()}

        # the four octets from the cursor on: kind, length and the first two of the value
        octets = [hdr.options.word_select(k, 8) for k in range(MAX_OPTIONS_LEN)] + [0] * 3
        window = Array(Cat(*octets[k:k + 4]) for k in range(MAX_OPTIONS_LEN))[at]
        kind = window[:8]
        # taken every cycle, without an enable (the cursor's compares stay off their path)
        m.d.sync += [kind_was.eq(kind), length_was.eq(window[8:16]),
                     value_was.eq(Cat(window[24:32], window[16:24]))]

        free = ~self.o.valid | self.o.ready
        done = started & (ended | (left == 0)) & ~looked
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        m.d.sync += looked.eq(0)
        with m.If(self.i.valid & ~started):
            m.d.sync += [started.eq(1), at.eq(0), left.eq(hdr.options_len),
                         ended.eq(hdr.truncated), bad.eq(hdr.truncated),
                         *(signal.eq(0) for signal in found.values())]
        with m.Elif(done & free):
            m.d.comb += self.i.ready.eq(1)
            m.d.sync += [started.eq(0), self.o.valid.eq(1), *self._report(hdr),
                         self.o.payload.bad_options.eq(bad)]
            for name, signal in found.items():
                m.d.sync += getattr(self.o.payload, name).eq(Mux(bad, 0, signal))
        with m.Elif(looked):
            self._step(m, at, left, ended, bad, kind_was, length_was, value_was, found)
        with m.Elif(started & ~ended & (left != 0)):
            with m.If(kind == TcpOption.EOL):
                m.d.sync += ended.eq(1)
            with m.Elif(kind == TcpOption.NOP):
                m.d.sync += [at.eq(at + 1), left.eq(left - 1)]
            with m.Else():
                m.d.sync += looked.eq(1)
        return m

    def _step(self, m, at, left, ended, bad, kind, length, value, found):
        """The step over an option with a length octet: malformed when the length octet
        is missing, below 2 or runs past the options; else its value is taken."""
        with m.If((left == 1) | (length < 2) | (length > left)):
            m.d.sync += [ended.eq(1), bad.eq(1)]
        with m.Else():
            m.d.sync += [at.eq(at + length), left.eq(left - length)]
            self._take(m, kind, length, value, found)

    @staticmethod
    def _take(m, kind, length, value, found):
        """The value of the option stepped over, if it is one the engine uses and has its
        length."""
        def known(option):
            return (kind == option) & (length == OPTION_LEN[option])
        with m.If(known(TcpOption.MSS)):
            m.d.sync += found["mss"].eq(value)
        with m.If(known(TcpOption.WINDOW_SCALE)):
            shift = value[8:]
            m.d.sync += [found["ws_present"].eq(1),
                         found["ws"].eq(Mux(shift > MAX_WINDOW_SCALE, MAX_WINDOW_SCALE, shift))]
        with m.If(known(TcpOption.SACK_PERMITTED)):
            m.d.sync += found["sack_permitted"].eq(1)

    def _report(self, hdr):
        """The statement copying the fixed fields of ``hdr`` into ``o``."""
        o = self.o.payload
        names = ("src_ip", "src_port", "dst_port", "seq", "ack", "flags", "window", "length")
        return [getattr(o, name).eq(getattr(hdr, name)) for name in names]
