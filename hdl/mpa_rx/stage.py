"""The pipeline plumbing the deframer's stages share: the stage input register, the
look-ahead port and the per-connection context memory.

Every stage of :class:`~rnic.hdl.mpa_rx.MpaRxDeframer` holds one beat in its input
register and works it out combinationally onto its output stream, which the next stage
registers. A stage that keeps a per-connection context reads the beat's row while the
beat is still in the stage in front of it (see :func:`context_memory`); that stage tells
it on its :func:`ahead_signature` port which beat enters it.
"""

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from ..beat import conn_bits
from ..synth_hints import no_rw_collision

__all__ = ["ahead_signature", "stage_register", "context_memory"]

#: A context memory with more rows than this is taken to be block RAM (as Yosys maps them
#: on the ECP5), a smaller one distributed RAM (LUTs); see :func:`context_memory`.
LUTRAM_MAX_ROWS = 64


def ahead_signature(connections):
    """Signature of the look-ahead a stage gives the stage behind it (seen from the giver):
    ``load`` is high in the cycle a beat enters the giver's input register, ``conn`` is that
    beat's connection."""
    return wiring.Signature({"load": Out(1), "conn": Out(conn_bits(connections))})


def stage_register(m, i, o, *, name):
    """Input register of a stage with input stream ``i`` and output stream ``o``.

    Takes a beat whenever it is empty or its beat leaves on ``o`` (``i.ready``, one
    OR level over ``o.ready``), and offers it on ``o.valid``. Returns ``(beat, take,
    done)``: the registered payload (a view of ``i``'s payload layout), the strobe of a
    beat entering, the strobe of the beat leaving.
    """
    valid = Signal(name=f"{name}_valid")
    beat = Signal(i.payload.shape(), name=name)
    take = Signal(name=f"{name}_take")
    done = Signal(name=f"{name}_done")
    m.d.comb += [
        o.valid.eq(valid),
        done.eq(valid & o.ready),
        i.ready.eq(~valid | o.ready),
        take.eq(i.valid & i.ready),
    ]
    with m.If(take):
        m.d.sync += [valid.eq(1), beat.eq(i.payload)]
    with m.Elif(done):
        m.d.sync += valid.eq(0)
    return beat, take, done


def context_memory(m, name, layout, depth, *, load_en, load_addr, take, in_conn, valid, conn,
                   done, nxt, load_pick=None, load_picked=None, own_loop=False):
    """Context memory of one stage: returns ``cur``, the context register of the stage's beat.

    The row of a beat is read one stage ahead, while the beat is in the stage before (it
    enters it with ``load_en``, connection ``load_addr``; then ``in_conn``), and the
    context is registered into ``cur`` when the stage takes the beat (``take``), so that
    no memory output is on a logic path and the stage's loop (``cur`` -> its logic ->
    ``nxt``, the context after the stage's beat ``conn``, done with ``done``) has no
    multiplexer in front (timing). Every beat writes its context back, one cycle after
    it is done, from a register (``{name}_h1``; timing: no context logic in front of the
    memory's write port). ``load_addr`` may be a pair of connections (a, b), of which b
    enters if ``load_pick``; ``load_picked`` is a register that says so once the beat is
    in the stage before.

    Block RAM (more than ``LUTRAM_MAX_ROWS`` rows) is read once, when the beat enters
    the stage before, and its output register holds the row until the take (one enable
    pin per block). Distributed RAM is read in every cycle (timing: the enable of its
    read data registers, one flip-flop per bit, would depend on the pipeline's
    handshakes), through a port addressed with the connection entering and one with
    ``in_conn``, for a beat that waited in the stage before (``{name}_load_d``: which one).

    Either way a read misses the write-backs of the beats done in the two cycles before
    it and in the cycle of the take (the stage holds one beat at a time): the stage keeps
    its last three write-backs (``h1`` newest .. ``h3``) with their connections and
    takes the context of the newest one of the beat's connection: ``nxt`` if the beat it
    holds (``valid``; it is done if a beat is taken) is of that connection, else ``h1``,
    ``h2``, ``h3``, else the row read. The read data is never used when the read collided
    with a write of its row (that write-back is one of ``h1`` .. ``h3``): the memory is
    marked :func:`~rnic.hdl.synth_hints.no_rw_collision`. Which one of ``h1`` .. ``h3`` and
    the row it is, is compared one cycle ahead (``{name}_sel``; timing: no compare on
    the way to ``cur``, the row read goes through one multiplexer level in front of the
    choice of ``nxt``).

    ``cur`` is loaded with ``Mux(same, nxt, fwd)`` on a take; with ``own_loop`` the
    stage does it, and ``(cur, same, fwd)`` is returned.
    """
    # no_rw_collision: a row read in the cycle it is written is replaced by h1..h3 (above)
    mem = no_rw_collision(Memory(shape=layout, depth=depth, init=[]))
    m.submodules[name] = mem
    wr = mem.write_port()
    if isinstance(load_addr, tuple):
        conn_a, conn_b = load_addr
        entering = Mux(load_pick, conn_b, conn_a)
    else:
        conn_a, conn_b = load_addr, None
        entering = load_addr
    load_d = Signal(name=f"{name}_load_d")         # the stage before loaded a beat at the
    m.d.sync += load_d.eq(load_en)                  # last edge
    if depth > LUTRAM_MAX_ROWS:
        rd = mem.read_port(domain="sync")
        m.d.comb += [rd.addr.eq(entering), rd.en.eq(load_en)]
        rd_data = rd.data.as_value()
    else:
        if conn_b is None:
            rd_a = mem.read_port(domain="sync")
            m.d.comb += rd_a.addr.eq(conn_a)
            rd_new = rd_a.data.as_value()
        else:
            rd_a, rd_b = mem.read_port(domain="sync"), mem.read_port(domain="sync")
            m.d.comb += [rd_a.addr.eq(conn_a), rd_b.addr.eq(conn_b)]
            rd_new = Mux(load_picked, rd_b.data.as_value(), rd_a.data.as_value())
        rd_old = mem.read_port(domain="sync")
        m.d.comb += rd_old.addr.eq(in_conn)
        rd_data = Mux(load_d, rd_new, rd_old.data.as_value())
    cur = Signal(layout, name=f"{name}_cur")
    hist = [(Signal(layout, name=f"{name}_h{k}"), Signal.like(conn, name=f"{name}_hc{k}"),
             Signal(name=f"{name}_hv{k}")) for k in (1, 2, 3)]
    done_d = Signal(name=f"{name}_done_d")         # the stage finished a beat at the last edge
    # timing: the write-back is registered (h1) and written in the next cycle
    m.d.sync += done_d.eq(done)
    with m.If(done):
        m.d.sync += [hist[0][0].eq(nxt), hist[0][1].eq(conn), hist[0][2].eq(1)]
        for k in (1, 2):
            m.d.sync += [hist[k][0].eq(hist[k - 1][0]), hist[k][1].eq(hist[k - 1][1]),
                         hist[k][2].eq(hist[k - 1][2])]
    m.d.comb += [wr.en.eq(done_d), wr.addr.eq(hist[0][1]), wr.data.eq(hist[0][0])]

    # Which one of h1..h3 and the row read is the newest of the connection of the beat in
    # the stage before, for the next cycle: compared for each way the registers compared
    # may change (the stage finishes its beat or not: the history shifts; the stage
    # before loads a beat or not, of connection a or b), chosen by the handshakes, and
    # registered (timing: no compare and no choice on the way to cur; the handshakes
    # come late, the candidates are kept by synthesis so that their choice stays last).
    def sel_vector(hist_next, in_next, nm):       # one-hot: h1, h2, h3, row read
        match = [hv & (hc == in_next) for hc, hv in hist_next]
        sig = Signal(4, name=nm, attrs={"keep": 1})
        m.d.comb += sig.eq(Cat(match[0], ~match[0] & match[1], ~match[0] & ~match[1] & match[2],
                               ~Cat(*match).any()))
        return sig
    hist_keep = [(hc, hv) for _, hc, hv in hist]
    hist_shift = [(conn, Const(1, 1))] + hist_keep[:2]
    sel_next = {}
    for d, hn in ((0, hist_keep), (1, hist_shift)):
        loaded = sel_vector(hn, conn_a, f"{name}_sel{d}a")
        if conn_b is not None:
            loaded = Mux(load_pick, sel_vector(hn, conn_b, f"{name}_sel{d}b"), loaded)
        sel_next[d] = Mux(load_en, loaded, sel_vector(hn, in_conn, f"{name}_sel{d}"))
    sel = Signal(4, name=f"{name}_sel")
    m.d.sync += sel.eq(Mux(done, sel_next[1], sel_next[0]))
    hfwd = Const(0, len(cur.as_value()))            # the newest of h1..h3
    for k, (h, _, _) in enumerate(hist):
        hfwd = hfwd | Mux(sel[k], h.as_value(), 0)
    fwd = Signal(layout, name=f"{name}_fwd")
    m.d.comb += fwd.eq(Mux(sel[3], rd_data, hfwd))
    # same: the stage's beat is of the connection of the beat in the stage before
    same = Signal(name=f"{name}_same")
    m.d.comb += same.eq(valid & (conn == in_conn))
    if own_loop:
        return cur, same, fwd
    with m.If(take):
        m.d.sync += cur.eq(Mux(same, nxt.as_value(), fwd.as_value()))
    return cur
