"""The error capture (ERR_STATUS, ERR_CONN, ERR_INFO): see :class:`ErrorCapture`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import DpError

from ..beat import conn_bits
from .layouts import ConnError, ErrorInfo, FpduEnd
from .registers import register_signature

__all__ = ["ErrorCapture"]


class ErrorCapture(wiring.Component):
    """Captures the first receive-path error while ERR_STATUS.PENDING is 0.

    The source is the receive path's error reports (``ddp_error``) while ``use_ddp``,
    else the deframer's MPA errors (``fpdu_end`` with CRC .. TOO_SHORT). An error while
    PENDING is 0 sets PENDING and ERR_CONN/ERR_INFO (ERR_CONN.TX = 0); one while PENDING
    is 1 sets OVERFLOW. ``captured`` pulses for every error of the source (ERR_COUNT).

    Ports
    -----
    regs : In(register_signature(...))
        ERR_STATUS.PENDING and the set inputs of PENDING and OVERFLOW, ERR_CONN, ERR_INFO.
    fpdu_end : In(stream.Signature(FpduEnd, always_ready=True))
    ddp_error : In(stream.Signature(ConnError, always_ready=True))
    use_ddp : In(1)
    captured : Out(1)

    Latency and throughput
    ----------------------
    The event is registered first (timing: the Terminate handshake ran into the capture
    registers' enables): ``captured`` and the W1C set inputs one cycle after the event,
    ERR_CONN/ERR_INFO the cycle after. One error per cycle. No packets pass.
    """

    #: The register fields the component uses.
    REGISTERS = ("err_status.pending", "err_status.pending_set", "err_status.overflow_set", "err_conn",
                 "err_info")

    def __init__(self, *, connections):
        self.connections = connections
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "fpdu_end": In(stream.Signature(FpduEnd(connections=connections), always_ready=True)),
            "ddp_error": In(stream.Signature(ConnError(connections=connections), always_ready=True)),
            "use_ddp": In(1),
            "captured": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cb = conn_bits(self.connections)
        r = self.regs
        mpa, ddp, use_ddp = self.fpdu_end, self.ddp_error, self.use_ddp
        mpa_err = mpa.valid & (mpa.payload.error >= DpError.CRC) & (mpa.payload.error <= DpError.TOO_SHORT)
        cap_ev = self.captured
        cap_in_conn = Signal(cb)
        cap_in_info = Signal(ErrorInfo())
        m.d.sync += [
            cap_ev.eq(Mux(use_ddp, ddp.valid, mpa_err)),
            cap_in_conn.eq(Mux(use_ddp, ddp.payload.conn, mpa.payload.conn)),
            cap_in_info.eq(Mux(use_ddp, ddp.payload.info, mpa.payload.info)),
        ]
        pending = r.err_status.pending
        cap_conn = Signal(cb)
        cap_info = Signal(ErrorInfo())
        m.d.comb += [
            r.err_status.pending_set.eq(cap_ev & ~pending),
            r.err_status.overflow_set.eq(cap_ev & pending),
            r.err_conn.conn.eq(cap_conn), r.err_conn.tx.eq(0),
            r.err_info.ecode.eq(cap_info.ecode), r.err_info.etype.eq(cap_info.etype),
            r.err_info.layer.eq(cap_info.layer),
        ]
        with m.If(cap_ev & ~pending):
            m.d.sync += [cap_conn.eq(cap_in_conn), cap_info.eq(cap_in_info)]
        return m
