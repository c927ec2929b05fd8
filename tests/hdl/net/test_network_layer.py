"""NetworkLayer (hdl/net/: RxClassify, ArpResponder, ArpCache, IcmpEcho, TxArbiter) against
the reference model rnic.host.model.network_layer.NicNetModel.

(a) Amaranth's simulator: the checksum adder and fold against the model's ``ones_sum``;
    ArpCache against the model's ArpCache (random learns, static writes, lookups); the
    arbiter keeps frames whole under back-pressure.
(b) Verilator through rnic.sim.runner (cocotb module cocotb_network_layer.py) at W = 4
    and 8 (16 and 32 with --wide): frames built with scapy into ``rx`` with random idle
    cycles, random back-pressure on ``tx`` and ``tcp``; every reply byte-identical to the
    model's and in order per kind, every drop counted with the model's reason in order
    (TCP checksums and header lengths included), TCP frames delivered intact, the ARP
    cache as the model's, nothing left over.

The traffic and the scoreboard below are shared with cocotb_network_layer.py.
"""

import ipaddress
import random

from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_NOP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from rnic.host.model.ipv4 import checksum, ones_sum, pseudo_header
from rnic.host.model.network_layer import NicNetModel
from rnic.host.spec.net import (DEFAULT_NIC_IP, DEFAULT_NIC_MAC, DEFAULT_PEER_IP,
                                MIN_FRAME_LEN, IpProto, RxDrop)

NIC_MAC = ":".join(f"{b:02x}" for b in DEFAULT_NIC_MAC)
PEER_MAC = "02:00:0a:07:00:01"
PEER_IP = DEFAULT_PEER_IP
OTHER_IP = "169.254.7.99"
BROADCAST = "ff:ff:ff:ff:ff:ff"
ARP_ENTRIES = 8
#: Static ARP entries the tests write into the first slots (as the model places them).
STATIC_ARP = {"169.254.7.200": "02:00:0a:07:00:c8"}


# -- traffic -------------------------------------------------------------------------------

def pad(frame):
    """What the sending MAC does to a short frame."""
    frame = bytes(frame)
    return frame + bytes(max(0, MIN_FRAME_LEN - len(frame)))


def to_us(src_mac=PEER_MAC):
    return Ether(dst=NIC_MAC, src=src_mac)


def ping(size, rng, *, ident=None, seq=None, src_ip=PEER_IP, src_mac=PEER_MAC, data=None):
    """An echo request with ``size`` octets of data."""
    data = rng.randbytes(size) if data is None else data
    ident = rng.getrandbits(16) if ident is None else ident
    seq = rng.getrandbits(16) if seq is None else seq
    return pad(to_us(src_mac) / IP(src=src_ip, dst=DEFAULT_NIC_IP, id=rng.getrandbits(16))
               / ICMP(type=8, id=ident, seq=seq) / Raw(data))


def arp_frame(op, *, psrc=PEER_IP, hwsrc=PEER_MAC, pdst=DEFAULT_NIC_IP, dst=BROADCAST,
              **fields):
    return pad(Ether(dst=dst, src=hwsrc) / ARP(op=op, psrc=psrc, hwsrc=hwsrc, pdst=pdst,
                                               **fields))


def ip_frame(rng, proto_layer, *, size=20, dst=DEFAULT_NIC_IP, src=PEER_IP, **ip_fields):
    return pad(to_us() / IP(src=src, dst=dst, **ip_fields) / proto_layer
               / Raw(rng.randbytes(size)))


def patch(frame, offset, value):
    frame = bytearray(frame)
    frame[offset:offset + len(value)] = value
    return bytes(frame)


#: Frame offset of the TCP checksum field (no IP options).
TCP_CHECKSUM_AT = 34 + 16


def tcp_checksum(frame, *, length=None):
    """The TCP checksum of the frame's segment (up to the IPv4 total length, its checksum
    field taken as zero) with ``length`` in the pseudo-header (the segment's by default)."""
    total = int.from_bytes(frame[16:18], "big")
    segment = patch(frame[34:14 + total], 16, bytes(2))
    return checksum(pseudo_header(frame[26:30], frame[30:34], IpProto.TCP,
                                  len(segment) if length is None else length) + segment)


def with_tcp_checksum(frame, value):
    return patch(frame, TCP_CHECKSUM_AT, value.to_bytes(2, "big"))


def tcp_zero_checksum(rng, tcp, size=30):
    """A TCP frame whose words sum to 0xFFFF without the checksum (its last two payload
    octets chosen so): the checksum is 0x0000, and 0xFFFF is the same in one's complement."""
    frame = with_tcp_checksum(ip_frame(rng, tcp, size=size), 0)
    end = 34 + 20 + size
    frame = patch(frame, end - 2, bytes(2))
    total = ones_sum(pseudo_header(frame[26:30], frame[30:34], IpProto.TCP, end - 34)
                     + frame[34:end])
    return patch(frame, end - 2, (~total & 0xFFFF).to_bytes(2, "big"))


def tcp_frames(rng, tcp):
    """(label, frame) of TCP segments: each header and checksum fault, and the good ones
    next to them (checksum field 0x0000 and 0xFFFF, odd lengths, full headers)."""
    good = ip_frame(rng, tcp, size=30)
    zero = tcp_zero_checksum(rng, tcp)
    odd = ip_frame(rng, tcp, size=101)
    odd_end = 34 + 20 + 101
    long_header = TCP(sport=1, dport=2, dataofs=15, options=[])     # 40 octets of "options"
    short = ip_frame(rng, Raw(rng.randbytes(19)), size=0, proto=6)
    return [
        ("tcp bad checksum", with_tcp_checksum(good, tcp_checksum(good) ^ 0x8000)),
        ("tcp odd length, bad checksum", with_tcp_checksum(odd, tcp_checksum(odd) ^ 0x0001)),
        ("tcp odd last octet off", patch(odd, odd_end - 1, bytes([odd[odd_end - 1] ^ 0x40]))),
        ("tcp checksum with the total length in the pseudo-header",
         with_tcp_checksum(good, tcp_checksum(good, length=20 + 50))),
        ("tcp checksum without the pseudo-header's length",
         with_tcp_checksum(good, tcp_checksum(good, length=0))),
        ("tcp checksum with the frame's length", with_tcp_checksum(
            good, tcp_checksum(good, length=len(good)))),
        ("tcp checksum 0x0000 (handled)", zero),
        ("tcp checksum 0xFFFF for 0x0000 (handled)", with_tcp_checksum(zero, 0xFFFF)),
        ("tcp checksum 0x0000 where it is not", with_tcp_checksum(good, 0)
         if tcp_checksum(good) else with_tcp_checksum(good, 1)),
        ("tcp checksum 0xFFFF where it is not", with_tcp_checksum(good, 0xFFFF)),
        ("tcp data offset 4", ip_frame(rng, TCP(sport=1, dport=2, dataofs=4), size=30)),
        ("tcp data offset 0", ip_frame(rng, TCP(sport=1, dport=2, dataofs=0), size=30)),
        ("tcp data offset 15 in a 40-octet segment",
         ip_frame(rng, TCP(sport=1, dport=2, dataofs=15, options=[]), size=20)),
        ("tcp data offset 6 in a 23-octet segment",
         ip_frame(rng, TCP(sport=1, dport=2, dataofs=6, options=[]), size=3)),
        ("tcp header of 60 octets, the whole segment (handled)",
         ip_frame(rng, long_header, size=40)),
        ("tcp header of 60 octets and 40 of payload (handled)",
         ip_frame(rng, long_header, size=80)),
        ("tcp of 19 octets", short),
        ("tcp of 19 octets, data offset 5", patch(short, 46, b"\x50")),
        ("tcp of 0 octets, 0xF0 in the padding at octet 46",
         patch(ip_frame(rng, Raw(b""), size=0, proto=6), 46, b"\xf0")),
        ("tcp data offset 4 and a bad checksum", with_tcp_checksum(
            ip_frame(rng, TCP(sport=1, dport=2, dataofs=4, chksum=1), size=30), 1)),
        ("tcp bad ip checksum and data offset 4",
         ip_frame(rng, TCP(sport=1, dport=2, dataofs=4), size=30, chksum=0x1234)),
        ("tcp for another ip with a bad checksum",
         ip_frame(rng, TCP(sport=1, dport=2, chksum=1), dst=OTHER_IP)),
        ("tcp odd length, 121 octets", odd),
        ("tcp padded (no payload)", ip_frame(rng, tcp, size=0)),
    ]


def bad_frames(rng):
    """(label, frame) of every kind the layer drops, and of the odd ones it handles."""
    tcp = TCP(sport=4000, dport=5000, flags="PA", seq=rng.getrandbits(32))
    good_ip = ip_frame(rng, tcp, size=30)
    frames = [
        ("arp request for another ip", arp_frame(1, pdst=OTHER_IP)),
        ("arp hwtype 6", arp_frame(1, hwtype=6)),
        ("arp plen 5", arp_frame(1, plen=5)),
        ("arp op 3", arp_frame(3)),
        ("arp reply to us (learn)", arp_frame(2, psrc="169.254.7.50", hwsrc="02:00:00:00:00:32",
                                              dst=NIC_MAC)),
        ("arp probe (sender 0.0.0.0)", arp_frame(1, psrc="0.0.0.0", hwsrc="02:00:00:00:00:33")),
        ("arp reply for the static entry", arp_frame(2, psrc="169.254.7.200",
                                                     hwsrc="02:00:00:00:00:34", dst=NIC_MAC)),
        ("vlan tagged ping", pad(to_us() / Dot1Q(vlan=5) / IP(src=PEER_IP, dst=DEFAULT_NIC_IP)
                                 / ICMP(type=8) / Raw(b"x" * 20))),
        ("ethertype ipv6", pad(Ether(dst=NIC_MAC, src=PEER_MAC, type=0x86DD) / Raw(bytes(50)))),
        ("ip options", ip_frame(rng, ICMP(type=8), options=[IPOption_NOP()] * 4)),
        ("ip version 6", patch(ip_frame(rng, ICMP(type=8)), 14, b"\x65")),
        ("ip ihl 4", patch(ip_frame(rng, ICMP(type=8)), 14, b"\x44")),
        ("ip total length beyond the frame", ip_frame(rng, ICMP(type=8), size=10, len=200)),
        ("ip total length below 20", ip_frame(rng, ICMP(type=8), size=10, len=19)),
        ("ip bad checksum", ip_frame(rng, ICMP(type=8), chksum=0x1234)),
        ("ip fragment MF", ip_frame(rng, ICMP(type=8), flags="MF")),
        ("ip fragment offset", ip_frame(rng, ICMP(type=8), frag=100)),
        ("ip reserved flag (handled)", ip_frame(rng, ICMP(type=8), flags="evil")),
        ("ip other destination", ip_frame(rng, ICMP(type=8), dst=OTHER_IP)),
        ("ip broadcast destination", ip_frame(rng, ICMP(type=8), dst="169.254.7.255")),
        ("udp", ip_frame(rng, UDP(sport=1, dport=2))),
        ("icmp bad checksum", ip_frame(rng, ICMP(type=8, chksum=0xBEEF))),
        ("icmp echo reply", ip_frame(rng, ICMP(type=0))),
        ("icmp timestamp", ip_frame(rng, ICMP(type=13))),
        ("icmp shorter than 8", ip_frame(rng, Raw(b"\x08\x00\xf7"), size=0, proto=1)),
        ("icmp echo code 5 (answered)", ip_frame(rng, ICMP(type=8, code=5))),
        ("ping all zero (answered)", ping(0, rng, ident=0, seq=0, data=b"")),
        ("ping all zero data (answered)", ping(40, rng, ident=0, seq=0, data=bytes(40))),
        ("tcp", good_ip),
        ("tcp with trailing octets", good_ip + rng.randbytes(7)),
        ("tcp odd length", ip_frame(rng, tcp, size=1401)),
        *tcp_frames(rng, tcp),
        ("ping odd size with padding", ping(3, rng)),
        ("ip padding ignored", patch(ping(5, rng) + bytes(9), 0, b"")),
    ]
    return frames


def scenario(rng, *, sweep=24):
    """The directed frames, each followed by a good ping, then ARP and the ping sizes."""
    frames = [("arp request for us", arp_frame(1))]
    for label, frame in bad_frames(rng):
        frames += [(label, frame), ("ping after " + label, ping(rng.randint(0, 64), rng))]
    for size in (0, 56, 1472, 1471, 1, 2, 3):
        frames.append((f"ping {size}", ping(size, rng)))
    for k in range(sweep):
        frames.append(("ping sweep", ping(rng.randint(0, 1472), rng)))
    # learning: many senders (fills the cache, replaces round robin, skips the static)
    for k in range(12):
        ip = f"169.254.7.{10 + k}"
        frames.append((f"arp request from {ip}", arp_frame(1, psrc=ip, hwsrc=f"02:00:00:00:01:{k:02x}")))
    frames.append(("ping from a learned host", ping(100, rng, src_ip="169.254.7.10",
                                                    src_mac="02:00:00:00:01:00")))
    for k in range(10):
        tcp = TCP(sport=rng.getrandbits(16), dport=5000, flags="A", seq=rng.getrandbits(32))
        frames.append(("tcp mixed", ip_frame(rng, tcp, size=rng.randint(0, 1460))))
        frames.append(("ping mixed", ping(rng.randint(0, 300), rng)))
    return frames


def new_model():
    return NicNetModel(mac=DEFAULT_NIC_MAC, ip=DEFAULT_NIC_IP, arp_cache_size=ARP_ENTRIES,
                       static_arp={ip: bytes.fromhex(mac.replace(":", ""))
                                   for ip, mac in STATIC_ARP.items()})


def static_writes():
    """The host writes that put STATIC_ARP where the model puts it (slots 0, 1, ...)."""
    return [{"index": k, "valid": 1, "static": 1, "ip": int(ipaddress.IPv4Address(ip)),
             "mac": int(mac.replace(":", ""), 16)} for k, (ip, mac) in enumerate(STATIC_ARP.items())]


def expected(frames):
    """What the model does with ``frames``: (ARP replies, echo replies, TCP frames, drop
    reasons in order, the model)."""
    model = new_model()
    arp_replies, echo_replies, tcp_frames, drops = [], [], [], []
    for label, frame in frames:
        result = model.receive(frame)
        if result.drop != RxDrop.NONE:
            drops.append((result.drop, label))
        for reply in result.replies:
            (arp_replies if reply[12:14] == b"\x08\x06" else echo_replies).append((reply, label))
        if result.delivered is not None:
            segment = result.delivered.segment
            tcp_frames.append((frame[:34 + len(segment)], label))
            assert frame[34:34 + len(segment)] == segment
    return arp_replies, echo_replies, tcp_frames, drops, model


def check(frames, tx_frames, tcp_frames, drop_events):
    """Scoreboard: tx frames (unpadded, as the gateware sends them), tcp frames and drop
    reasons against the model. Replies are in order per kind (ARP, echo); across kinds the
    arbiter may interleave them."""
    want_arp, want_echo, want_tcp, want_drops, model = expected(frames)
    got_arp = [f for f in tx_frames if f[12:14] == b"\x08\x06"]
    got_echo = [f for f in tx_frames if f[12:14] != b"\x08\x06"]
    for kind, got, want in (("ARP", got_arp, want_arp), ("echo", got_echo, want_echo)):
        for k, ((frame, label), mine) in enumerate(zip(want, got)):
            assert pad(mine) == frame, (f"{kind} reply {k} ({label}, {len(mine)} octets) "
                                        f"differs:\n got {mine.hex()}\nwant {frame.hex()}")
        assert len(got) == len(want), f"{len(got)} {kind} replies, {len(want)} expected"
    for k, ((frame, label), mine) in enumerate(zip(want_tcp, tcp_frames)):
        assert mine == frame, f"tcp frame {k} ({label}) differs"
    assert len(tcp_frames) == len(want_tcp), f"{len(tcp_frames)} tcp frames, {len(want_tcp)} expected"
    got_reasons = [RxDrop(r) for r in drop_events]
    for k, ((reason, label), mine) in enumerate(zip(want_drops, got_reasons)):
        assert mine == reason, f"drop {k} ({label}): counted {mine.name}, model {reason.name}"
    assert len(got_reasons) == len(want_drops), \
        f"{len(got_reasons)} drops counted, {len(want_drops)} expected"
    return model


# -- (a) Amaranth simulator ----------------------------------------------------------------

import pytest  # noqa: E402

from amaranth.hdl import Module, Signal  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

from rnic.hdl.net.arp_cache import ArpCache  # noqa: E402
from rnic.hdl.net.checksum import beat_sum, fold  # noqa: E402
from rnic.hdl.net.network_layer import NetworkLayer  # noqa: E402
from rnic.host.model import arp as model_arp  # noqa: E402
from rnic.host.model.ipv4 import ones_sum  # noqa: E402


@pytest.mark.parametrize("width", [4, 8, 32])
def test_checksum_adder(width):
    """Beats of random (and all-0xFF, all-zero) octets with random lane masks, accumulated
    over a frame and folded: the model's ones_sum of the kept octets."""
    m = Module()
    data, keep, acc = Signal(8 * width), Signal(width), Signal(32)
    total, folded = Signal(32), Signal(16)
    m.d.comb += [total.eq(acc + beat_sum(data, keep, width)), folded.eq(fold(total))]
    rng = random.Random(width)

    async def tb(ctx):
        for trial in range(60):
            kind = trial % 3
            beats = rng.randint(1, 1514 // width)
            kept = bytearray()
            running = 0
            for _ in range(beats):
                octets = (rng.randbytes(width) if kind == 0 else
                          b"\xff" * width if kind == 1 else bytes(width))
                mask = rng.getrandbits(width) if trial % 2 else (1 << width) - 1
                ctx.set(data, int.from_bytes(octets, "little"))
                ctx.set(keep, mask)
                ctx.set(acc, running)
                running = ctx.get(total)
                kept += bytes(o if mask >> j & 1 else 0 for j, o in enumerate(octets))
            ctx.set(acc, running)
            ctx.set(keep, 0)
            assert ctx.get(folded) == ones_sum(bytes(kept)), trial

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()


def test_arp_cache_against_model():
    """Random learns (repeats, new addresses, the static one) and lookups, 5 slots with a
    static entry in slot 2: every lookup as the model's once done, and not done before
    the cache was searched for the new address."""
    entries = 5
    dut = ArpCache(entries=entries)
    rng = random.Random(3)
    model = model_arp.ArpCache(size=entries)
    ips = [f"10.0.0.{k}" for k in range(1, 12)]

    async def tb(ctx):
        # slots 0, 1 learned first, then the static in slot 2 (model: lowest free slot)
        for ip in ips[:2]:
            mac = rng.randbytes(6)
            model.learn(ip, mac)
            await learn(ctx, ip, mac)
        model.set_static(ips[2], b"\x02" * 6)
        ctx.set(dut.write.payload, {"index": 2, "valid": 1, "static": 1,
                                    "ip": int(ipaddress.IPv4Address(ips[2])),
                                    "mac": int.from_bytes(b"\x02" * 6, "big")})
        ctx.set(dut.write.valid, 1)
        await ctx.tick()
        ctx.set(dut.write.valid, 0)
        last = None
        for step in range(300):
            ip = rng.choice(ips)
            if rng.random() < 0.5:
                mac = rng.randbytes(6)
                model.learn(ip, mac)
                await learn(ctx, ip, mac)
            for probe in ips:
                ctx.set(dut.lookup_ip, int(ipaddress.IPv4Address(probe)))
                # (one slot a cycle: done within 2 * entries + 1 cycles, not at once)
                assert not ctx.get(dut.lookup_done) or probe == last, (step, probe)
                for _ in range(2 * entries + 1):
                    if ctx.get(dut.lookup_done):
                        break
                    await ctx.tick()
                assert ctx.get(dut.lookup_done), (step, probe)
                last = probe
                want = model.lookup(probe)
                assert ctx.get(dut.lookup_hit) == (want is not None), (step, probe)
                if want is not None:
                    assert ctx.get(dut.lookup_mac) == int.from_bytes(want, "big"), (step, probe)

    async def learn(ctx, ip, mac):
        """Offer a pair until it is taken, then wait the 3 cycles it takes to enter."""
        ctx.set(dut.learn.payload, {"ip": int(ipaddress.IPv4Address(ip)),
                                    "mac": int.from_bytes(mac, "big")})
        ctx.set(dut.learn.valid, 1)
        await ctx.tick().until(dut.learn.ready)
        ctx.set(dut.learn.valid, 0)
        await ctx.tick().repeat(2)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_bad_parameters():
    import gc
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="width"):
            NetworkLayer(width=12)
        with pytest.raises(ValueError, match="entries"):
            NetworkLayer(width=8, arp_entries=0)
        with pytest.raises(ValueError, match="depth"):
            NetworkLayer(width=8, rx_depth=1000)
        gc.collect()


# -- (b) Verilator -------------------------------------------------------------------------

def _verilator(width):
    from rnic.sim.runner import run
    result = run(NetworkLayer, name=f"network_layer_w{width}",
                 params={"width": width, "arp_entries": ARP_ENTRIES},
                 test_module="cocotb_network_layer", seed=width, timeout_s=900)
    print(f"W={width}: build {result.build_s:.1f} s, tests {result.test_s:.1f} s")


@pytest.mark.parametrize("width", [4, 8])
def test_network_layer(width):
    _verilator(width)


@pytest.mark.wide
@pytest.mark.parametrize("width", [16, 32])
def test_network_layer_wide(width):
    _verilator(width)


def test_without_send_path():
    """``send_path=False``: no ``ip_tx``, ``tx_drop`` or ``gateway`` port (nothing to drive
    them in a top without TCP); a non-bool is refused by name."""
    from rnic.hdl.net.network_layer import NetworkLayer
    members = NetworkLayer(width=4, send_path=False).signature.members
    assert "tx" in members and "arp_request" in members
    assert not {"ip_tx", "tx_drop", "gateway"} & set(members)
    assert {"ip_tx", "tx_drop", "gateway"} <= set(NetworkLayer(width=4).signature.members)
    with pytest.raises(TypeError, match="send_path must be a bool, not 1"):
        NetworkLayer(width=4, send_path=1)
