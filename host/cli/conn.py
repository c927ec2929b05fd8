"""``rnic listen`` and ``rnic connect``: the two ends of an MPA connection on the software
RNIC (or a device kept in step with it), with the peer's transfers serviced or run."""

import json
import sys

import click

from rnic.host.cli.common import (EXIT_FAILURE, EXIT_OK, Hex, UInt, conn_options, conn_params,
                                  emit, event_text, fail, negotiated_text, open_device_or_fail,
                                  OutputPath, pcap_wrap)

__all__ = ["listen", "connect"]


def _host_port(ctx, param, value):
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:7000)")
    return host.strip("[]"), int(port)


def _pcap_path(path, n):
    """The pcap file of the ``n``-th connection (1-based): FILE, then FILE-2.ext, FILE-3.ext ..."""
    if n <= 1:
        return path
    import os
    root, ext = os.path.splitext(path)
    return f"{root}-{n}{ext}"


# -- rnic listen ----------------------------------------------------------------------------

# rnic.host.net.listener.DEFAULT_MAX_HALF_OPEN (not imported: `rnic --help` imports no net stack).
_MAX_HALF_OPEN = 64


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), required=True,
              help="TCP port to listen on (0: any free port; the first line says which).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@conn_options
@click.option("--reject", is_flag=True, help="Answer every MPA Request with a Reject (R=1).")
@click.option("--stag", type=UInt(32, "STag"), default="0x1000", show_default=True,
              help="STag of the region exposed to the peer's RDMA Writes and Reads.")
@click.option("--region-size", type=UInt(32, "size"), default="65536", show_default=True,
              help="Octets of the exposed region (0: no region).")
@click.option("--region-to", type=UInt(64, "TO"), default="0", show_default=True,
              help="TO of the region's first octet.")
@click.option("--region-data", type=Hex(), default="",
              help="Initial contents of the region (hex), e.g. for the peer to read.")
@click.option("--recv-size", type=UInt(32, "size"), default="65536", show_default=True,
              help="Octets of each receive buffer (one per inbound Send).")
@click.option("--recv-count", type=click.IntRange(1, 4096), default=16, show_default=True,
              help="Receive buffers kept posted (each one is reposted when it fills).")
@click.option("--idle-timeout", type=click.FloatRange(0.1, None), default=None,
              help="Close a connection after this many idle seconds (default: never).")
@click.option("--max-half-open", type=click.IntRange(1, None), default=_MAX_HALF_OPEN,
              show_default=True,
              help="MPA negotiations in progress at once (accepted, Request not yet answered); "
                   "one more socket is closed at once, with a line on stderr. Each lasts at "
                   "most --timeout s: a real setup takes one round trip, so 64 is far above "
                   "what honest peers need at once, and caps what silent or slow peers cost "
                   "(64 threads and sockets).")
@click.option("--max-connections", type=click.IntRange(1, None), default=None,
              help="Established connections at once; a Request over it gets an MPA Reject "
                   "and a line on stderr (default: the device's connection contexts with "
                   "--device, else no limit).")
@click.option("--once", is_flag=True, help="Exit after the first connection.")
@click.option("--pcap", "pcap_file", type=OutputPath(), default=None,
              help="Write each connection's TCP traffic to this pcap file (the 2nd connection "
                   "to FILE-2.EXT, ...).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
def listen(port, host, rev, ird, ord_, rtr, markers, crc, private_data, device, timeout, reject,
           stag, region_size, region_to, region_data, recv_size, recv_count, idle_timeout,
           max_half_open, max_connections, once, pcap_file, as_json):
    """Accept MPA connections and service the peer's transfers.

    Every accepted connection negotiates concurrently, within its own
    --timeout, and is then served in its own thread: a silent, slow or idle
    peer delays no one else. For each: the MPA Request is answered (or
    rejected with --reject), the negotiated parameters are printed, and the
    software RNIC takes the connection: receive buffers for the peer's
    Sends, a region (--stag, --region-size, --region-to, --region-data) of
    its own for the peer's RDMA Writes and Reads, Read Responses within IRD.
    Every completion and event is printed (with --json one JSON object per
    line: listening, connected, rejected, setup_failed, refused, completion,
    remote_write, remote_read, terminate_sent, terminate_received, error,
    closed; all but the first carry the connection's "peer"). A validation
    error is answered with a Terminate. With --device each live connection
    has its own connection id on the device (in its "connected" event).

    Caps: a socket beyond the half-open cap is closed unread; a Request
    beyond the connection cap gets an MPA Reject. Either prints one line on
    stderr (and a "refused" event with --json).

    Exit status with --once: 0 when the connection closed cleanly or was
    rejected as asked, 1 when it ended with an error or Terminate.

    \b
    Examples:
      rnic listen --port 7000
      rnic listen --port 7000 --markers --region-data 00112233 --once --json
      rnic listen --port 7000 --reject --private-data 6e6f
      rnic listen --port 0 --device model --json     # driver sequences on the model
      rnic listen --port 7000 --timeout 2 --max-half-open 16 --idle-timeout 60
      rnic listen --port 7000 --device tcp:127.0.0.1:7200   # a NIC listens with its own TCP
    """
    import socket
    import threading
    from rnic.host.net import nic_tcp
    from rnic.host.net.listener import Listener

    if region_data and len(region_data) > region_size:
        raise click.UsageError(f"--region-data has {len(region_data)} octets, more than "
                               f"--region-size {region_size}")
    params = conn_params(rev=rev, ird=ird, ord=ord_, rtr=rtr,
                         markers=markers, crc=crc, private_data=private_data, timeout=timeout)
    out = sys.stdout
    command = click.get_current_context().command_path      # for the other threads' lines
    lock = threading.Lock()                  # one line at a time from the connection threads

    def emit_event(obj):
        if as_json:
            line = json.dumps(obj)
        else:
            text = event_text(obj) if obj["event"] in (
                "completion", "remote_write", "remote_read", "terminate_sent",
                "terminate_received", "error", "closed") else None
            if text is None:
                return
            line = ("  " if obj["event"] != "closed" else "") + text
        with lock:
            click.echo(line, file=out)

    def say(text):
        with lock:
            click.echo(text, file=out)

    def refused(r):
        option = "--max-half-open" if r.reason == "half_open" else "--max-connections"
        with lock:
            click.echo(f"{command}: {r.text} ({option} {r.limit})", err=True)
        if as_json:
            emit_event(r.to_json())

    serve = dict(stag=stag, region_size=region_size, region_to=region_to,
                 region_data=region_data, recv_size=recv_size, recv_count=recv_count,
                 idle_timeout=idle_timeout)
    dev, status = open_device_or_fail(device)
    if status is not None:
        return status
    try:
        if dev is not None:
            dev.reset()
            contexts = dev.identity.connections
            if max_connections is not None:
                contexts = min(contexts, max_connections)
        else:
            contexts = max_connections
        try:
            # a NIC with TCP in gateware listens itself (its connections' MPA setup through
            # its stream port, rnic.host.net.nic_tcp)
            srv = (nic_tcp.NicListening(dev, port) if nic_tcp.has_tcp(dev)
                   else socket.create_server((host, port)))
        except OSError as e:
            return fail(f"cannot listen on {host}:{port}: {e}")
        results = []

        def handle(acc):
            try:
                status = _listen_handle(acc, dev, emit_event, say, as_json, serve)
            except Exception as e:       # e.g. the device failed: this connection only
                with lock:
                    click.echo(f"{command}: error: connection from {acc.peer}: {e}", err=True)
                status = EXIT_FAILURE
            results.append(status)

        def pcap_wrapper(sock, index):
            return pcap_wrap(_pcap_path(pcap_file, index), active=False)(sock)
        wrap = pcap_wrapper if pcap_file else None
        with srv:
            bound = srv.getsockname()[1]
            if as_json:
                emit_event({"event": "listening", "host": host, "port": bound})
            else:
                say(f"listening on {host}:{bound}")
            lst = Listener(srv, params, handler=handle, reject=reject,
                           max_half_open=max_half_open, contexts=contexts, wrap=wrap,
                           on_refused=refused, once=once)
            lst.serve()                 # until killed; with --once until the first outcome
            lst.join()
        return results[0] if results else EXIT_OK
    finally:
        if dev is not None:
            dev.close()


def _listen_handle(acc, dev, emit_event, say, as_json, serve):
    """One finished MPA setup of ``rnic listen`` (a Listener handler); returns its exit status."""
    from rnic.host.net.transfer import describe_error, negotiated_json
    peer = acc.peer
    if acc.outcome == "failed":
        if as_json:
            emit_event({"event": "setup_failed", "peer": peer, "error": acc.error.info.to_json()})
        else:
            say(f"connection from {peer}: MPA setup failed: {describe_error(acc.error.info)}")
        return EXIT_FAILURE
    neg = acc.neg
    if neg.rejected:
        if as_json:
            emit_event({"event": "rejected", "peer": peer,
                        "peer_private_data": neg.peer_private_data.hex(),
                        "negotiated": negotiated_json(neg)})
        else:
            say(f"connection from {peer}: rejected (R=1), peer private data "
                f"{neg.peer_private_data.hex() or '-'}")
        return EXIT_OK
    return _listen_serve(acc, dev, emit_event, say, as_json, **serve)


def _listen_serve(acc, dev, emit_event, say, as_json, *, stag, region_size, region_to,
                  region_data, recv_size, recv_count, idle_timeout):
    """Serve one established connection of ``rnic listen`` until it closes; its exit status."""
    from rnic.host.net.transfer import device_lock, make_datapath, negotiated_json, \
        serve_connection
    neg, peer = acc.neg, acc.peer
    info = negotiated_json(neg)
    dp = make_datapath(neg, dev, conn=acc.conn, first_fpdu_timeout=None)
    try:
        region = None
        if region_size:
            dp.register_region(stag, region_size, to=region_to, data=region_data or None)
            region = {"stag": stag, "to": region_to, "length": region_size}
        if as_json:
            obj = {"event": "connected", "peer": peer, "negotiated": info, "region": region}
            if dev is not None:
                with device_lock(dev):
                    obj["device"] = {"spec": dev.spec, **dev.identity.to_json(),
                                     "connection": dev.connection(acc.conn)}
            emit_event(obj)
        else:
            text = f"connection from {peer}: {negotiated_text(info)}"
            if region:
                text += (f"\n  region: STag {stag:#x}, TO {region_to:#x}, "
                         f"{region_size} octets")
            say(text)

        def emit_tagged(obj):
            # Connections run side by side: every line says whose it is.
            obj = {"event": obj["event"], "peer": peer, **obj}
            if obj["event"] == "closed" and dev is not None:
                with device_lock(dev):
                    obj["device"] = dev.status()
            emit_event(obj)

        err = serve_connection(dp, emit_tagged, recv_size=recv_size, recv_count=recv_count,
                               idle_timeout=idle_timeout)
    finally:
        dp.close()
    return EXIT_FAILURE if err is not None else EXIT_OK


# -- rnic connect ---------------------------------------------------------------------------

class _OrderedCommand(click.Command):
    """A command that records the order of its options in ``ctx.meta["rnic.order"]``."""

    def make_parser(self, ctx):
        parser = super().make_parser(ctx)
        parse = parser.parse_args

        def parse_args(args):
            opts, largs, order = parse(args)
            ctx.meta["rnic.order"] = [p.name for p in order]
            return opts, largs, order

        parser.parse_args = parse_args
        return parser


def _transfers(ctx, send, write, read, stag, to):
    """The transfers in command-line order; --stag/--to bind to the --write/--read before them."""
    from rnic.host.net.transfer import Transfer
    values = {"send": iter(send), "write": iter(write), "read": iter(read),
              "stag": iter(stag), "to": iter(to)}
    transfers, defaults, last = [], {}, None
    explicit = {}
    for name in ctx.meta.get("rnic.order", []):
        if name not in values:
            continue
        v = next(values[name])
        if name == "send":
            transfers.append(Transfer("send", data=v))
        elif name == "write":
            last = Transfer("write", data=v)
            transfers.append(last)
        elif name == "read":
            last = Transfer("read", length=v)
            transfers.append(last)
        elif last is None:
            if name in defaults:
                raise click.UsageError(f"--{name} given twice before any --write/--read")
            defaults[name] = v
        else:
            key = (id(last), name)
            if key in explicit:
                raise click.UsageError(f"--{name} given twice for --{last.op}")
            explicit[key] = True
            setattr(last, name, v)
    for t in transfers:
        if t.op == "send":
            continue
        if (id(t), "stag") not in explicit:
            if "stag" not in defaults:
                raise click.UsageError(f"--{t.op} needs --stag (the peer's STag)")
            t.stag = defaults["stag"]
        if (id(t), "to") not in explicit:
            t.to = defaults.get("to", 0)
    return transfers


@click.command(cls=_OrderedCommand)
@click.argument("address", metavar="HOST:PORT", callback=_host_port)
@click.option("--p2p", is_flag=True, help="Ask for the peer-to-peer model (RFC 6581 RTR; rev 2).")
@conn_options
@click.option("--send", multiple=True, type=Hex(), help="Send these octets (hex). Repeatable.")
@click.option("--write", multiple=True, type=Hex(),
              help="RDMA Write these octets (hex) to --stag/--to. Repeatable.")
@click.option("--read", multiple=True, type=UInt(32, "length"),
              help="RDMA Read this many octets from --stag/--to. Repeatable.")
@click.option("--stag", multiple=True, type=UInt(32, "STag"),
              help="The peer's STag of the --write/--read before it (before any: the default).")
@click.option("--to", multiple=True, type=UInt(64, "TO"),
              help="The peer's TO of the --write/--read before it (default 0).")
@click.option("--pcap", "pcap_file", type=OutputPath(), default=None,
              help="Write the connection's TCP traffic to this pcap file.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def connect(ctx, address, p2p, rev, ird, ord_, rtr, markers, crc, private_data, device, timeout,
            send, write, read, stag, to, pcap_file, as_json):
    """Open an MPA connection to HOST:PORT and run transfers on it.

    On a NIC with TCP in gateware (--device tcp: of `rnic nic-sim`, or a
    board) the NIC opens the TCP connection, MPA is negotiated through its
    stream port, and its core moves every octet of the transfers.

    Prints the negotiated parameters, then runs the transfers in the order
    given (--send, --write, --read; --stag and --to belong to the --write or
    --read before them), prints each result (read data in hex), and closes
    the connection gracefully (a Terminate the peer sends is reported).

    Exit status: 0 all transfers succeeded; 1 the connection was rejected
    or failed, or a transfer failed (one error line on stderr with the MPA
    or Terminate error); 2 usage.

    \b
    Examples:
      rnic connect 127.0.0.1:7000 --send 68656c6c6f
      rnic connect 127.0.0.1:7000 --write deadbeef --stag 0x1000 --to 16 \\
                                  --read 4 --stag 0x1000 --to 16
      rnic connect 127.0.0.1:7000 --p2p --rtr write --markers --json
      rnic connect 169.254.7.1:7000 --send 6869 --device tcp:127.0.0.1:7200  # a NIC's TCP
    """
    from rnic.host.driver.tcp_regs import TcpConnectError
    from rnic.host.net import cm, nic_tcp
    from rnic.host.net.transfer import describe_error, make_datapath, negotiated_json, run_transfers

    transfers = _transfers(ctx, send, write, read, stag, to)
    params = conn_params(rev=rev, ird=ird, ord=ord_, rtr=rtr,
                         p2p=p2p, markers=markers, crc=crc, private_data=private_data,
                         timeout=timeout)
    host, port = address
    peer = f"{host}:{port}"
    out = sys.stdout
    result = {"ok": False, "peer": peer, "negotiated": None, "transfers": [], "events": [],
              "error": None}

    def finish(status, error_line=None):
        if as_json:
            emit(result, out)
        if error_line:
            fail(error_line)
        return status

    dev, status = open_device_or_fail(device)
    if status is not None:
        return status
    try:
        if dev is not None:
            dev.reset()
        try:
            if nic_tcp.has_tcp(dev):
                # the NIC's own TCP: MPA through its stream port, then the core alone
                neg, _ = nic_tcp.nic_connect(dev, host, port, params)
            elif pcap_file:
                from rnic.host.apps.rping import connect_retry
                neg = connect_retry((host, port), params,
                                    wrap=pcap_wrap(pcap_file, active=True), send_rtr=False)
            else:
                neg = cm.connect((host, port), params, send_rtr=False)   # the data path sends the RTR
        except cm.MpaRejected as e:
            result["error"] = e.info.to_json()
            result["rejected"] = True
            result["peer_private_data"] = e.frame.private_data.hex() if e.frame else ""
            if not as_json:
                click.echo(f"rejected by {peer}, peer private data "
                           f"{result['peer_private_data'] or '-'}", file=out)
            return finish(EXIT_FAILURE, f"rejected by {peer} ({describe_error(e.info)})")
        except cm.MpaSetupError as e:
            result["error"] = e.info.to_json()
            return finish(EXIT_FAILURE, f"MPA setup with {peer} failed: {describe_error(e.info)}")
        except (nic_tcp.NicTcpError, TcpConnectError) as e:
            result["error"] = {"text": str(e)}
            return finish(EXIT_FAILURE, f"TCP connection to {peer} failed: {e}")
        result["negotiated"] = negotiated_json(neg)
        if not as_json:
            click.echo(f"connected to {peer}: {negotiated_text(result['negotiated'])}", file=out)
        dp = make_datapath(neg, dev)
        try:
            result["transfers"] = run_transfers(dp, transfers, timeout=timeout)
        finally:
            dp.close()
        events = [ev.to_json() for ev in dp.poll_events()]
        result["events"] = [e for e in events if e["event"] != "closed"]
        if dev is not None:
            result["device"] = dev.status()
        failed = [r for r in result["transfers"] if r["status"] != "success"]
        result["error"] = dp.error.to_json() if dp.error is not None else None
        result["ok"] = not failed and dp.error is None
        if not as_json:
            for t, r in zip(transfers, result["transfers"]):
                line = f"{t.describe()}: {r['status']}"
                if "data" in r:
                    line += f": {r['data']}"
                click.echo(line, file=out)
            for e in result["events"]:
                click.echo(event_text(e), file=out)
        if result["ok"]:
            return finish(EXIT_OK)
        if dp.error is not None:
            term = next((e for e in result["events"] if e["event"].startswith("terminate")), None)
            what = {"terminate_received": "Terminate received",
                    "terminate_sent": "Terminate sent"}.get(term["event"] if term else None,
                                                            "connection failed")
            return finish(EXIT_FAILURE, f"{what}: {describe_error(dp.error)}")
        r = failed[0]
        return finish(EXIT_FAILURE, f"{r['op']} wr_id {r['wr_id']} {r['status']}")
    finally:
        if dev is not None:
            dev.close()
