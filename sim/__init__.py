"""rnic.sim: the simulator layer: Verilator runner, bus models, C++ harnesses and the simulated devices."""
