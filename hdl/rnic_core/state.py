"""The per-connection state (:class:`~rnic.hdl.rnic_core.CtxEntry` memory): see :class:`ConnectionState`."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import ConnState, DpError

from ..beat import conn_bits
from .layouts import ConnCommand, ConnReport, CtxEntry, ErrorInfo, FpduEnd
from .registers import register_signature

__all__ = ["ConnectionState", "CtxOp"]


class CtxOp(enum.Enum, shape=3):
    """What the read-modify-write pipeline does to a connection's row."""
    NONE = 0
    COMMIT = 1          # state from the command, no error
    SET_STATE = 2       # state from the command
    GOOD_FPDU = 3       # WAIT_RX -> RTS (the MPA fence opens)
    ERROR = 4           # ERROR; the first error is kept
    CLOSE = 5           # CLOSING, unless stopped on an error


class ConnectionState(wiring.Component):
    """The state of every connection (:class:`CtxEntry`, one memory row each), kept by a
    read-modify-write pipeline, and its view in CTX_STATUS.STATE/ERROR and CTX_ERROR.

    Operations, at most one per cycle, in this order of priority: the end of a ULPDU at
    the deframer's output (``fpdu_end``: with an MPA error, CRC .. TOO_SHORT, the
    connection goes to ERROR and keeps its first error; a good one moves WAIT_RX to RTS),
    a CTX_CMD (``command``: COMMIT writes the state and clears the error, SET_STATE writes
    the state), a receive-path report (``report``: an error found here as the MPA errors;
    a received Terminate moves the connection to CLOSING unless it stopped on an error).
    While the reset sweep runs, row ``sweep_conn`` is cleared (IDLE, no error).

    Ports
    -----
    regs : In(register_signature(...))
        CONN_SEL (the view's connection), CTX_STATUS.STATE/ERROR, CTX_ERROR.
    command : In(stream.Signature(ConnCommand))
        Taken in a cycle without an ``fpdu_end`` operation.
    fpdu_end : In(stream.Signature(FpduEnd, always_ready=True))
        Never waits; registered on its way in, an operation in the next cycle.
    report : In(stream.Signature(ConnReport))
        Taken in a cycle without an ``fpdu_end`` operation or ``command``.
    sweeping, sweep_conn : In(1), In(conn)
        The reset sweep (see :class:`~rnic.hdl.rnic_core.setup.ConnectionSetup`).
    hold : Out(1)
        Hold the deframer's output: a command or report waits, or the sweep runs. While
        held, at most the ``fpdu_end`` of the two handshakes before meet a waiting
        operation.
    tx_conn : In(conn), tx_open : Out(1)
        For the transmit path (:class:`~rnic.hdl.ddp_tx.DdpTx` ``open_conn``/``open``):
        connection ``tx_conn`` may send (RTS or CLOSING), one cycle after ``tx_conn`` (a
        one-bit copy of the state, written with every row).

    Latency and throughput
    ----------------------
    One operation per cycle. Stage A (the cycle of the input; of ``fpdu_end``, the cycle
    after) reads the row, stage B registers it (block RAM output), stage W makes the new
    row and writes it: two cycles after stage A. A row read in A while the previous
    operation on the same connection is in W gets W's new row forwarded. The view (CTX_STATUS, CTX_ERROR) is
    the row of CONN_SEL through a register: it follows a write two cycles later.
    No packets pass this component.
    """

    #: The register fields the component uses.
    REGISTERS = ("conn_sel.conn", "ctx_status.state", "ctx_status.error", "ctx_error")

    def __init__(self, *, connections):
        self.connections = connections
        cb = conn_bits(connections)
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "command": In(stream.Signature(ConnCommand(connections=connections))),
            "fpdu_end": In(stream.Signature(FpduEnd(connections=connections), always_ready=True)),
            "report": In(stream.Signature(ConnReport(connections=connections))),
            "sweeping": In(1),
            "sweep_conn": In(cb),
            "hold": Out(1),
            "tx_conn": In(cb),
            "tx_open": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        N = self.connections
        cb = conn_bits(N)
        r = self.regs
        sweeping = self.sweeping
        m.submodules.ctx_mem = ctx_mem = Memory(shape=CtxEntry(), depth=N, init=[])
        ctx_wp = ctx_mem.write_port()
        ctx_rp = ctx_mem.read_port(transparent_for=(ctx_wp,))       # read-modify-write
        view_rp = ctx_mem.read_port(transparent_for=(ctx_wp,))      # CTX_STATUS / CTX_ERROR

        # ---- the view of CONN_SEL
        m.d.comb += view_rp.addr.eq(r.conn_sel.conn)
        view = Signal(CtxEntry())                # registered for timing (block RAM clk-to-out)
        m.d.sync += view.eq(view_rp.data)
        sel_ok = Signal()
        m.d.comb += [
            sel_ok.eq(r.conn_sel.conn < N),
            r.ctx_status.state.eq(Mux(sel_ok, view.state, ConnState.IDLE)),
            r.ctx_status.error.eq(sel_ok & view.err),
            r.ctx_error.layer.eq(Mux(sel_ok & view.err, view.layer, 0)),
            r.ctx_error.etype.eq(Mux(sel_ok & view.err, view.etype, 0)),
            r.ctx_error.ecode.eq(Mux(sel_ok & view.err, view.ecode, 0)),
        ]

        # ---- stage I: the end of a ULPDU, registered on its way in (the deframer's output
        # and this pipeline are far apart in the NIC's placement: only wire between them)
        ev = self.fpdu_end
        ev_err = Signal()
        ev_good = Signal()
        ev_conn = Signal(cb)
        ev_info = Signal(ErrorInfo())
        error = ev.payload.error
        m.d.sync += [
            ev_err.eq(ev.valid & (error >= DpError.CRC) & (error <= DpError.TOO_SHORT)),
            ev_good.eq(ev.valid & (error == DpError.NONE)),
            ev_conn.eq(ev.payload.conn), ev_info.eq(ev.payload.info),
        ]

        # ---- stage A: pick the operation, read its row
        cmd, rep = self.command, self.report
        m.d.comb += [cmd.ready.eq(~ev_err & ~ev_good), rep.ready.eq(~ev_err & ~ev_good & ~cmd.valid),
                     self.hold.eq(cmd.valid | rep.valid | sweeping)]
        a_kind = Signal(CtxOp)
        a_conn = Signal(cb)
        a_info = Signal(ErrorInfo())
        m.d.comb += a_info.eq(ev_info)
        with m.If(ev_err):
            m.d.comb += [a_kind.eq(CtxOp.ERROR), a_conn.eq(ev_conn)]
        with m.Elif(ev_good):
            m.d.comb += [a_kind.eq(CtxOp.GOOD_FPDU), a_conn.eq(ev_conn)]
        with m.Elif(cmd.valid):
            m.d.comb += [a_kind.eq(Mux(cmd.payload.commit, CtxOp.COMMIT, CtxOp.SET_STATE)),
                         a_conn.eq(cmd.payload.conn)]
        with m.Elif(rep.valid):
            m.d.comb += [a_kind.eq(Mux(rep.payload.received, CtxOp.CLOSE, CtxOp.ERROR)),
                         a_conn.eq(rep.payload.conn), a_info.eq(rep.payload.info)]
        m.d.comb += ctx_rp.addr.eq(a_conn)

        # ---- stage B: the row comes out of the memory (registered in W, for timing)
        b_kind = Signal(CtxOp)
        b_conn = Signal(cb)
        b_state = Signal(ConnState)
        b_info = Signal(ErrorInfo())
        m.d.sync += [b_kind.eq(a_kind), b_conn.eq(a_conn), b_state.eq(cmd.payload.state),
                     b_info.eq(a_info)]

        # ---- stage W: the new row is made and written
        w_kind = Signal(CtxOp)
        w_conn = Signal(cb)
        w_state = Signal(ConnState)
        w_info = Signal(ErrorInfo())
        w_row = Signal(CtxEntry())               # the row read in A, registered in B
        new = Signal(CtxEntry())
        last_new = Signal(CtxEntry())            # the row W wrote in the previous cycle
        m.d.sync += [w_kind.eq(b_kind), w_conn.eq(b_conn), w_state.eq(b_state), w_info.eq(b_info),
                     w_row.eq(ctx_rp.data)]
        # a write in the cycle of B's read is seen by the (transparent) read port; one in the
        # cycle of A's read is not: forwarded here
        fwd = Signal()
        m.d.sync += fwd.eq(ctx_wp.en & (ctx_wp.addr == b_conn) & (b_kind != CtxOp.NONE) & ~sweeping)
        m.d.sync += last_new.eq(ctx_wp.data)
        old = Signal(CtxEntry())
        m.d.comb += [old.eq(Mux(fwd, last_new, w_row)), new.eq(old)]
        with m.Switch(w_kind):
            with m.Case(CtxOp.COMMIT):
                m.d.comb += [new.eq(0), new.state.eq(w_state)]
            with m.Case(CtxOp.SET_STATE):
                m.d.comb += new.state.eq(w_state)
            with m.Case(CtxOp.GOOD_FPDU):
                with m.If(old.state == ConnState.WAIT_RX):
                    m.d.comb += new.state.eq(ConnState.RTS)
            with m.Case(CtxOp.ERROR):
                m.d.comb += [new.state.eq(ConnState.ERROR), new.err.eq(1)]
                with m.If(~old.err):
                    m.d.comb += [new.ecode.eq(w_info.ecode), new.etype.eq(w_info.etype),
                                 new.layer.eq(w_info.layer)]
            with m.Case(CtxOp.CLOSE):
                with m.If(~old.err):
                    m.d.comb += new.state.eq(ConnState.CLOSING)
        with m.If(sweeping):
            m.d.comb += [ctx_wp.en.eq(1), ctx_wp.addr.eq(self.sweep_conn), ctx_wp.data.eq(0)]
        with m.Else():
            m.d.comb += [ctx_wp.en.eq(w_kind != CtxOp.NONE), ctx_wp.addr.eq(w_conn), ctx_wp.data.eq(new)]

        # ---- the transmit path's view: may the connection send (a copy of one bit of the
        # state, so that the transmit path has a read port of its own)
        m.submodules.open_mem = open_mem = Memory(shape=1, depth=N, init=[])
        open_wp = open_mem.write_port()
        open_rp = open_mem.read_port()
        written = ctx_wp.data.state
        m.d.comb += [open_wp.en.eq(ctx_wp.en), open_wp.addr.eq(ctx_wp.addr),
                     open_wp.data.eq((written == ConnState.RTS) | (written == ConnState.CLOSING)),
                     open_rp.addr.eq(self.tx_conn), self.tx_open.eq(open_rp.data)]
        return m
