"""Synthesis hints for Yosys: one-hot FSM state registers, memories without read/write
collisions, register copies that Yosys keeps apart.

None of the hints changes what the design does once its registers are loaded; the first
two let Yosys build less logic, the third lets nextpnr place shorter nets.

* :func:`one_hot` puts ``fsm_encoding = "one-hot"`` on an FSM's state register. Yosys
  re-encodes an FSM only when it detects one, and it does not detect a register with an
  initial value, which Amaranth gives every FSM state register; with the attribute set it
  extracts the FSM and re-encodes it, so that each state test is one flip-flop instead of a
  compare of the whole state (one or two LUT levels in front of every decision). Yosys drops
  the initial value then ("Initialization value on FSM state register is ignored"): the
  state comes from the domain's reset, which every top of this project asserts at start
  (the board tops hold ``sync`` in reset until the PLL locks).
* :func:`no_rw_collision` puts Yosys's ``no_rw_check`` attribute on a memory: in no cycle
  whose read data is used does a read port read the row a write port writes. A block RAM
  port of the ECP5 (DP16KD) returns undefined data on such a collision, so Yosys otherwise
  emulates Amaranth's read-before-write (or transparent) semantics with a register copy of
  the write, an address compare and a multiplexer behind the block RAM's output, which is
  the slowest start of a path on the device. Yosys honours ``no_rw_check`` only on read
  ports it builds itself; :func:`rnic.host.tools.build.apply_no_rw_check` makes it hold for the
  synchronous read ports Amaranth emits. Mark a memory only with the argument why written
  beside it.
* :func:`register_copies` makes registers meant to hold copies of one value, one per
  group of consumers, for a value that fans out too far for one flip-flop to reach in a
  cycle. Yosys's ``opt_merge`` merges flip-flops (bit by bit) with the same input, enable
  and initial value, and a ``keep`` attribute on a wire does not stop it; one on the
  flip-flop cell does. The copies' wires carry :data:`REGISTER_COPY`, and
  :func:`rnic.host.tools.build.apply_keep_copies` puts ``keep`` on the cells that drive them.
"""

from amaranth.hdl import Signal
from amaranth.lib import fifo
from amaranth.lib.memory import Memory

__all__ = ["one_hot", "no_rw_collision", "register_copies", "SyncFIFOBuffered", "NO_RW_CHECK",
           "REGISTER_COPY"]

#: The attribute :func:`no_rw_collision` sets (Yosys's name).
NO_RW_CHECK = "no_rw_check"
#: The attribute :func:`register_copies` puts on the copies' wires (this project's name).
REGISTER_COPY = "register_copy"


def one_hot(fsm):
    """Ask Yosys to encode ``fsm`` (the object of a closed ``with m.FSM() as fsm:`` block)
    one-hot. Returns the state signal."""
    # Amaranth 0.5 has no public accessor for the state signal; it is created when the
    # ``with`` block closes and kept in the FSM's data.
    state = getattr(fsm, "_data", {}).get("signal")
    if state is None:
        raise TypeError("one_hot() takes the FSM of a closed 'with m.FSM() as fsm:' block")
    state.attrs["fsm_encoding"] = "one-hot"
    return state


def no_rw_collision(memory):
    """Mark ``memory`` (an :class:`amaranth.lib.memory.Memory`, before it is elaborated):
    its read ports never read, in a cycle whose data is used, a row written in that cycle.
    Returns the memory."""
    if not isinstance(memory, Memory):
        raise TypeError(f"no_rw_collision() takes a Memory, not {memory!r}")
    memory.attrs[NO_RW_CHECK] = 1
    return memory


def register_copies(width, count, *, name):
    """``count`` registers of ``width`` bits named ``name0``, ``name1``, ... (initial value
    0), to be loaded with one value together, each feeding its own consumers; marked with
    :data:`REGISTER_COPY` so that the build keeps them apart."""
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be a positive integer, not {width!r}")
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, not {count!r}")
    return [Signal(width, name=f"{name}{k}", attrs={REGISTER_COPY: 1}) for k in range(count)]


class SyncFIFOBuffered(fifo.SyncFIFOBuffered):
    """:class:`amaranth.lib.fifo.SyncFIFOBuffered` with its storage marked by
    :func:`no_rw_collision`: a FIFO reads only rows that hold an entry and writes only rows
    that do not (its read and write pointers meet only when it is empty or full, and then
    it does not read, or does not write).

    Yosys maps a memory of up to 16 rows to distributed RAM and a deeper one to block RAM.
    Keep it so for wide queues: a DP16KD is at most 36 bits wide, and the DP16KD of a
    queue hundreds of bits wide spread along a row of block RAMs across the die, and its
    wires with them: the placed wire length grows more than the LUTs saved are worth.
    """

    def elaborate(self, platform):
        m = super().elaborate(platform)
        if self.depth >= 2:            # (smaller FIFOs have no storage memory)
            no_rw_collision(m.submodules["storage"])
        return m
