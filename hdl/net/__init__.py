"""The Ethernet MAC and its path between GMII and the core's W-octet frame streams."""
