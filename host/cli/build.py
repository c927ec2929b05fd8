"""``rnic build``: a bitstream with the YoWASP tools, and its fmax and resource report."""

import sys

import click

from rnic.host.cli.common import EXIT_FAILURE, EXIT_OK, emit, fail

__all__ = ["build_cmd"]


#: Boards of ``rnic build`` (the keys of rnic.hdl.top.boards.BOARDS; kept here so that the CLI
#: starts without importing Amaranth; tests check that the two agree).
_BOARD_NAMES = ("versa_ecp5", "ecpix5", "ecpix5_45")

#: The board of ``rnic build`` unless told (rnic.host.tools.build.DEFAULT_BOARD, kept here for
#: the same reason).
_DEFAULT_BOARD = "ecpix5"

#: Cores of ``--core``: rnic.host.tools.build.CORES, then the blocks built alone
#: (rnic.hdl.top.cores.BLOCKS), kept here for the same reason (tests check them).
_CORE_NAMES = ("rnic", "framer", "ddp_rx", "ddp_tx", "mpa_rx", "mpa_tx", "tcp_rx", "tcp_table",
               "tcp_tx", "tcp_engine", "tcp_rx_path", "tcp_offload")

#: Tops of ``--top`` (rnic.host.tools.build.TOPS, kept here for the same reason).
_TOP_NAMES = ("nic", "core", "harness", "ethernet")

#: Placers of ``--placer`` (rnic.host.tools.build.PLACERS, kept here for the same reason).
_PLACER_NAMES = ("static", "heap")


def _int_list(ctx, param, value):
    try:
        items = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma list of integers") from None
    if not items:
        raise click.BadParameter("empty list")
    return items


def _seed_list(ctx, param, value):
    if value is None:
        return None
    from rnic.host.tools.build import parse_seeds
    try:
        return parse_seeds(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _progress_printer():
    """Progress lines on stderr when it is a terminal; nothing when piped."""
    if not sys.stderr.isatty():
        return None
    import time as _time
    start = _time.monotonic()

    def say(text):
        click.echo(f"[{_time.monotonic() - start:6.0f} s] {text}", err=True)
    return say


@click.command("build")
@click.option("--board", type=click.Choice(_BOARD_NAMES), default=_DEFAULT_BOARD,
              show_default=True,
              help="Target board (amaranth-boards platform): ecpix5, the ECPIX-5 with the "
                   "LFE5UM5G-85F, has room for the whole NIC (TCP and 128 KiB of host memory "
                   "included); versa_ecp5 and ecpix5_45 (45F devices) take the NIC without "
                   "TCP and the Ethernet top.")
@click.option("--width", type=click.Choice(["4", "8", "16", "32"]), default=None,
              help="Datapath width W in octets.  [default: 4 with --top nic or ethernet, "
                   "else 8]")
@click.option("--connections", type=click.IntRange(1, 65535), default=16, show_default=True,
              help="Connection contexts.")
@click.option("--freq", type=click.FloatRange(10, 400), default=None,
              help="Core clock target in MHz (made by the PLL; the timing constraint).  "
                   "[default: 83.33 with --top nic, else 125]")
@click.option("--baud", type=click.IntRange(1200, 12_000_000), default=115200, show_default=True,
              help="UART rate of the register bridge.")
@click.option("--core", "core", type=click.Choice(_CORE_NAMES), default="rnic", show_default=True,
              help="rnic: the RNIC core (RnicCore); framer: a small core (register bank + MPA TX "
                   "framer) that builds in minutes; ddp_rx, ddp_tx, mpa_rx, mpa_tx: that block "
                   "of the core alone, tcp_rx, tcp_table, tcp_tx, tcp_engine, tcp_rx_path, "
                   "tcp_offload: the TCP receive parser, connection table, frame builder, "
                   "event engine, whole receive path or whole engine alone (with --top "
                   "harness), to see what each costs.")
@click.option("--top", type=click.Choice(_TOP_NAMES), default=None,
              help="nic: the NIC (RGMII port 0, MAC, ARP/IPv4/ICMP, TCP where it fits, the "
                   "RNIC core, host memory, UART register bridge, LEDs); core: the RNIC core "
                   "with the UART bridge and a traffic loopback, no network; harness: the core "
                   "alone in a benchmark harness; ethernet: the Ethernet bring-up top (RGMII, "
                   "MAC, ARP and ping in gateware, no core: --core, --connections and --baud "
                   "do not apply).  [default: nic; core with --core framer, harness with a "
                   "block of the core]")
@click.option("--tcp/--no-tcp", default=None,
              help="With --top nic: the NIC with its TCP engine (TcpOffload between the "
                   "network layer and the IPv4 send path, its send rings in block RAM).  "
                   "[default: on the ecpix5, off on the 45F boards]")
@click.option("--memory", "memory_kib", type=click.Choice(["0", "4", "8", "16", "32", "64",
                                                           "128"]),
              default=None, metavar="KIB",
              help="With --top nic: KiB of on-chip host memory behind the core (registered "
                   "regions, receive buffers; the host reaches it through the UART bridge), "
                   "0 for none.  [default: 128 on the ecpix5, 0 on the 45F boards]")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=1, show_default=True,
              help="nextpnr placement seed.")
@click.option("--seeds", callback=_seed_list, metavar="SEEDS",
              help="Place at each of these seeds first (e.g. 1-6 or 1,4,9; --place-only "
                   "builds in OUT/seed-N, as many at once as there are CPUs), then build the "
                   "one with the shortest placed wire length: the seeds spread by 5-8 % and a "
                   "congested design routes at some and not at others. With --place-only, "
                   "only the sweep.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Directory for the products (default build/<board>-w<W>-c<N>-<top>; "
                   "with --sweep build/sweep-<board>).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the report).")
@click.option("--allow-timing-fail", is_flag=True,
              help="Exit 0 even if a clock misses its constraint (the report says so).")
@click.option("--paths", type=click.IntRange(0, 1000), default=10, show_default=True,
              help="Failing paths of the core clock to list (worst first, one line per start "
                   "and end register), from nextpnr's SDF.")
@click.option("--place-only", is_flag=True,
              help="Stop after placement (minutes, not the better part of an hour): no "
                   "routing, no bitstream; report the placement's wire length, in all and by "
                   "block, and nextpnr's fmax estimate before routing. For comparing seeds "
                   "and changes by how well they will route.")
@click.option("--placer", type=click.Choice(_PLACER_NAMES), default=None,
              help="nextpnr's placer: static (electrostatic, then annealing) or heap "
                   "(analytic, then annealing; nextpnr's own default). Compare them with "
                   "--place-only: the wire length says which will route.  [default: static "
                   "with --top nic or core, else heap]")
@click.option("--nextpnr-opts", default="", metavar="OPTS",
              help="Extra nextpnr-ecp5 options (e.g. \"--router router2 --tmg-ripup\").")
@click.option("--stall-minutes", type=click.FloatRange(0, 24 * 60), default=20,
              show_default=True,
              help="Stop place and route when nextpnr's router has not reduced the arcs left "
                   "to route for this many minutes (a design too full to route at this "
                   "placement); 0: never.")
@click.option("--documented", is_flag=True,
              help="Run every rnic build command that the README and docs/*.md print, as "
                   "written (two at a time, products in OUT, default build/documented), and "
                   "print the table of their figures; exit 1 if one misses timing. The other "
                   "options do not apply.")
@click.option("--update-docs", is_flag=True,
              help="With --documented: write the table into docs/build.md.")
@click.option("--sweep", is_flag=True,
              help="Benchmark: the core alone at W = 4, 8, 16 and 16, 1024 connections; writes "
                   "sweep.md and sweep.json (ignores --width/--connections/--top).")
@click.option("--sweep-widths", default="4,8,16", show_default=True, callback=_int_list,
              help="Widths of --sweep.")
@click.option("--sweep-connections", default="16,1024", show_default=True, callback=_int_list,
              help="Connection counts of --sweep.")
def build_cmd(board, width, connections, freq, baud, core, top, tcp, memory_kib, seed, seeds,
              out_dir, as_json,
              allow_timing_fail, paths, place_only, placer, nextpnr_opts, stall_minutes,
              documented, update_docs, sweep, sweep_widths, sweep_connections):
    """Build a bitstream with Yosys, nextpnr-ecp5 and ecppack (from PyPI) and report fmax and resources.

    Elaborates a top (the NIC unless --top or --core say otherwise), runs Amaranth's build
    script with the YoWASP tools of this environment, and reports per clock
    domain the fmax against the constraint, LUT4/FF/block RAM/DSP use and
    share of the device, and the seconds per stage. Exits 1 when timing is
    not met, unless --allow-timing-fail. Progress goes to stderr on a
    terminal. The bitstream is OUT/top.bit; OUT/report.json holds the report.

    \b
    Examples:
      rnic build                                       # the NIC on the ECPIX-5 85F, TCP and all
      rnic build --board versa_ecp5 --top nic          # the NIC without TCP (what fits a 45F)
      rnic build --board ecpix5 --width 8 --top core   # the core: W=8, 16 connections, 125 MHz
      rnic build --board versa_ecp5 --top ethernet     # Ethernet bring-up on the Versa
      rnic build --top core --width 8 --connections 1024 --freq 156.25 --allow-timing-fail
      rnic build --top harness --width 16 --out /tmp/w16  # the core alone
      rnic build --top harness --core ddp_rx --allow-timing-fail  # one block alone
      rnic build --top ethernet --json --allow-timing-fail     # RGMII + MAC + ARP/ping, W=4
      rnic build --top core --freq 156.25 --paths 30 --allow-timing-fail  # fails at the goal
      rnic build --place-only --seed 2                 # will it route? wire length by block
      rnic build --place-only --placer static          # the other placer's wire length
      rnic build --seeds 1-6 --allow-timing-fail       # route the best placement of six
      rnic build --sweep                               # benchmark table (takes a while)
      rnic build --documented --update-docs            # every build the docs print, as written
    """
    from rnic.host.tools.build import (BuildConfig, BuildError, TimingFailure,
        ToolMissing, build, build_best_seed, sweep as run_sweep)
    say = _progress_printer()
    if update_docs and not documented:
        raise click.BadParameter("--update-docs goes with --documented",
                                 param_hint="--update-docs")
    if documented:
        return _documented(out_dir, as_json, update_docs, say)
    if sweep and place_only:
        raise click.BadParameter("--sweep builds bitstreams; it has no --place-only",
                                 param_hint="--place-only")
    if seeds is not None and sweep:
        raise click.BadParameter("--sweep uses one seed (--seed)", param_hint="--seeds")
    ctx = click.get_current_context()
    if seeds is not None and ctx.get_parameter_source("seed") != click.core.ParameterSource.DEFAULT:
        raise click.BadParameter("give --seed or --seeds, not both", param_hint="--seeds")
    if sweep:
        unsupported = [w for w in sweep_widths if w not in (4, 8, 16, 32)]
        if unsupported:
            raise click.BadParameter(f"widths must be 4, 8, 16 or 32, not {unsupported[0]}",
                                     param_hint="--sweep-widths")
        try:
            rows, files = run_sweep(board=board, widths=sweep_widths,
                                    connections=sweep_connections,
                                    freq_mhz=freq, core=core,
                                    seed=seed, out_dir=out_dir, progress=say,
                                    nextpnr_opts=nextpnr_opts)
        except BuildError as e:
            return fail(str(e))
        if as_json:
            emit({"rows": rows, "files": files}, sys.stdout)
        else:
            click.echo(open(files["markdown"]).read().rstrip())
            click.echo(f"\nwritten: {files['markdown']}, {files['json']}")
        failed = [r for r in rows if "error" in r]
        return EXIT_FAILURE if failed else EXIT_OK
    from rnic.hdl.top import BLOCKS
    if top is None:
        top = "harness" if core in BLOCKS else "nic" if core == "rnic" else "core"
    if core in BLOCKS and top != "harness" and not sweep:
        raise click.BadParameter(f"{core} is a block of the core: build it alone with "
                                 "--top harness", param_hint="--core")
    if top == "nic" and core != "rnic":
        raise click.BadParameter(f"--top nic builds the RNIC core, not {core} (use --top core)",
                                 param_hint="--core")
    if tcp and top != "nic":
        raise click.BadParameter(f"--tcp is a part of the NIC top (--top nic), not of --top {top}",
                                 param_hint="--tcp")
    if memory_kib is not None and int(memory_kib) and top != "nic":
        raise click.BadParameter(f"host memory is a part of the NIC top (--top nic), not of "
                                 f"--top {top}", param_hint="--memory")
    cfg = BuildConfig(board=board, width=None if width is None else int(width),
                      connections=connections, freq_mhz=freq,
                      baud=baud, top=top, core=core, seed=seed, out_dir=out_dir,
                      allow_timing_fail=allow_timing_fail, nextpnr_opts=nextpnr_opts,
                      placer=placer, paths=paths, place_only=place_only,
                      stall_minutes=stall_minutes, tcp=tcp,
                      memory_kib=None if memory_kib is None else int(memory_kib))
    try:
        report = (build_best_seed(cfg, seeds, progress=say) if seeds is not None
                  else build(cfg, progress=say))
    except TimingFailure as e:
        if as_json:
            emit(e.report.to_json(), sys.stdout)
        else:
            click.echo("\n".join(e.report.summary_lines()))
        return fail(str(e))
    except ToolMissing as e:
        return fail(str(e))
    except BuildError as e:
        return fail(str(e))
    except ValueError as e:          # e.g. a PLL or UART rate that cannot be made
        return fail(str(e))
    if as_json:
        emit(report.to_json(), sys.stdout)
    else:
        click.echo("\n".join(report.summary_lines()))
    return EXIT_OK


def _documented(out_dir, as_json, update_docs, say):
    """``rnic build --documented``: every build command the docs print, and their figures."""
    from pathlib import Path

    from rnic.host.tools.build_docs import (FIGURES_PAGE, docs_root, documented_commands,
                                            figures_markdown, run_documented, write_figures)
    root = docs_root()
    commands = documented_commands(root)
    if not commands:
        return fail(f"no rnic build command in {root / 'README.md'} or {root / 'docs'}")
    out = Path(out_dir) if out_dir else Path.cwd() / "build" / "documented"
    rows = run_documented(commands, out_root=out, progress=say)
    if update_docs:
        write_figures(rows, root / FIGURES_PAGE)
    if as_json:
        emit({"rows": rows}, sys.stdout)
    else:
        click.echo(figures_markdown(rows).rstrip())
        if update_docs:
            click.echo(f"\nwritten: {root / FIGURES_PAGE}")
    missed = [r["command"] for r in rows if not r["met"]]
    if missed:
        return fail("timing not met or build failed: " + "; ".join(missed))
    return EXIT_OK
