"""``rnic demo``: two RNICs over loopback TCP (or the model alone), data moved both ways."""

import sys

import click

from rnic.host.cli.common import EXIT_FAILURE, EXIT_OK, device_option, emit

__all__ = ["demo"]


def _onoff(flag):
    return "on" if flag else "off"


def _text(result):
    """The demo's result (rnic.host.apps.demo_model.demo_result) as lines of text."""
    device, n = result["device"], result["negotiated"]
    if device == "model":
        yield "A and B: the reference model, in one process (no sockets)"
    else:
        where = ("the simulated core (Verilated RnicCore: MPA, DDP, RDMAP)" if device == "sim"
                 else "the software RNIC")
        yield f"A: software RNIC (initiator); B: {where} (responder), over 127.0.0.1 TCP"
    pd = bytes.fromhex(n["peer_private_data"] or "").decode(errors="replace")
    yield (f"MPA: rev {n['rev']}, markers A->B {_onoff(n['markers_a_to_b'])}, B->A "
           f"{_onoff(n['markers_b_to_a'])}, CRC {_onoff(n['crc'])}, IRD {n['ird']}, ORD "
           f"{n['ord']}, p2p {n['p2p']}, RTR {n['rtr']}, MULPDU {result['mulpdu']}, peer private "
           f"data {pd!r}")
    for name, m in result["moved"].items():
        yield (f"{name}: Send {m['send']} octets into receive buffers, RDMA Write {m['write']} "
               f"octets, RDMA Read {m['read']} octets back")
    t = result["traffic"]
    segments = "" if t["tcp_segments"] is None else f" in {t['tcp_segments']} TCP segments"
    yield (f"traffic: {t['fpdus']} FPDUs{segments}, {t['markers']} markers, {t['wire_octets']} "
           f"wire octets carrying {t['payload_octets']} payload octets "
           f"({t['payload_per_wire_octet']:.2%})")
    hc = result["hardware_counters"]
    if hc:
        yield (f"hardware: {hc['tx_fpdus']} FPDUs framed ({hc['tx_markers']} markers), "
               f"{hc['rx_fpdus']} deframed, {hc['err_count']} errors")
    if result["terminate"]:
        e = result["terminate"]
        yield f"Terminate: layer {e['layer']} type {e['etype']} code {e['ecode']}: {e['text']}"
    for chk in result["checks"]:
        yield f"  [{'ok' if chk['ok'] else 'FAIL'}] {chk['check']}"
    s = result["seconds"]
    start = "" if s["device_start"] is None else f" (device start {s['device_start']} s)"
    yield f"demo: {'all checks passed' if result['ok'] else 'FAILED'} in {s['total']} s{start}"


@click.command()
@device_option("B's data path.", default="sim", kinds=("sim", "none"),
               choices=("sim", "none", "model"),
               extra="model: (the demo only) A and B both in the reference model, in one process, "
                     "no sockets; the other kinds are not demo data paths")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed (--device model).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def demo(device, seed, as_json):
    """Connect two RNICs over loopback TCP and move data both ways.

    A (software RNIC) connects to B (the simulated core by default: its MPA, DDP and
    RDMAP layers in the gateware, buffers in the device's memory) with
    RFC 6581 enhanced setup: Rev 2, IRD/ORD, peer-to-peer with a zero-length
    RDMA Write RTR, markers and CRC. Then Send, RDMA Write and RDMA Read run
    in both directions and every placed octet is checked. The first run
    builds the simulated RNIC with Verilator (about a minute; stderr shows
    the phase and the time); later runs reuse it. Exit status 1 if any check
    fails.

    With --json: one object with the same keys for every device (a fact a
    device does not have is null):

    \b
      ok                 every check held
      device             sim, none or model
      negotiated         rev, markers_a_to_b, markers_b_to_a, crc, ird, ord,
                         p2p, rtr, peer_private_data (hex), request_octets,
                         reply_octets (MPA frame sizes; model only)
      mulpdu             MULPDU of A's FPDUs
      moved              {"A->B", "B->A"}: send, write, read octets (A->B:
                         A sends to, writes into and reads from B)
      traffic            fpdus, tcp_segments (model only), markers,
                         wire_octets, payload_octets, payload_per_wire_octet
      stats              {"a", "b"}: each end's counters (over TCP)
      hardware_counters  the simulated core's counters (sim)
      terminate          the Terminate seen: layer, etype, ecode, text (the
                         model demo provokes one; over TCP none is expected)
      seconds            device_start (sim), total
      checks             [{"check", "ok"}]

    \b
    Examples:
      rnic demo
      rnic demo --device none          # both ends on the software RNIC
      rnic demo --json | jq .moved
    """
    if device == "model":
        from rnic.host.apps.demo_model import run_demo
        result = run_demo(seed=seed)
    else:
        from rnic.host.apps.demo import run_tcp_demo
        from rnic.host.cli.progress import sim_build_progress
        with sim_build_progress():
            result = run_tcp_demo(device=device)
    if as_json:
        emit(result, sys.stdout)
    else:
        for line in _text(result):
            click.echo(line)
    return EXIT_OK if result["ok"] else EXIT_FAILURE
