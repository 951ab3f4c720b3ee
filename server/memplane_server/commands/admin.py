"""`memplane admin`: tenants, agents, keys, domains and grants through a running server's AdminService."""
from __future__ import annotations

import argparse
import json
import sys

from ..settings import Settings
from . import api_key_of
from .output import jsonable
from .token_usage import COMMANDS as USAGE_COMMANDS

ADMIN_COMMANDS = {
    "create-tenant": (lambda c, a: c.create_tenant(a.id, display_name=a.name or "", create_admin_key=True), ["id"]),
    "list-tenants": (lambda c, a: c.list_tenants(), []),
    "create-agent": (lambda c, a: c.create_agent(a.tenant, a.id, display_name=a.name or ""), ["tenant", "id"]),
    "list-agents": (lambda c, a: c.list_agents(a.tenant), ["tenant"]),
    "create-key": (
        lambda c, a: c.create_api_key(tenant_id=a.tenant, agent_id=a.agent, role=a.role, display_name=a.name or ""),
        [],
    ),
    "list-keys": (lambda c, a: c.list_api_keys(tenant_id=a.tenant), []),
    "revoke-key": (lambda c, a: c.revoke_api_key(a.id), ["id"]),
    "create-domain": (lambda c, a: c.create_domain(a.id, description=a.name or ""), ["id"]),
    "list-domains": (lambda c, a: c.list_domains(), []),
    "grant": (lambda c, a: c.grant_domain(a.domain, a.tenant, a.access), ["domain", "tenant"]),
    "revoke-grant": (lambda c, a: c.revoke_domain_grant(a.domain, a.tenant), ["domain", "tenant"]),
    "list-grants": (lambda c, a: c.list_domain_grants(domain=a.domain, tenant_id=a.tenant), []),
    "audit": (lambda c, a: c.list_audit_events(tenant_id=a.tenant), []),
}


def run(args: argparse.Namespace, settings: Settings) -> int:
    from memplane import AdminClient, MemplaneError

    key = api_key_of(args.api_key, settings)
    if not key:
        print("give --api-key or set MEMPLANE_API_KEY (an admin key printed at first start)", file=sys.stderr)
        return 2
    if args.command == "erase-user":
        from .erase_user import run as erase_user

        return erase_user(args, args.target or settings.listen, key)
    if args.command == "lifecycle":
        from .lifecycle import run as lifecycle

        return lifecycle(args, args.target or settings.listen, key)
    if args.command == "content-policy":
        from .content_policy import run as content_policy

        return content_policy(args, args.target or settings.listen, key)
    if args.command in USAGE_COMMANDS:
        from .token_usage import run as token_usage

        return token_usage(args, args.target or settings.listen, key)
    action, required = ADMIN_COMMANDS[args.command]
    missing = [name for name in required if getattr(args, name) is None]
    if missing:
        print(f"{args.command} needs: " + ", ".join("--" + m for m in missing), file=sys.stderr)
        return 2
    try:
        with AdminClient(args.target or settings.listen, key) as client:
            result = action(client, args)
    except MemplaneError as exc:
        print(f"error: {exc.code.name} {exc.reason}: {exc.message}", file=sys.stderr)
        return 1
    print(json.dumps(jsonable(result), indent=2, ensure_ascii=False))
    return 0
