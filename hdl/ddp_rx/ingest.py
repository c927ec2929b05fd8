"""Ingest: the deframer's beats into slot buffers, and a queue of complete ULPDUs."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory, ReadPort
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from ..mpa_rx import RX_ABORTED, MpaRxBeat
from ..synth_hints import no_rw_collision
from .header import header_rows, header_slot_rows
from .layouts import UlpduEntry

__all__ = ["Ingest", "IngestContext"]


class IngestContext(data.StructLayout):
    """Per-connection ingest state: a ULPDU is ``open`` in ``slot``, ``beats`` rows written,
    ``len`` octets so far, ``ovf`` it overflowed the slot."""

    def __init__(self, *, slots, rows):
        super().__init__({
            "open": unsigned(1), "slot": unsigned(max(1, exact_log2(slots))),
            "beats": unsigned(bits_for(rows)), "len": unsigned(16), "ovf": unsigned(1),
        })


class Ingest(wiring.Component):
    """Buffers each ULPDU whole in a slot, then queues it for the processor.

    A per-connection context (memory ``inctx``) says whether the connection has a ULPDU
    open and in which slot; a ULPDU's first beat takes a free slot, every beat is written
    to the slot buffer, the last beat (with the deframer's verdict) queues an entry. An MPA
    status or abort beat queues an entry without a slot (and ends an open ULPDU, whose slot
    goes with the entry). Nothing is placed before the verdict, so a ULPDU with a CRC or
    marker error is dropped whole.

    Parameters
    ----------
    width, connections, slots, slot_bytes
        As for :class:`rnic.hdl.ddp_rx.DdpRx`.

    Ports
    -----
    i : In(stream(MpaRxBeat))
        The deframer's output.
    o : Out(stream(UlpduEntry))
        Complete ULPDUs, in the order of their last beats.
    slot_rd : Out(ReadPort.Signature)
        Synchronous read port of the slot buffers: row ``slot * slot_bytes / width + k``
        holds octets ``k * width ..`` of the ULPDU in ``slot``. The processor reads only
        slots of entries it took.
    hdr_rd : Out(ReadPort.Signature)
        Synchronous read port of a copy of each slot's first rows (the header's,
        :func:`~rnic.hdl.ddp_rx.header.header_slot_rows` per slot): row
        ``slot * header_slot_rows(width) + k`` = row ``k`` of the slot. A port of its own,
        so that the processor reads the next segment's header while the placer reads the
        current one's payload.
    release, release_placed : In(stream(slot), always ready)
        The processor is done with a slot (two may come in one cycle: the segment
        processor's and its placer's); it is free from the next cycle on.

    Latency and throughput: one beat per cycle, no bubbles while a slot is free and the
    queue has room; a ULPDU is on ``o`` three cycles after its last beat's handshake.
    ``o`` is a register loaded while it is empty: at most one entry every two cycles.
    ``i.ready`` is a register: a beat offered while the stage stalls waits in a skid
    register and ``i.ready`` drops for as long. A first beat waits for a free slot, so more
    than ``slots`` ULPDUs open at once (partial ULPDUs of different connections interleaved
    by the deframer) stall the input for good; ``slots`` must cover the connections that
    can have a partial FPDU in flight.
    """

    def __init__(self, *, width, connections, slots, slot_bytes):
        self.width = width
        self.connections = connections
        self.slots = slots
        self.rows = slot_bytes // width
        C = connections
        super().__init__({
            "i": In(stream.Signature(MpaRxBeat(width=width, connections=C))),
            "o": Out(stream.Signature(UlpduEntry(slots=slots, connections=C))),
            "slot_rd": Out(ReadPort.Signature(addr_width=exact_log2(slots * self.rows),
                                              shape=8 * width)),
            "hdr_rd": Out(ReadPort.Signature(
                addr_width=exact_log2(slots * header_slot_rows(width)), shape=8 * width)),
            "release": In(stream.Signature(unsigned(max(1, exact_log2(slots))), always_ready=True)),
            "release_placed": In(stream.Signature(unsigned(max(1, exact_log2(slots))),
                                                  always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        W, C, N, ROWS = self.width, self.connections, self.slots, self.rows
        # Marked no_rw_collision (rnic.hdl.synth_hints): the ingest writes only free or open
        # slots, the processor reads only complete slots it owns (the rows it reads for an
        # entry without a slot are unused).
        slotbuf = no_rw_collision(Memory(shape=8 * W, depth=N * ROWS, init=[]))
        m.submodules.slotbuf = slotbuf
        sb_rd = slotbuf.read_port(domain="sync")
        m.d.comb += [sb_rd.addr.eq(self.slot_rd.addr), sb_rd.en.eq(self.slot_rd.en),
                     self.slot_rd.data.eq(sb_rd.data)]
        # the header rows' copy (no_rw_collision: as the slot buffers)
        hdrbuf = no_rw_collision(Memory(shape=8 * W, depth=N * header_slot_rows(W), init=[]))
        m.submodules.hdrbuf = hdrbuf
        hb_rd = hdrbuf.read_port(domain="sync")
        m.d.comb += [hb_rd.addr.eq(self.hdr_rd.addr), hb_rd.en.eq(self.hdr_rd.en),
                     self.hdr_rd.data.eq(hb_rd.data)]
        # (read and written in the same cycle for back-to-back beats of a connection: keeps
        # its transparency)
        inctx = Memory(shape=IngestContext(slots=N, rows=ROWS), depth=C, init=[])
        m.submodules.inctx = inctx
        ic_wr = inctx.write_port()
        ic_rd = inctx.read_port(domain="sync", transparent_for=(ic_wr,))
        # entries of complete ULPDUs, in order of their last beats (a FIFO with a
        # combinational read of its storage)
        ready = fifo.SyncFIFO(width=Shape.cast(self.o.payload.shape()).width, depth=N + 4)
        m.submodules.ready = ready

        s1 = self._input_stage(m, ic_rd)
        self._slots(m, s1, ic_rd, ic_wr, slotbuf.write_port(), hdrbuf.write_port(), ready)

        # The head of the queue is a register, loaded while it is empty (timing: the
        # processor's request arbiter then only clears ``o.valid``, and is not in front of
        # the FIFO's pointers and output): the latency of a buffered FIFO, and one idle cycle
        # between two takes, which the processor never uses.
        m.d.comb += ready.r_en.eq(~self.o.valid)
        with m.If(~self.o.valid):
            m.d.sync += [self.o.payload.eq(ready.r_data), self.o.valid.eq(ready.r_rdy)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m

    def _input_stage(self, m, ic_rd):
        """The beat register ``s1`` (with the connection's ingest context read for it) and
        the skid register in front of it. Returns ``s1``'s signals; the caller drives
        ``go`` (``s1``'s beat is done)."""
        beat_l = MpaRxBeat(width=self.width, connections=self.connections)
        s1 = SimpleNamespace(beat=Signal(beat_l, name="s1"), valid=Signal(name="s1_valid"),
                             go=Signal(name="s1_go"),
                             nz=Signal(name="s1_nz"),       # beat.n != 0
                             err=Signal(name="s1_err"))     # an error or status beat with an entry
        # ``i.ready`` is a register (timing: ``s1.go`` depends on the ingest context read, the
        # free slots and the queue, and the stage in front of the block must not wait for it):
        # a beat taken while ``s1`` stalls waits in the skid register ``sk`` and goes to ``s1``
        # first; ``i.ready`` is low while it waits. No latency is added (a beat goes straight
        # to ``s1`` while ``sk`` is empty), and after a stall the input is back at one beat per
        # cycle once ``sk`` has drained.
        sk_v = Signal()
        sk = Signal(beat_l)
        advance = Signal(name="s1_adv")     # ``s1`` takes the next beat (``sk``'s, else the input's)
        nb = Signal(beat_l)
        m.d.comb += [
            self.i.ready.eq(~sk_v),
            advance.eq(~s1.valid | s1.go),
            nb.eq(Mux(sk_v, sk.as_value(), self.i.payload.as_value())),
            ic_rd.addr.eq(nb.conn), ic_rd.en.eq(advance),
        ]
        # (``sk`` loads every beat offered while it is empty: its enable waits for nothing)
        with m.If(~sk_v):
            m.d.sync += sk.eq(self.i.payload)
        m.d.sync += sk_v.eq(~advance & (sk_v | self.i.valid))
        # two decodes of the beat are registered with it (timing: ``s1.go``)
        with m.If(advance):
            m.d.sync += [s1.beat.eq(nb), s1.valid.eq(sk_v | self.i.valid), s1.nz.eq(nb.n != 0),
                         s1.err.eq((nb.error != 0) & (nb.error != RX_ABORTED))]
        return s1

    def _slots(self, m, s1, ic_rd, ic_wr, sb_wr, hb_wr, ready):
        """``s1``'s beat into its slot (a first beat takes a free slot), its connection's
        ingest context updated, and the entry of a complete ULPDU queued."""
        C, N, ROWS = self.connections, self.slots, self.rows
        NB, RB = max(1, exact_log2(N)), exact_log2(ROWS)
        HB = exact_log2(header_slot_rows(self.width))
        ctx_l = IngestContext(slots=N, rows=ROWS)
        beat = s1.beat
        busy = Signal(N)           # slot in use
        free_mask = Signal(N)      # slot released by the processor this cycle
        alloc_mask = Signal(N)
        m.d.comb += free_mask.eq(Mux(self.release.valid, 1 << self.release.payload, 0)
                                 | Mux(self.release_placed.valid, 1 << self.release_placed.payload, 0))
        m.d.sync += busy.eq((busy | alloc_mask) & ~free_mask)
        have_free = Signal()
        free_idx = Signal(NB)
        for k in reversed(range(N)):
            with m.If(~busy[k]):
                m.d.comb += [have_free.eq(1), free_idx.eq(k)]

        ictx = ctx_l(ic_rd.data)
        nctx = Signal(ctx_l)
        ent_in = Signal(UlpduEntry(slots=N, connections=C))
        push = Signal()
        need_slot = Signal()
        slot_now = Signal(NB)
        row_now = Signal(bits_for(ROWS))
        m.d.comb += [
            need_slot.eq(s1.nz & beat.first & ~ictx.open),
            s1.go.eq(s1.valid & (~need_slot | have_free) & (~push | ready.w_rdy)),
            ready.w_data.eq(ent_in.as_value()),
            ready.w_en.eq(s1.go & push),
            ic_wr.addr.eq(beat.conn), ic_wr.data.eq(nctx), ic_wr.en.eq(s1.go),
            nctx.eq(ictx),
            slot_now.eq(Mux(ictx.open, ictx.slot, free_idx)),
            row_now.eq(Mux(beat.first, 0, ictx.beats)),
            sb_wr.addr.eq(Cat(row_now[:RB], slot_now)),
            sb_wr.data.eq(beat.data),
            hb_wr.addr.eq(Cat(row_now[:HB], slot_now)), hb_wr.data.eq(beat.data),
            ent_in.conn.eq(beat.conn), ent_in.err.eq(beat.error),
        ]
        with m.If(~s1.nz):
            # status or abort beat: ends an open ULPDU (its slot goes with the entry)
            m.d.comb += [
                push.eq(ictx.open | s1.err),
                ent_in.slot.eq(ictx.slot), ent_in.has_slot.eq(ictx.open),
                ent_in.len.eq(0), nctx.open.eq(0),
            ]
        with m.Else():
            new_len = Signal(17)
            ovf = Signal()
            m.d.comb += [
                new_len.eq(Mux(beat.first, 0, ictx.len) + beat.n),
                ovf.eq((row_now >= ROWS) | (~beat.first & ictx.ovf) | new_len[16]),
                sb_wr.en.eq(s1.go & (row_now < ROWS)),
                hb_wr.en.eq(s1.go & (row_now < header_rows(self.width))),
                alloc_mask.eq(Mux(s1.go & need_slot, 1 << free_idx, 0)),
                nctx.slot.eq(slot_now), nctx.beats.eq(row_now + 1), nctx.len.eq(new_len),
                nctx.ovf.eq(ovf), nctx.open.eq(~beat.last),
                push.eq(beat.last),
                ent_in.slot.eq(slot_now), ent_in.has_slot.eq(1),
                ent_in.len.eq(Mux(new_len[16], 0xFFFF, new_len[:16])), ent_in.ovf.eq(ovf),
            ]
