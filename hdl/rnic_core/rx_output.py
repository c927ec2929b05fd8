"""The deframer's output register and where its ULPDUs go: see :class:`DeframerOutput`."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.errors import Layer, MpaError
from rnic.host.spec.regmap import DpError

from ..beat import conn_bits
from ..mpa_rx import RX_ABORTED, MpaRxBeat
from .layouts import DpControl, FpduEnd
from .slices import slice_into

__all__ = ["DeframerOutput"]


class DeframerOutput(wiring.Component):
    """Output register R behind the deframer, the router of its ULPDUs, and the ULPDU end
    events.

    R's beats go to ``sink`` (the data port) while DP_CTRL.SINK, else to ``ulpdu`` (the
    core's ``rx_ulpdu``) while BYPASS, else to ``ddp`` (the DDP/RDMAP receive path). While
    ``sweeping``, ``ddp`` carries instead one abort beat (``first``, ``last``, error
    ABORTED, no octets) for each connection ``abort`` offers. ``hold`` stops taking beats
    from the deframer (the per-connection state is busy, or the sweep runs).

    Every last beat of a ULPDU taken from the deframer is an event on ``fpdu_end`` one
    cycle after its handshake (registered for timing: the handshake depends on the ready
    of the stream behind R; the events feed the per-connection state, the error capture
    and the counters), with its error in Terminate layout: LLP/0/2 (CRC), LLP/0/3
    (MARKER), DDP/0/0 (any other).

    Ports
    -----
    i : In(stream.Signature(MpaRxBeat))
        :class:`~rnic.hdl.mpa_rx.MpaRxDeframer` ``o``.
    ulpdu, ddp, sink : Out(stream.Signature(MpaRxBeat))
        The core's ``rx_ulpdu``; :class:`~rnic.hdl.ddp_rx.DdpRx` ``i``; the data port's
        receiver (:class:`~rnic.hdl.rnic_core.dp_rx.DataPortRx`).
    abort : In(stream.Signature(conn))
        The reset sweep's abort beats (only while ``sweeping``).
    fpdu_end : Out(stream.Signature(FpduEnd, always_ready=True))
    dp : In(DpControl)
        SINK, BYPASS, ``use_ddp``.
    sweeping, hold : In(1)

    Latency and throughput
    ----------------------
    ``i`` to ``ulpdu`` and ``sink``: one cycle (R); to ``ddp`` 2 cycles (R and a register
    slice). One beat per cycle. ULPDUs are not reordered or cut; ``dp`` should change
    only between ULPDUs.
    """

    def __init__(self, *, width, connections):
        beat = MpaRxBeat(width=width, connections=connections)
        self.width = width
        self.connections = connections
        super().__init__({
            "i": In(stream.Signature(beat)),
            "ulpdu": Out(stream.Signature(beat)),
            "ddp": Out(stream.Signature(beat)),
            "sink": Out(stream.Signature(beat)),
            "abort": In(stream.Signature(unsigned(conn_bits(connections)))),
            "fpdu_end": Out(stream.Signature(FpduEnd(connections=connections), always_ready=True)),
            "dp": In(DpControl()),
            "sweeping": In(1),
            "hold": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, N = self.width, self.connections
        i, dp = self.i, self.dp
        ddp_i = slice_into(m, "ddp_i_slice", wiring.flipped(self.ddp))

        # ---- output register R (so that the deframer can be held for a context write)
        r_valid = Signal()
        r_beat = Signal(MpaRxBeat(width=W, connections=N))
        r_out_ready = Signal()
        rxu, sink = self.ulpdu, self.sink
        m.d.comb += [
            rxu.payload.eq(r_beat), rxu.valid.eq(r_valid & ~dp.sink & dp.bypass),
            sink.payload.eq(r_beat), sink.valid.eq(r_valid & dp.sink),
            r_out_ready.eq(Mux(dp.sink, sink.ready, Mux(dp.bypass, rxu.ready, ddp_i.ready))),
            i.ready.eq((~r_valid | r_out_ready) & ~self.hold),
        ]
        # into the receive path: R's beats, or (sweep) one abort beat per connection
        m.d.comb += self.abort.ready.eq(ddp_i.ready)
        with m.If(self.sweeping):
            m.d.comb += [ddp_i.valid.eq(self.abort.valid), ddp_i.payload.conn.eq(self.abort.payload),
                         ddp_i.payload.first.eq(1), ddp_i.payload.last.eq(1),
                         ddp_i.payload.error.eq(RX_ABORTED)]
        with m.Else():
            m.d.comb += [ddp_i.valid.eq(r_valid & dp.use_ddp), ddp_i.payload.eq(r_beat)]
        got = i.valid & i.ready
        with m.If(got):
            m.d.sync += [r_valid.eq(1), r_beat.eq(i.payload)]
        with m.Elif(r_out_ready):
            m.d.sync += r_valid.eq(0)

        # ---- ULPDU end events
        ev_end = Signal()
        ev_conn = Signal(conn_bits(N))
        ev_error = Signal(DpError)
        m.d.sync += [ev_end.eq(got & i.payload.last), ev_conn.eq(i.payload.conn),
                     ev_error.eq(i.payload.error)]
        ev = self.fpdu_end
        m.d.comb += [ev.valid.eq(ev_end), ev.payload.conn.eq(ev_conn), ev.payload.error.eq(ev_error)]
        info = ev.payload.info
        with m.Switch(ev_error):
            with m.Case(DpError.CRC):
                m.d.comb += [info.layer.eq(Layer.LLP), info.ecode.eq(MpaError.CRC)]
            with m.Case(DpError.MARKER):
                m.d.comb += [info.layer.eq(Layer.LLP), info.ecode.eq(MpaError.MARKER)]
            with m.Default():
                m.d.comb += [info.layer.eq(Layer.DDP), info.ecode.eq(0)]
        return m
