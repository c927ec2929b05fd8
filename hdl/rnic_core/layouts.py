"""Payload layouts of the streams between the components of :class:`~rnic.hdl.rnic_core.RnicCore`,
and of its memory rows and queue entries."""

from amaranth.hdl import unsigned
from amaranth.lib import data

from rnic.host.spec.regmap import ConnState, CqStatus, DpCrc, DpError, SqOpcode

from ..beat import conn_bits
from ..rdma_layouts import Completion

__all__ = ["ErrorInfo", "CtxEntry", "ConnCommand", "ConnReport", "ConnError", "FpduEnd", "MarkerState",
           "MarkerConfig", "CqEntry", "DpRxEntry", "DpControl"]

class ErrorInfo(data.StructLayout):
    """An error in the layout of a Terminate's first word (and of ERR_INFO, CTX_ERROR):
    ``ecode``, ``etype``, ``layer`` from bit 0. ``layer`` holds a
    :class:`~rnic.host.spec.errors.Layer` but is the Terminate's 4-bit field (a received
    Terminate may carry any value)."""

    def __init__(self):
        super().__init__({"ecode": unsigned(8), "etype": unsigned(4), "layer": unsigned(4)})


class CtxEntry(data.StructLayout):
    """Per-connection state kept by the core (one memory row per connection):
    ``state`` (:class:`~rnic.host.spec.regmap.ConnState`), ``err`` (stopped on an error) and the
    first error in Terminate layout (``ecode``, ``etype``, ``layer``, as :class:`ErrorInfo`)."""

    def __init__(self):
        super().__init__({"state": ConnState, "err": unsigned(1), "ecode": unsigned(8),
                          "etype": unsigned(4), "layer": unsigned(4)})


class ConnCommand(data.StructLayout):
    """A CTX_CMD for the per-connection state: COMMIT (``commit``) or SET_STATE of ``conn``."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "state": ConnState,
                          "commit": unsigned(1)})


class ConnReport(data.StructLayout):
    """A receive-path report for the per-connection state: an error found here, or
    (``received``) a Terminate received from the peer."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "received": unsigned(1),
                          "info": ErrorInfo()})


class ConnError(data.StructLayout):
    """An error of connection ``conn``, for the error capture."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "info": ErrorInfo()})


class FpduEnd(data.StructLayout):
    """The end of a ULPDU at the deframer's output: its ``error``
    (:class:`~rnic.host.spec.regmap.DpError`, the deframer's code) and that error in Terminate
    layout (``info``: LLP/0/2 for CRC, LLP/0/3 for MARKER, DDP/0/0 otherwise)."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "error": DpError,
                          "info": ErrorInfo()})


class MarkerState(data.StructLayout):
    """Per-connection TX marker tracking (counts markers for TX_MARKERS): markers on, and the
    stream offset modulo 512 of the connection's next octet."""

    def __init__(self):
        super().__init__({"markers": unsigned(1), "phase": unsigned(9)})


class MarkerConfig(data.StructLayout):
    """A COMMIT's row of the TX marker tracker."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "markers": unsigned(1),
                          "phase": unsigned(9)})


class BadPost(data.StructLayout):
    """A DOORBELL for a connection that does not exist (SQ_WR.CONN not below the core's
    connections): it completes at once with BAD_REQUEST, CQ_INFO.CONN as given."""

    def __init__(self):
        super().__init__({"conn": unsigned(16), "opcode": SqOpcode, "wr_id": unsigned(32)})


class CqEntry(data.StructLayout):
    """One entry of the host CQ: a receive-path :class:`~rnic.hdl.rdma_layouts.Completion` or
    (``tx``) a transmit-path :class:`~rnic.hdl.ddp_tx.TxCompletion` (then ``status`` is its
    :class:`~rnic.host.spec.regmap.CqStatus`); ``bad_conn``: a :class:`BadPost`'s
    connection (``tx`` set, CQ_INFO.CONN shows it instead of ``rx.conn``); ``rresp``: a
    receive-path RDMA Read Response completion (an SQ Read's), worked out when it is
    written, so that the views are one LUT level behind the queue."""

    def __init__(self, *, connections):
        super().__init__({"rx": Completion(connections=connections), "tx": unsigned(1),
                          "status": CqStatus, "bad": unsigned(1), "bad_conn": unsigned(16),
                          "rresp": unsigned(1)})


class DpRxEntry(data.StructLayout):
    """One entry of the data port's RX status FIFO (a ULPDU whose words are in the data FIFO)."""

    def __init__(self, *, connections):
        super().__init__({"conn": unsigned(conn_bits(connections)), "len": unsigned(16),
                          "crc": DpCrc, "error": DpError})


class DpControl(data.StructLayout):
    """DP_CTRL's bits as the core uses them, and ``use_ddp`` (neither SINK nor BYPASS: the
    deframer's ULPDUs go to the DDP/RDMAP receive path)."""

    def __init__(self):
        super().__init__({"loopback": unsigned(1), "source": unsigned(1), "sink": unsigned(1),
                          "bypass": unsigned(1), "host_reads": unsigned(1), "use_ddp": unsigned(1)})
