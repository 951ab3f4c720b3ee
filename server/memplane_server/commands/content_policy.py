"""`memplane admin content-policy get|set|reset|scan`: a tenant's or a domain's content policy
through the SDK, as JSON.

    memplane admin content-policy get   [--tenant T | --domain D]
    memplane admin content-policy set   [--tenant T | --domain D] --rule NAME=ACTION [--rule ...]
    memplane admin content-policy reset [--tenant T | --domain D]
    memplane admin content-policy scan  [--tenant T | --domain D] [--rule NAME=ACTION ...]

NAME is a detector (email, aws_access_key, ...) or a category (secret, personal); ACTION is off,
tag, redact or refuse. `set` replaces the rules (at least one): what they do not name takes the
defaults; `reset` drops every rule, so that all take the defaults. `scan`
reports what the rules (without any, the policy in force) would change in the stored memories and
changes nothing. The tenant defaults to the key's own; a domain's policy needs a platform admin key.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from .output import jsonable

ACTIONS = ("get", "set", "reset", "scan")


def _rules(assignments: list[str] | None) -> dict[str, str]:
    rules = {}
    for assignment in assignments or ():
        name, sep, action = assignment.partition("=")
        if not sep or not name or not action:
            raise ValueError(f"--rule {assignment!r}: expected NAME=ACTION, e.g. email=redact or secret=refuse")
        rules[name.strip()] = action.strip()
    return rules


def run(args: argparse.Namespace, target: str, key: str) -> int:
    from memplane import AdminClient, MemplaneError

    if args.action not in ACTIONS:
        print("content-policy needs an action: get, set, reset or scan", file=sys.stderr)
        return 2
    try:
        rules = _rules(args.rule)
        if args.action == "set" and not rules:
            raise ValueError("set needs at least one --rule NAME=ACTION; `content-policy reset` goes back to the"
                             " defaults")
        with AdminClient(target, key) as admin:
            if args.action == "get":
                out = asdict(admin.get_content_policy(args.tenant, domain=args.domain))
            elif args.action == "set":
                out = asdict(admin.set_content_policy(rules, tenant_id=args.tenant, domain=args.domain))
            elif args.action == "reset":
                out = asdict(admin.reset_content_policy(args.tenant, domain=args.domain))
            else:
                report = admin.scan_content_policy(rules if args.rule else None, tenant_id=args.tenant,
                                                   domain=args.domain)
                out = asdict(report)
                out["counts"] = [{"detector": detector, "action": action, "memories": memories}
                                 for (detector, action), memories in report.counts.items()]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MemplaneError as exc:
        print(f"error: {exc.code.name} {exc.reason}: {exc.message}", file=sys.stderr)
        return 1
    print(json.dumps(jsonable(out, enum_name=str.lower), indent=2, ensure_ascii=False))
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=ACTIONS)
    parser.add_argument("--tenant", help="the tenant (default: the key's own)")
    parser.add_argument("--domain", help="a domain's policy instead of a tenant's")
    parser.add_argument("--rule", action="append", metavar="NAME=ACTION",
                        help="set, scan: e.g. email=redact or secret=refuse (repeatable)")
