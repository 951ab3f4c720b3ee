"""`memplane admin`: tenants, agents, keys, domains and grants through a running server's AdminService."""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from . import api_key_of, content_policy, erase_user, lifecycle, token_usage
from .output import jsonable
from .token_usage import COMMANDS as USAGE_COMMANDS

if TYPE_CHECKING:
    from memplane.tool_settings import ToolSettings

# Each command: the AdminClient call, the flags it needs, the flags it may take.
ADMIN_COMMANDS = {
    "create-tenant": (lambda c, a: c.create_tenant(a.id, display_name=a.name or "", create_admin_key=True),
                      ["id"], ["name"]),
    "list-tenants": (lambda c, a: c.list_tenants(), [], []),
    "create-agent": (lambda c, a: c.create_agent(a.tenant, a.id, display_name=a.name or ""), ["tenant", "id"], ["name"]),
    "list-agents": (lambda c, a: c.list_agents(a.tenant), ["tenant"], []),
    "create-key": (
        lambda c, a: c.create_api_key(tenant_id=a.tenant, agent_id=a.agent, role=a.role, display_name=a.name or ""),
        [], ["tenant", "agent", "role", "name"],
    ),
    "list-keys": (lambda c, a: c.list_api_keys(tenant_id=a.tenant), [], ["tenant"]),
    "revoke-key": (lambda c, a: c.revoke_api_key(a.id), ["id"], []),
    "create-domain": (lambda c, a: c.create_domain(a.id, description=a.name or ""), ["id"], ["name"]),
    "list-domains": (lambda c, a: c.list_domains(), [], []),
    "grant": (lambda c, a: c.grant_domain(a.domain, a.tenant, a.access), ["domain", "tenant"], ["access"]),
    "revoke-grant": (lambda c, a: c.revoke_domain_grant(a.domain, a.tenant), ["domain", "tenant"], []),
    "list-grants": (lambda c, a: c.list_domain_grants(domain=a.domain, tenant_id=a.tenant), [], ["domain", "tenant"]),
    "audit": (lambda c, a: c.list_audit_events(tenant_id=a.tenant), [], ["tenant"]),
}
FLAGS: dict[str, dict] = {
    "id": {}, "tenant": {}, "agent": {}, "domain": {}, "name": {},
    "role": {"choices": ["platform_admin", "tenant_admin", "writer", "reader", "agent"]},
    "access": {"choices": ["read", "read_write"], "default": "read"},
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    """`memplane admin COMMAND [ACTION] [flags]`: a parser per command with its own flags. --target
    and --api-key are taken before the command too (`memplane admin --target H create-tenant ...`)."""
    admin = sub.add_parser("admin", help="manage tenants, agents, keys, domains, grants, policies and usage")
    connection(admin, None)
    commands = admin.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help)
        connection(parser, argparse.SUPPRESS)
        return parser

    for name, (_, required, optional) in ADMIN_COMMANDS.items():
        parser = command(name, name.replace("-", " "))
        for flag in (*required, *optional):
            parser.add_argument(f"--{flag}", **FLAGS[flag])
    erase_user.add_arguments(command("erase-user", "erase a user's memories with a receipt"))
    lifecycle.add_arguments(command("lifecycle", "a tenant's lifecycle policy: get, set or run"))
    content_policy.add_arguments(command("content-policy", "a tenant's or domain's content policy"))
    token_usage.add_parsers(command)


def connection(parser: argparse.ArgumentParser, default: object) -> None:
    """--target and --api-key; SUPPRESS as a command's default keeps what was given before it."""
    parser.add_argument("--target", default=default, help="server address (default: MEMPLANE_ADDRESS)")
    parser.add_argument("--api-key", default=default, help="admin key (default: MEMPLANE_API_KEY)")


def run(args: argparse.Namespace, tools: ToolSettings) -> int:
    from memplane import AdminClient, MemplaneError

    key = api_key_of(args.api_key, tools)
    if not key:
        print("give --api-key or set MEMPLANE_API_KEY (an admin key printed at first start)", file=sys.stderr)
        return 2
    target = args.target or tools.address
    bodies = {"erase-user": erase_user.run, "lifecycle": lifecycle.run, "content-policy": content_policy.run,
              **dict.fromkeys(USAGE_COMMANDS, token_usage.run)}
    if args.command in bodies:
        return bodies[args.command](args, target, key)
    action, required, _ = ADMIN_COMMANDS[args.command]
    missing = [name for name in required if getattr(args, name) is None]
    if missing:
        print(f"{args.command} needs: " + ", ".join("--" + m for m in missing), file=sys.stderr)
        return 2
    try:
        with AdminClient(target, key) as client:
            result = action(client, args)
    except MemplaneError as exc:
        print(f"error: {exc.code.name} {exc.reason}: {exc.message}", file=sys.stderr)
        return 1
    print(json.dumps(jsonable(result), indent=2, ensure_ascii=False))
    return 0
