"""The ports the engine accepts connections on, and which of them echo."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["TcpListeners", "ListenerWrite", "check_listeners"]


def check_listeners(entries):
    """``entries`` if it is a listener count from 1 to 64, else ValueError naming it."""
    if isinstance(entries, bool) or not isinstance(entries, int) or not 1 <= entries <= 64:
        raise ValueError(f"entries must be an int from 1 to 64, not {entries!r}")
    return entries


class ListenerWrite(data.StructLayout):
    """Slot ``index`` listens on ``port`` when ``valid`` (else it is free); ``echo`` makes
    its connections the echo service (RFC 862: every octet received is sent back)."""

    def __init__(self, *, entries):
        super().__init__({"index": max(1, (entries - 1).bit_length()), "valid": 1,
                          "port": 16, "echo": 1})


class TcpListeners(wiring.Component):
    """A few listening ports, compared in parallel.

    Parameters
    ----------
    entries : int
        Slots (1 to 64).

    Ports
    -----
    write : In(stream.Signature(ListenerWrite(entries=)))
        The host's writes; always ready.
    port : In(16)
        A local port to look up.
    hit : Out(1)
    echo : Out(1)
        ``port`` has a valid slot (the lowest such slot's ``echo``), registered: they
        answer the ``port`` and the slots of the cycle before.
    """

    def __init__(self, *, entries=8):
        self._entries = check_listeners(entries)
        super().__init__({
            "write": In(stream.Signature(ListenerWrite(entries=entries))),
            "port": In(16),
            "hit": Out(1),
            "echo": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._entries
        valid = Signal(n)
        echo = Signal(n)
        ports = [Signal(16, name=f"port{k}") for k in range(n)]
        w = self.write.payload
        m.d.comb += self.write.ready.eq(1)
        with m.If(self.write.valid):
            for k in range(n):
                with m.If(w.index == k):
                    m.d.sync += [valid[k].eq(w.valid), echo[k].eq(w.echo), ports[k].eq(w.port)]
        matches = Signal(n)
        m.d.comb += matches.eq(Cat(*(valid[k] & (ports[k] == self.port) for k in range(n))))
        first = Signal(n)
        m.d.comb += first.eq(matches & ~(matches - 1))
        m.d.sync += [self.hit.eq(matches != 0), self.echo.eq((first & echo) != 0)]
        return m
