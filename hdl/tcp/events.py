"""What the engine's blocks tell each other: segments and timer reports for the receive
engine, entries written, a connection's reports and frees, drop events."""

from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import Out

from ..beat import conn_bits
from .conn_table import ConnKey
from .layouts import TcpCommand, TcpConnectResult, TcpDrop, TcpEventKind, TcpSegInfo
from .tcb import Tcb

__all__ = ["TcpDropEvent", "EngineEvent", "RxEvent", "TcbWrite", "ConnEvent", "FreeConn",
           "Opened", "ConnCommand", "ConnectRequest", "ConnectAnswer"]

#: A counter event: ``valid`` for one cycle per segment dropped, ``reason`` its
#: :class:`~rnic.hdl.tcp.rx_check.TcpDrop`.
TcpDropEvent = wiring.Signature({"valid": Out(1), "reason": Out(TcpDrop)})


class EngineEvent(enum.Enum, shape=3):
    """What an event of the event engine is."""
    SEGMENT = 0
    TIMER = 1               # a deadline of the connection passed
    WRITTEN = 2             # octets written into the ring: its new end
    SEND = 3                # a connection still pending: its next segment
    COMMAND = 4             # the layer above's close or abort


class RxEvent(data.StructLayout):
    """A received segment of connection ``conn``."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "seg": TcpSegInfo()})


class TcbWrite(data.StructLayout):
    """Connection ``conn``'s entry becomes ``tcb``."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "tcb": Tcb()})


class ConnEvent(data.StructLayout):
    """What connection ``conn`` reports (``kind``)."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "kind": TcpEventKind})


class FreeConn(data.StructLayout):
    """Connection ``conn`` is over: its ``key`` leaves the connection table and the id is
    free."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "key": ConnKey()})


class Opened(data.StructLayout):
    """Connection ``conn``'s entry was written: its send ring starts at ``seq``; ``echo``:
    it is the echo service."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "seq": 32, "echo": 1})


class ConnCommand(data.StructLayout):
    """The layer above's ``kind`` of command for connection ``conn``."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "kind": TcpCommand})


class ConnectRequest(data.StructLayout):
    """An active open: to ``remote_ip``:``remote_port`` from ``local_port`` with initial
    sequence number ``iss``; ``echo``: the connection is the echo service."""

    def __init__(self):
        super().__init__({"remote_ip": 32, "remote_port": 16, "local_port": 16, "iss": 32,
                          "echo": 1})


class ConnectAnswer(data.StructLayout):
    """What became of an active open: ``result``, and the connection id ``conn`` it took
    (SYN_SENT)."""

    def __init__(self, *, connections):
        super().__init__({"conn": conn_bits(connections), "result": TcpConnectResult})
