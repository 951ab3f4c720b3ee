"""`python -m memplane.panel`: the same as `memplane-panel`."""
import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m memplane.panel"))
