"""Transports: 32-bit register access at byte addresses, and the register server.

:class:`Transport` is what the driver (:class:`rnic.host.driver.device.Device`)
talks through. Implementations: :class:`SocketTransport` (a line protocol over
TCP to a register server, :func:`serve_transport` / :class:`TransportServer`,
which is how a running simulation or a model in another process is driven by
the ``rnic`` CLI: ``--device tcp:127.0.0.1:PORT``), the in-process model
(:class:`rnic.host.driver.model.ModelTransport`), the UART bridge
(:class:`rnic.host.driver.uart.UartTransport`) and the simulated core
(:class:`rnic.sim.device.SimDevice`).

Register server protocol (ASCII lines, ``\\n`` terminated)
----------------------------------------------------------
On connect the server sends ``RNIC-REGS 1``. Requests: ``R <addr>`` ->
``OK <value>`` ; ``W <addr> <value>`` -> ``OK`` ; ``Q`` -> the server closes.
Numbers are hexadecimal with ``0x``. A failed access (SLVERR, bad request)
answers ``ERR <text>``. One request at a time per connection; clients are
served concurrently, accesses to the transport are serialised.
"""

from __future__ import annotations

import abc
import select
import socket
import threading

from rnic.host.driver import regs

__all__ = [
    "Transport", "TransportError", "DeviceError", "DeviceMismatch", "DeviceUnavailable",
    "QueueFull", "SocketTransport", "TransportServer", "serve_transport", "PROTOCOL_GREETING",
]

PROTOCOL_GREETING = "RNIC-REGS 1"
#: Octets of host memory one MR or MW line moves.
MEM_CHUNK = 4096
#: The longest line either side takes (an MW request or an MR answer).
_MAX_LINE = 2 * MEM_CHUNK + 64


# -- errors -------------------------------------------------------------------------

class DeviceError(RuntimeError):
    """The device cannot be used (not an RNIC, unreachable, not available)."""


class DeviceMismatch(DeviceError, regs.DeviceMismatch):
    """The device is not an RNIC with a register map major version this driver knows."""


class DeviceUnavailable(DeviceError):
    """The device kind exists but cannot be opened here (yet)."""


class TransportError(OSError):
    """A register access failed (SLVERR, lost connection, bad answer)."""


class QueueFull(RuntimeError):
    """The receive or send queue of the device had no room: nothing was posted."""


# -- transports -----------------------------------------------------------------------

class Transport(regs.Transport, abc.ABC):
    """32-bit register access at byte addresses of the window, and ``close()``."""

    #: A short description for status output (e.g. ``model``, ``tcp:127.0.0.1:7000``).
    name = "transport"

    @abc.abstractmethod
    def read32(self, addr: int) -> int:
        """The 32-bit value at byte address ``addr``; TransportError on failure."""

    @abc.abstractmethod
    def write32(self, addr: int, value: int) -> None:
        """Write ``value`` at byte address ``addr``; TransportError on failure."""

    def close(self) -> None:
        """Release the transport (idempotent)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SocketTransport(Transport):
    """Register access through a register server (:func:`serve_transport`) over TCP.

    Parameters
    ----------
    host, port : str, int
        Where the server listens (normally 127.0.0.1).
    timeout : float
        Seconds allowed for connecting and for each answer.
    """

    def __init__(self, host="127.0.0.1", port=0, *, timeout=5.0):
        self.name = f"tcp:{host}:{port}"
        self.timeout = timeout
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise DeviceError(f"cannot reach the register server at {host}:{port}: {e}") from None
        self._buf = b""
        self._lock = threading.Lock()
        try:
            greeting = self._line()
        except TransportError as e:
            self.close()
            raise DeviceError(f"{host}:{port} is not a register server: {e}") from None
        if greeting != PROTOCOL_GREETING:
            self.close()
            raise DeviceError(f"{host}:{port} is not a register server (it greets "
                              f"{greeting[:40]!r}, expected {PROTOCOL_GREETING!r})")

    def _line(self):
        while b"\n" not in self._buf:
            if len(self._buf) > _MAX_LINE:
                raise TransportError("answer line too long")
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                raise TransportError(f"no answer within {self.timeout} s") from None
            except OSError as e:
                raise TransportError(f"connection lost: {e}") from None
            if not data:
                raise TransportError("the register server closed the connection")
            self._buf += data
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("ascii", "replace").strip()

    def _request(self, text):
        with self._lock:
            if self.sock is None:
                raise TransportError("transport closed")
            try:
                self.sock.sendall(text.encode("ascii") + b"\n")
            except OSError as e:
                raise TransportError(f"connection lost: {e}") from None
            answer = self._line()
        if answer == "OK" or answer.startswith("OK "):
            return answer[3:].strip()
        if answer.startswith("ERR"):
            raise TransportError(answer[3:].strip() or "error")
        raise TransportError(f"unexpected answer {answer[:40]!r}")

    def read32(self, addr):
        value = self._request(f"R {addr:#x}")
        try:
            return int(value, 16) & 0xFFFFFFFF
        except ValueError:
            raise TransportError(f"bad read answer {value[:40]!r}") from None

    def write32(self, addr, value):
        self._request(f"W {addr:#x} {value & 0xFFFFFFFF:#010x}")

    @property
    def mem_size(self):
        """Octets of host memory behind the served device's core (0: it has none)."""
        if not hasattr(self, "_mem_size"):
            try:
                self._mem_size = int(self._request("MS"), 0)
            except TransportError:
                self._mem_size = 0
        return self._mem_size

    def mem_read(self, addr, n):
        """``n`` octets of the served device's host memory at ``addr``."""
        out = bytearray()
        while len(out) < n:
            k = min(n - len(out), MEM_CHUNK)
            out += bytes.fromhex(self._request(f"MR {addr + len(out):#x} {k}"))
        return bytes(out)

    def mem_write(self, addr, data):
        """Write ``data`` into the served device's host memory at ``addr``."""
        data = bytes(data)
        for pos in range(0, len(data), MEM_CHUNK):
            self._request(f"MW {addr + pos:#x} {data[pos:pos + MEM_CHUNK].hex()}")

    def close(self):
        sock, self.sock = getattr(self, "sock", None), None
        if sock is not None:
            try:
                sock.sendall(b"Q\n")
            except OSError:
                pass
            sock.close()


class TransportServer:
    """Serve a :class:`Transport` to :class:`SocketTransport` clients over TCP.

    Parameters
    ----------
    transport : Transport
        What the clients' reads and writes go to (accesses are serialised).
    port : int
        TCP port (0: any free port; see :attr:`port`).
    host : str
        Address to bind (127.0.0.1 by default: the protocol has no access control).
    """

    def __init__(self, transport, port=0, host="127.0.0.1"):
        self.transport = transport
        self._sock = socket.create_server((host, port))
        self._sock.settimeout(0.2)
        self.host, self.port = self._sock.getsockname()[:2]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._clients = set()
        self.served = 0

    @property
    def address(self):
        return f"tcp:{self.host}:{self.port}"

    def serve(self, *, once=False):
        """Accept and serve clients until :meth:`close` (or after one client with ``once``)."""
        workers = []
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = self._sock.accept()
                except socket.timeout:
                    continue
                except OSError:
                    break
                if once:
                    self._client(conn)
                    break
                t = threading.Thread(target=self._client, args=(conn,), daemon=True)
                t.start()
                workers.append(t)
        finally:
            for t in workers:
                t.join(timeout=1.0)

    def start(self):
        """Serve in a background thread; returns self."""
        self._thread = threading.Thread(target=self.serve, daemon=True, name="rnic-regs-server")
        self._thread.start()
        return self

    def close(self):
        self._stop.set()
        for c in list(self._clients):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _answer(self, line):
        parts = line.split()
        if not parts:
            return "ERR empty request"
        try:
            if parts[0] == "R" and len(parts) == 2:
                with self._lock:
                    return f"OK {self.transport.read32(int(parts[1], 16)) & 0xFFFFFFFF:#010x}"
            if parts[0] == "W" and len(parts) == 3:
                addr, value = int(parts[1], 16), int(parts[2], 16)
                if not 0 <= value <= 0xFFFFFFFF:
                    return "ERR value does not fit 32 bits"
                with self._lock:
                    self.transport.write32(addr, value)
                return "OK"
            answer = self._memory(parts)
            if answer is not None:
                return answer
        except ValueError as e:
            return f"ERR bad number in {line[:40]!r}: {e}"
        except OSError as e:
            return f"ERR {e}"
        return f"ERR unknown request {line[:40]!r} (R ADDR | W ADDR VALUE | MS | MR ADDR N | " \
               "MW ADDR HEX | Q)"

    def _memory(self, parts):
        """The host memory requests (a transport with ``mem_read``/``mem_write``): MS (its
        size), MR ADDR N, MW ADDR HEX (at most MEM_CHUNK octets); None for another request."""
        t = self.transport
        if parts[0] not in ("MS", "MR", "MW"):
            return None
        if not callable(getattr(t, "mem_read", None)):
            return "ERR the device has no host memory"
        if parts[0] == "MS" and len(parts) == 1:
            return f"OK {t.mem_size}"
        if parts[0] == "MR" and len(parts) == 3:
            addr, n = int(parts[1], 0), int(parts[2], 0)
            if not 0 < n <= MEM_CHUNK:
                return f"ERR MR moves 1 .. {MEM_CHUNK} octets"
            with self._lock:
                return f"OK {t.mem_read(addr, n).hex()}"
        if parts[0] == "MW" and len(parts) == 3:
            addr, data = int(parts[1], 0), bytes.fromhex(parts[2])
            if not 0 < len(data) <= MEM_CHUNK:
                return f"ERR MW moves 1 .. {MEM_CHUNK} octets"
            with self._lock:
                t.mem_write(addr, data)
            return "OK"
        return None

    def _client(self, conn):
        self._clients.add(conn)
        buf = b""
        try:
            conn.sendall(PROTOCOL_GREETING.encode() + b"\n")
            while not self._stop.is_set():
                r, _, _ = select.select([conn], [], [], 0.2)
                if not r:
                    continue
                data = conn.recv(4096)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    raw, _, buf = buf.partition(b"\n")
                    line = raw.decode("ascii", "replace").strip()
                    if line == "Q":
                        return
                    conn.sendall(self._answer(line).encode() + b"\n")
                if len(buf) > _MAX_LINE:
                    conn.sendall(b"ERR request line too long\n")
                    return
        except OSError:
            return
        finally:
            self._clients.discard(conn)
            self.served += 1
            conn.close()


def serve_transport(transport, port=0, *, host="127.0.0.1", once=False, ready=None):
    """Serve ``transport`` on ``host:port`` until interrupted (or after one client with ``once``).

    ``ready(server)`` is called once the socket listens (it can read
    ``server.port`` when ``port`` is 0). Blocks; use :class:`TransportServer`
    ``.start()`` for a background server.
    """
    server = TransportServer(transport, port, host)
    try:
        if ready is not None:
            ready(server)
        server.serve(once=once)
    finally:
        server.close()
    return server
