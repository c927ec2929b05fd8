"""The in-process model device: the register bank model with an emulation of the core behind it.

:class:`ModelTransport` is a :class:`rnic.host.driver.regs.BankModel` with
:class:`ModelCore` behind it (contexts, STag table, queues, completion queue, error
capture, counters), so that every driver sequence runs without hardware
(``--device model``).
"""

from __future__ import annotations

import collections
import dataclasses
import threading

from rnic.host.driver import regs
from rnic.host.driver.transport import Transport, TransportError
from rnic.host.spec.errors import ErrorInfo
from rnic.host.spec.regmap import ConnState, CqQueue, CqStatus

__all__ = ["ModelCore", "ModelTransport"]


@dataclasses.dataclass
class _Context:
    tx: regs.MpaDirection
    rx: regs.MpaDirection
    ird: int
    ord: int
    state: int
    error: tuple | None = None      # (layer, etype, ecode)


_COUNTER_NAMES = ("rx_fpdus", "rx_crc_errors", "rx_marker_errors", "rx_length_errors",
                  "rx_octets", "tx_fpdus", "tx_markers", "tx_octets")
_COUNTER_64 = {"rx_octets", "tx_octets"}


class ModelCore:
    """Register-visible behaviour of the RNIC core behind a :class:`~rnic.host.driver.regs.BankModel`.

    It reacts to the bank's pulses (context COMMIT/SET_STATE, STag COMMIT,
    RQ POST, SQ DOORBELL, CQ POP, SOFT_RESET, CLEAR_COUNTERS) and drives the
    bank's read-only inputs (STATUS.READY, CTX_STATUS/CTX_ERROR of the
    selected connection, queue FULL flags, the completion queue head, the
    captured error, counters). It moves no data: a data path (the software
    RNIC of :mod:`rnic.host.net.rnic_sw`, through :mod:`rnic.host.net.transfer`) reports what
    happened with :meth:`complete`, :meth:`report_error`,
    :meth:`set_counters` and :meth:`set_state`, and the driver reads it back
    through the registers like it would from the gateware.

    Parameters
    ----------
    rq_depth, sq_depth : int
        Entries per connection before RQ_STATUS/SQ_STATUS.FULL.
    cq_depth : int
        Completion queue entries before CQ_STATUS.OVERFLOW.
    """

    def __init__(self, *, rq_depth=64, sq_depth=64, cq_depth=256):
        self.rq_depth, self.sq_depth, self.cq_depth = rq_depth, sq_depth, cq_depth
        self.arp = {}                # slot -> (ip, mac, static) of the network layer's ARP cache
        self.contexts = {}
        self.stags = {}
        self.rq = collections.defaultdict(collections.deque)
        self.sq = collections.defaultdict(collections.deque)
        self.cq = collections.deque()
        self.counters = dict.fromkeys(_COUNTER_NAMES, 0)
        self.err_count = 0
        self.captured = None         # (conn, tx, layer, etype, ecode)
        self.bank = None

    # -- reactions to the bus side
    def on_pulse(self, bank, register, field, value):
        out = bank.out
        if (register, field) == ("ctrl", "soft_reset"):
            self.contexts.clear()
            self.rq.clear()
            self.sq.clear()
            self.cq.clear()
            self._clear_counters()
            self.captured = None
            bank.state[("err_status", "pending")] = 0
            bank.state[("err_status", "overflow")] = 0
            bank.state[("cq_status", "overflow")] = 0
        elif (register, field) == ("ctrl", "clear_counters"):
            self._clear_counters()
        elif register == "ctx_cmd":
            conn = out("conn_sel", "conn")
            if field == "commit":
                def d(name):
                    return regs.MpaDirection(bool(out(name, "markers")), bool(out(name, "crc")),
                                             out(name, "phase") & ~3, out(name, "mulpdu"))
                self.contexts[conn] = _Context(d("ctx_tx"), d("ctx_rx"), out("ctx_ird_ord", "ird"),
                                               out("ctx_ird_ord", "ord"), out("ctx_state", "state"))
            elif field == "set_state":
                ctx = self.contexts.get(conn)
                if ctx is not None:
                    ctx.state = out("ctx_state", "state")
        elif (register, field) == ("stag_cmd", "commit"):
            index = out("stag_index", "index")
            if index < bank.params["stags"]:
                self.stags[index] = {
                    "stag": out("stag_key", "stag"),
                    "base": out("stag_base_hi", "to") << 32 | out("stag_base_lo", "to"),
                    "addr": out("stag_addr_hi", "addr") << 32 | out("stag_addr_lo", "addr"),
                    "length": out("stag_length", "length"),
                    "valid": bool(out("stag_attr", "valid")),
                    "remote_read": bool(out("stag_attr", "remote_read")),
                    "remote_write": bool(out("stag_attr", "remote_write")),
                    "remote_inv": bool(out("stag_attr", "remote_inv")),
                    "conn": out("stag_attr", "conn"),
                }
        elif (register, field) == ("rq_cmd", "post"):
            conn = out("rq_conn", "conn")
            if conn < bank.params["connections"] and len(self.rq[conn]) < self.rq_depth:
                self.rq[conn].append({
                    "addr": out("rq_addr_hi", "addr") << 32 | out("rq_addr_lo", "addr"),
                    "length": out("rq_length", "length"), "wr_id": out("rq_id", "wr_id")})
        elif (register, field) == ("sq_cmd", "doorbell"):
            conn = out("sq_wr", "conn")
            if conn >= bank.params["connections"]:
                # no such connection: an error completion at once, as the core does
                self.complete(conn=conn, wr_id=out("sq_id", "wr_id"), opcode=out("sq_wr", "opcode"),
                              queue=CqQueue.SQ, status=CqStatus.BAD_REQUEST)
            elif len(self.sq[conn]) < self.sq_depth:
                self.sq[conn].append({
                    "opcode": out("sq_wr", "opcode"), "signaled": bool(out("sq_wr", "signaled")),
                    "laddr": out("sq_laddr_hi", "addr") << 32 | out("sq_laddr_lo", "addr"),
                    "length": out("sq_length", "length"), "lstag": out("sq_lstag", "stag"),
                    "rstag": out("sq_rstag", "stag"),
                    "rto": out("sq_rto_hi", "to") << 32 | out("sq_rto_lo", "to"),
                    "inv_stag": out("sq_inv_stag", "stag"), "wr_id": out("sq_id", "wr_id")})
        elif (register, field) == ("cq_cmd", "pop"):
            if self.cq:
                self.cq.popleft()
        elif (register, field) == ("net_arp_cmd", "write") and bank.params["network"]:
            index = out("net_arp_entry", "index")
            if index < bank.params["arp_entries"]:
                if out("net_arp_entry", "valid"):
                    mac = out("net_arp_mac_hi", "mac") << 32 | out("net_arp_mac_lo", "mac")
                    self.arp[index] = (out("net_arp_ip", "ip"), mac, bool(out("net_arp_entry", "static")))
                else:
                    self.arp.pop(index, None)

    def _clear_counters(self):
        self.counters = dict.fromkeys(_COUNTER_NAMES, 0)
        self.err_count = 0

    def sync(self, bank):
        """Drive the bank's RO inputs from the core state (before every bus read)."""
        si = bank.set_input
        si("STATUS", "READY", 1)
        ctx = self.contexts.get(bank.out("conn_sel", "conn"))
        si("CTX_STATUS", "STATE", ConnState.IDLE if ctx is None else ctx.state)
        si("CTX_STATUS", "BUSY", 0)
        err = None if ctx is None else ctx.error
        si("CTX_STATUS", "ERROR", int(err is not None))
        layer, etype, ecode = err or (0, 0, 0)
        si("CTX_ERROR", "LAYER", layer)
        si("CTX_ERROR", "ETYPE", etype)
        si("CTX_ERROR", "ECODE", ecode)
        si("RQ_STATUS", "FULL", int(len(self.rq[bank.out("rq_conn", "conn")]) >= self.rq_depth))
        si("SQ_STATUS", "FULL", int(len(self.sq[bank.out("sq_wr", "conn")]) >= self.sq_depth))
        head = self.cq[0] if self.cq else None
        si("CQ_STATUS", "VALID", int(head is not None))
        if head is not None:
            si("CQ_WR_ID", "WR_ID", head.wr_id)
            si("CQ_INFO", "OPCODE", head.opcode)
            si("CQ_INFO", "QUEUE", head.queue)
            si("CQ_INFO", "INVALIDATED", int(head.invalidated))
            si("CQ_INFO", "STATUS", head.status)
            si("CQ_INFO", "CONN", head.conn)
            si("CQ_LENGTH", "LENGTH", head.length)
            si("CQ_INV_STAG", "STAG", head.inv_stag)
            si("CQ_INFO", "SOLICITED", int(head.solicited))
            si("CQ_MSN", "MSN", head.msn)
            si("CQ_STAG", "STAG", head.stag)
            si("CQ_TO_LO", "TO", head.to & 0xFFFFFFFF)
            si("CQ_TO_HI", "TO", head.to >> 32)
        cap = self.captured or (0, 0, 0, 0, 0)
        si("ERR_CONN", "CONN", cap[0])
        si("ERR_CONN", "TX", int(cap[1]))
        si("ERR_INFO", "LAYER", cap[2])
        si("ERR_INFO", "ETYPE", cap[3])
        si("ERR_INFO", "ECODE", cap[4])
        si("ERR_COUNT", "COUNT", self.err_count & 0xFFFFFFFF)
        if bank.params["network"]:
            want = bank.out("net_arp_lookup_ip", "ip")
            mac = next((m for ip, m, _ in self.arp.values() if ip == want), None)
            si("NET_ARP_LOOKUP", "HIT", int(mac is not None))
            si("NET_ARP_LOOKUP", "DONE", 1)
            si("NET_ARP_LOOKUP_MAC_HI", "MAC", (mac or 0) >> 32)
            si("NET_ARP_LOOKUP_MAC_LO", "MAC", (mac or 0) & 0xFFFFFFFF)
        for name, value in self.counters.items():
            if name in _COUNTER_64:
                si(name.upper() + "_LO", "COUNT", value & 0xFFFFFFFF)
                si(name.upper() + "_HI", "COUNT", (value >> 32) & 0xFFFFFFFF)
            else:
                si(name.upper(), "COUNT", value & 0xFFFFFFFF)

    # -- the core side, for a data path
    def complete(self, *, conn=0, wr_id, opcode, queue, status=CqStatus.SUCCESS, length=0,
                 invalidated=False, inv_stag=0, msn=0, solicited=False, stag=0, to=0):
        """Queue a completion; the matching posted RQ buffer / SQ work request is retired."""
        wr_id &= 0xFFFFFFFF
        q = self.rq[conn] if queue == CqQueue.RQ else self.sq[conn]
        for i, entry in enumerate(q):
            if entry["wr_id"] == wr_id:
                del q[i]
                break
        if len(self.cq) >= self.cq_depth:
            if self.bank is not None:
                self.bank.set_w1c("CQ_STATUS", "OVERFLOW", 1)
            return
        self.cq.append(regs.Completion(wr_id, int(opcode), int(queue), int(status), conn,
                                       length & 0xFFFFFFFF, bool(invalidated), inv_stag & 0xFFFFFFFF,
                                       msn=msn & 0xFFFFFFFF, solicited=bool(solicited),
                                       stag=stag & 0xFFFFFFFF, to=to & ((1 << 64) - 1)))

    def report_error(self, conn, info, *, tx=False, state=ConnState.ERROR):
        """Capture a protocol error (``ErrorInfo`` or ``(layer, etype, ecode)``) of ``conn``."""
        if isinstance(info, ErrorInfo):
            info = (int(info.layer), int(info.etype), int(info.ecode))
        self.err_count += 1
        ctx = self.contexts.get(conn)
        if ctx is not None:
            if ctx.error is None:
                ctx.error = tuple(info)
            if state is not None:
                ctx.state = state
        if self.bank is None:
            return
        if self.bank.out("err_status", "pending"):
            self.bank.set_w1c("ERR_STATUS", "OVERFLOW", 1)
        else:
            self.captured = (conn, bool(tx), *info)
            self.bank.set_w1c("ERR_STATUS", "PENDING", 1)

    def set_state(self, conn, state):
        ctx = self.contexts.get(conn)
        if ctx is not None:
            ctx.state = ConnState(state)

    def set_counters(self, **values):
        for name, value in values.items():
            if name not in self.counters:
                raise KeyError(f"no counter {name!r} (counters: {', '.join(self.counters)})")
            self.counters[name] = value

    def add_counters(self, **deltas):
        for name, value in deltas.items():
            self.set_counters(**{name: self.counters[name] + value})


class ModelTransport(Transport):
    """An in-process device: :class:`~rnic.host.driver.regs.BankModel` plus :class:`ModelCore`.

    Parameters are the bank's build parameters (``width``, ``connections``,
    ``stags``; ``network``/``arp_entries`` for a device with the network layer, whose ARP
    cache is emulated: NET_ARP_CMD.WRITE and the lookup window; its counters are RO
    inputs a test sets on ``bank``; ``ird_depth``/``ord_depth`` reported in QUEUE_CAPS) and
    the core's queue depths.
    """

    name = "model"

    def __init__(self, *, width=8, connections=16, stags=256, rq_depth=64, sq_depth=64,
                 cq_depth=256, network=0, arp_entries=0, ird_depth=0, ord_depth=0):
        self.core = ModelCore(rq_depth=rq_depth, sq_depth=sq_depth, cq_depth=cq_depth)
        self.bank = regs.BankModel(width=width, connections=connections, stags=stags,
                                   network=network, arp_entries=arp_entries,
                                   ird_depth=ird_depth, ord_depth=ord_depth,
                                   on_pulse=self.core.on_pulse)
        self.core.bank = self.bank
        self._lock = threading.RLock()
        self.closed = False

    def read32(self, addr):
        with self._lock:
            self.core.sync(self.bank)
            try:
                return self.bank.read32(addr)
            except OSError as e:
                raise TransportError(str(e)) from None

    def write32(self, addr, value):
        with self._lock:
            try:
                self.bank.write32(addr, value & 0xFFFFFFFF)
            except OSError as e:
                raise TransportError(str(e)) from None

    def close(self):
        self.closed = True
