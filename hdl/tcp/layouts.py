"""Layouts of the TCP engine's ports and of the streams between its stages."""

from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.utils import bits_for

from rnic.host.spec import tcp_engine as engine_spec
from rnic.host.spec.limits import check_width
from rnic.host.spec.tcp import MAX_OPTIONS_LEN, MAX_WINDOW_SCALE

from ..beat import OctetBeat
from ..net.layouts import FrameBeat
from ..shapes import shaped_enum

#: :class:`rnic.host.spec.tcp_engine.TcpState`, ``TcpDrop`` and ``TcpEventKind`` as field
#: shapes.
TcpState = shaped_enum(engine_spec.TcpState, 4, module=__name__)
TcpDrop = shaped_enum(engine_spec.TcpDrop, 4, module=__name__)
TcpEventKind = shaped_enum(engine_spec.TcpEventKind, 3, module=__name__)
TcpCommand = shaped_enum(engine_spec.TcpCommand, 1, module=__name__)
TcpConnectResult = shaped_enum(engine_spec.TcpConnectResult, 2, module=__name__)

__all__ = ["TcpState", "TcpDrop", "TcpEventKind", "TcpCommand", "TcpConnectResult", "TcpFlags",
           "TcpHeaderInfo", "TcpSegInfo", "TcpTxDesc", "ShiftBeat"]


class TcpFlags(data.StructLayout):
    """The 8 control bits of a TCP header, in the order of the header's octet 13 (``fin`` in
    bit 0: :class:`rnic.host.spec.tcp.TcpFlag`)."""

    def __init__(self):
        super().__init__({name: unsigned(1) for name in
                          ("fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr")})


def _segment_fields():
    """The header fields a received and a sent segment both carry (``length``: payload
    octets)."""
    return {
        "src_port": unsigned(16),
        "dst_port": unsigned(16),
        "seq": unsigned(32),
        "ack": unsigned(32),
        "flags": TcpFlags(),
        "window": unsigned(16),
        "length": unsigned(16),
    }


def _fixed_fields():
    """The fields of a segment's headers that every stage of the receive path carries."""
    return {"src_ip": unsigned(32), **_segment_fields()}


class TcpHeaderInfo(data.StructLayout):
    """A received segment's headers, from the header stage to the option walker.

    The fixed fields of :class:`TcpSegInfo`; ``options`` the header's octets after its first
    20 (octet ``k`` of the options in bits ``8k .. 8k+7``), ``options_len`` how many of them
    there are (0 .. 40, a multiple of 4); ``truncated`` the frame ended inside its TCP
    header (``length`` and ``options_len`` are then 0).
    """

    def __init__(self):
        super().__init__({
            **_fixed_fields(),
            "options": unsigned(8 * MAX_OPTIONS_LEN),
            "options_len": unsigned(bits_for(MAX_OPTIONS_LEN)),
            "truncated": unsigned(1),
        })


class TcpSegInfo(data.StructLayout):
    """What the receive parser reports of one segment (the model's
    :class:`rnic.host.model.tcp.ReceiveInfo`).

    ``src_ip`` the sender's address (big-endian), the header fields, ``length`` the payload
    octets; of the options: ``mss`` (0: no MSS option), ``ws_present`` and ``ws`` (the
    window scale option and its shift, at most 14), ``sack_permitted``; ``bad_options`` the
    options are malformed, or the frame ended inside its header (the option fields are then
    0).
    """

    def __init__(self):
        super().__init__({
            **_fixed_fields(),
            "mss": unsigned(16),
            "ws_present": unsigned(1),
            "ws": unsigned(bits_for(MAX_WINDOW_SCALE)),
            "sack_permitted": unsigned(1),
            "bad_options": unsigned(1),
        })


class TcpTxDesc(data.StructLayout):
    """A segment to send (:class:`~rnic.hdl.tcp.tx_frame.TcpTxFrame`): ``dst_ip``, the
    ports, sequence and acknowledgment numbers, flags and window of its header; ``length``
    payload octets whose 16-bit one's complement sum is ``payload_sum``; ``syn_options``
    adds the options of a SYN: MSS ``mss``, and with ``ws_present`` window scale ``ws``."""

    def __init__(self):
        super().__init__({
            "dst_ip": unsigned(32),
            **_segment_fields(),
            "payload_sum": unsigned(16),
            "syn_options": unsigned(1),
            "mss": unsigned(16),
            "ws_present": unsigned(1),
            "ws": unsigned(bits_for(MAX_WINDOW_SCALE)),
        })


class ShiftBeat(data.StructLayout):
    """A beat of :class:`~rnic.hdl.net.layouts.FrameBeat` with ``skip``: on the ``first``
    beat of a packet, the lanes below ``skip`` are not part of it (``n`` still counts from
    lane 0, so ``n > skip``); ignored on other beats. With ``connections``, also the
    ``conn`` of :class:`~rnic.hdl.beat.OctetBeat`.

    Parameters
    ----------
    width : int
        Octets per beat.
    connections : int or None
        Connection ids the ``conn`` field holds; ``None``: no ``conn`` field.
    """

    def __init__(self, *, width, connections=None):
        self.width = check_width(width)
        self.connections = connections
        beat = FrameBeat(width=width) if connections is None else \
            OctetBeat(width=width, connections=connections)
        fields = {name: field.shape for name, field in beat}
        super().__init__({**fields, "skip": unsigned(bits_for(width - 1))})
