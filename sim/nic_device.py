"""The simulated NIC: an interactive Verilated :class:`rnic.hdl.nic_top.NicTop` behind pipes.

:class:`NicSimDevice` starts a long-running C++ process (``sim/nic_harness.cpp`` compiled
with the Verilated NIC top, the same top the board build uses minus the pin-level PHY) and
talks to it over pipes. It is a :class:`rnic.host.driver.device.Transport`
(``read32``/``write32``, from :class:`rnic.sim.harness_process.HarnessTransport`: AXI4-Lite
accesses on the top's ``s_axil``, the whole register map with its Network block) and it
moves Ethernet frames: :meth:`NicSimDevice.send_frame` puts a frame on ``gmii_rx``; what the
NIC transmits on ``gmii_tx`` arrives at the ``on_frame`` callback (or in
:meth:`NicSimDevice.frames`)::

    from rnic.sim.nic_device import NicSimDevice
    from rnic.host.driver.regs import Registers

    with NicSimDevice() as nic:                         # builds once, then cached
        Registers(nic).set_ip("169.254.7.2", 24)
        nic.send_frame(arp_request)                     # octets from the destination MAC on
        reply = nic.frames(timeout=1.0)                 # [b"..."]: what came out

Frames are Ethernet frames as qemu's dgram netdev carries them: destination MAC first, no
preamble, no FCS. The harness pads a short frame to 60 octets (as the sending MAC would),
adds preamble, SFD and FCS and keeps 12 idle octets between frames; on the way out it checks
and strips preamble, SFD and FCS. A frame that comes out with a bad FCS, ``tx_er`` or a bad
preamble is an error of the gateware: it is counted in :attr:`NicSimDevice.bad_frames` and
given to ``on_bad`` (default: logged on the ``rnic.sim.nic_device`` logger).

Clocks: the top's ``sync``, ``eth_rx`` and ``eth_tx`` domains share one clock in
simulation (:class:`NicSimTop`), one GMII octet per cycle, so the W-octet core runs at W
times line rate; the clock-domain crossings (``AsyncFIFO``) still synchronise, at the cost of
a few cycles of latency. Timing across the crossings is the board's business (and the
cocotb test's, tests/hdl/net/test_nic_top.py, which runs the domains on separate clocks).

The harness clocks the design on its own while there is something to simulate (a frame
going in or coming out, and :data:`IDLE_RUN` cycles after the last frame, register access
or output octet, so that replies come out) and blocks on its pipe otherwise: an idle NIC
uses no CPU. TCP's time base ticks once per millisecond of wall time while the design is
clocked or a TCP connection is open (``tcp_active``), so that its timers run in the peer's
time. The other ports of the top: ``rx_ulpdu`` always ready; ``m_axi``/``m_axi_rd`` host
memory of :data:`~rnic.sim.device.MEM_SIZE` octets (4 MiB, zero at start), read and written
by :meth:`NicSimDevice.mem_read` and :meth:`NicSimDevice.mem_write`, as the core device's.
The top's ring memory holds 64 KiB a connection (TCP_CAPS.RING_LOG2 16).

Build: :class:`NicBuild` (a :class:`rnic.sim.fast.FastSim` of :class:`NicSimTop` with this
harness, the device's quick-build flags), found through the index of
:func:`rnic.sim.harness_build.cached_executable` like :mod:`rnic.sim.device`'s: keyed by the
*sources* (:func:`nic_sources`, this module, the harness and what builds it, the parameters
and tool versions), so a cached start skips the conversion to Verilog.
``RNIC_SIM_REBUILD=1`` ignores the caches.

Harness protocol: see the head of ``sim/nic_harness.cpp``. All methods are thread-safe
(one lock around each exchange; frames are read by a thread of their own).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from pathlib import Path

from rnic.host.driver.device import Device, DeviceKind, parse_params
from rnic.host.driver.transport import DeviceError, TransportError

from rnic.sim.device import MEM_BITS, MEM_SIZE, QUEUE_DEPTHS, DeviceBuild
from rnic.sim.fast import FastSim
from rnic.sim.harness_build import (cached_executable, harness_text, interactive_decls,
                                    module_sources)
from rnic.sim.harness_process import HarnessMemory, HarnessTransport

__all__ = ["NicSimDevice", "NicBuild", "NicSimTop", "nic_executable", "nic_sources",
           "HARNESS", "GREETING", "IDLE_RUN", "MAX_FRAME", "DEVICE_KIND"]

HARNESS = Path(__file__).resolve().parent / "nic_harness.cpp"
GREETING = "RNIC-NIC-SIM 1"
#: Cycles the harness keeps clocking after the last frame octet in or out or register access
#: (a 1514-octet frame's reply starts a few thousand cycles after its last octet went in).
IDLE_RUN = 20_000
#: Longest frame the harness takes (octets without FCS; the MAC counts longer ones as giants).
MAX_FRAME = 16383
#: Each connection's send ring in the simulated NIC: 64 KiB.
SIM_RING_LOG2 = 16
#: Build parameters a ``nicsim:`` device spec may set.
SPEC_KEYS = ("width", "connections")

_log = logging.getLogger(__name__)


@functools.cache
def _nic_sim_top_class():
    """:class:`NicSimTop`, defined on first use (Amaranth only when a build needs it)."""
    from amaranth.hdl import ClockDomain, ClockSignal, ResetSignal

    from rnic.hdl.nic_top import NicTop

    class NicSimTop(NicTop):
        """:class:`~rnic.hdl.nic_top.NicTop` with its ``eth_rx`` and ``eth_tx`` clock
        domains driven from ``sync`` (one clock and reset for the simulation), 64 KiB
        of send ring a connection (an echo connection's window is its ring), and the core's
        memory port as wide as the harness's host memory (``MEM_BITS``) and its queues as
        deep as the simulated core device's (``QUEUE_DEPTHS``: perftest's send server posts
        512 receive buffers)."""

        def __init__(self, *, connections=16, **params):
            super().__init__(connections=connections, ring_octets=connections << SIM_RING_LOG2,
                             addr_width=MEM_BITS, queue_depths=QUEUE_DEPTHS, **params)

        def elaborate(self, platform):
            m = super().elaborate(platform)
            for name in ("eth_rx", "eth_tx"):
                m.domains += ClockDomain(name)
                m.d.comb += [ClockSignal(name).eq(ClockSignal("sync")),
                             ResetSignal(name).eq(ResetSignal("sync"))]
            return m

    return NicSimTop


def __getattr__(name):
    if name == "NicSimTop":
        return _nic_sim_top_class()
    raise AttributeError(name)


class NicBuild(DeviceBuild):
    """:class:`rnic.sim.fast.FastSim` of :class:`NicSimTop` with the NIC harness (the
    device's build flags: one C++ file at -O1, which builds in a fraction of the time)."""

    def __init__(self, *, width, connections, build_dir=None):
        FastSim.__init__(self, _nic_sim_top_class(), name=f"nic_w{width}_c{connections}",
                         params={"width": width, "connections": connections},
                         inputs=[], outputs=["rx_ulpdu"],
                         build_dir=build_dir)

    def _generate(self):
        decls = [f"#define W_OCTETS {self.params['width']}", f"#define IDLE_RUN {IDLE_RUN}ull",
                 f"#define MEM_BITS {MEM_BITS}", *interactive_decls()]
        return harness_text(HARNESS, {"DECLS": decls})


def nic_sources():
    """``{module name: file}`` of the project's modules the NIC top's Verilog depends on
    (:mod:`rnic.hdl.nic_top` and what it imports from ``rnic.hdl``/``rnic.host``,
    transitively)."""
    return module_sources("rnic.hdl.nic_top")


def check_params(params):
    """ValueError for build parameters the NIC top would refuse (without importing Amaranth)."""
    from rnic.host.spec.regmap import REGMAP
    REGMAP.check_params({"width": params["width"], "connections": params["connections"],
                         "stags": 256})


def nic_executable(*, width=4, connections=16, build_dir=None):
    """Path of the harness executable for these parameters (built and cached on first use;
    :func:`rnic.sim.harness_build.cached_executable`)."""
    params = {"width": width, "connections": connections}
    check_params(params)
    return cached_executable(NicBuild, name=f"nic_w{width}_c{connections}", params=params,
                             sources={**nic_sources(), "nic_device": Path(__file__),
                                      "harness": HARNESS},
                             build_dir=build_dir)


class NicSimDevice(HarnessMemory, HarnessTransport):
    """An interactive Verilated NicTop (see the module docstring).

    Parameters
    ----------
    width, connections : int
        Build parameters of the top (defaults 4 and 16).
    on_frame : callable or None
        ``on_frame(frame: bytes)`` for every good frame from ``gmii_tx`` (called in the
        reader thread; keep it short). None: frames are queued for :meth:`frames`.
    on_bad : callable or None
        ``on_bad(reason: str, octets: bytes)`` for a frame from ``gmii_tx`` with a bad FCS,
        ``tx_er`` or a bad preamble (default: logged as an error).
    build_dir : path or None
        Build cache root (default :func:`rnic.sim.runner.build_root`).
    timeout : float
        Seconds allowed for one answer of the harness.
    """

    noun = "the simulated NIC"
    #: Octets of host memory behind the core's AXI4 masters (``mem_read``, ``mem_write``).
    mem_size = MEM_SIZE
    #: The largest ULPDU the NIC top's core takes (a DDP slot, RnicCore's default).
    ddp_slot_bytes = 2048

    def __init__(self, *, width=4, connections=16, on_frame=None, on_bad=None, build_dir=None,
                 timeout=30.0):
        self.params = {"width": width, "connections": connections}
        check_params(self.params)
        self.width, self.connections = width, connections
        self.name = f"nicsim:width={width},connections={connections}"
        self.timeout = timeout
        self.lock = threading.RLock()
        self.bad_frames = 0
        self._on_frame, self._on_bad = on_frame, on_bad
        self._frames = queue.Queue()
        self._answers = queue.Queue()
        t0 = time.monotonic()
        self.exe = nic_executable(**self.params, build_dir=build_dir)
        self.build_s = time.monotonic() - t0
        self._start(f"nic_w{width}_c{connections}", f"{GREETING} width={width}")
        self._reader = threading.Thread(target=self._read, daemon=True, name="rnic-nicsim-reader")
        self._reader.start()
        self.start_s = time.monotonic() - t0

    # -- the pipe
    def _read(self):
        """Reader thread: frames to their callbacks, everything else to the answer queue."""
        proc = self._proc
        for raw in proc.stdout:
            line = raw.decode("ascii", "replace").rstrip("\n")
            if line.startswith("FRAME "):
                frame = bytes.fromhex(line[6:])
                if self._on_frame is None:
                    self._frames.put(frame)
                else:
                    try:
                        self._on_frame(frame)
                    except Exception:       # noqa: BLE001 - a callback must not stop the reader
                        _log.exception("on_frame failed")
            elif line.startswith("BAD "):
                _, reason, octets = line.split(" ", 2)
                data = b"" if octets == "-" else bytes.fromhex(octets)
                self.bad_frames += 1
                if self._on_bad is not None:
                    self._on_bad(reason, data)
                else:
                    _log.error("the simulated NIC sent a bad frame (%s): %s", reason, data.hex())
            else:
                self._answers.put(line)
        self._answers.put(None)

    def _request(self, text):
        with self.lock:
            proc = self._send(text)
            try:
                answer = self._answers.get(timeout=self.timeout)
            except queue.Empty:
                raise TransportError(f"{self.noun} did not answer {text[:20]!r} within "
                                     f"{self.timeout} s") from None
            if answer is None:
                self._answers.put(None)
                raise self._exited(proc)
        return self._answer(answer)

    def _detach(self):
        with self.lock:
            return super()._detach()

    def _stopped(self):
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.join(timeout=5)

    # -- frames
    def send_frame(self, frame):
        """Put one Ethernet frame (destination MAC first, no FCS; 1 .. :data:`MAX_FRAME`
        octets) on ``gmii_rx``; it goes in at once, behind the frames still queued."""
        frame = bytes(frame)
        if not 1 <= len(frame) <= MAX_FRAME:
            raise ValueError(f"a frame of {len(frame)} octets (1 .. {MAX_FRAME})")
        self._request(f"F {frame.hex()}")

    def frames(self, *, count=None, timeout=1.0):
        """The frames from ``gmii_tx`` queued so far (without an ``on_frame`` callback): wait
        up to ``timeout`` s for ``count`` of them (None: return what came within ``timeout``
        of the last one)."""
        out, deadline = [], time.monotonic() + timeout
        while count is None or len(out) < count:
            wait = deadline - time.monotonic() if count is not None else timeout
            try:
                out.append(self._frames.get(timeout=max(wait, 0.0)))
            except queue.Empty:
                break
        return out

    def run(self, cycles):
        """Clock ``cycles`` cycles now (whatever the design does); returns the total cycles.
        The frames that came out meanwhile are queued (or given to ``on_frame``) before it
        returns."""
        return int(self._request(f"RUN {int(cycles)}"))

    def manual(self, on=True):
        """Clock only on :meth:`run` (``on``), with no wall-time ticks of TCP's time base (a
        peer in lock-step with the cycles drives it, e.g. through TCP_TICK), or on its own
        again."""
        self._request(f"MANUAL {int(bool(on))}")

    def stats(self):
        """``{"cycles", "sim_s", "frames_in", "frames_out", "bad_out"}``: cycles clocked since
        reset, seconds spent clocking them, frames in and out (good and bad)."""
        cycles, ns, fin, fout, bad = (int(x) for x in self._request("C").split())
        return {"cycles": cycles, "sim_s": ns * 1e-9, "frames_in": fin, "frames_out": fout,
                "bad_out": bad}


# ---------------------------------------------------------------------------
# device kind "nicsim"

_SPEC_USAGE = "nicsim[:width=4,connections=16]"


def _parse_spec(arg):
    return parse_params(arg, SPEC_KEYS, _SPEC_USAGE)


def open_nicsim(arg=None, **kw):
    """Opener of the device kind ``nicsim``: the simulated NIC's registers (no cable: frames
    it sends are dropped; ``rnic nic-sim`` runs it on a virtual cable)."""
    params = {**_parse_spec(arg), **kw}
    try:
        transport = NicSimDevice(**params, on_frame=lambda frame: None)
    except (ValueError, TypeError, DeviceError):
        raise
    except Exception as e:     # a failed build or start
        raise DeviceError(f"nicsim: cannot build or start the simulated NIC: {e}") from e
    return Device(transport, spec="nicsim" + (f":{arg}" if arg else ""))


#: The device kind ``nicsim``, registered with the driver as an entry point (pyproject.toml).
DEVICE_KIND = DeviceKind(
    "nicsim", _SPEC_USAGE,
    "the simulated NIC (NicTop on Verilator, no cable; rnic nic-sim puts it on one), "
    "running inside this command",
    check=_parse_spec, open=open_nicsim)
