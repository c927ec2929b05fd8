"""``rnic perftest``: perftest's bandwidth tests with -R (``ib_send_bw``, ``ib_write_bw``,
``ib_read_bw``), either side; the protocol and the measurement are rnic.host.apps.perftest,
this module is its command line: the options, perftest's text output and the exit status.

Imported only when ``rnic perftest`` is used or listed (the application module brings the
network stack with it).
"""

import json
import sys

import click

from rnic.host.apps.perftest import (DEF_OUT_READS, DEF_RX_SEND, DEF_TX_BW, DEFAULT_PORT,
                                     DEFAULT_SIZE, MAX_SIZE, MIN_ITERS, RESULT_LINE,
                                     PerftestError, TestParams, format_report_line, mtu_octets,
                                     result_header, run_client, run_server)
from rnic.host.cli.common import EXIT_FAILURE, EXIT_OK, device_option, fail, open_device_or_fail

__all__ = ["perftest"]


# -- perftest's text output (the application emits events: dest, result, info) ----------------

def _emitter(as_json, p, role, out):
    def emit(kind, **kw):
        if as_json:
            return
        if kind == "dest":
            if role == "server":
                _banner(p, role, out)
            out(kw["local"].text("local"))
            out(kw["remote"].text("remote"))
            out(RESULT_LINE)
            out(result_header(p.report_gbits))
        elif kind == "result":
            out(format_report_line(kw["report"]))
        elif kind == "info":
            out(kw["text"])
    return emit


def _banner(p, role, out):
    names = {"send": "Send", "write": "RDMA_Write", "read": "RDMA_Read"}
    out(RESULT_LINE)
    out(f"                    {names[p.test]} BW Test")
    out(f" Number of qps   : 1\t\tTransport type : IW (rnic {role})")
    out(" Connection type : RC\t\tUsing SRQ      : OFF")
    if p.test == "send" and role == "server":
        out(f" RX depth        : {p.rx_depth}")
    else:
        out(f" TX depth        : {p.tx_depth}")
    out(f" CQ Moderation   : {p.cq_mod}")
    out(f" Mtu             : {mtu_octets(p.mtu)}[B]")
    if p.test == "read":
        out(f" Outstand reads  : {p.out_reads}")
    out(" rdma_cm QPs\t : ON")
    out(" Data ex. method : rdma_cm")
    out(RESULT_LINE)


# -- the click command ---------------------------------------------------------------------

@click.command("perftest", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("test", type=click.Choice(["send", "write", "read"]))
@click.argument("server", required=False)
@click.option("-p", "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT,
              show_default=True, help="Listen on / connect to this port (server: 0 = any).")
@click.option("-s", "--size", type=click.IntRange(1, MAX_SIZE), default=DEFAULT_SIZE,
              show_default=True, help="Message size.")
@click.option("-n", "--iters", type=click.IntRange(MIN_ITERS, 100_000_000), default=None,
              help="Iterations (default 5000; send 1000).")
@click.option("-a", "--all", "run_all", is_flag=True, help="Run sizes 2 .. 2^23.")
@click.option("-t", "--tx-depth", type=click.IntRange(1, 15000), default=DEF_TX_BW,
              show_default=True, help="Work requests outstanding.")
@click.option("-r", "--rx-depth", type=click.IntRange(1, 16384), default=DEF_RX_SEND,
              show_default=True, help="Receive queue depth of send (credit window).")
@click.option("-Q", "--cq-mod", type=click.IntRange(1, 1024), default=None,
              help="Completion every N work requests (default 100; 1 above 8 KiB).")
@click.option("-o", "--outs", "out_reads", type=click.IntRange(1, 0x3FFE), default=DEF_OUT_READS,
              show_default=True, help="Outstanding RDMA Reads (read: IRD/ORD of the test QP).")
@click.option("-N", "--noPeak", "no_peak", is_flag=True, help="Do not compute the peak BW.")
@click.option("--report_gbits", "--report-gbits", "report_gbits", is_flag=True,
              help="Report BW in Gb/sec instead of MB/sec (2^20 octets).")
@click.option("-F", "--CPU-freq", "cpu_freq", is_flag=True, help="Accepted (no effect here).")
@click.option("-R", "--rdma_cm", "rdma_cm", is_flag=True,
              help="Accepted: connections always go through MPA setup (rdma_cm's wire).")
@click.option("-d", "--ib-dev", "ib_dev", default=None, help="Accepted (no effect here).")
@click.option("--bind", "bind", default="127.0.0.1", show_default=True,
              help="Server: address to listen on.")
@device_option("The data path of the test connection: a device kept in step with the "
               "software RNIC, or one that moves the data itself (sim).")
@click.option("--crc/--no-crc", default=True, show_default=True, help="Ask for MPA CRCs.")
@click.option("--timeout", type=click.FloatRange(0.5, 3600), default=30.0, show_default=True,
              help="Seconds for each step (MPA setup, each exchange message, no progress).")
@click.option("--retry", type=click.FloatRange(0, 3600), default=30.0, show_default=True,
              help="Client: seconds to retry connecting while the server is not listening.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def perftest(test, server, port, size, iters, run_all, tx_depth, rx_depth, cq_mod, out_reads,
             no_peak, report_gbits, cpu_freq, rdma_cm, ib_dev, bind, device, crc, timeout,
             retry, as_json):
    """perftest bandwidth test (ib_send_bw / ib_write_bw / ib_read_bw with -R).

    Without SERVER: wait for one client (like `ib_write_bw -R`); with
    SERVER: connect to it (like `ib_write_bw -R SERVER`). Interoperates
    with perftest's -R mode (two rdma_cm connections: parameter exchange,
    then the test QP) and prints perftest's result table: #bytes
    #iterations BW peak BW average MsgRate. A write/read server prints
    the client's numbers, as perftest does.

    Exit status: 0 the test ran, 1 it failed (one error line on stderr),
    2 usage.

    \b
    Examples:
      rnic perftest write                         # server on 127.0.0.1:18515
      rnic perftest write 127.0.0.1 -s 4096 -n 100
      rnic perftest read 127.0.0.1 -p 18600 -s 65536 -n 50 --json
      rnic perftest send -p 0 --json              # first JSON line: the port
    """
    try:
        p = TestParams(test, size=size, iters=iters, tx_depth=tx_depth, rx_depth=rx_depth,
                       cq_mod=cq_mod, out_reads=out_reads, run_all=run_all,
                       report_gbits=report_gbits, no_peak=no_peak)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    role = "client" if server else "server"

    def out(line):
        click.echo(line)
        sys.stdout.flush()

    emit = _emitter(as_json, p, role, out)
    dev, status = open_device_or_fail(device)
    if status is not None:
        return status
    if dev is not None:
        from rnic.host.driver.device import DeviceError
        try:
            dev.reset()
        except (DeviceError, OSError) as e:
            dev.close()
            return fail(str(e))
    try:
        if role == "server":
            def listening(bound):
                if as_json:
                    out(json.dumps({"event": "listening", "host": bind, "port": bound}))
                else:
                    out("\n************************************\n"
                        "* Waiting for client to connect... *\n"
                        "************************************")
                    out(f" (rnic: listening on {bind}:{bound})")
            result = run_server(bind, port, p, device=dev, crc=crc, timeout=timeout,
                                emit=emit, on_listening=listening)
        else:
            if not as_json:
                _banner(p, role, out)
            result = run_client(server, port, p, device=dev, crc=crc, timeout=timeout,
                                retry=retry, emit=emit)
    except PerftestError as e:
        if as_json:
            out(json.dumps({"ok": False, "test": test, "role": role, "error": str(e)}))
        click.echo(f"rnic perftest: error: {e}", err=True)
        return EXIT_FAILURE
    finally:
        if dev is not None:
            dev.close()
    if as_json:
        out(json.dumps(result))
    else:
        out(RESULT_LINE)
    return EXIT_OK
