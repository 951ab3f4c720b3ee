"""Bodies of `memplane` subcommands; cli.py holds only their parsers and the dispatch."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `memplane` (and gRPC with it) is imported by the commands that call a server, when they run
    from memplane.tool_settings import ToolSettings


class ToolError(Exception):
    """A refusal or failure to report in one line, with a non-zero exit."""


def api_key_of(given: str | None, tools: ToolSettings) -> str | None:
    """The key a client command calls with: --api-key, else MEMPLANE_API_KEY (through the client settings)."""
    return given or tools.api_key
