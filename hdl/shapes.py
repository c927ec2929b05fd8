"""Field shapes made from the spec layer's enumerations.

The stdlib ``enum.IntEnum``s of :mod:`rnic.host.spec` are the one definition of a code's
members and values; the gateware needs them as Amaranth enumerations of an explicit width
(a layout field of that type, members usable in comparisons and ``Switch``).
"""

import types

from amaranth.hdl import unsigned
from amaranth.lib import enum

__all__ = ["shaped_enum"]


def shaped_enum(spec_enum, width, *, module, name=None):
    """``spec_enum`` (a stdlib ``IntEnum``) as an ``amaranth.lib.enum.IntEnum`` of ``width``
    bits with the same members and values, named ``name`` (default: the same name) in
    ``module``."""
    if not isinstance(width, int) or width < 1 or max(spec_enum) >= 1 << width:
        raise ValueError(f"{spec_enum.__name__} does not fit {width!r} bits")

    def members(namespace):
        for member in spec_enum:
            namespace[member.name] = member.value
    shaped = types.new_class(name or spec_enum.__name__, (enum.IntEnum,), {"shape": unsigned(width)},
                             exec_body=members)
    shaped.__doc__ = (f":class:`{spec_enum.__module__}.{spec_enum.__name__}` as a "
                      f"{width}-bit field shape.")
    shaped.__module__ = module
    return shaped
