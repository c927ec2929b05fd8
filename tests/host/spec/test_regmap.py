"""The register map (rnic.host.spec.regmap): validity and its checks."""


import pytest

from rnic.host.spec import regmap as rm
from rnic.host.spec.regmap import PULSE, REGMAP, RO, RW, W1C, Block, Field, Register, RegisterMap, RegMapError


# -- the map itself -------------------------------------------------------------

def test_map_is_valid_and_sane():
    assert REGMAP.validate() is REGMAP
    assert REGMAP["ID"].addr == 0 and REGMAP["ID"].reset == rm.MAGIC == 0x69575250
    assert rm.MAGIC.to_bytes(4, "big") == b"iWRP"
    addrs = [r.addr for r in REGMAP]
    assert len(set(addrs)) == len(addrs) and all(a % 4 == 0 and a < REGMAP.size for a in addrs)
    for r in REGMAP:
        used = 0
        for f in r.fields:
            assert used & f.mask == 0, (r.name, f.name)
            used |= f.mask
            assert 0 <= f.reset <= f.max
        assert r.reset == sum(f.reset << f.offset for f in r.fields)
        assert REGMAP.at(r.addr + 3) is r
    assert REGMAP.at(0xFFC) is None
    assert set(REGMAP.params_used()) == {"width", "connections", "stags", "network", "arp_entries",
                                         "ird_depth", "ord_depth"}


def test_map_has_what_the_rnic_needs():
    """The windows of the brief, with the fields the gateware blocks use."""
    names = {r.name for r in REGMAP}
    for need in ("ID", "VERSION", "CAPS", "CTRL", "STATUS", "CONN_SEL", "CTX_TX", "CTX_RX",
                 "CTX_IRD_ORD", "CTX_STATE", "CTX_CMD", "CTX_STATUS", "CTX_ERROR", "ERR_STATUS",
                 "ERR_CONN", "ERR_INFO", "ERR_COUNT", "RX_FPDUS", "TX_FPDUS", "RX_CRC_ERRORS",
                 "RX_MARKER_ERRORS", "RX_OCTETS_LO", "RX_OCTETS_HI", "TX_OCTETS_LO", "TX_OCTETS_HI",
                 "STAG_INDEX", "STAG_KEY", "STAG_BASE_LO", "STAG_BASE_HI", "STAG_LENGTH", "STAG_ATTR",
                 "STAG_CMD", "RQ_CONN", "RQ_ADDR_LO", "RQ_ADDR_HI", "RQ_LENGTH", "RQ_ID", "RQ_CMD",
                 "SQ_WR", "SQ_LADDR_LO", "SQ_LADDR_HI", "SQ_LENGTH", "SQ_RSTAG", "SQ_RTO_LO", "SQ_RTO_HI",
                 "SQ_INV_STAG", "SQ_ID", "SQ_CMD", "CQ_STATUS", "CQ_WR_ID", "CQ_INFO", "CQ_LENGTH", "CQ_CMD"):
        assert need in names, need
    assert REGMAP["CTX_CMD"].field("COMMIT").access is PULSE
    assert REGMAP["STAG_CMD"].field("COMMIT").access is PULSE
    assert REGMAP["RQ_CMD"].field("POST").access is PULSE
    assert REGMAP["SQ_CMD"].field("DOORBELL").access is PULSE
    assert REGMAP["CQ_CMD"].field("POP").access is PULSE
    assert REGMAP["ERR_STATUS"].field("PENDING").access is W1C
    assert REGMAP["CTRL"].field("SOFT_RESET").access is PULSE
    assert REGMAP["CTRL"].field("ENABLE").access is RW
    # the context window carries every MpaConfig field of the MPA blocks
    from rnic.hdl.mpa_config import MpaConfig
    cfg = dict(MpaConfig(connections=16))
    for direction in ("CTX_TX", "CTX_RX"):
        for name, fld in cfg.items():
            if name == "conn":
                assert REGMAP["CONN_SEL"].field("CONN").width >= fld.width
            else:
                assert REGMAP[direction].field(name).width == fld.width, (direction, name)
    # the Terminate layout: Layer(4) EType(4) ErrorCode(8) from bit 31 down
    for name in ("ERR_INFO", "CTX_ERROR"):
        r = REGMAP[name]
        assert (r.field("LAYER").offset, r.field("ETYPE").offset, r.field("ECODE").offset) == (28, 24, 16)
    # build parameters: the widths of rnic.hdl.beat, and the RDMAP opcodes of the model
    from rnic.hdl.beat import WIDTHS
    assert tuple(rm.PARAMS["width"]) == WIDTHS
    from rnic.host.model import rdmap
    for op in rm.SqOpcode:
        assert rdmap.opcode_name(int(op)) != "unknown"


def _one(*fields, addr=0x10, access=RW, name="R"):
    return RegisterMap([Block("b", "", (Register(name, addr, access, "", tuple(fields)),))])


@pytest.mark.parametrize("build, match", [
    (lambda: RegisterMap([Block("b", "", (Register("A", 0x10), Register("B", 0x10)))]), "overlaps A"),
    (lambda: RegisterMap([Block("b", "", (Register("A", 0x10), Register("A", 0x14)))]), "used twice"),
    (lambda: _one(addr=0x12), "not 4-aligned"),
    (lambda: _one(addr=0x1000), "outside"),
    (lambda: _one(name="lower"), "C identifier"),
    (lambda: _one(Field("A", 0, 8), Field("B", 4, 8)), "overlaps R.A"),
    (lambda: _one(Field("A", 30, 4)), "does not fit a 32-bit"),
    (lambda: _one(Field("A", 0, 2, reset=4)), "reset 0x4 does not fit"),
    (lambda: _one(Field("A", 0, 1, access=PULSE, reset=1)), "pulse field resets to 0"),
    (lambda: _one(Field("A", 0, 8, const=True)), "only RO fields"),
    (lambda: _one(Field("A", 0, 8, param="width"), access=RO, name="P"), None),
    (lambda: _one(Field("A", 0, 4, param="connections"), access=RO), "cannot hold every legal"),
    (lambda: _one(Field("A", 0, 8, param="nope"), access=RO), "unknown build parameter"),
    (lambda: _one(Field("A", 0, 2, enum={"X": 4})), "enum X=4 does not fit"),
    (lambda: _one(Field("A", 0, 1, access=W1C), Field("A_SET", 1, 1)), "port name a_set used twice"),
    (lambda: _one(Field("A", 0, 1), Field("A", 1, 1)), "used twice"),
    (lambda: _one(Field("IF", 0, 1)), "interface member"),
    (lambda: RegisterMap([Block("b", "", (Register("X", 0x10, fields=(Field("Y_ADDR", 0, 1),)),
                                          Register("X_Y", 0x14, fields=(Field("Z", 0, 1),))))]), None),
    (lambda: RegisterMap([Block("b", "", (Register("X", 0x10, fields=(Field("RESET", 0, 1),
                                                                            Field("B", 1, 1))),
                                          Register("X_RESET", 0x14, fields=(Field("B", 0, 1),))))]),
     "produced twice"),
    (lambda: Register("R", 0, fields=(Field("A", 0, 4, reset=3),), reset=5), "disagrees"),
])
def test_bad_maps_raise(build, match):
    if match is None:
        build()                   # legal
        return
    with pytest.raises(RegMapError, match=match):
        build()


def test_check_params():
    REGMAP.check_params({"width": 8, "connections": 1024, "stags": 256})
    with pytest.raises(ValueError, match="width=12"):
        REGMAP.check_params({"width": 12, "connections": 4, "stags": 1})
    with pytest.raises(ValueError, match="connections=0"):
        REGMAP.check_params({"width": 8, "connections": 0, "stags": 1})
    with pytest.raises(ValueError, match="connections=65536"):
        REGMAP.check_params({"width": 8, "connections": 65536, "stags": 1})
    with pytest.raises(TypeError, match="'stags' is required"):
        REGMAP.check_params({"width": 8, "connections": 4})
    with pytest.raises(TypeError, match="unknown build parameter"):
        REGMAP.check_params({"width": 8, "connections": 4, "stags": 1, "depth": 3})
    with pytest.raises(ValueError, match="network=2"):
        REGMAP.check_params({"width": 8, "connections": 4, "stags": 1, "network": 2})
    with pytest.raises(ValueError, match="arp_entries=65"):
        REGMAP.check_params({"width": 8, "connections": 4, "stags": 1, "arp_entries": 65})


def test_optional_parameters_default_to_absent():
    """A design without a network layer or RDMA Reads reports them as 0."""
    assert rm.PARAM_DEFAULTS == {"network": 0, "arp_entries": 0, "ird_depth": 0, "ord_depth": 0}
    full = REGMAP.complete_params({"width": 8, "connections": 4, "stags": 2})
    assert full == {"width": 8, "connections": 4, "stags": 2, "network": 0, "arp_entries": 0,
                    "ird_depth": 0, "ord_depth": 0}
    assert REGMAP.complete_params({"width": 8, "connections": 4, "stags": 2, "network": 1,
                                   "arp_entries": 8})["network"] == 1


def test_network_block():
    """The Network block: addresses and resets are the spec's defaults, one RX counter per
    RxDrop value at NET_RX_BASE + 4 * value, inside the window and after the other blocks."""
    import ipaddress

    from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX, RxDrop
    block = rm.NET_BLOCK
    assert block in REGMAP.blocks
    assert all(0x400 <= r.addr < 0x500 for r in block.registers)
    mac = REGMAP["NET_MAC_HI"].reset << 32 | REGMAP["NET_MAC_LO"].reset
    assert mac.to_bytes(6, "big") == DEFAULT_NIC_MAC
    assert REGMAP["NET_IP"].reset == int(ipaddress.IPv4Address(DEFAULT_NIC_IP)) == 0xA9FE0702
    assert REGMAP["NET_PREFIX"].reset == DEFAULT_PREFIX
    assert REGMAP["NET_MAX_LEN"].reset == 1514
    assert [reason for reason, _ in rm.NET_RX_COUNTERS] == list(RxDrop)
    for reason, name in rm.NET_RX_COUNTERS:
        r = REGMAP[name]
        assert r.addr == rm.NET_RX_BASE + 4 * reason and r.access_summary == "ro"
        assert r.fields[0].width == 32
    assert REGMAP["NET_RX_GOOD"].addr == rm.NET_RX_BASE
    # the last reason's counter is the word below NET_RX_TCP: RxDrop has no room for more
    assert rm.NET_RX_BASE + 4 * max(RxDrop) + 4 == REGMAP["NET_RX_TCP"].addr
    caps = REGMAP["NET_CAPS"]
    assert caps.field("NETWORK").param == "network" and caps.field("ARP_ENTRIES").param == "arp_entries"
    assert {f.name for f in REGMAP["NET_ARP_CMD"].fields} == {"WRITE", "REQUEST"}
    assert REGMAP["NET_ARP_CMD"].access_summary == "pulse"
    assert REGMAP["NET_ARP_ENTRY"].field("INDEX").max >= 63
