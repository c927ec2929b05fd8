"""The simulated device: an interactive Verilated :class:`rnic.hdl.rnic_core.RnicCore` behind the driver.

:class:`SimDevice` starts a long-running C++ process (``sim/device_harness.cpp``
compiled with the Verilated core) and talks to it over pipes. It is a
:class:`rnic.host.driver.device.Transport` (``read32``/``write32``/``close``, from
:class:`rnic.sim.harness_process.HarnessTransport`: the harness performs the AXI4-Lite handshakes on the core's ``s_axil``), plus stream
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
with this module's harness instead of the batch one and flags for a quick
build (one C++ file at -O1): the same Verilog conversion, port naming,
run-time object cache, build lock and build directory
(``fast-device_w<W>_c<N>-<hash>`` under :func:`rnic.sim.runner.build_root`). :func:`device_executable` finds it through
:func:`rnic.sim.harness_build.cached_executable`, an index keyed by the *sources*
(:func:`core_sources`: the ``rnic.hdl``/``rnic.host`` modules :mod:`rnic.hdl.rnic_core`
imports, transitively; this module, the harness and what builds it, the parameters and
tool versions), so that a cached device starts without converting the core to Verilog,
the bulk of a start otherwise. ``RNIC_SIM_REBUILD=1`` ignores both caches.

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
import threading
import time
from pathlib import Path

from rnic.host.driver.device import Device, DeviceKind, parse_params
from rnic.host.driver.transport import DeviceError, TransportError
from rnic.host.spec.regmap import DpCrc, DpError

from rnic.sim.fast import VERILATOR_ARGS, FastSim
from rnic.sim.harness_build import (cached_executable, harness_text, interactive_decls,
                                    module_sources)
from rnic.sim.harness_process import HarnessMemory, HarnessTransport

__all__ = ["SimDevice", "RxUlpdu", "RunOutput", "DeviceBuild", "device_executable", "open_sim",
           "core_sources", "HARNESS", "GREETING", "SPEC_KEYS", "check_params", "MEM_BITS", "MEM_SIZE", "DDP_SLOT_BYTES", "QUEUE_DEPTHS"]

HARNESS = Path(__file__).resolve().parent / "device_harness.cpp"
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
    #: caller): one C++ file at -O1, which builds in a fraction of the batch harness's time.
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
        decls = [f"#define W_OCTETS {self.params['width']}",
                 f"#define CONNECTIONS {self.params['connections']}",
                 f"#define MEM_BITS {self.params['addr_width']}",
                 *interactive_decls()]
        prefixes = {"rx_wire": "RXW", "tx_ulpdu": "TXU", "tx_wire": "TXW", "rx_ulpdu": "RXU"}
        for s in (*self._ins, *self._outs):
            p = prefixes[s.name]
            decls.append(f"#define {p}_NW {s.nw}")
            for name, field in s.shape:
                decls.append(f"#define {p}_{name.upper()}_OFF {field.offset}")
                decls.append(f"#define {p}_{name.upper()}_W {field.width}")
        return harness_text(HARNESS, {"DECLS": decls})


def core_sources():
    """``{module name: file}`` of the project's modules the core's Verilog depends on:
    :mod:`rnic.hdl.rnic_core` and the ``rnic.hdl`` / ``rnic.host`` modules it imports,
    transitively."""
    return module_sources("rnic.hdl.rnic_core")


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
    """Path of the harness executable for these parameters (built and cached on first use;
    :func:`rnic.sim.harness_build.cached_executable`)."""
    params = {"width": width, "connections": connections, "stags": stags, "dp_depth": dp_depth}
    check_params(params)
    return cached_executable(DeviceBuild, name=f"device_w{width}_c{connections}", params=params,
                             sources={**core_sources(), "device": Path(__file__), "harness": HARNESS},
                             build_dir=build_dir)


# ---------------------------------------------------------------------------
# the device

class SimDevice(HarnessMemory, HarnessTransport):
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
        t0 = time.monotonic()
        self.exe = device_executable(**self.params, build_dir=build_dir)
        self.build_s = time.monotonic() - t0
        self._start(f"device_w{width}_c{connections}",
                    f"{GREETING} width={width} connections={connections} mem={MEM_SIZE}")

    @property
    def cycles(self):
        """Clock cycles simulated since the core left reset."""
        return int(self._request("C"))

    # -- the pipe
    def _line(self):
        proc = self._proc
        if proc is None:
            raise TransportError(f"{self.noun} is closed")
        raw = proc.stdout.readline()
        if not raw:
            raise self._exited(proc)
        return raw.decode("ascii", "replace").rstrip("\n")

    def _request(self, text):
        with self.lock:
            self._send(text)
            return self._answer(self._line())

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
    return dev


#: The device kind ``sim``, registered with the driver as an entry point (pyproject.toml).
DEVICE_KIND = DeviceKind(
    "sim", _SPEC_USAGE,
    "the simulated RNIC core (Verilator; built on first use), running inside this command",
    check=_parse_spec, open=open_sim)
