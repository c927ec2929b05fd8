"""rnic.host.driver.uart: the bridge protocol codec, the device spec, and the termios serial port
on a pseudo-terminal with a Python model of the bridge on the other end."""

import os
import pty
import select
import threading

import pytest

from rnic.host.driver import regs
from rnic.host.driver.device import DeviceError, TransportError, open_device, parse_device_spec
from rnic.host.spec.regmap import MAGIC
from rnic.host.driver.uart import (CMD_PING, CMD_READ, CMD_WRITE, PROTOCOL_VERSION, STATUS_OKAY,
    STATUS_SLVERR, Codec, parse_uart_spec)


def test_codec():
    assert Codec.write(0x01C, 0x12345678) == b"W\x00\x1c\x12\x34\x56\x78"
    assert Codec.read(0xABC) == b"R\x0a\xbc"
    assert Codec.ping() == b"P"
    assert Codec.decode(Codec.read(0), b"r\x69\x57\x52\x50\x00") == (STATUS_OKAY, 0x69575250)
    assert Codec.decode(Codec.write(0, 1), b"w\x02") == (STATUS_SLVERR, None)
    assert Codec.decode(Codec.ping(), b"p\x01\x0d") == (STATUS_OKAY, (1, 13))
    with pytest.raises(TransportError, match="out of step"):
        Codec.decode(Codec.read(0), b"w\x00")
    with pytest.raises(TransportError, match="out of step"):
        Codec.decode(Codec.read(0), b"r\x00")
    with pytest.raises(TransportError, match="unknown status"):
        Codec.decode(Codec.write(0, 0), b"w\x07")
    with pytest.raises(ValueError):
        Codec.read(0x10000)


def test_spec():
    assert parse_uart_spec("/dev/ttyUSB1") == ("/dev/ttyUSB1", 115200)
    assert parse_uart_spec("/dev/ttyUSB1@3000000") == ("/dev/ttyUSB1", 3000000)
    with pytest.raises(ValueError):
        parse_uart_spec("/dev/x@fast")
    assert parse_device_spec("uart:/dev/ttyUSB1") == ("uart", "/dev/ttyUSB1")
    with pytest.raises(DeviceError, match="cannot open"):
        open_device("uart:/nonexistent/tty")


class BridgeModel(threading.Thread):
    """The bridge protocol on the master side of a pty, in front of a register bank model."""

    def __init__(self, fd):
        super().__init__(daemon=True)
        self.fd = fd
        self.bank = regs.BankModel(width=8, connections=16)
        self.stop = threading.Event()
        self.buf = b""

    def run(self):
        while not self.stop.is_set():
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if not r:
                continue
            try:
                self.buf += os.read(self.fd, 64)
            except OSError:
                return
            while self.buf:
                kind = self.buf[0]
                need = {CMD_WRITE: 7, CMD_READ: 3, CMD_PING: 1}.get(kind)
                if need is None:
                    self.buf = self.buf[1:]           # garbage between frames
                    continue
                if len(self.buf) < need:
                    break
                frame, self.buf = self.buf[:need], self.buf[need:]
                addr = int.from_bytes(frame[1:3], "big")
                if kind == CMD_PING:
                    os.write(self.fd, bytes([b"p"[0], PROTOCOL_VERSION, 12]))
                elif kind == CMD_READ:
                    data, resp = self.bank.read(addr)
                    os.write(self.fd, b"r" + data.to_bytes(4, "big") + bytes([resp]))
                else:
                    resp = self.bank.write(addr, int.from_bytes(frame[3:7], "big"))
                    os.write(self.fd, b"w" + bytes([resp]))


def test_serial_port_on_a_pty():
    master, slave = pty.openpty()
    path = os.ttyname(slave)
    model = BridgeModel(master)
    model.start()
    try:
        with open_device(f"uart:{path}@115200") as dev:        # identify() over the pty
            ident = dev.identify()
            assert ident.width == 8 and ident.connections == 16
            t = dev.transport
            assert t.addr_width == 12 and t.name == f"uart:{path}@115200"
            assert t.read32(0) == MAGIC
            t.write32(regs.SCRATCH_ADDR, 0xA5A5_0F0F)
            assert t.read32(regs.SCRATCH_ADDR) == 0xA5A5_0F0F
            assert dev.read_register("SCRATCH")["value"] == 0xA5A5_0F0F
            with pytest.raises(TransportError, match="SLVERR"):
                t.read32(0xFFC)
    finally:
        model.stop.set()
        model.join(2)
        os.close(master)
        os.close(slave)
