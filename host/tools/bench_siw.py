"""``rnic bench siw``: Linux soft-iWARP (siw) against this project's RNICs, side by side.

siw runs in the siw VM of the ``siw-vm`` tool (kernel siw, rdma-core's ``rping``, perftest);
two columns, one VM boot each:

``software``
    The software RNIC (``--device none``): ``rnic perftest`` / ``rnic rping`` on the host,
    reached through qemu's user-mode networking (the guest's ``siw0`` on ``eth0``; the
    guest reaches the host's 127.0.0.1 as 10.0.2.2, the host the guest through a forwarded
    port), as in docs/interop.md.
``nic``
    The simulated NIC (:class:`rnic.host.apps.nic_sim.NicSim`, what ``rnic nic-sim`` runs)
    on the VM's virtual cable (``siw-vm run --wire``, the guest's ``siw1`` at 169.254.7.1,
    the NIC at 169.254.7.2): ``rnic perftest`` / ``rnic rping --device tcp:`` of it, so the
    NIC's TCP and RNIC core move every octet after MPA setup.

Figures per column
------------------
``perftest``
    siw's ``ib_write_bw -d siwN -R -s SIZE -n ITERS`` as the client against ``rnic perftest
    write -s SIZE -n ITERS`` as the server: the average and peak MB/s (2^20 octets per
    second) perftest printed, parsed with :func:`rnic.host.apps.perftest.parse_report_lines`.
    perftest times its RDMA Writes from the first post to the last completion, and siw
    completes a Write once its socket took the octets, so the figure is how fast the
    receiver drains siw's sockets.
``rping``
    ``rnic rping -c -C PINGS -S 64 -V`` against siw's ``rping -s`` in the guest: the mean
    wall time of one ping (the client's two Sends, the server's RDMA Read, its RDMA Write
    and its two go-ahead Sends), timed by the client's debug lines (``-d``, ``ping N
    done``) as they arrive: from the end of the first ping to the end of the last, over
    PINGS - 1 pings. Connection setup, the client's pause before its first FPDU and the
    first ping are not in it.

Checks: both ends exit 0; perftest printed one line of SIZE x ITERS and ``rnic perftest``'s
server received the same report; siw's buffer landed (non-zero octets; on the software RNIC
every Write's octets were counted); every ping's data on both sides is rping's pattern; on
the NIC, its core counted no CRC or marker error and the NIC sent no bad frame. A failure
raises :class:`SiwBenchFailure`; a missing or unprepared ``siw-vm`` :class:`SiwVmMissing`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from rnic.host.apps.nic_sim import NicSim
from rnic.host.apps.perftest import MIN_ITERS, parse_report_lines
from rnic.host.apps.rping import MAX_SIZE as RPING_MAX_SIZE
from rnic.host.apps.rping import MIN_SIZE as RPING_MIN_SIZE
from rnic.host.apps.rping import ping_buffer, ping_text
from rnic.host.driver.regs import Registers
from rnic.host.tools.bench_nic import LINE_HZ

__all__ = ["OutputLines", "stop_process", "COLUMNS", "DEFAULT_SIZE", "DEFAULT_ITERS", "DEFAULT_PINGS", "DEFAULT_PING_SIZE",
           "VARIANT", "SiwVmMissing", "SiwBenchFailure", "find_siw_vm", "check_prepared",
           "run_siw_bench", "siw_text_report"]

#: The columns, in the order they run: the software RNIC, the simulated NIC.
COLUMNS = ("software", "nic")
#: perftest's message size and count: 6.25 MiB, several times what siw's socket can buffer
#: (a Write completes once it is in the socket), which the simulated NIC takes about a minute
#: to move on a loaded 2-core machine (it runs at about 1/1000 of a board's speed there).
DEFAULT_SIZE, DEFAULT_ITERS = 65536, 100
#: rping's count and size (rping's default size).
DEFAULT_PINGS, DEFAULT_PING_SIZE = 50, 64
#: The siw build the VM boots (upstream siw, siw-vm's README "Variants").
VARIANT = "default"
#: perftest calibrates its clock against the system time and, under qemu without KVM on a
#: loaded machine, sometimes fails ("Can't produce a report", exit 1): nothing to do with
#: the peer, so the guest runs it again, up to this many times in all.
ATTEMPTS = 3
CLOCK_FAILURE = "produce a report"
#: Seconds the guest waits before running perftest again: the host starts the next server.
RETRY_PAUSE = 10
#: Seconds each step of ``rnic perftest`` / ``rnic rping`` may take (MPA setup, one
#: message, no progress); a simulated NIC behind a loaded machine needs minutes at worst.
STEP_TIMEOUT = 120
#: Seconds ``siw-vm run`` may run, boot included (its ``--timeout``).
VM_TIMEOUT = 900
#: Seconds for a command to start listening (its first line), the simulated NIC included.
READY_TIMEOUT = 120
#: The guest's rping port; the guest's addresses on user-net (eth0) and on the cable (eth1).
RPING_PORT = 7174
GUEST_USERNET, GUEST_WIRE = "10.0.2.15", "169.254.7.1"
#: The host's 127.0.0.1 seen from the guest (slirp), and the NIC's address on the cable.
HOST_FROM_GUEST, NIC_IP = "10.0.2.2", "169.254.7.2"
#: The first perftest port on the simulated NIC (perftest's default); attempt n uses +n.
NIC_PERFTEST_PORT = 18515

_MEASURES = {
    "perftest": "MB/s (2^20 octets/s) that siw's ib_write_bw -R client printed: SIZE-octet "
                "RDMA Writes from siw into the RNIC's buffer, timed by siw from its first post "
                "to its last completion (siw completes a Write once its socket took the "
                "octets)",
    "rping": "mean wall time of one rping round (two Sends, an RDMA Read and an RDMA Write "
             "by siw's server, two go-ahead Sends), rnic rping -c against siw's rping -s, "
             "from the end of the first ping to the end of the last, over PINGS - 1 pings "
             "(no connection setup, no first ping)",
}


class SiwVmMissing(RuntimeError):
    """The ``siw-vm`` tool is not found, or its VM is not prepared."""


class SiwBenchFailure(RuntimeError):
    """A run failed: a command exited with an error, or its data did not check."""


def find_siw_vm():
    """Where the ``siw-vm`` tool is: ``$SIW_VM``, ``../shared/tools/siw-vm/siw-vm`` beside the
    checkout, or ``siw-vm`` on PATH.

    Returns
    -------
    pathlib.Path
        The tool.

    Raises
    ------
    SiwVmMissing
        None of them exists.
    """
    env = os.environ.get("SIW_VM")
    if env:                           # (named: that one, or an error saying so)
        if not Path(env).is_file():
            raise SiwVmMissing(f"siw-vm not found: $SIW_VM is {env}, which is not a file")
        return Path(env)
    beside = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "siw-vm" / "siw-vm"
    if beside.is_file():
        return beside
    found = shutil.which("siw-vm")
    if found is None:
        raise SiwVmMissing(f"siw-vm not found (not $SIW_VM, not at {beside}, not on PATH); "
                           "set SIW_VM to the tool")
    return Path(found)


def check_prepared(*, variant=VARIANT):
    """Check that the siw VM can boot ``variant``.

    Parameters
    ----------
    variant : str
        A siw-vm variant (``default``, ``crc``, ...).

    Raises
    ------
    SiwVmMissing
        Its initramfs is not in the cache (``$SIW_VM_CACHE``, default ``/var/cache/siw-vm``):
        ``siw-vm prepare`` did not build it.
    """
    if not isinstance(variant, str) or not variant:
        raise ValueError(f"variant {variant!r} is not a siw-vm variant name")
    cache = Path(os.environ.get("SIW_VM_CACHE", "/var/cache/siw-vm"))
    ready = cache / "variants" / variant / "initramfs.cpio.gz"
    if not ready.is_file():
        raise SiwVmMissing(f"the siw VM is not prepared ({ready} missing; run: sudo siw-vm "
                           f"prepare --variant {variant})")


# -- processes and their output ---------------------------------------------------------------

class OutputLines:
    """The lines of a stream, each with the time it arrived, gathered by a thread (also the
    interop tests' reader of ``siw-vm run``)."""

    def __init__(self, stream):
        self.lines = []              # (monotonic time, line without its end)
        self.eof = False
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            with self._cond:
                self.lines.append((time.monotonic(), line.rstrip("\r\n")))
                self._cond.notify_all()
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    @property
    def text(self):
        with self._cond:
            return "\n".join(line for _, line in self.lines)

    def wait(self, done, timeout):
        """Wait until ``done(lines)`` holds (True) or the stream ends or ``timeout`` passes
        (False)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not done(self.lines):
                remaining = deadline - time.monotonic()
                if self.eof or remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.5))
            return True


def stop_process(proc, grace=10):
    """End ``proc`` (a :class:`subprocess.Popen`) if it runs: SIGTERM, SIGKILL after
    ``grace`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Proc:
    """A subprocess whose stdout (and stderr, kept apart unless ``merge``) are gathered."""

    def __init__(self, argv, *, merge=False):
        self.argv = [str(a) for a in argv]
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                                     text=True, errors="replace")
        self.out = OutputLines(self.proc.stdout)
        self.err = None if merge else OutputLines(self.proc.stderr)

    def finish(self, timeout):
        """Wait for the exit (killed after ``timeout`` seconds); the exit status."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        for lines in (self.out, self.err):
            if lines is not None:
                lines.wait(lambda _: False, 5.0)      # the rest of the output
        return self.proc.returncode

    def kill(self):
        stop_process(self.proc)

    def json_lines(self):
        """The stdout lines that are JSON objects."""
        return [json.loads(line) for _, line in self.out.lines if line.startswith("{")]

    def tail(self, n=15):
        """The last ``n`` lines of the output, for an error message."""
        text = "\n".join(lines.text for lines in (self.out, self.err) if lines is not None)
        return "\n".join(text.strip().splitlines()[-n:])


def _rnic(args):
    """``rnic ARGS`` of this installation in a subprocess."""
    return _Proc([sys.executable, "-m", "rnic.host.cli", *args])


def _first_json(proc, what):
    """The first JSON line of ``proc`` (a server's ``listening`` event)."""
    if not proc.out.wait(lambda lines: any(line.startswith("{") for _, line in lines),
                         READY_TIMEOUT):
        proc.kill()
        raise SiwBenchFailure(f"{what} did not start listening:\n{proc.tail()}")
    return proc.json_lines()[0]


def _free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- one column ---------------------------------------------------------------------------------

class _Column:
    """What differs between the columns: where siw and our RNIC meet.

    ``device``: the ``--device`` of our commands (None: the software RNIC); ``siw_dev``,
    ``guest_ip``: the guest's siw device and address facing us; ``host_ip``: our address
    seen from the guest; ``rping_target``: where our rping client connects; ``ports``: the
    perftest server's port per attempt; ``vm_args``: the networking options of siw-vm."""

    def __init__(self, name, *, device, siw_dev, guest_ip, host_ip, rping_target, ports,
                 vm_args):
        self.name, self.device, self.siw_dev = name, device, siw_dev
        self.guest_ip, self.host_ip, self.rping_target = guest_ip, host_ip, rping_target
        self.ports, self.vm_args = ports, vm_args

    @property
    def device_args(self):
        return ["--device", self.device] if self.device else []


def _guest_command(col, p):
    """The guest's shell command: perftest's client (again on a clock failure), then rping's
    server, with the markers the host waits for."""
    perftest = (f"ib_write_bw -d {col.siw_dev} -R -p $port -s {p['size']} -n {p['iters']} "
                f"{col.host_ip} >/tmp/pt 2>&1; rc=$?; cat /tmp/pt; echo PERFTEST_EXIT $rc")
    return (f"for port in {' '.join(map(str, col.ports))}; do {perftest}; "
            f"grep -q '{CLOCK_FAILURE}' /tmp/pt || break; sleep {RETRY_PAUSE}; done; "
            f"rping -s -a {col.guest_ip} -p {RPING_PORT} -S {p['ping_size']} -v & "
            "sleep 1; echo LISTENING; wait $!; echo RPING_EXIT $?")


def _start_vm(tool, col, p):
    return _Proc([tool, "run", "--variant", VARIANT, "--timeout", VM_TIMEOUT, *col.vm_args,
                  "--", _guest_command(col, p)], merge=True)


def _markers(lines, marker):
    return [line for _, line in lines if marker in line]


def _perftest(tool, col, p, say):
    """siw's ``ib_write_bw`` client against ``rnic perftest write``; ``(the VM, the figure)``
    (the VM goes on to rping's server)."""
    vm = None
    for attempt, port in enumerate(col.ports):
        server = _rnic(["perftest", "write", "-p", port, "-s", p["size"], "-n", p["iters"],
                        "--timeout", STEP_TIMEOUT, "--json", *col.device_args])
        try:
            _first_json(server, "rnic perftest write")
            if vm is None:
                if say:
                    say(f"{col.name}: booting the siw VM; ib_write_bw -d {col.siw_dev} -R "
                        f"-s {p['size']} -n {p['iters']} to rnic perftest write")
                vm = _start_vm(tool, col, p)
            ended = vm.out.wait(lambda lines: len(_markers(lines, "PERFTEST_EXIT")) > attempt,
                                VM_TIMEOUT)
            guest = vm.out.text.split("PERFTEST_EXIT")[attempt] if ended else vm.out.text
            again = ended and CLOCK_FAILURE in guest and attempt + 1 < len(col.ports)
            # (a server whose client gave up is of no use, and the guest's next attempt
            # comes in RETRY_PAUSE s; a good one waits at most PEER_CLOSE_WAIT for siw's FIN)
            rc = server.finish(timeout=STEP_TIMEOUT if ended and not again else 3)
        except BaseException:
            server.kill()
            if vm is not None:
                vm.kill()
            raise
        if again:
            if say:
                say(f"{col.name}: siw's perftest could not calibrate its clock; again")
            continue
        try:
            return vm, _perftest_figure(col, p, rc, server, vm, guest, attempt + 1)
        except SiwBenchFailure:
            vm.kill()
            raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _perftest_figure(col, p, rc, server, vm, guest, attempts):
    """Check one perftest run (see the module docstring); its figure."""
    def bad(why):
        return SiwBenchFailure(f"{col.name}: perftest {why}\nrnic perftest:\n{server.tail()}"
                               f"\nsiw VM:\n{vm.tail(25)}")
    status = re.findall(r"PERFTEST_EXIT (\d+)", vm.out.text)
    if not status or status[-1] != "0":
        raise bad("failed in the guest")
    results = server.json_lines()
    if rc != 0 or not results or not results[-1].get("ok"):
        raise bad(f"server failed (exit {rc})")
    result = results[-1]
    printed = parse_report_lines(guest)
    if [(r.size, r.iters) for r in printed] != [(p["size"], p["iters"])]:
        raise bad(f"printed {printed}, not one line of {p['size']} x {p['iters']}")
    ours = result.get("remote_report") or {}
    if (ours.get("bytes"), ours.get("iterations")) != (p["size"], p["iters"]) \
            or abs(ours.get("bw_average", -1) - printed[0].bw_avg) > 0.006:
        raise bad(f"server received the report {ours}, siw printed {printed[0]}")
    traffic = result["traffic"]
    if not traffic.get("nonzero"):
        raise bad("server's buffer holds no octet of siw's")
    if col.device is None and (traffic["messages"], traffic["octets"]) != (
            p["iters"], p["iters"] * p["size"]):
        raise bad(f"server counted {traffic['messages']} Writes, {traffic['octets']} octets")
    return {"bw_average_mb_s": printed[0].bw_avg, "bw_peak_mb_s": printed[0].bw_peak,
            "msg_rate_mpps": printed[0].msg_rate, "attempts": attempts,
            "crc": result["negotiated"]["test"]["crc"], "ok": True,
            "measures": _MEASURES["perftest"]}


def _rping_client(col, p):
    """``rnic rping -c`` to the guest's server: ``(exit status, the process, attempts)``.

    Run again while its TCP connection closed before MPA setup: the guest prints LISTENING a
    moment after it starts rping's server, which under qemu without KVM may not listen yet
    (the software RNIC's ``--retry`` does the same; the NIC's TCP connects once)."""
    host, port = col.rping_target
    for attempt in range(ATTEMPTS):
        client = _rnic(["rping", "-c", "-a", host, "-p", port, "-C", p["pings"],
                        "-S", p["ping_size"], "-V", "-d", "--json", "--timeout", STEP_TIMEOUT,
                        "--retry", 30, *col.device_args])
        try:
            rc = client.finish(timeout=STEP_TIMEOUT * (2 + p["pings"]))
        finally:
            client.kill()
        results = client.json_lines()
        if rc == 0 or not results or results[-1]["negotiated"] is not None \
                or attempt + 1 == ATTEMPTS:
            return rc, client, attempt + 1
        time.sleep(1.0)
    raise AssertionError("unreachable: the last attempt returns")


def _rping(col, p, vm, say):
    """``rnic rping -c`` against the guest's ``rping -s``; the figure."""
    if not vm.out.wait(lambda lines: bool(_markers(lines, "LISTENING")), STEP_TIMEOUT):
        vm.kill()
        raise SiwBenchFailure(f"{col.name}: siw's rping server did not start:\n{vm.tail()}")
    count, size = p["pings"], p["ping_size"]
    if say:
        say(f"{col.name}: rnic rping -c -C {count} -S {size} to siw's rping -s")
    try:
        rc, client, attempts = _rping_client(col, p)
        # (siw's server ends when our client disconnects; after a failed client it may
        # never have seen one)
        vm_rc = vm.finish(timeout=STEP_TIMEOUT if rc == 0 else 5)
    finally:
        vm.kill()
    want = [ping_text(ping_buffer(i, size)) for i in range(count)]
    served = re.findall(r"^server ping data: (.*?)$", vm.out.text, re.M)
    results = client.json_lines()
    if rc != 0 or not results or not results[-1].get("ok") or results[-1]["pings"] != want:
        raise SiwBenchFailure(f"{col.name}: rnic rping -c failed (exit {rc}):\n"
                              f"{client.tail()}\nsiw VM:\n{vm.tail()}")
    if served != want or "RPING_EXIT 0" not in vm.out.text or vm_rc != 0:
        raise SiwBenchFailure(f"{col.name}: siw's rping -s failed (siw-vm exit {vm_rc}) or "
                              f"served other data:\n{vm.tail()}")
    done = {int(m.group(1)): t for t, line in client.err.lines
            if (m := re.fullmatch(r"rping: ping (\d+) done", line))}
    span = done[count - 1] - done[0]
    return {"mean_ms": round(span / (count - 1) * 1e3, 3), "pings": count, "size": size,
            "timed_pings": count - 1, "span_s": round(span, 4), "attempts": attempts,
            "crc": results[-1]["negotiated"]["crc"], "ok": True,
            "measures": _MEASURES["rping"]}


def _software_column(tool, p, say):
    forwarded = _free_port()          # the host's end of the guest's rping port
    col = _Column("software", device=None, siw_dev="siw0", guest_ip=GUEST_USERNET,
                  host_ip=HOST_FROM_GUEST, rping_target=("127.0.0.1", forwarded),
                  ports=[_free_port() for _ in range(ATTEMPTS)],
                  vm_args=["--fwd", f"{forwarded}:{RPING_PORT}"])
    vm, perftest = _perftest(tool, col, p, say)
    return {"rnic": "software RNIC (--device none) over qemu's user-mode networking",
            "siw_device": col.siw_dev, "perftest": perftest, "rping": _rping(col, p, vm, say)}


def _nic_column(tool, p, say):
    qemu_port = _free_port(socket.SOCK_DGRAM)
    if say:
        say("nic: starting the simulated NIC (built once, then cached)")
    with NicSim(listen_port=0, peer_port=qemu_port) as sim:
        col = _Column("nic", device=sim.control_address, siw_dev="siw1", guest_ip=GUEST_WIRE,
                      host_ip=NIC_IP, rping_target=(GUEST_WIRE, RPING_PORT),
                      ports=[NIC_PERFTEST_PORT + i for i in range(ATTEMPTS)],
                      vm_args=["--wire", f"{qemu_port}:{sim.listen_port}"])
        t0, before = time.monotonic(), sim.device.stats()
        vm, perftest = _perftest(tool, col, p, say)
        rping = _rping(col, p, vm, say)
        wall, after = time.monotonic() - t0, sim.device.stats()
        counters = Registers(sim.device).counters()
    errors = {k: counters[k] for k in ("rx_crc_errors", "rx_marker_errors") if counters[k]}
    if errors or after["bad_out"]:
        raise SiwBenchFailure(f"nic: the core counted {errors or 'no error'}, the NIC sent "
                              f"{after['bad_out']} bad frames")
    cycles = after["cycles"] - before["cycles"]
    return {"rnic": f"simulated NIC ({NIC_IP}, W = 4; its TCP and core) on the VM's cable",
            "siw_device": col.siw_dev, "perftest": perftest, "rping": rping,
            "simulation": {"cycles": cycles, "wall_s": round(wall, 2),
                           "realtime": round(cycles / wall / LINE_HZ, 6)}}


def _check_params(size, iters, pings, ping_size, columns):
    for name, value, low, high in (("size", size, 1, 1 << 23), ("iters", iters, MIN_ITERS, 10**6),
                                   ("pings", pings, 2, 10**6),
                                   ("ping_size", ping_size, RPING_MIN_SIZE, RPING_MAX_SIZE)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name} {value!r} is not an integer in {low}..{high}")
    bad = [c for c in columns if c not in COLUMNS] or (not columns and ["(none)"])
    if bad:
        raise ValueError(f"column {bad[0]!r} is not one of {', '.join(COLUMNS)}")


def run_siw_bench(*, size=DEFAULT_SIZE, iters=DEFAULT_ITERS, pings=DEFAULT_PINGS,
                  ping_size=DEFAULT_PING_SIZE, columns=COLUMNS, say=None):
    """Run the benchmark (see the module docstring); return the report.

    Parameters
    ----------
    size, iters : int
        perftest's message size (1..2^23) and count (at least 5).
    pings, ping_size : int
        rping's count (at least 2: the mean is over the pings after the first) and size
        (26..65535).
    columns : sequence of str
        Which of :data:`COLUMNS` to run, in that order.
    say : callable or None
        ``say(text)`` for progress lines.

    Returns
    -------
    dict
        ``{"bench": "siw", "params", "measures", "columns": {name: column}, "verified"}``.

    Raises
    ------
    SiwVmMissing
        ``siw-vm`` is not found or not prepared (checked before anything runs).
    SiwBenchFailure
        A run failed or its data did not check.
    """
    columns = tuple(columns)
    _check_params(size, iters, pings, ping_size, columns)
    tool = find_siw_vm()
    check_prepared()
    p = {"size": size, "iters": iters, "pings": pings, "ping_size": ping_size}
    runs = {"software": _software_column, "nic": _nic_column}
    out = {}
    for name in COLUMNS:
        if name in columns:
            t0 = time.monotonic()
            out[name] = runs[name](tool, p, say)
            out[name]["wall_s"] = round(time.monotonic() - t0, 1)
    return {"bench": "siw", "params": {**p, "test": "write", "variant": VARIANT,
                                       "siw_vm": str(tool)},
            "measures": dict(_MEASURES), "columns": out, "verified": True}


def siw_text_report(report):
    """The ``rnic bench siw`` report as a Markdown table, a column per RNIC."""
    p, cols = report["params"], report["columns"]
    names = {"software": "software RNIC", "nic": "simulated NIC"}
    rows = [
        ("perftest write: siw's ib_write_bw -R, MB/s average",
         lambda c: f"{c['perftest']['bw_average_mb_s']:.2f}"),
        ("perftest write: MB/s peak", lambda c: f"{c['perftest']['bw_peak_mb_s']:.2f}"),
        ("rping: ms per ping", lambda c: f"{c['rping']['mean_ms']:.2f}"),
    ]
    lines = [f"Linux siw (siw-vm, variant {p['variant']}) against this project's RNICs: "
             f"ib_write_bw -s {p['size']} -n {p['iters']}, rping -C {p['pings']} "
             f"-S {p['ping_size']} (the mean over pings 2..{p['pings']}); every figure's data "
             "checked", "",
             "| figure | " + " | ".join(names[n] for n in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    lines += [f"| {label} | " + " | ".join(cell(c) for c in cols.values()) + " |"
              for label, cell in rows]
    if "nic" in cols:
        lines += ["", f"The simulated NIC ran at 1/{1 / cols['nic']['simulation']['realtime']:.0f}"
                      " of a 1 Gb/s line's 125 MHz."]
    return "\n".join(lines)
