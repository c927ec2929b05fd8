"""CRC32c (Castagnoli, as in iSCSI and MPA) over 32-bit words, as combinational logic.

MPA's CRC covers whole 4-octet words (every FPDU, markers included, is a
multiple of 4 octets and starts on the 4-octet grid), so the gateware works
on 32-bit words. The first octet of a word is in bits 0..7, as on the wire.

Why not :class:`amaranth.lib.crc.Processor`: it is a sequential unit with one
fixed data width, a registered state and its own ``start``/``valid``. The MPA
blocks need the update as a *function*: chained over a variable number of
words inside one beat (an FPDU may end and the next one start in the same
beat), and applied to a state that lives in a per-connection context memory.
The algorithm itself is taken from :data:`amaranth.lib.crc.catalog.CRC32_ISCSI`
(its public :meth:`~amaranth.lib.crc.Parameters.compute` is used to derive the
XOR matrices), so the polynomial and bit order come from the library.

The state held in the gateware is the raw (un-complemented, reflected)
register: start from :data:`CRC32C_INIT`, apply :func:`crc32c_step` per word,
and the CRC value is ``state ^ 0xFFFFFFFF``, sent least significant octet first.
"""

from functools import lru_cache

from amaranth.hdl import Cat, Mux, Value
from amaranth.lib.crc import catalog

from .beat import check_width

__all__ = ["CRC32C_INIT", "crc32c_step", "crc32c_steps", "crc32c_matrix", "crc32c_words_model"]

#: Raw register value at the start of a CRC.
CRC32C_INIT = 0xFFFFFFFF


def crc32c_words_model(state, words):
    """Python model of :func:`crc32c_steps`: the raw state after ``words`` (32-bit ints)."""
    params = catalog.CRC32_ISCSI(data_width=32)
    # compute() takes its initial value in the unreflected register order and returns the
    # reflected one; reflect the state going in and drop the output XOR to get the raw register.
    params._initial_crc = int(f"{state:032b}"[::-1], 2)  # noqa: SLF001
    params._xor_output = 0
    return params.compute(list(words))


@lru_cache(maxsize=None)
def crc32c_matrix():
    """Tuple of 32 bit masks: output bit ``i`` is the parity of ``Cat(state, word) & masks[i]``."""
    columns = []
    for j in range(32):            # effect of state bit j
        columns.append(crc32c_words_model(1 << j, [0]))
    for j in range(32):            # effect of word bit j
        columns.append(crc32c_words_model(0, [1 << j]))
    masks = []
    for i in range(32):
        mask = 0
        for j, col in enumerate(columns):
            if (col >> i) & 1:
                mask |= 1 << j
        masks.append(mask)
    return tuple(masks)


def crc32c_step(state, word):
    """Raw CRC32c state after one 32-bit ``word``; pure combinational Amaranth expression."""
    state = Value.cast(state)
    word = Value.cast(word)
    if len(state) != 32 or len(word) != 32:
        raise ValueError("crc32c_step needs a 32-bit state and a 32-bit word")
    bits = Cat(state, word)
    out = []
    for mask in crc32c_matrix():
        terms = [bits[j] for j in range(64) if (mask >> j) & 1]
        acc = terms[0]
        for t in terms[1:]:
            acc = acc ^ t
        out.append(acc)
    return Cat(*out)


def crc32c_steps(state, words, enables):
    """Chain :func:`crc32c_step` over ``words``, skipping words whose enable is 0."""
    state = Value.cast(state)
    for word, en in zip(words, enables):
        state = Mux(en, crc32c_step(state, word), state)
    return state


from amaranth.hdl import Module, Signal  # noqa: E402 -- kept with the component appended below
from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402

__all__ += ["CRC32cBeat"]


class CRC32cBeat(wiring.Component):
    """Running CRC32c over the 32-bit words of a ``width``-octet beat.

    Each cycle with ``valid`` high the first ``words`` 32-bit words of ``data``
    (lanes ``0 .. 4*words-1``; word ``i`` is ``data[32*i:32*i+32]``, its first
    octet in bits 0..7) are folded into the running state; ``start`` restarts
    from :data:`CRC32C_INIT` before folding this beat's words (``start`` with
    ``words == 0`` gives the CRC of nothing). Cycles with ``valid`` low leave
    the state alone.

    Latency 1: the cycle after a valid beat, ``crc`` is the finished CRC32c
    value (complemented state, as ``crc32c.crc32c`` returns it and as it goes
    on the wire least significant octet first) of every word from the last
    ``start`` through that beat, and ``crc_valid`` is high for that one cycle.
    ``crc`` holds until the next valid beat. Throughput: one beat per cycle,
    no stalls. After reset the state is :data:`CRC32C_INIT` (``crc`` reads 0).

    Parameters
    ----------
    width : int
        Octets per beat: 4, 8, 16 or 32.

    Ports
    -----
    data : In(8*width)
    words : In(range(width//4 + 1))
        Valid 32-bit words from lane 0; values above ``width//4`` are undefined.
    start, valid : In(1)
    crc : Out(32)
        CRC value (state ^ 0xFFFFFFFF), registered.
    state : Out(32)
        Raw register (for saving into a per-connection context).
    crc_valid : Out(1)
        ``valid`` delayed by one cycle.
    """

    def __init__(self, *, width):
        self.width = check_width(width)
        super().__init__({
            "data":      In(8 * width),
            "words":     In(range(width // 4 + 1)),
            "start":     In(1),
            "valid":     In(1),
            "crc":       Out(32),
            "state":     Out(32, init=CRC32C_INIT),
            "crc_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        nwords = self.width // 4
        # One named signal per word step: keeps every expression one step deep
        # (Amaranth's Python simulator does not share subexpressions).
        nxt = Signal(32, name="state_0")
        m.d.comb += nxt.eq(Mux(self.start, CRC32C_INIT, self.state))
        for i in range(nwords):
            word = self.data[32 * i:32 * (i + 1)]
            step = Signal(32, name=f"state_{i + 1}")
            m.d.comb += step.eq(crc32c_steps(nxt, [word], [self.words > i]))
            nxt = step
        m.d.sync += self.crc_valid.eq(self.valid)
        with m.If(self.valid):
            m.d.sync += self.state.eq(nxt)
        m.d.comb += self.crc.eq(self.state ^ 0xFFFFFFFF)
        return m
