"""`memplane panel`: serves the inspector on MEMPLANE_PANEL_LISTEN until SIGTERM or Ctrl-C."""
from __future__ import annotations

import uvicorn

from ..settings import Settings
from .app import build_app


def host_and_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def run(settings: Settings) -> int:
    address = settings.address or settings.listen
    host, port = host_and_port(settings.panel_listen)
    print(f"memplane panel on http://{settings.panel_listen}/ calling Memplane at {address}", flush=True)
    # Live pages hold streams open; at shutdown they get a few seconds, then are cut.
    uvicorn.run(build_app(address), host=host, port=port, log_level="warning", timeout_graceful_shutdown=3)
    return 0
