"""The RNIC driver: typed register access to a device over a pluggable transport.

:class:`Device`
    The driver: :meth:`~Device.identify`, :meth:`~Device.reset`,
    :meth:`~Device.program_connection` (from a :class:`rnic.host.net.cm.Negotiated`),
    :meth:`~Device.register_stag`, :meth:`~Device.post_receive`,
    :meth:`~Device.post_send` (a :class:`WorkRequest`),
    :meth:`~Device.poll_cq`, :meth:`~Device.read_errors`,
    :meth:`~Device.counters`, :meth:`~Device.status`, and register access by
    name (``REG`` or ``REG.FIELD``) for ``rnic regs``. The sequences are
    those of :class:`rnic.host.driver.regs.Registers` (and of ``firmware/rnic.c``).

:func:`open_device`
    Opens a device by its spec (:data:`DEVICE_KINDS` lists the kinds, one place for
    every help text): ``none`` (no device: None), ``model`` (a fresh in-process model,
    :mod:`rnic.host.driver.model`), ``tcp:HOST:PORT`` (a register server, e.g. ``rnic
    serve`` or ``rnic nic-sim``), ``uart:PATH[@BAUD]`` (a board, :mod:`rnic.host.driver.uart`)
    and ``sim[:width=8,...]`` (the Verilated core). Kinds implemented in higher layers
    (``sim``) register themselves as entry points of the group ``rnic.devices``, so the
    driver never imports them; more kinds plug in the same way or with
    :func:`register_device_kind`.
"""

from __future__ import annotations

import dataclasses

from rnic.host.driver import regs
from rnic.host.driver.transport import (DeviceError, DeviceMismatch, DeviceUnavailable, QueueFull,
                                        Transport, TransportError)
from rnic.host.model.ethernet import format_mac
from rnic.host.spec.errors import Layer
from rnic.host.spec.net import RxDrop, TxDrop
from rnic.host.spec.regmap import PULSE, REGMAP, RO, ConnState, SqOpcode

__all__ = [
    "Transport", "TransportError", "DeviceError", "DeviceMismatch", "DeviceUnavailable",
    "QueueFull", "Identity", "WorkRequest", "Device", "DEVICE_KINDS",
    "register_device_kind", "parse_device_spec", "open_device", "describe_layer",
    "DeviceKind", "BUILTIN_KINDS", "ENTRY_POINT_GROUP", "device_kinds", "device_help",
    "parse_params", "parse_host_port",
]


# -- the driver ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Identity:
    """What :meth:`Device.identify` found."""
    magic: int
    major: int
    minor: int
    width: int
    connections: int
    stags: int
    #: Inbound and outbound RDMA Reads the core holds per connection (QUEUE_CAPS; None:
    #: not reported).
    ird_depth: int | None = None
    ord_depth: int | None = None

    def to_json(self):
        return {"magic": f"{self.magic:#010x}", "version": f"{self.major}.{self.minor}",
                "width": self.width, "connections": self.connections, "stags": self.stags,
                "ird_depth": self.ird_depth, "ord_depth": self.ord_depth}


@dataclasses.dataclass(frozen=True)
class WorkRequest:
    """A send queue work request (the SQ_* registers).

    ``opcode`` is a :class:`~rnic.host.spec.regmap.SqOpcode` (or its name). ``laddr`` is
    the local address of Send/Write data or the sink TO of an RDMA Read
    (with ``lstag`` its sink STag); ``rstag``/``rto`` the remote STag and TO
    of a Write or Read; ``inv_stag`` the STag the peer invalidates.
    """
    opcode: SqOpcode
    conn: int = 0
    laddr: int = 0
    length: int = 0
    lstag: int = 0
    rstag: int = 0
    rto: int = 0
    inv_stag: int = 0
    wr_id: int = 0
    signaled: bool = True

    def __post_init__(self):
        op = self.opcode
        if isinstance(op, str):
            try:
                op = SqOpcode[op.upper()]
            except KeyError:
                raise ValueError(f"unknown work request opcode {self.opcode!r} (known: "
                                 f"{', '.join(m.name.lower() for m in SqOpcode)})") from None
        object.__setattr__(self, "opcode", SqOpcode(op))
        for name, bits in (("conn", 16), ("laddr", 64), ("length", 32), ("lstag", 32),
                           ("rstag", 32), ("rto", 64), ("inv_stag", 32), ("wr_id", 32)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << bits:
                raise ValueError(f"{name} = {v!r} does not fit {bits} bits")


def _state_name(v):
    return ConnState(v).name if v in ConnState._value2member_map_ else int(v)


class Device:
    """The RNIC driver over a :class:`Transport`.

    Parameters
    ----------
    transport : Transport
    polls : int
        Bound of every busy-wait (reads before TimeoutError).
    spec : str
        How the device was opened (for status output).
    """

    #: Set by a device kind whose hardware moves data itself: a callable
    #: ``factory(device, negotiated, conn) -> rnic.host.net.rnic_sw.DataPath``. None:
    #: the software RNIC moves the data and the device is kept in step
    #: (:mod:`rnic.host.net.transfer`).
    datapath_factory = None
    @property
    def read_limit(self):
        """The IRD to negotiate at most: the inbound RDMA Read Requests the device's core
        holds per connection (QUEUE_CAPS.IRD of its identity); None: no limit reported."""
        return self._ident().ird_depth

    def __init__(self, transport, *, polls=1000, spec=None):
        self.transport = transport
        self.regs = regs.Registers(transport, polls=polls)
        self.spec = spec or getattr(transport, "name", "device")
        self.identity = None
        self._stag_index = {}

    # -- identification and control
    def identify(self):
        """Read ID, VERSION, CAPS and QUEUE_CAPS (:meth:`Registers.probe`, once each); raise
        :class:`DeviceMismatch` with a clear text on mismatch."""
        try:
            info = self.regs.probe()
        except OSError as e:
            raise DeviceError(f"{self.spec}: reading its identity failed: {e}") from None
        except regs.DeviceMismatch as e:
            raise DeviceMismatch(f"{self.spec}: {e}") from None
        self.identity = Identity(regs.MAGIC, info.major, info.minor, info.width, info.connections,
                                 info.stags, info.ird_depth, info.ord_depth)
        return self.identity

    def _ident(self):
        return self.identity or self.identify()

    def reset(self):
        """Soft reset (wait for READY) and enable the data path."""
        self._ident()
        self.regs.soft_reset()
        self.regs.enable(True)

    def enable(self, on=True):
        self.regs.enable(on)

    # -- connections
    def program_connection(self, conn, negotiated, *, rx_mulpdu=64768):
        """Write connection ``conn``'s context from the MPA negotiation and commit it.

        ``negotiated`` is a :class:`rnic.host.net.cm.Negotiated`, its ``context()``
        dict, or the keyword arguments of
        :meth:`rnic.host.driver.regs.Registers.program_connection`. Returns those keyword
        arguments (tx, rx, ird, ord, state).
        """
        self._ident()
        if hasattr(negotiated, "context") and callable(negotiated.context):
            ctx = {**negotiated.context(), "fence_open": negotiated.fence_open}
            kw = regs.context_from_negotiated(ctx, rx_mulpdu=rx_mulpdu)
        elif isinstance(negotiated, dict) and "tx" in negotiated:
            kw = dict(negotiated)
        elif isinstance(negotiated, dict):
            kw = regs.context_from_negotiated(negotiated, rx_mulpdu=rx_mulpdu)
        else:
            raise TypeError("negotiated must be a rnic.host.net.cm.Negotiated or a context dict")
        self.regs.program_connection(conn, **kw)
        return kw

    def set_state(self, conn, state):
        if isinstance(state, str):
            state = ConnState[state.upper()]
        self.regs.set_state(conn, state)

    def connection(self, conn):
        """``{"conn", "state", "busy", "error"}`` of one connection (error: layer/etype/ecode or None)."""
        st = self.regs.connection_status(conn)
        err = ({"layer": st["layer"], "etype": st["etype"], "ecode": st["ecode"]}
               if st["error"] else None)
        return {"conn": conn, "state": _state_name(st["state"]), "busy": bool(st["busy"]),
                "error": err}

    # -- memory registration and queues
    def register_stag(self, stag, *, base, length, conn=0, addr=None, remote_read=False,
                      remote_write=False, remote_inv=False, index=None):
        """Write an STag table row (a free one, or the row already holding ``stag``); returns the row.
        TOs ``base ..`` at host memory ``addr ..`` (default ``base``)."""
        ident = self._ident()
        if index is None:
            index = self._stag_index.get(stag)
        if index is None:
            used = set(self._stag_index.values())
            index = next((i for i in range(ident.stags) if i not in used), None)
            if index is None:
                raise QueueFull(f"STag table full ({ident.stags} rows)")
        if not 0 <= index < ident.stags:
            raise ValueError(f"STag row {index} out of range 0..{ident.stags - 1}")
        self.regs.write_stag(index, stag=stag, base=base, length=length, conn=conn, addr=addr,
                             remote_read=remote_read, remote_write=remote_write,
                             remote_inv=remote_inv, valid=True)
        self._stag_index[stag] = index
        return index

    def invalidate_stag(self, stag):
        """Clear VALID of ``stag``'s row (KeyError if this driver never registered it)."""
        index = self._stag_index.pop(stag)
        self.regs.write_stag(index, stag=stag, base=0, length=0, conn=0, valid=False)

    def post_receive(self, conn, addr, length, wr_id):
        """Post a receive buffer; :class:`QueueFull` if the receive queue has no room."""
        if not self.regs.post_recv(conn, addr, length, wr_id & 0xFFFFFFFF):
            raise QueueFull(f"receive queue of connection {conn} is full")

    def post_send(self, wr):
        """Post a :class:`WorkRequest`; :class:`QueueFull` if the send queue has no room."""
        if not isinstance(wr, WorkRequest):
            raise TypeError("wr must be a WorkRequest")
        if not self.regs.post_send(wr.conn, wr.opcode, laddr=wr.laddr, length=wr.length,
                                   lstag=wr.lstag, rstag=wr.rstag, rto=wr.rto,
                                   inv_stag=wr.inv_stag, wr_id=wr.wr_id, signaled=wr.signaled):
            raise QueueFull(f"send queue of connection {wr.conn} is full")

    def poll_cq(self, max_entries=64):
        """Pop up to ``max_entries`` completions (:class:`rnic.host.driver.regs.Completion`), oldest first."""
        out = []
        while len(out) < max_entries:
            c = self.regs.poll_cq()
            if c is None:
                break
            out.append(c)
        return out

    # -- errors, counters, status
    def read_errors(self, max_entries=64):
        """Pop captured errors (:class:`rnic.host.driver.regs.ErrorReport`) until none is pending."""
        out = []
        while len(out) < max_entries:
            e = self.regs.pop_error()
            if e is None:
                break
            out.append(e)
        return out

    def last_error(self):
        """The captured error without clearing it (a dict), or None."""
        st = self.regs.fields("ERR_STATUS")
        if not st["pending"]:
            return None
        where, info = self.regs.fields("ERR_CONN"), self.regs.fields("ERR_INFO")
        return {"conn": where["conn"], "tx": bool(where["tx"]), "layer": info["layer"],
                "etype": info["etype"], "ecode": info["ecode"], "overflow": bool(st["overflow"])}

    def counters(self):
        """Every counter by lower-case name (64-bit pairs joined), plus ``err_count``."""
        out = self.regs.counters()
        out["err_count"] = self.regs.read("ERR_COUNT")
        return out

    def status(self, *, max_connections=1024):
        """Identity, enable/ready, non-idle connections, counters, the captured error, the
        network layer's addresses and counters (``network``) and the TCP engine's open
        connections and counters (``tcp``; each None on a device without it)."""
        ident = self._ident()
        conns = []
        for conn in range(min(ident.connections, max_connections)):
            c = self.connection(conn)
            if c["state"] != "IDLE" or c["error"]:
                conns.append(c)
        return {"device": self.spec, "identity": ident.to_json(),
                "enabled": bool(self.regs.field("CTRL", "ENABLE")),
                "ready": bool(self.regs.field("STATUS", "READY")),
                "connections": conns, "counters": self.counters(),
                "last_error": self.last_error(), "network": self.network_status(),
                "tcp": self.tcp_status(max_connections)}

    def network_status(self):
        """The network layer's addresses and frame counters (drops by reason, the non-zero
        ones), or None on a device without one."""
        if not self.regs.net_caps().network:
            return None
        regs = self.regs
        counters = regs.net_counters()
        gateway = regs.get_gateway()
        return {"mac": format_mac(regs.get_mac()), "ip": str(regs.get_ip()),
                "prefix": regs.get_prefix(), "gateway": None if gateway is None else str(gateway),
                "rx_good": counters["rx"][RxDrop.NONE], "rx_tcp": counters["rx_tcp"],
                "rx_drops": {r.name: n for r, n in counters["rx"].items()
                             if n and r is not RxDrop.NONE},
                "tx_frames": counters["tx_frames"], "tx_dropped": counters["tx_dropped"],
                "tx_drops": {r.name: n for r, n in counters["tx_drops"].items()
                             if n and r is not TxDrop.NONE}}

    def tcp_status(self, max_connections=1024):
        """The TCP engine's open connections (:meth:`~rnic.host.driver.tcp_regs.TcpConnection.
        as_dict`) and counters, or None on a device without one."""
        if not self.regs.tcp_caps().tcp:
            return None
        connections = min(self._ident().connections, max_connections)
        tcbs = [self.regs.tcp_connection(c) for c in range(connections)]
        counters = self.regs.tcp_counters()
        return {"connections": [t.as_dict() for t in tcbs if t.state.name != "CLOSED"],
                "now": counters["now"], "tx_segments": counters["tx_segments"],
                "retransmits": counters["retransmits"], "events_lost": counters["events_lost"],
                "drops": {reason.name: n for reason, n in counters["drops"].items() if n}}

    # -- registers by name (rnic regs)
    @staticmethod
    def lookup(name):
        """``(Register, Field or None)`` for ``REG`` or ``REG.FIELD`` (KeyError with the choices)."""
        reg_name, _, field_name = name.partition(".")
        r = REGMAP[reg_name]
        return r, (r.field(field_name) if field_name else None)

    def read_register(self, name):
        """``{"name", "addr", "value", "fields"}`` for ``REG``; ``{"name", "value"}`` for ``REG.FIELD``."""
        r, f = self.lookup(name)
        value = self.regs.read(r)
        if f is not None:
            return {"name": f"{r.name}.{f.name}", "addr": r.addr,
                    "value": (value & f.mask) >> f.offset}
        return {"name": r.name, "addr": r.addr, "value": value,
                "fields": regs.decode(r, value)}

    def write_register(self, name, value):
        """Write ``REG`` (whole word) or ``REG.FIELD`` (read-modify-write of the RW bits:
        W1C/pulse bits of other fields are written as 0). Returns the word written."""
        r, f = self.lookup(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("value must be an int")
        if f is None:
            if not 0 <= value <= 0xFFFFFFFF:
                raise ValueError(f"{r.name}: {value:#x} does not fit 32 bits")
            if all(x.access is RO for x in r.fields):
                raise ValueError(f"{r.name} is read-only")
            word = value
        else:
            if f.access is RO:
                raise ValueError(f"{r.name}.{f.name} is read-only")
            if not 0 <= value <= f.max:
                raise ValueError(f"{r.name}.{f.name}: {value:#x} does not fit {f.width} bits")
            old = self.regs.read(r) if r.rw_mask else 0
            word = regs.merge(r, old, **{f.name: value})
        self.transport.write32(r.addr, word)
        return word

    def dump(self):
        """Every readable register: list of ``{"name", "addr", "access", "value", "fields"}``."""
        out = []
        for r in REGMAP:
            if all(f.access is PULSE for f in r.fields):
                continue
            value = self.regs.read(r)
            out.append({"name": r.name, "addr": r.addr, "access": r.access_summary,
                        "value": value, "fields": regs.decode(r, value)})
        return out

    def close(self):
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- device registry -------------------------------------------------------------------

def parse_params(arg, keys, usage):
    """``{key: int}`` from ``key=value,...`` (None or empty: ``{}``); ValueError naming the
    bad item and the ``usage`` for anything else."""
    params = {}
    for item in (arg or "").split(","):
        if not item.strip():
            continue
        key, sep, val = item.partition("=")
        key, val = key.strip(), val.strip()
        if key not in keys or not sep or not val.isdigit():
            raise ValueError(f"bad parameter {item!r} (expected {usage})")
        params[key] = int(val)
    return params


def parse_host_port(arg):
    """``(host, port)`` of ``HOST:PORT``; ValueError otherwise."""
    host, sep, port = (arg or "").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {arg!r}")
    return host, int(port)


_MODEL_KEYS = ("width", "connections", "stags")
_MODEL_USAGE = "model[:width=8,connections=16,stags=256]"


def _open_model(arg, **kw):
    from rnic.host.driver.model import ModelTransport
    return ModelTransport(**{**parse_params(arg, _MODEL_KEYS, _MODEL_USAGE), **kw})


def _open_tcp(arg, **kw):
    from rnic.host.driver.transport import SocketTransport
    host, port = parse_host_port(arg)
    return SocketTransport(host, port, **kw)


def _open_uart(arg, **kw):
    from rnic.host.driver.uart import open_uart
    return open_uart(arg, **kw)


def _check_uart(arg):
    from rnic.host.driver.uart import parse_uart_spec
    return parse_uart_spec(arg)


@dataclasses.dataclass(frozen=True)
class DeviceKind:
    """A kind of device spec (``KIND`` or ``KIND:ARG``).

    ``usage`` and ``help`` are what every help text shows (:func:`device_help`).
    ``check(arg)`` raises ValueError for a malformed ``arg`` (None: no colon), before
    anything is opened; ``open(arg, **kw)`` returns a :class:`Transport` or a
    :class:`Device`. ``lasting``: the device outlives the command that opens it (so
    ``rnic regs write`` then ``rnic regs read`` see the same registers).
    """
    name: str
    usage: str
    help: str
    check: object = None
    open: object = None
    lasting: bool = False


#: The kinds this layer implements. Kinds of higher layers (``sim``) are entry points of
#: the group :data:`ENTRY_POINT_GROUP`, each naming a :class:`DeviceKind`.
BUILTIN_KINDS = (
    DeviceKind("none", "none", "no device: the software RNIC moves the data"),
    DeviceKind("model", _MODEL_USAGE,
               "a fresh in-process model of the register bank and core, made for this one "
               "command (it starts from reset every time)",
               check=lambda arg: parse_params(arg, _MODEL_KEYS, _MODEL_USAGE), open=_open_model),
    DeviceKind("tcp", "tcp:HOST:PORT",
               "a register server that outlives the command: 'rnic serve' (a model or the "
               "simulated core), a simulated NIC",
               check=parse_host_port, open=_open_tcp, lasting=True),
    DeviceKind("uart", "uart:PATH[@BAUD]",
               "a board running the bitstream, through its UART bridge (default 115200 baud)",
               check=_check_uart, open=_open_uart, lasting=True),
)
ENTRY_POINT_GROUP = "rnic.devices"

#: kind name -> :class:`DeviceKind`; filled on first use (built-ins, entry points, then
#: :func:`register_device_kind`).
DEVICE_KINDS = {}


def device_kinds():
    """``{name: DeviceKind}`` of every known kind, in the order help texts list them."""
    if not DEVICE_KINDS:
        from importlib.metadata import entry_points
        DEVICE_KINDS.update((k.name, k) for k in BUILTIN_KINDS)
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            try:
                kind = ep.load()
            except Exception as e:          # a broken plug-in must not break the driver
                kind = DeviceKind(ep.name, ep.name, f"not available here ({e})",
                                  open=_unavailable(ep.name, e))
            DEVICE_KINDS.setdefault(kind.name, kind)
    return DEVICE_KINDS


def _unavailable(name, exc):
    def opener(arg, **kw):
        raise DeviceUnavailable(f"device kind {name!r} cannot be loaded: {exc}")
    return opener


def device_help():
    """One text listing every device kind: what every ``--device`` help shows."""
    return "; ".join(f"{k.usage}: {k.help}" for k in device_kinds().values())


def register_device_kind(kind, opener=None):
    """Add (or replace) a device kind: a :class:`DeviceKind`, or a name and
    ``opener(arg, **kw)`` returning a Transport or a Device (``arg``: what follows
    ``kind:`` in the spec, None without a colon)."""
    if not isinstance(kind, DeviceKind):
        kind = DeviceKind(kind, kind, "registered at run time", open=opener)
    if kind.name == "none" or not kind.name.isidentifier():
        raise ValueError(f"bad device kind {kind.name!r}")
    device_kinds()[kind.name] = kind


def parse_device_spec(spec):
    """``(kind, arg)`` of a device spec; ValueError (one line, naming the known kinds or
    the expected form) for a bad one. Nothing is opened."""
    if not isinstance(spec, str) or not spec:
        raise ValueError("empty device spec")
    name, sep, arg = spec.partition(":")
    kinds = device_kinds()
    if name not in kinds:
        raise ValueError(f"unknown device {spec!r} (known: "
                         + ", ".join(k.usage for k in kinds.values()) + ")")
    arg = arg if sep else None
    kind = kinds[name]
    if name == "none" and sep:
        raise ValueError(f"device 'none' takes no argument, got {spec!r}")
    if kind.check is not None:
        kind.check(arg)
    return name, arg


def open_device(spec, *, identify=True, **kw):
    """Open the device named by ``spec`` (see :func:`device_kinds`); ``none`` gives None.

    With ``identify`` the device's identity is checked (DeviceMismatch).
    Raises ValueError for a malformed spec, DeviceUnavailable / DeviceError
    when it cannot be opened.
    """
    name, arg = parse_device_spec(spec)
    if name == "none":
        return None
    kind = device_kinds()[name]
    if kind.open is None:
        raise DeviceUnavailable(f"device kind {name!r} cannot be opened here")
    opened = kind.open(arg, **kw)
    dev = opened if isinstance(opened, Device) else Device(opened, spec=spec)
    if identify:
        try:
            dev.identify()
        except Exception:
            dev.close()
            raise
    return dev


def describe_layer(layer):
    """Name of a Terminate layer number."""
    return Layer(layer).name if layer in Layer._value2member_map_ else str(layer)
