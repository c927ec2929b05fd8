"""The Ethernet MAC and its path between GMII and the core's W-octet frame streams.

:class:`EthernetPort` is the whole port; its parts, one block a module:
:mod:`.gmii` (signatures), :mod:`.layouts` (:class:`FrameBeat`, :class:`RxOctet`,
:data:`RxDrop`), :class:`MacRx`, :class:`MacTx`, :class:`FrameBuffer`,
:class:`OctetsToBeats` and :class:`BeatsToOctets`.
"""

from .ethernet_port import EthernetPort
from .frame_buffer import FrameBuffer
from .gmii import GmiiRx, GmiiTx
from .layouts import NETWORK_DROPS, RX_COUNTERS, FrameBeat, RxDrop, RxOctet
from .mac_rx import MacRx
from .mac_tx import MacTx
from .width import BeatsToOctets, OctetsToBeats

__all__ = ["NETWORK_DROPS", "EthernetPort", "FrameBuffer", "GmiiRx", "GmiiTx",
           "RX_COUNTERS", "FrameBeat", "RxDrop", "RxOctet", "MacRx", "MacTx", "BeatsToOctets", "OctetsToBeats"]
