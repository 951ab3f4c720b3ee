"""Where does a text live? Scans every table and every Redis key for it (tests share this).

PostgreSQL: every column of a textual type (text, varchar, char, name, json, jsonb, tsvector and
arrays of them) of every table in the public schema, found in pg_catalog at each call, so a table
or column added by a later migration is covered without touching this file. JSON is searched as
PostgreSQL prints it, for the text as given and as JSON escapes it.

Redis: every key (SCAN), its name and its contents whatever the type (strings, lists, hashes,
sets, sorted sets), as bytes.

Sealed texts (encryption at rest: the suites run with a KEK) are searched opened too: a memory's
row and history snapshots, session digests, working items and state, cached responses. What was sealed still says
what it says to whoever holds the KEK, so a forget must remove it as it would a clear text.

    hits = await scan(pool, redis_client, ["The user lives in Xanadu-7f3a", "user-7f3a"])
    assert not hits, describe(hits)
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import asyncpg
import redis.asyncio as redis

from memplane_server.stores.redis.working import opened_item, opened_state
from memplane_server.stores.sealing import OPENERS, SEALED_BYTES, SealError, Texts, key_from_json, open_texts

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


async def scan_sealed_postgres(pool: asyncpg.Pool, needles: list[str]) -> list[Hit]:
    hits: list[Hit] = []

    def check(table: str, part: str, row: str, text: str) -> None:
        hits.extend(Hit("postgres", table, part, row, n) for n in needles if any(f in text for f in _forms(n)))

    async with pool.acquire() as conn:
        for r in await conn.fetch("SELECT ctid::text AS row, tenant_id, content, context, value, metadata, sealed_key"
                                  " FROM memories WHERE sealed_key IS NOT NULL"):
            texts = open_texts(r["sealed_key"], r["tenant_id"], Texts(r["content"], r["context"], r["value"],
                                                                         r["metadata"]))
            for part in ("content", "context", "value"):
                check("memories", part, r["row"], getattr(texts, part) or "")
            check("memories", "metadata", r["row"], json.dumps(texts.metadata, ensure_ascii=False))
        for r in await conn.fetch("SELECT ctid::text AS row, snapshot FROM memory_history"
                                  " WHERE snapshot->>'sealed_key' IS NOT NULL"):
            snapshot = r["snapshot"]
            texts = open_texts(key_from_json(snapshot["sealed_key"]), snapshot["tenant_id"],
                               Texts(snapshot["content"], snapshot["context"], snapshot["value"], snapshot["metadata"]))
            check("memory_history", "snapshot", r["row"], json.dumps(texts.__dict__, ensure_ascii=False))
        for r in await conn.fetch("SELECT ctid::text AS row, tenant_id, digest, sealed_key FROM session_digests"
                                  " WHERE sealed_key IS NOT NULL"):
            check("session_digests", "digest", r["row"],
                  OPENERS.open_text(r["sealed_key"], r["tenant_id"], "digest", r["digest"]))
    return hits


def _opened(data: bytes, tenants: list[str]) -> bytes:
    """Redis bytes with what is sealed in them opened: a working item, a state value, a response."""
    try:
        item = json.loads(data)
        if isinstance(item, dict) and item.get("sealed_key"):
            return json.dumps(opened_item(item), ensure_ascii=False).encode()
    except (ValueError, UnicodeDecodeError):
        pass
    text = data.decode(errors="replace")
    if text.startswith("\x00mp1:"):
        return opened_state(text, text_tenant(tenants, text)).encode()
    head, sep, rest = data.partition(b":")
    fingerprint, sep2, response = rest.partition(b":")
    if head == b"done" and sep and sep2 and response.startswith(SEALED_BYTES):
        for tenant in tenants:
            try:
                return OPENERS.open_bytes(tenant, "response", response)
            except SealError:
                continue
    return data


def text_tenant(tenants: list[str], value: str) -> str:
    for tenant in tenants:
        try:
            opened_state(value, tenant)
            return tenant
        except SealError:
            continue
    return ""


async def scan_redis(client: redis.Redis, needles: list[str], tenants: list[str] | None = None) -> list[Hit]:
    hits: list[Hit] = []
    encoded = [(n, [f.encode() for f in _forms(n)]) for n in needles]
    tenants = tenants or []

    def check(key: str, part: str, data: bytes, stored: bytes | None = None) -> None:
        """stored: the value, when data is more than it (a hash field and its value)."""
        opened = _opened(data if stored is None else stored, tenants)
        for needle, forms in encoded:
            if any(f in data or f in opened for f in forms):
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
                check(key, field.decode(errors="replace"), field + b"\x00" + value, value)
        elif kind == "set":
            for member in await client.smembers(raw_key):
                check(key, "member", member)
        elif kind == "zset":
            for member in await client.zrange(raw_key, 0, -1):
                check(key, "member", member)
    return hits


async def scan(pool: asyncpg.Pool, client: redis.Redis, needles: list[str]) -> list[Hit]:
    """Every place in PostgreSQL and Redis holding one of the needles, sealed or not."""
    needles = [n for n in needles if n]
    tenants = [r["id"] for r in await pool.fetch("SELECT id FROM tenants")]
    return (await scan_postgres(pool, needles) + await scan_sealed_postgres(pool, needles)
            + await scan_redis(client, needles, tenants))


def rows_by_table(hits: list[Hit]) -> Counter:
    """PostgreSQL rows holding a needle, per table (a row counted once however many columns hold one)."""
    return Counter(table for table, _ in {(h.where, h.row) for h in hits if h.store == "postgres"})


def redis_keys(hits: list[Hit]) -> set[str]:
    return {h.where for h in hits if h.store == "redis"}


def describe(hits: list[Hit]) -> str:
    return "\n".join(f"{h.store} {h.where}.{h.part} {h.row} <- {h.needle!r}" for h in hits[:50])
