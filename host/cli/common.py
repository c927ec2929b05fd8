"""What the command modules of ``rnic`` share: exit statuses, output helpers, parameter types
and callbacks, the device and MPA connection options, and the text of events.

Only the standard library and click at import time (``rnic --help`` stays fast); the rest of
rnic is imported inside the functions that need it.
"""

import contextlib
import json
import os
import re
import sys

import click

__all__ = [
    "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_PROTOCOL", "EXIT_PIPE",
    "emit", "fail", "OutputFile", "OutputPath", "UInt", "Hex", "SignedArguments", "device_spec",
    "device_option", "device_kinds_text", "open_device_or_fail",
    "conn_options", "conn_params", "pcap_wrap", "negotiated_text", "event_text",
]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_PROTOCOL = 0, 1, 2, 3
#: A closed standard output (``rnic decode big.bin | head -1``): the status a shell reports
#: for ``cat`` in the same place (128 + SIGPIPE), reached quietly.
EXIT_PIPE = 0


def emit(obj, out):
    """One JSON object on one line of ``out``."""
    out.write(json.dumps(obj) + "\n")


def fail(text):
    """One error line on stderr (the command path first); returns the failure status."""
    ctx = click.get_current_context()
    click.echo(f"{ctx.command_path}: error: {text}", err=True)
    return EXIT_FAILURE


class OutputFile:
    """The ``-o FILE`` of a command: written under a temporary name in FILE's directory and
    renamed onto FILE by :meth:`commit`; without a commit (a failure, an exception) the
    temporary file is removed and FILE left as it was. ``-`` is standard output (written as
    it comes: nothing to take back). Use as a context manager; ``file`` is the binary
    stream."""

    def __init__(self, path, param_hint="'-o' / '--output'"):
        self.path, self._tmp = path, None
        if path in (None, "-"):
            self.file = getattr(sys.stdout, "buffer", sys.stdout)
            return
        import tempfile
        if os.path.isdir(path):
            raise click.BadParameter(f"{path!r} is a directory", param_hint=param_hint)
        directory = os.path.dirname(os.path.abspath(path))
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.",
                                             suffix=".part", dir=directory)
        except OSError as e:
            raise click.BadParameter(f"cannot write {path!r}: {e.strerror}",
                                     param_hint=param_hint) from None
        self.file = os.fdopen(fd, "wb")

    def commit(self):
        """Flush; for a file, give it FILE's name (and the mode a new file would get)."""
        self.file.flush()
        if self._tmp is None:
            return
        self.file.close()
        try:
            mode = os.stat(self.path).st_mode & 0o7777
        except OSError:
            mask = os.umask(0)
            os.umask(mask)
            mode = 0o666 & ~mask
        os.chmod(self._tmp, mode)
        os.replace(self._tmp, self.path)
        self._tmp = None

    def discard(self):
        """Remove the temporary file (FILE stays as it was)."""
        if self._tmp is None:
            return
        self.file.close()
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)
        self._tmp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.discard()


# -- parameter types and callbacks ----------------------------------------------------------

class OutputPath(click.Path):
    """A file the command will write later (``--pcap``): a usage error now, not at the first
    connection, when it names a directory or its directory is missing or not writable."""

    def __init__(self):
        super().__init__(dir_okay=False, writable=True)

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        directory = os.path.dirname(os.path.abspath(value))
        if not os.path.isdir(directory):
            self.fail(f"directory {directory!r} does not exist", param, ctx)
        if not os.access(directory, os.W_OK | os.X_OK):
            self.fail(f"directory {directory!r} is not writable", param, ctx)
        return value


def _parse_uint(text, bits, what):
    text = str(text).strip()          # (SignedArguments marks a negative number with a space)
    try:
        v = int(text.replace("_", ""), 0)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a number (hex 0x.. or decimal)") from None
    if not 0 <= v < 1 << bits:
        raise click.BadParameter(f"{what} {text} does not fit {bits} bits "
                                 f"(0..{(1 << bits) - 1:#x})")
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


_NEGATIVE = re.compile(r"-(0[xX][0-9a-fA-F_]+|[0-9][0-9_]*)")


class SignedArguments(click.Command):
    """A command whose arguments may be given as negative numbers.

    click takes ``-1`` for an option ("No such option '-1'"); here such a token reaches its
    argument (marked with a leading space, which ``int`` ignores), whose type then says
    what is wrong with it.
    """

    def parse_args(self, ctx, args):
        marked = []
        for i, arg in enumerate(args):
            if arg == "--":
                marked += args[i:]
                break
            marked.append(" " + arg if _NEGATIVE.fullmatch(arg) else arg)
        return super().parse_args(ctx, marked)


def _rtr_types(ctx, param, value):
    if value is None:
        return None
    names = {n.strip().lower() for n in value.split(",") if n.strip()}
    bad = names - {"send", "write", "read"}
    if bad or not names:
        raise click.BadParameter(f"{value!r}: give a comma list of send, write, read")
    return frozenset(names)


# -- devices --------------------------------------------------------------------------------

def device_kinds_text(names=None):
    """The device kinds (``names``: only those) as every ``--device`` help lists them, from
    the driver's one list (:func:`rnic.host.driver.device.device_kinds`)."""
    from rnic.host.driver.device import device_kinds
    return "; ".join(f"{k.usage}: {k.help}" for k in device_kinds().values()
                     if names is None or k.name in names)


def device_spec(allow_none=True):
    """The callback of a ``--device`` option: the spec, checked (not opened)."""
    def check(ctx, param, value):
        from rnic.host.driver.device import device_kinds, parse_device_spec
        try:
            kind, arg = parse_device_spec(value)
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
        if kind == "uart":
            _check_uart_path(arg)
        if kind == "none" and not allow_none:
            raise click.BadParameter("this command needs a device (" + ", ".join(
                k.usage for k in device_kinds().values() if k.name != "none") + ")")
        return value
    return check


def _check_uart_path(arg):
    """A serial port that is not there is a usage error (as an input file that is not there),
    found before anything is opened."""
    from rnic.host.driver.uart import parse_uart_spec
    path, _ = parse_uart_spec(arg)
    if not os.path.exists(path):
        raise click.BadParameter(f"uart:{path}: no such serial port")


class _DeviceOption(click.Option):
    """A ``--device`` option whose help ends with the device kinds, read from the driver
    only when the help is shown (``rnic --help`` does not load the device plug-ins)."""

    def __init__(self, *args, purpose, kinds=None, extra=None, **kw):
        super().__init__(*args, **kw)
        self.purpose, self.kinds, self.extra = purpose, kinds, extra

    def get_help_record(self, ctx):
        self.help = (f"{self.purpose} Kinds: {device_kinds_text(self.kinds)}"
                     + (f"; {self.extra}" if self.extra else "") + ".")
        return super().get_help_record(ctx)


def device_option(purpose, *, default="none", allow_none=True, kinds=None, extra=None,
                  choices=None):
    """The ``--device`` option of a command: ``purpose`` says what the device is for; the
    help lists every kind the command takes (``kinds``: only these names), then ``extra``.
    ``choices``: the command takes exactly these words (no parameters), not a device spec."""
    if kinds is None and not allow_none:
        kinds = _AllBut("none")
    check = ({"type": click.Choice(choices)} if choices else
             {"callback": device_spec(allow_none=allow_none), "metavar": "SPEC"})
    return click.option("--device", cls=_DeviceOption, purpose=purpose, kinds=kinds,
                        extra=extra, default=default, show_default=True, **check)


class _AllBut:
    """Every name but some (a ``kinds`` filter of device_kinds_text)."""

    def __init__(self, *names):
        self.names = names

    def __contains__(self, name):
        return name not in self.names


def open_device_or_fail(spec):
    """``(device or None, status)``: the device opened (showing the simulator's build, if one
    is needed), or None and the failure status after one error line. A spec whose
    parameters the device refuses is a usage error."""
    from rnic.host.cli.progress import sim_build_progress
    from rnic.host.driver.device import DeviceError, open_device
    try:
        with sim_build_progress():
            return open_device(spec), None
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--device'") from None
    except (DeviceError, OSError) as e:
        return None, fail(str(e))


# -- MPA connections: listen, connect, rping ------------------------------------------------

def conn_options(f):
    """MPA options shared by listen, connect and rping."""
    f = click.option("--timeout", type=click.FloatRange(0.1, 3600), default=5.0,
                     show_default=True, help="Seconds for the MPA exchange and each transfer.")(f)
    f = device_option("The data path of the connection: a device kept in step with the "
                      "software RNIC, or one that moves the data itself (sim).")(f)
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
