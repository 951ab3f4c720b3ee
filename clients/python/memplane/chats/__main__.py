"""`python -m memplane.chats`: the same as `memplane-import-chats`."""
import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m memplane.chats"))
