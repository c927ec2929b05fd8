"""The TCP engine between the network layer and the RNIC core's per-connection byte
streams (``docs/tcp.md``).

The receive side: the parser :class:`TcpRxParse` (:mod:`.rx_header`, :mod:`.option_walker`,
:mod:`.lane_shift`), the connection table :class:`TcpConnTable`, the listening ports
:class:`TcpListeners`, the SYN cookies :class:`TcpCookie`, the delivery stage
:class:`TcpRxDeliver`, the event engine of synchronized connections
:class:`TcpEventEngine` over a table of :class:`Tcb` entries, the front that takes each
segment to its connection, a listener or a RST :class:`TcpRxFront` (with the free ids
:class:`TcpConnIds`), and all of them joined: :class:`TcpRxPath`. The rules of a connection's
events: :class:`TcpRxCheck`, :class:`TcpAckUpdate`, :class:`TcpRttUpdate`,
:class:`TcpRxText`, :class:`TcpSynSent`, :class:`TcpAccept`, :class:`TcpWindowField`,
:class:`TcpTimeout`, :class:`TcpArm`, :class:`TcpReply`, :class:`TcpTimersDue`, and of
sending: :class:`TcpSendStep`, :class:`TcpSendData`. The timers
:class:`TcpTimerTable`.
The send side: the ring writer :class:`TcpRingWrite`, the rings' room :class:`TcpRingRoom`,
where segments end :class:`TcpSendCut`, the ring reader :class:`TcpRingRead` and the frame
builder :class:`TcpTxFrame`. The whole engine: :class:`TcpOffload`; the register map's TCP
block in front of it: :class:`TcpRegisters`. Layouts and field shapes in :mod:`.layouts`;
sequence-number comparisons in :mod:`.seq`; the steps of the staged rule blocks in :mod:`.stage`.
"""

from .accept import Accepted, TcpAccept
from .ack_update import AckSeg, SendState, TcpAckUpdate
from .arm import ArmState, TcpArm
from .conn_ids import TcpConnIds
from .conn_table import TcpConnTable
from .cookie import TcpCookie, cookie_mss_index
from .event_engine import TcpEventEngine
from .events import (ConnCommand, ConnEvent, ConnectAnswer, ConnectRequest, EngineEvent,
                     FreeConn, Opened, RxEvent, TcbWrite, TcpDropEvent)
from .lane_shift import LaneShift
from .layouts import ShiftBeat, TcpFlags, TcpHeaderInfo, TcpSegInfo, TcpTxDesc
from .listeners import ListenerWrite, TcpListeners
from .offload import TcpOffload
from .option_walker import TcpOptionWalker
from .registers import TcpRegisters
from .reply import ReplyKind, TcpReply
from .ring_read import TcpRingRead, TxRequest
from .ring_room import RunBegan, TcpRingRoom
from .ring_write import RingPosition, TcpRingWrite
from .rtt_update import RttState, TcpRttUpdate
from .rx_check import RxVerdict, TcpRxCheck
from .rx_deliver import RxAction, TcpRxDeliver
from .rx_front import TcpRxFront
from .rx_header import TcpRxHeader
from .rx_parse import TcpRxParse
from .rx_path import TcpRxPath
from .rx_text import RecvState, TcpRxText, TextSeg
from .send_cut import CutAnswer, CutRecord, CutRequest, ReleaseRequest, TcpSendCut
from .send_data import SentState, TcpSendData
from .send_step import SendWindowState, TcpSendStep
from .syn_sent import Connected, SynSentVerdict, TcpSynSent
from .tcb import RecvFields, Tcb, TimerFields
from .timeout import TcpTimeout, TimeoutState
from .timer_table import TcpTimerTable, TimerArm
from .timers_due import TcpTimersDue
from .tx_frame import TcpTxFrame
from .window_field import TcpWindowField

__all__ = ["LaneShift", "ShiftBeat", "TcpFlags", "TcpHeaderInfo", "TcpSegInfo",
           "TcpOptionWalker", "TcpRxHeader", "TcpRxParse", "TcpConnTable",
           "TcpTxFrame", "TcpTxDesc", "TcpRxDeliver", "RxAction",
           "TcpRingWrite", "RingPosition", "TcpRingRead", "TxRequest",
           "TcpTimerTable", "TimerArm", "TcpCookie",
           "TcpListeners", "ListenerWrite", "TcpRxCheck", "RxVerdict",
           "TcpRttUpdate", "RttState", "TcpAckUpdate", "SendState", "AckSeg",
           "TcpRxText", "RecvState", "TextSeg", "TcpReply", "ReplyKind",
           "TcpSynSent", "SynSentVerdict", "Connected", "TcpAccept", "Accepted",
           "TcpWindowField", "TcpTimeout", "TimeoutState", "TcpArm",
           "ArmState", "TcpSendCut", "CutRecord", "CutRequest", "CutAnswer", "ReleaseRequest",
           "Tcb", "RecvFields", "TimerFields", "TcpEventEngine", "RxEvent", "TcbWrite", "ConnEvent",
           "TcpDropEvent", "TcpRxFront", "TcpRxPath", "TcpConnIds", "cookie_mss_index",
           "FreeConn", "TcpTimersDue", "TcpSendStep", "SendWindowState", "TcpSendData",
           "SentState", "EngineEvent", "TcpOffload", "TcpRingRoom", "RunBegan", "ConnCommand",
           "Opened", "TcpRegisters", "ConnectRequest", "ConnectAnswer"]
