"""Store-and-forward frame buffer: a frame leaves only once all of it is in."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2

from rnic.host.spec.net import MIN_FRAME_LEN

from .layouts import FrameBeat, RxDrop, RxOctet

__all__ = ["FrameBuffer", "check_depth"]


def check_depth(depth):
    """``depth`` if it is a valid :class:`FrameBuffer` depth, else ValueError naming it."""
    return _power_of_2("depth", depth, 64)


def _power_of_2(name, value, least):
    if not isinstance(value, int) or isinstance(value, bool) or value < least \
            or value & (value - 1):
        raise ValueError(f"{name} must be a power of 2 of at least {least}, not {value!r}")
    return value


class FrameBuffer(wiring.Component):
    """Store-and-forward frame FIFO with commit and discard, one octet per cycle each way.

    Octets of a frame are written into a ring of ``depth`` octets (``amaranth.lib.memory``)
    as they come; the frame is committed on its ``last`` octet (its length goes into a
    queue of ``frames`` entries) and only committed frames are read out, so nothing partial
    ever leaves. A frame whose ``last`` octet carries a ``drop`` reason is discarded (the
    write pointer goes back to the end of the last committed frame): it vanishes entirely.

    When there is no room, it depends on ``overflow``:

    * ``"drop"`` (the receive path; ``i.ready`` is always 1, the MAC cannot be stalled): a
      frame that meets a full ring or a full length queue is discarded as a whole, its
      verdict becomes ``OVERFLOW``, and the next frame is taken again as usual.
    * ``"wait"`` (the transmit path): ``i.ready`` falls until the reader makes room; only a
      frame longer than the whole ring is discarded (the rest of it is taken and thrown
      away at full rate) with the verdict ``OVERFLOW``.

    Capacity: ``depth`` octets and ``frames`` frames at once (plus the frame being read
    out, whose length has left the queue); with ``depth = 4096`` that is
    two frames of 1514 octets, or 68 of 60 octets (``frames`` defaults to enough for
    ``depth`` octets of 60-octet frames).

    Parameters
    ----------
    depth : int
        Octets of the ring, a power of 2 (>= 64).
    frames : int or None
        Entries of the length queue, a power of 2; ``None``: ``depth / 60``, rounded up.
    overflow : "drop" or "wait"
        What a frame that does not fit does (above).

    Ports
    -----
    i : In(stream.Signature(RxOctet))
        Frame octets; ``drop`` counts on the ``last`` octet only.
    o : Out(stream.Signature(FrameBeat(width=1)))
        Committed frames, ``n`` = 1, back-to-back octets while ``o.ready`` is high.
    verdict : Out(stream.Signature(RxDrop, always_ready=True))
        One pulse per frame taken on ``i``, one cycle after its ``last`` octet: ``NONE`` if
        committed, else the reason it was discarded (its own ``drop`` or ``OVERFLOW``).

    Latency: the first octet of a frame is valid on ``o`` 4 cycles after its ``last``
    octet was taken on ``i`` (if ``o`` was idle): the length queue, then a register that
    holds the next frame's length ahead of its start (so the start and end of a frame on
    ``o`` depend on flip-flops only). Throughput: one octet per cycle on each
    side, with no gap between frames on ``o``.
    """

    def __init__(self, *, depth=4096, frames=None, overflow="drop"):
        self._depth = check_depth(depth)
        if frames is None:
            frames = 1 << ceil_log2(depth // MIN_FRAME_LEN + 1)
        self._frames = _power_of_2("frames", frames, 2)
        if overflow not in ("drop", "wait"):
            raise ValueError(f"overflow must be 'drop' or 'wait', not {overflow!r}")
        self._overflow = overflow
        super().__init__({
            "i": In(stream.Signature(RxOctet())),
            "o": Out(stream.Signature(FrameBeat(width=1))),
            "verdict": Out(stream.Signature(RxDrop, always_ready=True)),
        })

    @property
    def depth(self):
        return self._depth

    @property
    def frames(self):
        return self._frames

    def elaborate(self, platform):
        m = Module()
        depth = self._depth
        addr_bits = ceil_log2(depth)
        m.submodules.ring = ring = memory.Memory(shape=8, depth=depth, init=[])
        # (one entry less: the read side's next-length register is the last entry)
        m.submodules.lengths = lengths = fifo.SyncFIFOBuffered(width=bits_for(depth) + 2,
                                                               depth=self._frames - 1)
        wp = ring.write_port()
        rp = ring.read_port()

        # Pointers with one extra bit, so that full and empty differ.
        committed = Signal(addr_bits + 1)   # end of the last committed frame
        write = Signal(addr_bits + 1)       # next octet of the frame being written
        read = Signal(addr_bits + 1)        # next octet to fetch
        full = Signal()
        whole_ring = Signal()
        discarding = Signal()               # the rest of this frame is thrown away
        # (``a - b == depth``: the same ring position one lap apart; compares, not
        # subtracts: timing, no carry chain in front of the write side's decisions)
        def lap_apart(a, b):
            return (a[:addr_bits] == b[:addr_bits]) & (a[addr_bits] != b[addr_bits])
        m.d.comb += [full.eq(lap_apart(write, read)), whole_ring.eq(lap_apart(write, committed))]
        self._write_side(m, wp, lengths, committed, write, full, whole_ring, discarding)
        self._read_side(m, rp, lengths, read)
        return m

    def _write_side(self, m, wp, lengths, committed, write, full, whole_ring, discarding):
        beat = self.i.payload
        if self._overflow == "drop":
            m.d.comb += self.i.ready.eq(1)
            fits = ~full & ~discarding
        else:
            m.d.comb += self.i.ready.eq((~full | discarding | whole_ring) & lengths.w_rdy)
            fits = ~full & ~discarding
        # The queue holds what the read side loads as it is: the octets after the first,
        # and whether that is 0 or 1 (so no arithmetic sits behind the queue's read data).
        rest = (write - committed)[:len(lengths.w_data) - 2]
        m.d.comb += [wp.addr.eq(write[:-1]), wp.data.eq(beat.data),
                     lengths.w_data.eq(Cat(rest, rest == 0, rest == 1))]
        m.d.sync += self.verdict.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            with m.If(fits):
                m.d.comb += wp.en.eq(1)
                m.d.sync += write.eq(write + 1)
            with m.Elif(~discarding):
                # The first octet that does not fit: give the frame's octets back.
                m.d.sync += [discarding.eq(1), write.eq(committed)]
            with m.If(beat.last):
                keep = fits & (beat.drop == RxDrop.NONE) & lengths.w_rdy
                m.d.sync += [self.verdict.valid.eq(1), discarding.eq(0)]
                with m.If(keep):
                    m.d.comb += lengths.w_en.eq(1)
                    m.d.sync += [committed.eq(write + 1), self.verdict.payload.eq(RxDrop.NONE)]
                with m.Else():
                    m.d.sync += write.eq(committed)
                    with m.If(beat.drop != RxDrop.NONE):
                        m.d.sync += self.verdict.payload.eq(beat.drop)
                    with m.Else():
                        m.d.sync += self.verdict.payload.eq(RxDrop.OVERFLOW)

    def _read_side(self, m, rp, lengths, read):
        # The next frame's length is taken out of the queue into registers ahead of time
        # (``next_*``), and the current frame's count keeps its "0 left" / "1 left" flags
        # in registers, so that a frame starts and ends from flip-flops only.
        rest_bits = len(lengths.r_data) - 2
        queued = data.View(data.StructLayout({"rest": rest_bits, "single": 1, "double": 1}),
                           lengths.r_data)
        next_valid = Signal()
        next_rest = Signal(rest_bits)      # octets of the next frame after its first
        next_single = Signal()             # ... is 0: a frame of one octet
        next_double = Signal()             # ... is 1
        remaining = Signal(rest_bits)      # octets of the current frame still to fetch
        none_left = Signal(init=1)         # remaining == 0
        one_left = Signal()                # remaining == 1
        advance = ~self.o.valid | self.o.ready
        start = advance & none_left & next_valid
        m.d.comb += [rp.addr.eq(read[:-1]), rp.en.eq(advance),
                     self.o.payload.data.eq(rp.data), self.o.payload.n.eq(1),
                     lengths.r_en.eq(~next_valid | start)]
        with m.If(lengths.r_en & lengths.r_rdy):
            m.d.sync += [next_valid.eq(1), next_rest.eq(queued.rest),
                         next_single.eq(queued.single), next_double.eq(queued.double)]
        with m.Elif(start):
            m.d.sync += next_valid.eq(0)
        with m.If(advance):
            m.d.sync += self.o.valid.eq(0)
            with m.If(~none_left):
                m.d.sync += [self.o.valid.eq(1), read.eq(read + 1), remaining.eq(remaining - 1),
                             none_left.eq(one_left), one_left.eq(remaining == 2),
                             self.o.payload.first.eq(0), self.o.payload.last.eq(one_left)]
            with m.Elif(next_valid):
                m.d.sync += [self.o.valid.eq(1), read.eq(read + 1), remaining.eq(next_rest),
                             none_left.eq(next_single), one_left.eq(next_double),
                             self.o.payload.first.eq(1), self.o.payload.last.eq(next_single)]
