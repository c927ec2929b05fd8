"""JSON form of one ULPDU (DDP segment) for ``rnic decode`` / ``rnic encode``.

:func:`ulpdu_to_json` returns::

    {"ddp":   {"t", "l", "dv", "stag", "to"}            # tagged
              {"t", "l", "dv", "qn", "msn", "mo"}      # untagged
     "rdmap": {"rv", "opcode", "name",
               "inval_stag"                 # untagged Send with Invalidate kinds
               "read_request": {"sink_stag", "sink_to", "size", "src_stag", "src_to"},  # opcode 1
               "terminate": {"layer", "etype", "ecode", "m", "d", "r", ...}},          # opcode 7
     "payload": "<hex of everything after the DDP header>"}

Integers are JSON numbers; t, l, m, d, r are 0/1. Fields that are zero on
every conformant frame appear only when non-zero, so that any byte string
survives the round trip: ``ddp.rsvd`` (4 reserved control bits),
``rdmap.rsvd`` (2 reserved bits), ``rdmap.rsvd_ulp`` (RsvdULP[8:39] of an
untagged segment that is not a Send with Invalidate). The terminate object
also carries ``ddp_segment_length`` (when M or D), ``ddp_header`` and
``rdmap_header`` (hex, when D / R) and ``rsvd`` (non-zero only). Opcodes
above 7 have the name "unknown". A Read Request or Terminate payload that does
not parse leaves its sub-object out and adds a top-level ``"error"``
(:meth:`ErrorInfo.to_json`).

:func:`ulpdu_from_json` is the inverse. Unknown keys are ignored; a missing or
ill-typed field raises ``ValueError`` naming it. ``rdmap.name`` may stand in
for ``rdmap.opcode``. For Read Request and Terminate, ``payload`` (when given)
is used as is, otherwise it is built from the sub-object.
"""

from rnic.host.model import ddp, rdmap
from rnic.host.spec.errors import ProtocolError
from rnic.host.model.rdmap import Opcode

__all__ = ["ulpdu_to_json", "ulpdu_from_json"]


def ulpdu_to_json(ulpdu):
    """Dissect one ULPDU into its JSON form (``ProtocolError`` if shorter than its DDP header)."""
    header, payload = ddp.parse(ulpdu)
    d = {"t": int(header.tagged), "l": int(header.last), "dv": header.dv}
    if header.rsvd:
        d["rsvd"] = header.rsvd
    if header.tagged:
        d["stag"], d["to"] = header.stag, header.to
        control, ulp_rest = header.rsvd_ulp, 0
    else:
        d["qn"], d["msn"], d["mo"] = header.qn, header.msn, header.mo
        control, ulp_rest = header.rsvd_ulp >> 32, header.rsvd_ulp & 0xFFFFFFFF
    rv, rsvd, opcode = rdmap.parse_control(control)
    r = {"rv": rv, "opcode": opcode, "name": rdmap.opcode_name(opcode)}
    if rsvd:
        r["rsvd"] = rsvd
    if not header.tagged:
        if opcode in rdmap.INVALIDATE_OPCODES:
            r["inval_stag"] = ulp_rest
        elif ulp_rest:
            r["rsvd_ulp"] = ulp_rest
    obj = {"ddp": d, "rdmap": r}
    try:
        if opcode == Opcode.RDMA_READ_REQUEST:
            r["read_request"] = rdmap.ReadRequest.parse(payload).to_json()
        elif opcode == Opcode.TERMINATE:
            r["terminate"] = rdmap.Terminate.parse(payload).to_json()
    except ProtocolError as exc:
        obj["error"] = exc.info.to_json()
    obj["payload"] = payload.hex()
    return obj


def _object(value, where):
    if not isinstance(value, dict):
        raise ValueError(f"field {where} must be a JSON object")
    return value


def _get(obj, key, where):
    if key not in obj:
        raise ValueError(f"missing field {where}.{key}")
    return obj[key]


def _uint(obj, key, where, bits, default=None):
    if default is not None and key not in obj:
        return default
    value = _get(obj, key, where)
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"field {where}.{key} must be an integer, not {value!r}")
    if not 0 <= value < (1 << bits):
        raise ValueError(f"field {where}.{key} = {value} does not fit {bits} bits")
    return value


def _hex(obj, key, where):
    value = _get(obj, key, where)
    if not isinstance(value, str):
        raise ValueError(f"field {where}.{key} must be a hex string")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise ValueError(f"field {where}.{key} is not valid hex: {value!r}") from None


def _read_request(obj):
    w = "rdmap.read_request"
    return rdmap.ReadRequest(sink_stag=_uint(obj, "sink_stag", w, 32), sink_to=_uint(obj, "sink_to", w, 64),
                             size=_uint(obj, "size", w, 32), src_stag=_uint(obj, "src_stag", w, 32),
                             src_to=_uint(obj, "src_to", w, 64))


def _terminate(obj):
    w = "rdmap.terminate"
    m, d, r = (bool(_uint(obj, k, w, 1)) for k in ("m", "d", "r"))
    try:
        return rdmap.Terminate(
            layer=_uint(obj, "layer", w, 4), etype=_uint(obj, "etype", w, 4),
            ecode=_uint(obj, "ecode", w, 8), m=m, d=d, r=r,
            ddp_segment_length=_uint(obj, "ddp_segment_length", w, 16, default=0) if (m or d) else 0,
            ddp_header=_hex(obj, "ddp_header", w) if d else b"",
            rdmap_header=_hex(obj, "rdmap_header", w) if r else b"",
            rsvd=_uint(obj, "rsvd", w, 13, default=0))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{w}: {exc}") from None


def ulpdu_from_json(obj):
    """Build the ULPDU octets from its JSON form (``ValueError`` naming a missing/bad field)."""
    _object(obj, "ulpdu")
    d = _object(_get(obj, "ddp", "ulpdu"), "ulpdu.ddp")
    r = _object(_get(obj, "rdmap", "ulpdu"), "ulpdu.rdmap")
    tagged = bool(_uint(d, "t", "ddp", 1))
    last = bool(_uint(d, "l", "ddp", 1))
    dv = _uint(d, "dv", "ddp", 2)
    rsvd = _uint(d, "rsvd", "ddp", 4, default=0)
    if "opcode" in r or "name" not in r:
        opcode = _uint(r, "opcode", "rdmap", 4)
    else:
        opcode = int(rdmap.opcode_from_name(r["name"]))
    control = rdmap.control_byte(opcode, rv=_uint(r, "rv", "rdmap", 2),
                                 rsvd=_uint(r, "rsvd", "rdmap", 2, default=0))
    if tagged:
        header = ddp.TaggedHeader(last=last, stag=_uint(d, "stag", "ddp", 32),
                                  to=_uint(d, "to", "ddp", 64), rsvd_ulp=control, dv=dv, rsvd=rsvd)
    else:
        if opcode in rdmap.INVALIDATE_OPCODES:
            rest = _uint(r, "inval_stag", "rdmap", 32)
        else:
            rest = _uint(r, "rsvd_ulp", "rdmap", 32, default=0)
        header = ddp.UntaggedHeader(last=last, qn=_uint(d, "qn", "ddp", 32),
                                    msn=_uint(d, "msn", "ddp", 32), mo=_uint(d, "mo", "ddp", 32),
                                    rsvd_ulp=(control << 32) | rest, dv=dv, rsvd=rsvd)
    if "payload" in obj:
        payload = _hex(obj, "payload", "ulpdu")
    elif opcode == Opcode.RDMA_READ_REQUEST and "read_request" in r:
        payload = _read_request(_object(r["read_request"], "rdmap.read_request")).build()
    elif opcode == Opcode.TERMINATE and "terminate" in r:
        payload = _terminate(_object(r["terminate"], "rdmap.terminate")).build()
    else:
        raise ValueError("missing field ulpdu.payload")
    return ddp.build(header, payload)
