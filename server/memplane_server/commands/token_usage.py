"""`memplane admin token-usage` and `memplane admin token-budget set|reset`: a tenant's LLM tokens
and its daily budget through the SDK, as JSON.

    memplane admin token-usage  [--tenant T] [--start-day YYYY-MM-DD] [--end-day YYYY-MM-DD]
    memplane admin token-budget set   --tenant T --tokens-per-day N
    memplane admin token-budget reset --tenant T

token-usage lists the tokens by UTC day, stage and model (the last 30 days by default; the key's
tenant by default), the budget in force and today's spend. token-budget needs a platform admin
key: `set` gives the tenant its own tokens per UTC day (0: unlimited), `reset` drops it so that
MEMPLANE_LLM_DAILY_TOKEN_BUDGET applies again.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from datetime import date

from .output import jsonable

COMMANDS = ("token-usage", "token-budget")


def add_arguments(admin: argparse.ArgumentParser) -> None:
    admin.add_argument("--start-day", type=date.fromisoformat, help="token-usage: the first UTC day, YYYY-MM-DD")
    admin.add_argument("--end-day", type=date.fromisoformat, help="token-usage: the last UTC day (default: today)")
    admin.add_argument("--tokens-per-day", type=int, help="token-budget set: LLM tokens per UTC day, 0: unlimited")


def run(args: argparse.Namespace, target: str, key: str) -> int:
    from memplane import AdminClient, MemplaneError

    if args.command == "token-budget" and args.action not in ("set", "reset"):
        print("token-budget needs an action: set or reset", file=sys.stderr)
        return 2
    if args.command == "token-budget" and not args.tenant:
        print("token-budget needs --tenant", file=sys.stderr)
        return 2
    if args.command == "token-budget" and args.action == "set" and args.tokens_per_day is None:
        print("token-budget set needs --tokens-per-day (0: unlimited); `token-budget reset` goes back to the"
              " server's default", file=sys.stderr)
        return 2
    try:
        with AdminClient(target, key) as admin:
            if args.command == "token-usage":
                out = asdict(admin.get_token_usage(args.tenant, start_day=args.start_day, end_day=args.end_day))
            elif args.action == "set":
                out = asdict(admin.set_token_budget(args.tenant, args.tokens_per_day))
            else:
                out = asdict(admin.reset_token_budget(args.tenant))
    except MemplaneError as exc:
        print(f"error: {exc.code.name} {exc.reason}: {exc.message}", file=sys.stderr)
        return 1
    print(json.dumps(jsonable(out), indent=2, ensure_ascii=False))
    return 0
