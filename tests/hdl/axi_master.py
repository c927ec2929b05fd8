"""An AXI4 master for Amaranth testbenches: one write or read burst at a time, the data
channel's valid (write) or ready (read) random, for the memories' tests (AxiRam,
HostMemory)."""


async def write_burst(ctx, w, *, addr, beats, strobes, rng, p_valid=0.7):
    """Offer a write burst on ``w`` (an AXI4 write interface): its address at once, beat
    ``k`` of ``beats`` (bytes of the data width) with ``strobes[k]`` in a cycle with
    probability ``p_valid``; returns once the address and every beat were taken (the
    response is the caller's)."""
    ctx.set(w.awaddr, addr)
    ctx.set(w.awlen, len(beats) - 1)
    ctx.set(w.awvalid, 1)
    pending_aw, sent = True, 0
    while pending_aw or sent < len(beats):
        valid = sent < len(beats) and rng.random() < p_valid
        if valid:
            ctx.set(w.wdata, int.from_bytes(beats[sent], "little"))
            ctx.set(w.wstrb, strobes[sent])
            ctx.set(w.wlast, sent == len(beats) - 1)
        ctx.set(w.wvalid, valid)
        _, _, awv, awr, wv, wr = await ctx.tick().sample(w.awvalid, w.awready, w.wvalid,
                                                         w.wready)
        if awv and awr:
            pending_aw = False
            ctx.set(w.awvalid, 0)
        if wv and wr:
            sent += 1
    ctx.set(w.wvalid, 0)


async def read_burst(ctx, r, *, addr, beats, width, rng, p_ready=0.7):
    """Read a burst of ``beats`` beats of ``width`` octets on ``r`` (an AXI4 read
    interface), ready in a cycle with probability ``p_ready``; its octets. Checks that
    ``rlast`` marks the last beat only."""
    ctx.set(r.araddr, addr)
    ctx.set(r.arlen, beats - 1)
    ctx.set(r.arvalid, 1)
    await ctx.tick().until(r.arready)
    ctx.set(r.arvalid, 0)
    out = bytearray()
    while len(out) < beats * width:
        ctx.set(r.rready, rng.random() < p_ready)
        _, _, rv, rr, data, last = await ctx.tick().sample(r.rvalid, r.rready, r.rdata, r.rlast)
        if rv and rr:
            out += data.to_bytes(width, "little")
            assert last == (len(out) == beats * width)
    ctx.set(r.rready, 0)
    return bytes(out)
