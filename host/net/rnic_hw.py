"""The simulated-hardware data path: the software RNIC with its MPA layer in the (Verilated) RnicCore.

:class:`HardwareRnic` is a :class:`rnic.host.net.rnic_sw.SoftwareRnic` whose framing
and deframing run on a device with stream access (a :class:`rnic.sim.device.SimDevice`):

* bytes read from the socket go as TCP segments into the core's ``rx_wire``;
  the ULPDUs that come out of ``rx_ulpdu``, with the hardware's CRC and
  marker verdicts, go to the model's DDP/RDMAP sink (validation, placement,
  completions) exactly as the software decoder's would;
* every ULPDU to send (work requests, Read Responses, Terminates) goes into
  ``tx_ulpdu`` and what comes out of ``tx_wire`` is written to the socket;
* the connection context is programmed through the registers from the MPA
  negotiation (:meth:`rnic.host.driver.device.Device.program_connection`): markers each
  way, CRC, the marker phase of each direction (0 at the start of its FPDU
  stream, further on if an RTR was already exchanged), the RX MULPDU, the
  state (WAIT_RX for a responder before the initiator's first FPDU: the
  core opens the fence itself).

This is done by swapping the Negotiated connection's ``encoder`` and
``decoder`` for :class:`HwEncoder` and :class:`HwDecoder`, which have the
interface of :class:`rnic.host.model.fpdu.FpduEncoder`/:class:`~rnic.host.model.fpdu.FpduDecoder`:
everything above them (the SoftwareRnic's threads, error handling, the
Terminate after a bad FPDU, the MPA fence, RFC 6581's RTR) is the model's
code, unchanged. A bad FPDU found by the hardware (CRC, marker, length) is
reported by the decoder with the model's :class:`~rnic.host.spec.errors.ErrorInfo`
(MPA 2, MPA 3, DDP 0/0), so the data path sends a Terminate and closes, and
the device's ERR_* registers hold the hardware's own capture.

:func:`hardware_datapath` is the ``Device.datapath_factory`` of the ``sim``
device kind, so ``rnic listen --device sim`` and ``rnic connect --device sim``
use this data path (:func:`rnic.host.net.transfer.make_datapath`).
"""

from __future__ import annotations

from rnic.host.spec.errors import ErrorInfo, MpaError
from rnic.host.model.fpdu import MAX_MULPDU, MAX_ULPDU_LENGTH, FpduEncoder, FpduError, FpduRecord, fpdu_layout
from rnic.host.spec.regmap import DpCrc, DpError
from rnic.host.driver.regs import encode
from rnic.host.net.rnic_sw import SoftwareRnic

__all__ = ["HwEncoder", "HwDecoder", "HardwareRnic", "hardware_datapath", "hw_error_info"]


def hw_error_info(error, offset, mulpdu=None):
    """The model's :class:`ErrorInfo` for an RX deframer error code (:class:`DpError`)."""
    where = f"the FPDU at offset {offset} (RX deframer)"
    error = DpError(error)
    if error == DpError.CRC:
        return ErrorInfo.mpa(MpaError.CRC, f"CRC mismatch in {where}")
    if error == DpError.MARKER:
        return ErrorInfo.mpa(MpaError.MARKER, f"a marker disagrees with the ULPDU_Length of {where}")
    if error == DpError.TOO_LONG:
        limit = "" if mulpdu is None else f" {mulpdu}"
        return ErrorInfo.ddp(0, 0, f"ULPDU_Length exceeds MULPDU{limit} in {where}")
    if error == DpError.TOO_SHORT:
        return ErrorInfo.ddp(0, 0, f"ULPDU_Length is shorter than the DDP header in {where}")
    return ErrorInfo.mpa(MpaError.LOCAL_CATASTROPHIC, f"{where} was aborted ({error.name})")


class HwEncoder(FpduEncoder):
    """:class:`rnic.host.model.fpdu.FpduEncoder` interface over the core's TX framer (``tx_ulpdu`` -> ``tx_wire``).

    ``dev`` has ``transmit(conn, ulpdu, expect=)``; the connection's TX context
    must have been programmed with the same markers/CRC and the phase of ``offset``.
    The layout and the properties are the model's; :meth:`encode` frames in the hardware.
    """

    def __init__(self, dev, conn, *, markers, crc, marker_origin=0, offset=0):
        super().__init__(markers=bool(markers), crc=bool(crc), marker_origin=marker_origin,
                         offset=offset)
        self.dev = dev
        self.conn = conn
        self.fpdus = 0

    def encode(self, ulpdu):
        """Frame one ULPDU (1..65535 octets) in the hardware; returns the FPDU's wire octets."""
        if not isinstance(ulpdu, (bytes, bytearray, memoryview)):
            raise TypeError(f"ulpdu must be bytes, not {type(ulpdu).__name__}")
        ulpdu = bytes(ulpdu)
        if not 1 <= len(ulpdu) <= MAX_ULPDU_LENGTH:
            raise ValueError(f"the TX framer takes ULPDUs of 1..{MAX_ULPDU_LENGTH} octets, "
                             f"not {len(ulpdu)}")
        lay = self.layout(len(ulpdu))
        wire = self.dev.transmit(self.conn, ulpdu, expect=lay.length)
        if len(wire) != lay.length:
            raise RuntimeError(f"the TX framer sent {len(wire)} octets for a ULPDU of {len(ulpdu)}, "
                               f"the FPDU is {lay.length}")
        self._offset = lay.end
        self.fpdus += 1
        return wire


class HwDecoder:
    """:class:`rnic.host.model.fpdu.FpduDecoder` interface over the core's RX deframer (``rx_wire`` -> ``rx_ulpdu``).

    Each :meth:`feed` is one TCP segment of connection ``conn``. Records carry
    the ULPDUs the hardware delivered; their offsets, lengths and marker
    positions are computed from the layout (the hardware checked the markers).
    """

    def __init__(self, dev, conn, *, markers, crc, marker_origin=0, offset=0, mulpdu=MAX_MULPDU):
        self.dev = dev
        self.conn = conn
        self._markers = bool(markers)
        self._crc = bool(crc)
        self._origin = marker_origin % 512
        self._mulpdu = mulpdu
        self._boundary = offset       # stream offset of the next FPDU's first octet
        self._fed = offset            # stream offset of the next octet fed
        self._closed = False
        self.error = None
        self.fpdus = 0

    @property
    def offset(self):
        return self._fed

    @property
    def failed(self):
        return self.error is not None

    @property
    def in_fpdu(self):
        return self._fed != self._boundary

    @property
    def mulpdu(self):
        return self._mulpdu

    def feed(self, data):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        if self._closed:
            raise RuntimeError("HwDecoder.feed() after close()")
        data = bytes(data)
        if self.error is not None or not data:
            return []
        units = self.dev.receive(self.conn, data)
        self._fed += len(data)
        out = []
        for u in units:
            if u.error == DpError.NONE:
                lay = fpdu_layout(len(u.data), offset=self._boundary, markers=self._markers,
                                  marker_origin=self._origin)
                out.append(FpduRecord(offset=self._boundary, length=lay.length,
                                      ulpdu_length=len(u.data),
                                      crc="ok" if u.crc == DpCrc.OK else "unchecked",
                                      markers=list(lay.markers), ulpdu=u.data))
                self._boundary = lay.end
                self.fpdus += 1
            else:
                self.error = FpduError(self._boundary, hw_error_info(u.error, self._boundary,
                                                                     self._mulpdu))
                out.append(self.error)
                break
        return out

    def close(self):
        if self._closed:
            return None
        self._closed = True
        if self.error is not None or not self.in_fpdu:
            return None
        self.error = FpduError(self._boundary, ErrorInfo.mpa(
            MpaError.TCP_CLOSED, f"stream ends inside an FPDU: {self._fed - self._boundary} "
            f"octets of the FPDU at offset {self._boundary} received"))
        return self.error


class HardwareRnic(SoftwareRnic):
    """:class:`~rnic.host.net.rnic_sw.SoftwareRnic` with MPA framing/deframing in the device's hardware.

    Parameters
    ----------
    negotiated : rnic.host.net.cm.Negotiated
        The connection (its encoder/decoder are replaced; nothing may be
        sent or received on it by the caller afterwards).
    device : rnic.host.driver.device.Device
        Over a transport with stream access (``transmit``/``receive``: a
        :class:`rnic.sim.device.SimDevice`). Connection ``conn``'s context is
        programmed now; CTRL.ENABLE is set and DP_CTRL set to BYPASS alone if needed
        (received ULPDUs leave on ``rx_ulpdu`` for the model's DDP/RDMAP layer).
    conn : int
        Connection id on the device (and DDP stream id of the model).
    rx_mulpdu : int
        MULPDU programmed for the RX direction (default the largest a peer may send).
    Other keyword arguments are the SoftwareRnic's.
    """

    def __init__(self, negotiated, device, *, conn=0, rx_mulpdu=MAX_MULPDU, **kw):
        sim = device.transport
        if not (callable(getattr(sim, "transmit", None)) and callable(getattr(sim, "receive", None))):
            raise TypeError(f"{device.spec}: the device has no stream access (a rnic.sim.device.SimDevice "
                            "is needed for the hardware data path)")
        super().__init__(negotiated, conn=conn, **kw)
        self.device = device
        self.sim = sim
        neg = negotiated
        enc, dec = neg.encoder, neg.decoder
        if isinstance(enc, HwEncoder) or isinstance(dec, HwDecoder):
            raise ValueError("the connection already runs on hardware")
        # The hardware starts at the software decoder's FPDU boundary; octets of an FPDU the
        # software decoder had begun (possible when the responder already read the first FPDU)
        # are fed again.
        boundary, carry = dec.offset, b""
        if dec.in_fpdu:
            carry = bytes(dec._raw)
            boundary = dec.offset - len(carry)
        ctx = {**neg.context(), "fence_open": neg.fence_open, "rx_fpdu_offset": boundary}
        self.programmed = device.program_connection(conn, ctx, rx_mulpdu=rx_mulpdu)
        regs = device.regs
        bypass = encode("DP_CTRL", bypass=1)     # received ULPDUs out of rx_ulpdu, to the model
        if regs.read("DP_CTRL") != bypass:
            regs.write("DP_CTRL", bypass)
        if not regs.field("CTRL", "ENABLE"):
            regs.enable(True)
        neg.encoder = HwEncoder(sim, conn, markers=neg.markers_tx, crc=neg.crc,
                                marker_origin=neg.tx_marker_origin, offset=enc.offset)
        neg.decoder = HwDecoder(sim, conn, markers=neg.markers_rx, crc=neg.crc,
                                marker_origin=neg.rx_marker_origin, offset=boundary, mulpdu=rx_mulpdu)
        if carry:
            neg._pending = carry + neg._pending

    def __repr__(self):
        return (f"<HardwareRnic {self.neg.role} conn={self.conn} state={self.state} "
                f"device={self.device.spec}>")

    def device_status(self):
        """The device's register view (identity, connections, counters, captured error)."""
        return self.device.status()


def hardware_datapath(device, negotiated, conn=0, **kw):
    """``Device.datapath_factory`` of devices with stream access: a :class:`HardwareRnic`."""
    return HardwareRnic(negotiated, device, conn=conn, **kw)
