"""The core alone between registers on a board, for benchmarks (``rnic build --top harness``,
``rnic build --sweep``). See :class:`CoreHarness`."""

from amaranth.hdl import Cat, Elaboratable, Module, Signal
from amaranth.lib.wiring import In

from rnic.host.spec.limits import check_width

from ..beat import conn_bits
from ..rnic_core import RnicCore
from .cores import core_ports
from .rgmii_board import board_clocks, uart_buffers
from .traffic import Signature32

__all__ = ["CoreHarness"]


class CoreHarness(Elaboratable):
    """The core between registers on a board, for its fmax and size.

    Every input bit of the core is a flip-flop of one scan chain fed from a pin (the
    UART's rx); every output bit is registered and folded into a 32-bit signature register
    whose top bit drives a pin (the UART's tx). So placement and timing see the core
    between registers, with nothing constant and nothing unused. Clock: the board clock
    through an EHXPLLL at ``freq`` (domain ``sync``, out of reset once the PLL locks; the
    reset button is not used). The harness costs one flip-flop per core port bit plus 32
    and a few LUTs per 32 output bits for the fold.

    Parameters: ``board`` (an entry of :data:`~rnic.hdl.top.boards.BOARDS`), ``width``,
    ``connections`` (the core's), ``freq`` (Hz), ``core`` (a factory ``core(width=,
    connections=)``, default :class:`~rnic.hdl.rnic_core.RnicCore`). Attributes after
    elaboration: ``pll``, ``in_bits`` and ``out_bits`` (the core's port bits),
    ``harness_ffs`` (the harness's flip-flops).
    """

    def __init__(self, board, *, width=8, connections=16, freq=125e6, core=None):
        self.board = board
        self.width = check_width(width)
        conn_bits(connections)          # validates
        self.connections = connections
        self.freq = freq
        self.core_factory = core or RnicCore
        self.harness_ffs = None
        self.pll = None
        self.domains = ("sync",)

    def elaborate(self, platform):
        m = Module()
        self.pll, _, _ = board_clocks(m, platform, self.board, self.freq, eth_tx=False,
                                      reset_button=False)

        core = self.core_factory(width=self.width, connections=self.connections)
        m.submodules.core = core
        ins, outs = [], []
        for _, flow, value in core_ports(core):
            (ins if flow == In else outs).append(value)
        in_bits = Cat(*ins)
        out_bits = Cat(*outs)

        # scan-in and signature-out: the UART's pins (every board has them)
        uart_rx, uart_tx = uart_buffers(m, platform, self.board)

        scan = Signal(len(in_bits))
        m.d.sync += scan.eq(Cat(uart_rx.i, scan[:-1]))
        m.d.comb += in_bits.eq(scan)
        out_reg = Signal(len(out_bits))
        m.d.sync += out_reg.eq(out_bits)
        m.submodules.signature = sig = Signature32(len(out_bits))
        m.d.comb += [sig.data.eq(out_reg), sig.en.eq(1), uart_tx.o.eq(sig.value[31])]
        self.harness_ffs = len(in_bits) + len(out_bits) + 32
        self.in_bits, self.out_bits = len(in_bits), len(out_bits)
        return m
