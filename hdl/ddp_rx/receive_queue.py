"""The receive queue: the posted QN 0 receive buffers of every connection, with their message state."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..beat import conn_bits
from ..rdma_layouts import RqPost
from ..synth_hints import no_rw_collision
from .layouts import RecvEntry
from .sequencer import Step

__all__ = ["ReceiveQueue"]


class ReceiveQueue(wiring.Component):
    """``rq_depth`` rows per connection (row ``conn * rq_depth + k``; a ring per connection
    whose head and count are in the connection's context), block RAM.

    Ports
    -----
    state : In(Step)
    request : In(RqPost)
        The post latched in IDLE; written in POST at ``post_index`` when ``post_ok``.
    post_ok : In(1), post_index : In(index)
    read_index : In(index)
        The segment's row, read in DECODE.
    conn : In(conn), head : In(DB)
        The segment's connection and its queue head, read in DRAIN_READ.
    index : In(index), new_entry : In(RecvEntry), qn : In(2)
        FINISH_UNTAGGED of a QN 0 segment writes ``new_entry`` at ``index``.
    entry : Out(RecvEntry)
        The row read (the read port's data: the cycle after the read).

    No bypass is needed: the processor handles one segment at a time, and the queue is
    written only in POST and FINISH_UNTAGGED.

    For checkers: ``memory`` (a checker may add asynchronous read ports), ``write`` (its
    write port: ``en``, ``addr``, ``data``).
    """

    def __init__(self, *, connections, rq_depth):
        self._db = exact_log2(rq_depth)
        index_bits = self._db + conn_bits(connections)
        super().__init__({
            "state": In(Step),
            "request": In(RqPost(connections=connections)),
            "post_ok": In(1), "post_index": In(index_bits),
            "read_index": In(index_bits),
            "conn": In(conn_bits(connections)), "head": In(max(self._db, 1)),
            "index": In(index_bits), "new_entry": In(RecvEntry()), "qn": In(2),
            "entry": Out(RecvEntry()),
        })
        # Marked no_rw_collision (rnic.hdl.synth_hints): written in POST and FINISH_UNTAGGED;
        # the rows used are read in DECODE and DRAIN_READ.
        self.memory = no_rw_collision(Memory(shape=RecvEntry(), depth=connections * rq_depth,
                                             init=[]))
        self.write = self.memory.write_port()

    def elaborate(self, platform):
        m = Module()
        state, DB = self.state, self._db
        m.submodules.memory = self.memory
        wr = self.write
        rd = self.memory.read_port(domain="sync", transparent_for=(wr,))
        # the write port's data and address are chosen by the state only (timing: no check
        # is in front of them; the enable says whether a write happens)
        m.d.comb += [rd.en.eq(1), self.entry.eq(rd.data),
                     wr.en.eq(0), wr.addr.eq(self.index), wr.data.eq(self.new_entry)]
        with m.Switch(state):
            with m.Case(Step.POST):
                post = Signal(RecvEntry(), name="post_entry")
                m.d.comb += [
                    post.addr.eq(self.request.addr), post.length.eq(self.request.length),
                    post.id.eq(self.request.id),
                    wr.addr.eq(self.post_index), wr.data.eq(post), wr.en.eq(self.post_ok),
                ]
            with m.Case(Step.DECODE):
                m.d.comb += rd.addr.eq(self.read_index)
            with m.Case(Step.FINISH_UNTAGGED):
                with m.If(self.qn == 0):
                    m.d.comb += wr.en.eq(1)
            with m.Case(Step.DRAIN_READ):
                m.d.comb += rd.addr.eq(Cat(self.head[:DB], self.conn) if DB else self.conn)
        return m
