"""rnic.hdl: the gateware, in Amaranth. It imports only :mod:`rnic.host.spec`."""
