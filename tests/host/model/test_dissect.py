"""JSON dissection of ULPDUs (host/model/dissect.py)."""

import json

import pytest
from hypothesis import given, strategies as st

from rnic.host.model import segment
from rnic.host.model.dissect import ulpdu_from_json, ulpdu_to_json
from rnic.host.spec.errors import ProtocolError
from rnic.host.model.rdmap import Opcode, ReadRequest, Terminate


def test_send_json():
    raw = segment.ulpdu(Opcode.SEND, b"\x01\x02", msn=3, mo=4, last=False)
    assert ulpdu_to_json(raw) == {
        "ddp": {"t": 0, "l": 0, "dv": 1, "qn": 0, "msn": 3, "mo": 4},
        "rdmap": {"rv": 1, "opcode": 3, "name": "send"},
        "payload": "0102"}


def test_write_json():
    raw = segment.ulpdu(Opcode.RDMA_WRITE, b"", stag=0x1234, to=2**64 - 1)
    assert ulpdu_to_json(raw) == {
        "ddp": {"t": 1, "l": 1, "dv": 1, "stag": 0x1234, "to": 2**64 - 1},
        "rdmap": {"rv": 1, "opcode": 0, "name": "write"},
        "payload": ""}


def test_send_invalidate_json():
    raw = segment.ulpdu(Opcode.SEND_SE_INVALIDATE, b"", inval_stag=0xABCD)
    obj = ulpdu_to_json(raw)
    assert obj["rdmap"] == {"rv": 1, "opcode": 6, "name": "send_se_inv", "inval_stag": 0xABCD}


def test_read_request_json():
    rr = ReadRequest(sink_stag=1, sink_to=2, size=3, src_stag=4, src_to=5)
    raw = segment.ulpdu(Opcode.RDMA_READ_REQUEST, rr, msn=9)
    obj = ulpdu_to_json(raw)
    assert obj["ddp"]["qn"] == 1
    assert obj["rdmap"]["read_request"] == {"sink_stag": 1, "sink_to": 2, "size": 3,
                                            "src_stag": 4, "src_to": 5}
    assert obj["payload"] == rr.build().hex()
    # built from the sub-object when no payload is given
    del obj["payload"]
    assert ulpdu_from_json(obj) == raw


def test_terminate_json():
    hdr = segment.ulpdu(Opcode.RDMA_WRITE, b"", stag=7, to=8)
    t = Terminate(layer=1, etype=1, ecode=0, m=True, d=True, ddp_segment_length=20, ddp_header=hdr)
    raw = segment.ulpdu(Opcode.TERMINATE, t)
    obj = ulpdu_to_json(raw)
    assert obj["rdmap"]["terminate"] == {"layer": 1, "etype": 1, "ecode": 0, "m": 1, "d": 1, "r": 0,
                                         "ddp_segment_length": 20, "ddp_header": hdr.hex()}
    del obj["payload"]
    assert ulpdu_from_json(obj) == raw


def test_unknown_opcode_and_old_revision():
    raw = bytes([0xC1, 0x4A]) + bytes(12)
    assert ulpdu_to_json(raw)["rdmap"] == {"rv": 1, "opcode": 10, "name": "unknown"}
    old = bytes.fromhex("4003") + bytes(16) + b"\xff"
    obj = ulpdu_to_json(old)
    assert obj["ddp"]["dv"] == 0 and obj["rdmap"] == {"rv": 0, "opcode": 3, "name": "send"}
    assert ulpdu_from_json(obj) == old


def test_reserved_fields_shown_when_set():
    raw = bytes([0x41 | 0x14, 0x73, 0, 0, 0, 9]) + bytes(12)
    obj = ulpdu_to_json(raw)
    assert obj["ddp"]["rsvd"] == 5
    assert obj["rdmap"]["rsvd"] == 3 and obj["rdmap"]["rsvd_ulp"] == 9
    assert ulpdu_from_json(obj) == raw


def test_malformed_rdmap_payload_reported():
    raw = segment.ulpdu(Opcode.RDMA_READ_REQUEST, bytes(5))
    obj = ulpdu_to_json(raw)
    assert "read_request" not in obj["rdmap"]
    assert obj["error"]["layer"] == 0 and obj["error"]["ecode"] == 0xFF
    assert ulpdu_from_json(obj) == raw


def test_short_ulpdu_raises_protocol_error():
    with pytest.raises(ProtocolError):
        ulpdu_to_json(b"\xc1\x40")


def test_name_instead_of_opcode():
    obj = {"ddp": {"t": 0, "l": 1, "dv": 1, "qn": 0, "msn": 1, "mo": 0},
           "rdmap": {"rv": 1, "name": "send_se"}, "payload": "aa"}
    assert ulpdu_from_json(obj) == segment.ulpdu(Opcode.SEND_SE, b"\xaa")


def test_extra_keys_ignored():
    raw = segment.ulpdu(Opcode.SEND, b"x")
    obj = ulpdu_to_json(raw)
    obj["comment"] = "hi"
    obj["ddp"]["note"] = 1
    assert ulpdu_from_json(obj) == raw


BASE_OBJ = {"ddp": {"t": 0, "l": 1, "dv": 1, "qn": 0, "msn": 1, "mo": 0},
            "rdmap": {"rv": 1, "opcode": 4, "name": "send_inv", "inval_stag": 5}, "payload": ""}


@pytest.mark.parametrize("path,field", [
    (("ddp",), "ulpdu.ddp"), (("rdmap",), "ulpdu.rdmap"), (("payload",), "ulpdu.payload"),
    (("ddp", "t"), "ddp.t"), (("ddp", "l"), "ddp.l"), (("ddp", "dv"), "ddp.dv"),
    (("ddp", "qn"), "ddp.qn"), (("ddp", "msn"), "ddp.msn"), (("ddp", "mo"), "ddp.mo"),
    (("rdmap", "rv"), "rdmap.rv"), (("rdmap", "inval_stag"), "rdmap.inval_stag"),
])
def test_missing_field_named(path, field):
    obj = json.loads(json.dumps(BASE_OBJ))
    target = obj
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        ulpdu_from_json(obj)


def test_missing_opcode_and_name():
    obj = json.loads(json.dumps(BASE_OBJ))
    del obj["rdmap"]["opcode"], obj["rdmap"]["name"]
    with pytest.raises(ValueError, match=r"rdmap\.opcode"):
        ulpdu_from_json(obj)


def test_missing_tagged_fields():
    obj = {"ddp": {"t": 1, "l": 1, "dv": 1, "stag": 1}, "rdmap": {"rv": 1, "opcode": 0}, "payload": ""}
    with pytest.raises(ValueError, match=r"ddp\.to"):
        ulpdu_from_json(obj)


def test_missing_sub_object_fields():
    obj = {"ddp": {"t": 0, "l": 1, "dv": 1, "qn": 1, "msn": 1, "mo": 0},
           "rdmap": {"rv": 1, "opcode": 1, "read_request": {"sink_stag": 1, "sink_to": 2, "size": 3,
                                                              "src_stag": 4}}}
    with pytest.raises(ValueError, match=r"read_request\.src_to"):
        ulpdu_from_json(obj)
    obj = {"ddp": {"t": 0, "l": 1, "dv": 1, "qn": 2, "msn": 1, "mo": 0},
           "rdmap": {"rv": 1, "opcode": 7, "terminate": {"layer": 1, "etype": 1, "ecode": 0,
                                                          "m": 0, "d": 1, "r": 0}}}
    with pytest.raises(ValueError, match=r"terminate\.ddp_header"):
        ulpdu_from_json(obj)


@pytest.mark.parametrize("bad", [
    {"ddp": {"t": 0, "l": 1, "dv": 1, "qn": -1, "msn": 1, "mo": 0}},
    {"ddp": {"t": 2, "l": 1, "dv": 1, "qn": 0, "msn": 1, "mo": 0}},
    {"ddp": {"t": 0, "l": 1, "dv": "1", "qn": 0, "msn": 1, "mo": 0}},
    {"payload": "xyz"},
    {"payload": 12},
    {"rdmap": {"rv": 1, "name": "nope"}},
    {"rdmap": []},
])
def test_bad_values(bad):
    obj = json.loads(json.dumps(BASE_OBJ))
    obj.update(bad)
    with pytest.raises(ValueError):
        ulpdu_from_json(obj)


def test_not_an_object():
    with pytest.raises(ValueError, match="ulpdu"):
        ulpdu_from_json([])


@given(st.binary(min_size=14, max_size=90))
def test_roundtrip_any_bytes(raw):
    try:
        obj = ulpdu_to_json(raw)
    except ProtocolError:
        assert raw[0] & 0x80 == 0 and len(raw) < 18
        return
    assert json.loads(json.dumps(obj)) == obj
    assert ulpdu_from_json(obj) == raw


messages = st.one_of(
    st.builds(lambda p, s, t, l: segment.ulpdu(Opcode.RDMA_WRITE, p, stag=s, to=t, last=l),
              st.binary(max_size=20), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.booleans()),
    st.builds(lambda op, p, m, o, i: segment.ulpdu(op, p, msn=m, mo=o,
                                                   inval_stag=i if op in (4, 6) else 0),
              st.sampled_from([Opcode.SEND, Opcode.SEND_INVALIDATE, Opcode.SEND_SE,
                               Opcode.SEND_SE_INVALIDATE]),
              st.binary(max_size=20), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
              st.integers(0, 2**32 - 1)),
    st.builds(lambda a, b, c, d, e: segment.ulpdu(Opcode.RDMA_READ_REQUEST, ReadRequest(
        sink_stag=a, sink_to=b, size=c, src_stag=d, src_to=e)),
        st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1),
        st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1)),
    st.builds(lambda layer, et, ec, r: segment.ulpdu(Opcode.TERMINATE, Terminate(
        layer=layer, etype=et, ecode=ec, m=True, d=True, r=r is not None, ddp_segment_length=46,
        ddp_header=segment.ulpdu(Opcode.RDMA_READ_REQUEST, b"")[:18], rdmap_header=r or b"")),
        st.integers(0, 2), st.integers(0, 2), st.integers(0, 255),
        st.one_of(st.none(), st.binary(min_size=28, max_size=28))),
)


@given(messages)
def test_roundtrip_without_payload(raw):
    obj = ulpdu_to_json(raw)
    assert ulpdu_from_json(obj) == raw
    if obj["rdmap"]["opcode"] in (1, 7):
        del obj["payload"]
        assert ulpdu_from_json(obj) == raw
    # JSON-to-bytes-to-JSON is the identity on canonical objects
    assert ulpdu_to_json(ulpdu_from_json(obj)) == ulpdu_to_json(raw)
