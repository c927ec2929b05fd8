"""The connection table: which connection id a segment's addresses and ports belong to, a
hash table in block RAM."""

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..beat import conn_bits

__all__ = ["TcpConnTable", "ConnKey", "ConnTableOp", "ConnTableCmd", "ConnTableResp", "WAYS"]

#: Entries a bucket holds (the choice of the way to write is written for two).
WAYS = 2


class ConnKey(data.StructLayout):
    """What identifies a connection to the NIC: the peer's address and port, and the local
    port (the local address is the NIC's)."""

    def __init__(self):
        super().__init__({"local_port": unsigned(16), "remote_port": unsigned(16),
                          "remote_ip": unsigned(32)})


class ConnTableOp(enum.Enum, shape=unsigned(2)):
    """What a command of :class:`TcpConnTable` does."""
    LOOKUP = 0
    INSERT = 1
    REMOVE = 2


class ConnTableCmd(data.StructLayout):
    """A command: ``op`` on ``key``; ``conn`` the connection id an INSERT enters."""

    def __init__(self, *, connections):
        super().__init__({"op": ConnTableOp, "key": ConnKey(),
                          "conn": unsigned(conn_bits(connections))})


class ConnTableResp(data.StructLayout):
    """The answer to a command: ``op`` as it was; ``hit`` (LOOKUP: the key is in the table;
    INSERT: it was entered; REMOVE: it was there and is gone); ``conn`` the key's
    connection id (LOOKUP, REMOVE with ``hit``)."""

    def __init__(self, *, connections):
        super().__init__({"op": ConnTableOp, "hit": unsigned(1),
                          "conn": unsigned(conn_bits(connections))})


class _Entry(data.StructLayout):
    def __init__(self, connections):
        super().__init__({"valid": unsigned(1), "key": ConnKey(),
                          "conn": unsigned(conn_bits(connections))})


class TcpConnTable(wiring.Component):
    """A hash table from :class:`ConnKey` to connection id.

    ``2 * connections`` buckets (rounded up to a power of 2) of :data:`WAYS` entries each,
    in one block RAM row per bucket; a key's bucket is
    :func:`rnic.host.spec.tcp.conn_hash` of it. LOOKUP compares the key with both entries
    of its bucket. INSERT enters a key in its bucket: over the entry that holds the key
    already, else in the first free entry; with both entries taken by other keys it fails
    (``hit`` 0), and the engine refuses that connection. REMOVE frees the key's entry.
    The table starts empty.

    Parameters
    ----------
    connections : int
        Connection ids 0 .. connections - 1.

    Ports
    -----
    cmd : In(stream.Signature(ConnTableCmd(connections=)))
    resp : Out(stream.Signature(ConnTableResp(connections=)))
        One answer per command, in order; registered.

    Latency: the answer is valid 3 cycles after its command was taken. Throughput: one
    command every 3 cycles (the bucket is read in the first, compared with the key in the
    second and written in the third, so a command always sees the ones before it).
    """

    def __init__(self, *, connections):
        self._connections = connections
        self._bits = max(1, ceil_log2(2 * connections))
        if self._bits > 16:
            raise ValueError(f"connections must be at most 32768, not {connections!r}")
        super().__init__({
            "cmd": In(stream.Signature(ConnTableCmd(connections=connections))),
            "resp": Out(stream.Signature(ConnTableResp(connections=connections))),
        })

    def _hash(self, key):
        """:func:`rnic.host.spec.tcp.conn_hash` of ``key``: XOR of its ``bits``-bit pieces."""
        bits = self._bits
        value = key.as_value()
        pieces = [value[k:k + bits] for k in range(0, len(value), bits)]
        folded = pieces[0]
        for piece in pieces[1:]:
            folded = folded ^ piece
        return folded

    def elaborate(self, platform):
        m = Module()
        entry = _Entry(self._connections)
        row = data.ArrayLayout(entry, WAYS)
        m.submodules.buckets = buckets = memory.Memory(shape=row, depth=1 << self._bits, init=[])
        rd = buckets.read_port()
        wr = buckets.write_port()
        cmd = Signal.like(self.cmd.payload)          # the command being executed
        busy = Signal()                              # its bucket is on rd.data
        compared = Signal()                          # its matches are registered
        match = Signal(WAYS)                         # the entries that hold its key
        free = Signal(WAYS)

        m.d.comb += [self.cmd.ready.eq(~busy & ~compared & (~self.resp.valid | self.resp.ready)),
                     rd.addr.eq(self._hash(self.cmd.payload.key)),
                     rd.en.eq(self.cmd.ready)]
        with m.If(self.resp.ready):
            m.d.sync += self.resp.valid.eq(0)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [cmd.eq(self.cmd.payload), busy.eq(1)]
        with m.If(busy):
            key = cmd.key.as_value()
            m.d.sync += [busy.eq(0), compared.eq(1),
                         match.eq(Cat(*(rd.data[k].valid & (rd.data[k].key.as_value() == key)
                                        for k in range(WAYS)))),
                         free.eq(Cat(*(~rd.data[k].valid for k in range(WAYS))))]
        with m.If(compared):
            # (rd.data holds the bucket: the port reads only when a command is taken)
            m.d.sync += compared.eq(0)
            self._execute(m, cmd, rd.data, match, free, wr, entry)
        return m

    def _execute(self, m, cmd, bucket, match, free, wr, entry):
        """The command on its bucket (``match``: the entries that hold its key, ``free``
        the free ones): the answer, and the bucket written back."""
        resp = self.resp.payload
        new = Signal(entry)
        m.d.comb += [new.valid.eq(cmd.op == ConnTableOp.INSERT), new.key.eq(cmd.key),
                     new.conn.eq(cmd.conn)]
        m.d.comb += wr.addr.eq(self._hash(cmd.key))
        m.d.sync += [self.resp.valid.eq(1), resp.op.eq(cmd.op), resp.hit.eq(0),
                     resp.conn.eq(0)]
        for k in range(WAYS):
            with m.If(match[k]):
                m.d.sync += [resp.hit.eq(1), resp.conn.eq(bucket[k].conn)]
        # the way an INSERT or REMOVE writes: the key's own, else (INSERT) the first free one
        target = Signal(range(WAYS))
        writes = Signal()
        with m.If(match != 0):
            m.d.comb += [target.eq(match[1]), writes.eq(cmd.op != ConnTableOp.LOOKUP)]
        with m.Elif(cmd.op == ConnTableOp.INSERT):
            m.d.comb += [target.eq(~free[0]), writes.eq(free != 0)]
        with m.If(cmd.op == ConnTableOp.INSERT):
            m.d.sync += resp.hit.eq(writes)
        updated = Signal.like(bucket)
        m.d.comb += updated.eq(bucket)
        for k in range(WAYS):
            with m.If(target == k):
                m.d.comb += updated[k].eq(new)
        m.d.comb += [wr.data.eq(updated), wr.en.eq(writes)]
