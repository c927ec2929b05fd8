"""cocotb 2.x bus functional models for ``amaranth.lib.stream`` ports.

Port naming (Amaranth 0.5 ``amaranth.back.verilog.convert`` of a
``wiring.Component``, as done by :mod:`rnic.sim.runner`): each signature member
becomes one Verilog port whose name is the member path joined with ``__``.
A port ``i: In(stream.Signature(OctetBeat(width=8, connections=4)))`` becomes::

    input         i__valid
    output        i__ready
    input  [71:0] i__payload      // the whole struct as ONE packed vector

and ``o: Out(stream.Signature(...))`` gives ``o__valid``/``o__payload``
outputs and an ``o__ready`` input. Nested interfaces add more segments
(``rx__data__valid``), arrays add their index (``lanes__0__valid``). The
payload struct's fields sit at their ``data.StructLayout`` offsets, the first
field at bit 0 (for ``OctetBeat``: ``data`` at 0, then ``n``, ``first``,
``last``, ``conn``); :func:`pack`/:func:`unpack` convert between that vector
and a dict. The clock and reset ports are ``clk`` and ``rst`` (present only if
the design has a ``sync`` domain). A stream with ``always_ready``/
``always_valid`` still has the port (tied inside), the BFMs do not care.

Timing model used by both BFMs (one Python wake-up at the clock edge and one
in the ReadOnly phase per cycle, trigger objects reused, no per-cycle
allocation): right after ``RisingEdge(clk)`` they drive their outputs for the
coming cycle; in ``ReadOnly`` they sample ``valid and ready``, which is the
transfer that happens at the next rising edge. Values set right after an edge
are therefore seen by the DUT's flops at the following edge, exactly like a
registered source. A source holds ``valid`` and ``payload`` until accepted
(the stream rule); the monitor checks that the DUT does the same.

Usage in a cocotb test module::

    import cocotb
    from rnic.hdl.beat import OctetBeat
    from rnic.sim.streams import TB, bytes_to_beats, beats_to_bytes, assert_drained

    @cocotb.test()
    async def passthrough(dut):
        tb = TB(dut)                                  # clock on dut.clk, params from $RNIC_PARAMS
        layout = OctetBeat(width=tb.params["width"], connections=4)
        src = tb.source("i", layout, idle_prob=0.3)
        snk = tb.sink("o", layout, backpressure_prob=0.3)
        await tb.reset()
        src.extend(bytes_to_beats(b"hello world", 8, conn=1))
        await src.wait_idle()
        beats = [await snk.recv() for _ in range(2)]
        assert beats_to_bytes(beats) == b"hello world"
        assert_drained(src, snk)
"""

from __future__ import annotations

import collections
import random

__all__ = [
    "codec", "pack", "unpack", "bytes_to_beats", "beats_to_bytes", "beats_to_units",
    "StreamDriver", "StreamMonitor", "TB", "assert_drained", "port_name",
]


# ---------------------------------------------------------------------------
# payload packing

class _Codec:
    """Packs/unpacks one layout. ``fields`` is a tuple of (name, offset, width, signed, sub-codec)."""

    __slots__ = ("fields", "width", "names")

    def __init__(self, layout):
        from amaranth.hdl import Shape
        from amaranth.lib import data

        if not isinstance(layout, data.Layout):
            layout = data.StructLayout(dict(layout))
        fields = []
        for name, field in layout:
            shape = field.shape
            sub = _Codec(shape) if isinstance(shape, data.Layout) else None
            signed = False if sub is not None else Shape.cast(shape).signed
            fields.append((name, field.offset, field.width, signed, sub))
        self.fields = tuple(fields)
        self.width = layout.size
        self.names = frozenset(n for n, *_ in fields)

    def pack(self, value):
        if isinstance(value, int):
            if not 0 <= value < (1 << self.width):
                raise ValueError(f"packed value {value:#x} does not fit {self.width} bits")
            return value
        extra = value.keys() - self.names
        if extra:
            raise KeyError(f"unknown payload fields {sorted(extra)}; layout has {sorted(self.names)}")
        word = 0
        for name, offset, width, signed, sub in self.fields:
            v = value.get(name, 0)
            if sub is not None:
                v = sub.pack(v)
            else:
                v = int(v)
                if signed:
                    if not -(1 << (width - 1)) <= v < (1 << (width - 1)):
                        raise ValueError(f"field {name}={v} does not fit signed {width} bits")
                    v &= (1 << width) - 1
                elif not 0 <= v < (1 << width):
                    raise ValueError(f"field {name}={v:#x} does not fit {width} bits")
            word |= v << offset
        return word

    def unpack(self, word):
        out = {}
        for name, offset, width, signed, sub in self.fields:
            v = (word >> offset) & ((1 << width) - 1)
            if sub is not None:
                v = sub.unpack(v)
            elif signed and v >> (width - 1):
                v -= 1 << width
            out[name] = v
        return out


_codecs = {}


def codec(layout):
    """Cached :class:`_Codec` for a ``data.Layout`` (or a ``{name: shape}`` mapping)."""
    key = id(layout)
    hit = _codecs.get(key)
    if hit is None or hit[0] is not layout:
        hit = (layout, _Codec(layout))
        _codecs[key] = hit
    return hit[1]


def pack(layout, value):
    """Packed int of ``value`` (a dict of field values, or an int passed through) for ``layout``.

    Missing fields are 0; unknown fields and values that do not fit raise.
    ``layout`` is a ``data.StructLayout`` (e.g. ``OctetBeat``) or its fields as a mapping.
    """
    return codec(layout).pack(value)


def unpack(layout, word):
    """Dict of field values of the packed int ``word`` (nested layouts give nested dicts)."""
    return codec(layout).unpack(int(word))


# ---------------------------------------------------------------------------
# octet beats

def bytes_to_beats(data, width, conn=0, **extra):
    """Beats (dicts) carrying ``data`` as one unit: ``first`` on the first, ``last`` on the last.

    Lane 0 holds the first octet; every beat but the last is full (``n == width``);
    unused lanes of the last beat are 0. ``extra`` fields are copied into every beat.
    """
    data = bytes(data)
    if not data:
        raise ValueError("a unit has at least one octet (n is never 0)")
    beats = []
    count = (len(data) + width - 1) // width
    for i in range(count):
        chunk = data[i * width:(i + 1) * width]
        beat = {"data": int.from_bytes(chunk, "little"), "n": len(chunk),
                "first": int(i == 0), "last": int(i == count - 1), "conn": conn}
        beat.update(extra)
        beats.append(beat)
    return beats


def beats_to_bytes(beats):
    """Octets carried by ``beats`` (the first ``n`` lanes of each), in order."""
    out = bytearray()
    for beat in beats:
        n = beat["n"]
        out += (beat["data"] & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
    return bytes(out)


def beats_to_units(beats, *, check=True):
    """Split a beat sequence into units: list of ``(conn, bytes)``.

    With ``check`` the framing is verified: ``first`` exactly on the first beat
    of a unit, ``last`` on its last, ``n`` in 1..width with only the last beat
    partial is not checked (width unknown) but ``n >= 1`` is, and a unit
    never changes ``conn``.
    """
    units = []
    cur = None
    conn = None
    for i, beat in enumerate(beats):
        if check:
            if beat["n"] < 1:
                raise AssertionError(f"beat {i}: n == 0")
            if bool(beat["first"]) != (cur is None):
                raise AssertionError(f"beat {i}: first={beat['first']} but "
                                     f"{'no unit' if cur is None else 'a unit'} is open")
            if cur is not None and beat["conn"] != conn:
                raise AssertionError(f"beat {i}: conn changed from {conn} to {beat['conn']} inside a unit")
        if cur is None:
            cur = bytearray()
            conn = beat["conn"]
        n = beat["n"]
        cur += (beat["data"] & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
        if beat["last"]:
            units.append((conn, bytes(cur)))
            cur = None
    if check and cur is not None:
        raise AssertionError(f"unit for conn {conn} not closed by a last beat ({len(cur)} octets open)")
    return units


# ---------------------------------------------------------------------------
# BFMs

def port_name(prefix, member):
    """Verilog port name of stream member ``member`` ("valid", "ready", "payload") of port ``prefix``."""
    return f"{prefix.rstrip('_')}__{member}"


def _handle(dut, prefix, member, required=True):
    name = port_name(prefix, member)
    try:
        return getattr(dut, name)
    except AttributeError:
        if required:
            raise AttributeError(f"{dut._name} has no port {name!r} (stream prefix {prefix!r})") from None
        return None


def _reader(handle):
    """Fast int reader for a signal (skips LogicArray construction)."""
    raw = getattr(handle, "_handle", None)
    get = getattr(raw, "get_signal_val_binstr", None)
    if get is None:                       # pragma: no cover - other cocotb internals
        return lambda: int(handle.value)

    def read():
        s = get()
        try:
            return int(s, 2)
        except ValueError:
            raise ValueError(f"{handle._path} is not a 0/1 value: {s}") from None
    return read


class _Writer:
    """Writes an int to a signal only when it changes."""

    __slots__ = ("handle", "last")

    def __init__(self, handle, init=None):
        self.handle = handle
        self.last = None
        if init is not None:
            self(init)

    def __call__(self, value):
        if value != self.last:
            self.handle.value = value
            self.last = value


class StreamDriver:
    """Drives an ``In(stream.Signature(layout))`` port of the DUT (a source).

    ``append(beat)`` queues a beat (a dict of fields, or an already packed
    int); ``await send(beat)`` queues it and returns once the DUT accepted it.
    Before each new beat the driver idles one more cycle with probability
    ``idle_prob`` (so idle runs have a geometric length). ``valid`` and
    ``payload`` are held until ``ready``. ``layout=None`` means the payload is a
    plain int. Set ``paused = True`` to stop offering new beats.
    """

    def __init__(self, dut, prefix, clk, layout, *, idle_prob=0.0, rng=None, name=None):
        from cocotb import start_soon
        from cocotb.triggers import Event, ReadOnly, RisingEdge

        self.name = name or prefix
        self.layout = layout
        self._codec = codec(layout) if layout is not None else None
        self.idle_prob = idle_prob
        self.rng = rng if rng is not None else random.Random()
        self.paused = False
        self.queue = collections.deque()
        self.sent = 0                 #: beats accepted by the DUT
        self.queued = 0               #: beats ever queued
        self._busy = False            #: a beat is on the port
        self._valid = _Writer(_handle(dut, prefix, "valid"), 0)
        self._payload = _Writer(_handle(dut, prefix, "payload"))
        ready = _handle(dut, prefix, "ready", required=False)
        self._ready = _reader(ready) if ready is not None else (lambda: 1)
        self._edge = RisingEdge(clk)
        self._ro = ReadOnly()
        self._wake = Event()
        self._waiters = collections.deque()   # (ticket, Event) for send()/wait_idle()
        self._task = start_soon(self._run())

    def __len__(self):
        return len(self.queue) + self._busy

    def _pack(self, beat):
        return self._codec.pack(beat) if self._codec is not None else int(beat)

    def append(self, beat):
        """Queue one beat; returns at once."""
        self.queue.append(self._pack(beat))
        self.queued += 1
        self._wake.set()

    def extend(self, beats):
        """Queue several beats."""
        for beat in beats:
            self.append(beat)

    def append_bytes(self, data, conn=0, **extra):
        """Queue ``data`` as one unit of octet beats (layout must be an ``OctetBeat``)."""
        self.extend(bytes_to_beats(data, self.layout.width, conn=conn, **extra))

    async def send(self, beat):
        """Queue one beat and wait until the DUT has accepted it."""
        self.append(beat)
        await self._wait_for(self.queued)

    async def wait_idle(self):
        """Wait until every queued beat has been accepted."""
        await self._wait_for(self.queued)

    async def _wait_for(self, ticket):
        from cocotb.triggers import Event
        if self.sent >= ticket:
            return
        ev = Event()
        self._waiters.append((ticket, ev))
        await ev.wait()

    def idle(self):
        """True when nothing is queued or on the port."""
        return not self.queue and not self._busy

    async def _run(self):
        edge, ro, rng = self._edge, self._ro, self.rng
        queue, waiters = self.queue, self._waiters
        set_valid, set_payload, ready = self._valid, self._payload, self._ready
        busy = accepted = False
        while True:
            await edge
            if busy and accepted:  # sampled in the ReadOnly phase of the previous cycle
                busy = False
                self.sent += 1
                while waiters and waiters[0][0] <= self.sent:
                    waiters.popleft()[1].set()
            if not busy:
                if not queue or self.paused:
                    set_valid(0)
                    self._busy = False
                    if not queue:
                        self._wake.clear()
                        await self._wake.wait()
                        # re-align to the clock before driving
                    continue
                if self.idle_prob and rng.random() < self.idle_prob:
                    set_valid(0)
                    continue
                set_payload(queue.popleft())
                set_valid(1)
                busy = self._busy = True
            await ro
            accepted = ready()


class StreamMonitor:
    """Receives from an ``Out(stream.Signature(layout))`` port of the DUT (a sink).

    Drives ``ready`` low with probability ``backpressure_prob`` each cycle
    (``paused = True`` holds it low), collects accepted beats as dicts
    (``raw=True``: packed ints) in ``items``; ``await recv()`` pops the next
    one. With ``check_protocol`` (default) it fails the test if the DUT drops
    ``valid`` or changes ``payload`` while stalled. ``callback(beat)``, if
    given, is called for each beat instead of queueing it.
    """

    def __init__(self, dut, prefix, clk, layout, *, backpressure_prob=0.0, rng=None,
                 raw=False, check_protocol=True, callback=None, name=None):
        from cocotb import start_soon
        from cocotb.triggers import Event, ReadOnly, RisingEdge

        self.name = name or prefix
        self.layout = layout
        self._codec = codec(layout) if layout is not None and not raw else None
        self.backpressure_prob = backpressure_prob
        self.rng = rng if rng is not None else random.Random()
        self.paused = False
        self.check_protocol = check_protocol
        self.callback = callback
        self.items = collections.deque()
        self.received = 0             #: beats accepted so far
        self.stall_cycles = 0         #: cycles with valid=1, ready=0
        self._valid = _reader(_handle(dut, prefix, "valid"))
        self._payload = _reader(_handle(dut, prefix, "payload"))
        ready = _handle(dut, prefix, "ready", required=False)
        self._ready = _Writer(ready, 0) if ready is not None else None
        self._edge = RisingEdge(clk)
        self._ro = ReadOnly()
        self._got = Event()
        self._task = start_soon(self._run())

    def __len__(self):
        return len(self.items)

    async def recv(self):
        """Next received beat (waits for it)."""
        while not self.items:
            self._got.clear()
            await self._got.wait()
        return self.items.popleft()

    async def recv_unit(self):
        """Beats up to and including the next ``last`` beat; returns ``(conn, bytes)``."""
        beats = [await self.recv()]
        while not beats[-1]["last"]:
            beats.append(await self.recv())
        return beats_to_units(beats)[0]

    def get_nowait(self):
        return self.items.popleft()

    async def _run(self):
        edge, ro, rng = self._edge, self._ro, self.rng
        valid, payload, set_ready = self._valid, self._payload, self._ready
        items, decode = self.items, self._codec
        stalled = False
        held = 0
        while True:
            await edge
            rdy = 0 if self.paused else (
                0 if (self.backpressure_prob and rng.random() < self.backpressure_prob) else 1)
            if set_ready is not None:
                set_ready(rdy)
            else:
                rdy = 1
            await ro
            v = valid()
            if stalled and self.check_protocol:
                if not v:
                    raise AssertionError(f"stream {self.name}: valid dropped before ready "
                                         f"(beat {self.received})")
                p = payload()
                if p != held:
                    raise AssertionError(f"stream {self.name}: payload changed while stalled "
                                         f"(beat {self.received}: {held:#x} -> {p:#x})")
            if v:
                if rdy:
                    stalled = False
                    p = payload()
                    self.received += 1
                    beat = decode.unpack(p) if decode is not None else p
                    if self.callback is not None:
                        self.callback(beat)
                    else:
                        items.append(beat)
                        self._got.set()
                else:
                    self.stall_cycles += 1
                    if self.check_protocol and not stalled:
                        held = payload()
                    stalled = True


def assert_drained(*bfms):
    """Assert that drivers have nothing left to send and monitors nothing left unread."""
    problems = []
    for bfm in bfms:
        if isinstance(bfm, StreamDriver):
            if not bfm.idle():
                problems.append(f"driver {bfm.name}: {len(bfm)} beats not accepted")
        elif isinstance(bfm, StreamMonitor):
            if bfm.items:
                problems.append(f"monitor {bfm.name}: {len(bfm.items)} beats not consumed, "
                                f"first {bfm.items[0]!r}")
        else:
            raise TypeError(f"not a stream BFM: {bfm!r}")
    if problems:
        raise AssertionError("; ".join(problems))


# ---------------------------------------------------------------------------
# testbench base

class TB:
    """Base for testbenches: clock, reset, params, seeded RNG, BFM factories.

    Subclass and add your BFMs in ``__init__``::

        class MyTB(TB):
            def __init__(self, dut):
                super().__init__(dut)
                W = self.params["width"]
                self.layout = OctetBeat(width=W, connections=4)
                self.src = self.source("i", self.layout, idle_prob=0.2)
                self.snk = self.sink("o", self.layout, backpressure_prob=0.2)

    ``self.params`` is the ``params`` dict given to :func:`rnic.sim.runner.run`.
    ``self.rng`` is seeded from cocotb's random seed (``seed=`` of ``run``), so
    a failing run repeats with the same seed. The clock (period ``period_ns``)
    starts in the constructor if the DUT has a ``clk`` port.
    """

    def __init__(self, dut, *, period_ns=10, clk="clk", rst="rst", seed=None):
        import cocotb
        from cocotb.clock import Clock

        from rnic.sim.runner import sim_params

        self.dut = dut
        self.log = dut._log
        self.params = sim_params()
        if seed is None:
            seed = cocotb.RANDOM_SEED
        self.rng = random.Random(seed)
        self.period_ns = period_ns
        self.clk = getattr(dut, clk, None) if clk else None
        self.rst = getattr(dut, rst, None) if rst else None
        if self.rst is not None:
            self.rst.value = 0
        if self.clk is not None:
            Clock(self.clk, period_ns, unit="ns").start(start_high=False)

    def source(self, prefix, layout, **kwargs):
        """A :class:`StreamDriver` on DUT input stream ``prefix``, sharing this TB's clock and RNG."""
        kwargs.setdefault("rng", self.rng)
        return StreamDriver(self.dut, prefix, self.clk, layout, **kwargs)

    def sink(self, prefix, layout, **kwargs):
        """A :class:`StreamMonitor` on DUT output stream ``prefix``."""
        kwargs.setdefault("rng", self.rng)
        return StreamMonitor(self.dut, prefix, self.clk, layout, **kwargs)

    async def reset(self, cycles=2):
        """Hold ``rst`` high for ``cycles`` rising edges, release it after an edge."""
        from cocotb.triggers import RisingEdge
        edge = RisingEdge(self.clk)
        if self.rst is not None:
            self.rst.value = 1
        for _ in range(cycles):
            await edge
        if self.rst is not None:
            self.rst.value = 0

    async def cycles(self, n=1):
        """Wait ``n`` rising edges."""
        from cocotb.triggers import RisingEdge
        edge = RisingEdge(self.clk)
        for _ in range(n):
            await edge

    def cycle(self):
        """Current cycle number (sim time / period)."""
        from cocotb.simtime import get_sim_time
        return int(get_sim_time("ns") // self.period_ns)
