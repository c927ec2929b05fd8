"""GMII signatures: the octet-wide interface between the MAC and a PHY adapter.

A PHY adapter (RGMII with DDR primitives on the board, plain GMII ports in simulation)
produces :data:`GmiiRx` and consumes :data:`GmiiTx` in the PHY's receive and transmit clock
domains; the MAC (:class:`~rnic.hdl.net.mac_rx.MacRx`, :class:`~rnic.hdl.net.mac_tx.MacTx`)
has the flipped members. One octet per cycle of a 125 MHz clock at 1 Gb/s (IEEE 802.3
clause 35): ``rx_dv``/``tx_en`` high from the first preamble octet to the last FCS octet.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import Out

__all__ = ["GmiiRx", "GmiiTx"]

#: Receive side as the PHY drives it: ``rxd`` octet, ``rx_dv`` data valid, ``rx_er`` the
#: PHY saw a coding error in this octet. The MAC takes ``In(GmiiRx)``.
GmiiRx = wiring.Signature({
    "rxd": Out(8),
    "rx_dv": Out(1),
    "rx_er": Out(1),
})

#: Transmit side as the MAC drives it: ``txd`` octet, ``tx_en`` transmit enable, ``tx_er``
#: transmit error (the PHY corrupts the frame on the wire so that the receiver drops it).
GmiiTx = wiring.Signature({
    "txd": Out(8),
    "tx_en": Out(1),
    "tx_er": Out(1),
})
