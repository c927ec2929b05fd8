"""ICMP echo request and reply messages (RFC 792): type, code, checksum, identifier,
sequence number, then the data, which a reply carries back unchanged.

The checksum covers the whole ICMP message (header and data) with the Internet checksum
(:func:`rnic.host.model.ipv4.checksum`).
"""

import struct
from dataclasses import dataclass

from rnic.host.model.ipv4 import checksum, checksum_ok
from rnic.host.spec.net import ICMP_HEADER_LEN, IcmpType
from rnic.host.spec.limits import check_uint

__all__ = ["IcmpEcho", "parse", "build", "echo_reply", "message_checksum_ok"]

_HEADER = struct.Struct(">BBHHH")


@dataclass(frozen=True, kw_only=True)
class IcmpEcho:
    """The 8-octet header of an ICMP echo message.

    Parameters
    ----------
    type : int
        :attr:`IcmpType.ECHO_REQUEST` or :attr:`IcmpType.ECHO_REPLY` (any 8-bit type parses:
        an :class:`IcmpType` member when the NIC knows it).
    code : int
        8 bits, 0 for echo.
    identifier, sequence : int
        16 bits each, copied from request to reply.
    checksum : int or None
        As on the wire; ``None`` lets :func:`build` compute it.
    """
    type: int
    identifier: int = 0
    sequence: int = 0
    code: int = 0
    checksum: int | None = None

    def __post_init__(self):
        check_uint("type", self.type, 8)
        if self.type in IcmpType._value2member_map_:
            object.__setattr__(self, "type", IcmpType(self.type))
        check_uint("code", self.code, 8)
        check_uint("identifier", self.identifier, 16)
        check_uint("sequence", self.sequence, 16)
        if self.checksum is not None:
            check_uint("checksum", self.checksum, 16)

    length = ICMP_HEADER_LEN

    def to_bytes(self, payload=b""):
        """The 8 header octets; a ``None`` checksum becomes the checksum over them and
        ``payload``."""
        raw = _HEADER.pack(self.type, self.code, 0, self.identifier, self.sequence)
        value = self.checksum
        if value is None:
            value = checksum(raw + bytes(payload))
        return raw[:2] + value.to_bytes(2, "big") + raw[4:]


def parse(message):
    """Split an ICMP message into its echo header and data (the checksum is kept, not
    checked: :func:`message_checksum_ok`).

    Raises
    ------
    ValueError
        The message is shorter than the 8-octet header.
    """
    message = bytes(message)
    if len(message) < ICMP_HEADER_LEN:
        raise ValueError(f"an ICMP message of {len(message)} octets is shorter than the "
                         f"{ICMP_HEADER_LEN}-octet echo header")
    type_, code, value, identifier, sequence = _HEADER.unpack_from(message)
    header = IcmpEcho(type=type_, code=code, checksum=value, identifier=identifier,
                      sequence=sequence)
    return header, message[ICMP_HEADER_LEN:]


def build(header, payload=b""):
    """The message: ``header`` (its ``None`` checksum computed) and ``payload``."""
    if not isinstance(header, IcmpEcho):
        raise TypeError(f"header must be an IcmpEcho, not {type(header).__name__}")
    payload = bytes(payload)
    return header.to_bytes(payload) + payload


def message_checksum_ok(message):
    """True when the checksum of the whole ICMP ``message`` matches."""
    return len(message) >= ICMP_HEADER_LEN and checksum_ok(message)


def echo_reply(request):
    """The echo reply message to the echo request message ``request``: type 0, code 0, the
    identifier, sequence and data of the request, the checksum computed over the reply."""
    header, payload = parse(request)
    reply = IcmpEcho(type=IcmpType.ECHO_REPLY, identifier=header.identifier,
                     sequence=header.sequence)
    return build(reply, payload)
