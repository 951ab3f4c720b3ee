"""`memplane` command line: serve, worker, migrate, reembed, backup, restore, export, import, admin, health, mcp."""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import NoReturn

from .commands.lifecycle import add_arguments as add_lifecycle_arguments
from .settings import Settings


@contextmanager
def tool_database(settings: Settings, *, direct: bool = False) -> Iterator[str]:
    """A database URL for a command-line tool: the configured one, the running server's embedded
    one, or an embedded one started just for the tool. `direct` asks for the migrations' URL when
    one is set: pg_dump, pg_restore and the migrations a restore ends with need a session of their
    own (not a transaction-mode pooler's) and the owner's reach."""
    # Imported here: `memplane admin` needs none of this and should start fast.
    from .embedded import EmbeddedError, EmbeddedPostgres
    from .runtime import RUNNING_DSN_FILE

    if direct and settings.migration_database_url:
        yield settings.migration_database_url
        return
    if settings.database_url:
        yield settings.database_url
        return
    postgres = EmbeddedPostgres(settings.data_dir)
    try:
        url = postgres.start()
    except EmbeddedError:
        running = settings.data_dir / RUNNING_DSN_FILE
        if not running.exists():
            raise
        yield running.read_text().strip()
        return
    try:
        yield url
    finally:
        postgres.stop()


def _serve(settings: Settings) -> NoReturn:
    from .runtime import Embedded, serve
    from .telemetry import shutdown_telemetry

    embedded = Embedded(settings)
    try:
        embedded.start()
        asyncio.run(serve(settings, embedded.database_url, embedded.redis_url))
    except KeyboardInterrupt:
        pass
    finally:
        embedded.stop()
    # Everything is closed above. The interpreter's own teardown of this heap (the model, grpc,
    # litellm) took 1-1.5 s on a loaded machine, which the shutdown grace cannot spare.
    shutdown_telemetry()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _migrate(settings: Settings) -> int:
    from .stores.postgres.migrations import migrate

    async def run(url: str) -> list[str]:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            return await migrate(conn)
        finally:
            await conn.close()

    if settings.migration_database_url:
        applied = asyncio.run(run(settings.migration_database_url))
    else:
        with tool_database(settings) as url:
            applied = asyncio.run(run(url))
    print("applied: " + (", ".join(applied) if applied else "nothing, schema is current"))
    return 0


def _reembed(args: argparse.Namespace, settings: Settings) -> int:
    from .llm.embedders import background_threads, create_embedder
    from .services.reembed import reembed
    from .stores.postgres.embeddings import EmbeddingStore
    from .stores.postgres.pool import create_pool
    from .stores.postgres.schema import VECTOR_DIM

    model = args.model or settings.embedding_model
    embedder = create_embedder(
        model, dim=VECTOR_DIM, threads=settings.embed_threads, batch_size=args.batch,
        api_base=settings.llm_api_base, api_key=settings.llm_api_key, timeout=settings.llm_timeout_seconds,
        background_threads=background_threads(settings.background_embed_threads),
    )
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        rate = done / max(time.monotonic() - started, 1e-9)
        width = 30
        filled = width * done // total if total else width
        print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {rate:.1f}/s", end="",
              file=sys.stderr, flush=True)

    async def run(url: str) -> int:
        pool = await create_pool(url, size=2, ef_search=settings.hnsw_ef_search)
        try:
            return await reembed(EmbeddingStore(pool), embedder, tenant_id=args.tenant, batch_size=args.batch,
                                 progress=progress)
        finally:
            await pool.close()
            embedder.close()

    with tool_database(settings) as url:
        done = asyncio.run(run(url))
    print(f"\nre-embedded {done} memories with {model}", file=sys.stderr)
    return 0


def _tool(args: argparse.Namespace, settings: Settings) -> int:
    """backup, restore, export and import: bodies in tools/, each given the tool database."""
    from .tools import ToolError, backup, transfer

    try:
        with tool_database(settings, direct=args.cmd in ("backup", "restore")) as url:
            if args.cmd == "backup":
                print(backup.backup(settings, url))
            elif args.cmd == "restore":
                done = backup.restore(settings, url, args.file)
                migrated = f", then migrated: {', '.join(done.migrated)}" if done.migrated else ""
                print(f"restored {args.file} (schema version {done.schema_version}){migrated}")
            elif args.cmd == "export":
                rows = transfer.export(url, args.tenant, args.out)
                print(f"exported tenant {args.tenant}: {rows} rows", file=sys.stderr)
            else:
                done = transfer.import_(settings, url, args.file, args.tenant, keep_quota=args.keep_quota)
                print(f"imported into tenant {done.tenant_id}: "
                      + ", ".join(f"{n} {table}" for table, n in done.counts.items()))
                for model, n in done.stale_vectors.items():
                    print(f"{n} memories carry vectors of {model}, not {settings.embedding_model}:"
                          " run `memplane reembed` to move them", file=sys.stderr)
    except ToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _jsonable(value):
    if is_dataclass(value):
        return {k: _jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, datetime):
        return value.isoformat()
    return value


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


def _admin(args: argparse.Namespace, settings: Settings) -> int:
    from memplane import AdminClient, MemplaneError

    key = args.api_key or os.environ.get("MEMPLANE_API_KEY")
    if not key:
        print("give --api-key or set MEMPLANE_API_KEY (an admin key printed at first start)", file=sys.stderr)
        return 2
    if args.command == "erase-user":
        from .commands.erase_user import run as erase_user

        return erase_user(args, args.target or settings.listen, key)
    if args.command == "lifecycle":
        from .commands.lifecycle import run as lifecycle

        return lifecycle(args, args.target or settings.listen, key)
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
    print(json.dumps(_jsonable(result), indent=2, ensure_ascii=False))
    return 0


def main(argv: list[str] | None = None) -> int:
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
    export_cmd.add_argument("--out", type=Path, help="file to write (default: stdout)")
    import_cmd = sub.add_parser("import", help="read a tenant export, into its own or another tenant id")
    import_cmd.add_argument("file", type=Path)
    import_cmd.add_argument("--tenant", help="tenant to import into (default: the exported one)")
    import_cmd.add_argument("--keep-quota", action="store_true",
                            help="give a new tenant the file's memory quota (default: this deployment's)")
    admin = sub.add_parser("admin", help="manage tenants, agents, keys, domains and grants")
    admin.add_argument("command", choices=sorted([*ADMIN_COMMANDS, "erase-user", "lifecycle"]))
    admin.add_argument("--target", help="server address (default: MEMPLANE_LISTEN)")
    admin.add_argument("--api-key", help="admin key (default: MEMPLANE_API_KEY)")
    for name in ("id", "tenant", "agent", "domain", "name"):
        admin.add_argument(f"--{name}")
    admin.add_argument("--role", choices=["platform_admin", "tenant_admin", "writer", "reader", "agent"])
    admin.add_argument("--access", choices=["read", "read_write"], default="read")
    # erase-user: with a tenant key (a tenant admin key reaches every agent of the tenant)
    admin.add_argument("--user", help="erase-user: the user_id to erase")
    admin.add_argument("--mode", choices=["sync", "async"], help="erase-user: in the call or as an operation")
    admin.add_argument("--dry-run", action="store_true", help="erase-user, lifecycle run: report, change nothing")
    admin.add_argument("--reason", help="erase-user: why (kept in the audit entry, the user id in it redacted)")
    admin.add_argument("--wait", action="store_true", help="erase-user: wait for an erasure that runs as an operation")
    admin.add_argument("--wait-timeout", type=float, default=600.0)
    add_lifecycle_arguments(admin)
    sub.add_parser("worker", help="run the background work (jobs, expiry sweep, turn windows) without gRPC")
    health = sub.add_parser("health", help="exit 0 when the server answers SERVING on grpc.health.v1, else 1")
    health.add_argument("--address", help="host:port of the server (default: MEMPLANE_LISTEN)")
    health.add_argument("--service", default="", help="one service's status (default: the whole server)")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the answer")
    mcp = sub.add_parser("mcp", help="MCP server (stdio) calling a running Memplane; see docs/mcp.md")
    mcp.add_argument("--http", action="store_true", help="serve streamable HTTP on MEMPLANE_MCP_LISTEN instead")
    sub.add_parser("panel", help="inspector web UI on MEMPLANE_PANEL_LISTEN, calling a running Memplane with each "
                   "visitor's API key")
    args = parser.parse_args(argv)
    settings = Settings()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.cmd == "serve":
        return _serve(settings)
    if args.cmd == "migrate":
        return _migrate(settings)
    if args.cmd == "reembed":
        return _reembed(args, settings)
    if args.cmd == "worker":
        from .commands.worker import run as work

        return work(settings)
    if args.cmd == "health":
        from .commands.health import run

        return run(args.address or settings.listen, service=args.service, timeout=args.timeout)
    if args.cmd in ("backup", "restore", "export", "import"):
        return _tool(args, settings)
    if args.cmd == "mcp":
        from .mcp.server import run

        return run(settings, http=args.http)
    if args.cmd == "panel":
        from .panel.server import run as serve_panel

        return serve_panel(settings)
    return _admin(args, settings)


if __name__ == "__main__":
    sys.exit(main())
