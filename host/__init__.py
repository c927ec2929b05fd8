"""host package."""
