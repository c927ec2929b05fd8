"""The register bank's core side, cut into the parts the components of the core use.

:func:`register_signature` selects registers or single fields of
:func:`~rnic.hdl.regbank.core_signature`; a component takes the selection as its
``regs`` port (``In(register_signature(...))``) and :func:`connect_registers` wires the
port to the bank's ``regs``, so that each component names the register fields it reads
and drives exactly as the register map spells them (``regs.ctx_cmd.commit``).
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..regbank import core_signature

__all__ = ["register_signature", "connect_registers"]

_BANK = core_signature()


def register_signature(*names):
    """The members of the bank's ``regs`` that ``names`` select, in the bank's orientation.

    A name is a register (``"ctx_cmd"``: all its core-facing fields) or one field
    (``"ctx_status.busy"``; a W1C field's set input is ``"err_status.pending_set"``),
    lower case as :func:`~rnic.hdl.regbank.core_signature` spells them. A component
    takes the result as ``In(register_signature(...))``: it reads the RW, PULSE and W1C
    fields and drives the RO fields and the W1C ``*_set`` inputs.
    """
    regs = {}
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"a register name must be a string, not {name!r}")
        reg, _, field = name.partition(".")
        if reg not in _BANK.members:
            raise ValueError(f"{name!r}: the register map has no core-facing register {reg!r}")
        fields = _BANK.members[reg].signature.members
        if field and field not in fields:
            raise ValueError(f"{name!r}: register {reg!r} has no core-facing field {field!r}")
        selected = regs.setdefault(reg, {})
        for f in ([field] if field else list(fields)):
            selected[f] = fields[f]
    return wiring.Signature({reg: Out(wiring.Signature(fields)) for reg, fields in regs.items()})


def connect_registers(m, regs, port):
    """Connect a component's ``port`` (``In(register_signature(...))``) to the bank's
    ``regs``, field by field, with combinational assignments in module ``m``."""
    for path, member, value in port.signature.flatten(port):
        bank = regs
        for name in path:
            bank = getattr(bank, name)
        if member.flow == In:
            m.d.comb += value.eq(bank)
        else:
            m.d.comb += bank.eq(value)
