"""rnic.host.tools: developer tools: the FPGA build (:mod:`.build`), static timing
(:mod:`.sta`), benchmarks (:mod:`.bench`) and the generated register files
(:mod:`.codegen`)."""
