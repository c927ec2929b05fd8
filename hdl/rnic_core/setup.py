"""The reset sweep and the context commands (CTX_CMD.COMMIT, SET_STATE): see :class:`ConnectionSetup`."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import ConnState

from ..beat import conn_bits
from ..ddp_tx import TxConnCfg
from ..mpa_config import MpaConfig
from ..rdma_layouts import ConnCtl
from .layouts import ConnCommand, MarkerConfig
from .registers import register_signature
from .slices import slice_into

__all__ = ["ConnectionSetup", "TX_SWEEP_MULPDU"]

#: MULPDU the reset sweep gives the transmit path of every connection (until its COMMIT).
TX_SWEEP_MULPDU = 128


class ConnectionSetup(wiring.Component):
    """(Re)starts connections: the reset sweep over all of them, and CTX_CMD for one.

    After its reset (``rst`` or CTRL.SOFT_RESET) the sweep rewrites every connection's
    context, one per step, in the order 0 .. N - 1: the framer and deframer get zeros
    (no markers, no CRC, phase 0, MULPDU 0), the receive path an abort beat (``abort``,
    after which ``rx_ctl`` with IRD 0 once the beat has left the slice in front of
    DdpRx: ``abort_in_flight`` low), the transmit path MULPDU :data:`TX_SWEEP_MULPDU`
    and ORD 0. A step ends when every one of them took its write (about 2 cycles);
    ``sweeping`` is high until the last, ``sweep_conn`` is the connection of the step
    (the per-connection memories of the other components clear that row meanwhile).
    STATUS.READY (and ``ready``) is ``~sweeping``.

    CTX_CMD.COMMIT (while ready, CTX_STATUS.BUSY 0 and CONN_SEL below ``connections``;
    otherwise ignored) latches CONN_SEL, CTX_STATE, CTX_TX, CTX_RX and CTX_IRD_ORD (phases
    rounded down to a multiple of 4) and offers them on all six outputs: ``framer_cfg``,
    ``deframer_cfg``, ``rx_ctl``, ``tx_cfg``, ``command`` (the per-connection state) and
    ``tracker_cfg`` (the TX marker tracker). CTX_STATUS.BUSY is 1 until each was taken.
    CTX_CMD.SET_STATE offers ``command`` only.

    Ports
    -----
    regs : In(register_signature(...))
        STATUS.READY, CTX_STATUS.BUSY, CONN_SEL, CTX_CMD, CTX_STATE, CTX_TX, CTX_RX,
        CTX_IRD_ORD.
    framer_cfg, deframer_cfg : Out(stream.Signature(MpaConfig))
        To :class:`~rnic.hdl.mpa_tx.MpaTxFramer` / :class:`~rnic.hdl.mpa_rx.MpaRxDeframer`
        ``cfg``.
    rx_ctl : Out(stream.Signature(ConnCtl))
        To :class:`~rnic.hdl.ddp_rx.DdpRx` ``ctl``.
    tx_cfg : Out(stream.Signature(TxConnCfg))
        To :class:`~rnic.hdl.ddp_tx.DdpTx` ``cfg``.
    abort : Out(stream.Signature(conn))
        The sweep's connection whose abort beat the receive path is to get.
    abort_in_flight : In(1)
        The register slice in front of DdpRx holds a beat (DdpRx ``i.valid``).
    command : Out(stream.Signature(ConnCommand))
        COMMIT or SET_STATE for the per-connection state.
    tracker_cfg : Out(stream.Signature(MarkerConfig))
        The COMMIT's CTX_TX markers and phase for the TX marker tracker.
    sweeping : Out(1)
        The sweep runs (1 from reset).
    sweep_conn : Out(conn)
        The connection of the sweep's step.
    ready : Out(1)
        ``~sweeping``.

    Latency and throughput
    ----------------------
    The four block streams pass a half-rate register slice each (one cycle;
    :class:`~rnic.hdl.stream_slice.StreamSlice`); ``command`` and ``tracker_cfg`` are
    offered from the cycle after the CTX_CMD pulse. A new command is accepted once
    all six were taken (CTX_STATUS.BUSY 0). No packets pass this component.
    """

    #: The register fields the component uses.
    REGISTERS = ("status.ready", "ctx_status.busy", "conn_sel", "ctx_cmd", "ctx_state", "ctx_tx",
                 "ctx_rx", "ctx_ird_ord")

    def __init__(self, *, connections):
        self.connections = connections
        cb = conn_bits(connections)
        super().__init__({
            "regs": In(register_signature(*self.REGISTERS)),
            "framer_cfg": Out(stream.Signature(MpaConfig(connections=connections))),
            "deframer_cfg": Out(stream.Signature(MpaConfig(connections=connections))),
            "rx_ctl": Out(stream.Signature(ConnCtl(connections=connections))),
            "tx_cfg": Out(stream.Signature(TxConnCfg(connections=connections))),
            "abort": Out(stream.Signature(unsigned(cb))),
            "abort_in_flight": In(1),
            "command": Out(stream.Signature(ConnCommand(connections=connections))),
            "tracker_cfg": Out(stream.Signature(MarkerConfig(connections=connections))),
            "sweeping": Out(1, init=1),
            "sweep_conn": Out(cb),
            "ready": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        N = self.connections
        cb = conn_bits(N)
        r = self.regs
        # (control streams, rare and some wide: one register each, half rate; the valids
        # are decodes of the sweep's state)
        fc = slice_into(m, "framer_cfg_slice", wiring.flipped(self.framer_cfg), full_rate=False)
        dc = slice_into(m, "deframer_cfg_slice", wiring.flipped(self.deframer_cfg), full_rate=False)
        dctl = slice_into(m, "ddp_ctl_slice", wiring.flipped(self.rx_ctl), full_rate=False)
        tc = slice_into(m, "dtx_cfg_slice", wiring.flipped(self.tx_cfg), full_rate=False)
        sweeping, sweep_conn = self.sweeping, self.sweep_conn
        m.d.comb += [self.ready.eq(~sweeping), r.status.ready.eq(~sweeping)]

        # ---- context commands: the latched COMMIT / SET_STATE
        c_conn = Signal(cb)
        c_tx_markers, c_tx_crc, c_tx_phase = Signal(), Signal(), Signal(9)
        c_rx_markers, c_rx_crc, c_rx_phase, c_rx_mulpdu = Signal(), Signal(), Signal(9), Signal(16)
        c_state = Signal(ConnState)
        c_ird = Signal(14)
        c_ord = Signal(14)
        c_tx_mulpdu = Signal(16)
        c_commit = Signal()                      # a COMMIT (else a SET_STATE)
        tx_cfg_pend, rx_cfg_pend, ctx_pend, trk_pend = Signal(), Signal(), Signal(), Signal()
        ctl_pend = Signal()                      # DdpRx.ctl of the COMMIT not yet taken
        txc_pend = Signal()                      # DdpTx.cfg of the COMMIT not yet taken
        busy = Signal()
        m.d.comb += [busy.eq(tx_cfg_pend | rx_cfg_pend | ctx_pend | trk_pend | ctl_pend | txc_pend),
                     r.ctx_status.busy.eq(busy)]
        sel_ok = Signal()
        m.d.comb += sel_ok.eq(r.conn_sel.conn < N)
        can_cmd = ~sweeping & ~busy & sel_ok
        with m.If(r.ctx_cmd.commit & can_cmd):
            m.d.sync += [
                c_conn.eq(r.conn_sel.conn), c_state.eq(r.ctx_state.state), c_commit.eq(1),
                c_tx_markers.eq(r.ctx_tx.markers), c_tx_crc.eq(r.ctx_tx.crc),
                c_tx_phase.eq(r.ctx_tx.phase & ~3),
                c_rx_markers.eq(r.ctx_rx.markers), c_rx_crc.eq(r.ctx_rx.crc),
                c_rx_phase.eq(r.ctx_rx.phase & ~3), c_rx_mulpdu.eq(r.ctx_rx.mulpdu),
                c_ird.eq(r.ctx_ird_ord.ird), c_ord.eq(r.ctx_ird_ord.ord), c_tx_mulpdu.eq(r.ctx_tx.mulpdu),
                tx_cfg_pend.eq(1), rx_cfg_pend.eq(1), ctx_pend.eq(1), trk_pend.eq(1), ctl_pend.eq(1),
                txc_pend.eq(1),
            ]
        with m.Elif(r.ctx_cmd.set_state & can_cmd):
            m.d.sync += [c_conn.eq(r.conn_sel.conn), c_state.eq(r.ctx_state.state), c_commit.eq(0),
                         ctx_pend.eq(1)]

        # the per-connection state and the marker tracker take theirs from the latch
        cmd, trk = self.command, self.tracker_cfg
        m.d.comb += [
            cmd.valid.eq(ctx_pend), cmd.payload.conn.eq(c_conn), cmd.payload.state.eq(c_state),
            cmd.payload.commit.eq(c_commit),
            trk.valid.eq(trk_pend), trk.payload.conn.eq(c_conn), trk.payload.markers.eq(c_tx_markers),
            trk.payload.phase.eq(c_tx_phase),
        ]
        with m.If(cmd.valid & cmd.ready):
            m.d.sync += ctx_pend.eq(0)
        with m.If(trk.valid & trk.ready):
            m.d.sync += trk_pend.eq(0)

        # ---- the reset sweep's progress: what of sweep_conn was taken
        sw_tx_done = Signal()                    # MpaTxFramer.cfg
        sw_rx_done = Signal()                    # MpaRxDeframer.cfg
        sw_ctl_done = Signal()                   # DdpRx.ctl
        sw_abort_done = Signal()                 # DdpRx.i abort beat
        sw_txc_done = Signal()                   # DdpTx.cfg
        m.d.comb += [self.abort.valid.eq(sweeping & ~sw_abort_done), self.abort.payload.eq(sweep_conn)]

        # framer / deframer configuration: the sweep's zeros, or the latched COMMIT
        with m.If(sweeping):
            m.d.comb += [
                fc.valid.eq(~sw_tx_done), fc.payload.conn.eq(sweep_conn),
                dc.valid.eq(~sw_rx_done), dc.payload.conn.eq(sweep_conn),
            ]
        with m.Else():
            m.d.comb += [
                fc.valid.eq(tx_cfg_pend), fc.payload.conn.eq(c_conn),
                fc.payload.markers.eq(c_tx_markers), fc.payload.crc.eq(c_tx_crc),
                fc.payload.phase.eq(c_tx_phase),
                dc.valid.eq(rx_cfg_pend), dc.payload.conn.eq(c_conn),
                dc.payload.markers.eq(c_rx_markers), dc.payload.crc.eq(c_rx_crc),
                dc.payload.phase.eq(c_rx_phase), dc.payload.mulpdu.eq(c_rx_mulpdu),
            ]
            with m.If(tx_cfg_pend & fc.ready):
                m.d.sync += tx_cfg_pend.eq(0)
            with m.If(rx_cfg_pend & dc.ready):
                m.d.sync += rx_cfg_pend.eq(0)

        # the receive path: ctl (restart) from the sweep (IRD 0) or the latched COMMIT
        with m.If(sweeping):
            # (after the abort beat has left the slice in front of the receive path)
            m.d.comb += [dctl.valid.eq(sw_abort_done & ~sw_ctl_done & ~self.abort_in_flight),
                         dctl.payload.conn.eq(sweep_conn)]
        with m.Else():
            m.d.comb += [dctl.valid.eq(ctl_pend), dctl.payload.conn.eq(c_conn),
                         dctl.payload.ird.eq(c_ird)]
            with m.If(ctl_pend & dctl.ready):
                m.d.sync += ctl_pend.eq(0)

        # the transmit path: cfg (restart) from the sweep or the latched COMMIT
        with m.If(sweeping):
            m.d.comb += [tc.valid.eq(~sw_txc_done), tc.payload.conn.eq(sweep_conn),
                         tc.payload.mulpdu.eq(TX_SWEEP_MULPDU)]
        with m.Else():
            m.d.comb += [tc.valid.eq(txc_pend), tc.payload.conn.eq(c_conn),
                         tc.payload.mulpdu.eq(c_tx_mulpdu), tc.payload.ord.eq(c_ord)]
            with m.If(txc_pend & tc.ready):
                m.d.sync += txc_pend.eq(0)

        with m.If(sweeping):
            txc_got = sw_txc_done | (tc.valid & tc.ready)
            tx_got = sw_tx_done | (fc.valid & fc.ready)
            rx_got = sw_rx_done | (dc.valid & dc.ready)
            ctl_got = sw_ctl_done | (dctl.valid & dctl.ready)
            abort_got = sw_abort_done | (self.abort.valid & self.abort.ready)
            with m.If(tx_got & rx_got & ctl_got & abort_got & txc_got):
                m.d.sync += [sw_tx_done.eq(0), sw_rx_done.eq(0), sw_ctl_done.eq(0), sw_abort_done.eq(0),
                             sw_txc_done.eq(0), sweep_conn.eq(sweep_conn + 1)]
                with m.If(sweep_conn == N - 1):
                    m.d.sync += sweeping.eq(0)
            with m.Else():
                m.d.sync += [sw_tx_done.eq(tx_got), sw_rx_done.eq(rx_got), sw_ctl_done.eq(ctl_got),
                             sw_abort_done.eq(abort_got), sw_txc_done.eq(txc_got)]
        return m
