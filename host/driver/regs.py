"""Driver-side register access: constants, typed field helpers, sequences, and a model of the bank.

Everything here is built from :data:`rnic.host.spec.regmap.REGMAP` **when this module is
imported**; there is no generated Python file (so nothing here can go stale:
only the C header and the Markdown reference are generated and committed).

Constants
    The names of the C header ``firmware/rnic_regs.h`` without the ``RNIC_``
    prefix are module attributes: ``CTRL_ADDR``, ``CTRL_RESET``,
    ``CTRL_RW_MASK``, ``CTX_TX_PHASE_SHIFT``/``_WIDTH``/``_MASK``/``_RESET``,
    ``CTX_STATE_STATE_RTS`` (named values), ``MAGIC``, ``REGS_SIZE``. They
    are also in the dict :data:`CONSTANTS`.

Pure helpers (no device)
    :func:`encode` (fields -> register value), :func:`decode` (value ->
    fields), :func:`merge` (read-modify-write value: keeps only RW bits of
    the old value, so W1C bits are not cleared and pulses not fired by
    accident). Field names are case-insensitive; enum fields also take the
    value's name (``state="RTS"``) or an ``IntEnum`` member.

:class:`Registers`
    A device: register access by name over a :class:`Transport` (anything
    with ``read32(addr)`` and ``write32(addr, value)``, byte addresses within
    the window), plus the sequences of the C library ``firmware/rnic.c``
    (probe, connection context programming, error and completion popping,
    64-bit counters) and of the register data port (``dp_configure``,
    ``dp_send``, ``dp_recv``: ULPDUs through the DP_* registers alone, for
    boards and simulations without a data path of their own).

:class:`BankModel`
    A Python model of the gateware register bank (:mod:`rnic.hdl.regbank`),
    usable as a transport: the bus side behaves like the bank (RW storage
    with byte strobes, RO inputs, one-cycle pulses, W1C, SLVERR on unmapped
    addresses), the core side is a dict of RO inputs, the current RW/W1C
    outputs and a log of pulses. The cocotb test of the bank uses it as the
    scoreboard; driver tests use it as a device.
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress

from rnic.host.driver.tcp_regs import TcpAccess
from rnic.host.spec.regmap import (MAGIC, NET_RX_COUNTERS, NET_TX_DROP_COUNTERS, PULSE, REGMAP, RO,
    RW, W1C, ConnState, DpCrc, DpError, Register, constants)

CONSTANTS = constants(REGMAP)
globals().update(CONSTANTS)

OKAY, SLVERR = 0, 2

__all__ = [
    "CONSTANTS", "OKAY", "SLVERR", "reg", "encode", "decode", "merge",
    "Transport", "Registers", "BankModel", "DeviceInfo", "DeviceMismatch", "MpaDirection",
    "ErrorReport", "Completion", "DpUlpdu", "NetCaps", "context_from_negotiated", "mac_bytes", "ipv4",
    *CONSTANTS,
]


def reg(name_or_reg, regmap=REGMAP) -> Register:
    """The :class:`~rnic.host.spec.regmap.Register` for a name (or the register itself)."""
    return name_or_reg if isinstance(name_or_reg, Register) else regmap[name_or_reg]


def _field_value(r, f, value):
    if isinstance(value, str):
        value = f.enum_value(value.upper())
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, enum.Enum):
        value = int(value.value)
    if not isinstance(value, int):
        raise TypeError(f"{r.name}.{f.name}: value {value!r} is not an integer")
    if not 0 <= value <= f.max:
        raise ValueError(f"{r.name}.{f.name}: {value:#x} does not fit {f.width} bits")
    return value


def encode(register, value=0, /, **fields):
    """Register value: ``value`` (default 0) with ``fields`` (name=value) put in place."""
    r = reg(register)
    for name, v in fields.items():
        f = r.field(name)
        value = (value & ~f.mask) | (_field_value(r, f, v) << f.offset)
    return value & 0xFFFFFFFF


def decode(register, value):
    """``{field name (lower case): value}`` of a register value."""
    r = reg(register)
    return {f.port: (value & f.mask) >> f.offset for f in r.fields}


def merge(register, old, /, **fields):
    """The value to write for a read-modify-write: RW bits of ``old``, other bits 0, then ``fields``."""
    r = reg(register)
    return encode(r, old & r.rw_mask, **fields)


class Transport:
    """What :class:`Registers` needs: 32-bit reads and writes at byte addresses of the window."""

    def read32(self, addr: int) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def write32(self, addr: int, value: int) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class DeviceMismatch(RuntimeError):
    """The device is not an RNIC of a register map major version this driver knows."""


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """The build parameters :meth:`Registers.probe` read; ``ird_depth`` and ``ord_depth``
    (QUEUE_CAPS) are None where the device does not report them."""
    major: int
    minor: int
    width: int
    connections: int
    stags: int
    ird_depth: int | None = None
    ord_depth: int | None = None


@dataclasses.dataclass(frozen=True)
class MpaDirection:
    """MPA settings of one direction of a connection (CTX_TX / CTX_RX)."""
    markers: bool = False
    crc: bool = False
    phase: int = 0
    mulpdu: int = 0

    def __post_init__(self):
        if not 0 <= self.phase < 512 or self.phase % 4:
            raise ValueError(f"marker phase {self.phase} must be a multiple of 4 in 0..508")
        if not 0 <= self.mulpdu <= 0xFFFF:
            raise ValueError(f"MULPDU {self.mulpdu} does not fit 16 bits")


@dataclasses.dataclass(frozen=True)
class ErrorReport:
    conn: int
    tx: bool
    layer: int
    etype: int
    ecode: int
    overflow: bool


@dataclasses.dataclass(frozen=True)
class Completion:
    """A completion read from CQ_* (:meth:`Registers.poll_cq`). ``msn``/``solicited``: received
    Sends (queue RQ); ``stag``/``to``: RDMA Read Responses (queue SQ, opcode RDMA_READ)."""
    wr_id: int
    opcode: int
    queue: int
    status: int
    conn: int
    length: int
    invalidated: bool
    inv_stag: int
    msn: int = 0
    solicited: bool = False
    stag: int = 0
    to: int = 0


@dataclasses.dataclass(frozen=True)
class TermReport:
    """A report of the receive path read from TERM_* (:meth:`Registers.pop_terminate`): an error
    found on ``conn`` (``received`` False; ``payload`` is the Terminate to send) or a Terminate
    received from the peer (``received`` True; its payload)."""
    conn: int
    received: bool
    layer: int
    etype: int
    ecode: int
    payload: bytes


@dataclasses.dataclass(frozen=True)
class InboundReadRequest:
    """An RDMA Read Request received from the peer (RRQ_*, :meth:`Registers.pop_read_request`)."""
    conn: int
    msn: int
    sink_stag: int
    sink_to: int
    size: int
    src_stag: int
    src_to: int


@dataclasses.dataclass(frozen=True)
class DpUlpdu:
    """A ULPDU read from the data port's RX FIFOs (:meth:`Registers.dp_recv`)."""
    conn: int
    data: bytes
    crc: DpCrc
    error: DpError


@dataclasses.dataclass(frozen=True)
class NetCaps:
    """NET_CAPS: whether the device has the network layer, and its ARP cache slots."""
    network: bool
    arp_entries: int


def mac_bytes(mac) -> bytes:
    """A MAC address as 6 octets, from bytes or ``"02:00:0a:07:00:02"`` (``-`` also separates)."""
    if isinstance(mac, str):
        parts = mac.replace("-", ":").split(":")
        try:
            mac = bytes(int(p, 16) for p in parts) if len(parts) == 6 and all(
                1 <= len(p) <= 2 for p in parts) else None
        except ValueError:
            mac = None
        if mac is None:
            raise ValueError(f"{parts!r} is not a MAC address like 02:00:0a:07:00:02")
    mac = bytes(mac)
    if len(mac) != 6:
        raise ValueError(f"a MAC address has 6 octets, not {len(mac)}: {mac.hex()}")
    return mac


def ipv4(address) -> ipaddress.IPv4Address:
    """An IPv4 address from a string, an int or an ``IPv4Address``."""
    return ipaddress.IPv4Address(address)


class Registers(TcpAccess):
    """Typed register access to one device over ``transport``.

    ``polls`` bounds every busy-wait (CTX_STATUS.BUSY, STATUS.READY): after
    that many reads a :class:`TimeoutError` is raised.
    """

    def __init__(self, transport, *, regmap=REGMAP, polls=1000):
        self.t = transport
        self.map = regmap
        self.polls = polls
        self.info = None

    # -- access by name
    def read(self, register):
        return self.t.read32(reg(register, self.map).addr) & 0xFFFFFFFF

    def write(self, register, value=0, /, **fields):
        r = reg(register, self.map)
        self.t.write32(r.addr, encode(r, value, **fields))

    def fields(self, register):
        return decode(reg(register, self.map), self.read(register))

    def field(self, register, name):
        r = reg(register, self.map)
        f = r.field(name)
        return (self.read(r) & f.mask) >> f.offset

    def modify(self, register, **fields):
        """Read-modify-write of RW fields (other RW fields kept; W1C/pulse bits written as 0)."""
        r = reg(register, self.map)
        for name in fields:
            if r.field(name).access is not RW:
                raise ValueError(f"{r.name}.{name.upper()} is {r.field(name).access}, not rw")
        self.t.write32(r.addr, merge(r, self.read(r), **fields))

    def pulse(self, register, *names):
        """Fire pulse fields (RW fields of the register are written back unchanged)."""
        r = reg(register, self.map)
        bits = 0
        for name in names:
            f = r.field(name)
            if f.access is not PULSE:
                raise ValueError(f"{r.name}.{f.name} is {f.access}, not pulse")
            bits |= f.mask
        old = self.read(r) if r.rw_mask else 0
        self.t.write32(r.addr, (old & r.rw_mask) | bits)

    def clear(self, register, *names):
        """Clear W1C fields (all W1C fields of the register if no name is given)."""
        r = reg(register, self.map)
        if names:
            bits = 0
            for name in names:
                f = r.field(name)
                if f.access is not W1C:
                    raise ValueError(f"{r.name}.{f.name} is {f.access}, not w1c")
                bits |= f.mask
        else:
            bits = r.mask(W1C)
        old = self.read(r) if r.rw_mask else 0
        self.t.write32(r.addr, (old & r.rw_mask) | bits)

    def read64(self, lo, hi):
        """A 64-bit counter from its LO/HI pair: HI, LO, HI, retried while HI changed."""
        for _ in range(self.polls):
            h1 = self.read(hi)
            low = self.read(lo)
            h2 = self.read(hi)
            if h1 == h2:
                return h2 << 32 | low
        raise TimeoutError(f"{hi} kept changing")

    def _wait(self, register, name, want):
        for _ in range(self.polls):
            if self.field(register, name) == want:
                return
        raise TimeoutError(f"{register}.{name} did not become {want} after {self.polls} reads")

    # -- sequences (the same as firmware/rnic.c)
    def probe(self):
        """Check ID and the map's major version; read the build parameters (also kept in ``.info``)."""
        magic = self.read("ID")
        if magic != MAGIC:
            raise DeviceMismatch(f"not an RNIC: the ID register reads {magic:#010x}, the RNIC "
                                 f"magic is {MAGIC:#010x} (ASCII 'iWRP')")
        v = self.fields("VERSION")
        major = CONSTANTS["VERSION_MAJOR_RESET"]
        if v["major"] != major:
            raise DeviceMismatch(
                f"register map version {v['major']}.{v['minor']} on the device, this driver "
                f"knows major version {major} (update the driver or the bitstream)")
        caps = self.fields("CAPS")
        # (QUEUE_CAPS since map 0.13; it reads 0 on a build without RDMA Reads)
        depths = self.fields("QUEUE_CAPS") if v["minor"] >= 13 else {"ird": 0, "ord": 0}
        self.info = DeviceInfo(v["major"], v["minor"], v["width"], caps["connections"],
                               caps["stags"], depths["ird"] or None, depths["ord"] or None)
        return self.info

    def soft_reset(self):
        self.pulse("CTRL", "SOFT_RESET")
        self._wait("STATUS", "READY", 1)

    def enable(self, on=True):
        self.modify("CTRL", enable=int(bool(on)))

    def _check_conn(self, conn):
        limit = self.info.connections if self.info else 1 << 16
        if not 0 <= conn < limit:
            raise ValueError(f"connection {conn} out of range 0..{limit - 1}")

    def program_connection(self, conn, *, tx=MpaDirection(), rx=MpaDirection(), ird=0, ord=0,
                           state=ConnState.RTS):
        """Write a connection's context and reset it: CONN_SEL, CTX_*, COMMIT, wait for not BUSY."""
        self._check_conn(conn)
        self.write("CONN_SEL", conn=conn)
        for name, d in (("CTX_TX", tx), ("CTX_RX", rx)):
            self.write(name, markers=d.markers, crc=d.crc, phase=d.phase, mulpdu=d.mulpdu)
        self.write("CTX_IRD_ORD", ird=ird, ord=ord)
        self.write("CTX_STATE", state=state)
        self.write("CTX_CMD", commit=1)
        self._wait("CTX_STATUS", "BUSY", 0)

    def set_state(self, conn, state):
        self._check_conn(conn)
        self.write("CONN_SEL", conn=conn)
        self.write("CTX_STATE", state=state)
        self.write("CTX_CMD", set_state=1)
        self._wait("CTX_STATUS", "BUSY", 0)

    def connection_status(self, conn):
        """``{"state", "busy", "error", "layer", "etype", "ecode"}`` of a connection."""
        self._check_conn(conn)
        self.write("CONN_SEL", conn=conn)
        st = self.fields("CTX_STATUS")
        err = self.fields("CTX_ERROR")
        return {"state": ConnState(st["state"]) if st["state"] in ConnState._value2member_map_ else st["state"],
                "busy": st["busy"], "error": st["error"], **err}

    def pop_error(self):
        """The captured error as an :class:`ErrorReport` (and clear it), or None."""
        status = self.fields("ERR_STATUS")
        if not status["pending"]:
            return None
        where = self.fields("ERR_CONN")
        info = self.fields("ERR_INFO")
        self.write("ERR_STATUS", pending=1, overflow=status["overflow"])
        return ErrorReport(where["conn"], bool(where["tx"]), info["layer"], info["etype"], info["ecode"],
                           bool(status["overflow"]))

    def write_stag(self, index, *, stag, base, length, conn, addr=None, remote_read=False,
                   remote_write=False, remote_inv=False, valid=True):
        """Write STag table row ``index``: TOs ``base .. base + length - 1`` at host memory
        ``addr ..`` (default ``base``: a VA-based region)."""
        addr = base if addr is None else addr
        self.write("STAG_INDEX", index=index)
        self.write("STAG_KEY", stag=stag)
        self.write("STAG_BASE_LO", to=base & 0xFFFFFFFF)
        self.write("STAG_BASE_HI", to=base >> 32)
        self.write("STAG_LENGTH", length=length)
        self.write("STAG_ADDR_LO", addr=addr & 0xFFFFFFFF)
        self.write("STAG_ADDR_HI", addr=addr >> 32)
        self.write("STAG_ATTR", valid=valid, remote_read=remote_read, remote_write=remote_write,
                   remote_inv=remote_inv, conn=conn)
        self.write("STAG_CMD", commit=1)
        self._wait("STAG_STATUS", "BUSY", 0)

    def post_recv(self, conn, addr, length, wr_id):
        """Post a receive buffer; False if it was not posted (queue full: RQ_STATUS.FULL before,
        or RQ_STATUS.OVERFLOW after the post, which is then cleared)."""
        if self.field("RQ_STATUS", "FULL"):
            return False
        self._wait("RQ_STATUS", "BUSY", 0)
        if self.field("RQ_STATUS", "OVERFLOW"):
            self.clear("RQ_STATUS", "OVERFLOW")
        self.write("RQ_CONN", conn=conn)
        self.write("RQ_ADDR_LO", addr=addr & 0xFFFFFFFF)
        self.write("RQ_ADDR_HI", addr=addr >> 32)
        self.write("RQ_LENGTH", length=length)
        self.write("RQ_ID", wr_id=wr_id)
        self.write("RQ_CMD", post=1)
        self._wait("RQ_STATUS", "BUSY", 0)
        if self.field("RQ_STATUS", "OVERFLOW"):
            self.clear("RQ_STATUS", "OVERFLOW")
            return False
        return True

    def post_send(self, conn, opcode, *, laddr=0, length=0, lstag=0, rstag=0, rto=0, inv_stag=0,
                  wr_id=0, signaled=True):
        """Post a work request (SQ_* + SQ_CMD.DOORBELL; ``opcode`` a :class:`SqOpcode`); False
        (nothing posted) if the previous doorbell is still waiting for room in its connection's
        send queue (SQ_STATUS.FULL). It completes in CQ_* (:meth:`poll_cq`, queue SQ) when
        ``signaled`` or on an error."""
        self._check_conn(conn)
        if self.field("SQ_STATUS", "FULL"):
            return False
        self.write("SQ_WR", opcode=opcode, signaled=signaled, conn=conn)
        self.write("SQ_LADDR_LO", addr=laddr & 0xFFFFFFFF)
        self.write("SQ_LADDR_HI", addr=laddr >> 32)
        self.write("SQ_LENGTH", length=length)
        self.write("SQ_LSTAG", stag=lstag)
        self.write("SQ_RSTAG", stag=rstag)
        self.write("SQ_RTO_LO", to=rto & 0xFFFFFFFF)
        self.write("SQ_RTO_HI", to=rto >> 32)
        self.write("SQ_INV_STAG", stag=inv_stag)
        self.write("SQ_ID", wr_id=wr_id)
        self.write("SQ_CMD", doorbell=1)
        return True

    def poll_cq(self):
        """Pop the head completion as a :class:`Completion`, or None if the queue is empty."""
        if not self.field("CQ_STATUS", "VALID"):
            return None
        info = self.fields("CQ_INFO")
        c = Completion(self.read("CQ_WR_ID"), info["opcode"], info["queue"], info["status"], info["conn"],
                       self.read("CQ_LENGTH"), bool(info["invalidated"]), self.read("CQ_INV_STAG"),
                       msn=self.read("CQ_MSN"), solicited=bool(info["solicited"]),
                       stag=self.read("CQ_STAG"), to=self.read64("CQ_TO_LO", "CQ_TO_HI"))
        self.write("CQ_CMD", pop=1)
        return c

    def pop_terminate(self):
        """Pop the head report of the receive path as a :class:`TermReport`, or None."""
        st = self.fields("TERM_STATUS")
        if not st["valid"]:
            return None
        info = self.fields("TERM_INFO")
        raw = b"".join(self.read(f"TERM_DATA{k}").to_bytes(4, "little") for k in range(-(-st["len"] // 4)))
        self.write("TERM_CMD", pop=1)
        return TermReport(st["conn"], bool(st["received"]), info["layer"], info["etype"], info["ecode"],
                          raw[:st["len"]])

    def pop_read_request(self):
        """Pop the oldest inbound RDMA Read Request as an :class:`InboundReadRequest`, or None.
        Its IRD slot stays taken until :meth:`read_request_done`."""
        st = self.fields("RRQ_STATUS")
        if not st["valid"]:
            return None
        q = InboundReadRequest(st["conn"], self.read("RRQ_MSN"), self.read("RRQ_SINK_STAG"),
                               self.read64("RRQ_SINK_TO_LO", "RRQ_SINK_TO_HI"), self.read("RRQ_SIZE"),
                               self.read("RRQ_SRC_STAG"), self.read64("RRQ_SRC_TO_LO", "RRQ_SRC_TO_HI"))
        self.write("RRQ_CMD", pop=1)
        return q

    def read_request_done(self, conn):
        """One inbound Read Request of ``conn`` was answered: free its IRD slot."""
        self._check_conn(conn)
        self._wait("RRQ_STATUS", "DONE_BUSY", 0)
        self.write("RRQ_DONE_CONN", conn=conn)
        self.write("RRQ_CMD", done=1)
        self._wait("RRQ_STATUS", "DONE_BUSY", 0)

    # -- the data port (DP_*): ULPDUs through registers alone (boards, simulation)
    def dp_configure(self, *, loopback=False, source=False, sink=False, bypass=False, host_reads=False):
        """Route the data path: LOOPBACK (wire out -> wire in), SOURCE (ULPDUs from DP_TX_DATA),
        SINK (ULPDUs to DP_RX_*), BYPASS (ULPDUs out of the core's rx_ulpdu port instead of the
        DDP/RDMAP receive path), HOST_READS (inbound RDMA Read Requests to RRQ_* for the host to
        answer, instead of the transmit path's Read Responder). All off: received ULPDUs are
        validated and placed by the receive path, work requests (:meth:`post_send`) go out through
        the transmit path, Read Requests are answered in hardware. Change it only while no
        traffic moves."""
        self.write("DP_CTRL", loopback=loopback, source=source, sink=sink, bypass=bypass,
                   host_reads=host_reads)

    def dp_send(self, conn, ulpdu):
        """Send one ULPDU (1..65535 octets) on ``conn`` from the DP TX FIFO (DP_CTRL.SOURCE on).

        Waits until no SEND is running; returns False (nothing written) when the FIFO has
        fewer than ceil(len/4) free words.
        """
        data = bytes(ulpdu)
        if not 1 <= len(data) <= 0xFFFF:
            raise ValueError(f"a ULPDU has 1..65535 octets, not {len(data)}")
        self._check_conn(conn)
        self._wait("DP_TX_STATUS", "BUSY", 0)
        words = -(-len(data) // 4)
        if self.field("DP_TX_STATUS", "FREE") < words:
            return False
        padded = data + bytes(4 * words - len(data))
        for k in range(words):
            self.write("DP_TX_DATA", int.from_bytes(padded[4 * k:4 * k + 4], "little"))
        self.write("DP_TX_CONN", conn=conn)
        self.write("DP_TX_LEN", len=len(data))
        self.write("DP_TX_CMD", send=1)
        return True

    def dp_recv(self):
        """Pop the oldest ULPDU of the DP RX FIFOs (DP_CTRL.SINK on) as a :class:`DpUlpdu`, or None."""
        st = self.fields("DP_RX_STATUS")
        if not st["valid"]:
            return None
        conn = self.field("DP_RX_CONN", "CONN")
        words = -(-st["len"] // 4)
        out = bytearray()
        for k in range(words):
            out += self.read("DP_RX_DATA").to_bytes(4, "little")
            if k < words - 1:
                self.write("DP_RX_CMD", next=1)
        self.write("DP_RX_CMD", pop=1)
        return DpUlpdu(conn, bytes(out[:st["len"]]), DpCrc(st["crc"]), DpError(st["error"]))

    def counters(self):
        """Every counter by lower-case name (the 64-bit pairs as ``rx_octets``, ``tx_octets``)."""
        out = {}
        block = next(b for b in self.map.blocks if b.title == "Counters")
        for r in block.registers:
            if r.name.endswith("_HI"):
                continue
            if r.name.endswith("_LO"):
                base = r.name[:-3]
                out[base.lower()] = self.read64(r.name, base + "_HI")
            else:
                out[r.name.lower()] = self.read(r)
        return out


    # -- the network layer (Network block: NET_*)
    def net_caps(self):
        """NET_CAPS as :class:`NetCaps` (a device without the network layer: ``network`` False)."""
        f = self.fields("NET_CAPS")
        return NetCaps(bool(f["network"]), f["arp_entries"])

    def _write_mac(self, prefix, mac):
        value = int.from_bytes(mac_bytes(mac), "big")
        self.write(f"{prefix}_HI", mac=value >> 32)
        self.write(f"{prefix}_LO", mac=value & 0xFFFFFFFF)

    def _read_mac(self, prefix):
        value = self.field(f"{prefix}_HI", "MAC") << 32 | self.field(f"{prefix}_LO", "MAC")
        return value.to_bytes(6, "big")

    def set_mac(self, mac):
        """Set the NIC's MAC address (bytes or ``"02:00:0a:07:00:02"``); change it while no frame moves."""
        self._write_mac("NET_MAC", mac)

    def get_mac(self) -> bytes:
        return self._read_mac("NET_MAC")

    def set_ip(self, address, prefix=None):
        """Set the NIC's IPv4 address (and, if given, the prefix length 0 .. 32)."""
        self.write("NET_IP", ip=int(ipv4(address)))
        if prefix is not None:
            if isinstance(prefix, bool) or not isinstance(prefix, int) or not 0 <= prefix <= 32:
                raise ValueError(f"prefix length must be 0 .. 32, not {prefix!r}")
            self.write("NET_PREFIX", prefix=prefix)

    def get_ip(self) -> ipaddress.IPv4Address:
        return ipv4(self.field("NET_IP", "IP"))

    def get_prefix(self) -> int:
        return self.field("NET_PREFIX", "PREFIX")

    def set_gateway(self, address):
        """The next hop for destinations outside the prefix (``None`` or 0.0.0.0: none)."""
        self.write("NET_GATEWAY", ip=0 if address is None else int(ipv4(address)))

    def get_gateway(self):
        """The gateway, or ``None`` without one."""
        value = self.field("NET_GATEWAY", "IP")
        return ipv4(value) if value else None

    def set_max_len(self, octets):
        """The longest frame the MAC accepts (octets without FCS; longer ones count as GIANT)."""
        self.write("NET_MAX_LEN", len=octets)

    def net_rx_counters(self):
        """The receive counters as ``{RxDrop: count}`` (``RxDrop.NONE``: good frames)."""
        return {reason: self.read(name) for reason, name in NET_RX_COUNTERS}

    def net_counters(self):
        """Every network counter: ``{"rx": net_rx_counters(), "rx_tcp", "tx_frames", "tx_dropped",
        "tx_drops": {TxDrop: count}}``."""
        return {"rx": self.net_rx_counters(), "rx_tcp": self.read("NET_RX_TCP"),
                "tx_frames": self.read("NET_TX_FRAMES"), "tx_dropped": self.read("NET_TX_DROPPED"),
                "tx_drops": {reason: self.read(name) for reason, name in NET_TX_DROP_COUNTERS}}

    def write_arp(self, index, ip, mac, *, static=True, valid=True):
        """Write ARP cache slot ``index``: ``ip`` -> ``mac``, static (learning leaves it) by
        default; ``valid=False`` frees the slot."""
        caps = self.net_caps()
        if not caps.network:
            raise DeviceMismatch("the device has no network layer (NET_CAPS.NETWORK is 0)")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < caps.arp_entries:
            raise ValueError(f"ARP slot {index!r} is not in 0 .. {caps.arp_entries - 1} "
                             "(NET_CAPS.ARP_ENTRIES)")
        self.write("NET_ARP_IP", ip=int(ipv4(ip)))
        self._write_mac("NET_ARP_MAC", mac)
        self.write("NET_ARP_ENTRY", index=index, valid=int(bool(valid)), static=int(bool(static)))
        self.write("NET_ARP_CMD", write=1)

    def arp_lookup(self, ip):
        """The MAC the ARP cache holds for ``ip`` (bytes), or None."""
        self.write("NET_ARP_LOOKUP_IP", ip=int(ipv4(ip)))
        self._wait("NET_ARP_LOOKUP", "DONE", 1)
        if not self.field("NET_ARP_LOOKUP", "HIT"):
            return None
        return self._read_mac("NET_ARP_LOOKUP_MAC")

    def arp_request(self, ip):
        """Broadcast an ARP request for ``ip`` (waits until the previous one was taken)."""
        self._wait("NET_ARP_STATUS", "REQUEST_BUSY", 0)
        self.write("NET_ARP_IP", ip=int(ipv4(ip)))
        self.write("NET_ARP_CMD", request=1)


def context_from_negotiated(ctx, *, rx_mulpdu=64768):
    """``program_connection`` keyword arguments from :meth:`rnic.host.net.cm.Negotiated.context`.

    Phases are the FPDU stream offsets minus the marker origins mod 512; the
    TX MULPDU is the negotiated one; the RX MULPDU is ``rx_mulpdu`` (the
    largest an RFC 5044 peer can send, as the peer's EMSS is unknown here).
    IRD/ORD of a connection without RFC 6581 data (None) are 0x3FFF ("left to
    the ULP"). A responder whose first FPDU has not arrived starts in
    WAIT_RX (the MPA fence), everything else in RTS.
    """
    def phase(offset, origin):
        return (offset - origin) % 512

    tx = MpaDirection(bool(ctx["markers_tx"]), bool(ctx["crc"]),
                      phase(ctx["tx_fpdu_offset"], ctx["tx_marker_origin"]), ctx["mulpdu"])
    rx = MpaDirection(bool(ctx["markers_rx"]), bool(ctx["crc"]),
                      phase(ctx["rx_fpdu_offset"], ctx["rx_marker_origin"]), rx_mulpdu)
    fenced = ctx["role"] == "responder" and not ctx.get("fence_open", False)
    return {
        "tx": tx, "rx": rx,
        "ird": 0x3FFF if ctx["ird"] is None else ctx["ird"],
        "ord": 0x3FFF if ctx["ord"] is None else ctx["ord"],
        "state": ConnState.WAIT_RX if fenced else ConnState.RTS,
    }


class BankModel(Transport):
    """Behavioural model of :class:`rnic.hdl.regbank.RegisterBank` (bus and core side).

    Parameters are the bank's build parameters (``width``, ``connections``,
    ``stags``). Core side: :attr:`inputs` maps ``(register, field)`` (lower
    case, as the bank's port names) to the value of each RO input;
    :meth:`out` reads a RW or W1C output; :meth:`set_w1c` is one cycle of a
    ``<field>_set`` input; :attr:`pulses` logs ``(register, field, value)``
    for every pulse fired, in order; ``on_pulse(model, register, field,
    value)`` (optional) lets a test emulate the core's reaction.
    """

    def __init__(self, *, regmap=REGMAP, on_pulse=None, **params):
        params = regmap.complete_params({"stags": 256, **params})
        self.map = regmap.decoded(params)
        self.params = params
        self.on_pulse = on_pulse
        self.state = {}      # (reg, field) -> value of RW and W1C storage
        self.inputs = {}     # (reg, field) -> RO input from the core
        self.pulses = []
        self.reset()

    def reset(self):
        self.state.clear()
        for r in self.map:
            for f in r.fields:
                if f.access in (RW, W1C):
                    self.state[(r.port, f.port)] = f.reset
                elif f.access is RO and f.core_facing:
                    self.inputs.setdefault((r.port, f.port), 0)

    def out(self, register, field):
        return self.state[(register.lower(), field.lower())]

    def set_input(self, register, field, value):
        r = self.map[register]
        f = r.field(field)
        if f.access is not RO or not f.core_facing:
            raise ValueError(f"{r.name}.{f.name} is not a core input")
        self.inputs[(r.port, f.port)] = value & f.max

    def set_w1c(self, register, field, bits):
        r = self.map[register]
        f = r.field(field)
        if f.access is not W1C:
            raise ValueError(f"{r.name}.{f.name} is not w1c")
        self.state[(r.port, f.port)] |= bits & f.max

    def field_value(self, r, f):
        if f.access is PULSE:
            return 0
        if f.const:
            return f.reset
        if f.param:
            return self.params[f.param]
        if f.access is RO:
            return self.inputs[(r.port, f.port)]
        return self.state[(r.port, f.port)]

    def read(self, addr):
        """``(data, resp)`` of an AXI4-Lite read."""
        r = self.map.at(addr % self.map.size)
        if r is None:
            return 0, SLVERR
        return sum(self.field_value(r, f) << f.offset for f in r.fields), OKAY

    def write(self, addr, data, strobe=0xF):
        """``resp`` of an AXI4-Lite write with byte ``strobe``."""
        r = self.map.at(addr % self.map.size)
        if r is None:
            return SLVERR
        bytemask = sum(0xFF << (8 * i) for i in range(4) if strobe >> i & 1)
        data &= bytemask
        fired = []
        for f in r.fields:
            key = (r.port, f.port)
            en = (bytemask & f.mask) >> f.offset
            v = (data & f.mask) >> f.offset
            if f.access is RW:
                self.state[key] = (self.state[key] & ~en) | (v & en)
            elif f.access is W1C:
                self.state[key] &= ~v
            elif f.access is PULSE and v:
                fired.append((r.port, f.port, v))
        for p in fired:
            self.pulses.append(p)
            if self.on_pulse:
                self.on_pulse(self, *p)
        return OKAY

    # Transport interface (byte address, full-word access)
    def read32(self, addr):
        data, resp = self.read(addr)
        if resp != OKAY:
            raise OSError(f"SLVERR reading {addr:#x}")
        return data

    def write32(self, addr, value):
        if self.write(addr, value) != OKAY:
            raise OSError(f"SLVERR writing {addr:#x}")
