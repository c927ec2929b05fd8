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

from amaranth.hdl import Cat, Const, Mux, Value
from amaranth.lib.crc import catalog

__all__ = ["CRC32C_INIT", "crc32c_step", "crc32c_steps", "crc32c_matrix", "crc32c_words_model"]

#: Raw register value at the start of a CRC.
CRC32C_INIT = 0xFFFFFFFF


def crc32c_words_model(state, words):
    """Python model of :func:`crc32c_steps`: the raw state after ``words`` (32-bit ints)."""
    params = catalog.CRC32_ISCSI(data_width=32)
    # compute() applies init, reflection and output XOR; undo them to get the raw register.
    params._initial_crc = state  # noqa: SLF001 -- same trick lib.crc uses for its matrices
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
