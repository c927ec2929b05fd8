"""Stimulus and collection for the TCP blocks' testbenches in Amaranth's simulator: beats of
a byte string, idle cycles on an input, back-pressure on an output, units checked for the
beat rules (``first`` on the first beat only, every beat but the last full)."""

from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from rnic.hdl.tcp.layouts import TcpFlags
from rnic.host.spec.net import DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PEER_IP

__all__ = ["beats", "flag_bits", "frame", "settle", "send", "receive_units", "axi_memory"]

PEER_MAC = "02:00:0a:07:00:01"


def beats(octets, width, **fields):
    """The beats of ``octets``, lanes in order, ``first`` and ``last`` set, each with
    ``fields`` besides."""
    return [{"data": int.from_bytes(octets[k:k + width], "little"),
             "n": len(octets[k:k + width]), "first": k == 0, "last": k + width >= len(octets),
             **fields} for k in range(0, len(octets), width)]


def frame(segment, src=DEFAULT_PEER_IP):
    """The frame of TCP segment octets ``segment`` from ``src`` as the network layer hands
    it up."""
    packet = (Ether(src=PEER_MAC, dst=DEFAULT_NIC_MAC.hex(":"))
              / IP(src=src, dst=DEFAULT_NIC_IP, proto=6) / Raw(segment))
    return bytes(packet)


def flag_bits(flags):
    """The fields of :class:`~rnic.hdl.tcp.layouts.TcpFlags` for a flags octet."""
    return {name: (flags >> k) & 1 for k, (name, _) in enumerate(TcpFlags())}


async def settle(ctx, block):
    """Wait out a rule block's ``LATENCY`` after its inputs are set (they hold still)."""
    for _ in range(block.LATENCY):
        await ctx.tick()


async def send(ctx, port, items, rng, *, idle=0.0):
    """Offer ``items`` (payload values) on stream ``port`` in order, with an idle cycle
    before each at probability ``idle``; leaves ``valid`` low."""
    for item in items:
        while rng.random() < idle:
            ctx.set(port.valid, 0)
            await ctx.tick()
        ctx.set(port.payload, item)
        ctx.set(port.valid, 1)
        await ctx.tick().until(port.ready)
    ctx.set(port.valid, 0)


async def receive_units(ctx, port, width, count, rng, *, backpressure=0.0, fields=()):
    """Take ``count`` units (``first`` .. ``last``) from stream ``port``, not ready at
    probability ``backpressure``; returns ``(octets, {field: value of the first beat})``
    per unit, after checking that ``first`` marks the first beat, every beat but the last
    is full, and ``fields`` keep their value within a unit."""
    units, octets, seen = [], b"", None
    while len(units) < count:
        ctx.set(port.ready, rng.random() >= backpressure)
        _, _, valid, ready, beat = await ctx.tick().sample(port.valid, port.ready, port.payload)
        if not (valid and ready):
            continue
        assert bool(beat.first) == (octets == b""), "first marks a unit's first beat"
        assert beat.n == width or beat.last, "every beat but the last is full"
        values = {name: int(getattr(beat, name)) for name in fields}
        assert seen is None or values == seen, f"{values} changed within a unit from {seen}"
        seen = values
        octets += int(beat.data).to_bytes(width, "little")[:beat.n]
        if beat.last:
            units.append((octets, seen))
            octets, seen = b"", None
    ctx.set(port.ready, 0)
    return units


def model_tcb(**fields):
    """A model TCB (``rnic.host.model.tcp_engine._Tcb``): an ESTABLISHED connection at
    sequence number 0 with RTO 200, but for ``fields``."""
    from rnic.host.model.tcp_engine import _Tcb
    from rnic.host.spec.tcp_engine import TcpState
    return _Tcb(**{**dict(state=TcpState.ESTABLISHED, remote_ip=1, remote_port=2, local_port=3,
                          iss=0, snd_una=0, snd_nxt=0, snd_max=0, ring_seq=0, rto=200),
                   **fields})


def axi_memory(writes, reads, memory, base, width, rng, *, ready=0.8):
    """A testbench process: an AXI4 memory of ``memory`` (a bytearray, its octet 0 at
    address ``base``) behind the write channels ``writes`` and the read channels ``reads``,
    each address and data channel ready at probability ``ready``, reads in order."""
    async def serve(ctx):
        addresses, datas, responses, pending = [], [], 0, []
        while True:
            ctx.set(writes.awready, rng.random() < ready)
            ctx.set(writes.wready, rng.random() < ready)
            ctx.set(writes.bvalid, responses > 0)
            ctx.set(reads.arready, rng.random() < ready)
            if pending:
                offset = pending[0] - base
                ctx.set(reads.rdata, int.from_bytes(memory[offset:offset + width], "little"))
            ctx.set(reads.rvalid, bool(pending))
            _, _, awv, awr, awaddr, wv, wr, wdata, wstrb, bv, arv, arr, araddr, arlen, rv, rr \
                = await ctx.tick().sample(writes.awvalid, writes.awready, writes.awaddr,
                                          writes.wvalid, writes.wready, writes.wdata,
                                          writes.wstrb, writes.bvalid, reads.arvalid,
                                          reads.arready, reads.araddr, reads.arlen,
                                          reads.rvalid, reads.rready)
            responses -= bool(bv)
            if rv and rr:
                pending.pop(0)
            if arv and arr:
                pending += [araddr + k * width for k in range(arlen + 1)]
            if awv and awr:
                addresses.append(awaddr)
            if wv and wr:
                datas.append((wdata, wstrb))
            while addresses and datas:
                address, (value, strobes) = addresses.pop(0), datas.pop(0)
                for lane in range(width):
                    if strobes >> lane & 1:
                        memory[address - base + lane] = (value >> (8 * lane)) & 0xFF
                responses += 1
    return serve
