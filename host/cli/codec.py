"""``rnic decode`` and ``rnic encode``: FPDU streams to JSON lines and back, on the Python model
or (``--engine rtl``) on the Verilated MPA deframer and framer."""

import json
import sys

import click

from rnic.host.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_PROTOCOL, OutputFile, emit, fail
from rnic.host.cli.progress import sim_build_progress

__all__ = ["ENGINES", "decode", "encode", "SAMPLE_INPUT"]

#: Complete input lines of ``rnic encode`` (a Send of "hello" and an RDMA Write), shown by its
#: help and the README (a test encodes them).
SAMPLE_INPUT = (
    '{"ddp": {"t": 0, "l": 1, "dv": 1, "qn": 0, "msn": 1, "mo": 0}, '
    '"rdmap": {"rv": 1, "opcode": 3}, "payload": "68656c6c6f"}',
    '{"ddp": {"t": 1, "l": 1, "dv": 1, "stag": 4096, "to": 0}, '
    '"rdmap": {"rv": 1, "name": "write"}, "payload": "0badcafe"}',
)


#: Engines that ``rnic encode``/``rnic decode`` can run on: the Python model (rnic.host.model.fpdu)
#: or the Verilated gateware (rnic.hdl.mpa_rx / rnic.hdl.mpa_tx through rnic.sim.mpa_engine).
ENGINES = ("model", "rtl")

_CHUNK = 1 << 16


def _marker_origin(ctx, param, value):
    if value % 4:
        raise click.BadParameter(
            f"{value} is not a multiple of 4 (markers and FPDUs share the 4-octet grid)")
    return value


def _strict_check(ulpdu):
    """The stateless header checks of a data sink: DDP/RDMAP version, opcode, queue number."""
    from rnic.host.model import ddp, rdmap
    from rnic.host.spec.errors import DdpErrorType, DdpUntaggedCode, ErrorInfo, ProtocolError, \
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


@click.command()
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

    --engine rtl runs the Verilated RX deframer (hdl/mpa_rx/) instead of the
    model, fed in TCP segments of random sizes; it prints the same lines. With
    --strict the header checks are those of the Verilated DDP/RDMAP receive
    path (hdl/ddp_rx/: versions, opcode, queue number), which must agree with
    the model's.

    \b
    Examples:
      rnic decode capture.bin --markers
      rnic decode --no-crc < stream.bin | jq .rdmap.name
      rnic decode capture.bin --markers --engine rtl --width 16
    """
    from rnic.host.model.fpdu import FpduDecoder, FpduError
    from rnic.host.model.dissect import ulpdu_to_json

    width = _engine_width(engine, width)
    out = sys.stdout
    dec = FpduDecoder(markers=markers, crc=not no_crc, marker_origin=marker_origin,
                      mulpdu=mulpdu)

    def report(items, strict_infos=None):
        for k, item in enumerate(items):
            if isinstance(item, FpduError):
                emit({"offset": item.offset, "error": item.info.to_json()}, out)
                return False
            if strict:
                info = _strict_check(item.ulpdu) if strict_infos is None else strict_infos[k]
                if info is not None:
                    emit({"offset": item.offset, "error": info.to_json()}, out)
                    return False
            obj = {
                "offset": item.offset,
                "length": item.length,
                "ulpdu_length": item.ulpdu_length,
                "crc": item.crc,
                "markers": [{"offset": o, "fpduptr": p} for o, p in item.markers],
            }
            obj.update(ulpdu_to_json(item.ulpdu))
            emit(obj, out)
        return True

    if engine == "rtl":
        items = _decode_rtl(file, markers=markers, crc=not no_crc, marker_origin=marker_origin,
                            mulpdu=mulpdu, width=width)
        if items is None:
            return EXIT_FAILURE
        strict_infos = None
        if strict:
            from rnic.sim.fast import FastSimError
            from rnic.sim.mpa_engine import RtlEngineError, strict_checks
            try:
                with sim_build_progress():
                    strict_infos = strict_checks(items, _strict_check, width=width)
            except (RtlEngineError, FastSimError) as exc:
                fail(f"rtl engine: {exc}")
                return EXIT_FAILURE
        if not report(items, strict_infos):
            sys.exit(EXIT_PROTOCOL)
        return EXIT_OK
    while True:
        chunk = _read(file, _CHUNK)
        if not chunk:
            break
        if not report(dec.feed(chunk)):      # (a closed stdout raises here: main() ends quietly)
            sys.exit(EXIT_PROTOCOL)
    tail = dec.close()
    if tail is not None:
        report([tail])
        sys.exit(EXIT_PROTOCOL)


@click.command(help=f"""Frame ULPDUs given as JSON lines into an MPA FPDU stream.

    FILE (default: standard input) holds one JSON object per line (UTF-8),
    of the shape `rnic decode` prints: its ddp, rdmap and payload keys are
    used, others ignored (so decode's output encodes again). Complete lines,
    a Send of "hello" and a tagged RDMA Write of 4 octets:

    \b
    {SAMPLE_INPUT[0]}
    {SAMPLE_INPUT[1]}

    ddp: t (tagged), l (last), dv (DDP version), then qn, msn, mo
    (untagged) or stag, to (tagged); rdmap: rv (RDMAP version) and opcode
    (0..7) or name (write, read_request, read_response, send, send_inv,
    send_se, send_se_inv, terminate); payload: hex octets. Blank lines and
    decode's error lines are skipped. A bad line is a usage error (status
    2) naming its line number; with -o FILE, FILE is then left as it was
    (the stream is written to a temporary name and renamed on success).

    --engine rtl frames them on the Verilated TX framer (hdl/mpa_tx/)
    instead of the model; the octets are the same.

    \b
    Examples:
      rnic encode msgs.jsonl -o stream.bin --markers
      rnic decode a.bin | rnic encode --markers > b.bin
      rnic encode msgs.jsonl --markers --engine rtl --width 4 -o stream.bin
    """)
@click.argument("file", type=click.File("rb"), default="-")
@click.option("--markers", is_flag=True, help="Insert MPA markers.")
@click.option("--no-crc", is_flag=True, help="Write zeros in the CRC field.")
@click.option("--marker-origin", type=int, default=0, show_default=True, callback=_marker_origin,
              help="Stream offset of a marker (offset 0 = first octet written); multiple of 4.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Where to write the FPDU stream (default: standard output); written only "
                   "when every line framed.")
@click.option("--engine", type=click.Choice(ENGINES), default="model", show_default=True,
              help="What does the framing: the Python model, or the RTL framer on Verilator.")
@click.option("--width", type=click.Choice(["4", "8", "16", "32"]), default=None,
              help="Datapath width W of --engine rtl (default 8); an error with other engines.")
def encode(file, markers, no_crc, marker_origin, output, engine, width):
    """``rnic encode`` (its help is above: it shows SAMPLE_INPUT)."""
    width = _engine_width(engine, width)
    with OutputFile(output) as out:
        if engine == "rtl":
            status = _encode_rtl(file, out.file, markers=markers, crc=not no_crc,
                                 marker_origin=marker_origin, width=width)
        else:
            status = _encode_model(file, out.file, markers=markers, crc=not no_crc,
                                   marker_origin=marker_origin)
        if status == EXIT_OK:
            out.commit()
    return status


def _encode_model(file, output, *, markers, crc, marker_origin):
    """``rnic encode`` on the model: each line framed and written as it comes."""
    from rnic.host.model.fpdu import FpduEncoder
    enc = FpduEncoder(markers=markers, crc=crc, marker_origin=marker_origin)
    for lineno, line in _input_lines(file):
        try:
            ulpdu = _encode_input_line(line)
            if ulpdu is None:
                continue
            fpdu = enc.encode(ulpdu)
        except (ValueError, TypeError, KeyError) as exc:
            raise click.UsageError(f"{file.name}, line {lineno}: {exc}") from None
        output.write(fpdu)
    output.flush()
    return EXIT_OK


def _read(file, n=-1):
    """``file.read(n)``; an unreadable input is a usage error (status 2), as for click.File."""
    try:
        return file.read(n)
    except OSError as exc:
        raise click.FileError(file.name, exc.strerror or str(exc)) from None


def _input_lines(file):
    """``(line number, octets)`` of the binary ``file`` (decoded by :func:`_encode_input_line`,
    so that a line that is not UTF-8 is an input error like any other)."""
    lineno = 0
    while True:
        raw = _read_line(file)
        if not raw:
            return
        lineno += 1
        yield lineno, raw


def _read_line(file):
    try:
        return file.readline()
    except OSError as exc:
        raise click.FileError(file.name, exc.strerror or str(exc)) from None


# -- --engine rtl ---------------------------------------------------------------------------

def _engine_width(engine, width):
    """``--width`` as an int for ``--engine rtl`` (default 8); a usage error with other engines."""
    if engine != "rtl":
        if width is not None:
            raise click.UsageError(f"--width applies to --engine rtl only, not --engine {engine}")
        return None
    return 8 if width is None else int(width)


def _rtl_engine(kind, width):
    """The cached rnic.sim.mpa_engine engine (the first use builds it: stderr shows how)."""
    from rnic.sim import mpa_engine
    with sim_build_progress():
        return (mpa_engine.rx_engine if kind == "rx" else mpa_engine.tx_engine)(width)


def _decode_rtl(file, *, markers, crc, marker_origin, mulpdu, width):
    """The FpduRecord/FpduError list of ``rnic decode --engine rtl`` (None: failed, reported)."""
    from rnic.sim.fast import FastSimError
    from rnic.sim.mpa_engine import RtlEngineError, decode as rtl_decode
    data = _read(file)
    try:
        return rtl_decode(data, markers=markers, crc=crc, marker_origin=marker_origin,
                          mulpdu=mulpdu, width=width, engine=_rtl_engine("rx", width))
    except (RtlEngineError, FastSimError) as exc:
        fail(f"rtl engine: {exc}")
        return None


def _encode_input_line(raw):
    """The ULPDU of one input line of ``rnic encode`` (UTF-8 octets of a JSON object as ``rnic
    decode`` writes), or None for a blank line or an error line of ``rnic decode`` (nothing to
    frame). Raises ValueError (or TypeError/KeyError) for anything else that is not a ULPDU."""
    from rnic.host.model.dissect import ulpdu_from_json
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (octet {raw[exc.start]:#04x} at column "
                         f"{exc.start + 1}); the input is JSON lines as `rnic decode` prints "
                         "them") from None
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
    from rnic.sim.fast import FastSimError
    from rnic.sim.mpa_engine import RtlEngineError, encode as rtl_encode
    from rnic.host.model.fpdu import check_fpduptrs, fpdu_layout
    ulpdus, problem, pos = [], None, 0
    for lineno, line in _input_lines(file):
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
        return fail(f"rtl engine: {exc}")
    output.write(stream)
    output.flush()
    if problem is not None:
        raise problem
    return EXIT_OK
