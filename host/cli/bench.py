"""``rnic bench mpa``, ``ddp``, ``nic``, ``tcp`` and ``rdma``: the gateware in simulation
(Verilator): throughput, the simulated NIC on its virtual cable, its TCP and its RDMA
Writes over that TCP; ``rnic bench siw``: Linux siw against the software RNIC and the
simulated NIC."""

import sys

import click

from rnic.host.cli.common import EXIT_FAILURE, EXIT_OK, emit, fail
from rnic.host.cli.progress import sim_build_progress
from rnic.host.spec.net import MAX_ECHO_DATA

__all__ = ["bench"]


def _bench_widths(ctx, param, value):
    if not value:
        return (4, 8, 16, 32)
    widths = []
    for v in value:
        for w in ((4, 8, 16, 32) if v == "all" else (int(v),)):
            if w not in widths:
                widths.append(w)
    return tuple(widths)


@click.group()
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
    model; a mismatch exits 1. Progress goes to stderr: a live line on a
    terminal, one line per phase of a simulation build when piped.

    \b
    Examples:
      rnic bench mpa --width 8
      rnic bench mpa --width all --ulpdus 20000 --json
    """
    from rnic.sim.fast import FastSimError
    from rnic.sim.mpa_engine import RtlEngineError
    from rnic.host.tools.bench import BenchMismatch, run_bench, text_report
    try:
        with sim_build_progress() as view:
            report = run_bench(widths, ulpdus=ulpdus, seed=seed, connections=connections,
                               say=view.say if view.live else None)
    except (RtlEngineError, FastSimError, BenchMismatch) as exc:
        return fail(str(exc))
    return _report(report, as_json, text_report)


def _report(report, as_json, text):
    """Print a benchmark report (JSON or text); a failure line per unverified result."""
    if as_json:
        emit(report, sys.stdout)
    else:
        click.echo(text(report))
    if not report["verified"]:
        for r in report["results"]:
            if not r["verified"]:
                fail(r["mismatch"])
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
    (DDP/RDMAP headers, MPA length, pad, CRC, markers; rnic.host.model.segment and
    rnic.host.model.fpdu), with octets, cycles and Gb/s at 125 and 156.25 MHz. Every
    placed octet is checked (address, order, value) and the framer's wire
    octets against the model; a failure exits 1. Progress goes to stderr: a
    live line on a terminal, one line per phase of a simulation build when
    piped.

    \b
    Examples:
      rnic bench ddp --width 8
      rnic bench ddp --width 4 --width 8 --json
    """
    from rnic.host.tools.bench import DDP_OPS, BenchMismatch, ddp_text_report, run_ddp_bench
    try:
        with sim_build_progress() as view:
            report = run_ddp_bench(widths, ops=DDP_OPS if ops == "all" else (ops,),
                                   messages=messages, say=view.say if view.live else None)
    except BenchMismatch as exc:
        return fail(str(exc))
    return _report(report, as_json, ddp_text_report)


@bench.command("nic")
@click.option("--size", "sizes", multiple=True,
              type=click.IntRange(0, MAX_ECHO_DATA),
              help="ICMP payload octets of the pings; repeatable (default 0, 56, 1472).")
@click.option("--pings", type=click.IntRange(1, 1_000_000), default=None,
              help="Echo requests per size (default 400).")
@click.option("--window", type=click.IntRange(1, 256), default=None,
              help="Echo requests in flight at most, the peer's window (default 16).")
@click.option("--seed", type=int, default=1, show_default=True,
              help="Random seed of the payloads and identifiers.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the report).")
def bench_nic(sizes, pings, window, seed, as_json):
    """The simulated NIC on its virtual cable: frames and cycles per second.

    Starts what `rnic nic-sim` runs (the Verilated NIC top, W = 4, behind UDP
    datagrams on 127.0.0.1) on free ports and is the peer on the cable: it
    resolves the NIC by ARP, then per payload size sends --pings ICMP echo
    requests with at most --window unanswered. Every reply is checked octet
    for octet against the model's (rnic.host.model.network_layer), and at
    the end the NIC's receive counters against the model's; a difference or
    a missing reply exits 1. Reports frames per second over the cable
    (requests plus replies), simulated cycles per second (wall time, and the
    clock loop alone), cycles per ping beside the octets a request takes on
    the line, and the simulation's speed as a share of a 1 Gb/s line's
    125 MHz. Progress goes to stderr on a terminal.

    \b
    Examples:
      rnic bench nic
      rnic bench nic --size 56 --pings 2000 --window 32 --json
    """
    from rnic.host.driver.transport import DeviceError, TransportError
    from rnic.host.tools.bench_nic import NIC_SIZES, NicBenchMismatch, nic_text_report, \
        run_nic_bench
    try:
        with sim_build_progress() as view:
            given = {k: v for k, v in (("pings", pings), ("window", window)) if v is not None}
            report = run_nic_bench(sizes or NIC_SIZES, seed=seed, **given,
                                   say=view.say if view.live else None)
    except (NicBenchMismatch, DeviceError, TransportError, OSError) as exc:
        return fail(str(exc))
    if as_json:
        emit(report, sys.stdout)
    else:
        click.echo(nic_text_report(report))
    return EXIT_OK if report["verified"] else fail(
        f"the NIC sent {report['bad_out']} frames with a bad FCS or preamble")


def _lockstep_peer_options(f):
    """The options of the benchmarks with the models as a lock-step peer (tcp, rdma)."""
    for option in reversed((
            click.option("--loss", type=click.FloatRange(0.0, 0.1), default=0.0,
                         show_default=True,
                         help="Share of the frames the cable loses, and again duplicates and "
                              "reorders, each way."),
            click.option("--step", type=click.IntRange(16, 100_000), default=None,
                         help="Cycles between two turns of the peer, its reaction time "
                              "(default 256)."),
            click.option("--seed", type=int, default=1, show_default=True,
                         help="Random seed of the data and the cable."),
            click.option("--json", "as_json", is_flag=True,
                         help="Print one JSON object (the report)."))):
        f = option(f)
    return f


@bench.command("tcp")
@click.option("--octets", type=click.IntRange(1, 1 << 30), default=None,
              help="Octets echoed (default 1 MiB).")
@_lockstep_peer_options
def bench_tcp(octets, loss, step, seed, as_json):
    """TCP goodput of the simulated NIC: octets per cycle against the 1 Gb/s line.

    Starts the Verilated NIC top (W = 4) with its echo service and is the peer
    (the model's TCP engine) in lock-step with the simulation: it connects,
    sends --octets random octets and reads them back, each octet checked.
    Reports the octets echoed per cycle each way, the share of the line (an
    octet per cycle each way) and of TCP's limit on it with full segments,
    the segments and drops of the NIC and the peer's retransmissions; with
    --loss, over a cable that drops, duplicates and reorders frames. An echo
    that differs or stops exits 1. Progress goes to stderr on a terminal.

    \b
    Examples:
      rnic bench tcp
      rnic bench tcp --octets 4194304 --json
      rnic bench tcp --loss 0.01 --octets 262144
    """
    from rnic.host.driver.transport import DeviceError, TransportError
    from rnic.host.tools.bench_tcp import (DEFAULT_OCTETS, DEFAULT_STEP, TcpBenchMismatch,
                                           run_tcp_bench, tcp_text_report)
    try:
        with sim_build_progress() as view:
            report = run_tcp_bench(octets=octets or DEFAULT_OCTETS, loss=loss,
                                   step=step or DEFAULT_STEP, seed=seed,
                                   say=view.say if view.live else None)
    except (TcpBenchMismatch, DeviceError, TransportError, OSError) as exc:
        return fail(str(exc))
    return _report(report, as_json, tcp_text_report)


@bench.command("rdma")
@click.option("--octets", type=click.IntRange(1, 1 << 22), default=None,
              help="Octets written in all, a multiple of --size (default 1 MiB).")
@click.option("--size", type=click.IntRange(1, 1 << 22), default=None,
              help="Octets of each RDMA Write (default 65536).")
@click.option("--direction", type=click.Choice(["out", "in"]), default="out",
              show_default=True,
              help="out: the NIC's core writes to the peer; in: the peer writes into the "
                   "NIC's memory.")
@_lockstep_peer_options
def bench_rdma(octets, size, direction, loss, step, seed, as_json):
    """RDMA Writes of the simulated NIC's core over its TCP: octets per cycle against the
    1 Gb/s line.

    Starts the Verilated NIC top (W = 4: MAC, network layer, TCP, the RNIC core) and
    is the peer (the model's TCP engine and MPA decoder) in lock-step with the
    simulation: the NIC connects and negotiates MPA through its stream port, then
    its core sends --octets of RDMA Writes of --size octets from the simulated host
    memory; every FPDU's CRC and every octet's place are checked, every Write must
    complete. With --direction in the peer writes into a region of the NIC's memory
    and ends with a Send, whose completion ends the run; the region is checked.
    Reports the payload octets per cycle, the share of the line (an octet
    per cycle) and of what RDMA Writes can carry on it with full segments, and the
    retransmissions; with --loss, over a cable that drops, duplicates and reorders
    frames. A transfer that differs or stops exits 1. Progress goes to stderr on a
    terminal.

    \b
    Examples:
      rnic bench rdma
      rnic bench rdma --size 4096 --json
      rnic bench rdma --direction in
      rnic bench rdma --loss 0.01 --octets 262144
    """
    from rnic.host.driver.transport import DeviceError, TransportError
    from rnic.host.tools.bench_rdma import (DEFAULT_OCTETS, DEFAULT_SIZE, RdmaBenchMismatch,
                                            rdma_text_report, run_rdma_bench)
    from rnic.host.tools.bench_tcp import DEFAULT_STEP
    octets, size = octets or DEFAULT_OCTETS, size or DEFAULT_SIZE
    if size > octets or octets % size:
        raise click.UsageError(f"--octets ({octets}) must be a multiple of --size ({size})")
    try:
        with sim_build_progress() as view:
            report = run_rdma_bench(octets=octets, size=size, direction=direction, loss=loss,
                                    step=step or DEFAULT_STEP, seed=seed,
                                    say=view.say if view.live else None)
    except (RdmaBenchMismatch, DeviceError, TransportError, OSError) as exc:
        return fail(str(exc))
    return _report(report, as_json, rdma_text_report)


@bench.command("siw")
@click.option("--size", "-s", type=click.IntRange(1, 1 << 23), default=None,
              help="Octets of each perftest RDMA Write (default 65536).")
@click.option("--iters", "-n", type=click.IntRange(5, 1_000_000), default=None,
              help="perftest's RDMA Writes (default 100).")
@click.option("--pings", "-C", type=click.IntRange(2, 1_000_000), default=None,
              help="rping's pings (default 50; the mean leaves the first out).")
@click.option("--ping-size", "-S", type=click.IntRange(26, 65535), default=None,
              help="rping's ping size (default 64).")
@click.option("--column", "columns", multiple=True, type=click.Choice(["software", "nic"]),
              help="Run only this column; repeatable (default both).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the report).")
def bench_siw(size, iters, pings, ping_size, columns, as_json):
    """Linux soft-iWARP (siw, in the siw VM) against the software RNIC and the simulated NIC.

    Two columns, one boot of the siw VM (`siw-vm run`, variant default) each: the
    software RNIC (`rnic perftest` / `rnic rping`, --device none) reached through the
    VM's user-mode networking (siw0), and the simulated NIC (what `rnic nic-sim` runs,
    W = 4) on the VM's virtual cable (siw1; `--device tcp:` of it, so the NIC's TCP and
    core move the data). Figures per column: siw's `ib_write_bw -d siwN -R -s SIZE -n
    ITERS` client against `rnic perftest write`, the average and peak MB/s (2^20
    octets/s) it prints; `rnic rping -c -C PINGS -S PING_SIZE -V` against siw's `rping
    -s`, the mean wall time of one ping from the end of the first ping to the end of
    the last (no connection setup). Checked: every exit status, perftest's report on
    both sides, siw's octets in our buffer, every ping's data on both sides, no CRC error
    in the NIC's core; a failure exits 1, and so does a siw-vm that is not found ($SIW_VM,
    ../shared/tools/siw-vm/siw-vm beside the checkout, PATH) or not prepared. Progress
    goes to stderr on a terminal. The defaults take a few minutes on 2 cores.

    \b
    Examples:
      rnic bench siw
      rnic bench siw --size 4096 --iters 10 --pings 5 --json
      rnic bench siw --column nic
      SIW_VM=/opt/siw-vm/siw-vm rnic bench siw --column software
    """
    from rnic.host.tools import bench_siw as bs
    given = {k: v for k, v in (("size", size), ("iters", iters), ("pings", pings),
                               ("ping_size", ping_size)) if v is not None}
    try:
        with sim_build_progress() as view:
            report = bs.run_siw_bench(columns=columns or bs.COLUMNS, **given,
                                      say=view.say if view.live else None)
    except (bs.SiwVmMissing, bs.SiwBenchFailure, OSError) as exc:
        return fail(str(exc))
    if as_json:
        emit(report, sys.stdout)
    else:
        click.echo(bs.siw_text_report(report))
    return EXIT_OK
