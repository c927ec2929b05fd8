"""rnic.host.driver: register access to an RNIC over a transport.

Typed register access and a model of the bank (:mod:`.regs`), transports and the
register server (:mod:`.transport`), the in-process model device (:mod:`.model`),
the UART bridge transport (:mod:`.uart`) and the driver with its device registry
(:mod:`.device`).
"""
