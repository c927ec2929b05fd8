"""cocotb side of tests/hdl/net/test_ethernet_port.py: EthernetPort on Verilator.

GMII through cocotbext-eth's ``GmiiSource``/``GmiiSink`` (their own preamble, FCS and gap
rules), frames built with scapy, the W-octet side through :mod:`rnic.sim.streams`.
Params (``$RNIC_PARAMS``): ``width``; ``$RNIC_ETH_LENGTHS``: ``sample`` (default) or ``all``
(every length 60..1514 in the line-rate test).
"""

import os
import struct
import zlib

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import RisingEdge, Timer
from cocotbext.eth import GmiiFrame, GmiiSink, GmiiSource
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from rnic.hdl.net.layouts import RX_COUNTERS, FrameBeat
from rnic.host.spec.net import (BROADCAST_MAC, DEFAULT_NIC_MAC, IFG_LEN, MAX_FRAME_LEN,
                                MIN_FRAME_LEN, PREAMBLE, PREAMBLE_LEN, SFD, RxDrop)
from rnic.sim.streams import TB, assert_drained

ETH_NS = 8            # 125 MHz GMII clocks
CORE_NS = 10          # 100 MHz core clock
PEER_MAC = bytes.fromhex("02000a070001")
OTHER_MAC = bytes.fromhex("02000a0700ee")
MULTICAST_MAC = bytes.fromhex("01005e000001")
TX_DEPTH = 4096       # EthernetPort default


def mac_text(mac):
    return ":".join(f"{b:02x}" for b in mac)


def make_frame(rng, length, dst=DEFAULT_NIC_MAC):
    """A ``length``-octet Ethernet II frame (without FCS) from the peer to ``dst``."""
    pkt = Ether(dst=mac_text(dst), src=mac_text(PEER_MAC), type=0x0800) / Raw(
        rng.randbytes(length - 14))
    data = bytes(pkt)
    assert len(data) == length
    return data


def fcs(data):
    return struct.pack("<L", zlib.crc32(data))


def lengths_to_test(rng, which):
    if which == "all":
        return list(range(MIN_FRAME_LEN, MAX_FRAME_LEN + 1))
    edges = list(range(MIN_FRAME_LEN, MIN_FRAME_LEN + 8)) + list(range(MAX_FRAME_LEN - 7,
                                                                         MAX_FRAME_LEN + 1))
    return sorted(edges + rng.sample(range(MIN_FRAME_LEN + 8, MAX_FRAME_LEN - 7), 24))


class PortTB(TB):
    def __init__(self, dut, *, backpressure=0.0, idle=0.0):
        super().__init__(dut, period_ns=CORE_NS)
        self.W = self.params["width"]
        self.layout = FrameBeat(width=self.W)
        for name in ("eth_rx_rst", "eth_tx_rst"):
            getattr(dut, name).value = 0
        Clock(dut.eth_rx_clk, ETH_NS, unit="ns").start(start_high=False)
        Clock(dut.eth_tx_clk, ETH_NS, unit="ns").start(start_high=True)   # another phase
        dut.mac.value = int.from_bytes(DEFAULT_NIC_MAC, "big")
        dut.max_len.value = MAX_FRAME_LEN
        self.gmii_src = GmiiSource(dut.gmii_rx__rxd, dut.gmii_rx__rx_er, dut.gmii_rx__rx_dv,
                                   dut.eth_rx_clk, dut.eth_rx_rst)
        self.gmii_snk = GmiiSink(dut.gmii_tx__txd, dut.gmii_tx__tx_er, dut.gmii_tx__tx_en,
                                 dut.eth_tx_clk, dut.eth_tx_rst)
        self.wire = []            # (first cycle, octets, tx_er seen) of each tx_en burst
        cocotb.start_soon(self._record_gmii_tx())
        self.tx = self.source("tx", self.layout, idle_prob=idle)
        self.rx = self.sink("rx", self.layout, backpressure_prob=backpressure,
                            callback=self._beat)
        self.frames = []          # (time of the first beat in ns, frame octets)
        self._open = None

    async def _record_gmii_tx(self):
        """Every tx_en burst on gmii_tx as sent, preamble included (GmiiSink leaves out the
        first octet of a burst, so the preamble and gap are checked from this)."""
        dut = self.dut
        edge = RisingEdge(dut.eth_tx_clk)
        cycle, burst = 0, None
        self.tx_cycle0 = get_sim_time("ns")
        while True:
            await edge
            cycle += 1
            if int(dut.gmii_tx__tx_en.value):
                if burst is None:
                    burst = (cycle, bytearray(), [False])
                burst[1].append(int(dut.gmii_tx__txd.value))
                burst[2][0] |= bool(int(dut.gmii_tx__tx_er.value))
            elif burst is not None:
                self.wire.append((burst[0], bytes(burst[1]), burst[2][0], cycle))
                burst = None

    async def reset(self, cycles=4):
        dut = self.dut
        for name in ("rst", "eth_rx_rst", "eth_tx_rst"):
            getattr(dut, name).value = 1
        await Timer(cycles * 2 * CORE_NS, unit="ns")
        for name in ("rst", "eth_rx_rst", "eth_tx_rst"):
            getattr(dut, name).value = 0
        await self.cycles(8)

    def _beat(self, beat):
        """Frame framing rules of the W-octet stream, then collect the frame."""
        n, W = beat["n"], self.W
        assert 1 <= n <= W, f"beat with n = {n}"
        assert bool(beat["first"]) == (self._open is None), f"first = {beat['first']} " \
            f"with {'no' if self._open is None else 'a'} frame open"
        if self._open is None:
            self._open = (get_sim_time("ns"), bytearray())
        if not beat["last"]:
            assert n == W, f"a beat that is not the last has n = {n}"
        self._open[1].extend((beat["data"] & ((1 << (8 * n)) - 1)).to_bytes(n, "little"))
        if beat["last"]:
            self.frames.append((self._open[0], bytes(self._open[1])))
            self._open = None

    def counts(self):
        value = int(self.dut.rx_counts.value)
        return {RxDrop(int(r)): (value >> (32 * k)) & 0xFFFFFFFF for k, r in enumerate(RX_COUNTERS)}

    def send_good(self, data):
        self.gmii_src.send_nowait(GmiiFrame.from_payload(data))

    async def wait_rx(self, count, *, timeout_us=2000):
        for _ in range(timeout_us * 1000 // (64 * CORE_NS)):
            if len(self.frames) >= count:
                return
            await self.cycles(64)
        raise AssertionError(f"timeout: {len(self.frames)} of {count} frames on rx")

    async def wait_tx(self, count, *, timeout_us=20000):
        for _ in range(timeout_us * 1000 // (64 * CORE_NS)):
            if self.gmii_snk.count() >= count:
                return
            await self.cycles(64)
        raise AssertionError(f"timeout: {self.gmii_snk.count()} of {count} frames on gmii_tx")

    async def finish(self):
        """Nothing left over: no frame in flight, no beat or frame unread, nothing open."""
        await self.gmii_src.wait()
        await self.tx.wait_idle()
        await self.cycles(2000)            # anything still coming would show up now
        assert not self.frames, f"{len(self.frames)} frames on rx not checked"
        assert self._open is None, "a frame on rx was never closed"
        assert self.gmii_snk.empty(), f"{self.gmii_snk.count()} frames on gmii_tx not checked"
        assert self.gmii_snk.idle()
        assert_drained(self.tx, self.rx)

    def take_rx(self):
        frames, self.frames = self.frames, []
        return frames

    async def take_tx(self, count):
        """The next ``count`` frames from gmii_tx: (GmiiSink frame, burst as recorded)."""
        await self.wait_tx(count)
        await self.cycles(2)
        frames = [self.gmii_snk.recv_nowait() for _ in range(count)]
        bursts, self.wire = self.wire[:count], self.wire[count:]
        return list(zip(frames, bursts))


def check_tx(frames, sent, *, exact_gap):
    """GMII frames: preamble, SFD, the frame padded to 60, a good FCS, no error, the gap."""
    assert len(frames) == len(sent)
    preamble = bytes([PREAMBLE] * PREAMBLE_LEN + [SFD])
    for k, ((got, (_, wire, tx_er, _)), data) in enumerate(zip(frames, sent)):
        padded = data + bytes(max(0, MIN_FRAME_LEN - len(data)))
        assert got.error is None and not tx_er, f"frame {k}: tx_er set"
        assert wire[:len(preamble)] == preamble, f"frame {k}: preamble {wire[:8].hex()}"
        assert got.check_fcs(), f"frame {k}: bad FCS"
        assert bytes(got.get_payload()) == padded, f"frame {k} ({len(data)} octets) differs"
        assert wire[len(preamble):] == padded + fcs(padded), f"frame {k} on the wire differs"
    gaps = [b[1][0] - a[1][3] for a, b in zip(frames, frames[1:])]
    assert all(g >= IFG_LEN for g in gaps), f"gap below {IFG_LEN}: {min(gaps)}"
    if exact_gap:
        # Line rate: the next frame is in the buffer by the end of the gap when it is not
        # much longer than the frame on the wire (it loads while that one is sent).
        slow = [(k, g) for k, g in enumerate(gaps)
                if g != IFG_LEN and len(sent[k + 1]) <= max(len(sent[k]), MIN_FRAME_LEN) + 16]
        assert not slow, f"gaps above {IFG_LEN} (frame, gap): {slow[:10]}"


async def _good_frames_both_ways(dut, *, backpressure, idle):
    tb = PortTB(dut, backpressure=backpressure, idle=idle)
    await tb.reset()
    lengths = lengths_to_test(tb.rng, os.environ.get("RNIC_ETH_LENGTHS", "sample"))
    frames = [make_frame(tb.rng, n, BROADCAST_MAC if k % 7 == 3 else DEFAULT_NIC_MAC)
              for k, n in enumerate(lengths)]
    rx_order = frames[:]
    tb.rng.shuffle(rx_order)
    for data in rx_order:
        tb.send_good(data)
    frames.reverse()                         # longest first: every gap is the minimum
    for data in frames:
        tb.tx.extend(_beats(data, tb.W))
    # line rate on gmii_rx, with time to spare for the back-pressure
    await tb.wait_rx(len(rx_order), timeout_us=sum(len(f) + 30 for f in frames) * ETH_NS // 500)
    got = [data for _, data in tb.take_rx()]
    assert len(got) == len(rx_order)
    for k, (a, b) in enumerate(zip(got, rx_order)):
        assert a == b, f"rx frame {k} ({len(b)} octets): got {len(a)} octets, differs"
    check_tx(await tb.take_tx(len(frames)), frames, exact_gap=True)
    await tb.finish()
    counts = tb.counts()
    assert counts[RxDrop.NONE] == len(rx_order), counts
    assert all(v == 0 for r, v in counts.items() if r != RxDrop.NONE), counts
    assert int(dut.tx_frames.value) == len(frames) and int(dut.tx_dropped.value) == 0
    tb.log.info("W=%d: %d frames each way, lengths %d..%d", tb.W, len(frames),
                min(lengths), max(lengths))


def _beats(data, width):
    count = (len(data) + width - 1) // width
    return [{"data": int.from_bytes(data[i * width:(i + 1) * width], "little"),
             "n": len(data[i * width:(i + 1) * width]),
             "first": int(i == 0), "last": int(i == count - 1)} for i in range(count)]


@cocotb.test()
async def good_frames_line_rate(dut):
    """Good frames of the lengths under test back to back at the minimum gap on gmii_rx
    (in random order, some broadcast) arrive whole and in order on rx under random
    back-pressure; the same frames sent on tx (with idles) leave on gmii_tx with preamble,
    SFD, padding, FCS and exactly the minimum gap."""
    await _good_frames_both_ways(dut, backpressure=0.3, idle=0.2)


@cocotb.test()
async def bad_frames_dropped_and_counted(dut):
    """Bad FCS, rx_er, runts (short with a good FCS, and a 3-octet scrap), giants (over
    1514, and over a lowered max_len), other unicast and multicast destinations: each is
    dropped and counted, and the good frame right behind each arrives intact."""
    tb = PortTB(dut, backpressure=0.2)
    await tb.reset()
    rng = tb.rng
    good, want = [], {r: 0 for r in RX_COUNTERS}

    def send_good():
        data = make_frame(rng, rng.randint(MIN_FRAME_LEN, 300))
        tb.send_good(data)
        good.append(data)

    def send_bad(reason, frame):
        tb.gmii_src.send_nowait(frame)
        want[reason] += 1
        send_good()

    for _ in range(3):
        data = make_frame(rng, rng.randint(MIN_FRAME_LEN, 600))
        bad_fcs = bytearray(fcs(data))
        bad_fcs[rng.randrange(4)] ^= 1 << rng.randrange(8)
        send_bad(RxDrop.FCS, GmiiFrame.from_raw_payload(data + bytes(bad_fcs)))
        flipped = bytearray(data)
        flipped[rng.randrange(len(data))] ^= 0x10
        send_bad(RxDrop.FCS, GmiiFrame.from_raw_payload(bytes(flipped) + fcs(data)))
        er = GmiiFrame.from_payload(make_frame(rng, rng.randint(MIN_FRAME_LEN, 600)))
        er.error = [0] * len(er.data)
        er.error[rng.randrange(8, len(er.data))] = 1
        send_bad(RxDrop.FCS, er)
        short = make_frame(rng, rng.randint(14, MIN_FRAME_LEN - 1))
        send_bad(RxDrop.RUNT, GmiiFrame.from_raw_payload(short + fcs(short)))
        send_bad(RxDrop.RUNT, GmiiFrame.from_raw_payload(bytes([1, 2, 3])))
        long = make_frame(rng, rng.randint(MAX_FRAME_LEN + 1, MAX_FRAME_LEN + 40))
        send_bad(RxDrop.GIANT, GmiiFrame.from_payload(long))
        send_bad(RxDrop.OTHER_MAC, GmiiFrame.from_payload(
            make_frame(rng, rng.randint(MIN_FRAME_LEN, 600), OTHER_MAC)))
        send_bad(RxDrop.OTHER_MAC, GmiiFrame.from_payload(
            make_frame(rng, rng.randint(MIN_FRAME_LEN, 600), MULTICAST_MAC)))
    await tb.wait_rx(len(good))
    await tb.gmii_src.wait()

    # A lower limit: 1000 octets pass, 1001 are a giant.
    dut.max_len.value = 1000
    await tb.cycles(10)
    for length in (1000, 1001):
        data = make_frame(rng, length)
        if length == 1000:
            tb.send_good(data)
            good.append(data)
        else:
            send_bad(RxDrop.GIANT, GmiiFrame.from_payload(data))
    await tb.wait_rx(len(good))
    got = [data for _, data in tb.take_rx()]
    assert got == good, f"{len(got)} frames, {sum(a == b for a, b in zip(got, good))} as sent"
    await tb.finish()
    want[RxDrop.NONE] = len(good)
    assert tb.counts() == want, f"counters {tb.counts()}, expected {want}"


@cocotb.test()
async def overflow_when_rx_stalls(dut):
    """With rx stalled, frames fill the receive buffer; those that do not fit are dropped
    whole and counted as OVERFLOW, the ones that fit come out whole once rx moves again,
    and the frames after that pass as usual."""
    tb = PortTB(dut)
    await tb.reset()
    tb.rx.paused = True
    frames = [make_frame(tb.rng, tb.rng.randint(900, MAX_FRAME_LEN)) for _ in range(10)]
    for data in frames:
        tb.send_good(data)
    await tb.gmii_src.wait()
    await tb.cycles(50)
    assert not tb.frames
    tb.rx.paused = False
    await tb.wait_rx(tb.counts()[RxDrop.NONE])
    await tb.cycles(200)
    got = [data for _, data in tb.take_rx()]
    kept = len(got)
    assert 2 <= kept < len(frames), \
        f"{kept} of {len(frames)} frames kept ({[len(f) for f in frames]}), {tb.counts()}"
    assert got == frames[:kept], "the frames that fit are the first ones, whole"
    counts = tb.counts()
    assert counts[RxDrop.NONE] == kept and counts[RxDrop.OVERFLOW] == len(frames) - kept, counts
    after = [make_frame(tb.rng, tb.rng.randint(MIN_FRAME_LEN, MAX_FRAME_LEN)) for _ in range(6)]
    for data in after:
        tb.send_good(data)
    await tb.wait_rx(len(after))
    assert [data for _, data in tb.take_rx()] == after
    await tb.finish()
    tb.log.info("overflow: %d of %d frames kept with rx stalled", kept, len(frames))


@cocotb.test()
async def tx_too_long_and_short(dut):
    """A frame longer than the transmit buffer is thrown away and counted; frames of 1 to
    59 octets are padded to 60; what follows is sent intact."""
    tb = PortTB(dut, idle=0.3)
    await tb.reset()
    tb.tx.extend(_beats(tb.rng.randbytes(TX_DEPTH + 5), tb.W))
    sent = [tb.rng.randbytes(n) for n in (1, 2, 13, 59, 60, 61, 700)]
    for data in sent:
        tb.tx.extend(_beats(data, tb.W))
    check_tx(await tb.take_tx(len(sent)), sent, exact_gap=False)
    await tb.finish()
    assert int(dut.tx_dropped.value) == 1 and int(dut.tx_frames.value) == len(sent)


@cocotb.test()
async def latency(dut):
    """GMII -> core: from the last FCS octet on gmii_rx to the first beat on rx. Core ->
    GMII: from the first beat of a frame offered on an idle tx to the first preamble
    octet on gmii_tx, less the frame's own octet times (the transmit buffer waits for
    the whole frame; its octets come in at one per eth_tx cycle)."""
    tb = PortTB(dut)
    await tb.reset()
    rx_ns, tx_ns = [], []
    for length in (MIN_FRAME_LEN, 200, MAX_FRAME_LEN):
        ends = []
        frame = GmiiFrame.from_payload(make_frame(tb.rng, length),
                                       tx_complete=lambda f: ends.append(f.sim_time_end))
        await tb.gmii_src.send(frame)
        await tb.wait_rx(1)
        (first_beat, _), = tb.take_rx()
        rx_ns.append(first_beat - ends[0] / 1000)
        await tb.cycles(1)
        offered = get_sim_time("ns")
        tb.tx.extend(_beats(tb.rng.randbytes(length), tb.W))
        (_, (first_octet, _, _, _)), = await tb.take_tx(1)
        tx_ns.append(out_time(tb, first_octet) - offered - length * ETH_NS)
    await tb.finish()
    tb.log.info("LATENCY W=%d: gmii_rx last FCS octet -> rx first beat %s ns; "
                "tx first beat -> gmii_tx first octet %s ns + the frame's octet times",
                tb.W, rx_ns, tx_ns)
    assert max(rx_ns) < 40 * ETH_NS and max(tx_ns) < 40 * ETH_NS


def out_time(tb, cycle):
    """Time in ns of eth_tx cycle ``cycle`` as counted by the gmii_tx recorder."""
    return tb.tx_cycle0 + cycle * ETH_NS
