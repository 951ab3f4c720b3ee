"""`memplane backup` and `memplane restore`: whole-database archives made by pg_dump.

An archive holds everything PostgreSQL keeps (tenants, keys, memories, history, operations);
Redis holds only working memory and caches, which expire anyway, and is not backed up. It never
holds the KEK or users' keys (MEMPLANE_DATA_DIR/keys): a restore reads what an archive sealed with
the keys as they are now, so the memories of users erased since the backup do not open, and the
restore removes them as erased (stores/user_keys.py). Until that sweep is done (a restore without
the keys folder leaves it to `memplane keys sweep`) the database is marked, and no server or worker
starts on it.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import asyncpg

from ..core.backups import SchemaTooNew, backup_name, check_schema_version, names_to_prune
from ..embedded import EmbeddedError, EmbeddedPostgres
from ..key_setup import user_keys_folder
from ..settings import Settings
from ..stores.postgres.bulk.dump import ClientTools, DumpError, finish_restore, is_empty, prepare_restore, server_major
from ..stores.postgres.content.user_keys import (
    Swept,
    clear_sweep_pending,
    mark_sweep_pending,
    recorded_store,
    remove_shredded,
    sealed_under_users,
)
from ..stores.postgres.migrations import latest_version, migrate
from ..stores.sealing import OPENERS
from ..stores.user_keys import UserKeyFiles
from . import ToolError
from .database import tool_database

log = logging.getLogger(__name__)


def backup_dir(settings: Settings) -> Path:
    return settings.backup_dir or settings.data_dir / "backups"


@dataclass(frozen=True)
class Restored:
    schema_version: int
    migrated: list[str]
    erased: Swept | None = None  # what the restore removed, sealed under users' keys since destroyed


def backup(settings: Settings, database_url: str) -> Path:
    """Writes a new archive to the backup dir, then deletes all but the newest backup_keep."""
    folder = backup_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)  # archives hold key hashes and every memory
    tools = _tools(settings, database_url)
    final = folder / backup_name(datetime.now(timezone.utc))
    # Written under another name and renamed when complete: a failed or interrupted backup never
    # counts as one, and never makes the pruning below drop a good one.
    partial = folder / f".{final.name}.partial"
    os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    try:
        tools.dump(database_url, partial)
    except DumpError as exc:
        partial.unlink(missing_ok=True)
        raise ToolError(str(exc)) from None
    os.replace(partial, final)
    for name in names_to_prune(os.listdir(folder), settings.backup_keep):
        (folder / name).unlink(missing_ok=True)
    return final


def restore(settings: Settings, database_url: str, archive: Path) -> Restored:
    """Restores an archive into an empty database and migrates it to this code's schema."""
    if not archive.is_file():
        raise ToolError(f"no backup file {archive}")
    tools = _tools(settings, database_url)
    try:
        versions = tools.schema_versions(archive)
        if not versions:
            raise ToolError(f"{archive} is not a Memplane backup (it has no schema_migrations rows)")
        check_schema_version(f"backup {archive}", max(versions), latest_version())
        folder = user_keys_folder(settings, embedded=not settings.database_url)
        users = UserKeyFiles(folder, OPENERS, "") if folder is not None else None
        return asyncio.run(_restore(tools, database_url, archive, max(versions), users))
    except (DumpError, SchemaTooNew) as exc:
        raise ToolError(str(exc)) from None


async def _restore(tools: ClientTools, database_url: str, archive: Path, version: int,
                   users: UserKeyFiles | None) -> Restored:
    conn = await asyncpg.connect(database_url)
    try:
        if not await is_empty(conn):
            raise ToolError(
                "the target database is not empty; restore into a new one: a fresh MEMPLANE_DATA_DIR for the"
                " embedded database, or a newly created database in MEMPLANE_DATABASE_URL"
            )
        await prepare_restore(conn)
        tools.restore(archive, database_url)
        # An archive of an older release comes up to this one's schema, as `serve` would do.
        migrated = await migrate(conn)
        # Before the sweep, which clears it: a restore stopped or refused before its sweep is done
        # leaves a database no server or worker starts on.
        await mark_sweep_pending(conn)
        await finish_restore(conn)
        return Restored(version, migrated, await sweep_erased(conn, users))
    finally:
        await conn.close()


async def sweep_erased(conn: asyncpg.Connection, users: UserKeyFiles | None) -> Swept | None:
    """Removes, as erased, the memories sealed under users' keys that no longer exist (None: the
    database keeps no users' keys), and with that clears a restore's mark. Refuses when the key
    folder is not the one the rows name: an empty or other folder would make every user look erased."""
    recorded = await recorded_store(conn)
    if recorded is None:
        await clear_sweep_pending(conn)
        return None
    ours = users.store_id() if users is not None else None
    if ours != recorded:
        where = f"MEMPLANE_USER_KEYS_DIR ({users.folder}) holds folder {ours}" if users else "no key folder is set"
        raise ToolError(
            f"the archive's memories about users are sealed under users' keys in key folder {recorded}, and {where}:"
            " copy that folder (the old MEMPLANE_DATA_DIR/keys) into place, then run `memplane keys sweep`;"
            " nothing was removed, and servers and workers refuse this database until that sweep is done")
    assert users is not None
    refs = await sealed_under_users(conn)
    gone = [ref for ref in refs if not await asyncio.to_thread(users.exists, ref)]
    async with conn.transaction():
        swept = await remove_shredded(conn, gone)
        await clear_sweep_pending(conn)
    return swept


def _tools(settings: Settings, database_url: str) -> ClientTools:
    """pg_dump and pg_restore able to read the server: those bundled with the embedded PostgreSQL
    or those on PATH; for an external database on a machine with neither, the bundled ones are
    unpacked first (pg0 does that at the embedded server's first start, which it then stops)."""

    async def major() -> int:
        conn = await asyncpg.connect(database_url)
        try:
            return await server_major(conn)
        finally:
            await conn.close()

    server = asyncio.run(major())
    embedded = EmbeddedPostgres(settings.data_dir)
    try:
        return ClientTools.choose(embedded.client_tool_dirs(), server)
    except DumpError as exc:
        if embedded.client_tool_dirs():
            raise ToolError(str(exc)) from None
        log.info("unpacking the PostgreSQL client tools bundled with pg0 into %s", settings.data_dir)
    try:
        embedded.start()
        embedded.stop()
        return ClientTools.choose(embedded.client_tool_dirs(), server)
    except (DumpError, EmbeddedError) as exc:
        raise ToolError(str(exc)) from None


def run(args: argparse.Namespace, settings: Settings) -> int:
    """`memplane backup` and `memplane restore`: pg_dump, pg_restore and the migrations a restore
    ends with need a session of their own (not a pooler's) and the owner's reach."""
    with tool_database(settings, direct=True) as url:
        if args.cmd == "backup":
            print(backup(settings, url))
            return 0
        done = restore(settings, url, args.file)
    migrated = f", then migrated: {', '.join(done.migrated)}" if done.migrated else ""
    print(f"restored {args.file} (schema version {done.schema_version}){migrated}")
    if done.erased is not None:
        print(erased_line(done.erased))
    return 0


def erased_line(swept: Swept) -> str:
    return (f"{swept.memories} memories of {swept.users} erased users could not be decrypted (their keys were"
            f" destroyed by an erasure) and were removed as erased, with {swept.derived} derived from them and"
            f" {swept.jobs} jobs naming them")
