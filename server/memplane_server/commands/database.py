"""The database a command-line tool works on, and `memplane migrate` (apply the migrations and exit)."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from ..settings import Settings


@contextmanager
def tool_database(settings: Settings, *, direct: bool = False) -> Iterator[str]:
    """A database URL for a command-line tool: the configured one, the running server's embedded
    one, or an embedded one started just for the tool. `direct` asks for the migrations' URL when
    one is set: pg_dump, pg_restore and the migrations a restore ends with need a session of their
    own (not a transaction-mode pooler's) and the owner's reach."""
    # Imported here: `memplane admin` needs none of this and should start fast.
    from ..embedded import EmbeddedError, EmbeddedPostgres
    from ..runtime import RUNNING_DSN_FILE

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


def migrate(settings: Settings) -> int:
    from ..stores.postgres.migrations import migrate as apply_migrations

    async def run(url: str) -> list[str]:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            return await apply_migrations(conn)
        finally:
            await conn.close()

    if settings.migration_database_url:
        applied = asyncio.run(run(settings.migration_database_url))
    else:
        with tool_database(settings) as url:
            applied = asyncio.run(run(url))
    print("applied: " + (", ".join(applied) if applied else "nothing, schema is current"))
    return 0
