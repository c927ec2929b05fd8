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

    Latency and throughput: a header with ``k`` options (NOPs count) is reported
    ``k + 2`` cycles after it became valid (one cycle to start, one option a cycle, one to
    report) if ``o`` is free; at most 40 options fit a header, so a segment takes at most
    42 cycles here.
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
        mss = Signal(16)
        ws_present = Signal()
        ws = Signal.like(self.o.payload.ws)
        sack = Signal()
        bad = Signal()

        # the four octets from the cursor on: kind, length and the first two of the value
        octets = [hdr.options.word_select(k, 8) for k in range(MAX_OPTIONS_LEN)] + [0] * 3
        window = Array(Cat(*octets[k:k + 4]) for k in range(MAX_OPTIONS_LEN))[at]
        kind, length, v0, v1 = (window[8 * k:8 * k + 8] for k in range(4))

        free = ~self.o.valid | self.o.ready
        done = started & (ended | (left == 0))
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & ~started):
            m.d.sync += [started.eq(1), at.eq(0), left.eq(hdr.options_len),
                         ended.eq(hdr.truncated), bad.eq(hdr.truncated), mss.eq(0),
                         ws_present.eq(0), ws.eq(0), sack.eq(0)]
        with m.Elif(done & free):
            m.d.comb += self.i.ready.eq(1)
            m.d.sync += [started.eq(0), self.o.valid.eq(1), *self._report(hdr),
                         self.o.payload.bad_options.eq(bad)]
            with m.If(bad):
                m.d.sync += [self.o.payload.mss.eq(0), self.o.payload.ws_present.eq(0),
                             self.o.payload.ws.eq(0), self.o.payload.sack_permitted.eq(0)]
            with m.Else():
                m.d.sync += [self.o.payload.mss.eq(mss), self.o.payload.ws_present.eq(ws_present),
                             self.o.payload.ws.eq(ws), self.o.payload.sack_permitted.eq(sack)]
        with m.Elif(started & ~done):
            with m.If(kind == TcpOption.EOL):
                m.d.sync += ended.eq(1)
            with m.Elif(kind == TcpOption.NOP):
                m.d.sync += [at.eq(at + 1), left.eq(left - 1)]
            with m.Elif((left == 1) | (length < 2) | (length > left)):
                m.d.sync += [ended.eq(1), bad.eq(1)]
            with m.Else():
                m.d.sync += [at.eq(at + length), left.eq(left - length)]
                with m.If((kind == TcpOption.MSS) & (length == OPTION_LEN[TcpOption.MSS])):
                    m.d.sync += mss.eq(Cat(v1, v0))
                with m.If((kind == TcpOption.WINDOW_SCALE)
                          & (length == OPTION_LEN[TcpOption.WINDOW_SCALE])):
                    m.d.sync += [ws_present.eq(1),
                                 ws.eq(Mux(v0 > MAX_WINDOW_SCALE, MAX_WINDOW_SCALE, v0))]
                with m.If((kind == TcpOption.SACK_PERMITTED)
                          & (length == OPTION_LEN[TcpOption.SACK_PERMITTED])):
                    m.d.sync += sack.eq(1)
        return m

    def _report(self, hdr):
        """The statement copying the fixed fields of ``hdr`` into ``o``."""
        o = self.o.payload
        names = ("src_ip", "src_port", "dst_port", "seq", "ack", "flags", "window", "length")
        return [getattr(o, name).eq(getattr(hdr, name)) for name in names]
