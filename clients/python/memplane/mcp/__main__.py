"""`python -m memplane.mcp`: the same as `memplane-mcp`."""
import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m memplane.mcp"))
