"""rnic.host.net.device_memory: the books of a device's memory and STag table rows."""

import pytest

from rnic.host.net.device_memory import DeviceMemory, OutOfMemory, StagRows


def test_ranges_by_address_and_from_the_top():
    mem = DeviceMemory(0x10000)
    a = mem.alloc(100)
    assert a == 0x10000 - 128 and a % 64 == 0            # from the top, aligned
    assert mem.alloc_at(0, 0x1000) == 0                   # a region whose TO is 0
    with pytest.raises(ValueError, match="taken"):
        mem.alloc_at(0x800, 16)
    with pytest.raises(ValueError, match="taken or outside"):
        mem.alloc_at(0xFFF0, 0x20)
    b = mem.alloc(0x4000, align=4096)
    assert b % 4096 == 0 and b + 0x4000 <= a
    mem.free(a)
    mem.free(b)
    mem.free(0)
    assert mem.free_octets == 0x10000                     # merged back into one range
    assert mem.alloc_at(0, 0x10000) == 0
    with pytest.raises(OutOfMemory, match="no free range of 1 octets"):
        mem.alloc(0)


def test_stag_rows():
    rows = StagRows(16)
    assert rows.take(0x1230) == 0 and rows.take(0x1230) == 0     # the same STag again
    with pytest.raises(ValueError, match="row 0 of the STag table, which STag 0x00001230"):
        rows.take(0x4560)
    fresh = {rows.new() for _ in range(15)}
    assert {s % 16 for s in fresh} == set(range(1, 16))          # every free row, never STag 0
    with pytest.raises(ValueError, match="full"):
        rows.new()
    s = next(iter(fresh))
    rows.release(s)
    again = rows.new()
    assert again % 16 == s % 16 and again != s                   # a new key in the freed row
    with pytest.raises(ValueError, match="power of 2"):
        StagRows(12)
