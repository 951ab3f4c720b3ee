"""Everything the databases hold, as text: a test that a value was never stored in clear searches
all of it (every table of PostgreSQL, every key of Redis), not only the tables it expects."""
from __future__ import annotations

import asyncpg
import redis.asyncio as redis


async def database_text(pool: asyncpg.Pool) -> str:
    tables = await pool.fetch(
        "SELECT format('SELECT to_jsonb(t)::text FROM %I.%I t', schemaname, tablename) AS query"
        " FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")
    parts = []
    for table in tables:
        parts += [r[0] for r in await pool.fetch(table["query"])]
    return "\n".join(parts)


async def redis_text(client: redis.Redis) -> str:
    parts = []
    async for key in client.scan_iter(count=1000):
        kind = await client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "string":
            value = await client.get(key)
        elif kind == "list":
            value = await client.lrange(key, 0, -1)
        elif kind == "hash":
            value = await client.hgetall(key)
        elif kind == "set":
            value = await client.smembers(key)
        elif kind == "zset":
            value = await client.zrange(key, 0, -1)
        elif kind == "stream":
            value = await client.xrange(key)
        else:
            value = kind
        parts.append(f"{key!r} {value!r}")
    return "\n".join(parts)
