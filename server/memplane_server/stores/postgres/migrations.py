"""Versioned plain-SQL migrations, applied in order under an advisory lock."""
from __future__ import annotations

import logging
from importlib import resources

import asyncpg

log = logging.getLogger(__name__)

# Any fixed 64-bit number: all server instances agree on it, so only one migrates at a time.
_LOCK_ID = 0x6D656D706C616E65


def _migration_files() -> list[tuple[int, str, str]]:
    folder = resources.files(__package__) / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def latest_version() -> int:
    """The newest schema version this code knows."""
    return _migration_files()[-1][0]


async def applied_version(conn: asyncpg.Connection) -> int:
    """The newest migration applied to the database (0 for an empty one)."""
    if await conn.fetchval("SELECT to_regclass('schema_migrations')") is None:
        return 0
    return await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations")


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Applies pending migrations; returns the names applied."""
    applied: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_ID)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, sql in _migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name)
            log.info("applied migration %s", name)
            applied.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_ID)
    return applied
