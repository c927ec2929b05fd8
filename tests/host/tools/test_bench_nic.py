"""``rnic bench nic`` (host/tools/bench_nic.py): the simulated NIC on its virtual cable.

(a) The frames and line octets against scapy and the Ethernet sizes by hand.
(b) A run on the Verilated NIC (the ``rnic nic-sim`` build, cached): full-size pings 16 in
    flight are all answered, in order, as the model answers them, with no frame dropped for
    want of room (a NIC whose echo took a request only after sending the reply before lost
    one in six of these), the report's figures consistent with each other.
(c) The CLI: JSON and text, usage errors (exit 2, one line).
(d) A NIC that answers wrongly fails the run (a fake device: the model with one reply
    changed), so the benchmark cannot time garbage.
"""

import json
import random

import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import Ether

from rnic.host.model.network_layer import NicNetModel
from rnic.host.spec.net import DEFAULT_NIC_IP
from rnic.host.tools import bench_nic



# -- (a) frames ------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 56, 1472])
def test_echo_request(size):
    frame = bench_nic.echo_request(random.Random(size), size)
    packet = Ether(frame)
    assert packet[IP].dst == str(DEFAULT_NIC_IP) and packet[IP].src == "169.254.7.1"
    assert packet[ICMP].type == 8 and len(bytes(packet[ICMP].payload)) == size
    # scapy recomputes both checksums to what the frame carries
    again = Ether(frame)
    del again[IP].chksum, again[ICMP].chksum
    assert bytes(again) == frame
    assert len(frame) == 14 + 20 + 8 + size
    (reply,) = NicNetModel().receive(frame).replies
    assert Ether(reply)[ICMP].type == 0


def test_wire_octets():
    # 7 preamble + SFD, the frame padded to 60, 4 FCS, 12 of inter-frame gap
    assert bench_nic.wire_octets(bytes(42)) == 8 + 60 + 4 + 12
    assert bench_nic.wire_octets(bytes(1514)) == 1538
    # the largest ping that fits a 1500-octet MTU unfragmented is a default size
    assert max(bench_nic.NIC_SIZES) == 1472


# -- (b) the simulated NIC -------------------------------------------------------------------

def test_full_size_pings_at_line_rate():
    report = bench_nic.run_nic_bench((1472, 0), pings=60, window=16, seed=3)
    assert report["verified"] and report["bad_out"] == 0
    # the ARP request and every ping in; as many replies out
    assert report["frames_in"] == report["frames_out"] == 1 + 2 * 60
    big, small = report["results"]
    assert (big["size"], big["frame_octets"], big["pings"]) == (1472, 1514, 60)
    assert (small["size"], small["frame_octets"]) == (0, 60)
    for row in report["results"]:
        assert row["cycles"] > 0 and row["frames_per_s"] > 0
        assert row["cycles_per_ping"] == pytest.approx(row["cycles"] / row["pings"], abs=0.1)
        # a request takes at least its line octets: the NIC cannot answer faster than that
        assert row["cycles_per_ping"] >= row["wire_octets"]
        assert 0 < row["line_busy"] <= 1


# -- (c) the CLI ------------------------------------------------------------------------------

def test_cli_json_and_text(progress_only, rnic_in_process):
    code, out, err = rnic_in_process("bench", "nic", "--size", "56", "--pings", "20",
                                     "--window", "4", "--json")
    assert code == 0, err
    progress_only(err)
    report = json.loads(out)
    assert report["bench"] == "nic" and report["window"] == 4 and report["verified"]
    assert [(r["size"], r["pings"]) for r in report["results"]] == [(56, 20)]
    code, out, err = rnic_in_process("bench", "nic", "--size", "0", "--pings", "5")
    assert code == 0, err
    assert "| 0 | 60 | 5 |" in out


@pytest.mark.parametrize("args", [["--size", "1473"], ["--size", "-1"], ["--pings", "0"],
                                  ["--window", "0"], ["--size", "x"]])
def test_cli_usage_errors(args, rnic_in_process):
    code, out, err = rnic_in_process("bench", "nic", *args)
    assert code == 2 and out == ""
    assert err.startswith("rnic bench nic: error: Invalid value for '--") and err.count("\n") == 1


# -- (d) a wrong answer fails the run ---------------------------------------------------------

class _WrongNic:
    """The model as a NIC device, with reply number ``bad`` (counting from 0) changed."""

    def __init__(self, *, on_frame, on_bad, width, connections, bad):
        from rnic.host.driver.model import ModelTransport
        self._regs = ModelTransport(width=width, connections=connections, network=1,
                                    arp_entries=8)
        self.read32, self.write32 = self._regs.read32, self._regs.write32
        self._on_frame, self._model, self._bad, self._sent = on_frame, None, bad, 0

    def send_frame(self, frame):
        if self._model is None:
            from rnic.host.driver.regs import Registers
            regs = Registers(self._regs)
            self._model = NicNetModel(mac=regs.get_mac(), ip=regs.get_ip(),
                                      prefix=regs.get_prefix())
        for reply in self._model.receive(bench_nic.ethernet.pad(frame)).replies:
            if self._sent == self._bad:
                reply = reply[:-1] + bytes([reply[-1] ^ 1])
            self._sent += 1
            self._on_frame(reply)

    def stats(self):
        return {"cycles": 0, "sim_s": 0.0, "frames_in": 0, "frames_out": 0, "bad_out": 0}

    def close(self):
        pass


@pytest.mark.parametrize("bad", [0, 7])
def test_wrong_reply_fails(bad):
    def factory(**kw):
        return _WrongNic(bad=bad, **kw)
    with pytest.raises(bench_nic.NicBenchMismatch, match="differs from the model.s at octet"):
        bench_nic.run_nic_bench((56,), pings=10, window=4, device_factory=factory)
