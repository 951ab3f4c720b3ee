"""`memplane admin lifecycle get|set|run`: a tenant's lifecycle policy through the SDK, as JSON.

    memplane admin lifecycle get [--tenant T]
    memplane admin lifecycle set [--tenant T] [--policy FILE] [--enable | --disable] [--hard-delete yes|no]
                                 [--archive-tasks-after-days N] [--rule KIND.FIELD=VALUE ...]
    memplane admin lifecycle run [--tenant T] [--dry-run]

`set` starts from the tenant's current policy (the defaults when none was set), or from a JSON file
shaped like `get`'s output, applies the options and stores the result. The tenant defaults to the
key's own (a tenant admin key); a platform admin key names it.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, fields, replace

from .output import jsonable

ACTIONS = ("get", "set", "run")


def _policy_from_json(data: dict, tenant: str | None):
    from memplane import Kind, LifecycleKindRule, LifecyclePolicy

    names = {f.name for f in fields(LifecycleKindRule)} - {"kind"}
    rules = tuple(LifecycleKindRule(Kind.parse(r["kind"]), **{k: v for k, v in r.items() if k in names})
                  for r in data.get("rules", ()))
    return LifecyclePolicy(tenant_id=tenant or data.get("tenant_id", ""), enabled=bool(data.get("enabled", False)),
                           hard_delete=bool(data.get("hard_delete", False)),
                           archive_tasks_after_days=float(data.get("archive_tasks_after_days", 30.0)), rules=rules)


def _with_rule(policy, assignment: str):
    from memplane import Kind, LifecycleKindRule

    try:
        target, raw = assignment.split("=", 1)
        kind_name, name = target.split(".", 1)
        kind = Kind.parse(kind_name)
    except ValueError:
        raise ValueError(f"--rule {assignment!r}: expected KIND.FIELD=VALUE, e.g. turn.ttl_days=90") from None
    kinds = {f.name: f.type for f in fields(LifecycleKindRule)}
    if name not in kinds or name == "kind":
        raise ValueError(f"--rule {assignment!r}: no field {name!r}; fields: {', '.join(sorted(kinds))}")
    value = int(raw) if name.endswith("_uses") else float(raw)
    current = policy.rule(kind) or LifecycleKindRule(kind)
    rules = tuple(r for r in policy.rules if r.kind is not kind) + (replace(current, **{name: value}),)
    return replace(policy, rules=rules)


def run(args: argparse.Namespace, target: str, key: str) -> int:
    from memplane import AdminClient, MemplaneError

    action = args.action
    if action not in ACTIONS:
        print("lifecycle needs an action: get, set or run", file=sys.stderr)
        return 2
    try:
        with AdminClient(target, key) as admin:
            if action == "get":
                out = asdict(admin.get_lifecycle_policy(args.tenant))
            elif action == "run":
                out = asdict(admin.run_lifecycle(args.tenant, dry_run=args.dry_run))
            else:
                if args.policy:
                    with open(args.policy, encoding="utf-8") as f:
                        policy = _policy_from_json(json.load(f), args.tenant)
                else:
                    policy = replace(admin.get_lifecycle_policy(args.tenant), tenant_id=args.tenant or "")
                if args.enable or args.disable:
                    policy = replace(policy, enabled=bool(args.enable))
                if args.hard_delete:
                    policy = replace(policy, hard_delete=args.hard_delete == "yes")
                if args.archive_tasks_after_days is not None:
                    policy = replace(policy, archive_tasks_after_days=args.archive_tasks_after_days)
                for assignment in args.rule or ():
                    policy = _with_rule(policy, assignment)
                out = asdict(admin.set_lifecycle_policy(policy))
    except (ValueError, OSError) as exc:
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
    parser.add_argument("--dry-run", action="store_true", help="run: report what would change, change nothing")
    parser.add_argument("--policy", help="set: a JSON policy shaped like `lifecycle get`'s output")
    parser.add_argument("--enable", action="store_true", help="set: the scheduled job runs the policy")
    parser.add_argument("--disable", action="store_true", help="set: the scheduled job leaves the tenant")
    parser.add_argument("--hard-delete", choices=["yes", "no"], help="set: removals erase (yes) or soft-forget")
    parser.add_argument("--archive-tasks-after-days", type=float, help="set: archive finished tasks after N days")
    parser.add_argument("--rule", action="append", metavar="KIND.FIELD=VALUE",
                        help="set: e.g. turn.ttl_days=90 (repeatable)")
