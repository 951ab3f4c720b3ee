"""Bodies of `memplane` subcommands; cli.py holds only their parsers and the dispatch."""
from __future__ import annotations

from ..settings import Settings


class ToolError(Exception):
    """A refusal or failure to report in one line, with a non-zero exit."""


def api_key_of(given: str | None, settings: Settings) -> str | None:
    """The key a client command calls with: --api-key, else MEMPLANE_API_KEY (through the settings)."""
    return given or (settings.api_key.get_secret_value() if settings.api_key else None)
