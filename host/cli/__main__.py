"""``python -m rnic.host.cli ...``: the same as ``rnic ...``."""

from rnic.host.cli import main

if __name__ == "__main__":
    main()
