"""rnic.host.spec: the stdlib-only facts every layer shares (the gateware too).

Error layers and codes (:mod:`.errors`), the register map (:mod:`.regmap`), the
parameter limits such as the datapath widths (:mod:`.limits`) and the UART bridge
protocol (:mod:`.uart`). Nothing here imports anything but the standard library.
"""
