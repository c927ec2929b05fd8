"""Parameter limits of the RNIC, one definition each (stdlib only).

The gateware checks its parameters against these, the model and the driver use
them for the protocol, and the CLI lists them in its choices.
"""

__all__ = ["WIDTHS", "check_width", "check_uint", "MARKER_INTERVAL", "MIN_MULPDU", "MAX_MULPDU"]

#: Datapath widths W in octets that every gateware block supports.
WIDTHS = (4, 8, 16, 32)

#: Octets between two markers of one direction (RFC 5044 section 4.3).
MARKER_INTERVAL = 512

#: MULPDU never goes below this (RFC 5044 section 4.1 and 8.1) ...
MIN_MULPDU = 128
#: ... nor above this: 65535 minus the marker, pad and CRC octets of the longest FPDU.
MAX_MULPDU = 64768


def check_width(width):
    """``width`` if it is one of :data:`WIDTHS`, else ValueError naming the bad value."""
    if isinstance(width, bool) or width not in WIDTHS:
        raise ValueError(f"width must be one of {', '.join(map(str, WIDTHS))}, not {width!r}")
    return width


def check_uint(name, value, bits):
    """``value`` if it is an int (not a bool) that fits ``bits`` unsigned bits, else
    TypeError/ValueError naming ``name`` and the bad value (a header field's range)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= value < (1 << bits):
        raise ValueError(f"{name} = {value} does not fit {bits} bits")
    return value
