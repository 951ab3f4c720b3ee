"""Connection pool with the pgvector codec and the session settings every query relies on."""
from __future__ import annotations

import asyncpg
from pgvector.asyncpg import register_vector


async def create_pool(dsn: str, *, size: int, ef_search: int) -> asyncpg.Pool:
    async def init(conn: asyncpg.Connection) -> None:
        await register_vector(conn)
        await conn.set_type_codec("jsonb", encoder=_json_dumps, decoder=_json_loads, schema="pg_catalog")
        # Iterative scans keep filtered HNSW searches from returning too few rows when the
        # caller's tenant is a small part of the table (pgvector >= 0.8).
        await conn.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false),"
            " set_config('hnsw.ef_search', $1, false),"
            " set_config('plan_cache_mode', 'force_custom_plan', false)",
            str(ef_search),
        )

    return await asyncpg.create_pool(dsn, min_size=1, max_size=size, init=init, command_timeout=60)


def _json_dumps(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json_loads(text: str) -> object:
    import json

    return json.loads(text)
