"""The UART bridge protocol: the octets both ends use (stdlib only).

The gateware end is :class:`rnic.hdl.uart_bridge.UARTBridge`, the host end
:class:`rnic.host.driver.uart.UartTransport`; the protocol is described there.
"""

__all__ = [
    "CMD_WRITE", "CMD_READ", "CMD_PING", "ANS_WRITE", "ANS_READ", "ANS_PING",
    "PROTOCOL_VERSION", "STATUS_OKAY", "STATUS_SLVERR", "STATUS_DECERR", "STATUS_TIMEOUT",
    "STATUS_NAMES", "ANSWER_LENGTH", "DEFAULT_BAUD", "FRAME_TIMEOUT_S",
]

CMD_WRITE, CMD_READ, CMD_PING = b"W"[0], b"R"[0], b"P"[0]
ANS_WRITE, ANS_READ, ANS_PING = b"w"[0], b"r"[0], b"p"[0]
PROTOCOL_VERSION = 1
STATUS_OKAY, STATUS_SLVERR, STATUS_DECERR, STATUS_TIMEOUT = 0x00, 0x02, 0x03, 0x04
STATUS_NAMES = {STATUS_OKAY: "OKAY", 0x01: "EXOKAY", STATUS_SLVERR: "SLVERR",
                STATUS_DECERR: "DECERR", STATUS_TIMEOUT: "TIMEOUT"}
#: Answer lengths in octets, by request kind.
ANSWER_LENGTH = {CMD_WRITE: 2, CMD_READ: 6, CMD_PING: 3}
DEFAULT_BAUD = 115200
#: The bridge's default frame timeout.
FRAME_TIMEOUT_S = 0.020
