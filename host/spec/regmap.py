"""The RNIC register map: the one source of truth for every view of the registers.

Everything that knows a register address or a bit position is derived from
:data:`REGMAP`, defined below as plain Python data:

* the gateware register bank (:class:`rnic.hdl.regbank.RegisterBank`), generated
  from it at elaboration time;
* the Python driver's constants and typed access helpers
  (:mod:`rnic.host.driver.regs`), built from it at import time;
* the C header ``firmware/rnic_regs.h`` and the reference
  ``docs/registers.md``, generated files that are committed so that C code
  and readers need no Python. Regenerate them after editing this file::

      python -m rnic.host.tools.codegen --write      # rewrite the generated files
      python -m rnic.host.tools.codegen --check      # exit status 1 if they are stale

  (:mod:`rnic.host.tools.codegen` writes them; ``tests/host/tools/test_codegen.py``
  fails while they are stale.)

The map is checked when this module is imported (:meth:`RegisterMap.validate`):
4-aligned, unique, non-overlapping addresses inside the window; unique names
that are C identifiers; fields inside 32 bits and not overlapping; reset
values and enum values that fit their fields; access rules (constants and
build parameters only on read-only fields, pulse fields reset to 0); and no
two generated names (C macros, bank ports) that collide. A bad map raises
:class:`RegMapError` at import.

The access types and bus rules are in :data:`ACCESS_DOC` and :data:`BUS_DOC`
(appended below, and in the Markdown reference).
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import keyword
import re
from dataclasses import dataclass

from rnic.host.spec.errors import Layer
from rnic.host.spec.net import (DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PREFIX, MAX_FRAME_LEN,
                                RxDrop, TxDrop)
from rnic.host.spec.tcp_engine import (DEFAULT_DELACK, DEFAULT_MAX_RETRIES, DEFAULT_RCV_WND,
                                       DEFAULT_RTO_INITIAL, DEFAULT_RTO_MAX, DEFAULT_RTO_MIN,
                                       DEFAULT_TIME_WAIT, ENGINE_MSS, MIN_RING_LOG2, TcpDrop,
                                       TcpConnectResult, TcpEventKind, TcpState)

#: Access types, per field (a register's ``access`` is the default of its fields).
ACCESS_DOC = """\
- `RW`: read/write storage in the bank; the value drives the core (a bank output).
- `RO`: read-only; the value comes from the core (a bank input), or is a constant
  (`const=True`: the reset value) or a build parameter of the elaborated design
  (`param="width"`, ...). Writes are ignored.
- `PULSE` (write-only strobe, also `WO`): writing 1 bits makes the bank output
  carry them for exactly one clock cycle (the written field value, 0 otherwise).
  Reads return 0.
- `W1C`: sticky status set by the core (a `<field>_set` bank input, OR-ed in every
  cycle) and cleared by writing 1 to the bit; writing 0 leaves it. A set and a
  clear in the same cycle: the set wins. The value is also a bank output, so the
  core sees what is pending.
"""

#: What the bus does (AXI4-Lite, 32-bit data, byte addresses; see :mod:`rnic.hdl.regbank`).
BUS_DOC = """\
AXI4-Lite, 32-bit data, byte addresses. Registers are 32 bits at 4-aligned byte
addresses inside a 4 KiB window (12 address bits decoded; address bits 1..0 are
ignored, the byte strobes select the bytes). Byte strobes apply to every access
type: a strobed-off byte of a RW field keeps its value, of a W1C field clears
nothing, of a PULSE field fires nothing. Reads have no side effects. An address
that maps no register answers SLVERR (reads return 0, writes are dropped); a
write to a read-only register answers OKAY and changes nothing. One read and one
write are served at a time (they proceed independently); the write response comes
three clock cycles after the address/data handshake (the write has taken effect
when it comes), the read data four cycles after the address handshake (registers
are sampled in the cycle after the handshake).
"""

__doc__ = (__doc__ or "") + "\nAccess types\n------------\n" + ACCESS_DOC + "\nBus rules\n---------\n" + BUS_DOC

__all__ = [
    "Access", "RW", "RO", "PULSE", "WO", "W1C",
    "Field", "Register", "RegisterMap", "RegMapError",
    "ConnState", "SqOpcode", "CqQueue", "CqStatus", "DpCrc", "DpError",
    "MAGIC", "VERSION_MAJOR", "VERSION_MINOR", "ADDR_WIDTH", "PARAMS", "PARAM_DEFAULTS", "REGMAP",
    "ACCESS_DOC", "BUS_DOC", "NET_RX_COUNTERS", "NET_TX_DROP_COUNTERS", "NET_BLOCK",
    "TCP_BLOCK", "TCP_DROP_COUNTERS", "TCP_PARAMS", "TCP_COUNTER_BASE", "TCP_COUNTER_WORDS", "constants",
]

#: Register 0 (``ID``) reads this: ASCII "iWRP" (0x69 0x57 0x52 0x50), most significant byte first.
MAGIC = 0x69575250
#: Register map version. MAJOR changes when a driver built for another map would misbehave
#: (moved or removed registers, changed field meanings); MINOR when registers or fields are added.
#: While MAJOR is 0 (before the first release) a changed meaning moves MINOR too.
VERSION_MAJOR = 0
VERSION_MINOR = 13
#: Address bits decoded by the bank: a 4 KiB window.
ADDR_WIDTH = 12
DATA_BITS = 32

#: Build parameters that RO fields may report (``Field.param``), with their legal values.
#: The register bank takes them as keyword arguments and checks them against these.
PARAMS = {
    "width":       (4, 8, 16, 32),           # datapath width W in octets (rnic.hdl.beat.WIDTHS)
    "connections": range(1, 1 << 16),        # connection contexts (ids fit the 16-bit CONN fields)
    "stags":       range(1, 1 << 16),        # rows of the STag table
    "network":     (0, 1),                   # 1: the network layer (MAC, ARP, IPv4, ICMP) is present
    "arp_entries": range(0, 65),             # ARP cache slots (0 without a network layer)
    "ird_depth":   range(0, 1 << 16),        # inbound RDMA Read Requests held per connection
    "ord_depth":   range(0, 1 << 16),        # outbound RDMA Reads tracked per connection
}
#: Build parameters a design may leave out, with the value they then report: a design without
#: a network layer reports NET_CAPS.NETWORK 0 without naming it, one without RDMA Reads
#: QUEUE_CAPS 0.
PARAM_DEFAULTS = {"network": 0, "arp_entries": 0, "ird_depth": 0, "ord_depth": 0}


class RegMapError(ValueError):
    """The register map is inconsistent (raised at import of a bad map)."""


class Access(enum.Enum):
    RO = "ro"
    RW = "rw"
    PULSE = "pulse"
    W1C = "w1c"

    def __str__(self):
        return self.value


RO, RW, PULSE, W1C = Access.RO, Access.RW, Access.PULSE, Access.W1C
#: Write-only strobe: the same as :data:`PULSE`.
WO = PULSE


# ---------------------------------------------------------------------------
# enumerations used by fields (values are part of the map: the C header and the docs list them)

class ConnState(enum.IntEnum):
    """State of a connection context (``CTX_STATE.STATE``, ``CTX_STATUS.STATE``)."""
    IDLE = 0       # no connection: nothing is sent, received octets are dropped
    RTS = 1        # streaming mode: FPDUs flow both ways
    WAIT_RX = 2    # MPA fence (RFC 5044 responder / RFC 6581 RTR): TX held until the first FPDU is received, then RTS
    CLOSING = 3    # a Terminate was sent or received: no new work requests, in-flight ones finish
    ERROR = 4      # stopped by an error (see CTX_ERROR); only COMMIT restarts the context


class SqOpcode(enum.IntEnum):
    """Work request opcodes (``SQ_WR.OPCODE``, ``CQ_INFO.OPCODE``): the RDMAP opcodes of RFC 5040."""
    RDMA_WRITE = 0
    RDMA_READ = 1          # RDMA Read Request; data lands at SQ_LSTAG/SQ_LADDR
    SEND = 3
    SEND_INV = 4           # Send with Invalidate of SQ_INV_STAG at the peer
    SEND_SE = 5            # Send with Solicited Event
    SEND_SE_INV = 6


class CqQueue(enum.IntEnum):
    """Which queue a completion belongs to (``CQ_INFO.QUEUE``)."""
    SQ = 0     # a work request posted with SQ_CMD.DOORBELL (SIGNALED) finished
    RQ = 1     # a receive buffer posted with RQ_CMD.POST was filled by a Send


class CqStatus(enum.IntEnum):
    """Completion status (``CQ_INFO.STATUS``)."""
    SUCCESS = 0
    LOCAL_LENGTH = 1       # received message longer than the posted buffer
    LOCAL_PROTECTION = 2   # local STag/address check failed (e.g. RDMA Read sink)
    BAD_REQUEST = 3        # invalid opcode, connection or length in the work request
    REMOTE_ERROR = 4       # the peer answered with a Terminate
    FLUSHED = 5            # the connection left RTS before the request ran


class DpCrc(enum.IntEnum):
    """CRC verdict of a received ULPDU (``DP_RX_STATUS.CRC``).

    Also the type of the ``crc`` field of the RX deframer's output beats (named ``CrcStatus`` in
    ``rnic.hdl.mpa_config``), 2 bits.
    """
    UNCHECKED = 0  # CRC checking is off for the connection
    OK = 1
    BAD = 2


class DpError(enum.IntEnum):
    """Why a received ULPDU was not delivered (``DP_RX_STATUS.ERROR``).

    Also the type of the ``error`` field of the RX deframer's output beats (named ``RxError`` in
    ``rnic.hdl.mpa_config``), 3 bits.
    """
    NONE = 0
    CRC = 1        # MPA error 2: the octets were passed on, the CRC did not match
    MARKER = 2     # MPA error 3: a marker's FPDUPTR disagrees with the ULPDU_Length chain
    TOO_LONG = 3   # ULPDU_Length above the connection's RX MULPDU (no octets)
    TOO_SHORT = 4  # ULPDU_Length below the DDP header its first octet announces (no octets)
    ABORTED = 5    # the connection's context was rewritten (COMMIT) inside the ULPDU


# ---------------------------------------------------------------------------
# data model

_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclass(frozen=True)
class Field:
    """A bit field of a register.

    ``access`` None takes the register's access. ``enum`` (an IntEnum class or
    a mapping name -> value) names values of the field. ``const`` makes an RO
    field a constant equal to ``reset``; ``param`` makes it report a build
    parameter of the elaborated design (a key of :data:`PARAMS`). For a
    core-driven RO field ``reset`` only documents what the core reports after
    reset.
    """
    name: str
    offset: int
    width: int = 1
    access: Access | None = None
    reset: int = 0
    doc: str = ""
    enum: tuple = ()
    const: bool = False
    param: str | None = None

    def __post_init__(self):
        e = self.enum
        if isinstance(e, type) and issubclass(e, enum.Enum):
            e = tuple((m.name, int(m.value)) for m in e)
        elif isinstance(e, dict):
            e = tuple((str(k), int(v)) for k, v in e.items())
        else:
            e = tuple((str(k), int(v)) for k, v in (e or ()))
        object.__setattr__(self, "enum", e)

    @property
    def msb(self):
        return self.offset + self.width - 1

    @property
    def mask(self):
        """The field's bits, in register position."""
        return ((1 << self.width) - 1) << self.offset

    @property
    def max(self):
        return (1 << self.width) - 1

    @property
    def bits(self):
        """Bit range as written in the docs: ``[7:0]`` or ``[3]``."""
        return f"[{self.msb}:{self.offset}]" if self.width > 1 else f"[{self.offset}]"

    @property
    def port(self):
        """Member name of the field on the register bank's core-side interface."""
        return self.name.lower()

    @property
    def core_facing(self):
        """True if the field has a bank port (everything but constants and parameters)."""
        return not (self.const or self.param)

    def enum_value(self, name):
        for k, v in self.enum:
            if k == name:
                return v
        raise KeyError(f"field {self.name} has no value named {name!r} (has {[k for k, _ in self.enum]})")


@dataclass(frozen=True)
class Register:
    """A 32-bit register at byte address ``addr`` with its ``fields``.

    ``access`` is the default access of fields that do not give one and the
    access of the implicit field when ``fields`` is empty (one 32-bit field
    named ``VALUE``). ``reset`` is computed from the fields; if given it must
    agree.
    """
    name: str
    addr: int
    access: Access = RW
    doc: str = ""
    fields: tuple = ()
    reset: int | None = None

    def __post_init__(self):
        fields = tuple(self.fields) or (Field("VALUE", 0, DATA_BITS),)
        fields = tuple(f if f.access is not None else dataclasses.replace(f, access=self.access)
                       for f in fields)
        object.__setattr__(self, "fields", tuple(sorted(fields, key=lambda f: f.offset)))
        computed = 0
        for f in self.fields:
            if 0 <= f.reset <= f.max and f.offset >= 0:
                computed |= f.reset << f.offset
        if self.reset is not None and self.reset != computed:
            raise RegMapError(f"{self.name}: reset {self.reset:#x} disagrees with its fields' resets "
                              f"({computed:#x})")
        object.__setattr__(self, "reset", computed)

    @property
    def port(self):
        """Member name of the register on the register bank's core-side interface."""
        return self.name.lower()

    def field(self, name):
        for f in self.fields:
            if f.name == name.upper():
                return f
        raise KeyError(f"register {self.name} has no field {name!r} "
                       f"(fields: {', '.join(f.name for f in self.fields)})")

    def mask(self, *accesses):
        """Bits of the fields with one of ``accesses`` (all fields if none given)."""
        return sum(f.mask for f in self.fields if not accesses or f.access in accesses)

    @property
    def rw_mask(self):
        """Bits that hold writable state: what a read-modify-write may write back."""
        return self.mask(RW)

    @property
    def access_summary(self):
        kinds = []
        for f in self.fields:
            if str(f.access) not in kinds:
                kinds.append(str(f.access))
        return "/".join(kinds)

    @property
    def core_facing(self):
        return any(f.core_facing for f in self.fields)


@dataclass(frozen=True)
class Block:
    """A titled group of registers (for the docs and the header's layout)."""
    title: str
    doc: str
    registers: tuple


class RegisterMap:
    """An ordered, checked collection of registers (see the module docstring for the rules)."""

    def __init__(self, blocks, *, name="RNIC", addr_width=ADDR_WIDTH, version=(VERSION_MAJOR, VERSION_MINOR)):
        self.name = name
        self.addr_width = addr_width
        self.size = 1 << addr_width
        self.version = version
        self.blocks = tuple(blocks)
        self.registers = tuple(r for b in self.blocks for r in b.registers)
        self.validate()

    # lookups
    def __iter__(self):
        return iter(self.registers)

    def __len__(self):
        return len(self.registers)

    def __getitem__(self, name):
        try:
            return self._by_name[name.upper()]
        except KeyError:
            raise KeyError(f"no register {name!r} in the {self.name} map") from None

    def __contains__(self, name):
        return isinstance(name, str) and name.upper() in self._by_name

    def at(self, addr):
        """The register at byte address ``addr`` (any byte inside it), or None."""
        return self._by_addr.get(addr & ~3)

    def params_used(self):
        return sorted({f.param for r in self for f in r.fields if f.param})

    def complete_params(self, params):
        """``params`` with the :data:`PARAM_DEFAULTS` it leaves out, checked."""
        params = {**PARAM_DEFAULTS, **params}
        self.check_params(params)
        return params

    def decoded(self, params):
        """The map as a build with ``params`` decodes it: without the network layer
        (``network`` 0) the Network block's registers but NET_CAPS, and the TCP block's, read
        0 and ignore writes (constant fields), so that a design without one spends no logic
        on them."""
        if self.complete_params(params)["network"]:
            return self
        blocks = []
        for b in self.blocks:
            if b.title in (NET_BLOCK.title, TCP_BLOCK.title):
                b = dataclasses.replace(b, registers=tuple(
                    r if r.name == "NET_CAPS" else _absent(r) for r in b.registers))
            blocks.append(b)
        return RegisterMap(blocks, name=self.name, addr_width=self.addr_width,
                           version=self.version)

    def check_params(self, params):
        """Check build parameters (``{"width": 8, ...}``) against :data:`PARAMS` and the RO fields."""
        for name in self.params_used():
            if name not in params and name not in PARAM_DEFAULTS:
                raise TypeError(f"build parameter {name!r} is required (the map reports it)")
        for name, value in params.items():
            if name not in PARAMS:
                raise TypeError(f"unknown build parameter {name!r} (known: {', '.join(PARAMS)})")
            if not isinstance(value, int) or isinstance(value, bool) or value not in PARAMS[name]:
                allowed = PARAMS[name]
                text = f"{allowed.start}..{allowed.stop - 1}" if isinstance(allowed, range) else str(allowed)
                raise ValueError(f"build parameter {name}={value!r} is not one of {text}")
            for r in self:
                for f in r.fields:
                    if f.param == name and value > f.max:
                        raise ValueError(f"{name}={value} does not fit {r.name}.{f.name} ({f.width} bits)")

    # checks
    def validate(self):
        def err(text):
            raise RegMapError(f"register map {self.name}: {text}")

        self._by_name = {}
        self._by_addr = {}
        seen_blocks = set()
        for b in self.blocks:
            if b.title in seen_blocks:
                err(f"block title {b.title!r} used twice")
            seen_blocks.add(b.title)
        for r in self.registers:
            if not _NAME.match(r.name):
                err(f"register name {r.name!r} is not an upper-case C identifier")
            if r.name in self._by_name:
                err(f"register name {r.name} used twice")
            if not isinstance(r.access, Access):
                err(f"{r.name}: access {r.access!r} is not an Access")
            if not isinstance(r.addr, int) or r.addr % 4:
                err(f"{r.name}: address {r.addr!r} is not 4-aligned")
            if not 0 <= r.addr < self.size:
                err(f"{r.name}: address {r.addr:#x} is outside the {self.size:#x}-byte window")
            if r.addr in self._by_addr:
                err(f"{r.name} at {r.addr:#05x} overlaps {self._by_addr[r.addr].name}")
            if "*/" in r.doc:
                err(f"{r.name}: doc must not contain '*/'")
            self._by_name[r.name] = r
            self._by_addr[r.addr] = r
            used = 0
            names = set()
            for f in r.fields:
                where = f"{r.name}.{f.name}"
                if not _NAME.match(f.name):
                    err(f"field name {where} is not an upper-case C identifier")
                if f.name in names:
                    err(f"field name {where} used twice")
                names.add(f.name)
                if keyword.iskeyword(f.port) or f.port in ("signature",):
                    err(f"field name {where} cannot be an interface member")
                if not isinstance(f.access, Access):
                    err(f"{where}: access {f.access!r} is not an Access")
                if not (isinstance(f.width, int) and f.width >= 1 and isinstance(f.offset, int) and f.offset >= 0):
                    err(f"{where}: bad offset/width {f.offset}/{f.width}")
                if f.msb >= DATA_BITS:
                    err(f"{where} {f.bits} does not fit a {DATA_BITS}-bit register")
                if used & f.mask:
                    other = next(g.name for g in r.fields if g is not f and g.mask & f.mask)
                    err(f"{where} {f.bits} overlaps {r.name}.{other}")
                used |= f.mask
                if not 0 <= f.reset <= f.max:
                    err(f"{where}: reset {f.reset:#x} does not fit {f.width} bits")
                if f.access is PULSE and f.reset:
                    err(f"{where}: a pulse field resets to 0")
                if (f.const or f.param) and f.access is not RO:
                    err(f"{where}: only RO fields can be constants or parameters")
                if f.const and f.param:
                    err(f"{where}: either const or param, not both")
                if f.param is not None:
                    if f.param not in PARAMS:
                        err(f"{where}: unknown build parameter {f.param!r}")
                    if max(PARAMS[f.param]) > f.max:
                        err(f"{where}: {f.width} bits cannot hold every legal {f.param}")
                if "*/" in f.doc:
                    err(f"{where}: doc must not contain '*/'")
                enum_names = set()
                for k, v in f.enum:
                    if not _NAME.match(k):
                        err(f"{where}: enum name {k!r} is not an upper-case C identifier")
                    if k in enum_names:
                        err(f"{where}: enum name {k} used twice")
                    enum_names.add(k)
                    if not 0 <= v <= f.max:
                        err(f"{where}: enum {k}={v} does not fit {f.width} bits")
            # core-side port names: <field> and, for W1C, <field>_set
            ports = set()
            for f in r.fields:
                if not f.core_facing:
                    continue
                for p in (f.port, f.port + "_set") if f.access is W1C else (f.port,):
                    if p in ports:
                        err(f"{r.name}: bank port name {p} used twice")
                    ports.add(p)
        # generated names (C macros / Python constants) must be unique
        try:
            _constant_list(self)
        except RegMapError as e:
            err(str(e))
        return self


# ---------------------------------------------------------------------------
# the map

def _reg(name, addr, access, doc, *fields, **kw):
    return Register(name, addr, access, doc, tuple(fields), **kw)


def _word(name, addr, access, field, doc, field_doc=None):
    """A register holding one 32-bit field."""
    return Register(name, addr, access, doc, (Field(field, 0, 32, doc=field_doc or doc),))


def _f(name, offset, width=1, doc="", **kw):
    return Field(name, offset, width, doc=doc, **kw)


def _err_fields(what):
    return (
        _f("ECODE", 16, 8, f"Error code of {what}."),
        _f("ETYPE", 24, 4, f"Error type of {what}."),
        _f("LAYER", 28, 4, f"Layer of {what}: 0 RDMAP, 1 DDP, 2 LLP (MPA).", enum=Layer),
    )


def _mpa_dir(name, addr, direction, peer):
    return _reg(
        name, addr, RW,
        f"{direction} MPA configuration of the selected connection, applied by CTX_CMD.COMMIT.",
        _f("MARKERS", 0, 1, f"Markers in the {direction} stream (negotiated: M bit of the {peer} frame)."),
        _f("CRC", 1, 1, "CRCs generated (TX) / checked (RX); when 0 the CRC field is sent as zeros / ignored."),
        _f("PHASE", 4, 9, f"Stream offset of the {direction} stream's next octet minus its marker origin, "
                          "modulo 512; a multiple of 4."),
        _f("MULPDU", 16, 16, "Largest ULPDU_Length: sent (TX segmentation) / accepted (RX, larger is an error)."),
    )


# ---------------------------------------------------------------------------
# the network layer's registers

#: Receive counters of the network block, one per :class:`~rnic.host.spec.net.RxDrop` value
#: (``NONE``: good frames), at ``NET_RX_BASE + 4 * value``: ``(reason, register name)``.
NET_RX_BASE = 0x440
NET_RX_COUNTERS = tuple((reason, "NET_RX_GOOD" if reason is RxDrop.NONE else f"NET_RX_{reason.name}")
                        for reason in RxDrop)

#: Counters of the send path's drops, one per :class:`~rnic.host.spec.net.TxDrop` reason but
#: ``NONE``: ``(reason, register name)``.
NET_TX_DROP_COUNTERS = tuple((reason, f"NET_TX_{reason.name}") for reason in TxDrop
                             if reason is not TxDrop.NONE)

_NET_TX_DROP_DOC = {
    TxDrop.NO_ROUTE: "TCP segments dropped by the send path: the destination is outside the "
                     "prefix and NET_GATEWAY is 0.",
    TxDrop.ARP_MISS: "TCP segments dropped by the send path: the next hop is not in the ARP cache "
                     "(an ARP request for it was sent instead; TCP sends again when its timers "
                     "say).",
}

_NET_RX_DOC = {
    RxDrop.NONE: "Frames the MAC accepted (good FCS, length, address), ARP and IP ones included.",
    RxDrop.FCS: "Frames dropped by the MAC: bad FCS or a PHY error.",
    RxDrop.RUNT: "Frames dropped by the MAC: shorter than 60 octets (without FCS).",
    RxDrop.GIANT: "Frames dropped by the MAC: longer than NET_MAX_LEN.",
    RxDrop.OTHER_MAC: "Frames dropped by the MAC: unicast to another address.",
    RxDrop.OVERFLOW: "Frames dropped by the MAC: no room in its receive buffer.",
    RxDrop.ETHERTYPE: "Frames dropped by the network layer: neither IPv4 nor ARP (VLAN tags included).",
    RxDrop.ARP_OTHER: "ARP packets dropped: malformed, or for another address.",
    RxDrop.IP_HEADER: "IPv4 packets dropped: version not 4, options, or a total length that does "
                      "not fit the frame.",
    RxDrop.IP_CHECKSUM: "IPv4 packets dropped: bad header checksum.",
    RxDrop.IP_FRAGMENT: "IPv4 packets dropped: fragments (MF or a fragment offset).",
    RxDrop.IP_OTHER: "IPv4 packets dropped: for another address.",
    RxDrop.IP_PROTOCOL: "IPv4 packets dropped: a protocol with no handler (neither ICMP nor TCP).",
    RxDrop.ICMP_OTHER: "ICMP messages dropped: not an echo request, or a bad ICMP checksum.",
    RxDrop.TCP_CHECKSUM: "TCP segments dropped: the checksum over the pseudo-header and the "
                         "segment does not verify.",
    RxDrop.TCP_HEADER: "TCP segments dropped: shorter than 20 octets, a data offset below 5, or "
                       "a header (data offset x 4 octets) longer than the segment.",
}


def _mac_regs(prefix, addr, access, doc, reset=None):
    """The two registers of a MAC address at ``addr``: ``<prefix>_HI`` octets 0..1 (bits
    47..32), ``<prefix>_LO`` octets 2..5 (bits 31..0); octet 0 is the first on the wire."""
    value = 0 if reset is None else int.from_bytes(reset, "big")
    return (
        _reg(f"{prefix}_HI", addr, access, f"{doc}, bits 47..32 (octets 0 and 1 on the wire: "
             "octet 0 in bits 15..8).", _f("MAC", 0, 16, "MAC address bits 47..32.", reset=value >> 32)),
        _reg(f"{prefix}_LO", addr + 4, access, f"{doc}, bits 31..0 (octets 2..5: octet 5 in bits "
             "7..0).", _f("MAC", 0, 32, "MAC address bits 31..0.", reset=value & 0xFFFFFFFF)),
    )


def _absent(register):
    """``register`` in a build that lacks its block: one constant field reading 0."""
    return dataclasses.replace(register, access=RO, reset=None, fields=(
        Field("ABSENT", 0, 32, RO, 0, "Not in this build: reads 0, writes are ignored.",
              const=True),))


NET_BLOCK = Block(
    "Network", "The network layer below TCP (MAC, ARP, IPv4, ICMP echo; see rnic.hdl.net): the "
    "NIC's addresses, frame counters and the ARP cache. They mean something only where "
    "NET_CAPS.NETWORK is 1 (elsewhere they read 0 and ignore writes). "
    "Addresses are big-endian: the first octet on the wire in the top bits (IPv4 169.254.7.2 is "
    "0xA9FE0702). Change the addresses and NET_MAX_LEN only while no frame is moving. The "
    "counters are 32 bits, wrap, count from reset (CTRL.CLEAR_COUNTERS and SOFT_RESET leave them): "
    "take differences. Every received frame counts once: in NET_RX_GOOD when the MAC accepts it, "
    "else for its MAC drop reason; a good frame the network layer drops counts again for its "
    "network reason, one it passes to TCP in NET_RX_TCP.", (
        _reg("NET_CAPS", 0x400, RO, "Network build parameters.",
             _f("NETWORK", 0, 1, "1: this build has the network layer (the NET_* registers act); "
                                 "0: it has none (build parameter).", param="network"),
             _f("ARP_ENTRIES", 8, 8, "Slots of the ARP cache: NET_ARP_ENTRY.INDEX 0 .. ARP_ENTRIES-1 "
                                     "(build parameter; 0 without a network layer).",
                param="arp_entries")),
        *_mac_regs("NET_MAC", 0x404, RW, "The NIC's MAC address", DEFAULT_NIC_MAC),
        _reg("NET_IP", 0x40C, RW, "The NIC's IPv4 address.",
             _f("IP", 0, 32, "IPv4 address: ARP answers for it, ICMP echo and TCP take packets for it.",
                reset=int(ipaddress.IPv4Address(DEFAULT_NIC_IP)))),
        _reg("NET_PREFIX", 0x410, RW, "The NIC's network prefix.",
             _f("PREFIX", 0, 6, "Prefix length 0 .. 32: the send path sends to destinations "
                                "inside NET_IP/PREFIX directly, to others through "
                                "NET_GATEWAY.", reset=DEFAULT_PREFIX)),
        _reg("NET_MAX_LEN", 0x414, RW, "Receive size limit.",
             _f("LEN", 0, 16, "Longest frame the MAC accepts, in octets without FCS (longer: "
                              "GIANT).", reset=MAX_FRAME_LEN)),
        _word("NET_GATEWAY", 0x418, RW, "IP", "IPv4 address of the next hop for destinations "
              "outside the prefix (inside it); 0: none, such packets are dropped (NO_ROUTE). Used by "
              "the send path, which sends for TCP."),
        *(_word(name, NET_RX_BASE + 4 * reason, RO, "COUNT", _NET_RX_DOC[reason])
          for reason, name in NET_RX_COUNTERS),
        _word("NET_RX_TCP", 0x480, RO, "COUNT", "IPv4 TCP packets for the NIC's address with good "
              "IPv4 and TCP headers and a good TCP checksum, handed to the TCP engine."),
        _word("NET_TX_FRAMES", 0x484, RO, "COUNT", "Frames sent (ARP, echo replies, TCP)."),
        _word("NET_TX_DROPPED", 0x488, RO, "COUNT", "Frames to send dropped for being longer than "
              "the MAC's transmit buffer."),
        *(_word(name, 0x488 + 4 * reason, RO, "COUNT", _NET_TX_DROP_DOC[reason])
          for reason, name in NET_TX_DROP_COUNTERS),
        _reg("NET_ARP_ENTRY", 0x4C0, RW, "ARP cache slot to write with NET_ARP_CMD.WRITE.",
             _f("INDEX", 0, 6, "Slot, below NET_CAPS.ARP_ENTRIES."),
             _f("VALID", 8, 1, "The slot holds NET_ARP_IP -> NET_ARP_MAC; 0 frees it."),
             _f("STATIC", 9, 1, "A static entry: learning neither replaces nor updates it.")),
        _word("NET_ARP_IP", 0x4C4, RW, "IP", "IPv4 address of NET_ARP_CMD (WRITE: the entry's, "
              "REQUEST: the one asked for)."),
        *_mac_regs("NET_ARP_MAC", 0x4C8, RW, "MAC address of the entry NET_ARP_CMD.WRITE writes"),
        _reg("NET_ARP_CMD", 0x4D0, PULSE, "ARP commands.",
             _f("WRITE", 0, 1, "Write slot NET_ARP_ENTRY.INDEX of the ARP cache (taken at once)."),
             _f("REQUEST", 1, 1, "Broadcast an ARP request for NET_ARP_IP (ignored while "
                                 "NET_ARP_STATUS.REQUEST_BUSY).")),
        _reg("NET_ARP_STATUS", 0x4D4, RO, "ARP status.",
             _f("REQUEST_BUSY", 0, 1, "A REQUEST is waiting for the ARP block (wait for 0).")),
        _word("NET_ARP_LOOKUP_IP", 0x4E0, RW, "IP", "IPv4 address looked up in the ARP cache: "
              "NET_ARP_LOOKUP and NET_ARP_LOOKUP_MAC show the result once NET_ARP_LOOKUP.DONE "
              "(the cache is searched one slot a cycle, continuously)."),
        _reg("NET_ARP_LOOKUP", 0x4E4, RO, "ARP cache lookup of NET_ARP_LOOKUP_IP.",
             _f("HIT", 0, 1, "A valid entry holds NET_ARP_LOOKUP_IP (NET_ARP_LOOKUP_MAC is its MAC)."),
             _f("DONE", 1, 1, "HIT and NET_ARP_LOOKUP_MAC are those of NET_ARP_LOOKUP_IP (0 for "
                              "up to 2 * NET_CAPS.ARP_ENTRIES + 1 cycles after it is written: "
                              "poll).")),
        *_mac_regs("NET_ARP_LOOKUP_MAC", 0x4E8, RO, "MAC address NET_ARP_LOOKUP_IP maps to (0 "
                   "without a HIT)"),
    ))


# ---------------------------------------------------------------------------
# the TCP engine's registers

#: The TCP block's counters live in a block RAM of their own (:class:`rnic.hdl.counter_memory.
#: CounterMemory`) of ``TCP_COUNTER_WORDS`` words: a counter register's word is its word
#: address modulo that.
TCP_COUNTER_BASE = 0x540
TCP_COUNTER_WORDS = 16
#: The TCP engine's parameters by name (the driver's ``tcp_configure``, the gateware's
#: ports) and the register fields that hold them.
TCP_PARAMS = {
    "mss": ("TCP_MSS", "MSS"), "rcv_wnd": ("TCP_RCV_WND", "OCTETS"),
    "rcv_scale": ("TCP_RCV_SCALE", "SCALE"), "rto_initial": ("TCP_RTO_INITIAL", "TICKS"),
    "rto_min": ("TCP_RTO_MIN", "TICKS"), "rto_max": ("TCP_RTO_MAX", "TICKS"),
    "delack": ("TCP_DELACK", "TICKS"), "time_wait": ("TCP_TIME_WAIT", "TICKS"),
    "max_retries": ("TCP_MAX_RETRIES", "RETRIES"), "secret": ("TCP_SECRET", "SECRET"),
    "ring_base": ("TCP_RING_BASE", "ADDR"), "ring_log2": ("TCP_RING_LOG2", "LOG2"),
    "tick_cycles": ("TCP_TICK", "CYCLES"),
}
#: One counter per :class:`~rnic.host.spec.tcp_engine.TcpDrop` reason: ``(reason, name)``.
TCP_DROP_COUNTERS = tuple((reason, f"TCP_DROP_{reason.name}") for reason in TcpDrop)

_TCP_DROP_DOC = {
    TcpDrop.BAD_OPTIONS: "Segments dropped: malformed TCP options (a length of 0 or 1 where one "
                         "is due, or one running past the header); no answer.",
    TcpDrop.NO_CONNECTION: "Segments for no connection and no listening port (answered with a "
                           "RST unless they are one).",
    TcpDrop.BAD_COOKIE: "ACKs for a listening port that carry no valid SYN cookie (answered with "
                        "a RST, or dropped if they carry data or a FIN).",
    TcpDrop.NO_FREE_CONNECTION: "Valid SYN cookies that found every connection id in use.",
    TcpDrop.SIMULTANEOUS_OPEN: "SYNs without ACK on a connection in SYN-SENT (no simultaneous "
                               "open).",
    TcpDrop.NOT_ACCEPTABLE: "Segments outside the receive window (RFC 9293 section 3.10.7.4; "
                            "answered with an ACK unless a RST).",
    TcpDrop.CHALLENGE_ACK: "RSTs in the window but not at RCV.NXT, and SYNs on a synchronized "
                           "connection: answered with a challenge ACK (RFC 5961).",
    TcpDrop.NO_ACK: "Segments without ACK on a synchronized connection.",
    TcpDrop.BAD_ACK: "Segments acknowledging something never sent (answered with an ACK).",
    TcpDrop.OLD_ACK: "Segments acknowledging data older than SND.UNA - MAX.SND.WND (RFC 5961 "
                     "section 5.2).",
    TcpDrop.OUT_OF_ORDER: "Segments starting after RCV.NXT (a hole; not kept): answered with a "
                          "duplicate ACK.",
    TcpDrop.TIME_WAIT_RST: "RSTs in TIME-WAIT, ignored (RFC 1337).",
}


#: The event kinds as TCP_EVENT.KIND names them.
_EVENT_KINDS = {("RESET_BY_PEER" if k is TcpEventKind.RESET else k.name): int(k)
                for k in TcpEventKind}


def _ticks(name, addr, doc, reset):
    return _reg(name, addr, RW, doc, _f("TICKS", 0, 32, "Ticks of the time base (TCP_TICK).",
                                        reset=reset))


def _tcb_word(name, addr, doc):
    return _word(name, addr, RO, "VALUE", f"{doc} of the connection TCP_CONN.CONN (0 while it "
                 "is CLOSED).")


TCP_BLOCK = Block(
    "TCP", "The TCP engine (rnic.hdl.tcp.TcpOffload; docs/tcp.md): its parameters, listening "
    "ports, commands, connection events, the TCB of one connection, drop counters, and the "
    "stream port (TCP_STREAM_*: the octets of connections in byte-stream mode, MPA's Request "
    "and Reply, moved by the host before the connection carries FPDUs). They "
    "act where TCP_CAPS.TCP is 1 (elsewhere they read 0 and ignore writes). Parameters apply "
    "to connections opened after they are written (TCP_RING_BASE and TCP_RING_LOG2: change "
    "them only while no connection is open). Times count ticks of the time base (1 ms: the "
    "top's tick input; see TCP_TICK). The counters count from reset.", (
        _reg("TCP_CAPS", 0x500, RO, "TCP build parameters.",
             _f("TCP", 0, 1, "1: this build has the TCP engine."),
             _f("LISTENERS", 8, 8, "Listening-port slots: TCP_LISTEN.INDEX 0 .. LISTENERS-1."),
             _f("RECORDS", 16, 8, "FPDU ends kept per connection's send ring."),
             _f("RING_LOG2", 24, 5, "The largest TCP_RING_LOG2 this build's ring memory holds for "
                                    "every connection (it has CAPS.CONNECTIONS << RING_LOG2 "
                                    "octets).")),
        _reg("TCP_MSS", 0x504, RW, "Our MSS (advertised in SYN-ACKs, the most payload a segment "
             "carries).", _f("MSS", 0, 16, "Octets: the MTU minus 40.", reset=ENGINE_MSS)),
        _reg("TCP_RCV_WND", 0x508, RW, "Receive window of a connection delivering to the core.",
             _f("OCTETS", 0, 32, "At most 65535 << TCP_RCV_SCALE.", reset=DEFAULT_RCV_WND)),
        _reg("TCP_RCV_SCALE", 0x50C, RW, "Our window scale (RFC 7323), used when both SYNs "
             "carry the option.", _f("SCALE", 0, 4, "Shift, 0 .. 14.")),
        _ticks("TCP_RTO_INITIAL", 0x510, "Retransmission timeout before the first RTT sample "
               "(RFC 6298 section 2.1).", DEFAULT_RTO_INITIAL),
        _ticks("TCP_RTO_MIN", 0x514, "Least retransmission timeout.", DEFAULT_RTO_MIN),
        _ticks("TCP_RTO_MAX", 0x518, "Greatest retransmission timeout (after backoff).",
               DEFAULT_RTO_MAX),
        _ticks("TCP_DELACK", 0x51C, "Delayed-ACK time.", DEFAULT_DELACK),
        _ticks("TCP_TIME_WAIT", 0x520, "Length of TIME-WAIT (2 MSL).", DEFAULT_TIME_WAIT),
        _reg("TCP_MAX_RETRIES", 0x524, RW, "Retransmission timeouts in a row before a connection "
             "is reset and reported LOST.", _f("RETRIES", 0, 8, "", reset=DEFAULT_MAX_RETRIES)),
        _word("TCP_SECRET", 0x528, RW, "SECRET", "Key of the SYN cookies (write a random value "
              "before listening)."),
        _word("TCP_RING_BASE", 0x52C, RW, "ADDR", "Address of the send rings in the ring memory: "
              "connection c's ring is at TCP_RING_BASE + c << TCP_RING_LOG2 (the memory repeats "
              "through the address space)."),
        _reg("TCP_RING_LOG2", 0x530, RW, "Size of each connection's send ring (it holds what "
             "is sent until acknowledged, and bounds an echo connection's window).",
             _f("LOG2", 0, 5, f"Octets = 2**LOG2 ({MIN_RING_LOG2} .. TCP_CAPS.RING_LOG2).",
                reset=MIN_RING_LOG2)),
        _reg("TCP_TICK", 0x534, RW, "A clock-counted tick of the time base, besides the top's "
             "tick input (the board's: every millisecond of its clock; the simulation's: every "
             "millisecond of wall time).",
             _f("CYCLES", 0, 32, "Clock cycles per tick (0: none, only the tick input).")),
        _word("TCP_NOW", 0x538, RO, "TICKS", "The time base: ticks since reset."),
        _reg("TCP_STATUS", 0x53C, RO, "TCP status.",
             _f("CMD_BUSY", 0, 1, "A CLOSE or ABORT waits for the engine (another one is ignored "
                                  "meanwhile: wait for 0).")),
        *(_word(name, TCP_COUNTER_BASE + 4 * reason, RO, "COUNT", _TCP_DROP_DOC[reason])
          for reason, name in TCP_DROP_COUNTERS),
        _word("TCP_TX_SEGMENTS", TCP_COUNTER_BASE + 4 * len(TcpDrop), RO, "COUNT",
              "Segments the engine sent to the IPv4 send path (data, ACKs, RSTs, SYN-ACKs; "
              "NET_TX_NO_ROUTE and NET_TX_ARP_MISS count those it dropped)."),
        _word("TCP_EVENTS_LOST", TCP_COUNTER_BASE + 4 * (len(TcpDrop) + 1), RO, "COUNT",
              "Connection events dropped: the queue behind TCP_EVENT was full."),
        _word("TCP_RETRANSMITS", TCP_COUNTER_BASE + 4 * (len(TcpDrop) + 2), RO, "COUNT",
              "Segments sent that carried sequence space sent before (timeouts, fast "
              "retransmits, the rest of a window sent again)."),
        _reg("TCP_LISTEN", 0x580, RW, "A listening-port slot, written by TCP_CMD.LISTEN.",
             _f("INDEX", 0, 6, "Slot, below TCP_CAPS.LISTENERS."),
             _f("VALID", 8, 1, "The slot listens on PORT; 0 frees it."),
             _f("ECHO", 9, 1, "Connections accepted on PORT are the echo service (RFC 862: every "
                              "octet received is sent back, in gateware)."),
             _f("PORT", 16, 16, "Local TCP port.")),
        _reg("TCP_CONN", 0x584, RW, "The connection of TCP_CMD and of the TCB window.",
             _f("CONN", 0, 16, "Connection id, below CAPS.CONNECTIONS."),
             _f("FPDU", 16, 1, "Mode TCP_CMD.MODE sets: 1 the connection carries FPDUs (the "
                               "core's runs are whole FPDUs, segments end at their ends, and "
                               "what it receives goes to the core), 0 a byte stream (segments "
                               "cut anywhere, what it receives goes to TCP_STREAM_RX_*). A "
                               "connection opens in byte-stream mode."),
             _f("ECHO", 17, 1, "TCP_CMD.CONNECT opens an echo service connection (RFC 862: every "
                               "octet received is sent back, in gateware).")),
        _reg("TCP_CMD", 0x588, PULSE, "TCP commands.",
             _f("LISTEN", 0, 1, "Write slot TCP_LISTEN.INDEX."),
             _f("CLOSE", 1, 1, "Close TCP_CONN.CONN: a FIN after the octets written."),
             _f("ABORT", 2, 1, "Abort TCP_CONN.CONN: a RST; its id is free at once."),
             _f("MODE", 3, 1, "Set TCP_CONN.CONN's mode to TCP_CONN.FPDU."),
             _f("POP", 4, 1, "Remove the head of the event queue (ignored while not VALID)."),
             _f("CONNECT", 5, 1, "Active open to TCP_CONNECT_IP:TCP_CONNECT_PORTS.REMOTE from "
                                 "TCP_CONNECT_PORTS.LOCAL with ISS TCP_CONNECT_ISS on the lowest "
                                 "free connection id (TCP_CONNECT_STATUS; ignored while one "
                                 "is BUSY).")),
        _reg("TCP_EVENT", 0x58C, RO, "The oldest connection event (a queue; TCP_CMD.POP removes it).",
             _f("CONN", 0, 16, "Connection id."),
             _f("KIND", 16, 4, "What happened (TcpEventKind; RESET is named RESET_BY_PEER here, "
                               "apart from the field's reset value).", enum=_EVENT_KINDS),
             _f("VALID", 31, 1, "An event is at the head.")),
        _reg("TCP_TCB_STATE", 0x590, RO, "State of the connection TCP_CONN.CONN.",
             _f("STATE", 0, 4, "TCP state.", enum=TcpState),
             _f("ECHO", 8, 1, "It is the echo service."),
             _f("RETRIES", 16, 8, "Retransmission timeouts in a row.")),
        _tcb_word("TCP_TCB_REMOTE_IP", 0x594, "The peer's IPv4 address"),
        _reg("TCP_TCB_PORTS", 0x598, RO, "Ports of the connection TCP_CONN.CONN.",
             _f("LOCAL", 0, 16, "Our port."), _f("REMOTE", 16, 16, "The peer's port.")),
        _tcb_word("TCP_TCB_SND_UNA", 0x59C, "SND.UNA"),
        _tcb_word("TCP_TCB_SND_NXT", 0x5A0, "SND.NXT"),
        _tcb_word("TCP_TCB_RCV_NXT", 0x5A4, "RCV.NXT"),
        _tcb_word("TCP_TCB_SND_WND", 0x5A8, "The peer's window (octets)"),
        _tcb_word("TCP_TCB_CWND", 0x5AC, "The congestion window (octets)"),
        _tcb_word("TCP_TCB_RTO", 0x5B0, "The retransmission timeout (ticks)"),
        _word("TCP_CONNECT_IP", 0x5B4, RW, "ADDR", "The peer's IPv4 address of TCP_CMD.CONNECT."),
        _reg("TCP_CONNECT_PORTS", 0x5B8, RW, "Ports of TCP_CMD.CONNECT.",
             _f("LOCAL", 0, 16, "Our port (1 .. 65535)."),
             _f("REMOTE", 16, 16, "The peer's port (1 .. 65535).")),
        _word("TCP_CONNECT_ISS", 0x5BC, RW, "ISS", "Initial sequence number of TCP_CMD.CONNECT "
              "(the driver's, RFC 6528: a keyed hash of the four-tuple plus a clock)."),
        _reg("TCP_CONNECT_STATUS", 0x5C0, RO, "What the last TCP_CMD.CONNECT became.",
             _f("CONN", 0, 16, "The connection id it took (RESULT SYN_SENT)."),
             _f("RESULT", 16, 2, "TcpConnectResult.", enum=TcpConnectResult),
             _f("BUSY", 30, 1, "A CONNECT is being handled."),
             _f("DONE", 31, 1, "RESULT and CONN are a CONNECT's (0 until the first).")),
        _reg("TCP_STREAM_TX_CONN", 0x5C4, RW, "Connection of TCP_STREAM_TX_CMD.SEND.",
             _f("CONN", 0, 16, "Connection id.")),
        _reg("TCP_STREAM_TX_LEN", 0x5C8, RW, "Length of TCP_STREAM_TX_CMD.SEND.",
             _f("LEN", 0, 16, "Octets, 1 .. the connection's MSS (one run: an MPA Request or "
                              "Reply).")),
        _word("TCP_STREAM_TX_DATA", 0x5CC, PULSE, "DATA", "Write-only FIFO port: every write "
              "pushes the whole word (first octet in bits 7..0) into the stream TX FIFO; "
              "dropped when it is full (TCP_STREAM_TX_STATUS.FREE = 0). Reads return 0."),
        _reg("TCP_STREAM_TX_CMD", 0x5D0, PULSE, "Stream port transmit command.",
             _f("SEND", 0, 1, "Send TCP_STREAM_TX_LEN octets on connection TCP_STREAM_TX_CONN "
                              "from the next ceil(LEN/4) words of the FIFO, as they are (no "
                              "framing), once the connection may send (its send ring has "
                              "room and no run of it is under way). Ignored while "
                              "TCP_STREAM_TX_STATUS.BUSY or with LEN 0."),
             _f("CANCEL", 1, 1, "Drop the SEND that waits for its connection (one closed or "
                                "reset never may send again), its words included: BUSY "
                                "falls once they are gone. Ignored while none waits.")),
        _reg("TCP_STREAM_TX_STATUS", 0x5D4, RO, "Stream port transmit status.",
             _f("BUSY", 0, 1, "A SEND has not left yet."),
             _f("FREE", 16, 16, "Free words in the stream TX FIFO.")),
        _reg("TCP_STREAM_RX_STATUS", 0x5D8, RO, "The oldest run of octets received in "
             "byte-stream mode (TCP_CONN.FPDU 0): a segment's payload, in order.",
             _f("VALID", 0, 1, "A run is at the head: LEN, TCP_STREAM_RX_CONN and "
                               "TCP_STREAM_RX_DATA describe it."),
             _f("TRUNCATED", 1, 1, "The stream RX FIFO was full: octets of this run were "
                                   "dropped (after the LEN kept), already acknowledged to the "
                                   "peer. The connection's byte stream is broken: abort it."),
             _f("LOST", 2, 1, "Whole runs were dropped (the FIFO's run records were full) "
                              "since reset; sticky."),
             _f("LEN", 16, 16, "Octets of the run in the FIFO (ceil(LEN/4) words).")),
        _reg("TCP_STREAM_RX_CONN", 0x5DC, RO, "Connection of the run at the head.",
             _f("CONN", 0, 16, "Connection id.")),
        _word("TCP_STREAM_RX_DATA", 0x5E0, RO, "DATA", "The current word of the run at the head "
              "(octet k of the word in bits 8k+7 .. 8k; octets past LEN read 0). Reading does "
              "not advance: strobe TCP_STREAM_RX_CMD.NEXT."),
        _reg("TCP_STREAM_RX_CMD", 0x5E4, PULSE, "Stream port receive command.",
             _f("POP", 0, 1, "Drop the head run (its words not yet read included); VALID shows "
                             "the next one a few cycles later."),
             _f("NEXT", 1, 1, "Advance TCP_STREAM_RX_DATA to the next word of the head run.")),
        _reg("TCP_TCB_MSS", 0x5E8, RO, "The send MSS of the connection TCP_CONN.CONN (0 while "
             "it is CLOSED).",
             _f("MSS", 0, 16, "The most payload octets of a segment to the peer: its MSS "
                              "option, at most TCP_MSS (the EMSS MPA's MULPDU follows from).")),
    ))


BLOCKS = (
    Block("Identification and control", "Identify the device, enable it and reset the data path.", (
        _reg("ID", 0x000, RO, "Identification: always reads the magic (check it before anything else).",
             _f("MAGIC", 0, 32, 'ASCII "iWRP".', reset=MAGIC, const=True)),
        _reg("VERSION", 0x004, RO, "Register map version and datapath width of this build.",
             _f("MINOR", 0, 8, "Map minor version (registers or fields added).", reset=VERSION_MINOR, const=True),
             _f("MAJOR", 8, 8, "Map major version (incompatible change); a driver refuses another major.",
                reset=VERSION_MAJOR, const=True),
             _f("WIDTH", 16, 8, "Datapath width W in octets (build parameter).", param="width")),
        _reg("CAPS", 0x008, RO, "Sizes of this build.",
             _f("CONNECTIONS", 0, 16, "Connection contexts: valid ids are 0 .. CONNECTIONS-1 (build parameter).",
                param="connections"),
             _f("STAGS", 16, 16, "Rows of the STag table: STAG_INDEX 0 .. STAGS-1 (build parameter).",
                param="stags")),
        _reg("QUEUE_CAPS", 0x00C, RO, "RDMA Read depths of this build: the IRD and ORD a "
             "connection may negotiate at most (RFC 6581); 0: not reported.",
             _f("IRD", 0, 16, "Inbound RDMA Read Requests the core holds per connection "
                              "(build parameter).", param="ird_depth"),
             _f("ORD", 16, 16, "Outbound RDMA Reads the core tracks per connection "
                               "(build parameter).", param="ord_depth")),
        _reg("CTRL", 0x010, RW, "Global control.",
             _f("ENABLE", 0, 1, "Data path enabled; when 0 no octet is sent or accepted."),
             _f("SOFT_RESET", 1, 1, "Reset the data path: every context to IDLE, queues emptied, counters "
                                    "and errors cleared; the register bank keeps its values. "
                                    "Wait for STATUS.READY.", access=PULSE),
             _f("CLEAR_COUNTERS", 2, 1, "Zero every counter and ERR_COUNT.", access=PULSE)),
        _reg("STATUS", 0x014, RO, "Global status.",
             _f("READY", 0, 1, "Context memories initialised, no reset in progress. COMMIT, POST and "
                               "DOORBELL strobes are only acted on while READY.")),
        _reg("INT_ENABLE", 0x018, RW, "Interrupt enables; the interrupt line is a level: OR of the enabled sources.",
             _f("ERR", 0, 1, "Interrupt while ERR_STATUS.PENDING."),
             _f("CQ", 1, 1, "Interrupt while CQ_STATUS.VALID."),
             _f("TERM", 2, 1, "Interrupt while TERM_STATUS.VALID.")),
        _word("SCRATCH", 0x01C, RW, "VALUE", "Scratch register for bus checks; no effect on the device."),
    )),
    Block("Connection context", "Indirect window onto the per-connection context table: select a "
          "connection with CONN_SEL, write the CTX_* registers, then strobe CTX_CMD.COMMIT; "
          "CTX_STATUS and CTX_ERROR show the selected connection's live state.", (
        _reg("CONN_SEL", 0x040, RW, "Connection the CTX_* registers refer to.",
             _f("CONN", 0, 16, "Connection id (below CAPS.CONNECTIONS).")),
        _mpa_dir("CTX_TX", 0x044, "TX", "peer's"),
        _mpa_dir("CTX_RX", 0x048, "RX", "local"),
        _reg("CTX_IRD_ORD", 0x04C, RW, "RDMA Read limits of the selected connection (RFC 6581 values).",
             _f("IRD", 0, 14, "Inbound RDMA Read Requests the connection may have outstanding (as responder)."),
             _f("ORD", 16, 14, "Outbound RDMA Read Requests it may issue (as requester).")),
        _reg("CTX_STATE", 0x050, RW, "State to write with COMMIT or SET_STATE.",
             _f("STATE", 0, 3, "Connection state.", enum=ConnState)),
        _reg("CTX_CMD", 0x054, PULSE, "Context commands for the connection in CONN_SEL.",
             _f("COMMIT", 0, 1, "Write CTX_TX, CTX_RX, CTX_IRD_ORD and CTX_STATE into the connection's "
                                "context and reset it (FPDU state, CRC, MSNs to 1, receive queue "
                                "emptied, no Read Request outstanding, no error)."),
             _f("SET_STATE", 1, 1, "Write only CTX_STATE (e.g. to CLOSING); the rest of the context is kept.")),
        _reg("CTX_STATUS", 0x058, RO, "Live state of the connection in CONN_SEL.",
             _f("STATE", 0, 3, "Current state.", enum=ConnState),
             _f("BUSY", 8, 1, "A COMMIT or SET_STATE is still being applied (wait for 0)."),
             _f("ERROR", 9, 1, "The connection stopped on an error; CTX_ERROR holds the first one.")),
        _reg("CTX_ERROR", 0x05C, RO, "First error of the connection in CONN_SEL, in the layout of a "
             "Terminate's first word (valid while CTX_STATUS.ERROR).",
             *_err_fields("the connection's first error")),
    )),
    Block("Errors", "The first protocol error since ERR_STATUS.PENDING was last cleared is captured "
          "in ERR_CONN and ERR_INFO; later ones only count. With the DDP/RDMAP receive path in use "
          "(DP_CTRL.SINK and DP_CTRL.BYPASS 0) the errors are its reports (MPA errors included, one per "
          "connection until its next COMMIT; the Terminate to send is in TERM_*); otherwise the MPA "
          "deframer's.", (
        _reg("ERR_STATUS", 0x080, W1C, "Error capture status (write 1 to clear).",
             _f("PENDING", 0, 1, "ERR_CONN and ERR_INFO hold a captured error. Clear to capture the next."),
             _f("OVERFLOW", 1, 1, "An error happened while PENDING was set (not captured).")),
        _reg("ERR_CONN", 0x084, RO, "Where the captured error happened.",
             _f("CONN", 0, 16, "Connection id."),
             _f("TX", 16, 1, "1: found on the transmit path, 0: on the receive path.")),
        _reg("ERR_INFO", 0x088, RO, "The captured error, in the layout of a Terminate's first word "
             "(RFC 5040: Layer, EType, ErrorCode).", *_err_fields("the captured error")),
        _word("ERR_COUNT", 0x08C, RO, "COUNT", "Protocol errors since reset or CTRL.CLEAR_COUNTERS (wraps)."),
    )),
    Block("Counters", "Free-running counters over all connections, cleared by CTRL.CLEAR_COUNTERS and "
          "SOFT_RESET; 32-bit counters wrap. 64-bit counters are LO/HI pairs: read HI, LO, HI and retry "
          "while the two HI values differ.", (
        _word("RX_FPDUS", 0x100, RO, "COUNT", "FPDUs received (complete, good or bad)."),
        _word("RX_CRC_ERRORS", 0x104, RO, "COUNT", "Received FPDUs with a bad CRC (CRC checking on)."),
        _word("RX_MARKER_ERRORS", 0x108, RO, "COUNT", "Received FPDUs with a marker that disagrees with "
              "the ULPDU_Length chain."),
        _word("RX_LENGTH_ERRORS", 0x10C, RO, "COUNT", "ULPDU_Length above MULPDU or below the DDP header."),
        _word("RX_OCTETS_LO", 0x110, RO, "COUNT", "TCP payload octets received, bits 31..0."),
        _word("RX_OCTETS_HI", 0x114, RO, "COUNT", "TCP payload octets received, bits 63..32."),
        _word("TX_FPDUS", 0x120, RO, "COUNT", "FPDUs sent."),
        _word("TX_MARKERS", 0x124, RO, "COUNT", "Markers inserted into sent streams."),
        _word("TX_OCTETS_LO", 0x130, RO, "COUNT", "TCP payload octets sent, bits 31..0."),
        _word("TX_OCTETS_HI", 0x134, RO, "COUNT", "TCP payload octets sent, bits 63..32."),
    )),
    Block("STag table", "Indirect window onto the STag (steering tag) table: fill the STAG_* registers "
          "and strobe STAG_CMD.COMMIT to write row STAG_INDEX. A region covers the TOs BASE .. "
          "BASE + LENGTH - 1 and the host memory ADDR .. ADDR + LENGTH - 1: a tagged segment with "
          "TO t is placed at memory address ADDR + (t - BASE), and a Read Response reads its source "
          "there, if STAG, CONN, the access bit and BASE <= t, t + len <= BASE + LENGTH all check "
          "(VA-based regions: ADDR = BASE; zero-based: BASE = 0). The receive path looks an STag up "
          "in row STAG mod CAPS.STAGS (CAPS.STAGS is a power of 2): write each STag to that row, a "
          "row written with another STag never matches. A row whose memory does not lie inside the "
          "memory bus's address space, or whose TOs pass 2**64, never matches. The table is kept "
          "across CTRL.SOFT_RESET.", (
        _reg("STAG_INDEX", 0x180, RW, "Table row to write.",
             _f("INDEX", 0, 16, "Row (below CAPS.STAGS).")),
        _word("STAG_KEY", 0x184, RW, "STAG", "The STag as it appears on the wire (checked in full)."),
        _word("STAG_BASE_LO", 0x188, RW, "TO", "TO of the region's first octet, bits 31..0."),
        _word("STAG_BASE_HI", 0x18C, RW, "TO", "TO of the region's first octet, bits 63..32."),
        _word("STAG_LENGTH", 0x190, RW, "LENGTH", "Length of the region in octets."),
        _reg("STAG_ATTR", 0x194, RW, "Validity, access rights and owner of the row.",
             _f("VALID", 0, 1, "The row is in use; 0 invalidates the STag."),
             _f("REMOTE_READ", 1, 1, "The peer may read the region (RDMA Read source)."),
             _f("REMOTE_WRITE", 2, 1, "The peer may write the region (RDMA Write, Read Response sink)."),
             _f("REMOTE_INV", 3, 1, "The peer may invalidate the STag (Send with Invalidate); a Send "
                                    "with Invalidate naming a valid STag of the connection without it "
                                    "is refused (RDMAP Remote Protection, STag cannot be invalidated) "
                                    "and the STag stays valid."),
             _f("CONN", 16, 16, "Connection the STag is associated with.")),
        _reg("STAG_CMD", 0x198, PULSE, "STag table command.",
             _f("COMMIT", 0, 1, "Write the row STAG_INDEX from STAG_KEY .. STAG_ATTR (ignored while "
                                "STAG_STATUS.BUSY, or with STAG_INDEX not below CAPS.STAGS).")),
        _reg("STAG_STATUS", 0x19C, RO, "STag table status.",
             _f("BUSY", 0, 1, "A COMMIT is still waiting for the receive path (it takes rows between "
                              "segments with no placement write in flight); wait for 0.")),
        _word("STAG_ADDR_LO", 0x1A0, RW, "ADDR", "Host memory address of the region's first octet "
                                                 "(the octet of TO BASE), bits 31..0."),
        _word("STAG_ADDR_HI", 0x1A4, RW, "ADDR", "Host memory address of the region's first octet, "
                                                 "bits 63..32."),
    )),
    Block("Receive queue", "Post receive buffers (for Sends) to a connection: fill RQ_* and strobe "
          "RQ_CMD.POST; each filled buffer produces a completion (CQ_INFO.QUEUE = RQ).", (
        _reg("RQ_CONN", 0x1C0, RW, "Connection to post to.", _f("CONN", 0, 16, "Connection id.")),
        _word("RQ_ADDR_LO", 0x1C4, RW, "ADDR", "Buffer address, bits 31..0."),
        _word("RQ_ADDR_HI", 0x1C8, RW, "ADDR", "Buffer address, bits 63..32."),
        _word("RQ_LENGTH", 0x1CC, RW, "LENGTH", "Buffer length in octets."),
        _word("RQ_ID", 0x1D0, RW, "WR_ID", "Caller's id of the buffer, returned in CQ_WR_ID."),
        _reg("RQ_CMD", 0x1D4, PULSE, "Receive queue command.",
             _f("POST", 0, 1, "Append the buffer to the connection's receive queue (ignored while "
                              "RQ_STATUS.BUSY or with RQ_CONN not below CAPS.CONNECTIONS).")),
        _reg("RQ_STATUS", 0x1D8, RO, "Receive queue status.",
             _f("FULL", 0, 1, "No room for another buffer: a POST now is dropped. Not tracked by this "
                              "build (reads 0): a POST to a full queue sets OVERFLOW."),
             _f("BUSY", 1, 1, "A POST is still waiting for the receive path; wait for 0."),
             _f("OVERFLOW", 2, 1, "A POST was dropped: the connection's queue was full (RQ_DEPTH "
                                  "buffers, a build parameter) or the buffer does not lie inside the "
                                  "memory bus's address space (write 1 to clear).", access=W1C)),
    )),
    Block("Send queue", "Post work requests: fill SQ_* and strobe SQ_CMD.DOORBELL. The transmit path "
          "keeps a send queue per connection (SQ_DEPTH entries, a build parameter) and sends the work "
          "requests of a connection in order; connections are served round robin, segment by segment. "
          "A work request completes in CQ_* (QUEUE SQ) when SIGNALED or on an error: a Send or RDMA Write "
          "once its last segment left, an RDMA Read when its Read Response arrived (DP_CTRL.HOST_READS "
          "0); at most ORD RDMA Reads (CTX_IRD_ORD) are outstanding per connection.", (
        _reg("SQ_WR", 0x200, RW, "Work request kind and connection.",
             _f("OPCODE", 0, 4, "RDMAP operation.", enum=SqOpcode),
             _f("SIGNALED", 8, 1, "Post a completion when done (errors always complete)."),
             _f("CONN", 16, 16, "Connection id.")),
        _word("SQ_LADDR_LO", 0x204, RW, "ADDR", "Local address, bits 31..0: source of Send/Write data, "
              "sink TO of an RDMA Read."),
        _word("SQ_LADDR_HI", 0x208, RW, "ADDR", "Local address, bits 63..32."),
        _word("SQ_LENGTH", 0x20C, RW, "LENGTH", "Message length in octets."),
        _word("SQ_LSTAG", 0x210, RW, "STAG", "Local STag: the Data Sink STag of an RDMA Read."),
        _word("SQ_RSTAG", 0x214, RW, "STAG", "Remote STag: RDMA Write sink / RDMA Read source."),
        _word("SQ_RTO_LO", 0x218, RW, "TO", "Remote tagged offset, bits 31..0."),
        _word("SQ_RTO_HI", 0x21C, RW, "TO", "Remote tagged offset, bits 63..32."),
        _word("SQ_INV_STAG", 0x220, RW, "STAG", "STag the peer invalidates (Send with Invalidate kinds)."),
        _word("SQ_ID", 0x224, RW, "WR_ID", "Caller's id of the work request, returned in CQ_WR_ID."),
        _reg("SQ_CMD", 0x228, PULSE, "Send queue command.",
             _f("DOORBELL", 0, 1, "Append the work request to the connection's send queue (ignored while "
                                  "FULL). With SQ_WR.CONN not below CAPS.CONNECTIONS it completes at once "
                                  "with BAD_REQUEST (CQ_INFO.CONN as given, signaled or not).")),
        _reg("SQ_STATUS", 0x22C, RO, "Send queue status.",
             _f("FULL", 0, 1, "No room for another work request: a DOORBELL now is dropped (the "
                              "previous one is still waiting for room in its connection's send queue)."),
             _f("BUSY", 1, 1, "A DOORBELL is still waiting to be taken by the transmit path; wait for 0.")),
    )),
    Block("Completion queue", "The head of the completion queue: while CQ_STATUS.VALID, CQ_* describe "
          "the oldest completion; CQ_CMD.POP removes it. The receive path completes a received Send "
          "(QUEUE RQ, OPCODE the Send kind, CQ_WR_ID the RQ_ID of the filled buffer, CQ_LENGTH, CQ_MSN) "
          "once every octet of it is in memory, and the last segment of an RDMA Read Response "
          "(QUEUE SQ, OPCODE RDMA_READ, CQ_WR_ID 0, CQ_STAG/CQ_TO of its first segment, CQ_LENGTH the "
          "octets of the response). A completion that finds the queue full (cq_depth entries, a build "
          "parameter) is lost and sets CQ_STATUS.OVERFLOW: neither data path waits for the host.", (
        _reg("CQ_STATUS", 0x240, RO, "Completion queue status.",
             _f("VALID", 0, 1, "A completion is at the head (CQ_WR_ID .. CQ_TO_HI are valid)."),
             _f("OVERFLOW", 1, 1, "A completion was lost because the queue was full (write 1 to clear).",
                access=W1C)),
        _word("CQ_WR_ID", 0x244, RO, "WR_ID", "SQ_ID or RQ_ID of the completed request or buffer."),
        _reg("CQ_INFO", 0x248, RO, "What completed.",
             _f("OPCODE", 0, 4, "Operation: the work request's, or the received Send kind (RQ).", enum=SqOpcode),
             _f("QUEUE", 4, 1, "Queue of the request.", enum=CqQueue),
             _f("INVALIDATED", 5, 1, "RQ: the Send invalidated CQ_INV_STAG."),
             _f("SOLICITED", 6, 1, "RQ: a Send with Solicited Event (SEND_SE, SEND_SE_INV)."),
             _f("STATUS", 8, 8, "Outcome.", enum=CqStatus),
             _f("CONN", 16, 16, "Connection id.")),
        _word("CQ_LENGTH", 0x24C, RO, "LENGTH", "Octets transferred (received message length for RQ)."),
        _word("CQ_INV_STAG", 0x250, RO, "STAG", "STag invalidated by a received Send with Invalidate."),
        _reg("CQ_CMD", 0x254, PULSE, "Completion queue command.",
             _f("POP", 0, 1, "Remove the head completion (ignored while not VALID).")),
        _word("CQ_MSN", 0x258, RO, "MSN", "RQ: the MSN of the received Send (DDP queue 0)."),
        _word("CQ_STAG", 0x260, RO, "STAG", "RDMA Read Response: the Data Sink STag it was placed with."),
        _word("CQ_TO_LO", 0x264, RO, "TO", "RDMA Read Response: the TO of its first segment, bits 31..0."),
        _word("CQ_TO_HI", 0x268, RO, "TO", "RDMA Read Response: the TO of its first segment, bits 63..32."),
    )),
    Block("Data port", "A register-level path into and out of the MPA data path, so that a board or a "
          "simulation can move ULPDUs with register accesses alone. DP_CTRL.SOURCE feeds the TX framer "
          "from the DP TX FIFO instead of the core's ULPDU input; DP_CTRL.SINK sends the RX deframer's "
          "ULPDUs (with their CRC/error verdict) to the DP RX FIFOs instead of the core's ULPDU output; "
          "DP_CTRL.LOOPBACK feeds the TCP payload the framer sends back into the deframer. To send a "
          "ULPDU: push its octets as 32-bit words into DP_TX_DATA (first octet in bits 7..0, the last "
          "word zero-padded; at most DP_TX_STATUS.FREE words), set DP_TX_CONN and DP_TX_LEN, strobe "
          "DP_TX_CMD.SEND. To receive: while DP_RX_STATUS.VALID, DP_RX_STATUS/DP_RX_CONN describe the "
          "oldest ULPDU and DP_RX_DATA shows its next word; DP_RX_CMD.NEXT advances to the following "
          "word, DP_RX_CMD.POP drops the rest of the ULPDU and shows the next one. Both FIFOs hold "
          "DP_DEPTH 32-bit words (a build parameter of the core, 512 by default); a ULPDU received "
          "through the sink must fit the RX FIFO. Change DP_CTRL only while no traffic is moving.", (
        _reg("DP_CTRL", 0x280, RW, "Data port routing.",
             _f("LOOPBACK", 0, 1, "The framer's TCP payload output is fed into the deframer's input "
                                  "(the core's TCP payload ports are idle: tx_wire never valid, rx_wire "
                                  "never ready)."),
             _f("SOURCE", 1, 1, "The framer takes ULPDUs from the DP TX FIFO (the ULPDU input port "
                                "is not ready)."),
             _f("SINK", 2, 1, "The deframer's ULPDUs go to the DP RX FIFOs (the ULPDU output port "
                              "is never valid, the DDP/RDMAP receive path gets nothing)."),
             _f("BYPASS", 3, 1, "Without SINK: the deframer's ULPDUs leave on the core's ULPDU output "
                                "port (rx_ulpdu, for a DDP layer outside the core) instead of entering "
                                "the DDP/RDMAP receive path. With SINK and BYPASS 0 ULPDUs are "
                                "validated and placed by the receive path (STag table, receive queue, "
                                "CQ_*, RRQ_*, TERM_*). Resets to 1 (a design that takes ULPDUs from "
                                "the port keeps working): a driver clears it to use the receive path.",
                reset=1),
             _f("HOST_READS", 4, 1, "Inbound RDMA Read Requests go to the RRQ_* queue for the host to "
                                    "answer (RRQ_CMD.DONE frees the IRD slot) and RDMA Read Response "
                                    "completions to CQ_* (QUEUE SQ, OPCODE RDMA_READ, CQ_WR_ID 0, CQ_STAG, "
                                    "CQ_TO). With 0 the transmit path answers Read Requests itself (Read "
                                    "Responder, RRQ_* stays empty) and a Read Response completes the "
                                    "oldest outstanding RDMA_READ work request of its connection (CQ_* with "
                                    "its SQ_ID). Resets to 1: the host answers Read Requests until a driver "
                                    "clears it.",
                reset=1)),
        _reg("DP_TX_CONN", 0x284, RW, "Connection of the ULPDU to send.",
             _f("CONN", 0, 16, "Connection id.")),
        _reg("DP_TX_LEN", 0x288, RW, "Length of the ULPDU to send.",
             _f("LEN", 0, 16, "ULPDU octets, 1 .. 65535 (its ULPDU_Length field).")),
        _word("DP_TX_DATA", 0x28C, PULSE, "DATA", "Write-only FIFO port: every write pushes the whole "
              "written word (zero words included; write all four bytes) into the DP TX FIFO; dropped "
              "when the FIFO is full (DP_TX_STATUS.FREE = 0). Reads return 0."),
        _reg("DP_TX_CMD", 0x290, PULSE, "Data port transmit command.",
             _f("SEND", 0, 1, "Send a ULPDU of DP_TX_LEN octets on connection DP_TX_CONN from the "
                              "next ceil(LEN/4) words of the DP TX FIFO (they may still be pushed "
                              "while it runs). Ignored while DP_TX_STATUS.BUSY or with LEN 0.")),
        _reg("DP_TX_STATUS", 0x294, RO, "Data port transmit status.",
             _f("BUSY", 0, 1, "A SEND is still moving words from the FIFO to the framer."),
             _f("FREE", 16, 16, "Free words in the DP TX FIFO.")),
        _reg("DP_RX_STATUS", 0x2A0, RO, "The oldest ULPDU received through the sink.",
             _f("VALID", 0, 1, "A whole ULPDU (or an error report) is at the head: the other fields, "
                               "DP_RX_CONN and DP_RX_DATA describe it."),
             _f("CRC", 4, 2, "Its CRC verdict.", enum=DpCrc),
             _f("ERROR", 8, 3, "Its error; not NONE: the connection delivers nothing more until its "
                               "context is committed again (the octets of a CRC or MARKER error "
                               "are in the FIFO, as received).", enum=DpError),
             _f("LEN", 16, 16, "ULPDU octets in the FIFO (ceil(LEN/4) words); 0 for a "
                               "TOO_LONG/TOO_SHORT report.")),
        _reg("DP_RX_CONN", 0x2A4, RO, "Connection of the ULPDU at the head.",
             _f("CONN", 0, 16, "Connection id.")),
        _word("DP_RX_DATA", 0x2A8, RO, "DATA", "The current word of the ULPDU at the head (octet k of "
              "the word in bits 8k+7 .. 8k; octets past LEN read 0). Reading does not advance: "
              "strobe DP_RX_CMD.NEXT."),
        _reg("DP_RX_CMD", 0x2AC, PULSE, "Data port receive command.",
             _f("POP", 0, 1, "Drop the head ULPDU (its words not yet read included); VALID shows the "
                             "next one a few cycles later."),
             _f("NEXT", 1, 1, "Advance DP_RX_DATA to the next word of the head ULPDU.")),
    )),
    Block("Inbound RDMA Read Requests", "Validated RDMA Read Requests received from the peers, oldest "
          "first, for the host to answer while DP_CTRL.HOST_READS is 1 (with 0 the transmit path's Read "
          "Responder answers them and this queue stays empty): while "
          "RRQ_STATUS.VALID, RRQ_* describe the oldest one; RRQ_CMD.POP removes it. Each holds one of "
          "its connection's IRD slots until RRQ_CMD.DONE releases it for RRQ_DONE_CONN; a request beyond "
          "IRD is an error. When the queue is full the receive path waits.", (
        _reg("RRQ_STATUS", 0x300, RO, "Read Request queue status.",
             _f("VALID", 0, 1, "A Read Request is at the head (RRQ_MSN .. RRQ_SRC_TO_HI are valid)."),
             _f("DONE_BUSY", 1, 1, "A DONE is still being applied (wait for 0)."),
             _f("CONN", 16, 16, "Connection of the head Read Request.")),
        _word("RRQ_MSN", 0x304, RO, "MSN", "Its MSN (DDP queue 1)."),
        _word("RRQ_SINK_STAG", 0x308, RO, "STAG", "Data Sink STag (where the Read Response goes)."),
        _word("RRQ_SINK_TO_LO", 0x30C, RO, "TO", "Data Sink TO, bits 31..0."),
        _word("RRQ_SINK_TO_HI", 0x310, RO, "TO", "Data Sink TO, bits 63..32."),
        _word("RRQ_SIZE", 0x314, RO, "SIZE", "RDMA Read Message Size in octets."),
        _word("RRQ_SRC_STAG", 0x318, RO, "STAG", "Data Source STag (a local region, checked by the "
              "answering side)."),
        _word("RRQ_SRC_TO_LO", 0x31C, RO, "TO", "Data Source TO, bits 31..0."),
        _word("RRQ_SRC_TO_HI", 0x320, RO, "TO", "Data Source TO, bits 63..32."),
        _reg("RRQ_CMD", 0x324, PULSE, "Read Request queue commands.",
             _f("POP", 0, 1, "Remove the head Read Request (ignored while not VALID)."),
             _f("DONE", 1, 1, "One Read Request of connection RRQ_DONE_CONN was answered: free an IRD "
                              "slot (ignored while DONE_BUSY or with RRQ_DONE_CONN not below "
                              "CAPS.CONNECTIONS).")),
        _reg("RRQ_DONE_CONN", 0x328, RW, "Connection of RRQ_CMD.DONE.",
             _f("CONN", 0, 16, "Connection id.")),
    )),
    Block("Terminates", "Reports of the DDP/RDMAP receive path, oldest first: an error it found "
          "(TERM_STATUS.RECEIVED 0; the error is also captured in ERR_* and CTX_ERROR and the "
          "connection goes to ERROR) with the Terminate payload to send to the peer (RFC 5040 section "
          "4.8, exactly as the model's Terminate.for_error), or a Terminate received from the peer "
          "(RECEIVED 1; the connection goes to CLOSING) with its payload. Either way the connection's "
          "later segments are dropped until its next COMMIT. While TERM_STATUS.VALID, TERM_* describe "
          "the oldest report; TERM_CMD.POP removes it. When the queue is full the receive path waits.", (
        _reg("TERM_STATUS", 0x340, RO, "Terminate queue status.",
             _f("VALID", 0, 1, "A report is at the head (TERM_INFO, TERM_DATA0 .. TERM_DATA12 are valid)."),
             _f("RECEIVED", 1, 1, "1: a Terminate received from the peer; 0: an error found here."),
             _f("LEN", 8, 6, "Octets of the Terminate payload in TERM_DATA0 .. (4 .. 52)."),
             _f("CONN", 16, 16, "Connection id.")),
        _reg("TERM_INFO", 0x344, RO, "The error, in the layout of a Terminate's first word "
             "(for RECEIVED: the peer's).", *_err_fields("the reported error")),
        *(_word(f"TERM_DATA{k}", 0x350 + 4 * k, RO, "DATA",
                f"Octets {4 * k} .. {4 * k + 3} of the Terminate payload (octet {4 * k} in bits 7..0; "
                "octets past LEN read 0).") for k in range(13)),
        _reg("TERM_CMD", 0x384, PULSE, "Terminate queue command.",
             _f("POP", 0, 1, "Remove the head report (ignored while not VALID).")),
    )),
    NET_BLOCK,
    TCP_BLOCK,
)

# ---------------------------------------------------------------------------
# named constants (the C header's, the driver's)

def _constant_list(regmap):
    """[(name, value, kind, comment)]: every named constant, in order. kind: hex | dec."""
    out = []
    names = {}

    def add(name, value, kind="hex", comment=""):
        if name in names:
            raise RegMapError(f"generated name {name} is produced twice")
        names[name] = value
        out.append((name, value, kind, comment))

    add("REGS_SIZE", regmap.size, "hex", "bytes in the register window")
    add("REGS_ADDR_WIDTH", regmap.addr_width, "dec", "address bits decoded")
    add("MAGIC", MAGIC, "hex", "ID register value")
    for r in regmap:
        add(f"{r.name}_ADDR", r.addr)
        add(f"{r.name}_RESET", r.reset)
        add(f"{r.name}_RW_MASK", r.rw_mask, "hex", "bits a read-modify-write keeps")
        for f in r.fields:
            p = f"{r.name}_{f.name}"
            add(f"{p}_SHIFT", f.offset, "dec")
            add(f"{p}_WIDTH", f.width, "dec")
            add(f"{p}_MASK", f.mask)
            add(f"{p}_RESET", f.reset)
            for k, v in f.enum:
                add(f"{p}_{k}", v, "dec")
    return out


def constants(regmap=None):
    """Every constant of the C header as ``{name: value}``, without the ``RNIC_`` prefix."""
    return {name: value for name, value, _, _ in _constant_list(regmap or REGMAP)}


#: The RNIC register map (checked here, at import).
REGMAP = RegisterMap(BLOCKS)
