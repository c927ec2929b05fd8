"""``rnic regs`` (dump, read, write), ``rnic status`` and ``rnic serve``: a device's registers."""

import json
import sys
import textwrap

import click

from rnic.host.cli.common import (EXIT_OK, SignedArguments, UInt, device_option, emit, fail,
                                  open_device_or_fail)

__all__ = ["regs", "status", "serve"]

#: What regs and status say about the devices they can reach (their help texts).
_LIVE = """The default device, model, is a fresh in-process model made for this one
command: it starts from reset every time, and a write is gone when the
command ends (so is the state of sim, the simulated core, which also runs
inside the command). For registers that live on between commands, run a
register server, `rnic serve --port 7100 &` (a model, or --device sim), and
give --device tcp:127.0.0.1:7100; a board is --device uart:/dev/ttyUSB1."""


def _reg_device_option(f):
    return device_option("The device whose registers are read and written.", default="model",
                         allow_none=False)(f)


def _lasting(spec):
    """Whether the device of ``spec`` outlives the command (DeviceKind.lasting)."""
    from rnic.host.driver.device import device_kinds, parse_device_spec
    return device_kinds()[parse_device_spec(spec)[0]].lasting


def _reg_name(ctx, param, value):
    from rnic.host.driver.device import Device
    try:
        Device.lookup(value)
    except KeyError as e:
        raise click.BadParameter(str(e).strip("'\"")) from None
    return value


def _fields_text(fields):
    return " ".join(f"{k.upper()}={v:#x}" for k, v in fields.items())


@click.group(help=textwrap.dedent("""\
    Read and write device registers by name (REG or REG.FIELD).

    {LIVE}

    \b
    Examples:
      rnic regs dump                                    # a fresh model, from reset
      rnic serve --port 7100 &                          # registers that live on
      rnic regs write SCRATCH 0x5a --device tcp:127.0.0.1:7100
      rnic regs read SCRATCH --device tcp:127.0.0.1:7100  # SCRATCH = 0x5a
      rnic regs read VERSION --json
      rnic regs read CTX_STATUS.STATE --device tcp:127.0.0.1:7100
      rnic regs write SCRATCH 0x12345678 --device tcp:127.0.0.1:7100
      rnic regs write CTRL.ENABLE 1 --device tcp:127.0.0.1:7100
    """).replace("{LIVE}", _LIVE))
def regs():
    """The ``rnic regs`` group (help above: it shares a paragraph with ``rnic status``)."""


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
    from rnic.host.driver.device import DeviceError
    dev, status = open_device_or_fail(device)
    if status is not None:
        return status
    with dev:
        try:
            rows = dev.dump()
        except (DeviceError, OSError) as e:
            return fail(str(e))
    out = sys.stdout
    if as_json:
        emit({"device": device, "registers": rows}, out)
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
    from rnic.host.driver.device import DeviceError
    dev, status = open_device_or_fail(device)
    if status is not None:
        return status
    with dev:
        try:
            r = dev.read_register(name)
        except (DeviceError, OSError) as e:
            return fail(str(e))
    if as_json:
        emit({"device": device, **r}, sys.stdout)
    elif "fields" in r:
        click.echo(f"{r['name']} = {r['value']:#010x}  {_fields_text(r['fields'])}")
    else:
        click.echo(f"{r['name']} = {r['value']:#x}")
    return EXIT_OK


@regs.command("write", cls=SignedArguments)
@click.argument("name", callback=_reg_name)
@click.argument("value", type=UInt(32, "value"))
@_reg_device_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def regs_write(name, value, device, as_json):
    """Write VALUE (hex 0x.. or decimal) to register NAME.

    REG writes the whole word; REG.FIELD is a read-modify-write of the
    register's RW fields (write 1 to a pulse field to fire it, to a W1C
    field to clear it). Prints the register read back.

    \b
    With a device that ends with the command (model, sim) the write is
    gone when it ends, which a note on stderr says; use a register server
    (rnic serve, --device tcp:HOST:PORT) or a board (--device uart:...).

    \b
    Examples:
      rnic regs write SCRATCH 0xcafe
      rnic regs write CTRL.SOFT_RESET 1 --device tcp:127.0.0.1:7100
    """
    from rnic.host.driver.device import DeviceError
    dev, status = open_device_or_fail(device)
    if status is not None:
        return status
    with dev:
        try:
            word = dev.write_register(name, value)
            back = dev.read_register(name.partition(".")[0])
        except ValueError as e:
            raise click.UsageError(str(e)) from None
        except (DeviceError, OSError) as e:
            return fail(str(e))
    if not _lasting(device):
        click.echo(f"rnic regs write: note: {device} ends with this command, and the write "
                   "with it (registers that live on: rnic serve, --device tcp:HOST:PORT)",
                   err=True)
    if as_json:
        emit({"device": device, "name": name.upper(), "written": word, "readback": back},
             sys.stdout)
    else:
        click.echo(f"{name.upper()} <- {value:#x} (wrote {word:#010x}); {back['name']} = "
                   f"{back['value']:#010x}  {_fields_text(back['fields'])}")
    return EXIT_OK


@click.command(help=textwrap.dedent("""\
    Show the device: identity, connections and their state, counters, last error.

    {LIVE}

    With --watch SECONDS it shows the counters and their rates per second every
    SECONDS, redrawn in place on a terminal (the addresses and open connections
    above them), one line per refresh when piped (one JSON object with --json),
    until Ctrl-C or --count refreshes.

    \b
    Examples:
      rnic status                                   # a fresh model, from reset
      rnic status --device tcp:127.0.0.1:7100 --json
      rnic status --device uart:/dev/ttyUSB1        # a board
      rnic status --device tcp:127.0.0.1:7200 --watch 1   # a running NIC, live
    """).replace("{LIVE}", _LIVE))
@_reg_device_option
@click.option("--watch", "interval", type=click.FloatRange(0.05, 3600), default=None,
              metavar="SECONDS", help="Refresh every SECONDS with rates, until Ctrl-C.")
@click.option("--count", type=click.IntRange(1), default=None,
              help="With --watch: stop after this many refreshes.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (with --watch: one per refresh).")
def status(device, interval, count, as_json):
    """``rnic status`` (help above: it shares a paragraph with ``rnic regs``)."""
    from rnic.host.driver.device import DeviceError, describe_layer
    if count is not None and interval is None:
        raise click.UsageError("--count needs --watch")
    dev, st = open_device_or_fail(device)
    if st is not None:
        return st
    with dev:
        try:
            if interval is not None:
                return _watch(dev, interval, count, as_json)
            info = dev.status()
        except (DeviceError, OSError) as e:
            return fail(str(e))
    if as_json:
        emit(info, sys.stdout)
        return EXIT_OK
    ident = info["identity"]
    click.echo(f"device {info['device']}: RNIC map {ident['version']}, W={ident['width']}, "
               f"{ident['connections']} connections, {ident['stags']} STags, "
               + (f"IRD/ORD at most {ident['ird_depth']}/{ident['ord_depth']}, "
                  if ident.get("ird_depth") else "")
               + f"{'enabled' if info['enabled'] else 'disabled'}, "
               f"{'ready' if info['ready'] else 'not ready'}")
    if not info["connections"]:
        click.echo("connections: none active")
    for c in info["connections"]:
        err = c["error"]
        click.echo(f"connection {c['conn']}: {c['state']}" + (
            f", error {describe_layer(err['layer'])} type {err['etype']} code {err['ecode']:#04x}"
            if err else ""))
    click.echo("counters: " + ", ".join(f"{k} {v}" for k, v in info["counters"].items()))
    net = info["network"]
    if net is not None:
        click.echo(f"network: {net['ip']}/{net['prefix']}, mac {net['mac']}, gateway "
                   f"{net['gateway'] or 'none'}; frames in {net['rx_good']} ({net['rx_tcp']} "
                   "TCP), dropped " + (", ".join(f"{k} {v}" for k, v in net["rx_drops"].items())
                                       or "none")
                   + f"; frames out {net['tx_frames']}, dropped {net['tx_dropped']}")
    tcp = info["tcp"]
    if tcp is not None:
        from rnic.host.cli.watch import tcp_connection_texts
        click.echo(f"tcp: {len(tcp['connections'])} open, {tcp['tx_segments']} segments sent "
                   f"({tcp['retransmits']} again), drops " + (", ".join(
                       f"{k} {v}" for k, v in tcp["drops"].items()) or "none"))
        for conn, text in tcp_connection_texts(info).items():
            click.echo(f"tcp connection {conn}: {text}")
    e = info["last_error"]
    click.echo("last error: " + ("none" if e is None else
               f"connection {e['conn']} ({'tx' if e['tx'] else 'rx'}): "
               f"{describe_layer(e['layer'])} type {e['etype']} code {e['ecode']:#04x}"
               + (" (more were lost)" if e["overflow"] else "")))
    return EXIT_OK


def _watch(dev, interval, count, as_json):
    """``rnic status --watch``: until Ctrl-C (exit 0) or ``count`` refreshes."""
    from rnic.host.cli.watch import watch
    try:
        watch(dev, interval=interval, count=count, as_json=as_json, out=sys.stdout,
              live=sys.stdout.isatty() and not as_json)
    except KeyboardInterrupt:
        pass
    return EXIT_OK


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), required=True,
              help="TCP port (0: any free port; printed).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@device_option("The device to serve (it lives as long as the server).", default="model",
               allow_none=False)
@click.option("--once", is_flag=True, help="Exit after the first client disconnects.")
@click.option("--json", "as_json", is_flag=True, help="Print the address as JSON.")
def serve(port, host, device, once, as_json):
    """Serve a device's registers over TCP, for --device tcp:HOST:PORT.

    The device lives as long as the server: what one command writes, the
    next one reads (`rnic regs`, `rnic status`, `rnic listen --device
    tcp:...`). The protocol is one ASCII line per access (R ADDR / W ADDR
    VALUE); see rnic.host.driver.transport. Runs until interrupted (or
    --once).

    \b
    Examples:
      rnic serve --port 7100 &
      rnic regs write SCRATCH 0x5a --device tcp:127.0.0.1:7100
      rnic regs read SCRATCH --device tcp:127.0.0.1:7100
      rnic serve --port 7100 --device sim     # the simulated core's registers
    """
    from rnic.host.driver.transport import TransportServer
    dev, st = open_device_or_fail(device)
    if st is not None:
        return st
    with dev:
        try:
            server = TransportServer(dev.transport, port, host)
        except OSError as e:
            return fail(f"cannot listen on {host}:{port}: {e}")
        with server:
            if as_json:
                click.echo(json.dumps({"event": "serving", "device": device,
                                       "address": server.address, "port": server.port}))
            else:
                click.echo(f"serving {device} registers on {server.address}")
            server.serve(once=once)
    return EXIT_OK
