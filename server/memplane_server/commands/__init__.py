"""Bodies of `memplane` subcommands; cli.py holds only their parsers."""
