"""The lossy relay of the interop tests (tests/interop/conftest.py ``Relay``), without a VM:
numbered datagrams both ways through it arrive lost, duplicated and reordered as its counts
say, every one that arrives is one that was sent, and each end hears from the relay's port
that it sends to."""

import socket
import threading
import time


def _receiver():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.5)
    return sock


def test_relay_drops_duplicates_and_reorders(relay):
    a, b = _receiver(), _receiver()
    middle = relay(to_a=a.getsockname()[1], to_b=b.getsockname()[1], rate=0.05, seed=3)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = 2000
    got = {"a": [], "b": []}
    sources = {"a": set(), "b": set()}

    def receive(name, sock):
        try:
            while True:
                data, source = sock.recvfrom(16)
                got[name].append(int.from_bytes(data, "big"))
                sources[name].add(source[1])
        except socket.timeout:
            pass
    readers = [threading.Thread(target=receive, args=item) for item in (("a", a), ("b", b))]
    for t in readers:
        t.start()
    for k in range(sent):
        for port in (middle.a_port, middle.b_port):
            sender.sendto(k.to_bytes(4, "big"), ("127.0.0.1", port))
        if k % 5 == 0:
            time.sleep(0.001)           # (the relay's and the readers' buffers stay short)
    for t in readers:
        t.join()
    for name in "ab":
        counts, seq = middle.counts[name], got[name]
        assert counts["in"] == sent
        assert len(seq) == sent - counts["lost"] + counts["duplicated"]
        assert set(seq) <= set(range(sent))
        assert sent - len(set(seq)) == counts["lost"]
        for what in ("lost", "duplicated", "reordered"):
            assert 0.02 * sent < counts[what] < 0.09 * sent, (what, counts)
        assert any(x > y for x, y in zip(seq, seq[1:])), "nothing came out of order"
    # each end hears from the port it sends to, as qemu's dgram netdev requires
    assert sources == {"a": {middle.b_port}, "b": {middle.a_port}}
    for sock in (a, b, sender):
        sock.close()
