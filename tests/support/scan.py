"""Where does a text live? Scans every table and every Redis key for it (tests share this).

PostgreSQL: every column of a textual type (text, varchar, char, name, json, jsonb, tsvector and
arrays of them) of every table in the public schema, found in pg_catalog at each call, so a table
or column added by a later migration is covered without touching this file. JSON is searched as
PostgreSQL prints it, for the text as given and as JSON escapes it.

Redis: every key (SCAN), its name and its contents whatever the type (strings, lists, hashes,
sets, sorted sets), as bytes.

    hits = await scan(pool, redis_client, ["The user lives in Xanadu-7f3a", "user-7f3a"])
    assert not hits, describe(hits)
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import asyncpg
import redis.asyncio as redis

_TEXT_TYPES = ("text", "varchar", "bpchar", "name", "json", "jsonb", "tsvector")


@dataclass(frozen=True)
class Hit:
    store: str  # "postgres" or "redis"
    where: str  # table, or Redis key
    part: str  # column, or the part of the key ("key", "value", a hash field, a list index, "member")
    row: str  # the row's ctid (PostgreSQL) or "" (Redis)
    needle: str


async def text_columns(conn: asyncpg.Connection | asyncpg.Pool) -> dict[str, list[str]]:
    """table -> its textual columns, public schema, from the catalog."""
    rows = await conn.fetch(
        """
        SELECT c.relname AS table_name, a.attname AS column_name
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        JOIN pg_type t ON t.oid = a.atttypid
        LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
          AND (t.typname = ANY($1::text[]) OR e.typname = ANY($1::text[]))
        ORDER BY c.relname, a.attnum
        """,
        list(_TEXT_TYPES),
    )
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["table_name"], []).append(r["column_name"])
    return out


def _forms(needle: str) -> list[str]:
    escaped = json.dumps(needle, ensure_ascii=False)[1:-1]
    return list(dict.fromkeys([needle, escaped]))


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def scan_postgres(pool: asyncpg.Pool, needles: list[str]) -> list[Hit]:
    hits: list[Hit] = []
    async with pool.acquire() as conn:
        for table, columns in (await text_columns(conn)).items():
            for column in columns:
                for needle in needles:
                    rows = await conn.fetch(
                        f"SELECT ctid::text AS row FROM {_ident(table)}"
                        f" WHERE EXISTS (SELECT 1 FROM unnest($1::text[]) f WHERE strpos({_ident(column)}::text, f) > 0)",
                        _forms(needle),
                    )
                    hits += [Hit("postgres", table, column, r["row"], needle) for r in rows]
    return hits


async def scan_redis(client: redis.Redis, needles: list[str]) -> list[Hit]:
    hits: list[Hit] = []
    encoded = [(n, [f.encode() for f in _forms(n)]) for n in needles]

    def check(key: str, part: str, data: bytes) -> None:
        for needle, forms in encoded:
            if any(f in data for f in forms):
                hits.append(Hit("redis", key, part, "", needle))

    async for raw_key in client.scan_iter(count=1000):
        key = raw_key.decode(errors="replace")
        check(key, "key", raw_key)
        kind = (await client.type(raw_key)).decode()
        if kind == "string":
            value = await client.get(raw_key)
            if value is not None:
                check(key, "value", value)
        elif kind == "list":
            for i, value in enumerate(await client.lrange(raw_key, 0, -1)):
                check(key, f"[{i}]", value)
        elif kind == "hash":
            for field, value in (await client.hgetall(raw_key)).items():
                check(key, field.decode(errors="replace"), field + b"\x00" + value)
        elif kind == "set":
            for member in await client.smembers(raw_key):
                check(key, "member", member)
        elif kind == "zset":
            for member in await client.zrange(raw_key, 0, -1):
                check(key, "member", member)
    return hits


async def scan(pool: asyncpg.Pool, client: redis.Redis, needles: list[str]) -> list[Hit]:
    """Every place in PostgreSQL and Redis holding one of the needles."""
    needles = [n for n in needles if n]
    return await scan_postgres(pool, needles) + await scan_redis(client, needles)


def rows_by_table(hits: list[Hit]) -> Counter:
    """PostgreSQL rows holding a needle, per table (a row counted once however many columns hold one)."""
    return Counter(table for table, _ in {(h.where, h.row) for h in hits if h.store == "postgres"})


def redis_keys(hits: list[Hit]) -> set[str]:
    return {h.where for h in hits if h.store == "redis"}


def describe(hits: list[Hit]) -> str:
    return "\n".join(f"{h.store} {h.where}.{h.part} {h.row} <- {h.needle!r}" for h in hits[:50])
