"""The event engine's rule blocks wired to the entry it works on."""

from amaranth.hdl import Mux, Signal

from rnic.host.spec.tcp_engine import TcpState

from .arm import ArmState
from .seq import seq_after
from .tcb import Tcb

__all__ = ["wire_rules"]


def wire_rules(m, blocks, t, seg, now, params):
    """The rule blocks' inputs from the entry ``t``, the segment ``seg``, the time ``now``
    and the engine's ``params`` (a component with the ports ``rto_min``, ``rto_max``,
    ``rto_initial``, ``delack``, ``rcv_wnd`` and ``tx_ring``); returns the entry with the
    send timers set (TcpArm's, registered) and whether our FIN is acknowledged
    (registered)."""
    fin_acked = _fin_acked(m, t)
    check, ack, rtt, text = blocks["check"], blocks["ack"], blocks["rtt"], blocks["text"]
    window, arm = blocks["window"], blocks["arm"]
    m.d.comb += [
        check.tcb.state.eq(t.state), check.tcb.rcv_nxt.eq(t.recv.rcv_nxt),
        check.tcb.rcv_adv.eq(t.recv.rcv_adv), check.tcb.snd_una.eq(t.send.snd_una),
        check.tcb.snd_max.eq(t.send.snd_max), check.tcb.max_snd_wnd.eq(t.send.max_snd_wnd),
        check.seg.seq.eq(seg.seq), check.seg.ack.eq(seg.ack), check.seg.flags.eq(seg.flags),
        check.seg.length.eq(seg.length),
        ack.i.eq(t.send), ack.seg.seq.eq(seg.seq), ack.seg.ack.eq(seg.ack),
        ack.seg.window.eq(seg.window), ack.seg.flags.eq(seg.flags),
        ack.seg.length.eq(seg.length),
        rtt.i.eq(t.rtt), rtt.ack.eq(seg.ack), rtt.now.eq(now),
        rtt.rto_min.eq(params.rto_min), rtt.rto_max.eq(params.rto_max),
        rtt.rto_initial.eq(params.rto_initial),
        # our FIN acknowledged in FIN-WAIT-1: the text is taken in FIN-WAIT-2
        text.i.state.eq(Mux(fin_acked & (t.state == TcpState.FIN_WAIT_1),
                            TcpState.FIN_WAIT_2, t.state)),
        text.i.rcv_nxt.eq(t.recv.rcv_nxt),
        text.i.rcv_adv.eq(t.recv.rcv_adv), text.i.rcv_unacked.eq(t.recv.rcv_unacked),
        text.i.send_mss.eq(t.send.send_mss), text.i.ack_now.eq(t.recv.ack_now),
        text.i.dup_ack.eq(t.recv.dup_ack), text.i.delack_armed.eq(t.recv.delack_armed),
        text.i.delack_at.eq(t.recv.delack_at), text.i.fin_acked.eq(fin_acked),
        text.seg.seq.eq(seg.seq), text.seg.flags.eq(seg.flags),
        text.seg.length.eq(seg.length), text.now.eq(now), text.delack.eq(params.delack),
        window.rcv_nxt.eq(t.recv.rcv_nxt), window.rcv_adv.eq(t.recv.rcv_adv),
        window.rcv_wnd.eq(params.rcv_wnd), window.rcv_shift.eq(t.recv.rcv_shift),
        window.echo.eq(t.recv.echo), window.echo_delta.eq(t.recv.echo_delta),
        window.snd_una.eq(t.send.snd_una), window.tx_ring.eq(params.tx_ring),
        arm.now.eq(now), arm.rto_max.eq(params.rto_max),
    ]
    armed = _wire_arm(m, arm, t)
    # the deadlines of the entry as it is stored: its send timers as TcpArm sets them
    timers = blocks["timers"]
    m.d.comb += [timers.tw_armed.eq(armed.timers.tw_armed),
                 timers.tw_at.eq(armed.timers.tw_at),
                 timers.rto_armed.eq(armed.timers.rto_armed),
                 timers.rto_at.eq(armed.timers.rto_at),
                 timers.persist_armed.eq(armed.timers.persist_armed),
                 timers.persist_at.eq(armed.timers.persist_at),
                 timers.delack_armed.eq(armed.recv.delack_armed),
                 timers.delack_at.eq(armed.recv.delack_at), timers.now.eq(now)]
    return armed, fin_acked


def _fin_acked(m, t):
    """Our FIN is sent and acknowledged (SND.UNA past it), registered: a cycle after the
    entry (the states that read it wait a cycle more for it); the comparison's carry
    chain stays off the paths to the entry's registers."""
    acked = Signal(name="fin_acked")
    m.d.sync += acked.eq(t.fin_pending & seq_after(m, t.send.snd_una, t.fin_seq,
                                                   "fin_past"))
    return acked


def _wire_arm(m, arm, t):
    """TcpArm's view of the entry; returns the entry with its timers set."""
    i = arm.i
    m.d.comb += [i.state.eq(t.state), i.snd_wnd.eq(t.send.snd_wnd),
                 i.snd_una.eq(t.send.snd_una), i.snd_nxt.eq(t.send.snd_nxt),
                 i.snd_max.eq(t.send.snd_max), i.data_end.eq(t.data_end),
                 i.rto.eq(t.rtt.rto), i.rto_armed.eq(t.timers.rto_armed),
                 i.rto_at.eq(t.timers.rto_at), i.persist_armed.eq(t.timers.persist_armed),
                 i.persist_at.eq(t.timers.persist_at),
                 i.persist_backoff.eq(t.timers.persist_backoff)]
    # registered: the rule's logic stays off the path to the table's write port
    o = Signal(ArmState(), name="arm_o")
    m.d.sync += o.eq(arm.o)
    out = Signal(Tcb(), name="armed_tcb")
    m.d.comb += [out.eq(t), out.send.snd_nxt.eq(o.snd_nxt),
                 out.timers.rto_armed.eq(o.rto_armed), out.timers.rto_at.eq(o.rto_at),
                 out.timers.persist_armed.eq(o.persist_armed),
                 out.timers.persist_at.eq(o.persist_at),
                 out.timers.persist_backoff.eq(o.persist_backoff)]
    return out
