"""`memplane` command line: parsing and dispatch; each command's body lives in commands/."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .commands.admin import add_parser as add_admin_parser
from .settings import Settings

# Clients of a running server that ship in the client distribution (memplane-client), each also
# its own command there: their arguments are parsed there, from what follows the command's name.
CLIENT_TOOLS = {
    "mcp": "MCP server (stdio, or --http) calling a running Memplane; see docs/mcp.md",
    "panel": "inspector web UI on MEMPLANE_PANEL_LISTEN, calling a running Memplane with each visitor's API key",
    "import-chats": "write chat exports (ChatGPT, Claude, Slack, JSONL) as sessions of turns, each message once",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    settings = Settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if argv and argv[0] in CLIENT_TOOLS:
        return run_client_tool(argv[0], argv[1:])
    return dispatch(build_parser().parse_args(argv), settings)


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
    for name, help in CLIENT_TOOLS.items():
        sub.add_parser(name, help=help, add_help=False)
    return parser


def run_client_tool(name: str, argv: list[str]) -> int:
    """One of CLIENT_TOOLS, imported when it runs; a missing extra (mcp, panel) is a one-line hint."""
    prog = f"memplane {name}"
    if name == "mcp":
        from memplane.mcp.command import main as mcp

        return mcp(argv, prog)
    if name == "panel":
        from memplane.panel.command import main as panel

        return panel(argv, prog)
    from memplane.chats.command import main as import_chats

    return import_chats(argv, prog)


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
    # `memplane admin` is a client of a running server: it reads the client tools' settings.
    from memplane.tool_settings import ToolSettings

    from .commands.admin import run as admin_command

    return admin_command(args, ToolSettings.from_environment())


if __name__ == "__main__":
    sys.exit(main())
