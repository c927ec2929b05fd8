"""The ECP5 PLL (EHXPLLL): divider search for a core clock and an auxiliary clock, and its
instance. Used by the board tops (:mod:`rnic.hdl.top`, through
:func:`rnic.hdl.top.rgmii_board.board_clocks`).
"""

from __future__ import annotations

import dataclasses

from amaranth.hdl import Elaboratable, Instance, Module, Signal

__all__ = ["PllConfig", "ecp5_pll", "ECP5PLL"]


@dataclasses.dataclass(frozen=True)
class PllConfig:
    """EHXPLLL dividers; frequencies in Hz."""
    f_in: float
    clki_div: int
    clkfb_div: int
    clkop_div: int
    clkos_div: int | None
    f_vco: float
    f_out: float
    f_aux: float | None

    def params(self):
        """Instance parameters (``p_*``) and attributes (``a_*``) for EHXPLLL."""
        op_cphase = self.clkop_div // 2          # ecppll: primary shifted by 180 degrees
        p = dict(
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=self.clki_div, p_CLKFB_DIV=self.clkfb_div, p_FEEDBK_PATH="CLKOP",
            p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=self.clkop_div, p_CLKOP_CPHASE=op_cphase,
            p_CLKOP_FPHASE=0,
            a_FREQUENCY_PIN_CLKI=_mhz(self.f_in), a_FREQUENCY_PIN_CLKOP=_mhz(self.f_out),
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
        )
        if self.clkos_div is not None:
            p.update(p_CLKOS_ENABLE="ENABLED", p_CLKOS_DIV=self.clkos_div, p_CLKOS_CPHASE=op_cphase,
                     p_CLKOS_FPHASE=0, a_FREQUENCY_PIN_CLKOS=_mhz(self.f_aux))
        return p


def _mhz(f):
    return f"{f / 1e6:.6g}"


def ecp5_pll(f_in, f_out, f_aux=None, *, tolerance=0.001):
    """Dividers for an ECP5 EHXPLLL: ``f_out`` on CLKOP (feedback from CLKOP), ``f_aux`` on CLKOS.

    Limits (ECP5 data sheet): PFD 3.125..400 MHz, VCO 400..800 MHz, outputs
    up to 400 MHz; CLKI_DIV 1..128, CLKFB_DIV 1..80, output dividers 1..128.
    The core clock comes first (smallest error, then the auxiliary output's
    error, then the highest VCO); ValueError if the core clock cannot be
    made within ``tolerance`` (relative).
    """
    if not 3.125e6 <= f_in <= 400e6:
        raise ValueError(f"PLL input {f_in / 1e6:g} MHz is outside 3.125..400 MHz")
    if not 3.125e6 <= f_out <= 400e6:
        raise ValueError(f"PLL output {f_out / 1e6:g} MHz is outside 3.125..400 MHz")
    best = None
    for clki in range(1, 129):
        pfd = f_in / clki
        if pfd < 3.125e6:
            break
        if pfd > 400e6:
            continue
        for fb in range(1, 81):
            fo = pfd * fb
            if fo > 400e6:
                break
            err = abs(fo - f_out) / f_out
            if best is not None and err > best[0][0]:
                continue
            for op in range(1, 129):
                vco = fo * op
                if vco < 400e6:
                    continue
                if vco > 800e6:
                    break
                os_div, aux_err, f_a = None, 0.0, None
                if f_aux is not None:
                    os_div = min(max(round(vco / f_aux), 1), 128)
                    f_a = vco / os_div
                    aux_err = abs(f_a - f_aux) / f_aux
                key = (round(err, 9), round(aux_err, 9), -vco)
                if best is None or key < best[0]:
                    best = (key, PllConfig(f_in, clki, fb, op, os_div, vco, fo, f_a))
    if best is None or best[0][0] > tolerance:
        raise ValueError(f"no EHXPLLL setting makes {f_out / 1e6:g} MHz from {f_in / 1e6:g} MHz "
                         f"within {tolerance:.1%}")
    return best[1]


class ECP5PLL(Elaboratable):
    """EHXPLLL instance: ``clk_in`` -> ``clk_out`` (CLKOP) and ``clk_aux`` (CLKOS), ``locked``.

    ``aux_domain``: the clock domain ``clk_aux`` drives, if any; the signal is then named
    ``<aux_domain>_clk``, so that whichever alias of the net Yosys keeps names the domain
    (the build report maps nextpnr's clock nets to domains by name).
    """

    def __init__(self, config: PllConfig, *, aux_domain=None):
        self.config = config
        self.clk_in = Signal()
        self.clk_out = Signal()
        self.clk_aux = Signal(name="clk_aux" if aux_domain is None else f"{aux_domain}_clk")
        self.locked = Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.pll = Instance(
            "EHXPLLL",
            i_CLKI=self.clk_in, i_CLKFB=self.clk_out, i_RST=0, i_STDBY=0,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=self.clk_out, o_CLKOS=self.clk_aux, o_LOCK=self.locked,
            **self.config.params())
        return m
