"""Register access over a serial line through the gateware UART bridge (:mod:`rnic.hdl.uart_bridge`).

The bridge protocol
-------------------
8N1 octets, one request at a time: the host sends a request and waits for
its answer before sending the next one. Addresses are byte addresses, 16
bits, and data 32 bits, both most significant octet first.

==========================  ==========================  ==================================
request (host -> board)     answer (board -> host)      meaning
==========================  ==========================  ==================================
``'W' A1 A0 D3 D2 D1 D0``   ``'w' S``                   write D at A (all four byte strobes)
``'R' A1 A0``               ``'r' D3 D2 D1 D0 S``       read A (D is 0 unless S is OKAY)
``'P'``                     ``'p' V AW``                ping: protocol version V (1), AW the
                                                        address bits of the bus behind it
==========================  ==========================  ==================================

``'W'`` = 0x57, ``'R'`` = 0x52, ``'P'`` = 0x50; the answers are the same
letters in lower case. The status octet S is the AXI4-Lite response:
0x00 OKAY, 0x02 SLVERR (e.g. an unmapped register), 0x03 DECERR (no slave
at that address; also for an address beyond the bridge's bus), or 0x04
TIMEOUT (the slave did not answer within the bridge's bus timeout; the
bridge withdrew the request).

Resynchronisation: between frames, the bridge drops any octet that is not
``'W'``, ``'R'`` or ``'P'``. Inside a frame, it drops the partial frame
(without answering) when the next octet does not come within its frame
timeout (20 ms by default) or when an octet arrives with a framing error
(a low stop bit; a *break*, the line held low, is one framing error). So a
host that lost track sends a break (or stays silent for longer than the
frame timeout), discards what it has received, and pings until it gets
``'p'``: :meth:`UartTransport.resync`. Because the host waits for each
answer longer than the frame timeout, a frame that lost an octet on the way
is dropped by the bridge before the host's next request starts, and can
never swallow the next request's octets.

This module is pure Python (no Amaranth): the :class:`Codec` encodes
requests and decodes answers (the gateware uses the same constants),
:class:`SerialPort` is a raw 8N1 serial port on ``termios`` (no pyserial
needed), and :class:`UartTransport` is the :class:`rnic.host.driver.transport.Transport`
that ``--device uart:/dev/ttyUSB1`` opens (``uart:PATH[@BAUD]``, default
115200 baud; the driver's device kind ``uart``, :data:`rnic.host.driver.device.BUILTIN_KINDS`).
On a board top with host memory it also reads and writes that memory (``mem_size``,
``mem_read``, ``mem_write``, as the simulated devices' transports), a 32-bit word per
request through the HMEM_* window of :mod:`rnic.host.spec.board`: about 0.8 ms a word at
115200 baud.
"""

from __future__ import annotations

import os
import select
import time

from rnic.host.driver.transport import DeviceError, Transport, TransportError
from rnic.host.spec.board import HMEM_ADDR, HMEM_DATA, HMEM_SIZE, HOST_MEMORY_BASE
from rnic.host.spec.uart import (ANSWER_LENGTH, ANS_PING, ANS_READ, ANS_WRITE, CMD_PING, CMD_READ,
                                 CMD_WRITE, DEFAULT_BAUD, FRAME_TIMEOUT_S, PROTOCOL_VERSION,
                                 STATUS_DECERR, STATUS_NAMES, STATUS_OKAY, STATUS_SLVERR,
                                 STATUS_TIMEOUT)

__all__ = [
    "CMD_WRITE", "CMD_READ", "CMD_PING", "ANS_WRITE", "ANS_READ", "ANS_PING",
    "PROTOCOL_VERSION", "STATUS_OKAY", "STATUS_SLVERR", "STATUS_DECERR", "STATUS_TIMEOUT",
    "STATUS_NAMES", "DEFAULT_BAUD", "FRAME_TIMEOUT_S", "Codec", "SerialPort", "UartTransport",
    "parse_uart_spec", "open_uart",
]



class Codec:
    """Requests as octets, answers from octets (no I/O)."""

    @staticmethod
    def _addr(addr):
        if not 0 <= addr < 1 << 16:
            raise ValueError(f"address {addr:#x} does not fit the bridge's 16 address bits")
        return addr.to_bytes(2, "big")

    @classmethod
    def write(cls, addr, value):
        return bytes([CMD_WRITE]) + cls._addr(addr) + (value & 0xFFFFFFFF).to_bytes(4, "big")

    @classmethod
    def read(cls, addr):
        return bytes([CMD_READ]) + cls._addr(addr)

    @staticmethod
    def ping():
        return bytes([CMD_PING])

    @staticmethod
    def answer_length(request):
        return ANSWER_LENGTH[request[0]]

    @staticmethod
    def decode(request, answer):
        """``(status, value)`` of the answer to ``request``: value is the read data, the
        ping's ``(version, addr_width)``, or None for a write. TransportError if the answer
        does not belong to the request."""
        kind = request[0]
        want = ANSWER_LENGTH[kind]
        if len(answer) != want or answer[0] != kind | 0x20:
            raise TransportError(f"answer {answer.hex() or 'nothing'} does not answer a "
                                 f"{chr(kind)!r} request (out of step with the bridge)")
        if kind == CMD_PING:
            return STATUS_OKAY, (answer[1], answer[2])
        status = answer[-1]
        if status not in STATUS_NAMES:
            raise TransportError(f"answer {answer.hex()} has an unknown status {status:#04x}")
        if kind == CMD_READ:
            return status, int.from_bytes(answer[1:5], "big")
        return status, None


class SerialPort:
    """A raw 8N1 serial port (POSIX ``termios``): ``write``, ``read(n, timeout)``,
    ``discard_input``, ``send_break``, ``close``."""

    def __init__(self, path, baud=DEFAULT_BAUD):
        import termios
        import tty
        speed = getattr(termios, f"B{baud}", None)
        if speed is None:
            raise DeviceError(f"{baud} baud is not a standard rate on this system")
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError as e:
            raise DeviceError(f"cannot open serial port {path}: {e.strerror}") from None
        try:
            tty.setraw(self.fd)
            attrs = termios.tcgetattr(self.fd)
            attrs[2] &= ~(termios.CSTOPB | termios.PARENB | termios.CRTSCTS)   # 8N1, no flow control
            attrs[2] |= termios.CLOCAL | termios.CREAD | termios.CS8
            attrs[4] = attrs[5] = speed
            termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
            termios.tcflush(self.fd, termios.TCIOFLUSH)
        except (termios.error, OSError) as e:
            os.close(self.fd)
            self.fd = None
            raise DeviceError(f"{path} is not a usable serial port: {e}") from None
        self.path = path
        self.baud = baud

    def write(self, data):
        view = memoryview(data)
        while view:
            _, w, _ = select.select([], [self.fd], [], 5.0)
            if not w:
                raise TransportError(f"{self.path}: write stalled")
            n = os.write(self.fd, view)
            view = view[n:]

    def read(self, n, timeout):
        """Up to ``n`` octets, fewer if ``timeout`` seconds pass first."""
        out = b""
        deadline = time.monotonic() + timeout
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                chunk = os.read(self.fd, n - len(out))
                if not chunk:
                    raise TransportError(f"{self.path}: the port went away")
                out += chunk
        return out

    def discard_input(self):
        import termios
        termios.tcflush(self.fd, termios.TCIFLUSH)

    def send_break(self):
        import termios
        termios.tcsendbreak(self.fd, 0)

    def close(self):
        fd, self.fd = getattr(self, "fd", None), None
        if fd is not None:
            os.close(fd)


class UartTransport(Transport):
    """:class:`rnic.host.driver.device.Transport` through the UART bridge.

    Parameters
    ----------
    port
        A :class:`SerialPort`, or any object with ``write(bytes)``,
        ``read(n, timeout) -> bytes``, ``discard_input()``, ``send_break()``
        and ``close()`` (tests use an in-memory pipe to a simulated bridge).
    timeout : float
        Seconds to wait for an answer; keep it above the bridge's frame
        timeout (see the module documentation).
    retries : int
        Resynchronisations tried when an answer is missing or out of step
        (a read is retried; a write is not repeated blindly: it is reported
        after resynchronising, since it may have taken effect).
    resync_on_open : bool
        Resynchronise (break, discard, ping) when constructed, and check the
        protocol version.
    name : str
        Description for status output.
    """

    def __init__(self, port, *, timeout=1.0, retries=2, resync_on_open=True, name="uart"):
        self.port = port
        self.timeout = timeout
        self.retries = retries
        self.name = name
        self.addr_width = None
        self._mem_size = None
        self._mem_next = None                   # HMEM_ADDR as last set and moved on (None: unknown)
        if resync_on_open:
            try:
                self.resync()
            except TransportError as e:
                self.close()
                raise DeviceError(f"{name}: no UART bridge answers: {e}") from None

    def _exchange(self, request):
        self.port.write(request)
        want = Codec.answer_length(request)
        answer = self.port.read(want, self.timeout)
        if len(answer) < want:
            raise TransportError(f"no answer within {self.timeout} s "
                                 f"(got {len(answer)} of {want} octets)")
        return Codec.decode(request, answer)

    def resync(self, attempts=4):
        """Get back in step: break, wait out the frame timeout, discard, ping."""
        last = None
        for _ in range(attempts):
            try:
                self.port.send_break()
            except Exception:          # OSError, termios.error: not every port can
                pass
            time.sleep(2 * FRAME_TIMEOUT_S)
            self.port.discard_input()
            try:
                _, (version, addr_width) = self._exchange(Codec.ping())
            except TransportError as e:
                last = e
                continue
            if version != PROTOCOL_VERSION:
                raise DeviceError(f"{self.name}: UART bridge protocol version {version}, this "
                                  f"driver speaks {PROTOCOL_VERSION}")
            self.addr_width = addr_width
            return
        raise last

    def ping(self):
        """``(version, addr_width)`` of the bridge."""
        return self._exchange(Codec.ping())[1]

    def _access(self, request, what, *, repeat):
        if self.port is None:
            raise TransportError("transport closed")
        tries = self.retries + 1 if repeat else 1
        for attempt in range(tries):
            try:
                status, value = self._exchange(request)
                break
            except TransportError as e:
                try:
                    self.resync()
                except (TransportError, DeviceError) as e2:
                    raise TransportError(f"{what}: {e}; resynchronising failed: {e2}") from None
                if attempt + 1 >= tries:
                    raise TransportError(f"{what}: {e}") from None
        if status != STATUS_OKAY:
            raise TransportError(f"{what}: {STATUS_NAMES[status]}")
        return value

    def read32(self, addr):
        return self._access(Codec.read(addr), f"reading {addr:#x}", repeat=True)

    def write32(self, addr, value):
        self._access(Codec.write(addr, value), f"writing {addr:#x}", repeat=False)

    # -- the board's host memory (rnic.host.spec.board: the HMEM_* window) -------------
    @property
    def mem_size(self):
        """Octets of the board's host memory (0: the top has none; its bridge's bus ends
        below the window, or the window does not answer)."""
        if getattr(self, "_mem_size", None) is None:
            try:
                self._mem_size = self.read32(HOST_MEMORY_BASE + HMEM_SIZE)
            except TransportError:
                self._mem_size = 0
        return self._mem_size

    def _mem_words(self, addr, n, what):
        """The first word address and the word count of ``n`` octets at ``addr``, checked
        against the memory's size."""
        size = self.mem_size
        if addr < 0 or n < 0 or addr + n > size:
            raise TransportError(f"{what} {n} octets at {addr:#x}: beyond the board's host "
                                 f"memory ({size} octets)")
        first = addr & ~3
        return first, (addr + n + 3 - first) // 4

    def _mem_access(self, word_addr, request, what):
        """One HMEM_DATA access at ``word_addr``. HMEM_ADDR moves on with every access, so an
        access whose answer was lost is repeated from a fresh HMEM_ADDR (a word written twice
        is the same word)."""
        for attempt in range(self.retries + 1):
            try:
                if attempt or self._mem_next != word_addr:
                    self._mem_next = None
                    self.write32(HOST_MEMORY_BASE + HMEM_ADDR, word_addr)
                value = self._access(request, what, repeat=False)
                self._mem_next = word_addr + 4
                return value
            except TransportError:
                self._mem_next = None
                if attempt == self.retries:
                    raise
        raise AssertionError("unreachable")

    def mem_read(self, addr, n):
        """``n`` octets of the board's host memory at ``addr``, a word per request."""
        first, words = self._mem_words(addr, n, "reading")
        if not n:
            return b""
        out = bytearray()
        for i in range(words):
            word = first + 4 * i
            value = self._mem_access(word, Codec.read(HOST_MEMORY_BASE + HMEM_DATA),
                                     f"reading host memory at {word:#x}")
            out += value.to_bytes(4, "little")
        skip = addr - first
        return bytes(out[skip:skip + n])

    def mem_write(self, addr, data):
        """Write ``data`` into the board's host memory at ``addr``, a word per request (the
        words at the edges read first where ``data`` covers them in part)."""
        data = bytes(data)
        first, words = self._mem_words(addr, len(data), "writing")
        if not data:
            return
        buf = bytearray(4 * words)
        skip = addr - first
        if skip:                                # the first word in part
            buf[:4] = self.mem_read(first, 4)
        if (addr + len(data)) % 4 and (words > 1 or not skip):   # the last word in part
            buf[-4:] = self.mem_read(first + 4 * (words - 1), 4)
        buf[skip:skip + len(data)] = data
        for i in range(words):
            word = first + 4 * i
            value = int.from_bytes(buf[4 * i:4 * i + 4], "little")
            self._mem_access(word, Codec.write(HOST_MEMORY_BASE + HMEM_DATA, value),
                             f"writing host memory at {word:#x}")

    def close(self):
        port, self.port = getattr(self, "port", None), None
        if port is not None:
            port.close()


def parse_uart_spec(arg):
    """``(path, baud)`` from ``PATH[@BAUD]``."""
    if not arg:
        raise ValueError("expected uart:PATH[@BAUD] (e.g. uart:/dev/ttyUSB1@115200)")
    path, sep, baud = arg.rpartition("@")
    if not sep:
        return arg, DEFAULT_BAUD
    if not path or not baud.isdigit() or int(baud) <= 0:
        raise ValueError(f"bad UART spec {arg!r} (uart:PATH[@BAUD])")
    return path, int(baud)


def open_uart(arg, **kw):
    """Device-kind opener for ``uart:PATH[@BAUD]``."""
    try:
        path, baud = parse_uart_spec(arg)
    except ValueError as e:
        raise DeviceError(str(e)) from None
    port = SerialPort(path, baud)
    return UartTransport(port, name=f"uart:{path}@{baud}", **kw)

