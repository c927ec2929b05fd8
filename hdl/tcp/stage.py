"""Pipeline registers inside the rule blocks.

A rule block (:class:`~rnic.hdl.tcp.ack_update.TcpAckUpdate` and its kind) is a function
of its inputs. Where one is too deep for a cycle, it computes it in steps: each step's
values are registered (:func:`staged`) and the next step reads them. The block's inputs must
then hold still for its ``LATENCY`` cycles, after which its outputs are its function of
them; the event engine waits that long in each state (it holds the connection's entry
and the segment still meanwhile).
"""

from amaranth.hdl import Signal, Value

__all__ = ["staged"]


def staged(m, value, name, shape=None):
    """A register named ``name`` (of ``shape``, else ``value``'s) that takes ``value`` every
    cycle: one step of a rule block."""
    reg = Signal(Value.cast(value).shape() if shape is None else shape, name=name)
    m.d.sync += reg.eq(value)
    return reg
