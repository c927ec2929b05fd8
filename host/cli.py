"""The ``rnic`` command line.

Exit status everywhere: 0 ok, 1 failure, 2 usage (bad option, unreadable
input; one line on stderr), 3 a protocol error found in the input
(``rnic decode``).
"""

import json
import sys

import click

__all__ = ["main", "cli", "ENGINES"]

#: Engines that ``rnic encode``/``rnic decode`` can run on: the Python model (host.fpdu)
#: or the Verilated gateware (hdl.mpa_rx / hdl.mpa_tx through sim.mpa_engine).
ENGINES = ("model", "rtl")

#: Boards of ``rnic build`` (the keys of hdl.board_top.BOARDS; kept here so that the CLI
#: starts without importing Amaranth; tests check that the two agree).
_BOARD_NAMES = ("versa_ecp5", "ecpix5", "ecpix5_45")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_PROTOCOL = 0, 1, 2, 3

_CHUNK = 1 << 16


def _marker_origin(ctx, param, value):
    if value % 4:
        raise click.BadParameter(
            f"{value} is not a multiple of 4 (markers and FPDUs share the 4-octet grid)")
    return value


def _strict_check(ulpdu):
    """The stateless header checks of a data sink: DDP/RDMAP version, opcode, queue number."""
    from . import ddp, rdmap
    from .errors import DdpErrorType, DdpUntaggedCode, ErrorInfo, ProtocolError, \
        RdmapErrorType, RdmapOperationCode
    try:
        header, _ = ddp.parse(ulpdu)
    except ProtocolError as exc:
        return exc.info
    info = ddp.check_version(header) or rdmap.check_header(header)
    if info is not None or header.tagged:
        return info
    if header.qn > 2:
        return ErrorInfo.ddp(DdpErrorType.UNTAGGED, DdpUntaggedCode.INVALID_QN,
                             f"invalid queue number {header.qn}")
    _, _, opcode = rdmap.parse_control(header.rsvd_ulp >> 32)
    if rdmap.queue_number(opcode) != header.qn:
        return ErrorInfo.rdmap(RdmapErrorType.REMOTE_OPERATION, RdmapOperationCode.UNEXPECTED_OPCODE,
                               f"{rdmap.opcode_name(opcode)} on queue {header.qn}")
    return None


def _emit(obj, out):
    out.write(json.dumps(obj) + "\n")


class _LazyGroup(click.Group):
    """A group whose ``lazy`` commands are imported only when used (fast CLI start)."""

    lazy = {"perftest": ("host.perftest", "perftest")}

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is None and name in self.lazy:
            import importlib
            module, attr = self.lazy[name]
            try:
                cmd = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                return None
            self.add_command(cmd, name)
        return cmd


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="open-iwarp-rnic", prog_name="rnic")
def cli():
    """Open iWARP RNIC: reference model, gateware simulation and host tools.

    \b
    Examples:
      rnic demo                              # end-to-end run of the protocol model
      rnic encode msgs.jsonl -o stream.bin --markers
      rnic decode stream.bin --markers       # one JSON object per FPDU
      rnic encode msgs.jsonl | rnic decode   # round trip
      rnic listen --port 7000 --once         # accept one MPA connection, serve it
      rnic connect 127.0.0.1:7000 --send 68656c6c6f --read 4 --stag 0x1000
      rnic status --device model             # register view of a device
      rnic status --device uart:/dev/ttyUSB1 # a board running the bitstream, over its UART
      rnic build --board versa_ecp5          # bitstream and fmax/resource report
    rnic rping -c -a 127.0.0.1 -p 7174 -C 3 -v   # rping against a siw (or rnic) server
    rnic perftest write 127.0.0.1 -p 18515   # perftest's ib_write_bw -R as client
    """
    from . import transport_uart  # noqa: F401 - registers the uart:PATH[@BAUD] device kind


@cli.command()
@click.argument("file", type=click.File("rb"), default="-")
@click.option("--markers", is_flag=True, help="The stream carries MPA markers.")
@click.option("--no-crc", is_flag=True, help="CRC not negotiated: the CRC field is not checked.")
@click.option("--marker-origin", type=int, default=0, show_default=True, callback=_marker_origin,
              help="Stream offset of a marker (offset 0 = first octet of the input); multiple of 4.")
@click.option("--mulpdu", type=click.IntRange(1, 65535), default=64768, show_default=True,
              help="Largest ULPDU_Length accepted.")
@click.option("--strict", is_flag=True,
              help="Also reject DDP/RDMAP versions other than 1 and unknown opcodes.")
@click.option("--engine", type=click.Choice(ENGINES), default="model", show_default=True,
              help="What does the decoding: the Python model, or the RTL deframer on Verilator.")
@click.option("--width", type=click.Choice(["4", "8", "16", "32"]), default=None,
              help="Datapath width W of --engine rtl (default 8); an error with other engines.")
def decode(file, markers, no_crc, marker_origin, mulpdu, strict, engine, width):
    """Decode one direction of an MPA connection into FPDUs.

    FILE (default: standard input) holds the TCP payload octets of one
    direction, FPDUs only, offset 0 being its first octet. Prints one JSON
    object per FPDU: offset, length, ulpdu_length, crc, markers, ddp, rdmap,
    payload. On the first protocol error prints {"offset", "error": {layer,
    etype, ecode, text}}, stops and exits with status 3.

    --engine rtl runs the Verilated RX deframer (hdl/mpa_rx.py) instead of the
    model, fed in TCP segments of random sizes; it prints the same lines. With
    --strict the header checks are those of the Verilated DDP/RDMAP receive
    path (hdl/ddp_rx.py: versions, opcode, queue number), which must agree with
    the model's.

    \b
    Examples:
      rnic decode capture.bin --markers
      rnic decode --no-crc < stream.bin | jq .rdmap.name
      rnic decode capture.bin --markers --engine rtl --width 16
    """
    from .fpdu import FpduDecoder, FpduError
    from .dissect import ulpdu_to_json

    width = _engine_width(engine, width)
    out = sys.stdout
    dec = FpduDecoder(markers=markers, crc=not no_crc, marker_origin=marker_origin,
                      mulpdu=mulpdu)

    def report(items, strict_infos=None):
        for k, item in enumerate(items):
            if isinstance(item, FpduError):
                _emit({"offset": item.offset, "error": item.info.to_json()}, out)
                return False
            if strict:
                info = _strict_check(item.ulpdu) if strict_infos is None else strict_infos[k]
                if info is not None:
                    _emit({"offset": item.offset, "error": info.to_json()}, out)
                    return False
            obj = {
                "offset": item.offset,
                "length": item.length,
                "ulpdu_length": item.ulpdu_length,
                "crc": item.crc,
                "markers": [{"offset": o, "fpduptr": p} for o, p in item.markers],
            }
            obj.update(ulpdu_to_json(item.ulpdu))
            _emit(obj, out)
        return True

    if engine == "rtl":
        items = _decode_rtl(file, markers=markers, crc=not no_crc, marker_origin=marker_origin,
                            mulpdu=mulpdu, width=width)
        if items is None:
            return EXIT_FAILURE
        strict_infos = None
        if strict:
            from sim.fast import FastSimError
            from sim.mpa_engine import RtlEngineError, strict_checks
            say = _bench_say()
            if say:
                say(f"DDP/RDMAP receive path W={width}: Verilog and Verilator model (built once, "
                    "then cached)")
            try:
                strict_infos = strict_checks(items, _strict_check, width=width)
            except (RtlEngineError, FastSimError) as exc:
                _fail(f"rtl engine: {exc}")
                return EXIT_FAILURE
        if not report(items, strict_infos):
            sys.exit(EXIT_PROTOCOL)
        return EXIT_OK
    try:
        while True:
            chunk = file.read(_CHUNK)
            if not chunk:
                break
            if not report(dec.feed(chunk)):
                sys.exit(EXIT_PROTOCOL)
    except OSError as exc:
        raise click.FileError(file.name, str(exc)) from None
    tail = dec.close()
    if tail is not None:
        report([tail])
        sys.exit(EXIT_PROTOCOL)


@cli.command()
@click.argument("file", type=click.File("r"), default="-")
@click.option("--markers", is_flag=True, help="Insert MPA markers.")
@click.option("--no-crc", is_flag=True, help="Write zeros in the CRC field.")
@click.option("--marker-origin", type=int, default=0, show_default=True, callback=_marker_origin,
              help="Stream offset of a marker (offset 0 = first octet written); multiple of 4.")
@click.option("-o", "--output", type=click.File("wb"), default="-",
              help="Where to write the FPDU stream (default: standard output).")
@click.option("--engine", type=click.Choice(ENGINES), default="model", show_default=True,
              help="What does the framing: the Python model, or the RTL framer on Verilator.")
@click.option("--width", type=click.Choice(["4", "8", "16", "32"]), default=None,
              help="Datapath width W of --engine rtl (default 8); an error with other engines.")
def encode(file, markers, no_crc, marker_origin, output, engine, width):
    """Frame ULPDUs given as JSON lines into an MPA FPDU stream.

    Each input line is an object of the shape `rnic decode` prints (its
    ddp, rdmap and payload keys are used, others ignored).

    --engine rtl frames them on the Verilated TX framer (hdl/mpa_tx.py)
    instead of the model; the octets are the same.

    \b
    Examples:
      rnic encode msgs.jsonl -o stream.bin --markers
      rnic decode a.bin | rnic encode --markers > b.bin
      rnic encode msgs.jsonl --markers --engine rtl --width 4 -o stream.bin
    """
    from .fpdu import FpduEncoder

    width = _engine_width(engine, width)
    if engine == "rtl":
        return _encode_rtl(file, output, markers=markers, crc=not no_crc,
                           marker_origin=marker_origin, width=width)
    enc = FpduEncoder(markers=markers, crc=not no_crc, marker_origin=marker_origin)
    for lineno, line in enumerate(file, 1):
        try:
            ulpdu = _encode_input_line(line)
            if ulpdu is None:
                continue
            fpdu = enc.encode(ulpdu)
        except (ValueError, TypeError, KeyError) as exc:
            raise click.UsageError(f"{file.name}, line {lineno}: {exc}") from None
        output.write(fpdu)
    output.flush()


@cli.command()
@click.option("--device", type=click.Choice(["sim", "none", "model"]), default="sim", show_default=True,
              help="B's data path: sim = the Verilated RNIC core, none = the software RNIC, "
                   "model = both ends in one process, no sockets.")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed (--device model).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def demo(device, seed, as_json):
    """Connect two RNICs over loopback TCP and move data both ways.

    A (software RNIC) connects to B (the simulated hardware by default) with
    RFC 6581 enhanced setup: Rev 2, IRD/ORD, peer-to-peer with a zero-length
    RDMA Write RTR, markers and CRC. Then Send, RDMA Write and RDMA Read run
    in both directions and every placed octet is checked. The first run
    builds the simulated RNIC with Verilator (about a minute); later runs
    reuse it. Exit status 1 if any check fails.

    \b
    Examples:
      rnic demo
      rnic demo --device none          # both ends on the software RNIC
      rnic demo --json | jq .moved
    """
    out = sys.stdout
    if device == "model":
        from .demo import run_demo
        result = run_demo(seed=seed)
        if as_json:
            _emit(result, out)
        else:
            c, t = result["connection"], result["traffic"]
            click.echo(f"MPA: rev {c['rev']}, markers A->B {'on' if c['markers_a_to_b'] else 'off'}, "
                       f"B->A {'on' if c['markers_b_to_a'] else 'off'}, CRC {'on' if c['crc'] else 'off'}, "
                       f"IRD {c['ird']}, ORD {c['ord']}, p2p RTR {c['rtr']}, MULPDU {result['mulpdu']}")
            click.echo(f"traffic: {t['fpdus']} FPDUs in {t['tcp_segments']} TCP segments, "
                       f"{t['markers']} markers, {t['wire_octets']} wire octets carrying "
                       f"{t['payload_octets']} payload octets ({t['payload_per_wire_octet']:.2%})")
            if result["terminate"]:
                e = result["terminate"]
                click.echo(f"Terminate: layer {e['layer']} type {e['etype']} code {e['ecode']}: {e['text']}")
            for chk in result["checks"]:
                click.echo(f"  [{'ok' if chk['ok'] else 'FAIL'}] {chk['check']}")
            click.echo("demo: all checks passed" if result["ok"] else "demo: FAILED")
        return EXIT_OK if result["ok"] else EXIT_FAILURE

    from .demo_tcp import run_tcp_demo
    if device == "sim" and sys.stderr.isatty():
        click.echo("demo: starting the simulated RNIC (Verilator; the first run builds it)...", err=True)
    result = run_tcp_demo(device=device)
    if as_json:
        _emit(result, out)
    else:
        n = result["negotiated"]
        where = "the simulated hardware (Verilated RnicCore)" if device == "sim" else "the software RNIC"
        click.echo(f"A: software RNIC (initiator); B: {where} (responder), over 127.0.0.1 TCP")
        click.echo(f"MPA: rev {n['rev']}, markers A->B {'on' if n['markers_a_to_b'] else 'off'}, "
                   f"B->A {'on' if n['markers_b_to_a'] else 'off'}, CRC {'on' if n['crc'] else 'off'}, "
                   f"IRD {n['ird']}, ORD {n['ord']}, p2p {n['p2p']}, RTR {n['rtr']}, "
                   f"peer private data {n['peer_private_data']!r}")
        for name, m in result["moved"].items():
            click.echo(f"{name}: Send {m['send']} octets into a receive buffer, RDMA Write {m['write']} "
                       f"octets to STag 0x1000 TO 8192, RDMA Read {m['read']} octets back")
        hc = result["hardware_counters"]
        if hc:
            click.echo(f"hardware: {hc['tx_fpdus']} FPDUs framed ({hc['tx_markers']} markers), "
                       f"{hc['rx_fpdus']} deframed, {hc['err_count']} errors")
        for chk in result["checks"]:
            click.echo(f"  [{'ok' if chk['ok'] else 'FAIL'}] {chk['check']}")
        s = result["seconds"]
        click.echo(f"demo: {'all checks passed' if result['ok'] else 'FAILED'} in {s['total']} s "
                   f"(device start {s['device_start']} s)")
    return EXIT_OK if result["ok"] else EXIT_FAILURE


# -- shared pieces of listen / connect / regs / status / serve ---------------------------

def _parse_uint(text, bits, what):
    try:
        v = int(str(text).replace("_", ""), 0)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a number (hex 0x.. or decimal)") from None
    if not 0 <= v < 1 << bits:
        raise click.BadParameter(f"{what} {text} does not fit {bits} bits")
    return v


class _UInt(click.ParamType):
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


class _Hex(click.ParamType):
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


def _device_spec(allow_none=True):
    def check(ctx, param, value):
        from .driver import parse_device_spec
        try:
            kind, _ = parse_device_spec(value)
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
        if kind == "none" and not allow_none:
            raise click.BadParameter("this command needs a device (model or tcp:HOST:PORT)")
        return value
    return check


def _host_port(ctx, param, value):
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:7000)")
    return host.strip("[]"), int(port)


def _fail(text):
    """One error line on stderr (the command path first); returns the failure status."""
    ctx = click.get_current_context()
    click.echo(f"{ctx.command_path}: error: {text}", err=True)
    return EXIT_FAILURE


def _open_device(spec):
    """``(device or None, status)``; prints the error line when it cannot be opened."""
    from .driver import DeviceError, open_device
    try:
        return open_device(spec), None
    except (DeviceError, OSError) as e:
        return None, _fail(str(e))


def _negotiated_text(n):
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


def _event_text(obj):
    from .transfer import describe_error
    from .errors import ErrorInfo
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


def _conn_options(f):
    """MPA options shared by listen and connect."""
    f = click.option("--timeout", type=click.FloatRange(0.1, 3600), default=5.0,
                     show_default=True, help="Seconds for the MPA exchange and each transfer.")(f)
    f = click.option("--device", default="none", show_default=True, callback=_device_spec(),
                     help="Device kept in step with the connection: none, model, tcp:HOST:PORT.")(f)
    f = click.option("--private-data", type=_Hex(), default="", help="MPA private data (hex).")(f)
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


def _conn_params(**kw):
    from .cm import ConnParams
    try:
        return ConnParams(**kw)
    except (ValueError, TypeError) as e:
        raise click.UsageError(str(e)) from None


# -- rnic listen ----------------------------------------------------------------------------

@cli.command()
@click.option("--port", type=click.IntRange(0, 65535), required=True,
              help="TCP port to listen on (0: any free port; the first line says which).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@_conn_options
@click.option("--reject", is_flag=True, help="Answer every MPA Request with a Reject (R=1).")
@click.option("--stag", type=_UInt(32, "STag"), default="0x1000", show_default=True,
              help="STag of the region exposed to the peer's RDMA Writes and Reads.")
@click.option("--region-size", type=_UInt(32, "size"), default="65536", show_default=True,
              help="Octets of the exposed region (0: no region).")
@click.option("--region-to", type=_UInt(64, "TO"), default="0", show_default=True,
              help="TO of the region's first octet.")
@click.option("--region-data", type=_Hex(), default="",
              help="Initial contents of the region (hex), e.g. for the peer to read.")
@click.option("--recv-size", type=_UInt(32, "size"), default="65536", show_default=True,
              help="Octets of each receive buffer (one per inbound Send).")
@click.option("--recv-count", type=click.IntRange(1, 4096), default=16, show_default=True,
              help="Receive buffers kept posted (each one is reposted when it fills).")
@click.option("--idle-timeout", type=click.FloatRange(0.1, None), default=None,
              help="Close a connection after this many idle seconds (default: never).")
@click.option("--once", is_flag=True, help="Exit after the first connection.")
@click.option("--pcap", "pcap_file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write each connection's TCP traffic to this pcap file (the 2nd connection "
                   "to FILE-2.EXT, ...).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
def listen(port, host, rev, ird, ord_, rtr, markers, crc, private_data, device, timeout, reject,
           stag, region_size, region_to, region_data, recv_size, recv_count, idle_timeout, once,
           pcap_file, as_json):
    """Accept MPA connections and service the peer's transfers.

    Connections are served one at a time. For each: the MPA Request is
    answered (or rejected with --reject), the negotiated parameters are
    printed, and the software RNIC takes the connection: receive buffers
    for the peer's Sends, a region (--stag, --region-size, --region-to,
    --region-data) for its RDMA Writes and Reads, Read Responses within
    IRD. Every completion and event is printed (with --json one JSON object
    per line: listening, connected, rejected, setup_failed, completion,
    remote_write, remote_read, terminate_sent, terminate_received, error,
    closed). A validation error is answered with a Terminate.

    Exit status with --once: 0 when the connection closed cleanly or was
    rejected as asked, 1 when it ended with an error or Terminate.

    \b
    Examples:
      rnic listen --port 7000
      rnic listen --port 7000 --markers --region-data 00112233 --once --json
      rnic listen --port 7000 --reject --private-data 6e6f
      rnic listen --port 0 --device model --json     # driver sequences on the model
    """
    import socket
    from . import cm
    from .transfer import make_datapath, negotiated_json, serve_connection

    if region_data and len(region_data) > region_size:
        raise click.UsageError(f"--region-data has {len(region_data)} octets, more than "
                               f"--region-size {region_size}")
    params = _conn_params(rev=rev, ird=ird, ord=ord_, rtr=rtr,
                          markers=markers, crc=crc, private_data=private_data, timeout=timeout)
    out = sys.stdout

    def emit(obj):
        if as_json:
            click.echo(json.dumps(obj), file=out)
        else:
            text = _event_text(obj) if obj["event"] in (
                "completion", "remote_write", "remote_read", "terminate_sent",
                "terminate_received", "error", "closed") else None
            if text is not None:
                click.echo(("  " if obj["event"] != "closed" else "") + text, file=out)

    dev, status = _open_device(device)
    if status is not None:
        return status
    try:
        if dev is not None:
            dev.reset()
        try:
            srv = socket.create_server((host, port))
        except OSError as e:
            return _fail(f"cannot listen on {host}:{port}: {e}")
        with srv:
            srv.settimeout(0.5)
            bound = srv.getsockname()[1]
            if as_json:
                emit({"event": "listening", "host": host, "port": bound})
            else:
                click.echo(f"listening on {host}:{bound}", file=out)
            result = EXIT_OK
            accepted = 0
            while True:
                try:
                    sock, addr = srv.accept()
                except socket.timeout:
                    continue
                peer = f"{addr[0]}:{addr[1]}"
                accepted += 1
                if pcap_file:
                    sock = _pcap_wrap(_pcap_path(pcap_file, accepted), active=False)(sock)
                try:
                    neg = cm.accept(sock, params, reject=reject)
                except cm.MpaSetupError as e:
                    from .transfer import describe_error
                    if as_json:
                        emit({"event": "setup_failed", "peer": peer, "error": e.info.to_json()})
                    else:
                        click.echo(f"connection from {peer}: MPA setup failed: "
                                   f"{describe_error(e.info)}", file=out)
                    result = EXIT_FAILURE
                    if once:
                        return result
                    continue
                if neg.rejected:
                    if as_json:
                        emit({"event": "rejected", "peer": peer,
                              "peer_private_data": neg.peer_private_data.hex(),
                              "negotiated": negotiated_json(neg)})
                    else:
                        click.echo(f"connection from {peer}: rejected (R=1), peer private data "
                                   f"{neg.peer_private_data.hex() or '-'}", file=out)
                    result = EXIT_OK
                    if once:
                        return result
                    continue
                info = negotiated_json(neg)
                dp = make_datapath(neg, dev, first_fpdu_timeout=None)
                region = None
                if region_size:
                    dp.register_region(stag, region_size, to=region_to, data=region_data or None)
                    region = {"stag": stag, "to": region_to, "length": region_size}
                if as_json:
                    obj = {"event": "connected", "peer": peer, "negotiated": info,
                           "region": region}
                    if dev is not None:
                        obj["device"] = {"spec": dev.spec, **dev.identity.to_json(),
                                         "connection": dev.connection(0)}
                    emit(obj)
                else:
                    click.echo(f"connection from {peer}: {_negotiated_text(info)}", file=out)
                    if region:
                        click.echo(f"  region: STag {stag:#x}, TO {region_to:#x}, "
                                   f"{region_size} octets", file=out)

                def emit_closed(obj, dp=dp):
                    if obj["event"] == "closed" and dev is not None:
                        obj["device"] = dev.status()
                    emit(obj)

                try:
                    err = serve_connection(dp, emit_closed, recv_size=recv_size,
                                           recv_count=recv_count, idle_timeout=idle_timeout)
                finally:
                    dp.close()
                result = EXIT_FAILURE if err is not None else EXIT_OK
                if once:
                    return result
    finally:
        if dev is not None:
            dev.close()


# -- rnic connect ---------------------------------------------------------------------------

class _OrderedCommand(click.Command):
    """A command that records the order of its options in ``ctx.meta["rnic.order"]``."""

    def make_parser(self, ctx):
        parser = super().make_parser(ctx)
        parse = parser.parse_args

        def parse_args(args):
            opts, largs, order = parse(args)
            ctx.meta["rnic.order"] = [p.name for p in order]
            return opts, largs, order

        parser.parse_args = parse_args
        return parser


def _transfers(ctx, send, write, read, stag, to):
    """The transfers in command-line order; --stag/--to bind to the --write/--read before them."""
    from .transfer import Transfer
    values = {"send": iter(send), "write": iter(write), "read": iter(read),
              "stag": iter(stag), "to": iter(to)}
    transfers, defaults, last = [], {}, None
    explicit = {}
    for name in ctx.meta.get("rnic.order", []):
        if name not in values:
            continue
        v = next(values[name])
        if name == "send":
            transfers.append(Transfer("send", data=v))
        elif name == "write":
            last = Transfer("write", data=v)
            transfers.append(last)
        elif name == "read":
            last = Transfer("read", length=v)
            transfers.append(last)
        elif last is None:
            if name in defaults:
                raise click.UsageError(f"--{name} given twice before any --write/--read")
            defaults[name] = v
        else:
            key = (id(last), name)
            if key in explicit:
                raise click.UsageError(f"--{name} given twice for --{last.op}")
            explicit[key] = True
            setattr(last, name, v)
    for t in transfers:
        if t.op == "send":
            continue
        if (id(t), "stag") not in explicit:
            if "stag" not in defaults:
                raise click.UsageError(f"--{t.op} needs --stag (the peer's STag)")
            t.stag = defaults["stag"]
        if (id(t), "to") not in explicit:
            t.to = defaults.get("to", 0)
    return transfers


@cli.command(cls=_OrderedCommand)
@click.argument("address", metavar="HOST:PORT", callback=_host_port)
@click.option("--p2p", is_flag=True, help="Ask for the peer-to-peer model (RFC 6581 RTR; rev 2).")
@_conn_options
@click.option("--send", multiple=True, type=_Hex(), help="Send these octets (hex). Repeatable.")
@click.option("--write", multiple=True, type=_Hex(),
              help="RDMA Write these octets (hex) to --stag/--to. Repeatable.")
@click.option("--read", multiple=True, type=_UInt(32, "length"),
              help="RDMA Read this many octets from --stag/--to. Repeatable.")
@click.option("--stag", multiple=True, type=_UInt(32, "STag"),
              help="The peer's STag of the --write/--read before it (before any: the default).")
@click.option("--to", multiple=True, type=_UInt(64, "TO"),
              help="The peer's TO of the --write/--read before it (default 0).")
@click.option("--pcap", "pcap_file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the connection's TCP traffic to this pcap file.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def connect(ctx, address, p2p, rev, ird, ord_, rtr, markers, crc, private_data, device, timeout,
            send, write, read, stag, to, pcap_file, as_json):
    """Open an MPA connection to HOST:PORT and run transfers on it.

    Prints the negotiated parameters, then runs the transfers in the order
    given (--send, --write, --read; --stag and --to belong to the --write or
    --read before them), prints each result (read data in hex), and closes
    the connection gracefully (a Terminate the peer sends is reported).

    Exit status: 0 all transfers succeeded; 1 the connection was rejected
    or failed, or a transfer failed (one error line on stderr with the MPA
    or Terminate error); 2 usage.

    \b
    Examples:
      rnic connect 127.0.0.1:7000 --send 68656c6c6f
      rnic connect 127.0.0.1:7000 --write deadbeef --stag 0x1000 --to 16 \\
                                  --read 4 --stag 0x1000 --to 16
      rnic connect 127.0.0.1:7000 --p2p --rtr write --markers --json
    """
    from . import cm
    from .transfer import describe_error, make_datapath, negotiated_json, run_transfers

    transfers = _transfers(ctx, send, write, read, stag, to)
    params = _conn_params(rev=rev, ird=ird, ord=ord_, rtr=rtr,
                          p2p=p2p, markers=markers, crc=crc, private_data=private_data,
                          timeout=timeout)
    host, port = address
    peer = f"{host}:{port}"
    out = sys.stdout
    result = {"ok": False, "peer": peer, "negotiated": None, "transfers": [], "events": [],
              "error": None}

    def finish(status, error_line=None):
        if as_json:
            _emit(result, out)
        if error_line:
            _fail(error_line)
        return status

    dev, status = _open_device(device)
    if status is not None:
        return status
    try:
        if dev is not None:
            dev.reset()
        try:
            if pcap_file:
                from .rping import connect_retry
                neg = connect_retry((host, port), params,
                                    wrap=_pcap_wrap(pcap_file, active=True))
            else:
                neg = cm.connect((host, port), params)
        except cm.MpaRejected as e:
            result["error"] = e.info.to_json()
            result["rejected"] = True
            result["peer_private_data"] = e.frame.private_data.hex() if e.frame else ""
            if not as_json:
                click.echo(f"rejected by {peer}, peer private data "
                           f"{result['peer_private_data'] or '-'}", file=out)
            return finish(EXIT_FAILURE, f"rejected by {peer} ({describe_error(e.info)})")
        except cm.MpaSetupError as e:
            result["error"] = e.info.to_json()
            return finish(EXIT_FAILURE, f"MPA setup with {peer} failed: {describe_error(e.info)}")
        result["negotiated"] = negotiated_json(neg)
        if not as_json:
            click.echo(f"connected to {peer}: {_negotiated_text(result['negotiated'])}", file=out)
        dp = make_datapath(neg, dev)
        try:
            result["transfers"] = run_transfers(dp, transfers, timeout=timeout)
        finally:
            dp.close()
        events = [ev.to_json() for ev in dp.poll_events()]
        result["events"] = [e for e in events if e["event"] != "closed"]
        if dev is not None:
            result["device"] = dev.status()
        failed = [r for r in result["transfers"] if r["status"] != "success"]
        result["error"] = dp.error.to_json() if dp.error is not None else None
        result["ok"] = not failed and dp.error is None
        if not as_json:
            for t, r in zip(transfers, result["transfers"]):
                line = f"{t.describe()}: {r['status']}"
                if "data" in r:
                    line += f": {r['data']}"
                click.echo(line, file=out)
            for e in result["events"]:
                click.echo(_event_text(e), file=out)
        if result["ok"]:
            return finish(EXIT_OK)
        if dp.error is not None:
            term = next((e for e in result["events"] if e["event"].startswith("terminate")), None)
            what = {"terminate_received": "Terminate received",
                    "terminate_sent": "Terminate sent"}.get(term["event"] if term else None,
                                                            "connection failed")
            return finish(EXIT_FAILURE, f"{what}: {describe_error(dp.error)}")
        r = failed[0]
        return finish(EXIT_FAILURE, f"{r['op']} wr_id {r['wr_id']} {r['status']}")
    finally:
        if dev is not None:
            dev.close()


# -- rnic rping -------------------------------------------------------------------------------

def _pcap_path(path, n):
    """The pcap file of the ``n``-th connection (1-based): FILE, then FILE-2.ext, FILE-3.ext ..."""
    if n <= 1:
        return path
    import os
    root, ext = os.path.splitext(path)
    return f"{root}-{n}{ext}"


def _pcap_wrap(path, *, active):
    """A ``wrap(sock)`` that records the connection into ``path`` (None without --pcap)."""
    if not path:
        return None
    from . import pcap

    def wrap(sock):
        return pcap.record(sock, path, active=active)
    return wrap


def _rping_size(ctx, param, value):
    from .rping import MAX_SIZE, MIN_SIZE
    if value is not None and not MIN_SIZE <= value <= MAX_SIZE:
        raise click.BadParameter(f"Invalid size {value} (valid range is {MIN_SIZE} to {MAX_SIZE})")
    return value


@cli.command()
@click.option("-s", "server", is_flag=True, help="Server side.")
@click.option("-c", "client", is_flag=True, help="Client side.")
@click.option("-a", "addr", default=None,
              help="Address: the server's (client), the one to listen on (server; default all).")
@click.option("-p", "port", type=click.IntRange(0, 65535), default=7174, show_default=True,
              help="TCP port (server: 0 picks a free one).")
@click.option("-C", "count", type=click.IntRange(0, None), default=None,
              help="Client: ping count (0 or not given: forever). The server serves until "
                   "the client disconnects, as rping's does.")
@click.option("-S", "size", type=int, default=64, show_default=True, callback=_rping_size,
              help="Ping data size (26..65535).")
@click.option("-v", "verbose", is_flag=True, help="Display ping data.")
@click.option("-V", "validate", is_flag=True,
              help="Validate ping data (client: the echo against what it sent; server, an "
                   "extension: the read data against rping's pattern).")
@click.option("-d", "debug", is_flag=True, help="Debug lines on stderr (negotiation, progress).")
@click.option("--p2p", is_flag=True, help="Client: ask for the peer-to-peer model (RFC 6581 RTR).")
@_conn_options
@click.option("--first-fpdu-delay", type=click.FloatRange(0, 10), default=0.1, show_default=True,
              help="Client: seconds between the MPA Reply and the first FPDU (Linux siw needs "
                   "a moment, see docs/interop.md).")
@click.option("--retry", type=click.FloatRange(0, 3600), default=0.0, show_default=True,
              help="Client: keep retrying the connection this many seconds while it is refused "
                   "or closed before the MPA Reply (a peer that is not listening yet).")
@click.option("--pcap", "pcap_file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the connection's TCP traffic to this pcap file.")
@click.option("--json", "as_json", is_flag=True,
              help="JSON: one result object (the server prints a listening line first).")
def rping(server, client, addr, port, count, size, verbose, validate, debug, p2p, rev, ird, ord_,
          rtr, markers, crc, private_data, device, timeout, first_fpdu_delay, retry, pcap_file,
          as_json):
    """rping (librdmacm examples/rping.c) over an MPA connection, either role.

    Speaks rping's protocol: the client Sends its start buffer's {addr,
    rkey, size}, the server RDMA-Reads it and Sends "go ahead", the client
    Sends its rdma buffer's info, the server RDMA-Writes the data back and
    Sends "go ahead"; -C times. -v prints what rping prints ("ping data:
    rdma-ping-0: ABC...", the server "server ping data: ..."). The data
    path is the software RNIC, or the simulated hardware with --device sim.

    Exit status: 0 success (the server: the client disconnected after
    complete pings); 1 the connection or a transfer failed, a Terminate, a
    data mismatch (one error line on stderr); 2 usage.

    \b
    Examples:
      rnic rping -s -a 127.0.0.1 -p 7174 -v
      rnic rping -c -a 127.0.0.1 -p 7174 -C 3 -v -V
      rnic rping -c -a 127.0.0.1 -p 7174 -C 1 -S 4096 --p2p --rtr write --device sim
    """
    import socket
    from . import cm
    from . import rping as rp
    from .transfer import describe_error, make_datapath, negotiated_json

    if server == client:
        raise click.UsageError("give exactly one of -s (server) and -c (client)")
    if client and not addr:
        raise click.UsageError("the client needs -a ADDR (the server's address)")
    if server and p2p:
        raise click.UsageError("--p2p is for the client (the server follows the Request)")
    role = "server" if server else "client"
    params = _conn_params(rev=rev, ird=ird, ord=ord_, rtr=rtr, p2p=p2p, markers=markers, crc=crc,
                          private_data=private_data, timeout=timeout,
                          first_fpdu_delay=first_fpdu_delay if client else 0.0)
    out = sys.stdout
    result = {"ok": False, "role": role, "peer": None, "negotiated": None, "size": size,
              "count": 0, "pings": [], "events": [], "error": None}

    def say(text):
        if debug:
            click.echo(f"rping: {text}", err=True)

    def on_ping(n, text):
        result["pings"].append(text)
        result["count"] = n + 1
        if verbose and not as_json:
            click.echo(("server " if server else "") + f"ping data: {text}", file=out)
        say(f"ping {n} done")

    def finish(status, error_line=None, info=None):
        if info is not None:
            result["error"] = info.to_json()
        elif error_line and result["error"] is None:
            result["error"] = {"text": error_line}
        result["ok"] = status == EXIT_OK
        if as_json:
            click.echo(json.dumps({"event": "result", **result} if server else result), file=out)
        if error_line:
            _fail(error_line)
        return status

    dev, status = _open_device(device)
    if status is not None:
        return status
    srv = None
    try:
        if dev is not None:
            dev.reset()
        if client:
            result["peer"] = f"{addr}:{port}"
            try:
                neg = rp.connect_retry((addr, port), params, retry=retry,
                                       wrap=_pcap_wrap(pcap_file, active=True),
                                       on_retry=lambda text: say(f"retrying: {text}"))
            except cm.MpaRejected as e:
                return finish(EXIT_FAILURE, f"rejected by {addr}:{port} "
                              f"({describe_error(e.info)})", e.info)
            except cm.MpaSetupError as e:
                return finish(EXIT_FAILURE, f"MPA setup with {addr}:{port} failed: "
                              f"{describe_error(e.info)}", e.info)
        else:
            host = addr or "0.0.0.0"
            try:
                srv = socket.create_server((host, port))
            except OSError as e:
                return _fail(f"cannot listen on {host}:{port}: {e}")
            bound = srv.getsockname()[1]
            if as_json:
                click.echo(json.dumps({"event": "listening", "host": host, "port": bound}),
                           file=out)
            say(f"listening on {host}:{bound}")
            out.flush()
            sock, peer = srv.accept()
            srv.close()
            result["peer"] = f"{peer[0]}:{peer[1]}"
            wrap = _pcap_wrap(pcap_file, active=False)
            if wrap is not None:
                sock = wrap(sock)
            try:
                neg = cm.accept(sock, params)
            except cm.MpaSetupError as e:
                return finish(EXIT_FAILURE, f"MPA setup with {result['peer']} failed: "
                              f"{describe_error(e.info)}", e.info)
        result["negotiated"] = negotiated_json(neg)
        say(f"connected {result['peer']}: {_negotiated_text(result['negotiated'])}")
        dp = make_datapath(neg, dev, **({"first_fpdu_timeout": None} if server else {}))
        err = None
        try:
            if client:
                rp.run_client(dp, count=count or 0, size=size, validate=validate,
                              on_ping=on_ping, timeout=timeout)
            else:
                rp.run_server(dp, size=size, validate=validate, on_ping=on_ping, timeout=timeout)
        except rp.RpingError as e:
            err = e
        finally:
            dp.close()
        events = [ev.to_json() for ev in dp.poll_events()]
        result["events"] = [e for e in events if e["event"] != "closed"]
        result["stats"] = dict(getattr(dp, "stats", {}))
        for e in result["events"]:
            say(_event_text(e))
        if err is not None:
            term = next((e for e in result["events"] if e["event"].startswith("terminate")), None)
            line = str(err)
            if term is not None and err.info is not None:
                what = "Terminate received" if term["event"] == "terminate_received" \
                    else "Terminate sent"
                line = f"{what}: {describe_error(err.info)} ({err})"
            return finish(EXIT_FAILURE, line, err.info)
        if dp.error is not None and client:
            return finish(EXIT_FAILURE, f"connection failed: {describe_error(dp.error)}", dp.error)
        if dp.error is not None:
            result["teardown_error"] = dp.error.to_json()
        return finish(EXIT_OK)
    except KeyboardInterrupt:
        return finish(EXIT_FAILURE, "interrupted")
    finally:
        if srv is not None:
            srv.close()
        if dev is not None:
            dev.close()


# -- rnic regs / status / serve ------------------------------------------------------------

def _reg_device_option(f):
    return click.option("--device", default="model", show_default=True,
                        callback=_device_spec(allow_none=False),
                        help="Device: model (a fresh in-process model) or tcp:HOST:PORT.")(f)


def _reg_name(ctx, param, value):
    from .driver import Device
    try:
        Device.lookup(value)
    except KeyError as e:
        raise click.BadParameter(str(e).strip("'\"")) from None
    return value


def _fields_text(fields):
    return " ".join(f"{k.upper()}={v:#x}" for k, v in fields.items())


@cli.group()
def regs():
    """Read and write device registers by name (REG or REG.FIELD).

    \b
    Examples:
      rnic regs dump
      rnic regs read VERSION --json
      rnic regs read CTX_STATUS.STATE --device tcp:127.0.0.1:7100
      rnic regs write SCRATCH 0x12345678 --device tcp:127.0.0.1:7100
      rnic regs write CTRL.ENABLE 1 --device tcp:127.0.0.1:7100
    """


@regs.command("dump")
@_reg_device_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def regs_dump(device, as_json):
    """Read every readable register.

    \b
    Examples:
      rnic regs dump
      rnic regs dump --device tcp:127.0.0.1:7100 --json | jq '.registers[0]'
    """
    from .driver import DeviceError
    dev, status = _open_device(device)
    if status is not None:
        return status
    with dev:
        try:
            rows = dev.dump()
        except (DeviceError, OSError) as e:
            return _fail(str(e))
    out = sys.stdout
    if as_json:
        _emit({"device": device, "registers": rows}, out)
    else:
        for r in rows:
            click.echo(f"{r['addr']:#05x}  {r['name']:<16} {r['value']:#010x}  "
                       f"{_fields_text(r['fields'])}", file=out)
    return EXIT_OK


@regs.command("read")
@click.argument("name", callback=_reg_name)
@_reg_device_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def regs_read(name, device, as_json):
    """Read register NAME (REG or REG.FIELD).

    \b
    Examples:
      rnic regs read ID
      rnic regs read CAPS.STAGS --json
    """
    from .driver import DeviceError
    dev, status = _open_device(device)
    if status is not None:
        return status
    with dev:
        try:
            r = dev.read_register(name)
        except (DeviceError, OSError) as e:
            return _fail(str(e))
    if as_json:
        _emit({"device": device, **r}, sys.stdout)
    elif "fields" in r:
        click.echo(f"{r['name']} = {r['value']:#010x}  {_fields_text(r['fields'])}")
    else:
        click.echo(f"{r['name']} = {r['value']:#x}")
    return EXIT_OK


@regs.command("write")
@click.argument("name", callback=_reg_name)
@click.argument("value", type=_UInt(32, "value"))
@_reg_device_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def regs_write(name, value, device, as_json):
    """Write VALUE (hex 0x.. or decimal) to register NAME.

    REG writes the whole word; REG.FIELD is a read-modify-write of the
    register's RW fields (write 1 to a pulse field to fire it, to a W1C
    field to clear it). Prints the register read back.

    \b
    Examples:
      rnic regs write SCRATCH 0xcafe
      rnic regs write CTRL.SOFT_RESET 1 --device tcp:127.0.0.1:7100
    """
    from .driver import DeviceError
    dev, status = _open_device(device)
    if status is not None:
        return status
    with dev:
        try:
            word = dev.write_register(name, value)
            back = dev.read_register(name.partition(".")[0])
        except ValueError as e:
            raise click.UsageError(str(e)) from None
        except (DeviceError, OSError) as e:
            return _fail(str(e))
    if as_json:
        _emit({"device": device, "name": name.upper(), "written": word, "readback": back},
              sys.stdout)
    else:
        click.echo(f"{name.upper()} <- {value:#x} (wrote {word:#010x}); {back['name']} = "
                   f"{back['value']:#010x}  {_fields_text(back['fields'])}")
    return EXIT_OK


@cli.command()
@_reg_device_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def status(device, as_json):
    """Show the device: identity, connections and their state, counters, last error.

    \b
    Examples:
      rnic status
      rnic status --device tcp:127.0.0.1:7100 --json
    """
    from .driver import DeviceError, describe_layer
    dev, st = _open_device(device)
    if st is not None:
        return st
    with dev:
        try:
            info = dev.status()
        except (DeviceError, OSError) as e:
            return _fail(str(e))
    if as_json:
        _emit(info, sys.stdout)
        return EXIT_OK
    ident = info["identity"]
    click.echo(f"device {info['device']}: RNIC map {ident['version']}, W={ident['width']}, "
               f"{ident['connections']} connections, {ident['stags']} STags, "
               f"{'enabled' if info['enabled'] else 'disabled'}, "
               f"{'ready' if info['ready'] else 'not ready'}")
    if not info["connections"]:
        click.echo("connections: none active")
    for c in info["connections"]:
        err = c["error"]
        click.echo(f"connection {c['conn']}: {c['state']}" + (
            f", error {describe_layer(err['layer'])} type {err['etype']} code {err['ecode']:#04x}"
            if err else ""))
    click.echo("counters: " + ", ".join(f"{k} {v}" for k, v in info["counters"].items()))
    e = info["last_error"]
    click.echo("last error: " + ("none" if e is None else
               f"connection {e['conn']} ({'tx' if e['tx'] else 'rx'}): "
               f"{describe_layer(e['layer'])} type {e['etype']} code {e['ecode']:#04x}"
               + (" (more were lost)" if e["overflow"] else "")))
    return EXIT_OK


@cli.command()
@click.option("--port", type=click.IntRange(0, 65535), required=True,
              help="TCP port (0: any free port; printed).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--device", default="model", show_default=True,
              callback=_device_spec(allow_none=False), help="The device to serve.")
@click.option("--once", is_flag=True, help="Exit after the first client disconnects.")
@click.option("--json", "as_json", is_flag=True, help="Print the address as JSON.")
def serve(port, host, device, once, as_json):
    """Serve a device's registers over TCP, for --device tcp:HOST:PORT.

    The protocol is one ASCII line per access (R ADDR / W ADDR VALUE);
    see host.driver. Runs until interrupted (or --once).

    \b
    Examples:
      rnic serve --port 7100 &
      rnic status --device tcp:127.0.0.1:7100
    """
    from .driver import TransportServer
    dev, st = _open_device(device)
    if st is not None:
        return st
    with dev:
        try:
            server = TransportServer(dev.transport, port, host)
        except OSError as e:
            return _fail(f"cannot listen on {host}:{port}: {e}")
        with server:
            if as_json:
                click.echo(json.dumps({"event": "serving", "device": device,
                                       "address": server.address, "port": server.port}))
            else:
                click.echo(f"serving {device} registers on {server.address}")
            server.serve(once=once)
    return EXIT_OK



# -- rnic build ----------------------------------------------------------------------------

def _int_list(ctx, param, value):
    try:
        items = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma list of integers") from None
    if not items:
        raise click.BadParameter("empty list")
    return items


def _progress_printer():
    """Progress lines on stderr when it is a terminal; nothing when piped."""
    if not sys.stderr.isatty():
        return None
    import time as _time
    start = _time.monotonic()

    def say(text):
        click.echo(f"[{_time.monotonic() - start:6.0f} s] {text}", err=True)
    return say


@cli.command("build")
@click.option("--board", type=click.Choice(_BOARD_NAMES), default="versa_ecp5", show_default=True,
              help="Target board (amaranth-boards platform).")
@click.option("--width", type=click.Choice(["4", "8", "16", "32"]), default="8", show_default=True,
              help="Datapath width W in octets.")
@click.option("--connections", type=click.IntRange(1, 65535), default=16, show_default=True,
              help="Connection contexts.")
@click.option("--freq", type=click.FloatRange(10, 400), default=125.0, show_default=True,
              help="Core clock target in MHz (made by the PLL; the timing constraint).")
@click.option("--baud", type=click.IntRange(1200, 12_000_000), default=115200, show_default=True,
              help="UART rate of the register bridge.")
@click.option("--core", "core",
              type=click.Choice(["auto", "interim", "rnic", "ddp_rx", "ddp_tx", "mpa_rx", "mpa_tx"]),
              default="auto", show_default=True,
              help="auto: RnicCore if hdl/rnic_core.py exists, else the interim core "
                   "(register bank + MPA TX framer); ddp_rx, ddp_tx, mpa_rx, mpa_tx: that block "
                   "of the core alone (with --top core), to see what each costs.")
@click.option("--top", type=click.Choice(["board", "core"]), default="board", show_default=True,
              help="board: the full board top (PLL, UART bridge, PHY pins, LEDs); core: the core "
                   "alone in a benchmark harness.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=1, show_default=True,
              help="nextpnr placement seed.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Directory for the products (default build/<board>-w<W>-c<N>-<top>; "
                   "with --sweep build/sweep-<board>).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the report).")
@click.option("--allow-timing-fail", is_flag=True,
              help="Exit 0 even if a clock misses its constraint (the report says so).")
@click.option("--paths", type=click.IntRange(0, 1000), default=10, show_default=True,
              help="Failing paths of the core clock to list (worst first, one line per start "
                   "and end register), from nextpnr's SDF.")
@click.option("--nextpnr-opts", default="", metavar="OPTS",
              help="Extra nextpnr-ecp5 options (e.g. \"--router router2 --tmg-ripup\").")
@click.option("--sweep", is_flag=True,
              help="Benchmark: the core alone at W = 4, 8, 16 and 16, 1024 connections; writes "
                   "sweep.md and sweep.json (ignores --width/--connections/--top).")
@click.option("--sweep-widths", default="4,8,16", show_default=True, callback=_int_list,
              help="Widths of --sweep.")
@click.option("--sweep-connections", default="16,1024", show_default=True, callback=_int_list,
              help="Connection counts of --sweep.")
def build_cmd(board, width, connections, freq, baud, core, top, seed, out_dir, as_json,
              allow_timing_fail, paths, nextpnr_opts, sweep, sweep_widths, sweep_connections):
    """Build a bitstream with Yosys, nextpnr-ecp5 and ecppack (from PyPI) and report fmax and resources.

    Elaborates the board top (or the core alone), runs Amaranth's build
    script with the YoWASP tools of this environment, and reports per clock
    domain the fmax against the constraint, LUT4/FF/block RAM/DSP use and
    share of the device, and the seconds per stage. Exits 1 when timing is
    not met, unless --allow-timing-fail. Progress goes to stderr on a
    terminal. The bitstream is OUT/top.bit; OUT/report.json holds the report.

    \b
    Examples:
      rnic build --board versa_ecp5                    # W=8, 16 connections, 125 MHz
      rnic build --board ecpix5 --width 4 --json
      rnic build --width 8 --connections 1024 --freq 156.25 --allow-timing-fail
      rnic build --top core --width 16 --out /tmp/w16  # the core alone
      rnic build --top core --core ddp_rx --allow-timing-fail  # one block alone
      rnic build --freq 156.25 --paths 30 --allow-timing-fail  # what fails at the goal
      rnic build --sweep                               # benchmark table (takes a while)
    """
    from .build import BuildConfig, BuildError, TimingFailure, ToolMissing, build, sweep as run_sweep
    say = _progress_printer()
    if sweep:
        unsupported = [w for w in sweep_widths if w not in (4, 8, 16, 32)]
        if unsupported:
            raise click.BadParameter(f"widths must be 4, 8, 16 or 32, not {unsupported[0]}",
                                     param_hint="--sweep-widths")
        try:
            rows, files = run_sweep(board=board, widths=sweep_widths,
                                    connections=sweep_connections, freq_mhz=freq, core=core,
                                    seed=seed, out_dir=out_dir, progress=say,
                                    nextpnr_opts=nextpnr_opts)
        except BuildError as e:
            return _fail(str(e))
        if as_json:
            _emit({"rows": rows, "files": files}, sys.stdout)
        else:
            click.echo(open(files["markdown"]).read().rstrip())
            click.echo(f"\nwritten: {files['markdown']}, {files['json']}")
        failed = [r for r in rows if "error" in r]
        return EXIT_FAILURE if failed else EXIT_OK
    from hdl.board_top import BLOCKS
    if core in BLOCKS and top != "core" and not sweep:
        raise click.BadParameter(f"{core} is a block of the core: build it alone with --top core",
                                 param_hint="--core")
    cfg = BuildConfig(board=board, width=int(width), connections=connections, freq_mhz=freq,
                      baud=baud, top=top, core=core, seed=seed, out_dir=out_dir,
                      allow_timing_fail=allow_timing_fail, nextpnr_opts=nextpnr_opts,
                      paths=paths)
    try:
        report = build(cfg, progress=say)
    except TimingFailure as e:
        if as_json:
            _emit(e.report.to_json(), sys.stdout)
        else:
            click.echo("\n".join(e.report.summary_lines()))
        return _fail(str(e))
    except ToolMissing as e:
        return _fail(str(e))
    except BuildError as e:
        return _fail(str(e))
    except ValueError as e:          # e.g. a PLL or UART rate that cannot be made
        return _fail(str(e))
    if as_json:
        _emit(report.to_json(), sys.stdout)
    else:
        click.echo("\n".join(report.summary_lines()))
    return EXIT_OK



# -- --engine rtl (rnic decode/encode) and rnic bench ----------------------------------------

def _engine_width(engine, width):
    """``--width`` as an int for ``--engine rtl`` (default 8); a usage error with other engines."""
    if engine != "rtl":
        if width is not None:
            raise click.UsageError(f"--width applies to --engine rtl only, not --engine {engine}")
        return None
    return 8 if width is None else int(width)


def _bench_say():
    """Progress lines on stderr when it is a terminal; None (quiet) when piped."""
    if not sys.stderr.isatty():
        return None
    import time as _time
    start = _time.monotonic()

    def say(text):
        click.echo(f"[{_time.monotonic() - start:7.1f} s] {text}", err=True)
    return say


def _rtl_engine(kind, width):
    """The cached sim.mpa_engine engine (a note on a terminal: the first use builds it)."""
    from sim import mpa_engine
    say = _bench_say()
    if say:
        say(f"{'RX deframer' if kind == 'rx' else 'TX framer'} W={width}: Verilog and "
            "Verilator model (built once, then cached)")
    return (mpa_engine.rx_engine if kind == "rx" else mpa_engine.tx_engine)(width)


def _decode_rtl(file, *, markers, crc, marker_origin, mulpdu, width):
    """The FpduRecord/FpduError list of ``rnic decode --engine rtl`` (None: failed, reported)."""
    from sim.fast import FastSimError
    from sim.mpa_engine import RtlEngineError, decode as rtl_decode
    try:
        data = file.read()
    except OSError as exc:
        raise click.FileError(file.name, str(exc)) from None
    try:
        return rtl_decode(data, markers=markers, crc=crc, marker_origin=marker_origin,
                          mulpdu=mulpdu, width=width, engine=_rtl_engine("rx", width))
    except (RtlEngineError, FastSimError) as exc:
        _fail(f"rtl engine: {exc}")
        return None


def _encode_input_line(line):
    """The ULPDU of one input line of ``rnic encode`` (a JSON object as ``rnic decode`` writes),
    or None for a blank line or an error line of ``rnic decode`` (nothing to frame).
    Raises ValueError (or TypeError/KeyError) for anything else that is not a ULPDU."""
    from .dissect import ulpdu_from_json
    if not line.strip():
        return None
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if "error" in obj and "ddp" not in obj:
        return None
    ulpdu = ulpdu_from_json(obj)
    if len(ulpdu) > 0xFFFF:
        raise ValueError(f"ULPDU of {len(ulpdu)} octets does not fit ULPDU_Length")
    return ulpdu


def _encode_rtl(file, output, *, markers, crc, marker_origin, width):
    """``rnic encode --engine rtl``: the JSON lines are read as by the model path, framed on
    the RTL framer; an input error frames the lines before it, then is a usage error."""
    from sim.fast import FastSimError
    from sim.mpa_engine import RtlEngineError, encode as rtl_encode
    from .fpdu import check_fpduptrs, fpdu_layout
    ulpdus, problem, pos = [], None, 0
    for lineno, line in enumerate(file, 1):
        try:
            ulpdu = _encode_input_line(line)
            if ulpdu is None:
                continue
            lay = fpdu_layout(len(ulpdu), offset=pos, markers=markers, marker_origin=marker_origin)
            check_fpduptrs(lay)
        except (ValueError, TypeError, KeyError) as exc:
            problem = click.UsageError(f"{file.name}, line {lineno}: {exc}")
            break
        ulpdus.append(ulpdu)
        pos = lay.end
    try:
        stream = rtl_encode(ulpdus, markers=markers, crc=crc, marker_origin=marker_origin,
                            width=width, engine=_rtl_engine("tx", width) if ulpdus else None)
    except (RtlEngineError, FastSimError) as exc:
        return _fail(f"rtl engine: {exc}")
    output.write(stream)
    output.flush()
    if problem is not None:
        raise problem
    return EXIT_OK


def _bench_widths(ctx, param, value):
    if not value:
        return (4, 8, 16, 32)
    widths = []
    for v in value:
        for w in ((4, 8, 16, 32) if v == "all" else (int(v),)):
            if w not in widths:
                widths.append(w)
    return tuple(widths)


@cli.group()
def bench():
    """Benchmarks of the gateware in simulation (Verilator)."""


@bench.command("mpa")
@click.option("--width", "widths", multiple=True, callback=_bench_widths,
              type=click.Choice(["4", "8", "16", "32", "all"]),
              help="Datapath width W; repeatable; 'all' (the default) = 4, 8, 16, 32.")
@click.option("--ulpdus", type=click.IntRange(1, 10_000_000), default=10_000, show_default=True,
              help="ULPDUs per direction.")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed of the traffic.")
@click.option("--connections", type=click.IntRange(1, 16), default=8, show_default=True,
              help="Connections carrying the traffic (the blocks have 16 contexts).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the report).")
def bench_mpa(widths, ulpdus, seed, connections, as_json):
    """Throughput of the MPA TX framer and RX deframer on long random traffic.

    Per width W: random ULPDUs (1..MULPDU for TX, 14..MULPDU for RX; EMSS
    1460, MULPDU 1442), markers and CRC on, on several connections
    interleaved at FPDU (TX) or TCP segment (RX) boundaries, with
    one-connection runs between; the RX input is the model's FPDU stream of
    each connection cut into EMSS-octet segments. No idle cycles, no
    back-pressure. Reports cycles from the first to the last beat, wire
    octets, efficiency = wire octets / (cycles x W), beats, simulated
    cycles/s and build seconds. Every output octet is checked against the
    model; a mismatch exits 1. Progress goes to stderr on a terminal.

    \b
    Examples:
      rnic bench mpa --width 8
      rnic bench mpa --width all --ulpdus 20000 --json
    """
    from sim.fast import FastSimError
    from sim.mpa_engine import RtlEngineError
    from .bench import BenchMismatch, run_bench, text_report
    try:
        report = run_bench(widths, ulpdus=ulpdus, seed=seed, connections=connections,
                           say=_bench_say())
    except (RtlEngineError, FastSimError, BenchMismatch) as exc:
        return _fail(str(exc))
    if as_json:
        _emit(report, sys.stdout)
    else:
        click.echo(text_report(report))
    if not report["verified"]:
        for r in report["results"]:
            if not r["verified"]:
                _fail(r["mismatch"])
        return EXIT_FAILURE
    return EXIT_OK



@bench.command("ddp")
@click.option("--width", "widths", multiple=True, callback=_bench_widths,
              type=click.Choice(["4", "8", "16", "32", "all"]),
              help="Datapath width W; repeatable; 'all' (the default) = 4, 8, 16, 32.")
@click.option("--op", "ops", type=click.Choice(["write", "send", "all"]), default="all",
              show_default=True, help="RDMA Writes, Sends, or a line of each per size.")
@click.option("--messages", type=click.IntRange(1, 1_000_000), default=None, hidden=True,
              help="Messages per size (default 1024 x 64 B, 256 x 1 KiB, 8 x 64 KiB).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the report).")
def bench_ddp(widths, ops, messages, as_json):
    """End-to-end goodput of two RNIC data paths back to back, beside the protocol limit.

    Per width W, message size (64 B, 1 KiB, 64 KiB) and operation (RDMA Write,
    Send): a stream of messages on one connection from node a (DdpTx, MPA
    framer) to node b (MPA deframer, DdpRx), markers and CRC on, EMSS 1460
    (MULPDU 1442), memories never back-pressuring. Reports goodput = payload
    octets placed in b's memory per cycle / W (first to last placement write)
    beside the protocol limit = payload / wire octets of the same messages
    (DDP/RDMAP headers, MPA length, pad, CRC, markers; host.segment and
    host.fpdu), with octets, cycles and Gb/s at 125 and 156.25 MHz. Every
    placed octet is checked (address, order, value) and the framer's wire
    octets against the model; a failure exits 1. Progress goes to stderr on
    a terminal.

    \b
    Examples:
      rnic bench ddp --width 8
      rnic bench ddp --width 4 --width 8 --json
    """
    from .bench import DDP_OPS, BenchMismatch, ddp_text_report, run_ddp_bench
    try:
        report = run_ddp_bench(widths, ops=DDP_OPS if ops == "all" else (ops,),
                               messages=messages, say=_bench_say())
    except BenchMismatch as exc:
        return _fail(str(exc))
    if as_json:
        _emit(report, sys.stdout)
    else:
        click.echo(ddp_text_report(report))
    if not report["verified"]:
        for r in report["results"]:
            if not r["verified"]:
                _fail(r["mismatch"])
        return EXIT_FAILURE
    return EXIT_OK

def main(argv=None):
    """Console entry point: click with one-line usage errors and fixed exit codes."""
    try:
        rv = cli.main(args=argv, prog_name="rnic", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "rnic"
        click.echo(f"{where}: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"rnic: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    except click.Abort:
        click.echo("rnic: aborted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(EXIT_OK)
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)


if __name__ == "__main__":
    main()
