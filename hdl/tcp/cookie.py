"""SYN cookies in gateware: the ISS of a SYN-ACK, and the check of the ACK that returns it."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.tcp import DEFAULT_MSS, MAX_WINDOW_SCALE
from rnic.host.spec.tcp_engine import (COOKIE_AGES, COOKIE_HASH_BITS, COOKIE_MSS_BITS,
                                       COOKIE_MSS_TABLE,
                                       COOKIE_NO_WSCALE, COOKIE_TIME_BITS, COOKIE_TIME_SHIFT,
                                       COOKIE_WSCALE_BITS)

from ..crc32c import CRC32C_INIT, crc32c_step

__all__ = ["TcpCookie", "CookieMake", "CookieCheck", "CookieVerdict", "cookie_mss_index"]

_LOW_BITS = COOKIE_MSS_BITS + COOKIE_TIME_BITS + COOKIE_WSCALE_BITS
_WORDS = 6


class _Peer(data.StructLayout):
    def __init__(self, extra):
        super().__init__({"remote_ip": 32, "remote_port": 16, "local_port": 16,
                          "peer_isn": 32, **extra})


class CookieMake(_Peer):
    """A SYN to answer: the peer, the local port, the peer's ISN (the SYN's sequence
    number), the MSS index and the window shift code."""

    def __init__(self):
        super().__init__({"mss_index": COOKIE_MSS_BITS, "wscale_code": COOKIE_WSCALE_BITS})


class CookieCheck(_Peer):
    """An ACK to check: the peer, the local port, the peer's ISN (its seq - 1) and
    ``cookie`` (its ack - 1)."""

    def __init__(self):
        super().__init__({"cookie": 32})


class CookieVerdict(data.StructLayout):
    """``ok`` when the cookie is good, with the MSS index and window shift code it holds."""

    def __init__(self):
        super().__init__({"ok": 1, "mss_index": COOKIE_MSS_BITS,
                          "wscale_code": COOKIE_WSCALE_BITS})


def cookie_mss_index(m, mss):
    """The model's :func:`~rnic.host.model.tcp_engine.cookie_mss_index` of a SYN's MSS
    option (``mss`` 0: none, the default MSS), as a signal added to ``m``."""
    peer = Mux(mss == 0, DEFAULT_MSS, mss)
    index = Signal(COOKIE_MSS_BITS, name="mss_index")
    for i, value in enumerate(COOKIE_MSS_TABLE):
        with m.If(peer >= value):
            m.d.comb += index.eq(i)
    return index


def _word(value):
    """A big-endian 32-bit field as the CRC's word (its first octet in bits 0..7)."""
    return Cat(value[24:32], value[16:24], value[8:16], value[0:8])


class TcpCookie(wiring.Component):
    """Makes and checks SYN cookies as :func:`rnic.host.model.tcp_engine.syn_cookie` and
    :func:`~rnic.host.model.tcp_engine.check_cookie` do.

    The cookie's low 12 bits hold the MSS index, the time counter
    ``t = now >> COOKIE_TIME_SHIFT`` modulo 32 and the window shift code; its top 20 bits
    are the low bits of the CRC32c of six words (the secret, the peer's address, the
    ports, the peer's ISN, ``t``, the low bits). A check takes the
    one time counter of the last three whose low 5 bits the cookie holds, and recomputes
    the hash: one CRC per make or check.

    Ports
    -----
    make : In(stream.Signature(CookieMake))
    cookie : Out(stream.Signature(32))
    check : In(stream.Signature(CookieCheck))
    verdict : Out(stream.Signature(CookieVerdict))
        One answer per request, registered; a check goes first when both wait.
    secret : In(32)
        The cookie secret. Quasi-static.
    now : In(32)
        The time base (ticks).

    Latency: the answer is valid 8 cycles after the request was taken (the six words of
    the CRC one a cycle). Throughput: one request every 8 cycles, or more while an answer
    waits.
    """

    def __init__(self):
        super().__init__({
            "make": In(stream.Signature(CookieMake())),
            "cookie": Out(stream.Signature(32)),
            "check": In(stream.Signature(CookieCheck())),
            "verdict": Out(stream.Signature(CookieVerdict())),
            "secret": In(32),
            "now": In(32),
        })

    def elaborate(self, platform):
        m = Module()
        t_now = self.now[COOKIE_TIME_SHIFT:]
        chk = self.check.payload
        # the check's time counter: the one of the last COOKIE_AGES whose low bits it holds
        t_low = chk.cookie[COOKIE_MSS_BITS:COOKIE_MSS_BITS + COOKIE_TIME_BITS]
        age = Signal(COOKIE_TIME_BITS)
        m.d.comb += age.eq(t_now[:COOKIE_TIME_BITS] - t_low)
        wscale = chk.cookie[COOKIE_MSS_BITS + COOKIE_TIME_BITS:_LOW_BITS]
        plausible = ((age < COOKIE_AGES) & (t_now >= age)
                     & ((wscale <= MAX_WINDOW_SCALE) | (wscale == COOKIE_NO_WSCALE)))

        words = Signal(32 * _WORDS)         # the CRC's words still to take, next in bits 0..31
        state = Signal(32)
        steps = Signal(range(_WORDS + 1))
        checking = Signal()
        low = Signal(_LOW_BITS)
        expect = Signal(COOKIE_HASH_BITS)   # the hash the checked cookie carries
        ok = Signal()

        busy = steps != 0
        free = ~busy & ~self.cookie.valid & ~self.verdict.valid
        with m.If(self.cookie.ready):
            m.d.sync += self.cookie.valid.eq(0)
        with m.If(self.verdict.ready):
            m.d.sync += self.verdict.valid.eq(0)

        def start(peer, t, low_bits):
            t_word, low_word = Signal(32), Signal(32)
            m.d.comb += [t_word.eq(t), low_word.eq(low_bits)]
            m.d.sync += [steps.eq(_WORDS), state.eq(CRC32C_INIT), low.eq(low_bits),
                         words.eq(Cat(_word(self.secret), _word(peer.remote_ip),
                                      _word(Cat(peer.local_port, peer.remote_port)),
                                      _word(peer.peer_isn), _word(t_word), _word(low_word)))]

        with m.If(free & self.check.valid):
            m.d.comb += self.check.ready.eq(1)
            start(chk, (t_now - age)[:len(t_now)], chk.cookie[:_LOW_BITS])
            m.d.sync += [checking.eq(1), ok.eq(plausible),
                         expect.eq(chk.cookie[_LOW_BITS:])]
        with m.Elif(free & self.make.valid):
            mk = self.make.payload
            m.d.comb += self.make.ready.eq(1)
            start(mk, t_now, Cat(mk.mss_index, t_now[:COOKIE_TIME_BITS], mk.wscale_code))
            m.d.sync += checking.eq(0)
        with m.If(busy):
            m.d.sync += [state.eq(crc32c_step(state, words[:32])), words.eq(words[32:]),
                         steps.eq(steps - 1)]
            with m.If(steps == 1):
                hashed = (crc32c_step(state, words[:32]) ^ 0xFFFFFFFF)[:COOKIE_HASH_BITS]
                with m.If(checking):
                    m.d.sync += [self.verdict.valid.eq(1),
                                 self.verdict.payload.ok.eq(ok & (hashed == expect)),
                                 self.verdict.payload.mss_index.eq(low[:COOKIE_MSS_BITS]),
                                 self.verdict.payload.wscale_code.eq(
                                     low[COOKIE_MSS_BITS + COOKIE_TIME_BITS:])]
                with m.Else():
                    m.d.sync += [self.cookie.valid.eq(1),
                                 self.cookie.payload.eq(Cat(low, hashed))]
        return m
