"""rnic.host.model: the pure protocol model, golden model of every gateware block.

CRC32c (:mod:`.crc`), MPA Request/Reply frames (:mod:`.mpa_frames`), FPDUs with
markers (:mod:`.fpdu`), DDP (:mod:`.ddp`) and RDMAP (:mod:`.rdmap`) headers, the
data sink (:mod:`.sink`), segmentation (:mod:`.segment`) and the JSON dissection
of ``rnic decode`` (:mod:`.dissect`). No sockets, no devices.
"""
