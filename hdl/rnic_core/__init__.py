"""The RNIC core (:class:`RnicCore`) and the components it is made of.

The core instantiates the register bank and the four data-path blocks
(:class:`~rnic.hdl.mpa_tx.MpaTxFramer`, :class:`~rnic.hdl.mpa_rx.MpaRxDeframer`,
:class:`~rnic.hdl.ddp_rx.DdpRx`, :class:`~rnic.hdl.ddp_tx.DdpTx`) and connects them through
the components of this package: :class:`~.setup.ConnectionSetup` (reset sweep, CTX_CMD),
:class:`~.state.ConnectionState` (per-connection state), :class:`~.control.CoreControl`
(DP_CTRL, CTRL.ENABLE), :class:`~.tx_switch.UlpduSwitch`, :class:`~.tx_output.FramerOutput`
(TX marker tracker), :class:`~.loopback.LoopbackSwitch`, :class:`~.rx_output.DeframerOutput`,
:class:`~.error_capture.ErrorCapture`, :class:`~.counters.Counters`, the data port
(:class:`~.dp_tx.DataPortTx`, :class:`~.dp_rx.DataPortRx`) and the host queues
(:class:`~.stag_writer.StagWriter`, :class:`~.sq_post.WorkRequestPost`,
:class:`~.rq_post.ReceiveBufferPost`, :class:`~.ird_release.IrdRelease`,
:class:`~.completion_queue.CompletionQueue`, :class:`~.read_request_queue.ReadRequestQueue`,
:class:`~.terminate_queue.TerminateQueue`).
"""

from .core import DP_DEPTH, DP_ULPDUS, RnicCore
from .layouts import CtxEntry, DpRxEntry

__all__ = ["RnicCore", "CtxEntry", "DpRxEntry", "DP_DEPTH", "DP_ULPDUS"]
