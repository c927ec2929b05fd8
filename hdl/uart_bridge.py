"""UART to AXI4-Lite master bridge: register access from a host over a serial line.

See :class:`UARTBridge`. The byte protocol (requests ``'W' A1 A0 D3 D2 D1 D0``,
``'R' A1 A0``, ``'P'``; answers ``'w' S``, ``'r' D3 D2 D1 D0 S``, ``'p' V AW``;
resynchronisation by frame timeout and break) is documented in
:mod:`rnic.host.driver.uart` (the host-side transport); the constants both sides use
are in :mod:`rnic.host.spec.uart`.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rnic.host.spec.uart import (ANS_PING, ANS_READ, ANS_WRITE, CMD_PING, CMD_READ, CMD_WRITE,
                                 FRAME_TIMEOUT_S, PROTOCOL_VERSION, STATUS_DECERR, STATUS_TIMEOUT)

from .axi import AXI4LiteSignature
from .stream_slice import StreamSlice
from .synth_hints import SyncFIFOBuffered
from .uart import UARTRx, UARTTx, uart_divisor

__all__ = ["UARTBridge"]


class UARTBridge(wiring.Component):
    """AXI4-Lite master driven by the UART bridge protocol of :mod:`rnic.host.driver.uart`.

    Parameters (keyword-only)
    ----------
    clk_freq : float
        Frequency of the ``sync`` domain in Hz.
    baud : int
        Line rate (default 115200); with ``clk_freq`` it must give a divisor
        of at least 4 and a rate error below 1.5 % (:func:`rnic.hdl.uart.uart_divisor`).
    addr_width : int
        Address bits of ``m_axil`` (2 .. 16, default 16). A request for an
        address at or above ``2**addr_width`` is answered DECERR without a
        bus access.
    frame_timeout : float
        Seconds the bridge waits for the next octet inside a frame before it
        drops the partial frame (default 20 ms).
    bus_timeout : int
        Clock cycles the bridge waits for the slave (address/data handshake
        plus response) before it withdraws the request and answers TIMEOUT
        (default 65536). Withdrawing a valid before its ready is outside the
        AXI rules: this is a last resort against a hung slave, which the
        host then sees as TIMEOUT instead of a silent bridge. Late responses
        are swallowed (``bready``/``rready`` stay high while idle).
    fifo_depth : int
        Octets of receive buffer in front of the request parser (default 16;
        a request is at most 7 octets, so a host that waits for each answer
        never overflows it).

    Ports
    -----
    rx : ``In(1)``, tx : ``Out(1)``
        The serial line (8N1, idle high); ``rx`` is synchronised inside.
    m_axil : ``Out(AXI4LiteSignature(addr_width=addr_width))``
        The bus. Writes use all four byte strobes; ``awprot``/``arprot`` are 0.
        One access at a time; read and write channels are not used together.
    activity : ``Out(1)``
        One-cycle pulse per octet received or sent (for an LED).
    error : ``Out(1)``
        One-cycle pulse when the bridge drops something: an octet that starts
        no frame, a partial frame (frame timeout, framing error), a receive
        buffer overflow; or answers TIMEOUT.
    """

    def __init__(self, *, clk_freq, baud=115200, addr_width=16, frame_timeout=FRAME_TIMEOUT_S,
                 bus_timeout=1 << 16, fifo_depth=16):
        if not isinstance(addr_width, int) or not 2 <= addr_width <= 16:
            raise ValueError(f"addr_width must be an integer in 2..16, not {addr_width!r}")
        if not isinstance(bus_timeout, int) or bus_timeout < 2:
            raise ValueError(f"bus_timeout must be an integer >= 2, not {bus_timeout!r}")
        if not frame_timeout > 0:
            raise ValueError(f"frame_timeout must be positive, not {frame_timeout!r}")
        self.clk_freq = clk_freq
        self.baud = baud
        self.divisor = uart_divisor(clk_freq, baud)
        self.addr_width = addr_width
        # at least 2 octet times, so that back-to-back octets never time out
        self.frame_timeout_cycles = max(round(frame_timeout * clk_freq), 20 * self.divisor)
        self.bus_timeout = bus_timeout
        self.fifo_depth = fifo_depth
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "m_axil": Out(AXI4LiteSignature(addr_width=addr_width)),
            "activity": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.m_axil

        m.submodules.uart_rx = urx = UARTRx(divisor=self.divisor)
        m.submodules.uart_tx = uart_tx = UARTTx(divisor=self.divisor)
        # the answer's octets pass a register on their way to the transmitter (timing: the
        # transmitter sits by its pin, the state machine by the bus; a UART octet lasts
        # thousands of cycles, and the register holds the next one while the transmitter
        # sends, so octets still leave back to back)
        m.submodules.tx_slice = utx = StreamSlice(8, full_rate=False)
        wiring.connect(m, utx.o, uart_tx.i)
        m.submodules.rx_fifo = rxq = SyncFIFOBuffered(width=8, depth=self.fifo_depth)
        m.d.comb += [
            urx.rx.eq(self.rx),
            self.tx.eq(uart_tx.tx),
            rxq.w_data.eq(urx.o.payload),
            rxq.w_en.eq(urx.o.valid),
            urx.o.ready.eq(1),
        ]
        overflow = Signal()
        m.d.comb += overflow.eq(urx.o.valid & ~rxq.w_rdy)

        cmd = Signal(8)
        frame = Signal(48)                 # A1 A0 D3 D2 D1 D0, shifted in from the right
        left = Signal(range(7))            # octets still to receive
        timer = Signal(range(max(self.frame_timeout_cycles, self.bus_timeout) + 1))
        # ``timer == frame_timeout_cycles`` / ``== bus_timeout``, registered with the timer
        # (timing: no wide compare in front of the state machine); set from ``timer == N - 1``
        # as the timer steps, so that the increment's carry chain does not feed them
        frame_expired = Signal()
        bus_expired = Signal()

        def timer_restart():
            return [timer.eq(0), frame_expired.eq(0), bus_expired.eq(0)]

        def timer_count():
            return [timer.eq(timer + 1), frame_expired.eq(timer == self.frame_timeout_cycles - 1),
                    bus_expired.eq(timer == self.bus_timeout - 1)]
        answer = Signal(48)                # sent from the top octet down
        to_send = Signal(range(7))

        addr = Signal(16)
        m.d.comb += addr.eq(frame[32:48])
        # the address is inside the window: registered in DECODE (timing: no compare in
        # front of the answer register's enable)
        in_window = Signal()
        # the slave's answer, registered before it is sent (timing, as in_window)
        reply_data = Signal(32)
        reply_status = Signal(8)

        drop = Signal()                    # a dropped octet / frame / timeout answer
        m.d.comb += [
            self.activity.eq(urx.o.valid | (utx.i.valid & utx.i.ready)),
            self.error.eq(drop | overflow | urx.framing_error),
            utx.i.payload.eq(answer[40:48]),
            bus.awprot.eq(0), bus.arprot.eq(0), bus.wstrb.eq(0b1111),
            # address and data straight from the frame register, valids from registers:
            # the slave's decoding gets the whole cycle
            bus.awaddr.eq(addr), bus.araddr.eq(addr), bus.wdata.eq(frame[0:32]),
        ]

        def send(*octets):
            """Load the answer register (octets as 8-bit values) and go to ANSWER."""
            value = Cat(*reversed([Const(o, 8) if isinstance(o, int) else o for o in octets]))
            m.d.sync += [answer.eq(value << (8 * (6 - len(octets)))), to_send.eq(len(octets))]
            m.next = "ANSWER"

        def reply(data, status):
            m.d.sync += [reply_data.eq(data), reply_status.eq(status)]
            m.next = "REPLY"

        # Every state that loads the answer register decides from registers only (the
        # command octet, in_window, the slave's registered answer): the bridge is slow,
        # a cycle per step costs nothing, and it stays off the core clock's critical paths.
        with m.FSM(name="bridge"):
            with m.State("IDLE"):
                m.d.comb += [rxq.r_en.eq(1), bus.bready.eq(1), bus.rready.eq(1)]
                with m.If(rxq.r_rdy):
                    m.d.sync += [cmd.eq(rxq.r_data), *timer_restart()]
                    m.next = "COMMAND"

            with m.State("COMMAND"):
                with m.Switch(cmd):
                    with m.Case(CMD_WRITE):
                        m.d.sync += left.eq(6)
                        m.next = "FRAME"
                    with m.Case(CMD_READ):
                        m.d.sync += left.eq(2)
                        m.next = "FRAME"
                    with m.Case(CMD_PING):
                        send(ANS_PING, PROTOCOL_VERSION, self.addr_width)
                    with m.Default():
                        m.d.comb += drop.eq(1)
                        m.next = "IDLE"

            with m.State("FRAME"):
                m.d.comb += rxq.r_en.eq(1)
                m.d.sync += timer_count()
                with m.If(urx.framing_error | frame_expired):
                    m.d.comb += drop.eq(1)
                    m.next = "IDLE"
                with m.Elif(rxq.r_rdy):
                    m.d.sync += [frame.eq(Cat(rxq.r_data, frame[:40])), left.eq(left - 1),
                                 *timer_restart()]
                    with m.If(left == 1):
                        m.next = "DECODE"

            with m.State("DECODE"):
                # a read's address arrived in frame[0:16]: move it where a write's is
                with m.If(cmd == CMD_READ):
                    m.d.sync += [frame[32:48].eq(frame[0:16]),
                                 in_window.eq(frame[0:16] >> self.addr_width == 0)]
                    m.next = "CHECK_R"
                with m.Else():
                    m.d.sync += in_window.eq(addr >> self.addr_width == 0)
                    m.next = "CHECK_W"

            with m.State("CHECK_W"):
                m.d.sync += timer_restart()
                with m.If(in_window):
                    m.d.sync += [bus.awvalid.eq(1), bus.wvalid.eq(1)]
                    m.next = "WRITE"
                with m.Else():
                    reply(0, STATUS_DECERR)

            with m.State("CHECK_R"):
                m.d.sync += timer_restart()
                with m.If(in_window):
                    m.d.sync += bus.arvalid.eq(1)
                    m.next = "READ"
                with m.Else():
                    reply(0, STATUS_DECERR)

            with m.State("WRITE"):
                m.d.comb += bus.bready.eq(1)
                m.d.sync += timer_count()
                with m.If(bus.awready):
                    m.d.sync += bus.awvalid.eq(0)
                with m.If(bus.wready):
                    m.d.sync += bus.wvalid.eq(0)
                with m.If(bus.bvalid):
                    reply(0, bus.bresp)
                with m.Elif(bus_expired):
                    m.d.comb += drop.eq(1)
                    m.d.sync += [bus.awvalid.eq(0), bus.wvalid.eq(0)]
                    reply(0, STATUS_TIMEOUT)

            with m.State("READ"):
                m.d.comb += bus.rready.eq(1)
                m.d.sync += timer_count()
                with m.If(bus.arready):
                    m.d.sync += bus.arvalid.eq(0)
                with m.If(bus.rvalid):
                    reply(bus.rdata, bus.rresp)
                with m.Elif(bus_expired):
                    m.d.comb += drop.eq(1)
                    m.d.sync += bus.arvalid.eq(0)
                    reply(0, STATUS_TIMEOUT)

            with m.State("REPLY"):
                rd = reply_data
                with m.If(cmd == CMD_READ):
                    send(ANS_READ, rd[24:32], rd[16:24], rd[8:16], rd[0:8], reply_status)
                with m.Else():
                    send(ANS_WRITE, reply_status)

            with m.State("ANSWER"):
                m.d.comb += utx.i.valid.eq(1)
                with m.If(utx.i.ready):
                    m.d.sync += [answer.eq(answer << 8), to_send.eq(to_send - 1)]
                    with m.If(to_send == 1):
                        m.next = "IDLE"
        return m
