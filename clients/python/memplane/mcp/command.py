"""`memplane mcp [--http]` (the server's command line hands it here) and `memplane-mcp`, for an
agent host with the client alone."""
from __future__ import annotations

import argparse

from .._extras import missing_extra
from ..tool_settings import ToolSettings


def build_parser(prog: str = "memplane-mcp") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="MCP server (stdio) calling a running Memplane with"
                                     " MEMPLANE_API_KEY; see docs/mcp.md")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP on MEMPLANE_MCP_LISTEN instead,"
                        " each call with its request's bearer token")
    return parser


def main(argv: list[str] | None = None, prog: str = "memplane-mcp") -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        from .server import run
    except ModuleNotFoundError as exc:
        return missing_extra(exc, "mcp", prog)
    return run(ToolSettings.from_environment(), http=args.http)

