"""Host memory of a device with its own memory bus, and its STag table rows, shared by its data paths.

A device whose core places data into and fetches payload from a memory of its own (the
simulated device's ``m_axi``/``m_axi_rd`` memory, :class:`rnic.sim.device.SimDevice`) needs
the host stack to put application buffers there. :class:`DeviceMemory` hands out ranges of
it (at a given address, or from the top, aligned; freed explicitly); :class:`StagRows` hands out STags so that each
lands in a row of its own of the core's STag table (the receive path looks STag ``s`` up
in row ``s mod CAPS.STAGS``).

Neither class touches the device: they only keep the books, under the caller's lock.
"""

from __future__ import annotations

import bisect

__all__ = ["DeviceMemory", "StagRows", "OutOfMemory"]


class OutOfMemory(MemoryError):
    """No free range of the device's memory is large enough."""


class DeviceMemory:
    """Allocator over the addresses ``base .. size - 1`` of a device's memory: ranges at
    given addresses (:meth:`alloc_at`, a region whose TO is its address), others from the top.

    Parameters
    ----------
    size : int
        Octets of the memory (addresses ``0 .. size - 1``).
    base : int
        First address handed out.
    """

    def __init__(self, size, *, base=0):
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= base < size:
            raise ValueError(f"device memory of {size!r} octets leaves nothing above {base:#x}")
        self.size = size
        self.base = base
        self._free = [(base, size)]         # sorted, disjoint [start, end) ranges
        self._used = {}                     # start -> end

    def __repr__(self):
        return f"<DeviceMemory {self.size:#x} octets, {self.free_octets:#x} free>"

    @property
    def free_octets(self):
        return sum(end - start for start, end in self._free)

    def alloc(self, length, *, align=64):
        """The address of a fresh range of ``length`` octets (at least one is taken), as high
        as it fits (the low addresses stay for ranges asked for by address, :meth:`alloc_at`)."""
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ValueError(f"allocation length must be a non-negative int, not {length!r}")
        n = max(length, 1)
        for k in range(len(self._free) - 1, -1, -1):
            start, end = self._free[k]
            addr = (end - n) // align * align
            if addr >= start:
                self._take(k, addr, addr + n)
                return addr
        raise OutOfMemory(f"no free range of {n} octets in the device's memory "
                          f"({self.free_octets} of {self.size} octets free, fragmented)")

    def alloc_at(self, addr, length):
        """Take ``addr .. addr + length - 1`` (ValueError when any of it is taken or outside)."""
        n = max(length, 1)
        for k, (start, end) in enumerate(self._free):
            if start <= addr and addr + n <= end:
                self._take(k, addr, addr + n)
                return addr
        raise ValueError(f"device memory {addr:#x} + {n} is taken or outside "
                         f"{self.base:#x} .. {self.size:#x}")

    def _take(self, k, lo, hi):
        start, end = self._free.pop(k)
        rest = [r for r in ((start, lo), (hi, end)) if r[0] < r[1]]
        self._free[k:k] = rest
        self._used[lo] = hi

    def free(self, addr):
        """Give back the range that :meth:`alloc` / :meth:`alloc_at` returned at ``addr``."""
        end = self._used.pop(addr)
        k = bisect.bisect_left(self._free, (addr, end))
        self._free.insert(k, (addr, end))
        # merge with the neighbours
        if k + 1 < len(self._free) and self._free[k][1] == self._free[k + 1][0]:
            self._free[k] = (self._free[k][0], self._free.pop(k + 1)[1])
        if k > 0 and self._free[k - 1][1] == self._free[k][0]:
            self._free[k - 1] = (self._free[k - 1][0], self._free.pop(k)[1])


class StagRows:
    """Which STag holds which row of a core's STag table (``rows`` rows, a power of 2).

    :meth:`take` claims the row of a given STag; :meth:`new` picks a fresh STag in a free
    row (the row index in its low bits, a key that changes with every use above them, so
    that a stale STag of a freed row never matches again).
    """

    def __init__(self, rows):
        if rows < 1 or rows & (rows - 1):
            raise ValueError(f"STag table rows must be a power of 2, not {rows!r}")
        self.rows = rows
        self._owner = {}                    # row -> STag
        self._key = 0x5A

    def row(self, stag):
        return stag % self.rows

    def take(self, stag):
        """Claim ``stag``'s row; ValueError if another STag holds it."""
        row = self.row(stag)
        held = self._owner.get(row)
        if held is not None and held != stag:
            raise ValueError(f"STag {stag:#010x} needs row {row} of the STag table, which STag "
                             f"{held:#010x} holds (the core looks STag s up in row s mod {self.rows})")
        self._owner[row] = stag
        return row

    def new(self):
        """A fresh STag in a free row (claimed); ValueError when the table is full."""
        for row in range(1, self.rows) if self.rows > 1 else range(1):
            if row not in self._owner:
                self._key = (self._key * 5 + 1) & 0xFFFFFF or 1
                stag = ((self._key << self.rows.bit_length() - 1) | row) & 0xFFFFFFFF
                self._owner[row] = stag
                return stag
        raise ValueError(f"the STag table is full ({self.rows} rows)")

    def release(self, stag):
        row = self.row(stag)
        if self._owner.get(row) == stag:
            del self._owner[row]
