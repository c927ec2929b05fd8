"""``rnic nic-sim``: the simulated NIC on a virtual cable (:mod:`rnic.host.apps.nic_sim`)."""

import json
import signal
import sys
import textwrap

import click

from rnic.host.cli.common import EXIT_OK, OutputPath, fail

__all__ = ["nic_sim"]


def _checked(parse):
    """A click callback turning the ValueError of ``parse`` into a usage error."""
    def callback(ctx, param, value):
        if value is None:
            return None
        import rnic.host.apps.nic_sim as app
        try:
            return getattr(app, parse)(value)
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
    return callback


def _checked_echo(ctx, param, value):
    """The echo ports: no port twice, at most the NIC's listening slots."""
    from rnic.host.spec.tcp_engine import DEFAULT_LISTENERS
    if len(set(value)) != len(value):
        raise click.BadParameter("a port is given twice")
    if len(value) > DEFAULT_LISTENERS:
        raise click.BadParameter(f"{len(value)} ports; the NIC listens on at most "
                                 f"{DEFAULT_LISTENERS}")
    return tuple(value)


@click.command("nic-sim", help=textwrap.dedent("""\
    Run the simulated NIC on a virtual Ethernet cable until interrupted.

    The NIC is the Verilated NIC top (MAC, ARP, IPv4, ICMP echo, TCP and the RNIC core with
    its registers; the board's top minus the pin-level PHY), built on first use and cached.
    TCP's timers run in wall time (the time base ticks once a millisecond). --echo PORT
    answers TCP port PORT with the echo service (RFC 862) in gateware: every octet a peer
    sends comes back.
    The cable is qemu's dgram netdev: the NIC takes Ethernet frames as UDP datagrams on
    127.0.0.1:LISTEN_PORT and sends its frames as UDP datagrams to 127.0.0.1:PEER_PORT,
    one frame per datagram, destination MAC first, no preamble, no FCS. Its registers are
    served on 127.0.0.1:--control, for every rnic command's --device tcp:127.0.0.1:PORT.
    --pcap FILE writes every frame of the cable, both ways, as it passes.

    Prints one line when ready (with --json: one JSON object, "event": "ready"), and one
    when it stops; SIGINT (Ctrl-C) or SIGTERM stop it cleanly (exit 0). Progress of a
    build goes to stderr.

    \b
    Examples:
      rnic nic-sim --wire 17702:17701 --control 7200 &
      siw-vm run --wire 17701:17702 -- 'ping -c 3 169.254.7.2'   # the siw VM as the peer
      rnic regs read NET_RX_GOOD --device tcp:127.0.0.1:7200
      rnic regs dump --device tcp:127.0.0.1:7200
      rnic nic-sim --wire 17702:17701 --ip 10.1.2.3/16 --mac 02:00:00:00:00:42 --json
      rnic nic-sim --wire 17702:17701 --pcap cable.pcap &   # the cable's frames, for Wireshark
      rnic nic-sim --wire 17702:17701 --echo 7 &
      siw-vm run --wire 17701:17702 -- 'head -c 1M /dev/urandom | nc -q 5 169.254.7.2 7 | wc -c'
      rnic tcp status --device tcp:127.0.0.1:7200
    """))
@click.option("--wire", required=True, metavar="LISTEN_PORT:PEER_PORT",
              callback=_checked("parse_wire"),
              help="UDP ports on 127.0.0.1: frames in on LISTEN_PORT, out to PEER_PORT "
                   "(siw-vm run --wire PEER_PORT:LISTEN_PORT is the other end).")
@click.option("--ip", "ip", default="169.254.7.2/24", show_default=True,
              metavar="ADDRESS/PREFIX", callback=_checked("parse_ip"),
              help="The NIC's IPv4 address and prefix length (the siw VM's guest is "
                   "169.254.7.1/24).")
@click.option("--mac", default="02:00:0a:07:00:02", show_default=True,
              callback=_checked("parse_mac"), help="The NIC's MAC address (unicast).")
@click.option("--control", type=click.IntRange(0, 65535), default=0, show_default=True,
              metavar="PORT",
              help="TCP port of the register server on 127.0.0.1 (0: any free port; the "
                   "ready line names it).")
@click.option("--echo", "echo_ports", type=click.IntRange(1, 65535), multiple=True,
              metavar="PORT", callback=_checked_echo,
              help="Serve the echo service on this TCP port (repeatable, up to 4 ports: the "
                   "NIC's listening slots).")
@click.option("--pcap", "pcap_file", type=OutputPath(), default=None,
              help="Write every frame of the cable, both ways, to this pcap file as it "
                   "passes (Wireshark's iWARP dissectors decode the NIC's RDMA).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the ready and stopped lines as JSON objects.")
def nic_sim(wire, ip, mac, control, echo_ports, pcap_file, as_json):
    """``rnic nic-sim`` (help above)."""
    from rnic.host.apps.nic_sim import NicSim, PortInUse
    from rnic.host.model.ethernet import format_mac
    from rnic.host.cli.progress import sim_build_progress
    from rnic.host.driver.transport import DeviceError

    listen, peer = wire
    address, prefix = ip
    try:
        with sim_build_progress():
            sim = NicSim(listen_port=listen, peer_port=peer, ip=address, prefix=prefix, mac=mac,
                         control_port=control, echo_ports=echo_ports, pcap=pcap_file)
    except PortInUse as e:
        raise click.UsageError(str(e)) from None
    except (DeviceError, OSError) as e:
        return fail(f"cannot start the simulated NIC: {e}")

    old = {sig: signal.signal(sig, lambda signum, frame: sim.stop())
           for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with sim:
            ready = {"event": "ready", "wire": {"listen": f"udp:127.0.0.1:{listen}",
                                                "peer": f"udp:127.0.0.1:{peer}"},
                     "ip": str(address), "prefix": prefix, "mac": format_mac(mac),
                     "control": sim.control_port, "device": sim.control_address,
                     "echo": list(sim.echo_ports), "pcap": pcap_file}
            if as_json:
                click.echo(json.dumps(ready))
            else:
                echo = "".join(f", echo on tcp {port}" for port in sim.echo_ports)
                echo += f", frames to {pcap_file}" if pcap_file else ""
                click.echo(f"nic-sim ready: {address}/{prefix} {format_mac(mac)}, frames in on "
                           f"udp 127.0.0.1:{listen}, out to udp 127.0.0.1:{peer}, registers "
                           f"--device {sim.control_address}{echo}")
            sys.stdout.flush()
            stopped = sim.wait()
            stats = sim.stats
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if not stopped:
        return fail("the simulation process ended unexpectedly")
    counts = {"frames_in": stats.frames_in, "frames_out": stats.frames_out,
              "dropped_in": stats.dropped_in, "send_errors": stats.send_errors,
              "bad_out": stats.bad_out}
    if as_json:
        click.echo(json.dumps({"event": "stopped", **counts}))
    else:
        click.echo("nic-sim stopped: " + ", ".join(f"{k.replace('_', ' ')} {v}"
                                                   for k, v in counts.items()))
    if stats.bad_out:
        return fail(f"the NIC sent {stats.bad_out} bad frame(s) (FCS, tx_er or preamble)")
    return EXIT_OK
