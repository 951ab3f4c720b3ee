"""`memplane import-chats FILE --format chatgpt|claude|slack|jsonl` (the server's command line hands it
here) and `memplane-import-chats`: reads the whole export first (a bad file is refused, naming the
line or record, before anything is written), then writes each conversation as a session of turns,
with a progress line, and prints what it did as JSON."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from memplane import MemoryClient, MemplaneError

from ..tool_settings import ToolSettings
from .formats import READERS
from .importer import ImportReport, import_chats
from .model import ChatFileError


def build_parser(prog: str = "memplane-import-chats") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="write chat exports (ChatGPT, Claude, Slack, JSONL) as"
                                     " sessions of turns, each message once; see docs/importing-chats.md")
    parser.add_argument("file", type=Path, help="the export: conversations.json, a Slack export's folder or zip, or"
                                                " a .jsonl file")
    parser.add_argument("--format", required=True, choices=sorted(READERS))
    parser.add_argument("--user-id", default="", help="the user the conversations are about (Slack: each author)")
    parser.add_argument("--dry-run", action="store_true", help="count what would be written; write nothing")
    parser.add_argument("--batch", type=int, default=64, help="turns per Write (at most the server's max batch)")
    parser.add_argument("--target", help="server address (default: MEMPLANE_ADDRESS)")
    parser.add_argument("--api-key", help="a writing key of the tenant (default: MEMPLANE_API_KEY)")
    parser.add_argument("--agent", help="the agent to act as, for a key not bound to one")
    return parser


def main(argv: list[str] | None = None, prog: str = "memplane-import-chats") -> int:
    args = build_parser(prog).parse_args(argv)
    tools = ToolSettings.from_environment()
    return run(args, args.target or tools.address, args.api_key or tools.api_key)


def _progress(report: ImportReport) -> None:
    if sys.stderr.isatty():
        print(f"\r{report.written + report.already} of {report.messages} messages", end="", file=sys.stderr)


def run(args: argparse.Namespace, target: str, key: str | None) -> int:
    if not key:
        print("give --api-key or set MEMPLANE_API_KEY (a writing key of the tenant)", file=sys.stderr)
        return 2
    if not 1 <= args.batch <= 256:
        print("--batch takes 1 to 256", file=sys.stderr)
        return 2
    try:
        conversations = READERS[args.format](args.file)
    except ChatFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        with MemoryClient(target, key, agent_id=args.agent) as client:
            report = import_chats(client, args.format, conversations, user_id=args.user_id, dry_run=args.dry_run,
                                  batch=args.batch, progress=_progress)
    except MemplaneError as exc:
        print(f"\nerror: {exc.code.name} {exc.reason}: {exc.message} (what was written stays; run again to"
              " write the rest)", file=sys.stderr)
        return 1
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(json.dumps({**asdict(report), "dry_run": args.dry_run}, indent=2))
    return 0
