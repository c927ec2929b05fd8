"""Lane stage of the TX framer: fills the word lanes of each output beat."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import check_width, conn_bits
from .layouts import LaneBeat, WordEntry

__all__ = ["MpaTxLanes"]

#: The lane chain's state between two lanes: ``in_fpdu``, inside an FPDU (its first word was
#: sent); ``data_done``, all its data words sent, the CRC is due; ``len_sent``, its LEN word
#: was sent (a marker before it has FPDUPTR 0); ``new_fpdu``, it started in this beat;
#: ``since_len``, words since its LEN word (its FPDUPTR / 4, if ``new_fpdu``); ``taken``,
#: words taken from the window; ``ended``, the run ends with this beat; ``stall``, the beat
#: waits for words.
_CHAIN_STATE = ("in_fpdu", "data_done", "len_sent", "new_fpdu", "since_len", "taken", "ended",
                "stall")


class MpaTxLanes(wiring.Component):
    """Lane stage of the TX framer: makes the output beats, CRC lanes still empty.

    The W/4 lanes of a beat are filled in order: each lane is a marker (its lanes are
    known per beat: a run is one connection and advances its phase by W/4 words per
    beat), the next data word from the window, or the CRC (after the FPDU's last data
    word). The beat register holds the chosen words with per-lane "CRC here" and "FPDU
    starts here" flags. The stage keeps the open run's state: its connection and
    switches, the FPDU in progress and its FPDUPTR, the marker phase.

    Packet boundaries: when an FPDU ends inside a beat, the next FPDU of the same
    connection continues the run in the same beat if its first word is in the window;
    if it is of the same connection but still in the input stages (``next_same``), the
    beat waits for it; else the run ends with this beat (``last``). With ``fpdu_runs``
    every FPDU ends its run. A marker at an FPDU boundary goes with the following FPDU,
    so a run never ends with a marker. A new run starts at lane 0.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connections (width of ``conn``).
    fpdu_runs : bool
        One FPDU per run (for a TCP engine that cuts segments at run ends).

    Ports
    -----
    window : In(ArrayLayout(WordEntry, W/4 + 1))
        The first words of the word buffer.
    have : In(W/4 + 1)
        Bit k: ``window[k]`` holds a word.
    next_same : In(1)
        The ULPDU after the buffer's words is of the same connection (in the input stages).
    pop : Out(range(W/4 + 1))
        Words taken from the window in this cycle.
    o : Out(stream.Signature(LaneBeat))
        The beat register.

    Latency 1 (the beat register), throughput one beat per cycle. The beat register is
    loaded whenever it is free (valid or not: the lane chain is kept off the clock
    enables).
    """

    def __init__(self, *, width, connections, fpdu_runs=False):
        self.width = check_width(width)
        self.connections = connections
        if not isinstance(fpdu_runs, bool):
            raise TypeError(f"fpdu_runs must be a bool, not {fpdu_runs!r}")
        self.fpdu_runs = fpdu_runs
        L = width // 4
        super().__init__({
            "window": In(data.ArrayLayout(WordEntry(width=width, connections=connections),
                                          L + 1)),
            "have": In(L + 1),
            "next_same": In(1),
            "pop": Out(range(L + 1)),
            "o": Out(stream.Signature(LaneBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        L = self.width // 4
        cb = conn_bits(self.connections)
        window = self.window
        run = dict(
            in_fpdu=Signal(name="in_fpdu"),     # inside an FPDU (its first word was sent)
            data_done=Signal(name="data_done"), # all data words of the FPDU sent, CRC due
            fptr=Signal(15, name="fptr"),   # words from the FPDU's LEN word to lane 0 of the
                                            # next beat
            q=Signal(7, name="q"),          # run open: phase of the next beat's lane 0, in words
            qmask=Signal(L, name="qmask"),  # run open: lanes of the next beat at phase 0
            mk=Signal(name="mk"),           # run open: the run's connection has markers
            crcen=Signal(name="crcen"),     # run open: ... and CRC
            conn=Signal(cb, name="conn"),   # run open: the run's connection
            run_open=Signal(name="run_open"),   # a run started, its last beat not sent yet
        )
        run_open, mk = run["run_open"], run["mk"]

        # Per-beat facts that do not depend on the lane chain: a run carries one connection
        # (so one markers/crc setting), and since every beat of a run but the last is full,
        # the phase advances by L words per beat: the marker lanes are known up front.
        # A new run starts at lane 0 with the window's first word (precomputed mask).
        bt_mk = Signal()
        bt_crcen = Signal()
        bt_conn = Signal(cb)
        marker_at = Signal(L)
        m.d.comb += [
            bt_mk.eq(Mux(run_open, mk, window[0].markers)),
            bt_crcen.eq(Mux(run_open, run["crcen"], window[0].crc)),
            bt_conn.eq(Mux(run_open, run["conn"], window[0].conn)),
            marker_at.eq(Mux(run_open, run["qmask"] & Cat(*([mk] * L)), window[0].mlanes)),
        ]
        # FPDUPTR of a marker in lane s: fptr + s if its FPDU started before this beat, else
        # counted by the chain from the FPDU's start lane ('rel', a few bits).
        fptr_at = [Signal(16, name=f"fptr_at{k}") for k in range(L + 1)]
        m.d.comb += [f.eq(run["fptr"] + k) for k, f in enumerate(fptr_at)]

        lanes, after = self._lane_chain(m, run, marker_at, fptr_at)
        load = self._beat_register(m, lanes, after, bt_crcen, bt_conn, run_open)
        m.d.comb += self.pop.eq(Mux(load, after["taken"], 0))

        q, qmask = run["q"], run["qmask"]
        q_next = Signal(7)
        qmask_next = Signal(L)
        m.d.comb += [
            q_next.eq(Mux(run_open, q + L, window[0].qn)),
            qmask_next.eq(Mux(run_open, Cat(*[(q + L + k)[0:7] == 0 for k in range(L)]),
                              window[0].mnext)),
        ]
        with m.If(load):
            m.d.sync += [
                run_open.eq(~after["ended"]),
                run["in_fpdu"].eq(after["in_fpdu"]), run["data_done"].eq(after["data_done"]),
                run["fptr"].eq(Mux(after["new_fpdu"], after["since_len"], fptr_at[L])),
                q.eq(q_next), qmask.eq(qmask_next),
                mk.eq(bt_mk), run["crcen"].eq(bt_crcen), run["conn"].eq(bt_conn),
            ]
        return m

    def _lane_chain(self, m, run, marker_at, fptr_at):
        """The chain over the lanes: returns the lanes (word, used, CRC lane, FPDU start)
        and the chain's state after the last lane."""
        L = self.width // 4
        st = dict(in_fpdu=run["in_fpdu"], data_done=run["data_done"], len_sent=Const(1, 1),
                  new_fpdu=Const(0, 1), since_len=Const(0, range(L + 1)),
                  taken=Const(0, range(L + 2)),
                  ended=Const(0, 1), stall=Const(0, 1))
        lanes = []
        for s in range(L + 1):
            head = Signal(self.window.shape().elem_shape, name=f"head{s}")
            in_buf = Signal(name=f"in_buf{s}")
            if s == 0:
                m.d.comb += [head.eq(self.window[0]), in_buf.eq(self.have[0])]
            else:
                with m.Switch(st["taken"]):
                    for k in range(s + 1):
                        with m.Case(k):
                            m.d.comb += [head.eq(self.window[k]), in_buf.eq(self.have[k])]
            start, ended, stall = self._between_fpdus(m, s, st, head, in_buf)
            if s == L:
                return lanes, dict(st, ended=ended, stall=stall)
            st, lane = self._fill_lane(m, s, st, start, ended, stall, head, in_buf,
                                       marker_at, fptr_at)
            lanes.append(lane)

    def _between_fpdus(self, m, s, st, head, in_buf):
        """Lane s between FPDUs: start the next one, end the run, or wait (``s == L``:
        after the last lane, does the run go on in the next beat?)."""
        L = self.width // 4
        start = Signal(name=f"start{s}")
        ended = Signal(name=f"ended{s}")
        stall = Signal(name=f"stall{s}")
        m.d.comb += [ended.eq(st["ended"]), stall.eq(st["stall"])]
        with m.If(~st["ended"] & ~st["stall"] & ~st["in_fpdu"]):
            if s > 0 and self.fpdu_runs:
                m.d.comb += ended.eq(1)           # the FPDU before ends the run
            elif s == 0:
                with m.If(in_buf):
                    m.d.comb += start.eq(1)
                with m.Else():
                    m.d.comb += stall.eq(1)       # nothing to send (or next FPDU not in yet)
            elif s < L:
                with m.If(in_buf):
                    with m.If(head.cont):
                        m.d.comb += start.eq(1)
                    with m.Else():
                        m.d.comb += ended.eq(1)
                with m.Elif(self.next_same):
                    m.d.comb += stall.eq(1)       # same connection, a cycle or two away
                with m.Else():
                    m.d.comb += ended.eq(1)
            else:
                with m.If(in_buf):
                    m.d.comb += ended.eq(~head.cont)
                with m.Else():
                    m.d.comb += ended.eq(~self.next_same)
        return start, ended, stall

    def _fill_lane(self, m, s, st, start, ended, stall, head, in_buf, marker_at, fptr_at):
        """Lane s's word: a marker, the next data word or the CRC. Returns the chain state
        after it and the lane ``(word, use, is_crc, start)``."""
        L = self.width // 4
        shapes = dict(in_fpdu=1, data_done=1, len_sent=1, new_fpdu=1, since_len=range(L + 1),
                      taken=range(L + 2), ended=1, stall=1)
        # the FPDU's state, fresh if it starts in this lane
        ef = {}
        for key, init in (("new_fpdu", 1), ("since_len", 0), ("len_sent", 0), ("data_done", 0)):
            sig = Signal(shapes[key], name=f"e_{key}{s}")
            m.d.comb += sig.eq(Mux(start, init, st[key]))
            ef[key] = sig
        e_in_fpdu = st["in_fpdu"] | start

        word = Signal(32, name=f"word{s}")
        use = Signal(name=f"use{s}")
        is_crc = Signal(name=f"is_crc{s}")
        nx = {k: Signal(shapes[k], name=f"{k}{s + 1}") for k in _CHAIN_STATE}
        m.d.comb += [
            nx["in_fpdu"].eq(e_in_fpdu), nx["data_done"].eq(ef["data_done"]),
            nx["len_sent"].eq(ef["len_sent"]), nx["new_fpdu"].eq(ef["new_fpdu"]),
            nx["since_len"].eq(ef["since_len"]), nx["taken"].eq(st["taken"]),
            nx["ended"].eq(ended), nx["stall"].eq(stall),
        ]
        ptr = Signal(16, name=f"ptr{s}")
        m.d.comb += ptr.eq(Mux(ef["new_fpdu"], ef["since_len"], fptr_at[s]) << 2)
        with m.If(e_in_fpdu & ~ended & ~stall):
            with m.If(marker_at[s]):
                m.d.comb += [
                    word.eq(Cat(Const(0, 16), ptr[8:16], ptr[0:8])),
                    use.eq(1),
                    nx["since_len"].eq(ef["since_len"] + ef["len_sent"]),
                ]
            with m.Elif(~ef["data_done"]):
                with m.If(in_buf):
                    m.d.comb += [
                        word.eq(head.data),
                        use.eq(1),
                        nx["taken"].eq(st["taken"] + 1),
                        nx["data_done"].eq(head.eof),
                        nx["len_sent"].eq(1),
                        nx["since_len"].eq(ef["since_len"] + 1),
                    ]
                with m.Else():
                    m.d.comb += nx["stall"].eq(1)     # FPDU octets not in yet
            with m.Else():
                m.d.comb += [
                    is_crc.eq(1),
                    use.eq(1),
                    nx["in_fpdu"].eq(0),
                    nx["data_done"].eq(0),
                ]
        return nx, (word, use, is_crc, start)

    def _beat_register(self, m, lanes, after, bt_crcen, bt_conn, run_open):
        """The beat register, loaded whenever it is free; returns ``load`` (a beat goes in)."""
        L = self.width // 4
        r = self.o.payload
        r_move = Signal()
        m.d.comb += r_move.eq(self.o.valid & self.o.ready)
        beat_ok = Signal()
        m.d.comb += beat_ok.eq(~after["stall"])
        r_free = Signal()
        m.d.comb += r_free.eq(~self.o.valid | r_move)
        load = Signal()
        m.d.comb += load.eq(beat_ok & r_free)
        nused = Signal(range(L + 1))
        m.d.comb += nused.eq(sum(use for _, use, _, _ in lanes))
        with m.If(r_free):
            # loaded whenever free (valid or not): keeps the lane chain off the clock enables
            m.d.sync += [
                self.o.valid.eq(beat_ok),
                r.words.eq(Cat(*[Mux(use, word, 0) for word, use, _, _ in lanes])),
                r.crc.eq(Cat(*[is_crc for _, _, is_crc, _ in lanes])),
                r.start.eq(Cat(*[start for _, _, _, start in lanes])),
                r.crcen.eq(bt_crcen),
                r.n.eq(nused << 2),
                r.first.eq(~run_open),
                r.last.eq(after["ended"]),
                r.conn.eq(bt_conn),
            ]
        return load
