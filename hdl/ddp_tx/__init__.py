"""DDP/RDMAP transmit path (RFC 5041 / 5040): :class:`DdpTx` and its stages.

``from rnic.hdl.ddp_tx import DdpTx, WorkRequest, TxConnCfg, ReadDone, TxCompletion``: the
block (:mod:`.top`) and the layouts of its host-facing ports (:mod:`.layouts`). The stages
are components of the modules of this package; :class:`DdpTx` documents how they fit.
"""

from .layouts import CqStatus, ReadDone, SqOpcode, TxCompletion, TxConnCfg, WorkRequest
from .top import DdpTx

__all__ = ["WorkRequest", "TxConnCfg", "ReadDone", "TxCompletion", "DdpTx", "SqOpcode", "CqStatus"]
