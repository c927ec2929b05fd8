"""MPA Request, Reply and Reject frames (RFC 5044 section 7.1, RFC 6581).

Wire format (all multi-octet fields in network order)::

    0..15   Key: "MPA ID Req Frame" (Request) or "MPA ID Rep Frame" (Reply)
    16      flags: M 0x80, C 0x40, R 0x20, S 0x10, low 4 bits reserved
    17      Rev: 1, or 2 for RFC 6581 enhanced connection establishment
    18..19  PD_Length: octets of private data, at most 512
    20..    private data

With Rev 2 and S set, the private data begins with the 4-octet enhanced RDMA
connection establishment data of RFC 6581 section 9::

    A B IRD(14) C D ORD(14)

A: peer-to-peer connection model; B: zero-length FULPDU (Send) RTR
indication; C: zero-length RDMA Write RTR; D: zero-length RDMA Read RTR.
IRD/ORD 0x3FFF (:data:`IRD_ORD_ULP`) means "no automatic negotiation, the ULP
handles it". If A is 0, B, C and D must be sent as 0 and are ignored on
reception (RFC 6581 section 9.2). PD_Length counts those 4 octets; the
``private_data`` of :class:`MpaFrame` is only the ULP part that follows.

R set in a Reply is a Reject. :func:`parse` and :class:`FrameReader` report
every malformed frame as ``ProtocolError(ErrorInfo.mpa(MpaError.BAD_FRAME,
text))``.

Strictness: RFC 5044 says the reserved bits (and, in a Request, R) are sent as
zero and not checked on reception (RFC 6581 section 6 repeats this for Res).
By default (``strict=True``) this model rejects them, as the project asks;
``strict=False`` gives the RFC's tolerant behaviour (the bits are ignored).
"""

import struct
from dataclasses import dataclass, fields

from rnic.host.spec.errors import ErrorInfo, MpaError, ProtocolError

__all__ = [
    "REQUEST_KEY", "REPLY_KEY", "KEY_LEN", "HEADER_LEN", "MAX_PD_LENGTH",
    "ENHANCED_LEN", "IRD_ORD_MAX", "IRD_ORD_ULP",
    "FLAG_M", "FLAG_C", "FLAG_R", "FLAG_S", "FLAGS_RESERVED",
    "MpaFrame", "build", "parse", "FrameReader",
]

#: Key of an MPA Request Frame.
REQUEST_KEY = b"MPA ID Req Frame"
#: Key of an MPA Reply Frame (also of a Reject, which is a Reply with R set).
REPLY_KEY = b"MPA ID Rep Frame"
#: Octets in the key.
KEY_LEN = 16
#: Octets before the private data: key, flags, Rev, PD_Length.
HEADER_LEN = 20
#: Largest PD_Length (RFC 5044, RFC 6581 section 7).
MAX_PD_LENGTH = 512
#: Octets of RFC 6581 enhanced connection data at the start of the private data.
ENHANCED_LEN = 4
#: Largest IRD or ORD (14 bits).
IRD_ORD_MAX = 0x3FFF
#: IRD/ORD value meaning "automatic negotiation not desired; left to the ULP".
IRD_ORD_ULP = 0x3FFF

FLAG_M = 0x80
FLAG_C = 0x40
FLAG_R = 0x20
FLAG_S = 0x10
FLAGS_RESERVED = 0x0F

_KINDS = ("request", "reply")
_KEYS = {"request": REQUEST_KEY, "reply": REPLY_KEY}
_BOOL_FIELDS = ("markers", "crc", "reject", "enhanced", "p2p",
                "rtr_send", "rtr_write", "rtr_read")


def _bad(text):
    return ProtocolError(ErrorInfo.mpa(MpaError.BAD_FRAME, text))


@dataclass(frozen=True, kw_only=True)
class MpaFrame:
    """One MPA Request or Reply (a Reply with ``reject`` set is a Reject).

    Parameters
    ----------
    kind : {"request", "reply"}
        Which key the frame carries.
    markers, crc, reject : bool
        The M, C and R flags. ``reject`` is only allowed in a Reply.
    enhanced : bool
        The S flag (RFC 6581): the private data starts with IRD/ORD and the
        A/B/C/D control flags. Requires ``rev >= 2``.
    rev : int
        MPA revision, 1 or 2.
    ird, ord : int
        Inbound / outbound RDMA Read queue depth, 0..0x3FFF
        (:data:`IRD_ORD_ULP` = left to the ULP). Only with ``enhanced``.
    p2p : bool
        Control flag A: peer-to-peer connection model. Only with ``enhanced``.
    rtr_send, rtr_write, rtr_read : bool
        Control flags B, C, D: zero-length Send / RDMA Write / RDMA Read RTR
        indication requested (Request) or supported (Reply). Only with ``p2p``.
    private_data : bytes
        The ULP private data (after the 4 enhanced octets when present);
        PD_Length = ``len(private_data)`` (+ 4 if enhanced) <= 512.
    """

    kind: str
    markers: bool = False
    crc: bool = False
    reject: bool = False
    enhanced: bool = False
    rev: int = 1
    ird: int = 0
    ord: int = 0
    p2p: bool = False
    rtr_send: bool = False
    rtr_write: bool = False
    rtr_read: bool = False
    private_data: bytes = b""

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be 'request' or 'reply', not {self.kind!r}")
        for name in _BOOL_FIELDS:
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, not "
                                f"{type(getattr(self, name)).__name__}")
        for name in ("rev", "ird", "ord"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name} must be an int, not {type(v).__name__}")
        if not isinstance(self.private_data, (bytes, bytearray, memoryview)):
            raise TypeError("private_data must be bytes, not "
                            f"{type(self.private_data).__name__}")
        object.__setattr__(self, "private_data", bytes(self.private_data))
        if self.rev not in (1, 2):
            raise ValueError(f"rev must be 1 or 2, not {self.rev}")
        if self.reject and self.kind == "request":
            raise ValueError("reject (R) is only allowed in a Reply")
        if self.enhanced and self.rev < 2:
            raise ValueError("enhanced (S) requires rev 2 (RFC 6581 section 6)")
        for name in ("ird", "ord"):
            v = getattr(self, name)
            if not 0 <= v <= IRD_ORD_MAX:
                raise ValueError(f"{name} {v} does not fit 14 bits (0..{IRD_ORD_MAX:#x})")
        if not self.enhanced:
            extra = [n for n in ("ird", "ord") if getattr(self, n)]
            extra += [n for n in ("p2p", "rtr_send", "rtr_write", "rtr_read")
                      if getattr(self, n)]
            if extra:
                raise ValueError(f"{', '.join(extra)} need enhanced=True "
                                 "(they travel in the RFC 6581 enhanced data)")
        if not self.p2p and (self.rtr_send or self.rtr_write or self.rtr_read):
            raise ValueError("rtr_send/rtr_write/rtr_read (B/C/D) need p2p (A) "
                             "(RFC 6581 section 9.2)")
        if self.pd_length > MAX_PD_LENGTH:
            raise ValueError(f"PD_Length {self.pd_length} exceeds {MAX_PD_LENGTH}"
                             + (" (4 of them are the enhanced data)" if self.enhanced else ""))

    @property
    def key(self):
        """The 16-octet key of this frame."""
        return _KEYS[self.kind]

    @property
    def pd_length(self):
        """PD_Length on the wire: the private data plus the enhanced octets."""
        return len(self.private_data) + (ENHANCED_LEN if self.enhanced else 0)

    @property
    def flags(self):
        """The flags octet (M C R S, reserved bits zero)."""
        return ((FLAG_M if self.markers else 0) | (FLAG_C if self.crc else 0)
                | (FLAG_R if self.reject else 0) | (FLAG_S if self.enhanced else 0))

    def replace(self, **changes):
        """A copy with some fields changed (validated like the constructor)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        unknown = set(changes) - set(values)
        if unknown:
            raise TypeError(f"unknown MpaFrame fields: {', '.join(sorted(unknown))}")
        values.update(changes)
        return MpaFrame(**values)


def _enhanced_word(frame):
    return ((frame.p2p << 31) | (frame.rtr_send << 30) | (frame.ird << 16)
            | (frame.rtr_write << 15) | (frame.rtr_read << 14) | frame.ord)


def build(frame):
    """The wire octets of ``frame`` (an :class:`MpaFrame`)."""
    if not isinstance(frame, MpaFrame):
        raise TypeError(f"build() needs an MpaFrame, not {type(frame).__name__}")
    out = bytearray(frame.key)
    out += struct.pack(">BBH", frame.flags, frame.rev, frame.pd_length)
    if frame.enhanced:
        out += struct.pack(">I", _enhanced_word(frame))
    out += frame.private_data
    return bytes(out)


def _check_expect(expect):
    if expect is not None and expect not in _KINDS:
        raise ValueError(f"expect must be 'request', 'reply' or None, not {expect!r}")


def _check_bool(name, v):
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be a bool, not {type(v).__name__}")


def _check_key_prefix(buf, expect):
    """Raise if the first ``len(buf)`` (<= 16) octets cannot start a valid key."""
    n = min(len(buf), KEY_LEN)
    got = bytes(buf[:n])
    if expect is not None:
        want = _KEYS[expect]
        if got != want[:n]:
            other = "reply" if expect == "request" else "request"
            if n == KEY_LEN and got == _KEYS[other]:
                raise _bad(f"expected an MPA {expect.capitalize()} key {want.decode()!r}, "
                           f"got the {other.capitalize()} key {got.decode()!r}")
            raise _bad(f"bad key: expected {want.decode()!r}, got {got!r}"
                       + ("" if n == KEY_LEN else " (first octets)"))
    elif got != REQUEST_KEY[:n] and got != REPLY_KEY[:n]:
        raise _bad(f"bad key {got!r}" + ("" if n == KEY_LEN else " (first octets)")
                   + f": neither {REQUEST_KEY.decode()!r} nor {REPLY_KEY.decode()!r}")


def _parse_header(buf, expect, strict):
    """Check the 20-octet header; return (kind, flags, rev, pd_length)."""
    _check_key_prefix(buf, expect)
    kind = "request" if bytes(buf[:KEY_LEN]) == REQUEST_KEY else "reply"
    flags, rev, pd_length = struct.unpack_from(">BBH", buf, KEY_LEN)
    if strict and flags & FLAGS_RESERVED:
        raise _bad(f"reserved flag bits set (flags octet {flags:#04x}, "
                   f"reserved mask {FLAGS_RESERVED:#04x})")
    if rev not in (1, 2):
        raise _bad(f"unknown MPA revision {rev} (supported: 1, 2)")
    if flags & FLAG_S and rev < 2:
        raise _bad("S (enhanced) set with Rev 1; RFC 6581 requires Rev 2")
    if strict and kind == "request" and flags & FLAG_R:
        raise _bad("R (reject) set in an MPA Request")
    if pd_length > MAX_PD_LENGTH:
        raise _bad(f"PD_Length {pd_length} exceeds {MAX_PD_LENGTH}")
    if flags & FLAG_S and pd_length < ENHANCED_LEN:
        raise _bad(f"S (enhanced) set but PD_Length {pd_length} is shorter than "
                   f"the {ENHANCED_LEN}-octet enhanced connection data")
    return kind, flags, rev, pd_length


def _frame_from(kind, flags, rev, pd):
    enhanced = bool(flags & FLAG_S)
    kw = {}
    if enhanced:
        (word,) = struct.unpack_from(">I", pd, 0)
        p2p = bool(word >> 31 & 1)
        kw = dict(p2p=p2p, ird=word >> 16 & IRD_ORD_MAX, ord=word & IRD_ORD_MAX)
        if p2p:  # with A = 0, B/C/D "MUST be ignored" (RFC 6581 section 9.2)
            kw.update(rtr_send=bool(word >> 30 & 1), rtr_write=bool(word >> 15 & 1),
                      rtr_read=bool(word >> 14 & 1))
        pd = pd[ENHANCED_LEN:]
    return MpaFrame(kind=kind, markers=bool(flags & FLAG_M), crc=bool(flags & FLAG_C),
                    reject=kind == "reply" and bool(flags & FLAG_R),
                    enhanced=enhanced, rev=rev, private_data=bytes(pd), **kw)


def parse(data, *, expect=None, strict=True):
    """Parse exactly one MPA Request/Reply frame.

    Parameters
    ----------
    data : bytes-like
        The whole frame and nothing else (use :class:`FrameReader` on a
        stream, where FPDUs may follow the frame).
    expect : {"request", "reply", None}
        The key the caller expects; None accepts either.
    strict : bool
        Reject reserved flag bits and R in a Request (default); False ignores
        them as RFC 5044 specifies.

    Returns
    -------
    MpaFrame

    Raises
    ------
    ProtocolError
        ``ErrorInfo.mpa(MpaError.BAD_FRAME, ...)`` for any malformed frame.
    """
    _check_expect(expect)
    _check_bool("strict", strict)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    data = bytes(data)
    if len(data) < HEADER_LEN:
        # check what is there first: a wrong key says more than "short"
        _check_key_prefix(data, expect)
        raise _bad(f"short frame: {len(data)} octets, the header alone is {HEADER_LEN}")
    kind, flags, rev, pd_length = _parse_header(data, expect, strict)
    total = HEADER_LEN + pd_length
    if len(data) < total:
        raise _bad(f"short frame: {len(data)} octets, but PD_Length {pd_length} "
                   f"needs {total}")
    if len(data) > total:
        raise _bad(f"{len(data) - total} octets follow the {total}-octet frame")
    return _frame_from(kind, flags, rev, data[HEADER_LEN:])


class FrameReader:
    """Collect one MPA Request/Reply from a TCP byte stream.

    On a socket, the frame and the first FPDUs of the peer may arrive in one
    read, so :meth:`feed` hands back the octets that follow the frame.

    Parameters
    ----------
    expect : {"request", "reply"}
        The frame this side waits for (a responder expects a Request).
    strict : bool
        As for :func:`parse`.
    """

    def __init__(self, *, expect, strict=True):
        if expect not in _KINDS:
            raise ValueError(f"expect must be 'request' or 'reply', not {expect!r}")
        _check_bool("strict", strict)
        self._expect = expect
        self._strict = strict
        self._buf = bytearray()
        self._total = None          # HEADER_LEN + PD_Length once the header is in
        self.frame = None
        """The frame once complete, else None."""
        self.error = None
        """The :class:`ProtocolError` raised, if any."""
        self._closed = False

    @property
    def done(self):
        """True once the whole frame has been read."""
        return self.frame is not None

    @property
    def failed(self):
        """True once a malformed frame was seen (or the stream closed early)."""
        return self.error is not None

    def feed(self, data):
        """Take more stream octets.

        Returns
        -------
        (MpaFrame | None, bytes)
            ``(None, b"")`` while the frame is incomplete; once it completes,
            the frame and the octets of ``data`` that follow it (FPDUs).

        Raises
        ------
        ProtocolError
            As soon as the octets read prove the frame malformed (bad key
            octets, bad header); later calls raise the same error again.
        RuntimeError
            If called after the frame is complete or after :meth:`close`.
        """
        if self.error is not None:
            raise self.error
        if self.frame is not None or self._closed:
            raise RuntimeError("FrameReader.feed() after the frame is complete or closed")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        data = bytes(data)
        try:
            return self._feed(data)
        except ProtocolError as e:
            self.error = e
            raise

    def _feed(self, data):
        if self._total is None:
            take = HEADER_LEN - len(self._buf)
            self._buf += data[:take]
            data = data[take:]
            if len(self._buf) < HEADER_LEN:
                _check_key_prefix(self._buf, self._expect)
                return None, b""
            _, _, _, pd_length = _parse_header(self._buf, self._expect, self._strict)
            self._total = HEADER_LEN + pd_length
        take = self._total - len(self._buf)
        self._buf += data[:take]
        rest = data[take:]
        if len(self._buf) < self._total:
            return None, b""
        self.frame = parse(self._buf, expect=self._expect, strict=self._strict)
        self._buf = bytearray()
        return self.frame, rest

    def close(self):
        """The stream ended: the error if the frame is incomplete, else None.

        Returns ``ErrorInfo.mpa(MpaError.TCP_CLOSED, ...)`` when the stream ends
        before the frame is complete (and records it in :attr:`error`);
        None if the frame was complete or an error was already reported.
        """
        if self._closed or self.error is not None or self.frame is not None:
            self._closed = True
            return None
        self._closed = True
        info = ErrorInfo.mpa(MpaError.TCP_CLOSED,
                             f"stream ends after {len(self._buf)} octets of the MPA "
                             f"{self._expect.capitalize()} frame")
        self.error = ProtocolError(info)
        return info
