"""`memplane admin erase-user --user U`: erasure of a user through the SDK, receipt printed as JSON.

The key (--api-key or MEMPLANE_API_KEY) decides the tenant and the reach: a tenant admin key erases
across the tenant's agents and scopes, any other writing key what it may change (--agent makes a
tenant-wide key act as that agent). A large erasure runs as an operation: --wait polls it until done.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from .output import jsonable


def run(args: argparse.Namespace, target: str, key: str) -> int:
    from memplane import MemoryClient, MemplaneError

    if not args.user:
        print("erase-user needs: --user", file=sys.stderr)
        return 2
    try:
        with MemoryClient(target, key, agent_id=args.agent) as client:
            result = client.erase_user(args.user, mode=args.mode, dry_run=args.dry_run, reason=args.reason or "")
            out: dict = {"forgotten_count": result.forgotten_count}
            if result.receipt is not None:
                out["receipt"] = asdict(result.receipt)
            if result.operation is not None:
                operation = result.operation
                if args.wait:
                    operation = client.wait_operation(operation.id, timeout=args.wait_timeout)
                out["operation"] = asdict(operation)
                if operation.erasure_receipt is not None:
                    out["receipt"] = asdict(operation.erasure_receipt)
    except MemplaneError as exc:
        print(f"error: {exc.code.name} {exc.reason}: {exc.message}", file=sys.stderr)
        return 1
    except TimeoutError:
        print("error: the erasure is still running; poll it with its operation id", file=sys.stderr)
        return 1
    print(json.dumps(jsonable(out), indent=2, ensure_ascii=False))
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", help="the user_id to erase")
    parser.add_argument("--agent", help="the agent a tenant-wide key acts as")
    parser.add_argument("--mode", choices=["sync", "async"], help="in the call or as an operation")
    parser.add_argument("--dry-run", action="store_true", help="count what would be erased, erase nothing")
    parser.add_argument("--reason", help="why (kept in the audit entry, the user id in it redacted)")
    parser.add_argument("--wait", action="store_true", help="wait for an erasure that runs as an operation")
    parser.add_argument("--wait-timeout", type=float, default=600.0)
