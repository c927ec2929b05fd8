from .framer import MpaTxBeat, MpaTxFramer, TX_CONTEXT
