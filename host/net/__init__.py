"""rnic.host.net: connections and data paths.

The MPA connection manager (:mod:`.cm`), concurrent connection setup for servers
(:mod:`.listener`), the software RNIC (:mod:`.rnic_sw`), the hardware-backed data
path (:mod:`.rnic_hw`), the glue between connections, data paths and devices
(:mod:`.transfer`) and pcap capture (:mod:`.pcap`).
"""
