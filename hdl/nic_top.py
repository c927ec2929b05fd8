"""The NIC without pins: GMII, the Ethernet MAC, the network layer and the RNIC core with its
register bank.

See :class:`NicTop`.
"""

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.regmap import NET_RX_COUNTERS, NET_TX_DROP_COUNTERS, REGMAP
from rnic.host.spec.tcp_engine import DEFAULT_LISTENERS, MIN_RING_LOG2

from .axi_ram import AxiRam
from .counter_memory import CounterMemory, count_registers, register_word
from .net.ethernet_port import EthernetPort
from .net.gmii import GmiiRx, GmiiTx
from .net.layouts import RX_COUNTERS
from .net.network_layer import NetworkLayer
from .rnic_core import RnicCore
from .tcp.offload import TcpOffload
from .tcp.registers import STREAM_PREFIX, TcpRegisters
from .wire_join import WireJoin

__all__ = ["NicTop"]

#: Words of the counter memory: a counter register's word address modulo it is its word.
COUNTER_WORDS = 32


def counter_word(name):
    """The counter memory's word of register ``name``."""
    return register_word(name, COUNTER_WORDS)


class NicTop(wiring.Component):
    """The NIC without pins: :class:`~rnic.hdl.net.ethernet_port.EthernetPort` (MAC, buffers,
    clock crossings), :class:`~rnic.hdl.net.network_layer.NetworkLayer` (ARP, IPv4 and TCP
    checks, ICMP echo) and :class:`~rnic.hdl.rnic_core.RnicCore` (register bank, MPA, DDP/RDMAP),
    the network configured and observed through the register map's Network block (NET_*).

    How the registers reach the network: the core keeps its register bank; built with
    ``network=True`` it reports NET_CAPS.NETWORK 1 and passes the bank's Network block out
    on its ``net`` port (:func:`rnic.hdl.regbank.block_signature`), which this top wires to
    the network blocks. Cores built without it (``RnicCore`` alone, the board tops) read 0 in
    every read-only NET_* field.

    TCP: :class:`~rnic.hdl.tcp.offload.TcpOffload` takes the network layer's TCP packets
    (``NetworkLayer.tcp``, counted in NET_RX_TCP) and sends through its IPv4 send path
    (``NetworkLayer.ip_tx``: NET_GATEWAY, NET_TX_NO_ROUTE, NET_TX_ARP_MISS), configured and
    watched through the register map's TCP block (TCP_*,
    :class:`~rnic.hdl.tcp.registers.TcpRegisters`). Its send rings are in a block RAM of
    ``ring_octets`` (:class:`~rnic.hdl.axi_ram.AxiRam`). The echo service runs entirely
    inside. The other connections' octets go between TCP and the core through
    :class:`~rnic.hdl.wire_join.WireJoin`: a connection opens as a byte stream, whose octets
    the host moves through the stream port (TCP_STREAM_*: MPA's Request and Reply), until
    TCP_CMD.MODE makes it carry FPDUs, which go to and come from the core; the core's
    transmit scheduler sends only on connections whose send ring has room (the core's
    ``may_send``). So the core's ``tx_wire``, ``rx_wire`` and ``tx_ulpdu`` are not ports of
    this top with TCP (ULPDUs of ``tx_ulpdu``, and the data port's DP_CTRL.SOURCE, would
    not wait for TCP's permission); ``rx_ulpdu`` is (DP_CTRL.BYPASS).

    Parameters (keyword-only, checked by the blocks)
    ----------
    width : int
        Datapath width W in octets of the core and of the frame streams (default 4).
    connections, stags, addr_width, dp_depth : int
        As :class:`~rnic.hdl.rnic_core.RnicCore` (defaults 16, 256, 32, 512).
    arp_entries : int
        Slots of the ARP cache (1 .. 64, default 8; NET_CAPS.ARP_ENTRIES).
    eth_rx_depth, eth_tx_depth : int
        Octets of the MAC's receive and transmit frame buffers (default 4096 each).
    net_rx_depth : int
        Octets of the network layer's receive buffer (default 4096).
    tcp : bool
        With the TCP engine (default True). Without it (the board tops, until the engine
        meets their timing) the network layer's TCP packets are counted in NET_RX_TCP and
        dropped, the network layer has no send path (NET_GATEWAY is storage,
        NET_TX_NO_ROUTE/ARP_MISS read 0), the TCP registers read 0 in their read-only
        fields (TCP_CAPS.TCP 0), the ``tick`` and ``tcp_active`` ports do not exist and
        the core's wire ports are this top's.
    tcp_listeners, tcp_records : int
        The TCP engine's listening-port slots (default 4) and FPDU ends kept per send ring
        (default 16).
    ring_octets : int
        Octets of the send rings' memory, a power of 2 of at least ``connections << 12``
        (default ``connections << 12``: 4 KiB a connection; TCP_CAPS.RING_LOG2).
    queue_depths : dict or None
        The core's queue depths by RnicCore parameter name (``rq_depth``, ``sq_depth``,
        ``cq_depth``, ``ird_depth``, ``ord_depth``; checked there), default RnicCore's.

    Ports
    -----
    gmii_rx : In(GmiiRx)
        In the ``eth_rx`` clock domain (the PHY's receive clock).
    gmii_tx : Out(GmiiTx)
        In the ``eth_tx`` clock domain (the transmit clock). Both Ethernet domains may run
        on one clock (plain GMII in simulation); everything else is in ``sync`` (at least
        125 MHz / W for line rate, see EthernetPort).
    s_axil : In(AXI4LiteSignature(addr_width=12))
        The register bus (the map of :mod:`rnic.host.spec.regmap`, Network block included).
    rx_ulpdu, m_axi, m_axi_rd, irq; tx_ulpdu, tx_wire, rx_wire (only without TCP)
        The core's ports, as :class:`~rnic.hdl.rnic_core.RnicCore`'s.
    tick : In(1)
        A pulse advances TCP's time base by a tick (a simulation drives it from wall time).
    tcp_active : Out(1)
        Some TCP connection is open: its timers need the time base.

    The Network registers
    ---------------------
    NET_MAC_HI/LO, NET_IP, NET_PREFIX drive the MAC's address filter and the network
    layer's addresses, NET_MAX_LEN the MAC's size limit (change them while no frame
    moves).
    NET_RX_GOOD .. NET_RX_OVERFLOW count the MAC's receive verdicts
    (``EthernetPort.rx_events``), NET_RX_ETHERTYPE .. NET_RX_TCP_CHECKSUM the network layer's
    ``drop`` events by reason, NET_RX_TCP the TCP packets TCP takes,
    NET_TX_FRAMES/NET_TX_DROPPED the MAC's transmit events (``EthernetPort.tx_events``),
    NET_TX_NO_ROUTE/NET_TX_ARP_MISS the send path's drops (``NetworkLayer.tx_drop``);
    all of them count from ``rst`` (not cleared by CTRL.CLEAR_COUNTERS or SOFT_RESET).
    They are kept in a block RAM (:class:`~rnic.hdl.counter_memory.CounterMemory`, area:
    a few pending bits per counter instead of 32 flip-flops, an adder and 32 inputs of
    the bank's read multiplexer), whose read port follows the bus's read address: the
    bank samples its read-only inputs in the cycle after it accepts the address, when the
    memory's word for that address is there. NET_ARP_CMD.WRITE
    writes one ARP cache slot from NET_ARP_ENTRY, NET_ARP_IP and NET_ARP_MAC_HI/LO in the
    cycle of its pulse; NET_ARP_CMD.REQUEST (while NET_ARP_STATUS.REQUEST_BUSY is 0) hands
    NET_ARP_IP to the ARP block, which broadcasts a request (REQUEST_BUSY until it took it).
    NET_ARP_LOOKUP_IP is looked up in the cache continuously, one slot a cycle
    (NET_ARP_LOOKUP.DONE once NET_ARP_LOOKUP.HIT and NET_ARP_LOOKUP_MAC_HI/LO are those of
    the address, at most ``2 * arp_entries + 1`` cycles after it was written).

    Latency and throughput: those of the blocks (EthernetPort, NetworkLayer, RnicCore); the
    register bank adds none to the data paths. A counter shows an event a few cycles after
    it (the MAC's cross from the Ethernet domains through a FIFO), and up to
    ``COUNTER_WORDS + 2`` cycles more (the counter memory's sweep).
    """

    #: The core's ports joined to TCP (not this top's with TCP).
    JOINED = ("tx_ulpdu", "tx_wire", "rx_wire")

    def __init__(self, *, width=4, connections=16, stags=256, addr_width=32, dp_depth=512,
                 arp_entries=8, eth_rx_depth=4096, eth_tx_depth=4096, net_rx_depth=4096,
                 tcp=True, tcp_listeners=DEFAULT_LISTENERS, tcp_records=16, ring_octets=None,
                 queue_depths=None):
        #: The blocks, for a design around this top (LEDs, counters): ``eth`` the
        #: :class:`~rnic.hdl.net.ethernet_port.EthernetPort`, ``net`` the
        #: :class:`~rnic.hdl.net.network_layer.NetworkLayer`, ``core`` the RnicCore.
        self.core = RnicCore(width=width, connections=connections, stags=stags,
                             addr_width=addr_width, dp_depth=dp_depth, network=True,
                             arp_entries=arp_entries, **(queue_depths or {}))
        self.eth = EthernetPort(width=width, rx_depth=eth_rx_depth, tx_depth=eth_tx_depth)
        if not isinstance(tcp, bool):
            raise TypeError(f"tcp must be a bool, not {tcp!r}")
        # The send path (Ipv4Tx) comes with TCP, its only user.
        self.net = NetworkLayer(width=width, arp_entries=arp_entries, rx_depth=net_rx_depth,
                                send_path=tcp)
        self.width = width
        self.connections = connections
        self.arp_entries = arp_entries
        # The core's ports but its bank's Network and TCP blocks and TCP's permission, which
        # this top connects, and with TCP its wire ports (joined to TCP).
        inside = ("net", "tcp", "may_send", "tx_started")
        if tcp:
            inside += self.JOINED
        core_ports = {name: member for name, member in self.core.signature.members.items()
                      if name not in inside}
        #: The TCP engine (:class:`~rnic.hdl.tcp.offload.TcpOffload`), its registers, its
        #: send rings' memory (:class:`~rnic.hdl.axi_ram.AxiRam`) and its join to the core
        #: (:class:`~rnic.hdl.wire_join.WireJoin`); None without TCP.
        self.tcp = self.tcp_regs = self.rings = self.join = None
        tcp_ports = self._tcp_blocks(tcp_listeners, tcp_records, ring_octets,
                                     addr_width) if tcp else {}
        super().__init__({"gmii_rx": In(GmiiRx), "gmii_tx": Out(GmiiTx), **core_ports,
                          **tcp_ports})

    def _tcp_blocks(self, listeners, records, ring_octets, addr_width):
        """The TCP blocks; their ports of this top."""
        width, connections = self.width, self.connections
        self.tcp = TcpOffload(width=width, connections=connections, listeners=listeners,
                              records=records, addr_width=addr_width)
        control = self.tcp.signature.members
        ring_octets = connections << MIN_RING_LOG2 if ring_octets is None else ring_octets
        ring_log2 = (ring_octets // connections).bit_length() - 1
        if (not isinstance(ring_octets, int) or ring_octets & (ring_octets - 1)
                or ring_log2 < MIN_RING_LOG2):
            raise ValueError(f"ring_octets must be a power of 2 of at least connections << "
                             f"{MIN_RING_LOG2}, not {ring_octets!r}")
        self.tcp_regs = TcpRegisters(
            control=wiring.Signature({name: control[name] for name in self.tcp.control_names}),
            connections=connections, listeners=listeners, records=records,
            ring_log2=ring_log2)
        self.rings = AxiRam(data_width=8 * width, addr_width=addr_width,
                            depth=ring_octets // width)
        self.join = WireJoin(width=width, connections=connections)
        return {"tick": In(1), "tcp_active": Out(1)}

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.eth = port = self.eth
        m.submodules.net = net = self.net
        m.submodules.net_counters = counters = CounterMemory(counters=COUNTER_WORDS)

        for name, member in core.signature.members.items():
            if name not in self.signature.members:
                continue
            if member.is_port:
                ours, theirs = getattr(self, name), getattr(core, name)
                m.d.comb += (theirs.eq(ours) if member.flow == In else ours.eq(theirs))
            elif member.flow == In:
                wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(core, name))
            else:
                wiring.connect(m, getattr(core, name), wiring.flipped(getattr(self, name)))

        wiring.connect(m, wiring.flipped(self.gmii_rx), port.gmii_rx)
        wiring.connect(m, port.gmii_tx, wiring.flipped(self.gmii_tx))
        wiring.connect(m, port.rx, net.rx)
        wiring.connect(m, net.tx, port.tx)

        r = core.net
        self._configure(m, r, port, net)
        self._count(m, r, port, net, counters)
        # (the bus's read address straight to the memory's read port: its word is on
        # ``counters.data`` in the cycle after the bank accepted the address)
        m.d.comb += counters.addr.eq(self.s_axil.araddr[2:][:len(counters.addr)])
        self._arp(m, r, net)
        if self.tcp is not None:
            self._tcp(m, core, net)
        else:
            m.d.comb += net.tcp.ready.eq(1)        # counted in NET_RX_TCP and dropped
        return m

    def _tcp(self, m, core, net):
        """The TCP engine between the network layer's TCP packets and its send path, its
        register block on the bank's TCP block."""
        m.submodules.tcp = tcp = self.tcp
        m.submodules.tcp_regs = regs = self.tcp_regs
        m.submodules.rings = rings = self.rings
        wiring.connect(m, tcp.m_axi_w, rings.w)
        wiring.connect(m, tcp.m_axi_r, rings.r)
        m.submodules.join = join = self.join
        for name in core.tcp.signature.members:
            block = join.regs if name.startswith(STREAM_PREFIX.lower()) else regs.regs
            wiring.connect(m, getattr(core.tcp, name), getattr(block, name))
        for name in self.tcp.control_names:
            member, ours, theirs = tcp.signature.members[name], getattr(tcp, name), getattr(regs, name)
            if member.is_port:
                m.d.comb += (ours.eq(theirs) if member.flow == In else theirs.eq(ours))
            elif member.dimensions:
                for one, other in zip(ours, theirs):
                    wiring.connect(m, one, other)
            else:
                wiring.connect(m, ours, theirs)
        wiring.connect(m, net.tcp, tcp.i)
        wiring.connect(m, tcp.o, net.ip_tx)
        wiring.connect(m, tcp.rx_wire, join.tcp_rx)
        wiring.connect(m, join.tcp_tx, tcp.tx_wire)
        wiring.connect(m, join.core_rx, core.rx_wire)
        wiring.connect(m, core.tx_wire, join.core_tx)
        wiring.connect(m, core.tx_started, join.core_started)
        wiring.connect(m, tcp.opened, regs.opened)
        m.d.comb += [join.opened.valid.eq(tcp.opened.valid),
                     join.opened.payload.eq(tcp.opened.payload)]
        bus = self.s_axil
        m.d.comb += [
            join.push.valid.eq(bus.awvalid & bus.awready & bus.wvalid & bus.wready
                               & (bus.awaddr[2:] == REGMAP["TCP_STREAM_TX_DATA"].addr >> 2)),
            join.push.payload.eq(bus.wdata),
            core.tx_ulpdu.valid.eq(0),
            join.may_send.eq(tcp.may_send), core.may_send.eq(join.core_may_send),
            join.fpdu.eq(regs.fpdu)]
        m.d.comb += [self.tcp_active.eq(tcp.active),
                     tcp.fpdu.eq(regs.fpdu), tcp.ip.eq(core.net.net_ip.ip),
                     net.gateway.eq(core.net.net_gateway.ip), regs.tick.eq(self.tick),
                     regs.sent.eq(tcp.o.valid & tcp.o.ready & tcp.o.payload.last),
                     regs.counter_addr.eq(self.s_axil.araddr[2:])]

    @staticmethod
    def _configure(m, r, port, net):
        """The addresses and the size limit from the registers."""
        mac = Cat(r.net_mac_lo.mac, r.net_mac_hi.mac)
        m.d.comb += [
            port.mac.eq(mac),
            port.max_len.eq(r.net_max_len.len),
            net.mac.eq(mac),
            net.ip.eq(r.net_ip.ip),
            net.prefix.eq(r.net_prefix.prefix),
        ]

    @staticmethod
    def _count(m, r, port, net, counters):
        """The counted events into the counter memory, its read data into the RO registers."""
        mac_reasons = [int(reason.value) for reason in RX_COUNTERS]
        events = {}
        for reason, name in NET_RX_COUNTERS:
            if int(reason) in mac_reasons:
                events[name] = port.rx_events[mac_reasons.index(int(reason))]
            else:
                events[name] = net.drop.valid & (net.drop.reason == reason)
        events["NET_RX_TCP"] = net.tcp.valid & net.tcp.ready & net.tcp.payload.last
        for reason, name in NET_TX_DROP_COUNTERS if "tx_drop" in net.signature.members else ():
            events[name] = net.tx_drop.valid & (net.tx_drop.reason == reason)
        events["NET_TX_FRAMES"] = port.tx_events[0]
        events["NET_TX_DROPPED"] = port.tx_events[1]
        count_registers(m, counters, COUNTER_WORDS, events, r)

    @staticmethod
    def _arp(m, r, net):
        """Static entries, requests and the lookup window."""
        write = net.arp_write
        m.d.comb += [
            write.valid.eq(r.net_arp_cmd.write),
            write.payload.index.eq(r.net_arp_entry.index),
            write.payload.valid.eq(r.net_arp_entry.valid),
            write.payload.static.eq(r.net_arp_entry.static),
            write.payload.ip.eq(r.net_arp_ip.ip),
            write.payload.mac.eq(Cat(r.net_arp_mac_lo.mac, r.net_arp_mac_hi.mac)),
        ]
        # A request waits in a register until the ARP block takes it (it may be busy with a
        # reply); a REQUEST strobe while one waits is ignored.
        request = net.arp_request
        with m.If(request.ready):
            m.d.sync += request.valid.eq(0)
        with m.If(r.net_arp_cmd.request & ~request.valid):
            m.d.sync += [request.valid.eq(1), request.payload.eq(r.net_arp_ip.ip)]
        m.d.comb += r.net_arp_status.request_busy.eq(request.valid)

        # (the lookup's hit and MAC are registers of the cache's; DONE compares the
        # address they are for with the window's, so that it drops with a new address)
        m.d.comb += [
            net.arp_lookup_ip.eq(r.net_arp_lookup_ip.ip),
            r.net_arp_lookup.done.eq(net.arp_lookup_done),
            r.net_arp_lookup.hit.eq(net.arp_lookup_hit),
            r.net_arp_lookup_mac_hi.mac.eq(net.arp_lookup_mac[32:]),
            r.net_arp_lookup_mac_lo.mac.eq(net.arp_lookup_mac[:32]),
        ]
