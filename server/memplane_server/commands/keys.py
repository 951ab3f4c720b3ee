"""`memplane keys status|rotate|reseal|rewrap|sweep`: encryption at rest from the command line,
against the database directly (it needs this deployment's KEKs and users' keys, as the server does).

    memplane keys status                 memories per KEK, under users' keys and in clear; tenants behind
    memplane keys rotate --tenant T      a new data key for T (or every tenant), its memories re-sealed
    memplane keys reseal [--tenant T]    memories moved to their tenant's current data key (or user's key)
    memplane keys rewrap                 every data key and user key wrapped by the active KEK
    memplane keys sweep                  memories sealed under users' keys since destroyed removed as
                                         erased (a restore does this itself; one that could not leaves
                                         the database refused by servers and workers until this is run)

The workers do the re-sealing and re-wrapping too (MEMPLANE_KEY_MAINTENANCE_SECONDS); these run
it now and report. Servers seal new writes under a rotated key within a minute.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict

from ..key_setup import open_with_keys
from ..services.content.keys import TenantKeys
from ..settings import Settings
from ..stores.postgres.content.keys import TenantKeyStore
from ..stores.postgres.pool import create_pool
from ..stores.user_keys import UserKeyFiles
from . import ToolError
from .backup import erased_line, sweep_erased
from .database import tool_database


def run(args: argparse.Namespace, settings: Settings) -> int:
    keys = open_with_keys(settings)
    if keys.active_kek is None:
        print("encryption is off: no key-encryption key is configured (MEMPLANE_ENCRYPTION_KEYS, "
              "MEMPLANE_ENCRYPTION_KEYS_FILE or the embedded default's key file)", file=sys.stderr)
        return 2
    # Direct where a direct URL is set (as migrations do): a sweep and a re-wrap are the owner's work.
    try:
        with tool_database(settings, direct=True) as url:
            pooled = settings.database_pooled and url == settings.database_url
            out = asyncio.run(_run(args, settings, url, keys.active_kek, keys.users, pooled))
    except ToolError as exc:  # a sweep refused: the folder it needs is not in place
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2))
    return 0


async def _run(args: argparse.Namespace, settings: Settings, url: str, active: str,
               users: UserKeyFiles | None, pooled: bool) -> dict:
    pool = await create_pool(url, size=2, ef_search=settings.hnsw_ef_search, pooled=pooled)
    try:
        keys = TenantKeys(TenantKeyStore(pool), active, settings.key_cache_seconds, users)
        if args.action == "sweep":
            async with pool.acquire() as conn:
                swept = await sweep_erased(conn, users)
            return {"swept": asdict(swept) if swept else None, "report": erased_line(swept) if swept else ""}
        tenants = [args.tenant] if args.tenant else [r["id"] for r in await pool.fetch("SELECT id FROM tenants")]
        if args.action == "rotate":
            return {t: {"version": await keys.rotate(t), "resealed": await keys.reseal(t)} for t in tenants}
        if args.action == "reseal":
            return {t: {"resealed": await keys.reseal(t)} for t in tenants}
        if args.action == "rewrap":
            return {"rewrapped_memories": await keys.rewrap_all(), **asdict(await keys.status())}
        return asdict(await keys.status())
    finally:
        await pool.close()

