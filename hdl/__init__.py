"""hdl package."""
