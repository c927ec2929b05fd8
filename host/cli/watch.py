"""``rnic status --watch``: a device's counters and their rates, refreshed in place.

On a terminal the view is a ``rich`` table redrawn every interval (the device, its
addresses, the open connections with their TCP and RNIC states, then each counter with its
value and its rate per second since the last refresh); piped, it is one line per interval
(one JSON object with ``--json``), so that a script can follow a running NIC.
"""

from __future__ import annotations

import json
import time

__all__ = ["flat_counters", "snapshot", "watch", "tcp_connection_texts"]


def flat_counters(info):
    """The counters of a :meth:`rnic.host.driver.device.Device.status` result, by a name a
    reader knows, in one flat dict (the RNIC core's, then the network layer's and TCP's
    where the device has them)."""
    out = {f"rnic {name.replace('_', ' ')}": value for name, value in info["counters"].items()}
    net = info.get("network")
    if net is not None:
        out.update({"net frames in": net["rx_good"], "net frames dropped in":
                    sum(net["rx_drops"].values()), "net frames out": net["tx_frames"],
                    "net frames dropped out": net["tx_dropped"]})
    tcp = info.get("tcp")
    if tcp is not None:
        out.update({"tcp segments out": tcp["tx_segments"], "tcp sent again": tcp["retransmits"],
                    "tcp segments dropped": sum(tcp["drops"].values())})
    return out


def snapshot(info, before, seconds):
    """``{"counters": {...}, "rates": {...}}``: the counters now and their rates per second
    since ``before`` (the previous counters, ``seconds`` ago; None: no rates yet)."""
    counters = flat_counters(info)
    rates = {}
    if before is not None and seconds > 0:
        rates = {k: (v - before.get(k, v)) / seconds for k, v in counters.items()}
    return {"counters": counters, "rates": rates}


def tcp_connection_texts(info):
    """``{conn: text}`` of a status's open TCP connections: state, ports, peer and the
    RNIC core's state of the same id."""
    core = {c["conn"]: c["state"] for c in info["connections"]}
    return {c["conn"]: f"{c['state']}{' (echo)' if c['echo'] else ''} {c['local_port']} <- "
                       f"{c['remote_ip']}:{c['remote_port']}, rnic {core.get(c['conn'], 'IDLE')}"
            for c in (info.get("tcp") or {}).get("connections", [])}


def _connection_lines(info):
    tcp = tcp_connection_texts(info)
    return ([f"connection {conn}: tcp {text}" for conn, text in tcp.items()]
            + [f"connection {c['conn']}: rnic {c['state']}" for c in info["connections"]
               if c["conn"] not in tcp])


def _table(info, snap, interval):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text
    ident, net = info["identity"], info.get("network")
    head = [f"{info['device']}: RNIC map {ident['version']}, W={ident['width']}, "
            f"{'enabled' if info['enabled'] else 'disabled'}"]
    if net is not None:
        head.append(f"{net['ip']}/{net['prefix']}  mac {net['mac']}  gateway "
                    f"{net['gateway'] or 'none'}")
    head += _connection_lines(info) or ["no open connection"]
    table = Table(title=f"counters (every {interval:g} s; Ctrl-C ends)", title_justify="left")
    table.add_column("counter")
    table.add_column("value", justify="right")
    table.add_column("per second", justify="right")
    for name, value in snap["counters"].items():
        rate = snap["rates"].get(name)
        table.add_row(name, f"{value:,}", "" if rate is None else f"{rate:,.1f}")
    return Group(Text("\n".join(head)), table)


def _line(snap, elapsed):
    parts = [f"{name} {value}" + (f" ({snap['rates'][name]:+.1f}/s)" if snap["rates"] else "")
             for name, value in snap["counters"].items()]
    return f"{elapsed:.1f} s: " + ", ".join(parts)


def watch(device, *, interval, count=None, as_json=False, out, live=False,
          sleep=time.sleep, clock=time.monotonic):
    """Show ``device``'s status every ``interval`` seconds, ``count`` times (None: until
    interrupted): a live table when ``live``, else a line per refresh on ``out``."""
    before, then, start, shown = None, None, clock(), 0
    view = None
    if live:
        from rich.console import Console
        from rich.live import Live
        view = Live(console=Console(file=out), auto_refresh=False)
        view.start()
    try:
        while count is None or shown < count:
            if shown:
                sleep(interval)
            info = device.status()
            now = clock()
            snap = snapshot(info, before, 0 if then is None else now - then)
            before, then, shown = snap["counters"], now, shown + 1
            if view is not None:
                view.update(_table(info, snap, interval), refresh=True)
            elif as_json:
                out.write(json.dumps({"elapsed_s": round(now - start, 3), **snap,
                                      "connections": _connection_lines(info)}) + "\n")
            else:
                out.write(_line(snap, now - start) + "\n")
            out.flush()
    finally:
        if view is not None:
            view.stop()
