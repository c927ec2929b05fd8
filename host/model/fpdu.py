"""MPA FPDU encoder and decoder: the golden model of the MPA framer/deframer.

Stream offsets
--------------
Offset 0 is the first octet of this direction's FPDU stream, i.e. the first
octet after the side's MPA Request (initiator) or Reply (responder); the
``offset=`` parameter lets a caller start at another FPDU boundary. Markers sit
at every offset ``o`` with ``(o - marker_origin) % 512 == 0``. FPDUs are
multiples of 4 octets long and markers must share their 4-octet grid, so
``marker_origin`` must be a multiple of 4 and, with markers on, FPDUs start at
offsets that are multiples of 4.

FPDU layout (RFC 5044 section 4; the figures of spec 002)
---------------------------------------------------------
::

    [marker]  ULPDU_Length(16, BE)  ULPDU  pad(0..3 zero)  [marker]  CRC(32)

with markers also inserted inside the ULPDU (and the length field) wherever
the grid puts them. In detail, for an FPDU whose first octet is at offset S:

* a marker at S (between two FPDUs) belongs to this FPDU, carries FPDUPTR 0
  and is inside its CRC; the ULPDU_Length field then starts at S + 4;
* every other marker at offset M inside the FPDU carries
  FPDUPTR = M - (offset of the ULPDU_Length field), i.e. the octets back from
  the marker to the length field, markers included (Figure 6: a marker at
  0x200 in an FPDU at 0x1EC carries 0x14);
* the pad makes the FPDU, markers included, a multiple of 4 octets;
* a marker right after the pad (just before the CRC) is inside this FPDU and
  its CRC; a marker right after the CRC is the next FPDU's leading marker;
* the CRC32c covers the FPDU's first octet (its leading marker, if any)
  through the pad, markers included, and is written least significant octet
  first (:func:`rnic.host.model.crc.crc_field`). With CRC off the field is 4 zero octets
  and is not checked.

A marker is 2 reserved zero octets then the 16-bit FPDUPTR, big endian. On
receive the reserved octets are not checked and the 2 low bits of FPDUPTR
are treated as zero (spec 002 section 7.1: they are reserved).

Receive checks (:class:`FpduDecoder`), in this order, per FPDU
----------------------------------------------------------------
a. as soon as the length field is complete: ULPDU_Length > MULPDU
   -> ``ErrorInfo.ddp(0, 0, "ULPDU_Length X exceeds MULPDU Y")``;
b. with ``check_header``, as soon as the first ULPDU octet (the DDP control
   octet, T bit 0x80) is in: ULPDU_Length shorter than the 14-octet tagged
   (T = 1) or 18-octet untagged (T = 0) DDP header -> ``ErrorInfo.ddp(0, 0,
   ...)``; ULPDU_Length 0 fails here as soon as the length field is complete;
c. at the end of the FPDU: with CRC on, a CRC mismatch ->
   ``ErrorInfo.mpa(MpaError.CRC)``; otherwise a marker whose FPDUPTR
   disagrees with its position -> ``ErrorInfo.mpa(MpaError.MARKER)`` (RFC 5044:
   the marker check applies to FPDUs whose CRC is valid).

After the first error the decoder delivers nothing more on that half
connection.
"""

from dataclasses import dataclass, field

from rnic.host.model.crc import crc32c, crc_field, crc_from_field, CRC_FIELD_LEN
from rnic.host.spec.errors import ErrorInfo, MpaError
from rnic.host.spec.limits import MARKER_INTERVAL, MAX_MULPDU, MIN_MULPDU
from rnic.host.spec.protocol import TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN

__all__ = [
    "MARKER_INTERVAL", "MARKER_LEN", "LENGTH_FIELD_LEN", "MIN_MULPDU", "MAX_MULPDU",
    "MAX_ULPDU_LENGTH", "TAGGED_HEADER_LEN", "UNTAGGED_HEADER_LEN",
    "mulpdu", "FpduLayout", "fpdu_layout", "is_marker_offset",
    "FpduEncoder", "FpduRecord", "FpduError", "FpduDecoder",
    "check_fpduptrs", "too_long_error", "too_short_error", "crc_error", "marker_error",
    "truncated_error",
]

#: Octets in a marker.
MARKER_LEN = 4
#: Octets in the ULPDU_Length field.
LENGTH_FIELD_LEN = 2
#: Largest value of the ULPDU_Length field.
MAX_ULPDU_LENGTH = 0xFFFF

_T_BIT = 0x80


def _check_int(name, value, *, minimum=None, maximum=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, not {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, not {value}")


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


def _check_grid(markers, marker_origin, offset):
    """Validate marker_origin/offset; return marker_origin mod 512."""
    _check_int("marker_origin", marker_origin)
    _check_int("offset", offset, minimum=0)
    if marker_origin % 4:
        raise ValueError(f"marker_origin {marker_origin} is not a multiple of 4: "
                         "FPDUs and markers share the 4-octet grid (RFC 5044)")
    if markers and offset % 4:
        raise ValueError(f"offset {offset} is not a multiple of 4: with markers, "
                         "FPDUs start on the 4-octet grid of the markers")
    return marker_origin % MARKER_INTERVAL


def mulpdu(emss, *, markers):
    """MULPDU for an EMSS (RFC 5044 section 4.1).

    ``EMSS - (6 + 4*ceil(EMSS/512) + EMSS mod 4)`` with markers,
    ``EMSS - (6 + EMSS mod 4)`` without, clamped to [128, 64768].
    """
    _check_int("emss", emss, minimum=0)
    _check_bool("markers", markers)
    overhead = 6 + emss % 4
    if markers:
        overhead += MARKER_LEN * -(-emss // MARKER_INTERVAL)
    return max(MIN_MULPDU, min(MAX_MULPDU, emss - overhead))


def is_marker_offset(offset, marker_origin=0):
    """True if a marker sits at stream ``offset`` for this ``marker_origin``."""
    return (offset - marker_origin) % MARKER_INTERVAL == 0


def _next_marker(pos, origin):
    """Smallest marker offset >= pos."""
    return pos + (origin - pos) % MARKER_INTERVAL


@dataclass(frozen=True)
class FpduLayout:
    """Where the parts of one FPDU fall in the stream (all stream offsets).

    Attributes
    ----------
    offset : int
        First octet of the FPDU (its leading marker, if any).
    ulpdu_length : int
        Value of the ULPDU_Length field.
    length_offset : int
        The ULPDU_Length field.
    pad : int
        Pad octets (0..3).
    markers : tuple of (int, int)
        ``(offset, fpduptr)`` of each marker inside the FPDU, as the sender
        writes it (a leading marker has FPDUPTR 0). An FPDUPTR above 0xFFFF
        cannot be sent (only possible for ULPDUs above MULPDU's 64768).
    crc_offset : int
        The CRC field.
    end : int
        First octet after the FPDU (the next FPDU's first octet).
    """
    offset: int
    ulpdu_length: int
    length_offset: int
    pad: int
    markers: tuple
    crc_offset: int
    end: int

    @property
    def length(self):
        """Octets on the wire, markers and CRC included."""
        return self.end - self.offset


def _layout(start, n, markers, origin):
    """Unchecked :func:`fpdu_layout` (``origin`` already reduced mod 512)."""
    if not markers:
        body = LENGTH_FIELD_LEN + n
        pad = -body % 4
        crc_pos = start + body + pad
        return FpduLayout(start, n, start, pad, (), crc_pos, crc_pos + CRC_FIELD_LEN)
    found = []
    p = start
    if is_marker_offset(p, origin):
        found.append((p, 0))
        p += MARKER_LEN
    len_pos = p
    remaining = LENGTH_FIELD_LEN + n       # length field + ULPDU, markers go between
    while True:
        m = _next_marker(p, origin)
        if m - p >= remaining:              # no marker before the last content octet
            p += remaining
            break
        remaining -= m - p
        found.append((m, m - len_pos))
        p = m + MARKER_LEN
    pad = -(p - start) % 4
    p += pad                                # no marker can fall inside the pad
    if is_marker_offset(p, origin):         # marker right after the pad: ours
        found.append((p, p - len_pos))
        p += MARKER_LEN
    return FpduLayout(start, n, len_pos, pad, tuple(found), p, p + CRC_FIELD_LEN)


def fpdu_layout(ulpdu_length, *, offset, markers, marker_origin=0):
    """The :class:`FpduLayout` of an FPDU carrying ``ulpdu_length`` octets.

    Parameters
    ----------
    ulpdu_length : int
        0..65535.
    offset : int
        Stream offset of the FPDU's first octet.
    markers : bool
        Whether markers are inserted.
    marker_origin : int
        Stream offset of a marker (multiple of 4; taken mod 512).
    """
    _check_int("ulpdu_length", ulpdu_length, minimum=0, maximum=MAX_ULPDU_LENGTH)
    _check_bool("markers", markers)
    origin = _check_grid(markers, marker_origin, offset)
    return _layout(offset, ulpdu_length, markers, origin)


def check_fpduptrs(layout):
    """Raise ``ValueError`` if a marker of ``layout`` needs an FPDUPTR above 0xFFFF (unsendable)."""
    for m, ptr in layout.markers:
        if ptr > 0xFFFF:
            raise ValueError(f"ULPDU of {layout.ulpdu_length} octets: the marker at {m} "
                             f"would need FPDUPTR {ptr} > 0xFFFF")


# -- the receive errors (one function each, so that every engine words them alike) ------------

def too_long_error(ulpdu_length, mulpdu):
    """Check a: ULPDU_Length above MULPDU."""
    return ErrorInfo.ddp(0, 0, f"ULPDU_Length {ulpdu_length} exceeds MULPDU {mulpdu}")


def too_short_error(ulpdu_length, control=None):
    """Check b: ULPDU_Length below the DDP header announced by the ``control`` octet's T bit.

    ``control`` is not needed (and ignored) for ULPDU_Length 0, shorter than any header.
    """
    if ulpdu_length == 0:
        return ErrorInfo.ddp(
            0, 0, "ULPDU_Length 0 is shorter than any DDP header "
            f"({TAGGED_HEADER_LEN}-octet tagged, {UNTAGGED_HEADER_LEN}-octet untagged)")
    tagged = bool(control & _T_BIT)
    hdr = TAGGED_HEADER_LEN if tagged else UNTAGGED_HEADER_LEN
    kind = "tagged" if tagged else "untagged"
    return ErrorInfo.ddp(
        0, 0, f"ULPDU_Length {ulpdu_length} is shorter than the {hdr}-octet {kind} DDP header")


def crc_error(received, computed, covered, offset):
    """Check c: CRC mismatch; ``covered`` octets of the FPDU at ``offset`` precede the CRC."""
    return ErrorInfo.mpa(
        MpaError.CRC, f"CRC {received:#010x} received, {computed:#010x} computed "
        f"over the {covered}-octet FPDU at offset {offset}")


def marker_error(marker_offset, fpduptr, length_offset, expected):
    """Check c: the marker at ``marker_offset`` carries ``fpduptr`` instead of ``expected``."""
    return ErrorInfo.mpa(
        MpaError.MARKER, f"marker at offset {marker_offset} carries FPDUPTR {fpduptr:#06x}, "
        f"the ULPDU_Length field at {length_offset} needs {expected:#06x}")


def truncated_error(have, whole, offset):
    """The stream ends after ``have`` octets of the FPDU at ``offset`` (``whole``: its length,
    None while its ULPDU_Length field is incomplete)."""
    whole = f"{whole}" if whole is not None else "an unknown number of"
    return ErrorInfo.mpa(
        MpaError.TCP_CLOSED, f"stream ends inside an FPDU: {have} of {whole} "
        f"octets of the FPDU at offset {offset} received")


def _marker(fpduptr):
    return b"\x00\x00" + fpduptr.to_bytes(2, "big")


class FpduEncoder:
    """Turn ULPDUs into the FPDU octet stream of one direction.

    Parameters
    ----------
    markers : bool
        Insert markers (the peer set M in its frame).
    crc : bool
        Compute the CRC (C negotiated); else the CRC field is 4 zero octets.
    marker_origin : int
        Stream offset of a marker, a multiple of 4 (taken mod 512); 0 for a
        stream that starts right after the MPA frame.
    offset : int
        Stream offset of the first FPDU this encoder writes (a multiple of 4
        with markers).
    """

    def __init__(self, *, markers, crc, marker_origin=0, offset=0):
        _check_bool("markers", markers)
        _check_bool("crc", crc)
        self._origin = _check_grid(markers, marker_origin, offset)
        self._markers = markers
        self._crc = crc
        self._offset = offset

    @property
    def offset(self):
        """Stream offset of the next FPDU's first octet."""
        return self._offset

    @property
    def markers(self):
        """Whether markers are inserted."""
        return self._markers

    @property
    def crc(self):
        """Whether CRCs are computed (else the CRC field is zero)."""
        return self._crc

    @property
    def marker_origin(self):
        """The marker origin, reduced mod 512."""
        return self._origin

    def layout(self, ulpdu_length):
        """The :class:`FpduLayout` the next FPDU would have."""
        _check_int("ulpdu_length", ulpdu_length, minimum=0, maximum=MAX_ULPDU_LENGTH)
        return _layout(self._offset, ulpdu_length, self._markers, self._origin)

    def encode(self, ulpdu):
        """Frame one ULPDU (0..65535 octets) and advance :attr:`offset`.

        Returns
        -------
        bytes
            The FPDU's wire octets, markers and CRC included.

        Raises
        ------
        ValueError
            ULPDU longer than 65535 octets, or (markers on, far above MULPDU)
            so long that an FPDUPTR would not fit 16 bits.
        """
        if not isinstance(ulpdu, (bytes, bytearray, memoryview)):
            raise TypeError(f"ulpdu must be bytes, not {type(ulpdu).__name__}")
        ulpdu = bytes(ulpdu)
        if len(ulpdu) > MAX_ULPDU_LENGTH:
            raise ValueError(f"ULPDU of {len(ulpdu)} octets does not fit the 16-bit "
                             "ULPDU_Length field")
        lay = _layout(self._offset, len(ulpdu), self._markers, self._origin)
        check_fpduptrs(lay)
        content = len(ulpdu).to_bytes(2, "big") + ulpdu + bytes(lay.pad)
        out = bytearray()
        pos, ci = lay.offset, 0
        for m, ptr in lay.markers:
            take = m - pos                  # content octets before this marker
            out += content[ci:ci + take]
            ci += take
            out += _marker(ptr)
            pos = m + MARKER_LEN
        out += content[ci:]
        out += crc_field(crc32c(out)) if self._crc else bytes(CRC_FIELD_LEN)
        assert len(out) == lay.length
        self._offset = lay.end
        return bytes(out)


@dataclass
class FpduRecord:
    """One FPDU received intact.

    Attributes
    ----------
    offset : int
        Stream offset of the FPDU's first octet (its leading marker, if any).
    length : int
        Octets on the wire, markers and CRC included.
    ulpdu_length : int
        The ULPDU_Length field.
    crc : {"ok", "unchecked"}
        "ok" if the CRC was checked and matched; "unchecked" with CRC off.
    markers : list of (int, int)
        ``(stream offset, FPDUPTR as received)`` of each marker in the FPDU.
    ulpdu : bytes
        The ULPDU, markers removed.
    """
    offset: int
    length: int
    ulpdu_length: int
    crc: str
    markers: list = field(default_factory=list)
    ulpdu: bytes = b""


@dataclass
class FpduError:
    """The error that stopped a decoder.

    Attributes
    ----------
    offset : int
        Stream offset of the first octet of the offending FPDU.
    info : ErrorInfo
        What went wrong.
    """
    offset: int
    info: ErrorInfo


_HEAD, _FIRST, _BODY = "head", "first", "body"


class FpduDecoder:
    """Find, check and unwrap the FPDUs of one direction's octet stream.

    Parameters
    ----------
    markers : bool
        Markers are present (this side set M in its frame).
    crc : bool
        Check CRCs (C negotiated).
    marker_origin : int
        Stream offset of a marker, a multiple of 4 (taken mod 512).
    offset : int
        Stream offset of the first octet fed (an FPDU boundary).
    mulpdu : int
        Largest ULPDU_Length accepted (0..65535).
    check_header : bool
        Check ULPDU_Length against the DDP header size its first octet's T
        bit announces.
    """

    def __init__(self, *, markers, crc, marker_origin=0, offset=0, mulpdu=MAX_MULPDU,
                 check_header=True):
        _check_bool("markers", markers)
        _check_bool("crc", crc)
        _check_bool("check_header", check_header)
        _check_int("mulpdu", mulpdu, minimum=0, maximum=MAX_ULPDU_LENGTH)
        self._origin = _check_grid(markers, marker_origin, offset)
        self._markers = markers
        self._crc = crc
        self._mulpdu = mulpdu
        self._check_header = check_header
        self.error = None
        """The :class:`FpduError` that stopped the decoder, else None."""
        self._closed = False
        self._start_fpdu(offset)

    # -- state -------------------------------------------------------------

    def _start_fpdu(self, start):
        self._start = start
        self._raw = bytearray()             # wire octets of the current FPDU so far
        self._layout = None
        self._stage = _HEAD
        self._len_pos = start + (MARKER_LEN if self._markers
                                 and is_marker_offset(start, self._origin) else 0)
        self._need = self._len_pos - start + LENGTH_FIELD_LEN

    @property
    def offset(self):
        """Stream offset of the next octet the decoder will consume."""
        return self._start + len(self._raw)

    @property
    def failed(self):
        """True once an error was reported."""
        return self.error is not None

    @property
    def in_fpdu(self):
        """True if octets of an unfinished FPDU are buffered."""
        return bool(self._raw)

    @property
    def mulpdu(self):
        """Largest ULPDU_Length accepted."""
        return self._mulpdu

    # -- feeding -----------------------------------------------------------

    def feed(self, data):
        """Take stream octets (any chunking); return what completed.

        Returns
        -------
        list of FpduRecord or FpduError
            The FPDUs completed by these octets, in order, ending with an
            :class:`FpduError` if one was found; ``[]`` once failed.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        if self._closed:
            raise RuntimeError("FpduDecoder.feed() after close()")
        out = []
        if self.error is not None:
            return out
        data = bytes(data)
        i, n = 0, len(data)
        while i < n:
            take = self._need - len(self._raw)
            self._raw += data[i:i + take]
            i += take
            if len(self._raw) < self._need:
                break
            result = self._step()
            if result is not None:
                out.append(result)
                if isinstance(result, FpduError):
                    break
        return out

    def _fail(self, info):
        self.error = FpduError(self._start, info)
        return self.error

    def _step(self):
        """Act on a completed stage; return a record, an error or None."""
        raw, start = self._raw, self._start
        if self._stage == _HEAD:
            lo = self._len_pos - start
            n = int.from_bytes(raw[lo:lo + LENGTH_FIELD_LEN], "big")
            if n > self._mulpdu:
                return self._fail(too_long_error(n, self._mulpdu))
            self._layout = _layout(start, n, self._markers, self._origin)
            if self._check_header:
                if n == 0:
                    return self._fail(too_short_error(0))
                self._stage = _FIRST
                self._need = lo + LENGTH_FIELD_LEN + 1
            else:
                self._stage = _BODY
                self._need = self._layout.length
            return None
        if self._stage == _FIRST:
            n = self._layout.ulpdu_length
            control = raw[self._len_pos - start + LENGTH_FIELD_LEN]
            tagged = bool(control & _T_BIT)
            hdr = TAGGED_HEADER_LEN if tagged else UNTAGGED_HEADER_LEN
            if n < hdr:
                return self._fail(too_short_error(n, control))
            self._stage = _BODY
            self._need = self._layout.length
            return None
        return self._finish()

    def _finish(self):
        lay, raw, start = self._layout, bytes(self._raw), self._start
        crc_at = lay.crc_offset - start
        if self._crc:
            got = crc_from_field(raw[crc_at:crc_at + CRC_FIELD_LEN])
            want = crc32c(raw[:crc_at])
            if got != want:
                return self._fail(crc_error(got, want, crc_at, start))
        received = []
        for m, expected in lay.markers:
            ptr = int.from_bytes(raw[m - start + 2:m - start + MARKER_LEN], "big")
            received.append((m, ptr))
            if (ptr & ~3) != expected:      # the 2 low bits are reserved
                return self._fail(marker_error(m, ptr, lay.length_offset, expected))
        # strip the markers: the rest is length field, ULPDU, pad
        parts, pos = [], start
        for m, _ in lay.markers:
            parts.append(raw[pos - start:m - start])
            pos = m + MARKER_LEN
        parts.append(raw[pos - start:crc_at])
        content = b"".join(parts)
        ulpdu = content[LENGTH_FIELD_LEN:LENGTH_FIELD_LEN + lay.ulpdu_length]
        record = FpduRecord(offset=start, length=lay.length, ulpdu_length=lay.ulpdu_length,
                            crc="ok" if self._crc else "unchecked",
                            markers=received, ulpdu=ulpdu)
        self._start_fpdu(lay.end)
        return record

    def close(self):
        """The stream ended (FIN or loss).

        Returns
        -------
        FpduError or None
            ``ErrorInfo.mpa(MpaError.TCP_CLOSED, ...)`` if the stream ends
            inside an FPDU (also stored in :attr:`error`); None at an FPDU
            boundary or if an error was already reported.
        """
        if self._closed:
            return None
        self._closed = True
        if self.error is not None or not self._raw:
            return None
        whole = self._layout.length if self._layout is not None else None
        return self._fail(truncated_error(len(self._raw), whole, self._start))
