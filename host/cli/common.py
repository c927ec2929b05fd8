"""What the command modules of ``rnic`` share: exit statuses, output helpers, parameter types
and callbacks, the device and MPA connection options, and the text of events.

Only the standard library and click at import time (``rnic --help`` stays fast); the rest of
rnic is imported inside the functions that need it.
"""

import json
import sys

import click

__all__ = [
    "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_PROTOCOL",
    "emit", "fail", "progress_say", "UInt", "Hex", "device_spec", "open_device_or_fail",
    "conn_options", "conn_params", "pcap_wrap", "negotiated_text", "event_text",
]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_PROTOCOL = 0, 1, 2, 3


def emit(obj, out):
    """One JSON object on one line of ``out``."""
    out.write(json.dumps(obj) + "\n")


def fail(text):
    """One error line on stderr (the command path first); returns the failure status."""
    ctx = click.get_current_context()
    click.echo(f"{ctx.command_path}: error: {text}", err=True)
    return EXIT_FAILURE


def progress_say():
    """Progress lines on stderr when it is a terminal; None (quiet) when piped."""
    if not sys.stderr.isatty():
        return None
    import time as _time
    start = _time.monotonic()

    def say(text):
        click.echo(f"[{_time.monotonic() - start:7.1f} s] {text}", err=True)
    return say


# -- parameter types and callbacks ----------------------------------------------------------

def _parse_uint(text, bits, what):
    try:
        v = int(str(text).replace("_", ""), 0)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a number (hex 0x.. or decimal)") from None
    if not 0 <= v < 1 << bits:
        raise click.BadParameter(f"{what} {text} does not fit {bits} bits")
    return v


class UInt(click.ParamType):
    """An unsigned integer of ``bits`` bits, hex (0x..) or decimal."""

    def __init__(self, bits, what="value"):
        self.bits, self.what = bits, what
        self.name = f"u{bits}"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return _parse_uint(value, self.bits, self.what)
        except click.BadParameter as e:
            self.fail(e.message, param, ctx)


class Hex(click.ParamType):
    """Octets as hex (spaces, colons and a 0x prefix allowed; "" is no octets)."""
    name = "hex"

    def convert(self, value, param, ctx):
        if isinstance(value, bytes):
            return value
        text = value.strip()
        if text[:2].lower() == "0x":
            text = text[2:]
        try:
            return bytes.fromhex(text.replace(":", " "))
        except ValueError:
            self.fail(f"{value!r} is not hex octets (e.g. 68656c6c6f)", param, ctx)


def _rtr_types(ctx, param, value):
    if value is None:
        return None
    names = {n.strip().lower() for n in value.split(",") if n.strip()}
    bad = names - {"send", "write", "read"}
    if bad or not names:
        raise click.BadParameter(f"{value!r}: give a comma list of send, write, read")
    return frozenset(names)


def device_spec(allow_none=True):
    """The callback of a ``--device`` option: the spec, checked (not opened)."""
    def check(ctx, param, value):
        from rnic.host.driver.device import parse_device_spec
        try:
            kind, _ = parse_device_spec(value)
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
        if kind == "none" and not allow_none:
            raise click.BadParameter("this command needs a device (model or tcp:HOST:PORT)")
        return value
    return check


def open_device_or_fail(spec):
    """``(device or None, status)``; prints the error line when it cannot be opened."""
    from rnic.host.driver.device import DeviceError, open_device
    try:
        return open_device(spec), None
    except (DeviceError, OSError) as e:
        return None, fail(str(e))


# -- MPA connections: listen, connect, rping ------------------------------------------------

def conn_options(f):
    """MPA options shared by listen, connect and rping."""
    f = click.option("--timeout", type=click.FloatRange(0.1, 3600), default=5.0,
                     show_default=True, help="Seconds for the MPA exchange and each transfer.")(f)
    f = click.option("--device", default="none", show_default=True, callback=device_spec(),
                     help="Device kept in step with the connection: none, model, tcp:HOST:PORT.")(f)
    f = click.option("--private-data", type=Hex(), default="", help="MPA private data (hex).")(f)
    f = click.option("--crc/--no-crc", default=True, show_default=True,
                     help="Ask for CRCs (C); on if either side asks.")(f)
    f = click.option("--markers", is_flag=True, help="Ask for markers in what this side receives (M).")(f)
    f = click.option("--rtr", callback=_rtr_types, default="send,write,read", show_default=True,
                     help="RTR types (RFC 6581) proposed or supported, comma list.")(f)
    f = click.option("--ord", "ord_", type=click.IntRange(0, 0x3FFF), default=4, show_default=True,
                     help="ORD wanted (outbound RDMA Reads); 16383: left to the ULP.")(f)
    f = click.option("--ird", type=click.IntRange(0, 0x3FFF), default=4, show_default=True,
                     help="IRD offered (inbound RDMA Reads); 16383: left to the ULP.")(f)
    f = click.option("--rev", type=click.IntRange(1, 2), default=2, show_default=True,
                     help="MPA revision: 2 = RFC 6581 enhanced setup (IRD/ORD, RTR).")(f)
    return f


def conn_params(**kw):
    """rnic.host.net.cm.ConnParams of the options (a usage error when they do not fit)."""
    from rnic.host.net.cm import ConnParams
    try:
        return ConnParams(**kw)
    except (ValueError, TypeError) as e:
        raise click.UsageError(str(e)) from None


def pcap_wrap(path, *, active):
    """A ``wrap(sock)`` that records the connection into ``path`` (None without --pcap)."""
    if not path:
        return None
    from rnic.host.net import pcap

    def wrap(sock):
        return pcap.record(sock, path, active=active)
    return wrap


def negotiated_text(n):
    """One line of the negotiated MPA parameters (``negotiated_json``)."""
    def onoff(b):
        return "on" if b else "off"
    enh = f"rev {n['rev']}" + (" enhanced" if n["enhanced"] else "")
    ird = "-" if n["ird"] is None else n["ird"]
    ord_ = "-" if n["ord"] is None else n["ord"]
    p2p = f"p2p yes (RTR {n['rtr'] or 'offered'})" if n["p2p"] else "p2p no"
    pd = n["peer_private_data"] or "-"
    return (f"{enh}, markers sent {onoff(n['markers_tx'])} / received {onoff(n['markers_rx'])}, "
            f"CRC {onoff(n['crc'])}, IRD {ird}, ORD {ord_}, {p2p}, MULPDU {n['mulpdu']}, "
            f"peer private data {pd}")


def _short_hex(h, limit=64):
    return h if len(h) <= 2 * limit else h[:2 * limit] + f"... ({len(h) // 2} octets)"


def event_text(obj):
    """One line of a data path event (``Event.to_json``)."""
    from rnic.host.net.transfer import describe_error
    from rnic.host.spec.errors import ErrorInfo
    kind = obj["event"]
    err = obj.get("error")
    info = ErrorInfo(**err) if err else None
    if kind == "completion":
        head = (f"{obj['queue']} {obj['opcode']} wr_id {obj['wr_id']}: {obj['status']}, "
                f"{obj['length']} octets")
        if "data" in obj:
            head += f": {_short_hex(obj['data'])}"
        if info is not None:
            head += f" ({describe_error(info)})"
        return head
    if kind == "remote_write":
        return (f"remote write of {obj['length']} octets to STag {obj['stag']:#x} TO "
                f"{obj['to']:#x}: {_short_hex(obj.get('data', ''))}")
    if kind == "remote_read":
        return f"remote read of {obj['length']} octets from STag {obj['stag']:#x} TO {obj['to']:#x}"
    if kind == "terminate_sent":
        return f"Terminate sent: {describe_error(info)}"
    if kind == "terminate_received":
        return f"Terminate received: {describe_error(info)}"
    if kind == "error":
        return f"connection error: {describe_error(info)}"
    if kind == "closed":
        return "connection closed" + (f": {describe_error(info)}" if info else "")
    return json.dumps(obj)
