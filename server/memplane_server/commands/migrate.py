"""`memplane migrate`: apply the database migrations and exit."""
from __future__ import annotations

import asyncio

from ..settings import Settings
from .database import tool_database


def run(settings: Settings) -> int:
    from ..stores.postgres.migrations import migrate

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
