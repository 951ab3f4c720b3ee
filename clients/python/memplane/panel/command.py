"""`memplane panel` (the server's command line hands it here) and `memplane-panel`, for a host with
the client alone."""
from __future__ import annotations

import argparse

from .._extras import missing_extra
from ..tool_settings import ToolSettings


def build_parser(prog: str = "memplane-panel") -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description="inspector web UI on MEMPLANE_PANEL_LISTEN, calling"
                                   " MEMPLANE_ADDRESS with each visitor's API key; see docs/panel.md")


def main(argv: list[str] | None = None, prog: str = "memplane-panel") -> int:
    build_parser(prog).parse_args(argv)
    try:
        from .server import run
    except ModuleNotFoundError as exc:
        return missing_extra(exc, "panel", prog)
    return run(ToolSettings.from_environment())

