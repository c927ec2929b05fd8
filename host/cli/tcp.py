"""``rnic tcp``: the TCP engine of a NIC device (listening ports, the echo service,
connections, events, counters) through its registers (:mod:`rnic.host.driver.tcp_regs`)."""

import ipaddress
import random
import sys
import textwrap
import time

import click

from rnic.host.cli.common import EXIT_OK, device_option, emit, fail, open_device_or_fail

__all__ = ["tcp"]


def _device(f):
    return device_option("The NIC device (the simulated NIC: rnic nic-sim's "
                         "--device tcp:127.0.0.1:PORT; a board: uart:PATH).",
                         default="nicsim", allow_none=False)(f)


def _json(f):
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")(f)


def _run(device, action):
    """Open ``device``, run ``action(device)``; a device without TCP or a refused value is
    one error line."""
    from rnic.host.driver.tcp_regs import TcpConnectError, TcpMissing
    from rnic.host.driver.transport import DeviceError
    dev, status = open_device_or_fail(device)
    if status is not None:
        return None, status
    with dev:
        try:
            dev.regs.require_tcp()
            return action(dev), None
        except ValueError as e:
            raise click.UsageError(str(e)) from None
        except (TcpMissing, TcpConnectError, DeviceError, OSError, TimeoutError) as e:
            return None, fail(str(e))


@click.group(help=textwrap.dedent("""\
    The NIC's TCP engine: listening ports, the echo service, connections and counters.

    The engine runs in gateware; these commands reach it through the device's registers
    (the TCP block, TCP_*). A device that lives on between commands is the simulated NIC
    of rnic nic-sim (--device tcp:127.0.0.1:PORT) or a board (--device uart:PATH).

    \b
    Examples:
      rnic nic-sim --wire 17702:17701 --control 7200 &
      rnic tcp listen 7 --echo --device tcp:127.0.0.1:7200     # RFC 862 echo, in gateware
      rnic tcp status --device tcp:127.0.0.1:7200              # connections and counters
      rnic tcp connect 169.254.7.1 5001 --wait 5 --device tcp:127.0.0.1:7200
      rnic tcp events --device tcp:127.0.0.1:7200 --json
      rnic tcp close 0 --device tcp:127.0.0.1:7200
    """))
def tcp():
    """The ``rnic tcp`` group (help above)."""


@tcp.command("listen")
@click.argument("port", type=click.IntRange(1, 65535))
@click.option("--slot", type=click.IntRange(0, 63), default=0, show_default=True,
              help="Listening slot (below TCP_CAPS.LISTENERS).")
@click.option("--echo", is_flag=True, help="Connections on PORT are the echo service.")
@click.option("--off", is_flag=True, help="Free the slot instead.")
@_device
@_json
def tcp_listen(port, slot, echo, off, device, as_json):
    """Listen on PORT (passive opens by SYN cookie), or with --echo answer it in gateware.

    \b
    Examples:
      rnic tcp listen 7 --echo --device tcp:127.0.0.1:7200
      rnic tcp listen 7 --off --device tcp:127.0.0.1:7200
    """
    _, status = _run(device, lambda dev: dev.regs.tcp_listen(slot, port, echo=echo,
                                                          valid=not off))
    if status is not None:
        return status
    if as_json:
        emit({"slot": slot, "port": port, "echo": echo, "listening": not off}, sys.stdout)
    else:
        click.echo(f"slot {slot}: " + ("free" if off else
                                       f"listening on {port}" + (" (echo)" if echo else "")))
    return EXIT_OK




def _ipv4(ctx, param, value):
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an IPv4 address") from None


@tcp.command("connect")
@click.argument("address", callback=_ipv4)
@click.argument("port", type=click.IntRange(1, 65535))
@click.option("--local-port", type=click.IntRange(1, 65535), default=None,
              help="Our port  [default: a random one of 49152 .. 65535 (RFC 6056)]")
@click.option("--echo", is_flag=True, help="The connection is the echo service (RFC 862): "
              "the NIC sends back every octet it receives on it.")
@click.option("--wait", "wait_s", type=click.FloatRange(0, 3600), default=0,
              show_default=True, help="Seconds to wait for the handshake (0: return once "
                                      "the SYN is out).")
@_device
@_json
def tcp_connect(address, port, local_port, echo, wait_s, device, as_json):
    """Open a connection to ADDRESS:PORT from the NIC (an active open in gateware).

    Prints the connection id. With --wait, waits until the handshake is over: exit status
    0 when ESTABLISHED, 1 when the peer refused or the SYN's retries ran out (the event
    says which: rnic tcp events) or the time is up.

    
    Examples:
      rnic tcp connect 169.254.7.1 5001 --device tcp:127.0.0.1:7200
      rnic tcp connect 169.254.7.1 5001 --echo --wait 10 --device tcp:127.0.0.1:7200
    """
    from rnic.host.spec.tcp_engine import TcpState
    local_port = local_port or random.randint(49152, 65535)

    def action(dev):
        conn = dev.regs.tcp_connect(address, port, local_port, echo=echo)
        state = TcpState.SYN_SENT
        deadline = time.monotonic() + wait_s
        while wait_s and state is TcpState.SYN_SENT and time.monotonic() < deadline:
            time.sleep(0.05)
            state = dev.regs.tcp_connection(conn).state
        return conn, state

    result, status = _run(device, action)
    if status is not None:
        return status
    conn, state = result
    info = {"conn": conn, "remote": f"{address}:{port}", "local_port": local_port,
            "echo": echo, "state": state.name if state is not TcpState.CLOSED else "FAILED"}
    if as_json:
        emit(info, sys.stdout)
    else:
        click.echo(f"connection {conn}: {local_port} -> {address}:{port}"
                   f"{' (echo)' if echo else ''}, {info['state']}")
    if not wait_s or state is TcpState.ESTABLISHED:
        return EXIT_OK
    return fail(f"connection {conn}: " + (f"still SYN-SENT after {wait_s:g} s"
                                          if state is TcpState.SYN_SENT else
                                          "refused or not answered (rnic tcp events)"))


@tcp.command("status")
@_device
@_json
def tcp_status(device, as_json):
    """Show the engine's open connections, parameters and counters.

    \b
    Examples:
      rnic tcp status --device tcp:127.0.0.1:7200
      rnic tcp status --device tcp:127.0.0.1:7200 --json | jq '.connections'
    """
    info, status = _run(device, lambda dev: {"params": dev.regs.tcp_params(),
                                             **dev.tcp_status()})
    if status is not None:
        return status
    if as_json:
        emit(info, sys.stdout)
        return EXIT_OK
    click.echo(f"time base: {info['now']} ticks; segments sent {info['tx_segments']} "
               f"({info['retransmits']} again); events lost {info['events_lost']}")
    if not info["connections"]:
        click.echo("connections: none open")
    for c in info["connections"]:
        click.echo(f"connection {c['conn']}: {c['state']}{' echo' if c['echo'] else ''} "
                   f"{c['local_port']} <- {c['remote_ip']}:{c['remote_port']}, "
                   f"snd_una {c['snd_una']:#010x} snd_nxt {c['snd_nxt']:#010x} "
                   f"rcv_nxt {c['rcv_nxt']:#010x}, wnd {c['snd_wnd']} cwnd {c['cwnd']} "
                   f"rto {c['rto']}")
    drops = {k: v for k, v in info["drops"].items() if v}
    click.echo("drops: " + (", ".join(f"{k} {v}" for k, v in drops.items()) or "none"))
    return EXIT_OK


@tcp.command("events")
@_device
@_json
def tcp_events(device, as_json):
    """Print and remove the queued connection events (ACCEPTED, PEER_CLOSED, CLOSED, ...).

    \b
    Examples:
      rnic tcp events --device tcp:127.0.0.1:7200
    """
    events, status = _run(device, lambda dev: dev.regs.tcp_events())
    if status is not None:
        return status
    for e in events:
        if as_json:
            emit({"conn": e.conn, "event": e.kind.name}, sys.stdout)
        else:
            click.echo(f"connection {e.conn}: {e.kind.name}")
    return EXIT_OK


def _command(name, verb):
    @tcp.command(name, help=f"{verb} connection CONN.\n\n\b\nExamples:\n"
                            f"  rnic tcp {name} 0 --device tcp:127.0.0.1:7200")
    @click.argument("conn", type=click.IntRange(0, 65535))
    @_device
    def command(conn, device):
        _, status = _run(device, lambda dev: getattr(dev.regs, f"tcp_{name}")(conn))
        return EXIT_OK if status is None else status
    return command


tcp_close = _command("close", "Close (a FIN after the octets written)")
tcp_abort = _command("abort", "Abort (a RST; the id is free at once)")
