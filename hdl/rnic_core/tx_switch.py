"""Where the framer's ULPDUs come from: see :class:`UlpduSwitch`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..mpa_tx import MpaTxBeat
from ..stream_slice import StreamSlice
from .slices import slice_out_of

__all__ = ["UlpduSwitch"]


class UlpduSwitch(wiring.Component):
    """The framer's ULPDU input: the data port's sender (DP_CTRL.SOURCE), else the
    ``tx_ulpdu`` port and the DDP/RDMAP transmit path, switched at ULPDU boundaries.

    Without SOURCE a ULPDU, once its first beat went out, is finished from the same input;
    between ULPDUs ``port`` goes first when both have one to start. ``enable`` (CTRL.ENABLE
    and the core ready, registered) gates the inputs of the register slices: while it is
    low nothing is taken, and what the slices hold drains. The ULPDU tracking pauses while
    SOURCE is set.

    Ports
    -----
    port : In(stream.Signature(MpaTxBeat))
        The core's ``tx_ulpdu``.
    ddp : In(stream.Signature(MpaTxBeat))
        :class:`~rnic.hdl.ddp_tx.DdpTx` ``o``.
    data_port : In(stream.Signature(MpaTxBeat))
        The data port's sender (:class:`~rnic.hdl.rnic_core.dp_tx.DataPortTx`).
    o : Out(stream.Signature(MpaTxBeat))
        To :class:`~rnic.hdl.mpa_tx.MpaTxFramer` ``i``.
    enable, source : In(1)

    Latency and throughput
    ----------------------
    A register slice on ``port`` and on ``ddp`` and one between the switch and ``o``
    (timing: the users' and DdpTx's valids, the switch's select and the payloads went
    into the framer's input logic): ``port`` and ``ddp`` to ``o`` 2 cycles,
    ``data_port`` to ``o`` 1 cycle. One beat per cycle.
    """

    def __init__(self, *, width, connections):
        beat = MpaTxBeat(width=width, connections=connections)
        super().__init__({
            "port": In(stream.Signature(beat)),
            "ddp": In(stream.Signature(beat)),
            "data_port": In(stream.Signature(beat)),
            "o": Out(stream.Signature(beat)),
            "enable": In(1),
            "source": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        enable, source = self.enable, self.source
        port, dpt = self.port, self.data_port
        # (the port through a register slice, which ENABLE gates like the switch: its valid
        # came from the user's logic into the switch and the framer's input in one cycle)
        m.submodules.tx_ulpdu_slice = txu_slice = StreamSlice(port.payload.shape())
        m.d.comb += [txu_slice.i.payload.eq(port.payload),
                     txu_slice.i.valid.eq(port.valid & enable),
                     port.ready.eq(txu_slice.i.ready & enable)]
        src = txu_slice.o
        dto = slice_out_of(m, "dtx_o_slice", wiring.flipped(self.ddp))
        in_ulpdu = Signal()                      # a ULPDU of the port or of DdpTx is under way
        held = Signal()                          # ... of DdpTx
        pick = Signal()                          # DdpTx feeds the framer this cycle
        m.d.comb += pick.eq(Mux(in_ulpdu, held, ~src.valid))
        # a register slice between this switch and the framer (timing: the switch's select
        # and the sources' payloads ran into the framer's input logic)
        m.submodules.framer_i_slice = fsl = StreamSlice(port.payload.shape())
        fin = fsl.i
        wiring.connect(m, fsl.o, wiring.flipped(self.o))
        m.d.comb += [
            fin.payload.eq(Mux(source, dpt.payload, Mux(pick, dto.payload, src.payload))),
            fin.valid.eq(Mux(source, dpt.valid, Mux(pick, dto.valid, src.valid)) & enable),
            src.ready.eq(~source & ~pick & fin.ready & enable),
            dto.ready.eq(~source & pick & fin.ready & enable),
            dpt.ready.eq(source & fin.ready & enable),
        ]
        with m.If(~source & fin.valid & fin.ready):
            m.d.sync += [in_ulpdu.eq(~fin.payload.last), held.eq(pick)]
        return m
