"""MPA connection manager: RFC 5044 Request/Reply and RFC 6581 enhanced setup over TCP.

:func:`connect` (initiator) and :func:`accept` (responder) run the MPA
startup exchange on a connected stream socket (blocking, with a deadline) and
return a :class:`Negotiated`: what was agreed, the exact frames and octet
counts, the octets already read after the peer's frame, and a ready
:class:`~rnic.host.model.fpdu.FpduEncoder` / :class:`~rnic.host.model.fpdu.FpduDecoder` pair for
the FPDU streams that follow. Failures raise :class:`MpaSetupError` carrying
the MPA error (layer 2 "LLP", error type 0) and, where there is one, the
frame the peer sent.

Negotiation (who decides what)
------------------------------
* Markers, per direction (RFC 5044 section 7.1.1, "M"): M in the Request =
  the responder must send markers; M in the Reply = the initiator must.
  ``ConnParams.markers`` is "I want markers in what I receive".
* CRC (RFC 5044 section 7.1.1, "C"): C in either frame -> both directions
  generate and check CRCs. The responder's Reply carries the resulting value
  (C of the Request or'ed with its own wish), as Linux siw does.
* Revision: the responder answers ``min(Request Rev, its own Rev)``; the
  Reply is enhanced (S, IRD/ORD) only if the Request was and the responder
  runs Rev 2. A Rev 1 Reply to a Rev 2 Request is accepted by the initiator:
  the connection is then unenhanced and IRD/ORD are left to the ULP
  (``Negotiated.ird``/``ord`` are None). A Reply with a higher Rev than the
  Request, or with S set to an unenhanced Request, is an invalid Reply
  (MPA error 4; RFC 6581 section 10: unenhanced Requests get unenhanced
  Replies).
* IRD/ORD (RFC 6581 section 9.1), with ``ConnParams.ird`` the IRD this side
  offers, ``ird_max`` how far it may raise it, ``ord`` the ORD it wants and
  ``ord_min`` the lowest ORD its ULP can live with:

  - responder IRD = its IRD if that covers the initiator ORD, else raised
    towards the initiator ORD up to ``ird_max`` ("the responder IRD MAY be
    increased"); an initiator ORD of 0x3FFF is answered with IRD 0x3FFF and
    the local IRD left unchanged;
  - responder ORD = min(its ORD, initiator IRD) ("MUST set its ORD at most
    to the initiator IRD"); an initiator IRD of 0x3FFF is answered with ORD
    0x3FFF and the local ORD left unchanged; if that is below ``ord_min`` the
    responder rejects (R=1) with the required ORD in the Reject's ORD field
    and reports MPA error 6 ("MAY reject ... specify the required ORD");
  - initiator ORD = min(its ORD, responder IRD); below ``ord_min`` (the
    responder could not raise its IRD and the initiator cannot lower its ORD)
    -> Terminate 2/0/6 and close;
  - initiator IRD = its IRD, raised to the responder ORD up to ``ird_max``;
    if it cannot -> Terminate 2/0/6 and close ("MUST send a TERM message
    ... Error Code 6");
  - a responder IRD / ORD of 0x3FFF leaves the initiator's ORD / IRD
    unchanged.

* Peer-to-peer and RTR (RFC 6581 section 9.2): the initiator sets A and one
  of B/C/D per RTR type in ``ConnParams.rtr``. The responder mirrors A (it
  MUST) and sets exactly one flag: the first of :data:`RTR_PREFERENCE`
  ("write", "read", "send") that both support. If none matches it sets every
  type it supports ("MUST set at least one RTR indication type option it
  supports"); the initiator then finds no common type and sends Terminate
  2/0/7 ("MUST send a TERM message ... Error Code 7") and closes. The
  initiator accepts a Reply with several flags and picks by the same
  preference ("at the initiator's sole discretion", section 1.1). A Reply
  that does not mirror A (or an unenhanced Reply to a peer-to-peer Request)
  is a "failure to negotiate a mutually compatible connection model": 2/0/7.
  A zero-length RDMA Read RTR needs a responder IRD of at least 1, so the
  responder raises a 0 IRD to 1 when it picks "read" (section 9.1 example)
  and the initiator does not pick "read" against a responder IRD of 0.

RTR and fence
-------------
With A set, :func:`connect` sends the RTR FPDU (framed with the negotiated
markers/CRC) before it returns: a zero-length Send (QN 0, MSN 1), a
zero-length RDMA Write to ``ConnParams.rtr_stag`` (non-zero by default,
some peers reject STag 0), or an RDMA Read Request of size 0 (QN 1, MSN 1,
sink and source STag ``rtr_stag``, TO 0). The responder sends no FPDU before
it received the initiator's first FPDU (RFC 5044 section 7.1.2, RFC 6581
section 3 "MPA Fencing"): :meth:`Negotiated.send_ulpdu` refuses until
:meth:`Negotiated.wait_first_fpdu` has read that FPDU. With A set the first
FPDU must be the negotiated RTR (an unexpected message -> Terminate 2/0/7);
a zero-length Read RTR is answered with a zero-length RDMA Read Response
(RFC 5040: every Read Request gets its Response).

Failures (``MpaSetupError.info.ecode``)
---------------------------------------
1  TCP closed, reset or the deadline passed while waiting for a frame (or
   for the first FPDU): close (RFC 5044 section 8, code 1 includes "lost by
   timeout").
4  invalid Request/Reply (bad key, a Reply key in place of a Request, bad
   Rev, PD_Length > 512, S with PD_Length < 4, ...): close the connection
   without answering (RFC 5044 section 7.1.1: "close the connection and
   report an error locally"). No FPDU mode exists yet, so no Terminate.
5  local catastrophic: an unexpected local failure; after FPDU mode is on
   a Terminate 2/0/5 is sent before the reset (RFC 6581 section 9.3).
6  insufficient IRD, 7 no matching RTR: see above; Terminate when FPDU mode
   is on (RFC 6581 sections 9.1, 9.2), a Reject frame otherwise.
A Reject (R=1) from the responder raises :class:`MpaRejected` with the
peer's private data; its code is 6 when the enhanced Reject asks for an ORD
above the IRD we offered (RFC 6581 section 9.1), else 1 (the responder closes
the connection after a Reject, RFC 5044 section 7.1.2).

Errors found after FPDU mode is on (everything after the Reply on both
sides) are reported with a Terminate (RDMAP opcode 7, QN 2, layer 2, error
type 0, no M/D/R) followed by a close; errors before it only close.

Leniency: RFC 5044 says reserved flag bits are not checked on reception, so
``ConnParams.strict`` defaults to False here (``rnic.host.model.mpa_frames.parse``
defaults to strict). Octets that arrive after the peer's frame (RFC 5044
forbids FPDUs before the Reply / the initiator's first FPDU, but a receiver
must not lose them) are kept in ``Negotiated.leftover`` and decoded first.
"""

import socket
import time
from collections import deque
from dataclasses import dataclass

from rnic.host.model import ddp, rdmap, segment
from rnic.host.spec.errors import ErrorInfo, MpaError, ProtocolError
from rnic.host.model.fpdu import FpduDecoder, FpduEncoder, FpduError, FpduRecord, MIN_MULPDU, \
    mulpdu as _mulpdu
from rnic.host.model.mpa_frames import (ENHANCED_LEN, HEADER_LEN, IRD_ORD_MAX, IRD_ORD_ULP, MAX_PD_LENGTH,
    FrameReader, MpaFrame, build as build_frame)
from rnic.host.model.rdmap import Opcode, ReadRequest, Terminate

__all__ = [
    "RTR_TYPES", "RTR_PREFERENCE", "DEFAULT_EMSS",
    "ConnParams", "Negotiated", "MpaSetupError", "MpaRejected",
    "connect", "accept", "request_frame", "fpdu_octets", "zero_crc_terminate", "terminate_of",
]

#: RTR indication types of RFC 6581 section 9.2 (flags B, C, D).
RTR_TYPES = frozenset({"send", "write", "read"})
#: Order in which a responder picks, and an initiator chooses among several
#: offered, RTR types: a zero-length Write needs no receive buffer and no
#: answer (Linux siw prefers it too), a Read needs an IRD slot and a
#: Response, a Send consumes a posted receive.
RTR_PREFERENCE = ("write", "read", "send")
#: EMSS used when the socket does not tell (not TCP, or getsockopt fails).
DEFAULT_EMSS = 1460
_RECV_CHUNK = 65536


# -- parameters ----------------------------------------------------------------

def _check_int(name, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, not {v}")


@dataclass(frozen=True, kw_only=True)
class ConnParams:
    """What this side asks for (initiator) or accepts (responder).

    Parameters
    ----------
    rev : {1, 2}
        MPA revision; 2 sends the RFC 6581 enhanced data (S, IRD/ORD, A-D).
    markers : bool
        Markers wanted in what this side receives (the M flag it sends).
    crc : bool
        CRC wanted (C); C in either frame turns CRCs on both ways.
    ird, ord : int
        IRD offered / ORD wanted, 0..0x3FFF (0x3FFF: left to the ULP).
    ird_max : int or None
        Highest IRD this side may raise to during negotiation (None: ``ird``,
        i.e. it cannot raise it).
    ord_min : int
        Lowest ORD the ULP accepts (0: any). The negotiated ORD below it is
        MPA error 6.
    p2p : bool
        Initiator: ask for the peer-to-peer model (needs rev 2). A responder
        follows the Request's A flag whatever this says (RFC 6581 9.2).
    rtr : iterable of {"send", "write", "read"}
        RTR types proposed (initiator) or supported (responder).
    private_data : bytes
        ULP private data, at most 512 octets (508 with rev 2: the enhanced
        data counts, RFC 6581 section 7). A responder's Reject carries it too.
    timeout : float
        Seconds allowed for the whole frame exchange, and the default for
        waiting on the first FPDU.
    strict : bool
        Reject reserved flag bits (and R in a Request); False (default)
        ignores them as RFC 5044 specifies.
    rtr_stag : int
        STag of the zero-length RDMA Write RTR and of both STags of the Read
        RTR; non-zero (1..0xFFFFFFFF) because some peers reject STag 0.
    first_fpdu_delay : float
        Initiator only: seconds between reading the Reply and sending the
        first FPDU (RTR or the first :meth:`Negotiated.send_ulpdu`). Linux
        siw 6.1 sometimes ignores an FPDU that arrives right after its Reply
        (see tools/siw-vm/README.md, "Known limits"); 0.1 avoids that.
    emss : int or None
        EMSS for MULPDU; None reads TCP_MAXSEG from the socket.
    """

    rev: int = 2
    markers: bool = False
    crc: bool = True
    ird: int = 4
    ord: int = 4
    ird_max: int | None = None
    ord_min: int = 0
    p2p: bool = False
    rtr: frozenset = RTR_TYPES
    private_data: bytes = b""
    timeout: float = 5.0
    strict: bool = False
    rtr_stag: int = 1
    first_fpdu_delay: float = 0.0
    emss: int | None = None

    def __post_init__(self):
        for name in ("markers", "crc", "p2p", "strict"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool")
        if self.rev not in (1, 2) or isinstance(self.rev, bool):
            raise ValueError(f"rev must be 1 or 2, not {self.rev!r}")
        _check_int("ird", self.ird, 0, IRD_ORD_MAX)
        _check_int("ord", self.ord, 0, IRD_ORD_MAX)
        if self.ird_max is None:
            object.__setattr__(self, "ird_max", self.ird)
        _check_int("ird_max", self.ird_max, self.ird, IRD_ORD_MAX)
        _check_int("ord_min", self.ord_min, 0, IRD_ORD_MAX)
        if self.ord != IRD_ORD_ULP and self.ord_min > self.ord:
            raise ValueError(f"ord_min {self.ord_min} exceeds ord {self.ord}")
        if isinstance(self.rtr, str):
            raise TypeError("rtr must be a collection of RTR type names, not a string")
        rtr = frozenset(self.rtr)
        if rtr - RTR_TYPES:
            raise ValueError(f"unknown RTR types {sorted(rtr - RTR_TYPES)}; known: "
                             f"{sorted(RTR_TYPES)}")
        object.__setattr__(self, "rtr", rtr)
        if self.p2p and self.rev < 2:
            raise ValueError("p2p needs rev 2 (RFC 6581 enhanced connection setup)")
        if self.rev == 2 and not rtr:
            raise ValueError("an enhanced (rev 2) endpoint must support at least one "
                             "RTR type (RFC 6581 section 9.2)")
        if not isinstance(self.private_data, (bytes, bytearray, memoryview)):
            raise TypeError("private_data must be bytes")
        object.__setattr__(self, "private_data", bytes(self.private_data))
        limit = MAX_PD_LENGTH - (ENHANCED_LEN if self.rev == 2 else 0)
        if len(self.private_data) > limit:
            raise ValueError(f"private_data of {len(self.private_data)} octets exceeds "
                             f"{limit} (PD_Length <= {MAX_PD_LENGTH}"
                             + (", 4 of them the enhanced data)" if self.rev == 2 else ")"))
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) \
                or self.timeout <= 0:
            raise ValueError(f"timeout must be a positive number, not {self.timeout!r}")
        _check_int("rtr_stag", self.rtr_stag, 1, 0xFFFFFFFF)
        if isinstance(self.first_fpdu_delay, bool) or self.first_fpdu_delay < 0:
            raise ValueError("first_fpdu_delay must be >= 0")
        if self.emss is not None:
            _check_int("emss", self.emss, 1, 0xFFFF)


# -- errors ----------------------------------------------------------------------

class MpaSetupError(ProtocolError):
    """MPA connection setup failed.

    Attributes
    ----------
    info : ErrorInfo
        Layer 2 (LLP), error type 0, code 1 (closed/timeout), 4 (invalid
        frame), 5 (local catastrophic), 6 (insufficient IRD), 7 (no matching
        RTR) -- or, when the peer sent a Terminate, what that Terminate says.
    frame : MpaFrame or None
        The peer's frame, when one was received intact.
    terminate : Terminate or None
        The Terminate the peer sent, if that is what failed the setup.
    term_sent : Terminate or None
        The Terminate this side sent before closing, if any.
    """

    def __init__(self, info, frame=None, *, terminate=None, term_sent=None):
        super().__init__(info)
        self.frame = frame
        self.terminate = terminate
        self.term_sent = term_sent

    @property
    def code(self):
        """The error code (``info.ecode``)."""
        return self.info.ecode


class MpaRejected(MpaSetupError):
    """The responder answered with a Reject (R=1); ``frame`` is that Reject."""

    @property
    def peer_private_data(self):
        """The ULP private data of the Reject."""
        return self.frame.private_data


class _Fail(Exception):
    """Internal: a setup failure; ``term`` says whether a Terminate is due."""

    def __init__(self, info, term=False):
        super().__init__(info.text)
        self.info = info
        self.term = term


def _mpa(code, text):
    return ErrorInfo.mpa(code, text)


# -- frames and negotiation (pure functions) ----------------------------------

def _rtr_flags(types):
    return dict(rtr_send="send" in types, rtr_write="write" in types,
                rtr_read="read" in types)


def _rtr_set(frame):
    return frozenset(n for n, on in (("send", frame.rtr_send), ("write", frame.rtr_write),
                                     ("read", frame.rtr_read)) if on)


def _pick(types):
    for t in RTR_PREFERENCE:
        if t in types:
            return t
    return None


def request_frame(params):
    """The MPA Request an initiator with ``params`` sends."""
    kw = {}
    if params.rev == 2:
        kw = dict(enhanced=True, ird=params.ird, ord=params.ord, p2p=params.p2p)
        if params.p2p:
            kw.update(_rtr_flags(params.rtr))
    return MpaFrame(kind="request", markers=params.markers, crc=params.crc, rev=params.rev,
                    private_data=params.private_data, **kw)


@dataclass
class _Terms:
    rev: int
    enhanced: bool
    markers_tx: bool
    markers_rx: bool
    crc: bool
    ird: int | None = None
    ord: int | None = None
    peer_ird: int | None = None
    peer_ord: int | None = None
    p2p: bool = False
    rtr: str | None = None
    rtr_offered: frozenset = frozenset()


class _RejectNeeded(Exception):
    def __init__(self, info, frame):
        super().__init__(info.text)
        self.info = info
        self.frame = frame


def _reply_for(request, params):
    """Responder decision for ``request``: ``(reply frame, terms)``.

    Raises ``_RejectNeeded`` (internal) when the initiator IRD cannot cover
    the ORD the responder's ULP requires (RFC 6581 section 9.1).
    """
    p = params
    rev = min(request.rev, p.rev)
    enhanced = request.enhanced and p.rev >= 2
    crc = request.crc or p.crc
    terms = _Terms(rev=rev, enhanced=enhanced, markers_tx=request.markers,
                   markers_rx=p.markers, crc=crc)
    base = dict(kind="reply", markers=p.markers, crc=crc, rev=rev,
                private_data=p.private_data)
    if not enhanced:
        return MpaFrame(**base), terms
    # RFC 6581 9.2: mirror A; pick one common RTR type, or offer all ours.
    p2p = request.p2p
    rtr, offered = None, frozenset()
    if p2p:
        common = _rtr_set(request) & p.rtr
        if common:
            rtr = _pick(common)
            offered = frozenset({rtr})
        else:
            offered = p.rtr
    # RFC 6581 9.1, responder IRD against the initiator ORD.
    if request.ord == IRD_ORD_ULP:
        local_ird, reply_ird = p.ird, IRD_ORD_ULP
    elif p.ird == IRD_ORD_ULP:
        local_ird = reply_ird = IRD_ORD_ULP
    else:
        # A zero-length Read RTR takes one IRD slot: raise 0 to 1 (9.1 example).
        floor = 1 if rtr == "read" else 0
        need = max(request.ord, floor)
        local_ird = p.ird if p.ird >= need else min(need, max(p.ird_max, floor))
        reply_ird = local_ird
    # RFC 6581 9.1, responder ORD against the initiator IRD.
    enh = dict(enhanced=True, ird=reply_ird, p2p=p2p, **_rtr_flags(offered))
    if request.ird == IRD_ORD_ULP:
        local_ord, reply_ord = p.ord, IRD_ORD_ULP
    elif p.ord == IRD_ORD_ULP:
        local_ord = reply_ord = IRD_ORD_ULP
    else:
        local_ord = min(p.ord, request.ird)
        if local_ord < p.ord_min:
            info = _mpa(MpaError.INSUFFICIENT_IRD,
                        f"initiator IRD {request.ird} is below the ORD {p.ord_min} this "
                        "responder's ULP requires; rejected with that ORD "
                        "(RFC 6581 section 9.1)")
            raise _RejectNeeded(info, MpaFrame(**base, reject=True, ord=p.ord_min, **enh))
        reply_ord = local_ord
    terms.ird, terms.ord = local_ird, local_ord
    terms.peer_ird, terms.peer_ord = request.ird, request.ord
    terms.p2p, terms.rtr, terms.rtr_offered = p2p, rtr, offered
    return MpaFrame(**base, ord=reply_ord, **enh), terms


def _framing_from_reply(request, reply):
    """(markers_tx, markers_rx, crc) of the initiator."""
    return reply.markers, request.markers, request.crc or reply.crc


def _evaluate_reply(request, reply, params):
    """Initiator: check an accepting ``reply`` to ``request``; return the terms.

    Raises ``_Fail`` (internal) with MPA error 4, 6 or 7.
    """
    p = params
    if reply.rev > request.rev:
        raise _Fail(_mpa(MpaError.BAD_FRAME,
                         f"Reply Rev {reply.rev} is above the Request's Rev {request.rev}"))
    if reply.enhanced and not request.enhanced:
        raise _Fail(_mpa(MpaError.BAD_FRAME, "enhanced (S) Reply to an unenhanced Request "
                         "(RFC 6581 section 10)"))
    mtx, mrx, crc = _framing_from_reply(request, reply)
    terms = _Terms(rev=reply.rev, enhanced=reply.enhanced, markers_tx=mtx, markers_rx=mrx,
                   crc=crc)
    if not reply.enhanced:
        if request.p2p:
            raise _Fail(_mpa(MpaError.NO_MATCHING_RTR,
                             "peer-to-peer requested but the Reply is unenhanced: no "
                             "mutually compatible connection model (RFC 6581 section 9.2)"),
                        term=True)
        return terms
    # RFC 6581 9.1: initiator ORD at most the responder IRD ...
    if reply.ird == IRD_ORD_ULP or p.ord == IRD_ORD_ULP:
        ord_ = p.ord
    else:
        ord_ = min(p.ord, reply.ird)
        if ord_ < p.ord_min:
            raise _Fail(_mpa(MpaError.INSUFFICIENT_IRD,
                             f"responder IRD {reply.ird} is below the ORD {p.ord_min} "
                             "this ULP requires (RFC 6581 section 9.1)"), term=True)
    # ... and its IRD at least the responder ORD.
    if reply.ord == IRD_ORD_ULP or p.ird == IRD_ORD_ULP or reply.ord <= p.ird:
        ird = p.ird
    elif reply.ord <= p.ird_max:
        ird = reply.ord
    else:
        raise _Fail(_mpa(MpaError.INSUFFICIENT_IRD,
                         f"responder ORD {reply.ord} exceeds the IRD this side can "
                         f"provide ({p.ird_max}) (RFC 6581 section 9.1)"), term=True)
    terms.ird, terms.ord = ird, ord_
    terms.peer_ird, terms.peer_ord = reply.ird, reply.ord
    if request.p2p != reply.p2p:
        raise _Fail(_mpa(MpaError.NO_MATCHING_RTR,
                         f"Request A={int(request.p2p)} but Reply A={int(reply.p2p)}: no "
                         "mutually compatible connection model (RFC 6581 section 9.2)"),
                    term=True)
    if request.p2p:
        offered = _rtr_set(reply)
        common = _rtr_set(request) & offered
        if reply.ird == 0:
            common -= {"read"}          # a Read RTR needs an IRD slot at the responder
        if not common:
            raise _Fail(_mpa(MpaError.NO_MATCHING_RTR,
                             f"proposed RTR {sorted(_rtr_set(request))}, responder "
                             f"supports {sorted(offered)}"
                             + (" (Read needs responder IRD >= 1)" if reply.ird == 0 else "")
                             + " (RFC 6581 section 9.2)"), term=True)
        terms.p2p, terms.rtr, terms.rtr_offered = True, _pick(common), offered
    return terms


# -- socket helpers ------------------------------------------------------------

def _deadline(timeout):
    return None if timeout is None else time.monotonic() + timeout


def _set_timeout(sock, deadline):
    if deadline is None:
        sock.settimeout(None)
        return
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    sock.settimeout(remaining)


def _recv(sock, deadline):
    """Some octets; b"" at EOF. Raises TimeoutError or ConnectionError."""
    _set_timeout(sock, deadline)
    try:
        return sock.recv(_RECV_CHUNK)
    except socket.timeout:
        raise TimeoutError from None


def _send_all(sock, data, deadline, what):
    try:
        _set_timeout(sock, deadline)
        sock.sendall(data)
    except TimeoutError:
        raise _Fail(_mpa(MpaError.TCP_CLOSED, f"timeout sending {what}")) from None
    except OSError as e:
        raise _Fail(_mpa(MpaError.TCP_CLOSED, f"connection lost sending {what}: {e}")) from None


def _close(sock):
    """Close: FIN after what was sent; drain unread input so that no RST is sent."""
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    try:
        sock.setblocking(False)
        for _ in range(64):
            if not sock.recv(_RECV_CHUNK):
                break
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


def _read_frame(sock, expect, strict, deadline, timeout):
    """Read one MPA frame: ``(frame, octets that followed it)``; raises _Fail."""
    reader = FrameReader(expect=expect, strict=strict)
    got = 0
    while True:
        try:
            data = _recv(sock, deadline)
        except TimeoutError:
            raise _Fail(_mpa(MpaError.TCP_CLOSED,
                             f"timeout: no complete MPA {expect.capitalize()} within "
                             f"{timeout} s ({got} octets received)")) from None
        except OSError as e:
            raise _Fail(_mpa(MpaError.TCP_CLOSED, f"connection lost while waiting for the "
                             f"MPA {expect.capitalize()}: {e}")) from None
        if not data:
            raise _Fail(reader.close())
        got += len(data)
        try:
            frame, rest = reader.feed(data)
        except ProtocolError as e:
            raise _Fail(e.info) from None
        if frame is not None:
            return frame, rest


def _socket_emss(sock):
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            v = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
            if v > 0:
                return v
        except OSError:
            pass
    return DEFAULT_EMSS


def _nodelay(sock):
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


def _send_term(sock, encoder, tx, info, deadline):
    """Best effort: frame and send a Terminate for ``info``; the Terminate or None."""
    term = Terminate.for_error(info)
    try:
        (ulpdu,) = tx.terminate(term)
        _send_all(sock, encoder.encode(ulpdu), deadline, "a Terminate")
    except Exception:           # the connection is going down anyway
        return None
    return term


def _classify(ulpdu):
    """``(kind, header, payload)``: kind is "terminate", an RTR type or None."""
    try:
        header, payload = ddp.parse(ulpdu)
    except ProtocolError:
        return None, None, b""
    ctl = header.rsvd_ulp if header.tagged else header.rsvd_ulp >> 32
    rv, _, op = rdmap.parse_control(ctl)
    if rv != rdmap.RDMAP_VERSION or header.dv != ddp.DDP_VERSION:
        return None, header, payload
    if not header.tagged and op == Opcode.TERMINATE and header.qn == 2:
        return "terminate", header, payload
    if not header.last:
        return None, header, payload
    if header.tagged:
        if op == Opcode.RDMA_WRITE and not payload:
            return "write", header, payload
        return None, header, payload
    if header.mo != 0 or header.msn != 1:
        return None, header, payload
    if op == Opcode.SEND and header.qn == 0 and not payload:
        return "send", header, payload
    if op == Opcode.RDMA_READ_REQUEST and header.qn == 1 and len(payload) == ReadRequest.LENGTH:
        if ReadRequest.parse(payload).size == 0:
            return "read", header, payload
    return None, header, payload


def fpdu_octets(raw):
    """Octets of the FPDU (no markers) that ``raw`` starts with, from its ULPDU_Length and a
    CRC field; None until its first two octets are there."""
    if len(raw) < 2:
        return None
    n = int.from_bytes(raw[:2], "big")
    return 2 + n + (-(2 + n) % 4) + 4


def zero_crc_terminate(raw):
    """The ULPDU of the FPDU (no markers) at the start of ``raw`` if it is a Terminate whose CRC
    field is zero, else None (the FPDU must be complete in ``raw``).

    Linux siw sends the Terminate of a failed MPA setup before it turns CRC on (see
    :meth:`Negotiated._zero_crc_terminate`): only the peer's first FPDU may be taken so."""
    n = fpdu_octets(raw)
    if n is None or len(raw) < n or raw[n - 4:n] != b"\0\0\0\0":
        return None
    ulpdu = bytes(raw[2:2 + int.from_bytes(raw[:2], "big")])
    return ulpdu if _classify(ulpdu)[0] == "terminate" else None


def terminate_of(ulpdu):
    """The :class:`~rnic.host.model.rdmap.Terminate` carried by ``ulpdu`` (None if malformed)."""
    kind, _, payload = _classify(ulpdu)
    if kind != "terminate":
        return None
    try:
        return Terminate.parse(payload)
    except (ProtocolError, ValueError):
        return None


# -- the negotiated connection ------------------------------------------------

class Negotiated:
    """Result of MPA setup on one connection.

    Attributes
    ----------
    role : {"initiator", "responder"}
    sock : socket.socket
        The connection (closed if ``rejected``).
    rejected : bool
        Responder only: this side sent a Reject (and closed).
    rev, enhanced : int, bool
        Negotiated revision; RFC 6581 enhanced data exchanged.
    markers_tx, markers_rx, crc : bool
        Markers in what this side sends / receives; CRC both ways.
    ird, ord : int or None
        This side's negotiated IRD / ORD (None when not enhanced: left to
        the ULP). 0x3FFF: left to the ULP by RFC 6581's rule.
    peer_ird, peer_ord : int or None
        The values in the peer's frame (RFC 6581 9.1: passed to the ULP).
    p2p : bool
        Peer-to-peer model (A) agreed.
    rtr : {"send", "write", "read"} or None
        The RTR type: chosen (initiator), expected (responder, None when the
        responder offered types the initiator did not propose) or, after
        :meth:`wait_first_fpdu`, received.
    rtr_offered : frozenset
        The RTR types of the Reply.
    private_data, peer_private_data : bytes
        ULP private data sent / received (the enhanced 4 octets excluded).
    local_frame, peer_frame : MpaFrame
    tx_frame_octets, rx_frame_octets : int
        Exact octets of the frame sent / received. They are also the TCP
        stream offsets (``tx_stream_offset``, ``rx_stream_offset``) at which
        each direction's FPDU stream starts.
    tx_marker_origin, rx_marker_origin : int
        0: markers of each direction start at offset 0 of its FPDU stream,
        the first octet after that side's frame (RFC 5044).
    leftover : bytes
        Octets read after the peer's frame in the same read (FPDUs); they
        are fed to the decoder first.
    emss, mulpdu : int
        TX EMSS (TCP_MAXSEG, else :data:`DEFAULT_EMSS`) and the MULPDU it
        gives with ``markers_tx`` (RFC 5044 section 4.1).
    encoder, decoder : FpduEncoder, FpduDecoder
        For this side's TX and RX FPDU streams (offset 0 = after the frames).
    tx : rnic.host.model.segment.TxStream
        TX MSN counters; the RTR (a Send or Read Request) already used MSN 1.
    rx_msn : dict
        Next MSN expected on untagged queues 0, 1, 2 (advanced by the RTR).
    fence_open : bool
        The responder may send FPDUs (always True for the initiator).
    first_fpdu : FpduRecord or None
        Responder: the initiator's first FPDU once :meth:`wait_first_fpdu` read it.
    rtr_ulpdu, rtr_wire : bytes or None
        Initiator: the RTR ULPDU sent and its FPDU octets. Responder: the RTR
        ULPDU received (``rtr_wire`` None).
    earliest_tx : float
        ``time.monotonic()`` before which no FPDU may go out (initiator: the
        Reply's arrival plus ``params.first_fpdu_delay``; else 0). Every data
        path that sends this connection's FPDUs holds them back until then.
    """

    def __init__(self, *, role, sock, params, local_frame, peer_frame, terms, leftover=b"",
                 reply_time=None, rejected=False):
        self.role = role
        self.sock = sock
        self.params = params
        self.rejected = rejected
        self.local_frame = local_frame
        self.peer_frame = peer_frame
        self.rev = terms.rev
        self.enhanced = terms.enhanced
        self.markers_tx = terms.markers_tx
        self.markers_rx = terms.markers_rx
        self.crc = terms.crc
        self.ird, self.ord = terms.ird, terms.ord
        self.peer_ird, self.peer_ord = terms.peer_ird, terms.peer_ord
        self.p2p = terms.p2p
        self.rtr = terms.rtr
        self.rtr_offered = terms.rtr_offered
        self.private_data = local_frame.private_data
        self.peer_private_data = peer_frame.private_data
        self.tx_frame_octets = len(build_frame(local_frame))
        self.rx_frame_octets = HEADER_LEN + peer_frame.pd_length
        self.tx_stream_offset = self.tx_frame_octets
        self.rx_stream_offset = self.rx_frame_octets
        self.tx_marker_origin = 0
        self.rx_marker_origin = 0
        self.leftover = bytes(leftover)
        self.emss = params.emss or (DEFAULT_EMSS if rejected else _socket_emss(sock))
        self.mulpdu = _mulpdu(self.emss, markers=self.markers_tx)
        self.encoder = FpduEncoder(markers=self.markers_tx, crc=self.crc)
        self.decoder = FpduDecoder(markers=self.markers_rx, crc=self.crc)
        self.tx = segment.TxStream(mulpdu=max(self.mulpdu, MIN_MULPDU))
        self.rx_msn = {0: 1, 1: 1, 2: 1}
        self.fence_open = role == "initiator" and not rejected
        self.first_fpdu = None
        self.rtr_pending = False        # initiator: the RTR is still to be sent (connect)
        self.rtr_ulpdu = None
        self.rtr_wire = None
        self.read_rtr_response = None
        self.zero_crc_terminate = False
        self.closed = rejected
        self._rx_queue = deque()
        self._pending = self.leftover
        self.earliest_tx = (reply_time + params.first_fpdu_delay
                             if role == "initiator" and reply_time is not None else 0.0)

    def __repr__(self):
        return (f"<Negotiated {self.role} rev={self.rev} enhanced={self.enhanced} "
                f"markers_tx={self.markers_tx} markers_rx={self.markers_rx} crc={self.crc} "
                f"ird={self.ird} ord={self.ord} p2p={self.p2p} rtr={self.rtr} "
                f"mulpdu={self.mulpdu}{' rejected' if self.rejected else ''}>")

    # -- transmit ---------------------------------------------------------------

    def _check_open(self):
        if self.closed:
            raise RuntimeError("the connection is closed")

    def _transmit(self, ulpdu, deadline):
        delay = self.earliest_tx - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        wire = self.encoder.encode(ulpdu)
        _send_all(self.sock, wire, deadline, "an FPDU")
        return wire

    def send_ulpdu(self, ulpdu, timeout=None):
        """Frame one ULPDU with the negotiated markers/CRC and send it.

        Returns the FPDU octets. Raises RuntimeError while the responder's
        fence is closed (before :meth:`wait_first_fpdu`), ProtocolError
        (MPA error 1) if the connection is lost.
        """
        self._check_open()
        if not self.fence_open:
            raise RuntimeError("MPA fence: the responder sends no FPDU before it has "
                               "received the initiator's first FPDU (call wait_first_fpdu)")
        try:
            return self._transmit(ulpdu, _deadline(self.params.timeout if timeout is None
                                                   else timeout))
        except _Fail as f:
            raise ProtocolError(f.info) from None

    def send_terminate(self, info, ulpdu=None):
        """Send a Terminate for ``info`` (caused by ``ulpdu``); returns the Terminate.

        Allowed through the fence (it reports an error, it is not ULP data).
        """
        self._check_open()
        term = Terminate.for_error(info, ulpdu)
        (t_ulpdu,) = self.tx.terminate(term)
        try:
            self._transmit(t_ulpdu, _deadline(self.params.timeout))
        except _Fail as f:
            raise ProtocolError(f.info) from None
        return term

    def send_rtr(self):
        """Initiator: send the RTR that :func:`connect` left pending (``send_rtr=False``)."""
        if not self.rtr_pending:
            raise RuntimeError("no RTR is pending (not peer-to-peer, or it was sent)")
        self._send_rtr(_deadline(self.params.timeout + self.params.first_fpdu_delay))

    def _send_rtr(self, deadline):
        p = self.params
        self.rtr_pending = False
        if self.rtr == "send":
            ulpdus = self.tx.send(b"")
        elif self.rtr == "write":
            ulpdus = self.tx.write(b"", stag=p.rtr_stag, to=0)
        else:
            ulpdus = self.tx.read_request(ReadRequest(sink_stag=p.rtr_stag, sink_to=0, size=0,
                                                      src_stag=p.rtr_stag, src_to=0))
        (self.rtr_ulpdu,) = ulpdus
        self.rtr_wire = self._transmit(self.rtr_ulpdu, deadline)

    # -- receive ----------------------------------------------------------------

    def _next(self, deadline):
        """Next FpduRecord; raises _Fail (1 closed, decoder errors with term=True)
        or TimeoutError."""
        while not self._rx_queue:
            if self._pending:
                data, self._pending = self._pending, b""
            else:
                try:
                    data = _recv(self.sock, deadline)
                except TimeoutError:
                    raise
                except OSError as e:
                    raise _Fail(_mpa(MpaError.TCP_CLOSED, f"connection lost: {e}")) from None
                if not data:
                    err = self.decoder.close()
                    raise _Fail(err.info if err is not None else _mpa(
                        MpaError.TCP_CLOSED, "the peer closed the connection"))
            self._rx_queue.extend(self.decoder.feed(data))
        item = self._rx_queue.popleft()
        if isinstance(item, FpduError):
            rec = self._zero_crc_terminate(item)
            if rec is not None:
                return rec
            self._rx_queue.appendleft(item)     # sticky: nothing more on this half
            raise _Fail(item.info, term=True)
        return item

    def _zero_crc_terminate(self, err):
        """The peer's first FPDU as a record if it is a Terminate whose CRC field is zero.

        Linux siw (6.1) sends the Terminate of a failed MPA setup (e.g. 2/0/7, no
        matching RTR, as the initiator) before it turns CRC on for the connection, so
        the FPDU carries a zero CRC field although CRC was negotiated. Rather than
        answer the peer's error with a CRC error of our own, such an FPDU -- only the
        first FPDU of the stream, only without markers, only a Terminate -- is taken
        as the peer's Terminate (``zero_crc_terminate`` is set). Anything else with a
        bad CRC stays MPA error 2.
        """
        raw = getattr(self.decoder, "_raw", None)
        if (err.info.layer != 2 or err.info.ecode != MpaError.CRC or err.offset != 0
                or self.markers_rx or not raw):
            return None
        raw = bytes(raw)
        ulpdu = zero_crc_terminate(raw)
        if ulpdu is None or len(raw) != fpdu_octets(raw):
            return None
        self.zero_crc_terminate = True
        return FpduRecord(offset=0, length=len(raw), ulpdu_length=len(ulpdu), crc="zero",
                          markers=[], ulpdu=ulpdu)

    def recv_fpdu(self, timeout=None):
        """The next FPDU received (:class:`~rnic.host.model.fpdu.FpduRecord`).

        Raises TimeoutError when nothing complete arrives within ``timeout``
        (default ``params.timeout``), ProtocolError for a closed connection
        (MPA error 1) or a bad FPDU (the decoder's error). Sends nothing.
        """
        self._check_open()
        if self.role == "responder" and not self.fence_open:
            raise RuntimeError("call wait_first_fpdu() first: it checks the RTR/first FPDU")
        try:
            return self._next(_deadline(self.params.timeout if timeout is None else timeout))
        except _Fail as f:
            raise ProtocolError(f.info) from None

    def wait_first_fpdu(self, timeout=None, *, answer_read_rtr=True):
        """Responder: read the initiator's first FPDU and open the fence.

        With peer-to-peer the FPDU must be the negotiated RTR (a zero-length
        Send, RDMA Write or Read Request); a zero-length Read RTR is answered
        with a zero-length RDMA Read Response when ``answer_read_rtr``.
        Returns the :class:`~rnic.host.model.fpdu.FpduRecord` (again on later calls).

        Raises MpaSetupError and closes the connection on: timeout or close
        (1), a bad FPDU (its MPA/DDP error, Terminate sent), a Terminate from
        the peer (its error, ``.terminate`` set), an unexpected first message
        with peer-to-peer (7, Terminate sent).
        """
        if self.role != "responder":
            raise RuntimeError("only the responder waits for the initiator's first FPDU")
        if self.first_fpdu is not None:
            return self.first_fpdu
        self._check_open()
        timeout = self.params.timeout if timeout is None else timeout
        deadline = _deadline(timeout)
        try:
            try:
                rec = self._next(deadline)
            except TimeoutError:
                raise _Fail(_mpa(MpaError.TCP_CLOSED,
                                 f"timeout: no FPDU from the initiator within {timeout} s")) from None
            kind, header, payload = _classify(rec.ulpdu)
            if kind == "terminate":
                try:
                    term = Terminate.parse(payload)
                    info = term.info
                except (ProtocolError, ValueError):
                    term = None
                    info = _mpa(MpaError.LOCAL_CATASTROPHIC, "malformed Terminate received")
                self._shut()
                raise MpaSetupError(info, self.peer_frame, terminate=term)
            if self.p2p:
                allowed = self.rtr_offered if self.rtr is None else {self.rtr}
                if kind not in allowed:
                    raise _Fail(_mpa(MpaError.NO_MATCHING_RTR,
                                     f"first FPDU is not a zero-length {'/'.join(sorted(allowed))}"
                                     " RTR (RFC 6581 section 9.2)"), term=True)
                self.rtr = kind
                self.rtr_ulpdu = rec.ulpdu
        except _Fail as f:
            sent = None
            if f.term:
                sent = _send_term(self.sock, self.encoder, self.tx, f.info, _deadline(1.0))
            self._shut()
            raise MpaSetupError(f.info, self.peer_frame, term_sent=sent) from None
        except MpaSetupError:
            raise
        except Exception as exc:
            info = _mpa(MpaError.LOCAL_CATASTROPHIC, f"local error: {exc!r}")
            sent = _send_term(self.sock, self.encoder, self.tx, info, _deadline(1.0))
            self._shut()
            raise MpaSetupError(info, self.peer_frame, term_sent=sent) from exc
        if header is not None and not header.tagged and header.last and header.qn in self.rx_msn:
            self.rx_msn[header.qn] = (header.msn + 1) & 0xFFFFFFFF
        self.first_fpdu = rec
        self.fence_open = True
        if kind == "read" and self.p2p and answer_read_rtr:
            req = ReadRequest.parse(payload)
            (resp,) = self.tx.read_response(b"", stag=req.sink_stag, to=req.sink_to)
            self.read_rtr_response = self.send_ulpdu(resp)
        return rec

    # -- misc -------------------------------------------------------------------

    def _shut(self):
        if not self.closed:
            self.closed = True
            self.fence_open = False
            _close(self.sock)

    def close(self):
        """Close the connection (FIN)."""
        self._shut()

    def context(self):
        """The per-connection values the hardware context needs, as a dict."""
        return {
            "role": self.role, "rev": self.rev, "enhanced": self.enhanced,
            "markers_tx": self.markers_tx, "markers_rx": self.markers_rx, "crc": self.crc,
            "tx_marker_origin": self.tx_marker_origin, "rx_marker_origin": self.rx_marker_origin,
            "tx_stream_offset": self.tx_stream_offset, "rx_stream_offset": self.rx_stream_offset,
            "tx_fpdu_offset": self.encoder.offset, "rx_fpdu_offset": self.decoder.offset,
            "emss": self.emss, "mulpdu": self.mulpdu, "ird": self.ird, "ord": self.ord,
            "p2p": self.p2p, "rtr": self.rtr,
            "tx_msn": {qn: self.tx.next_msn(qn) for qn in (0, 1, 2)},
            "rx_msn": dict(self.rx_msn),
        }


# -- the two roles -------------------------------------------------------------

def _params(params):
    if params is None:
        return ConnParams()
    if not isinstance(params, ConnParams):
        raise TypeError(f"params must be a ConnParams, not {type(params).__name__}")
    return params


def _open(sock_or_addr, params):
    if isinstance(sock_or_addr, socket.socket) or hasattr(sock_or_addr, "sendall"):
        _nodelay(sock_or_addr)          # (a socket, or an object with its methods)
        return sock_or_addr
    try:
        sock = socket.create_connection(sock_or_addr, timeout=params.timeout)
    except OSError as e:
        raise MpaSetupError(_mpa(MpaError.TCP_CLOSED,
                                 f"TCP connection to {sock_or_addr!r} failed: {e}")) from None
    _nodelay(sock)
    return sock


def connect(sock_or_addr, params=None, *, send_rtr=True):
    """Initiator: send the MPA Request, read and check the Reply, send the RTR.

    Parameters
    ----------
    sock_or_addr : socket.socket or (host, port)
        A connected stream socket (or an object with its methods:
        :class:`rnic.host.net.nic_tcp.NicStream`), or an address to connect to.
    params : ConnParams
    send_rtr : bool
        False: leave the RTR to the data path made next (``Negotiated.rtr_pending``;
        every :class:`~rnic.host.net.rnic_sw.DataPath` sends it first, a hardware one
        through its own send queue so that its MSNs and Read credits count it).

    Returns
    -------
    Negotiated

    Raises
    ------
    MpaRejected
        The responder sent a Reject (R=1); ``peer_private_data`` is its
        private data. The socket is closed.
    MpaSetupError
        Code 1, 4, 5, 6 or 7 (see the module docstring); the socket is
        closed, after a Terminate when FPDU mode was on.
    """
    params = _params(params)
    request = request_frame(params)
    sock = _open(sock_or_addr, params)
    deadline = _deadline(params.timeout)
    reply = None
    framing = None
    reply_time = None
    try:
        # RFC 5044 7.1.2: the initiator starts with the Request ...
        _send_all(sock, build_frame(request), deadline, "the MPA Request")
        # ... and sends no FPDU before the Reply (which may share a read with FPDUs).
        reply, leftover = _read_frame(sock, "reply", params.strict, deadline, params.timeout)
        reply_time = time.monotonic()
        if reply.reject:
            # RFC 5044 7.1.2: after a Reject the connection is closed. RFC 6581
            # 9.1: an enhanced Reject may carry the ORD the responder requires.
            if (request.enhanced and reply.enhanced and reply.ord != IRD_ORD_ULP
                    and request.ird != IRD_ORD_ULP and reply.ord > request.ird):
                info = _mpa(MpaError.INSUFFICIENT_IRD,
                            f"rejected: the responder requires ORD {reply.ord}, this side "
                            f"offered IRD {request.ird} (RFC 6581 section 9.1)")
            else:
                info = _mpa(MpaError.TCP_CLOSED, "the responder rejected the connection (R=1)")
            _close(sock)
            raise MpaRejected(info, reply)
        framing = _framing_from_reply(request, reply)       # FPDU mode is on from here
        terms = _evaluate_reply(request, reply, params)
        neg = Negotiated(role="initiator", sock=sock, params=params, local_frame=request,
                         peer_frame=reply, terms=terms, leftover=leftover,
                         reply_time=reply_time)
        if neg.p2p:
            # RFC 6581 9.3: the RTR is the initiator's first FPDU.
            neg.rtr_pending = True
            if send_rtr:
                neg.send_rtr()
        sock.settimeout(params.timeout)
        return neg
    except MpaSetupError:
        raise
    except _Fail as f:
        sent = None
        if f.term and framing is not None:
            sent = _term_after_reply(sock, framing, f.info, reply_time, params)
        _close(sock)
        raise MpaSetupError(f.info, reply, term_sent=sent) from None
    except Exception as exc:
        info = _mpa(MpaError.LOCAL_CATASTROPHIC, f"local error: {exc!r}")
        sent = None
        if framing is not None:      # RFC 6581 9.3: TERM 2/0/5 before resetting
            sent = _term_after_reply(sock, framing, info, reply_time, params)
        _close(sock)
        raise MpaSetupError(info, reply, term_sent=sent) from exc


def _term_after_reply(sock, framing, info, reply_time, params):
    markers_tx, _, crc = framing
    delay = reply_time + params.first_fpdu_delay - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    return _send_term(sock, FpduEncoder(markers=markers_tx, crc=crc),
                      segment.TxStream(mulpdu=MIN_MULPDU), info, _deadline(1.0))


def accept(sock, params=None, *, reject=False, before_reply=None):
    """Responder: read and check the MPA Request, answer with a Reply or Reject.

    Parameters
    ----------
    sock : socket.socket
        The accepted connection (or an object with its methods:
        :class:`rnic.host.net.nic_tcp.NicStream`).
    params : ConnParams
    reject : bool or callable
        True (or a callable given the Request frame that returns true):
        answer with a Reject carrying ``params.private_data`` and close.
    before_reply : callable or None
        Called with the :class:`Negotiated` just before the Reply goes out: a NIC
        commits the connection to FPDUs there (the initiator's first FPDU may follow the
        Reply at once).

    Returns
    -------
    Negotiated
        With ``rejected`` True after a Reject. Otherwise FPDU mode is on and
        the fence is closed: call :meth:`Negotiated.wait_first_fpdu` before
        sending.

    Raises
    ------
    MpaSetupError
        Code 1 (closed/timeout), 4 (invalid Request; closed without an
        answer), 5 (local failure), 6 (initiator IRD below the ULP's
        ``ord_min``: a Reject was sent); the socket is closed.
    """
    params = _params(params)
    deadline = _deadline(params.timeout)
    request = None
    try:
        request, leftover = _read_frame(sock, "request", params.strict, deadline,
                                        params.timeout)
        try:
            reply, terms = _reply_for(request, params)
        except _RejectNeeded as r:
            _send_all(sock, build_frame(r.frame), deadline, "the MPA Reject")
            _close(sock)
            raise MpaSetupError(r.info, request) from None
        if reject(request) if callable(reject) else reject:
            frame = reply.replace(reject=True)
            _send_all(sock, build_frame(frame), deadline, "the MPA Reject")
            _close(sock)
            return Negotiated(role="responder", sock=sock, params=params, local_frame=frame,
                              peer_frame=request, terms=terms, leftover=leftover,
                              rejected=True)
        neg = Negotiated(role="responder", sock=sock, params=params, local_frame=reply,
                         peer_frame=request, terms=terms, leftover=leftover)
        _nodelay(sock)
        if before_reply is not None:
            before_reply(neg)
        _send_all(sock, build_frame(reply), deadline, "the MPA Reply")
        sock.settimeout(params.timeout)
        return neg
    except MpaSetupError:
        raise
    except _Fail as f:
        # RFC 5044 7.1.1: an invalid Request -> close the connection, report locally.
        _close(sock)
        raise MpaSetupError(f.info, request) from None
    except Exception as exc:
        _close(sock)
        raise MpaSetupError(_mpa(MpaError.LOCAL_CATASTROPHIC, f"local error: {exc!r}"),
                            request) from exc
