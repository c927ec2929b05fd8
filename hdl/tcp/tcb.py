"""The connection table entry (TCB) the engine keeps per connection in its table memory."""

from amaranth.lib import data

from .ack_update import SendState
from .arm import PERSIST_BACKOFF_BITS
from .layouts import TcpState
from .rtt_update import RttState

__all__ = ["Tcb", "RecvFields", "TimerFields"]


class RecvFields(data.StructLayout):
    """The receive side: RCV.NXT, the advertised edge, octets not yet acknowledged, our
    window shift, and the ACK owed (at once: ``ack_now``; a duplicate first: ``dup_ack``;
    delayed: ``delack_armed`` until ``delack_at``); ``echo``: the connection is the echo
    service, whose window is its send ring's room (``echo_delta`` = IRS - ISS)."""

    def __init__(self):
        super().__init__({"rcv_nxt": 32, "rcv_adv": 32, "rcv_unacked": 32, "rcv_shift": 4,
                          "ack_now": 1, "dup_ack": 1, "delack_armed": 1, "delack_at": 32,
                          "echo": 1, "echo_delta": 32})


class TimerFields(data.StructLayout):
    """The send timers (retransmission, persist with its backoff) and TIME-WAIT's."""

    def __init__(self):
        super().__init__({"rto_armed": 1, "rto_at": 32, "persist_armed": 1,
                          "persist_at": 32, "persist_backoff": PERSIST_BACKOFF_BITS,
                          "tw_armed": 1, "tw_at": 32})


class Tcb(data.StructLayout):
    """A connection's entry: the model's :class:`~rnic.host.model.tcp_engine.TcpEngine`
    TCB fields, grouped as the rule blocks read them (``send``: :class:`SendState`,
    ``rtt``: :class:`RttState`, ``recv``, ``timers``), with the connection's identity,
    ISS and IRS, the sequence number after the octets written (``data_end``) and the FIN
    to send (``fin_pending`` at ``fin_seq``)."""

    def __init__(self):
        super().__init__({
            "state": TcpState, "remote_ip": 32, "remote_port": 16, "local_port": 16,
            "iss": 32, "irs": 32, "data_end": 32, "fin_pending": 1, "fin_seq": 32,
            "send": SendState(), "rtt": RttState(), "recv": RecvFields(),
            "timers": TimerFields(),
        })
