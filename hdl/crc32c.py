"""CRC32c (Castagnoli, as in iSCSI and MPA) over 32-bit words, as combinational logic.

MPA's CRC covers whole 4-octet words (every FPDU, markers included, is a
multiple of 4 octets and starts on the 4-octet grid), so the gateware works
on 32-bit words. The first octet of a word is in bits 0..7, as on the wire.

Why not :class:`amaranth.lib.crc.Processor`: it is a sequential unit with one
fixed data width, a registered state and its own ``start``/``valid``. The MPA
blocks need the update as a *function*: chained over a variable number of
words inside one beat (an FPDU may end and the next one start in the same
beat), and applied to a state that lives in a per-connection context memory.
The algorithm comes from :data:`amaranth.lib.crc.catalog.CRC32_ISCSI`: its
public parameters and :meth:`~amaranth.lib.crc.Parameters.compute` give the
word model, from which the XOR matrices are derived, so the polynomial and
bit order come from the library.

The state held in the gateware is the raw (un-complemented, reflected)
register: start from :data:`CRC32C_INIT`, apply :func:`crc32c_step` per word,
and the CRC value is ``state ^ 0xFFFFFFFF``, sent least significant octet first.

The register update by one word is linear in ``state ^ word``:
``state' = M(state ^ word)``, M being the update by a zero word. The blocks
that fold several words per cycle use the powers of M (:func:`crc32c_power_masks`,
:func:`crc32c_power_const`, :func:`crc32c_apply`) and :func:`crc32c_lanes`.
"""

from functools import lru_cache

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import crc, wiring
from amaranth.lib.crc import catalog
from amaranth.lib.wiring import In, Out

from .beat import check_width

__all__ = [
    "CRC32C_INIT", "crc32c_words_model", "crc32c_word_model", "crc32c_power_masks",
    "crc32c_power_const", "crc32c_apply", "crc32c_matrix", "crc32c_step", "crc32c_steps",
    "crc32c_lanes", "CRC32cBeat",
]

#: Raw register value at the start of a CRC.
CRC32C_INIT = 0xFFFFFFFF


def _reflect32(value):
    return int(f"{value:032b}"[::-1], 2)


def crc32c_words_model(state, words):
    """Python model of :func:`crc32c_steps`: the raw state after ``words`` (32-bit ints)."""
    algo = catalog.CRC32_ISCSI
    # compute() takes its initial value in the unreflected register order and returns the
    # reflected one; reflect the state going in and drop the output XOR to get the raw register.
    params = crc.Parameters(crc.Algorithm(
        crc_width=algo.crc_width, polynomial=algo.polynomial, initial_crc=_reflect32(state),
        reflect_input=algo.reflect_input, reflect_output=algo.reflect_output, xor_output=0),
        data_width=32)
    return params.compute(list(words))


def crc32c_word_model(state, word):
    """Raw CRC32c register after one 32-bit ``word`` (first octet in bits 0..7): after all
    words of ``data`` from :data:`CRC32C_INIT`, ``state ^ 0xFFFFFFFF == crc32c.crc32c(data)``."""
    return crc32c_words_model(state, [word])


def _masks(columns):
    """Row masks of the matrix with these columns: bit ``j`` of mask ``i`` is bit ``i`` of
    column ``j``."""
    return tuple(sum(((col >> i) & 1) << j for j, col in enumerate(columns)) for i in range(32))


@lru_cache(maxsize=None)
def crc32c_power_masks(power):
    """Masks of M^power (M: the register update by a zero word): bit ``i`` of M^power(x) is
    the parity of ``x & masks[i]``. M^0 is the identity."""
    columns = []
    for j in range(32):
        x = 1 << j
        for _ in range(power):
            x = crc32c_word_model(x, 0)
        columns.append(x)
    return _masks(columns)


@lru_cache(maxsize=None)
def crc32c_power_const(value, power):
    """M^power(value) for a constant ``value``."""
    for _ in range(power):
        value = crc32c_word_model(value, 0)
    return value


def crc32c_apply(x, power=1):
    """Combinational M^power(x) of a 32-bit value: per output bit one XOR chain over the bits
    of ``x`` its mask selects (0 for an empty mask)."""
    x = Value.cast(x)
    bits = []
    for mask in crc32c_power_masks(power):
        terms = [x[j] for j in range(32) if (mask >> j) & 1]
        acc = terms[0] if terms else Const(0, 1)
        for t in terms[1:]:
            acc = acc ^ t
        bits.append(acc)
    return Cat(*bits)


@lru_cache(maxsize=None)
def crc32c_matrix():
    """Tuple of 32 bit masks: output bit ``i`` of :func:`crc32c_step` is the parity of
    ``Cat(state, word) & masks[i]`` (the update is M(state ^ word))."""
    return tuple(mask | mask << 32 for mask in crc32c_power_masks(1))


def crc32c_step(state, word):
    """Raw CRC32c state after one 32-bit ``word``; pure combinational Amaranth expression
    (one XOR chain of 64 inputs at most per bit, over ``Cat(state, word)``)."""
    state = Value.cast(state)
    word = Value.cast(word)
    if len(state) != 32 or len(word) != 32:
        raise ValueError(f"crc32c_step needs a 32-bit state and a 32-bit word, not "
                         f"{len(state)} and {len(word)} bits")
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


def crc32c_lanes(m, state, words, starts, *, unroll):
    """CRC registers over the word lanes of one beat, built in module ``m``.

    ``state`` is the register before lane 0, ``starts[k]`` restarts the CRC at lane k (from
    :data:`CRC32C_INIT`). Returns ``(cins, after)``: the register before each lane (after
    the restart, so a CRC lane sends ``~cins[k]``) and the register after the last lane.

    With ``unroll`` the register before/after lane k is built in closed form,
    ``M^(k-j)(INIT or state) ^ XOR_i M^(k-i)(w_i)`` (j = the last restart), which puts one
    XOR tree between the state register and its next value instead of one per lane
    (O(L^2) trees); otherwise the lanes are chained, one update M(register ^ word) each.
    """
    L = len(words)
    cins = []
    if not unroll:
        for k in range(L):
            cin = Signal(32, name=f"crc_in{k}")
            m.d.comb += cin.eq(Mux(starts[k], CRC32C_INIT, state))
            cins.append(cin)
            state = crc32c_apply(Value.cast(cin) ^ Value.cast(words[k]))
        return cins, state
    word_terms = {}               # (i, p): M^p(w_i)
    state_terms = {}              # p: M^p(state)

    def word_term(i, p):
        if (i, p) not in word_terms:
            word_terms[i, p] = Signal(32, name=f"crc_w{i}_p{p}")
            m.d.comb += word_terms[i, p].eq(crc32c_apply(words[i], p))
        return word_terms[i, p]

    def state_term(p):
        if p not in state_terms:
            state_terms[p] = Signal(32, name=f"crc_s_p{p}")
            m.d.comb += state_terms[p].eq(crc32c_apply(state, p))
        return state_terms[p]

    def register_before(k):
        """Register before lane k (k = L: after the last lane), ignoring a restart at k."""
        base = state_term(k)      # from the last restart j < k (a constant), else from state
        for j in range(k):        # later j wins: build from the oldest
            base = Mux(starts[j], crc32c_power_const(CRC32C_INIT, k - j), base)
        acc = base
        for i in range(k):
            dropped = 0
            for j in range(i + 1, k):
                dropped = dropped | starts[j]
            acc = acc ^ Mux(dropped, 0, word_term(i, k - i))
        return acc

    for k in range(L):
        if k == 0:
            before = Value.cast(state)
        else:
            before = Signal(32, name=f"crc_before{k}")
            m.d.comb += before.eq(register_before(k))
        cin = Signal(32, name=f"crc_in{k}")
        m.d.comb += cin.eq(Mux(starts[k], CRC32C_INIT, before))
        cins.append(cin)
    return cins, register_before(L)


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
