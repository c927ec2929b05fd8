"""rnic.host.model: the pure protocol model, golden model of every gateware block.

CRC32c (:mod:`.crc`), MPA Request/Reply frames (:mod:`.mpa_frames`), FPDUs with
markers (:mod:`.fpdu`), DDP (:mod:`.ddp`) and RDMAP (:mod:`.rdmap`) headers, the
data sink (:mod:`.sink`), segmentation (:mod:`.segment`) and the JSON dissection
of ``rnic decode`` (:mod:`.dissect`); below TCP, Ethernet frames (:mod:`.ethernet`), ARP
(:mod:`.arp`), IPv4 (:mod:`.ipv4`), ICMP echo (:mod:`.icmp`) and the NIC's network receive
and send paths built from them (:mod:`.network_layer`). No sockets, no devices.
"""
