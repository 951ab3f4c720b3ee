"""Operator commands run beside the server (backup, restore, export, import): the bodies of
`memplane` subcommands, given a database URL by the command line."""


class ToolError(Exception):
    """A refusal or failure to report in one line, with a non-zero exit."""
