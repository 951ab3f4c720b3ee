"""The settings of the client's tools (`memplane mcp`, `memplane panel`, `memplane import-chats`, and
the server's `memplane admin`): MEMPLANE_* environment variables, read without the server installed.
docs/settings.md lists them beside the server's (scripts/gen_settings_doc.py renders it from the
descriptions here)."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# The server's own MEMPLANE_LISTEN default (a test holds the two together): with neither
# MEMPLANE_ADDRESS nor MEMPLANE_LISTEN set, a tool calls a server started on this machine.
DEFAULT_ADDRESS = "127.0.0.1:50051"
HOST_PORT = re.compile(r"^.*:\d+$")


def _setting(default: str | None, description: str, *, secret: bool = False, host_port: bool = False) -> Any:
    return field(default=default, repr=not secret,
                 metadata={"description": description, "secret": secret, "host_port": host_port})


@dataclass(frozen=True)
class ToolSettings:
    address: str = _setting(
        DEFAULT_ADDRESS, "host:port of the server that `memplane mcp`, `memplane panel`, `memplane import-chats` and"
        " `memplane admin` call; unset = `MEMPLANE_LISTEN`, whose default is this one")
    api_key: str | None = _setting(
        None, "the key `memplane mcp` calls with over stdio (over HTTP each request's bearer token is used, never"
        " this), the admin key `memplane admin` uses, and the writing key of `memplane import-chats`", secret=True)
    agent_id: str | None = _setting(None, "agent a key not bound to an agent acts as in `memplane mcp` over stdio")
    mcp_listen: str = _setting("127.0.0.1:8765", "host:port `memplane mcp --http` binds (path `/mcp`)",
                               host_port=True)
    panel_listen: str = _setting(
        "127.0.0.1:8766", "host:port `memplane panel` (the inspector web UI) binds; it calls `MEMPLANE_ADDRESS`",
        host_port=True)

    def __post_init__(self) -> None:
        for setting in fields(self):
            value = getattr(self, setting.name)
            if setting.metadata["host_port"] and not HOST_PORT.match(value):
                raise ValueError(f"MEMPLANE_{setting.name.upper()}: {value!r} is not host:port")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> ToolSettings:
        """The MEMPLANE_* variables of environ; an empty one counts as unset. Names are matched
        regardless of case, as the server's settings match theirs."""
        given = {name.upper(): value for name, value in environ.items() if value}
        found = {s.name: given[name] for s in fields(cls) if (name := f"MEMPLANE_{s.name.upper()}") in given}
        if "address" not in found and "MEMPLANE_LISTEN" in given:
            found["address"] = given["MEMPLANE_LISTEN"]
        return cls(**found)
