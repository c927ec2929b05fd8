"""Register slices in front of and behind stream ports (see :class:`~rnic.hdl.stream_slice.StreamSlice`).

The components of the core put one on most streams that cross to or from a data-path
block, for timing: each block's ready/valid comes out of deep logic and went into the
other's.
"""

from amaranth.lib import wiring

from ..stream_slice import StreamSlice

__all__ = ["slice_into", "slice_out_of"]


def slice_into(m, name, port, *, full_rate=True):
    """A :class:`StreamSlice` named ``name`` in front of the stream ``port`` (a block's input,
    or a component's own output port, flipped); returns the slice's input."""
    m.submodules[name] = s = StreamSlice(port.payload.shape(), full_rate=full_rate)
    wiring.connect(m, s.o, port)
    return s.i


def slice_out_of(m, name, port, *, full_rate=True):
    """A :class:`StreamSlice` named ``name`` behind the stream ``port`` (a block's output, or
    a component's own input port, flipped); returns the slice's output."""
    m.submodules[name] = s = StreamSlice(port.payload.shape(), full_rate=full_rate)
    wiring.connect(m, port, s.i)
    return s.o
