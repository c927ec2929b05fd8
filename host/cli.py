"""The ``rnic`` command line.

Exit status everywhere: 0 ok, 1 failure, 2 usage (bad option, unreadable
input; one line on stderr), 3 a protocol error found in the input
(``rnic decode``).
"""

import json
import sys

import click

__all__ = ["main", "cli", "ENGINES"]

#: Engines that ``rnic encode``/``rnic decode`` can run on.
ENGINES = ("model",)

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="open-iwarp-rnic", prog_name="rnic")
def cli():
    """Open iWARP RNIC: reference model, gateware simulation and host tools.

    \b
    Examples:
      rnic demo                              # end-to-end run of the protocol model
      rnic encode msgs.jsonl -o stream.bin --markers
      rnic decode stream.bin --markers       # one JSON object per FPDU
      rnic encode msgs.jsonl | rnic decode   # round trip
    """


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
              help="What does the decoding.")
def decode(file, markers, no_crc, marker_origin, mulpdu, strict, engine):
    """Decode one direction of an MPA connection into FPDUs.

    FILE (default: standard input) holds the TCP payload octets of one
    direction, FPDUs only, offset 0 being its first octet. Prints one JSON
    object per FPDU: offset, length, ulpdu_length, crc, markers, ddp, rdmap,
    payload. On the first protocol error prints {"offset", "error": {layer,
    etype, ecode, text}}, stops and exits with status 3.

    \b
    Examples:
      rnic decode capture.bin --markers
      rnic decode --no-crc < stream.bin | jq .rdmap.name
    """
    from .fpdu import FpduDecoder, FpduError
    from .dissect import ulpdu_to_json

    out = click.get_text_stream("stdout")
    dec = FpduDecoder(markers=markers, crc=not no_crc, marker_origin=marker_origin,
                      mulpdu=mulpdu)

    def report(items):
        for item in items:
            if isinstance(item, FpduError):
                _emit({"offset": item.offset, "error": item.info.to_json()}, out)
                return False
            if strict:
                info = _strict_check(item.ulpdu)
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
              help="What does the framing.")
def encode(file, markers, no_crc, marker_origin, output, engine):
    """Frame ULPDUs given as JSON lines into an MPA FPDU stream.

    Each input line is an object of the shape `rnic decode` prints (its
    ddp, rdmap and payload keys are used, others ignored).

    \b
    Examples:
      rnic encode msgs.jsonl -o stream.bin --markers
      rnic decode a.bin | rnic encode --markers > b.bin
    """
    from .fpdu import FpduEncoder
    from .dissect import ulpdu_from_json

    enc = FpduEncoder(markers=markers, crc=not no_crc, marker_origin=marker_origin)
    for lineno, line in enumerate(file, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            if "error" in obj and "ddp" not in obj:
                continue  # an error line of `rnic decode`: nothing to frame
            ulpdu = ulpdu_from_json(obj)
            if len(ulpdu) > 0xFFFF:
                raise ValueError(f"ULPDU of {len(ulpdu)} octets does not fit ULPDU_Length")
            fpdu = enc.encode(ulpdu)
        except (ValueError, TypeError, KeyError) as exc:
            raise click.UsageError(f"{file.name}, line {lineno}: {exc}") from None
        output.write(fpdu)
    output.flush()


@cli.command()
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed for data and TCP cuts.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def demo(seed, as_json):
    """Run two RNICs end to end in the reference model.

    MPA Request/Reply (Rev 2, IRD/ORD, markers, CRC, RTR), then Sends, an
    RDMA Write and an RDMA Read framed into FPDUs, cut into random TCP
    segments, deframed, validated and placed; then a Write to an unknown
    STag that must come back as a Terminate. Exit status 1 if any check fails.

    \b
    Examples:
      rnic demo
      rnic demo --json | jq .traffic
    """
    from .demo import run_demo

    result = run_demo(seed=seed)
    if as_json:
        _emit(result, click.get_text_stream("stdout"))
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
