"""Verdict stage of the RX deframer: CRC comparison and error precedence per FPDU end."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..beat import check_width
from ..mpa_config import CrcStatus, RxError
from .layouts import CrcBeat, OutTag, VerdictBeat
from .stage import stage_register

__all__ = ["MpaRxVerdict"]


class MpaRxVerdict(wiring.Component):
    """Verdict stage of the RX deframer (no context): what the output makes of each word.

    A CRC word ends its FPDU with the CRC status (UNCHECKED with CRC off, else OK or BAD
    by comparing the word with the computed value) and the error: CRC if BAD, else MARKER
    if a marker of the FPDU was bad, else NONE. A length word with a length error ends the
    FPDU at once (a status beat: TOO_LONG or TOO_SHORT, crc UNCHECKED). ULPDU content
    words (a length word without an error, a ULPDU word) are marked ``data``.

    Parameters
    ----------
    width : int
        Datapath width W in octets: 4, 8, 16 or 32.
    connections : int
        Connections (width of ``conn``).

    Ports
    -----
    i : In(stream.Signature(CrcBeat))
        From the CRC stage.
    o : Out(stream.Signature(VerdictBeat))
        The words with their :class:`~rnic.hdl.mpa_rx.layouts.OutTag`, to the step split.

    Latency 1 (its input register), throughput one beat per cycle.
    """

    def __init__(self, *, width, connections):
        self.width = check_width(width)
        super().__init__({
            "i": In(stream.Signature(CrcBeat(width=width, connections=connections))),
            "o": Out(stream.Signature(VerdictBeat(width=width, connections=connections))),
        })

    def elaborate(self, platform):
        m = Module()
        K = self.width // 4
        p, _, _ = stage_register(m, self.i, self.o, name="crc_beat")
        words = [p.words[32 * i:32 * i + 32] for i in range(K)]
        tags = Signal(data.ArrayLayout(OutTag(), K))
        for i in range(K):
            t = p.tags[i]
            o = tags[i]
            bad = Signal(name=f"crcbad{i}")
            m.d.comb += [
                bad.eq(p.crc_en & (words[i] != t.calc)),
                o.data.eq((t.p.len & (t.p.lenerr == 0)) | t.p.data),
                o.lastd.eq(t.p.lastd),
                o.lastn.eq(t.p.lastn),
            ]
            with m.If(t.p.crcw):
                m.d.comb += [
                    o.end.eq(1),
                    o.crcst.eq(Mux(p.crc_en, Mux(bad, CrcStatus.BAD, CrcStatus.OK),
                                   CrcStatus.UNCHECKED)),
                    o.err.eq(Mux(bad, RxError.CRC, Mux(t.merr, RxError.MARKER, RxError.NONE))),
                ]
            with m.Elif(t.p.len & (t.p.lenerr != 0)):
                m.d.comb += [o.end.eq(1), o.lenend.eq(1), o.err.eq(t.p.lenerr),
                             o.crcst.eq(CrcStatus.UNCHECKED)]
        o = self.o.payload
        m.d.comb += [o.words.eq(p.words), o.first.eq(p.first), o.last.eq(p.last),
                     o.conn.eq(p.conn), o.cfg.eq(p.cfg), o.tags.eq(tags)]
        return m
