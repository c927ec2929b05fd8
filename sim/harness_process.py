"""An interactive C++ harness process behind pipes, as a driver transport.

:class:`HarnessTransport` is what the simulated devices (:class:`rnic.sim.device.SimDevice`,
:class:`rnic.sim.nic_device.NicSimDevice`) share: it starts the harness executable with its
stdin and stdout as pipes and its stderr in a temporary file (the tail of which goes into
errors), checks the greeting line, reports the ``starting`` and ``ready`` phases
(:func:`rnic.sim.runner.report_phase`), sends command lines, turns ``OK``/``ERR`` answers into
values and :class:`rnic.host.driver.transport.TransportError`, makes ``read32``/``write32`` of
the harnesses' ``R``/``W`` commands (``sim/harness_common.h``) and ends the process with
``Q`` (killed when it has not exited 5 s later). How answers are read is the subclass's:
it defines ``_request(text)``, which sends one command and returns :meth:`_answer` of the
answer.
"""

from __future__ import annotations

import subprocess
import tempfile

from rnic.host.driver.transport import DeviceError, Transport, TransportError

from rnic.sim.runner import report_phase

__all__ = ["HarnessTransport", "HarnessMemory"]


class HarnessTransport(Transport):
    """A harness process behind pipes (see the module docstring); ``self.exe`` is its
    executable, :attr:`noun` what messages call it."""

    #: What error messages call the process.
    noun = "the simulated device"
    _proc = None
    _log = None

    def _start(self, what, greeting):
        """Start ``self.exe`` and check that its first line is ``greeting`` (DeviceError
        otherwise); ``what`` names it in the progress phases."""
        self._log = tempfile.TemporaryFile()
        report_phase("starting", what)
        try:
            self._proc = subprocess.Popen([str(self.exe)], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._log)
        except OSError as e:
            raise DeviceError(f"cannot start {self.noun} {self.exe}: {e}") from None
        first = self._proc.stdout.readline().decode("ascii", "replace").rstrip("\n")
        if first != greeting:
            tail = self._tail()
            self.close()
            raise DeviceError(f"{self.noun} greets {first!r}, expected {greeting!r} {tail}")
        report_phase("ready", what)

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}{' closed' if self._proc is None else ''}>"

    def _tail(self):
        """The end of what the process wrote on stderr ("" when there is nothing to read)."""
        try:
            self._log.seek(0)
            return self._log.read()[-2000:].decode(errors="replace")
        except (AttributeError, OSError, ValueError):
            return ""

    def _send(self, text):
        """Write one command line; returns the process (TransportError if it is closed or gone)."""
        proc = self._proc
        if proc is None:
            raise TransportError(f"{self.noun} is closed")
        try:
            proc.stdin.write(text.encode("ascii") + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError) as e:
            raise TransportError(f"{self.noun} is gone: {e}") from None
        return proc

    def _exited(self, proc):
        """TransportError for a process whose output ended."""
        return TransportError(f"{self.noun} exited (rc {proc.poll()}): {self._tail()}")

    @staticmethod
    def _answer(answer):
        """The value of an ``OK [value]`` answer; TransportError for ``ERR <text>`` or
        anything else."""
        if answer == "OK" or answer.startswith("OK "):
            return answer[3:]
        raise TransportError(answer[4:] if answer.startswith("ERR ") else
                             f"unexpected answer {answer[:60]!r}")

    def _request(self, text):
        raise NotImplementedError

    # -- Transport
    def read32(self, addr):
        return int(self._request(f"R {addr & 0xFFFFFFFF:x}"), 16) & 0xFFFFFFFF

    def write32(self, addr, value):
        self._request(f"W {addr & 0xFFFFFFFF:x} {value & 0xFFFFFFFF:x}")

    def _detach(self):
        """Take the process out of use; returns it (None when closed already)."""
        proc, self._proc = self._proc, None
        return proc

    def _stopped(self):
        """Called by :meth:`close` once the process has ended."""

    def close(self):
        proc = self._detach()
        if proc is None:
            return
        try:
            proc.stdin.write(b"Q\n")
            proc.stdin.flush()
            proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._stopped()
        proc.stdout.close()
        self._log.close()

    def __del__(self):
        try:
            self.close()
        except Exception:       # noqa: BLE001 - interpreter shutdown
            pass


class HarnessMemory:
    """Host memory of a harness built with ``HARNESS_MEMORY`` (``sim/harness_common.h``: the
    ``MW`` and ``MR`` commands): :attr:`mem_size` octets behind the top's AXI4 masters. A
    mixin of a :class:`HarnessTransport`."""

    #: Octets of host memory.
    mem_size = 0

    def _check_mem(self, addr, n):
        if (isinstance(addr, bool) or not isinstance(addr, int) or not 0 <= addr
                or addr + n > self.mem_size):
            raise ValueError(f"host memory access {addr!r}+{n} outside 0..{self.mem_size:#x}")

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
