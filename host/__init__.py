"""rnic.host: the reference model, the driver, the network stack, applications, tools and the CLI.

Layers, lowest first; an import only ever points down (``.importlinter`` states it):

* :mod:`rnic.host.spec` -- stdlib-only facts: error codes, the register map, limits;
* :mod:`rnic.host.model` -- the pure protocol model (CRC, MPA frames, FPDUs, DDP, RDMAP,
  data sink, segmentation, dissection), the golden model of the gateware;
* :mod:`rnic.host.driver` -- register access, transports and devices;
* :mod:`rnic.host.net` -- the MPA connection manager, the software and hardware-backed
  RNICs, transfers, pcap capture;
* :mod:`rnic.host.apps` -- rping, perftest, the demo;
* :mod:`rnic.host.tools` -- bitstream build, static timing, benchmarks, code generation;
* :mod:`rnic.host.cli` -- the ``rnic`` command line.

The gateware (:mod:`rnic.hdl`) imports only the spec layer; the simulator layer
(:mod:`rnic.sim`) sits between the network stack and the applications.
"""
