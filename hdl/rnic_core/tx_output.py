"""The framer's output register and the TX marker tracker: see :class:`FramerOutput`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

from ..beat import OctetBeat, conn_bits
from ..mpa_config import MARKER_INTERVAL
from .layouts import MarkerConfig, MarkerState

__all__ = ["FramerOutput"]


class FramerOutput(wiring.Component):
    """Output register S behind the framer, and the per-connection marker tracker that
    counts the markers in the framer's output (for TX_MARKERS).

    The tracker keeps, per connection (one :class:`MarkerState` memory row each), whether
    it has markers and the stream offset modulo 512 of its next octet; a beat with
    markers holds one where the offset is 0 at its start or passes
    :data:`~rnic.hdl.mpa_config.MARKER_INTERVAL` inside it. The row is written back at the
    last beat of each output run (``last``); ``config`` (a COMMIT) writes it, the reset
    sweep clears row ``sweep_conn``.

    Ports
    -----
    i : In(stream.Signature(OctetBeat))
        :class:`~rnic.hdl.mpa_tx.MpaTxFramer` ``o``; not ready while ``config`` waits.
    o : Out(stream.Signature(OctetBeat))
        The register S.
    config : In(stream.Signature(MarkerConfig))
        Taken in a cycle without a write-back, after the sweep.
    sweeping, sweep_conn : In(1), In(conn)
        The reset sweep (see :class:`~rnic.hdl.rnic_core.setup.ConnectionSetup`).
    octets : Out(bits_for(W))
        Octets of the beat that entered S in the cycle before (0 if none), for TX_OCTETS.
    marker : Out(1)
        A marker, 2 cycles after its beat entered S, for TX_MARKERS.

    Latency and throughput
    ----------------------
    ``i`` to ``o``: one cycle, one beat per cycle; a COMMIT takes one cycle of ``i``.
    Stage T, the cycle after S, registers the row read for S's beat first, so that the
    memory output (slow on block RAM) only feeds flip-flops; the state after the last
    beat T processed stands in for the row when that beat was of the same connection
    (its write-back came too late for the read). Beats pass unchanged, packet
    boundaries included.
    """

    def __init__(self, *, width, connections):
        self.width = width
        self.connections = connections
        beat = OctetBeat(width=width, connections=connections)
        super().__init__({
            "i": In(stream.Signature(beat)),
            "o": Out(stream.Signature(beat)),
            "config": In(stream.Signature(MarkerConfig(connections=connections))),
            "sweeping": In(1),
            "sweep_conn": In(conn_bits(connections)),
            "octets": Out(bits_for(width)),
            "marker": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, N = self.width, self.connections
        cb = conn_bits(N)
        i, cfg = self.i, self.config

        # ---- output register S
        s_valid, s_fresh = Signal(), Signal()
        s_beat = Signal(OctetBeat(width=W, connections=N))
        m.d.comb += [self.o.valid.eq(s_valid), self.o.payload.eq(s_beat),
                     i.ready.eq((~s_valid | self.o.ready) & ~cfg.valid)]
        take = i.valid & i.ready
        m.d.sync += s_fresh.eq(take)
        with m.If(take):
            m.d.sync += [s_valid.eq(1), s_beat.eq(i.payload)]
        with m.Elif(self.o.ready):
            m.d.sync += s_valid.eq(0)
        m.d.comb += self.octets.eq(Mux(s_fresh, s_beat.n, 0))

        # ---- marker tracker
        m.submodules.trk_mem = trk_mem = Memory(shape=MarkerState(), depth=N, init=[])
        trk_wp = trk_mem.write_port()
        trk_rp = trk_mem.read_port(transparent_for=(trk_wp,))
        m.d.comb += trk_rp.addr.eq(i.payload.conn)
        # stage T (signals kt_*); 'run' is the state after the last beat T processed
        kt_valid, kt_first, kt_last, kt_fwd = Signal(), Signal(), Signal(), Signal()
        kt_row = Signal(MarkerState())
        kt_n = Signal(range(W + 1))
        kt_conn = Signal(cb)
        l_valid = Signal()              # 'run' holds the state of connection l_conn
        l_conn = Signal(cb)
        trk_cfg_wr = Signal()
        m.d.sync += [
            kt_valid.eq(s_fresh), kt_row.eq(trk_rp.data), kt_n.eq(s_beat.n),
            kt_first.eq(s_beat.first), kt_last.eq(s_beat.last), kt_conn.eq(s_beat.conn),
            kt_fwd.eq(Mux(kt_valid, kt_conn == s_beat.conn,
                         l_valid & ~trk_cfg_wr & (l_conn == s_beat.conn))),
        ]
        run = Signal(MarkerState())
        base = Signal(MarkerState())
        m.d.comb += base.eq(Mux(kt_first & ~kt_fwd, kt_row, run))
        sum_phase = Signal(10)
        m.d.comb += sum_phase.eq(base.phase + kt_n)
        marker_hit = Signal()
        m.d.comb += marker_hit.eq(kt_valid & base.markers
                                  & ((base.phase == 0) | (sum_phase > MARKER_INTERVAL)))
        m.d.sync += self.marker.eq(marker_hit)   # (off the memory path)
        after = Signal(MarkerState())
        m.d.comb += [after.markers.eq(base.markers), after.phase.eq(sum_phase[:9])]
        wb = kt_valid & kt_last
        with m.If(kt_valid):
            m.d.sync += [run.eq(after), l_valid.eq(1), l_conn.eq(kt_conn)]
        with m.Elif(trk_cfg_wr):
            m.d.sync += l_valid.eq(0)
        m.d.comb += cfg.ready.eq(~self.sweeping & ~wb)
        with m.If(self.sweeping):
            m.d.comb += [trk_wp.en.eq(1), trk_wp.addr.eq(self.sweep_conn), trk_wp.data.eq(0)]
        with m.Elif(wb):
            m.d.comb += [trk_wp.en.eq(1), trk_wp.addr.eq(kt_conn), trk_wp.data.eq(after)]
        with m.Elif(cfg.valid):
            m.d.comb += [trk_wp.en.eq(1), trk_wp.addr.eq(cfg.payload.conn), trk_cfg_wr.eq(1),
                         trk_wp.data.markers.eq(cfg.payload.markers),
                         trk_wp.data.phase.eq(cfg.payload.phase)]
        return m
