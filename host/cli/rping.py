"""``rnic rping``: librdmacm's rping (either role) over an MPA connection."""

import json
import sys

import click

from rnic.host.cli.common import (EXIT_FAILURE, EXIT_OK, conn_options, conn_params, event_text,
                                  fail, negotiated_text, open_device_or_fail, OutputPath, pcap_wrap)

__all__ = ["rping"]


def _rping_size(ctx, param, value):
    from rnic.host.apps.rping import MAX_SIZE, MIN_SIZE
    if value is not None and not MIN_SIZE <= value <= MAX_SIZE:
        raise click.BadParameter(f"Invalid size {value} (valid range is {MIN_SIZE} to {MAX_SIZE})")
    return value


@click.command()
@click.option("-s", "server", is_flag=True, help="Server side.")
@click.option("-c", "client", is_flag=True, help="Client side.")
@click.option("-a", "addr", default=None,
              help="Address: the server's (client), the one to listen on (server; default all).")
@click.option("-p", "port", type=click.IntRange(0, 65535), default=7174, show_default=True,
              help="TCP port (server: 0 picks a free one).")
@click.option("-C", "count", type=click.IntRange(0, None), default=None,
              help="Client: ping count (0 or not given: forever). The server serves until "
                   "the client disconnects, as rping's does.")
@click.option("-S", "size", type=int, default=64, show_default=True, callback=_rping_size,
              help="Ping data size (26..65535).")
@click.option("-v", "verbose", is_flag=True, help="Display ping data.")
@click.option("-V", "validate", is_flag=True,
              help="Validate ping data (client: the echo against what it sent; server, an "
                   "extension: the read data against rping's pattern).")
@click.option("-d", "debug", is_flag=True, help="Debug lines on stderr (negotiation, progress).")
@click.option("--p2p", is_flag=True, help="Client: ask for the peer-to-peer model (RFC 6581 RTR).")
@conn_options
@click.option("--first-fpdu-delay", type=click.FloatRange(0, 10), default=0.1, show_default=True,
              help="Client: seconds between the MPA Reply and the first FPDU (Linux siw needs "
                   "a moment, see docs/interop.md).")
@click.option("--retry", type=click.FloatRange(0, 3600), default=0.0, show_default=True,
              help="Client: keep retrying the connection this many seconds while it is refused "
                   "or closed before the MPA Reply (a peer that is not listening yet).")
@click.option("--pcap", "pcap_file", type=OutputPath(), default=None,
              help="Write the connection's TCP traffic to this pcap file.")
@click.option("--json", "as_json", is_flag=True,
              help="JSON: one result object (the server prints a listening line first).")
def rping(server, client, addr, port, count, size, verbose, validate, debug, p2p, rev, ird, ord_,
          rtr, markers, crc, private_data, device, timeout, first_fpdu_delay, retry, pcap_file,
          as_json):
    """rping (librdmacm examples/rping.c) over an MPA connection, either role.

    Speaks rping's protocol: the client Sends its start buffer's {addr,
    rkey, size}, the server RDMA-Reads it and Sends "go ahead", the client
    Sends its rdma buffer's info, the server RDMA-Writes the data back and
    Sends "go ahead"; -C times. -v prints what rping prints ("ping data:
    rdma-ping-0: ABC...", the server "server ping data: ..."). The data
    path is the software RNIC, or the simulated hardware with --device sim.
    On a NIC with TCP in gateware (--device tcp: of `rnic nic-sim`, or a
    board) the connection is the NIC's own: it connects or listens on the
    network, MPA is negotiated through its stream port, and the core moves
    every octet after that.

    Exit status: 0 success (the server: the client disconnected after
    complete pings); 1 the connection or a transfer failed, a Terminate, a
    data mismatch (one error line on stderr); 2 usage.

    \b
    Examples:
      rnic rping -s -a 127.0.0.1 -p 7174 -v
      rnic rping -c -a 127.0.0.1 -p 7174 -C 3 -v -V
      rnic rping -c -a 127.0.0.1 -p 7174 -C 1 -S 4096 --p2p --rtr write --device sim
      rnic rping -s -p 7174 --device tcp:127.0.0.1:7200    # the simulated NIC's TCP
    """
    import socket
    from rnic.host.net import cm, nic_tcp
    from rnic.host.apps import rping as rp
    from rnic.host.net.transfer import describe_error, make_datapath, negotiated_json

    if server == client:
        raise click.UsageError("give exactly one of -s (server) and -c (client)")
    if client and not addr:
        raise click.UsageError("the client needs -a ADDR (the server's address)")
    if server and p2p:
        raise click.UsageError("--p2p is for the client (the server follows the Request)")
    role = "server" if server else "client"
    params = conn_params(rev=rev, ird=ird, ord=ord_, rtr=rtr, p2p=p2p, markers=markers, crc=crc,
                         private_data=private_data, timeout=timeout,
                         first_fpdu_delay=first_fpdu_delay if client else 0.0)
    out = sys.stdout
    result = {"ok": False, "role": role, "peer": None, "negotiated": None, "size": size,
              "count": 0, "pings": [], "events": [], "error": None}

    def say(text):
        if debug:
            click.echo(f"rping: {text}", err=True)

    def on_ping(n, text):
        result["pings"].append(text)
        result["count"] = n + 1
        if verbose and not as_json:
            click.echo(("server " if server else "") + f"ping data: {text}", file=out)
        say(f"ping {n} done")

    def finish(status, error_line=None, info=None):
        if info is not None:
            result["error"] = info.to_json()
        elif error_line and result["error"] is None:
            result["error"] = {"text": error_line}
        result["ok"] = status == EXIT_OK
        if as_json:
            click.echo(json.dumps({"event": "result", **result} if server else result), file=out)
        if error_line:
            fail(error_line)
        return status

    dev, status = open_device_or_fail(device)
    if status is not None:
        return status
    srv = None
    try:
        if dev is not None:
            dev.reset()
        if nic_tcp.has_tcp(dev):
            # the NIC's own TCP: MPA through its stream port, then the core alone
            neg, status = _nic_connection(dev, client, addr, port, params, result, say, as_json,
                                          out, finish)
            if neg is None:
                return status
        elif client:
            result["peer"] = f"{addr}:{port}"
            try:
                # the data path made next sends the RTR (the core's through its send queue)
                neg = rp.connect_retry((addr, port), params, retry=retry,
                                       wrap=pcap_wrap(pcap_file, active=True),
                                       on_retry=lambda text: say(f"retrying: {text}"),
                                       send_rtr=False)
            except cm.MpaRejected as e:
                return finish(EXIT_FAILURE, f"rejected by {addr}:{port} "
                              f"({describe_error(e.info)})", e.info)
            except cm.MpaSetupError as e:
                return finish(EXIT_FAILURE, f"MPA setup with {addr}:{port} failed: "
                              f"{describe_error(e.info)}", e.info)
        else:
            host = addr or "0.0.0.0"
            try:
                srv = socket.create_server((host, port))
            except OSError as e:
                return fail(f"cannot listen on {host}:{port}: {e}")
            bound = srv.getsockname()[1]
            if as_json:
                click.echo(json.dumps({"event": "listening", "host": host, "port": bound}),
                           file=out)
            say(f"listening on {host}:{bound}")
            out.flush()
            sock, peer = srv.accept()
            srv.close()
            result["peer"] = f"{peer[0]}:{peer[1]}"
            wrap = pcap_wrap(pcap_file, active=False)
            if wrap is not None:
                sock = wrap(sock)
            try:
                neg = cm.accept(sock, params)
            except cm.MpaSetupError as e:
                return finish(EXIT_FAILURE, f"MPA setup with {result['peer']} failed: "
                              f"{describe_error(e.info)}", e.info)
        result["negotiated"] = negotiated_json(neg)
        say(f"connected {result['peer']}: {negotiated_text(result['negotiated'])}")
        dp = make_datapath(neg, dev, **({"first_fpdu_timeout": None} if server else {}))
        err = None
        try:
            if client:
                rp.run_client(dp, count=count or 0, size=size, validate=validate,
                              on_ping=on_ping, timeout=timeout)
            else:
                rp.run_server(dp, size=size, validate=validate, on_ping=on_ping, timeout=timeout)
        except rp.RpingError as e:
            err = e
        finally:
            dp.close()
        events = [ev.to_json() for ev in dp.poll_events()]
        result["events"] = [e for e in events if e["event"] != "closed"]
        result["stats"] = dict(getattr(dp, "stats", {}))
        for e in result["events"]:
            say(event_text(e))
        if err is not None:
            term = next((e for e in result["events"] if e["event"].startswith("terminate")), None)
            line = str(err)
            if term is not None and err.info is not None:
                what = "Terminate received" if term["event"] == "terminate_received" \
                    else "Terminate sent"
                line = f"{what}: {describe_error(err.info)} ({err})"
            return finish(EXIT_FAILURE, line, err.info)
        if dp.error is not None and client:
            return finish(EXIT_FAILURE, f"connection failed: {describe_error(dp.error)}", dp.error)
        if dp.error is not None:
            result["teardown_error"] = dp.error.to_json()
        return finish(EXIT_OK)
    except KeyboardInterrupt:
        return finish(EXIT_FAILURE, "interrupted")
    finally:
        if srv is not None:
            srv.close()
        if dev is not None:
            dev.close()


def _nic_connection(dev, client, addr, port, params, result, say, as_json, out, finish):
    """``rnic rping`` on a NIC with TCP in gateware: ``(Negotiated, None)``, or ``(None, exit
    status)`` after the failure was reported."""
    from rnic.host.driver.tcp_regs import TcpConnectError
    from rnic.host.net import cm, nic_tcp
    from rnic.host.net.transfer import describe_error
    try:
        if client:
            result["peer"] = f"{addr}:{port}"
            neg, _ = nic_tcp.nic_connect(dev, addr, port, params)
        else:
            nic_tcp.nic_listen(dev, port)
            if as_json:
                click.echo(json.dumps({"event": "listening", "host": addr or "0.0.0.0",
                                       "port": port, "device": dev.spec}), file=out)
            say(f"listening on port {port} of {dev.spec}")
            out.flush()
            conn = nic_tcp.wait_accepted(dev, 10 ** 9)
            stream = nic_tcp.NicStream(dev, conn)
            result["peer"] = stream.peer()
            neg = nic_tcp.nic_accept(dev, conn, params)
    except cm.MpaRejected as e:
        return None, finish(EXIT_FAILURE, f"rejected by {result['peer']} "
                            f"({describe_error(e.info)})", e.info)
    except cm.MpaSetupError as e:
        return None, finish(EXIT_FAILURE, f"MPA setup with {result.get('peer')} failed: "
                            f"{describe_error(e.info)}", e.info)
    except (nic_tcp.NicTcpError, TcpConnectError) as e:
        return None, finish(EXIT_FAILURE, f"TCP connection to {result.get('peer')} failed: {e}")
    return neg, None
