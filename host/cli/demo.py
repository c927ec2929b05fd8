"""``rnic demo``: two RNICs over loopback TCP (or the model alone), data moved both ways."""

import sys

import click

from rnic.host.cli.common import EXIT_FAILURE, EXIT_OK, emit

__all__ = ["demo"]


@click.command()
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
        from rnic.host.apps.demo_model import run_demo
        result = run_demo(seed=seed)
        if as_json:
            emit(result, out)
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

    from rnic.host.apps.demo import run_tcp_demo
    if device == "sim" and sys.stderr.isatty():
        click.echo("demo: starting the simulated RNIC (Verilator; the first run builds it)...", err=True)
    result = run_tcp_demo(device=device)
    if as_json:
        emit(result, out)
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
