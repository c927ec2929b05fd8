"""``rnic listen`` and ``rnic connect`` negotiate each RFC 6581 combination with each other.

Every case is a real pair of processes on 127.0.0.1: revisions 1/2 on either
side, peer-to-peer with each RTR type, IRD/ORD (including 0x3FFF, "leave it
to the ULP"), markers either way, CRC from either side. Each case checks that
both ends agree on what was negotiated and that a Send then arrives.
"""

import json

import pytest

from tests.host.cli.test_listen_connect import Listener, by_event, run  # noqa: F401 (shared helpers)

CASES = [
    # id, listen args, connect args, expected (rev, p2p, rtr, markers c->l, markers l->c, crc)
    ("rev1-both", ["--rev", "1"], ["--rev", "1"], (1, False, None, False, False, True)),
    ("rev2-both", [], ["--rev", "2"], (2, False, None, False, False, True)),
    ("rev1-listener", ["--rev", "1"], ["--rev", "2"], (1, False, None, False, False, True)),
    ("rev1-initiator", [], ["--rev", "1"], (1, False, None, False, False, True)),
    ("p2p-send", [], ["--p2p", "--rtr", "send"], (2, True, "send", False, False, True)),
    ("p2p-write", [], ["--p2p", "--rtr", "write"], (2, True, "write", False, False, True)),
    ("p2p-read", [], ["--p2p", "--rtr", "read"], (2, True, "read", False, False, True)),
    ("p2p-listener-send-only", ["--rtr", "send"], ["--p2p", "--rtr", "send,write,read"],
     (2, True, "send", False, False, True)),
    ("markers-to-listener", ["--markers"], [], (2, False, None, True, False, True)),
    ("markers-to-initiator", [], ["--markers"], (2, False, None, False, True, True)),
    ("markers-both-no-crc", ["--markers", "--no-crc"], ["--markers", "--no-crc"],
     (2, False, None, True, True, False)),
    ("crc-from-listener", ["--crc"], ["--no-crc"], (2, False, None, False, False, True)),
    ("ird-ord-numbers", ["--ird", "3", "--ord", "5"], ["--ird", "7", "--ord", "2"],
     (2, False, None, False, False, True)),
    ("ird-ord-ulp", ["--ird", "16383", "--ord", "16383"], ["--ird", "16383", "--ord", "16383"],
     (2, False, None, False, False, True)),
]


@pytest.mark.parametrize("largs,cargs,expect", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_listen_connect_negotiate(largs, cargs, expect):
    rev, p2p, rtr, m_to_l, m_to_c, crc = expect
    lst = Listener(*largs)
    try:
        code, out, err = run("connect", lst.address, *cargs, "--send", "c0ffee", "--json")
        assert code == 0, err
        neg = json.loads(out)["negotiated"]
        lcode, lines, lerr = lst.finish()
    finally:
        lst.kill()
    assert lcode == 0, lerr
    (conn,) = by_event(lines, "connected")
    lneg = conn["negotiated"]
    assert neg["rev"] == lneg["rev"] == rev
    assert (neg["p2p"], lneg["p2p"]) == (p2p, p2p)
    assert (neg["rtr"], lneg["rtr"]) == (rtr, rtr)
    # markers: what the initiator sends = what the listener receives, and back
    assert (neg["markers_tx"], lneg["markers_rx"]) == (m_to_l, m_to_l)
    assert (neg["markers_rx"], lneg["markers_tx"]) == (m_to_c, m_to_c)
    assert neg["crc"] == lneg["crc"] == crc
    if rev == 2:
        # RFC 6581 sec. 9.1: each side's ORD fits the other side's IRD (0x3FFF: left to the ULP)
        for a, b in ((neg, lneg), (lneg, neg)):
            assert a["ord"] is not None and b["ird"] is not None
            assert a["ord"] <= b["ird"] or 0x3FFF in (a["ord"], b["ird"])
    (c,) = by_event(lines, "completion")
    assert c["data"] == "c0ffee"
