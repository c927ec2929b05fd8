"""The wire side of the core, with DP_CTRL.LOOPBACK: see :class:`LoopbackSwitch`."""

from amaranth.hdl import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import OctetBeat
from ..stream_slice import StreamSlice

__all__ = ["LoopbackSwitch"]


class LoopbackSwitch(wiring.Component):
    """The framer's output to ``tx_wire`` and ``rx_wire`` to the deframer, or (LOOPBACK)
    the framer's output into the deframer.

    With ``loopback`` high ``tx_wire`` is never valid and ``rx_wire`` never ready.
    ``enable`` gates the input of the register slice in front of the deframer (nothing
    is taken while it is low; the beat the slice holds drains).

    Ports
    -----
    tx : In(stream.Signature(OctetBeat))
        The framer's output register.
    tx_wire : Out(stream.Signature(OctetBeat))
    rx_wire : In(stream.Signature(OctetBeat))
    o : Out(stream.Signature(OctetBeat))
        To :class:`~rnic.hdl.mpa_rx.MpaRxDeframer` ``i``.
    loopback, enable : In(1)

    Latency and throughput
    ----------------------
    ``tx`` to ``tx_wire``: combinational. ``rx_wire`` (or ``tx``) to ``o``: one cycle, a
    register slice (timing: the deframer's ready, which depends on a pending context write,
    ran into the framer's output register through LOOPBACK or an external loop from
    ``tx_wire`` to ``rx_wire``). One beat per cycle; beats pass unchanged.
    """

    def __init__(self, *, width, connections):
        beat = OctetBeat(width=width, connections=connections)
        super().__init__({
            "tx": In(stream.Signature(beat)),
            "tx_wire": Out(stream.Signature(beat)),
            "rx_wire": In(stream.Signature(beat)),
            "o": Out(stream.Signature(beat)),
            "loopback": In(1),
            "enable": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        tx, txw, rxw = self.tx, self.tx_wire, self.rx_wire
        loopback, enable = self.loopback, self.enable
        m.d.comb += [txw.payload.eq(tx.payload), txw.valid.eq(tx.valid & ~loopback)]
        m.submodules.rx_slice = rx_slice = StreamSlice(rxw.payload.shape())
        rsi = rx_slice.i
        m.d.comb += [
            rsi.payload.eq(Mux(loopback, tx.payload, rxw.payload)),
            rsi.valid.eq(Mux(loopback, tx.valid, rxw.valid) & enable),
            rxw.ready.eq(~loopback & rsi.ready & enable),
            tx.ready.eq(Mux(loopback, rsi.ready & enable, txw.ready)),
        ]
        wiring.connect(m, rx_slice.o, wiring.flipped(self.o))
        return m
