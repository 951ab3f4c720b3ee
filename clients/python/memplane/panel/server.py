"""`memplane panel`: serves the inspector on MEMPLANE_PANEL_LISTEN until SIGTERM or Ctrl-C."""
from __future__ import annotations

import uvicorn

from memplane.tool_settings import ToolSettings

from .app import build_app


def host_and_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def run(settings: ToolSettings) -> int:
    host, port = host_and_port(settings.panel_listen)
    print(f"memplane panel on http://{settings.panel_listen}/ calling Memplane at {settings.address}", flush=True)
    # Live pages hold streams open; at shutdown they get a few seconds, then are cut.
    uvicorn.run(build_app(settings.address), host=host, port=port, log_level="warning", timeout_graceful_shutdown=3)
    return 0
