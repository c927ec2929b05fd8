"""Interop tests against Linux soft-iWARP (siw) in the siw VM (tools/siw-vm).

The tests need the siw-vm tool and its prepared cache (``siw-vm prepare
--variant all``). They skip, with the reason, when the tool or a variant is
missing. Where the tool is: ``$SIW_VM``, ``../shared/tools/siw-vm/siw-vm`` beside
the checkout, ``/work/shared/tools/siw-vm/siw-vm``
(or ``siw-vm`` on PATH); the cache: ``$SIW_VM_CACHE`` or ``/var/cache/siw-vm``.

Fixtures:

* ``siw_vm``: a :class:`SiwVm`; ``siw_vm.start(variant, command, fwd=...)``
  boots a VM running ``command`` in the background and returns a
  :class:`VmRun` (``wait()`` -> (status, output)); ``siw_vm.require(variant)``
  skips when the variant is not prepared.
* ``free_port``: a function returning a free TCP port on 127.0.0.1 (forwarded
  ports differ per test, so parallel runs do not clash); ``free_udp_port`` the same
  for UDP (the ports of a virtual cable, ``siw_vm.start(..., wire=(qemu, peer))``).
* ``rnic``: runs the ``rnic`` CLI of this checkout (``python -m rnic.host.cli``)
  in a subprocess: ``rnic.run(args, timeout)`` or ``rnic.start(args)``.
* ``relay``: ``relay(to_a, to_b, rate=..., seed=...)`` starts a :class:`Relay`, a lossy
  middle for a virtual cable (stopped at the end of the test).

Each VM boot takes about 3 s under TCG on an idle machine (up to ~8 s on a
busy one), plus the guest command.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rnic.host.tools.bench_siw import OutputLines, stop_process

ROOT = Path(__file__).resolve().parents[2]
_DEFAULT_TOOL = Path("/work/shared/tools/siw-vm/siw-vm")
VM_TIMEOUT = int(os.environ.get("RNIC_INTEROP_VM_TIMEOUT", "150"))


def _tool():
    env = os.environ.get("SIW_VM")
    if env:
        return Path(env)
    for cand in (ROOT.parent / "shared" / "tools" / "siw-vm" / "siw-vm", _DEFAULT_TOOL):
        if cand.exists():
            return cand
    found = shutil.which("siw-vm")
    return Path(found) if found else None


def _cache():
    return Path(os.environ.get("SIW_VM_CACHE", "/var/cache/siw-vm"))


class VmRun:
    """A running ``siw-vm run``; its output is collected by a thread as it comes."""

    def __init__(self, proc, command):
        self.proc = proc
        self.command = command
        self._out = OutputLines(proc.stdout)
        self._killed = False

    @property
    def output(self):
        text = "".join(line + "\n" for _, line in list(self._out.lines))
        return text + ("\n[test: siw-vm killed after the test's timeout]" if self._killed else "")

    def wait_for(self, text, timeout=90.0):
        """Wait until ``text`` appears in the output; AssertionError (with the output) if the
        VM ends or ``timeout`` passes first."""
        if not self._out.wait(lambda lines: any(text in line for _, line in lines), timeout):
            raise AssertionError(f"siw-vm did not print {text!r}:\n{self.output}")

    def wait(self, timeout=VM_TIMEOUT + 30):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self._killed = True
        self._out.wait(lambda _: False, 10)           # the rest of the output
        return self.proc.returncode, self.output

    def kill(self):
        stop_process(self.proc)


class SiwVm:
    def __init__(self, tool):
        self.tool = tool
        self.runs = []

    def require(self, variant):
        ready = _cache() / "variants" / variant / "initramfs.cpio.gz"
        if not ready.exists():
            pytest.skip(f"siw-vm variant {variant!r} is not prepared ({ready} missing; "
                        f"run: sudo siw-vm prepare --variant {variant})")

    def start(self, variant, command, *, fwd=(), wire=None, timeout=VM_TIMEOUT):
        """Boot ``variant`` running ``command``; ``fwd``: (host port, guest port) pairs;
        ``wire``: (qemu port, peer port) of the virtual cable on the guest's eth1."""
        self.require(variant)
        args = [str(self.tool), "run", "--variant", variant, "--timeout", str(timeout)]
        for h, g in fwd:
            args += ["--fwd", f"{h}:{g}"]
        if wire is not None:
            args += ["--wire", f"{wire[0]}:{wire[1]}"]
        args += ["--", command]
        proc = subprocess.Popen(args, cwd=str(self.tool.parent.parent.parent),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        run = VmRun(proc, command)
        self.runs.append(run)
        return run


@pytest.fixture
def siw_vm():
    tool = _tool()
    if tool is None or not tool.exists():
        pytest.skip(f"the siw-vm tool is not available ($SIW_VM or {_DEFAULT_TOOL})")
    if not (_cache() / "kernel").is_dir():
        pytest.skip(f"siw-vm is not prepared: no cache at {_cache()} "
                    "(run: sudo siw-vm prepare --variant all)")
    vm = SiwVm(tool)
    yield vm
    for run in vm.runs:
        run.kill()


@pytest.fixture
def free_udp_port():
    def pick():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    return pick


@pytest.fixture
def free_port():
    def pick():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    return pick


class Rnic:
    """The ``rnic`` CLI of this checkout in a subprocess."""

    def __init__(self):
        self.procs = []

    def argv(self, args):
        return [sys.executable, "-m", "rnic.host.cli", *map(str, args)]

    def start(self, args):
        proc = subprocess.Popen(self.argv(args), cwd=str(ROOT), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def run(self, args, timeout=VM_TIMEOUT):
        proc = self.start(args)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += "\n[test: rnic killed after the test's timeout]"
        return proc.returncode, out, err

    @staticmethod
    def first_json_line(proc, timeout=30.0):
        """Read the first stdout line of ``proc`` (a JSON object), with a deadline."""
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sel.select(timeout=0.2):
                line = proc.stdout.readline()
                if line:
                    return json.loads(line)
                break
        raise AssertionError(f"no first line from {proc.args}")


@pytest.fixture
def rnic():
    r = Rnic()
    yield r
    for p in r.procs:
        if p.poll() is None:
            p.kill()
            p.communicate()


class Relay:
    """A virtual cable's middle that drops, duplicates and reorders frames: datagrams that
    arrive on 127.0.0.1:``a_port`` go on to 127.0.0.1:``to_a`` from ``b_port``, those on
    ``b_port`` to ``to_b`` from ``a_port``: each end hears from the one address it sends to,
    as on a direct cable (qemu's ``dgram`` netdev takes datagrams from its remote address
    only). Each direction is a :class:`rnic.host.tools.bench_tcp.LossyLink` (the dice of
    ``rnic bench tcp``): each datagram lost at ``rate``, sent twice at ``rate``, held back
    at ``rate`` (sent after a later one, or once none came for 20 ms). ``counts`` per
    direction (``"a"``, ``"b"``): datagrams in, lost, duplicated, reordered."""

    HOLD_S = 0.02

    def __init__(self, *, to_a, to_b, rate, seed=1):
        import random

        from rnic.host.tools.bench_tcp import LossyLink
        self.rate, self._stop = rate, threading.Event()
        self._links = {d: LossyLink(random.Random(f"{seed}{d}"), rate) for d in "ab"}
        self._in = dict.fromkeys("ab", 0)
        self._socks = {}
        for direction in "ab":
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind(("127.0.0.1", 0))
            sock.settimeout(self.HOLD_S)
            self._socks[direction] = sock
        self.a_port = self._socks["a"].getsockname()[1]
        self.b_port = self._socks["b"].getsockname()[1]
        a, b = self._socks["a"], self._socks["b"]
        self._threads = [threading.Thread(target=self._carry, args=args, daemon=True)
                         for args in (("a", a, b, to_a), ("b", b, a, to_b))]
        for t in self._threads:
            t.start()

    @property
    def counts(self):
        return {d: {"in": self._in[d], **self._links[d].counts} for d in "ab"}

    def _carry(self, direction, sock, out_sock, to):
        link, target = self._links[direction], ("127.0.0.1", to)
        while not self._stop.is_set():
            try:
                data = sock.recv(65536)
            except socket.timeout:
                data = None
            except OSError:
                return
            if data is None:
                out = link.flush()
            else:
                self._in[direction] += 1
                out = link.carry([data])
            for datagram in out:
                try:
                    out_sock.sendto(datagram, target)
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)
        for sock in self._socks.values():
            sock.close()


@pytest.fixture
def relay():
    made = []

    def start(to_a, to_b, *, rate, seed=1):
        made.append(Relay(to_a=to_a, to_b=to_b, rate=rate, seed=seed))
        return made[-1]
    yield start
    for r in made:
        r.close()
