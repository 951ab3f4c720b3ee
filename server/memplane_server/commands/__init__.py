"""Bodies of `memplane` subcommands; cli.py holds only their parsers and the dispatch."""


class ToolError(Exception):
    """A refusal or failure to report in one line, with a non-zero exit."""
