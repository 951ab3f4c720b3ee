"""`memplane admin usage`, `memplane admin token-usage` and `memplane admin token-budget set|reset`:
what tenants used, a tenant's LLM tokens and its daily budget through the SDK, as JSON (usage also
as CSV, for billing).

    memplane admin usage        [--tenant T] [--start-day YYYY-MM-DD] [--end-day YYYY-MM-DD] [--csv]
    memplane admin token-usage  [--tenant T] [--start-day YYYY-MM-DD] [--end-day YYYY-MM-DD]
    memplane admin token-budget set   --tenant T --tokens-per-day N
    memplane admin token-budget reset --tenant T

usage lists calls by method, texts embedded, LLM tokens by stage and memories and bytes stored by
layer and scope, by UTC day (the key's tenant; a platform admin key without --tenant: every tenant
with usage); --csv prints one figure a line: tenant,day,metric,name,value.

token-usage lists the tokens by UTC day, stage and model (the last 30 days by default; the key's
tenant by default), the budget in force and today's spend. token-budget needs a platform admin
key: `set` gives the tenant its own tokens per UTC day (0: unlimited), `reset` drops it so that
MEMPLANE_LLM_DAILY_TOKEN_BUDGET applies again.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from datetime import date

from .output import jsonable

COMMANDS = ("usage", "token-usage", "token-budget")


def add_parsers(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The usage, token-usage and token-budget commands, made by `command(name, help)`."""
    for name, help in (("usage", "what tenants used per UTC day (JSON, or --csv for billing)"),
                       ("token-usage", "a tenant's LLM tokens by day, stage and model, and its budget")):
        parser = command(name, help)
        parser.add_argument("--tenant", help="the tenant (default: the key's own; usage with a platform key: all)")
        parser.add_argument("--start-day", type=date.fromisoformat, help="the first UTC day, YYYY-MM-DD")
        parser.add_argument("--end-day", type=date.fromisoformat, help="the last UTC day (default: today)")
        if name == "usage":
            parser.add_argument("--csv", action="store_true", help="one figure a line: tenant,day,metric,name,value")
    budget = command("token-budget", "set or reset a tenant's daily LLM token budget (platform admin)")
    budget.add_argument("action", nargs="?", choices=["set", "reset"])
    budget.add_argument("--tenant", help="the tenant")
    budget.add_argument("--tokens-per-day", type=int, help="set: LLM tokens per UTC day, 0: unlimited")


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
            if args.command == "usage":
                report = admin.get_usage(args.tenant, start_day=args.start_day, end_day=args.end_day)
                if args.csv:
                    writer = csv.writer(sys.stdout, lineterminator="\n")
                    writer.writerow(("tenant", "day", "metric", "name", "value"))
                    writer.writerows(report.rows())
                    return 0
                out = asdict(report)
            elif args.command == "token-usage":
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
