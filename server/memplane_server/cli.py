"""`memplane` command line: parsing and dispatch; each command's body lives in commands/."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .chats.command import add_arguments as add_chat_arguments
from .commands.admin import add_parser as add_admin_parser
from .settings import Settings


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = Settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return dispatch(args, settings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memplane", description="Memplane memory server")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("serve", help="run the gRPC server (embedded PostgreSQL/Redis unless configured)")
    sub.add_parser("migrate", help="apply database migrations and exit")
    reembed_cmd = sub.add_parser("reembed", help="move stored vectors to an embedding model (resumable, while serving)")
    reembed_cmd.add_argument("--tenant", help="only this tenant (default: every tenant)")
    reembed_cmd.add_argument("--model", help="target model (default: MEMPLANE_EMBEDDING_MODEL)")
    reembed_cmd.add_argument("--batch", type=int, default=64)
    sub.add_parser("backup", help="archive the PostgreSQL database into the backup dir (keeps the newest N)")
    restore_cmd = sub.add_parser("restore", help="restore a backup into an empty database")
    restore_cmd.add_argument("file", type=Path)
    export_cmd = sub.add_parser("export", help="write one tenant's memories and history as JSON lines")
    export_cmd.add_argument("--tenant", required=True)
    export_cmd.add_argument(
        "--open-users", action="store_true",
        help="write memories about users opened, not sealed under their users' keys: to move the tenant to another"
             " deployment (an erasure then no longer reaches the file)")
    export_cmd.add_argument("--out", type=Path, help="file to write (default: stdout)")
    import_cmd = sub.add_parser("import", help="read a tenant export, into its own or another tenant id")
    import_cmd.add_argument("file", type=Path)
    import_cmd.add_argument("--tenant", help="tenant to import into (default: the exported one)")
    import_cmd.add_argument("--keep-quota", action="store_true",
                            help="give a new tenant the file's memory quota (default: this deployment's)")
    add_chat_arguments(sub.add_parser("import-chats", help="write chat exports (ChatGPT, Claude, Slack, JSONL) as"
                                      " sessions of turns, each message once"))
    add_admin_parser(sub)
    keys_cmd = sub.add_parser(
        "keys", help="encryption at rest: status, rotate a tenant's data key, reseal, rewrap, sweep erased users")
    keys_cmd.add_argument("action", choices=["status", "rotate", "reseal", "rewrap", "sweep"])
    keys_cmd.add_argument("--tenant", help="rotate, reseal: one tenant (default: every tenant)")
    sub.add_parser("worker", help="run the background work (jobs, expiry sweep, turn windows) without gRPC")
    health = sub.add_parser("health", help="exit 0 when the server answers SERVING on grpc.health.v1, else 1")
    health.add_argument("--address", help="host:port of the server (default: MEMPLANE_LISTEN)")
    health.add_argument("--service", default="", help="one service's status (default: the whole server)")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the answer")
    mcp = sub.add_parser("mcp", help="MCP server (stdio) calling a running Memplane; see docs/mcp.md")
    mcp.add_argument("--http", action="store_true", help="serve streamable HTTP on MEMPLANE_MCP_LISTEN instead")
    sub.add_parser("panel", help="inspector web UI on MEMPLANE_PANEL_LISTEN, calling a running Memplane with each "
                   "visitor's API key")
    return parser


def dispatch(args: argparse.Namespace, settings: Settings) -> int:
    """Runs the command's body. Each command's module is imported when it runs: `memplane admin`
    and `health` start fast."""
    if args.cmd == "serve":
        from .commands.serve import run as serve

        return serve(settings)
    if args.cmd == "migrate":
        from .commands.database import migrate

        return migrate(settings)
    if args.cmd == "reembed":
        from .commands.reembed import run as reembed

        return reembed(args, settings)
    if args.cmd == "keys":
        from .commands.keys import run as keys

        return keys(args, settings)
    if args.cmd == "worker":
        from .commands.worker import run as work

        return work(settings)
    if args.cmd == "health":
        from .commands.health import run

        return run(args.address or settings.listen, service=args.service, timeout=args.timeout)
    if args.cmd in ("backup", "restore", "export", "import"):
        from .commands import ToolError
        from .commands.backup import run as backup
        from .commands.transfer import run as transfer

        try:
            return (backup if args.cmd in ("backup", "restore") else transfer)(args, settings)
        except ToolError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    # The rest are clients of a running server: they read the client's settings, not the server's.
    from memplane.tool_settings import ToolSettings

    tools = ToolSettings.from_environment()
    if args.cmd == "import-chats":
        from .chats.command import run as import_chats
        from .commands import api_key_of

        return import_chats(args, args.target or tools.address, api_key_of(args.api_key, tools))
    if args.cmd == "mcp":
        from .mcp.server import run

        return run(tools, http=args.http)
    if args.cmd == "panel":
        from .panel.server import run as serve_panel

        return serve_panel(tools)
    from .commands.admin import run as admin_command

    return admin_command(args, tools)


if __name__ == "__main__":
    sys.exit(main())
