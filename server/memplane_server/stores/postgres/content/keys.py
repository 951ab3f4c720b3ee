"""SQL of the tenants' data keys (migration 0035) and of moving rows between keys: re-sealing a
tenant's memories under its current data key, and re-wrapping data keys under the active KEK.

Only the owner reads tenant_keys, with the tenant named in every statement; the re-seal reads and
changes a tenant's rows the same way (as forget/lifecycle.py does), every agent's and its domain
memories alike, and appends no history: what a memory says does not change.
"""
from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from ...sealing import Texts, key_forms


@dataclass(frozen=True)
class SealedRow:
    tenant_id: str
    id: uuid.UUID
    sealed_key: bytes | None
    texts: Texts
    user_id: str | None = None


# A key as a snapshot holds it (base64, or hex where a trigger wrote it) names a user's key: such
# rows are under the key they should be.
_SNAPSHOT_USER_SEALED = (
    "coalesce(get_byte(CASE WHEN snapshot->>'sealed_key' LIKE '\\x%'"
    " THEN decode(substr(snapshot->>'sealed_key', 3), 'hex') ELSE decode(snapshot->>'sealed_key', 'base64') END,"
    " 0) = 2, false)"
)


class TenantKeyStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def current(self, tenant_id: str) -> tuple[int, bytes] | None:
        row = await self.pool.fetchrow(
            "SELECT version, wrapped FROM tenant_keys WHERE tenant_id = $1 ORDER BY version DESC LIMIT 1", tenant_id)
        return (row["version"], row["wrapped"]) if row else None

    async def add(self, tenant_id: str, version: int, wrapped: bytes) -> bool:
        """False when another server added that version first (it then wins: read it back). A
        version after the first leaves the tenant's older rows pending a re-seal."""
        return bool(await self.pool.fetchval(
            "INSERT INTO tenant_keys (tenant_id, version, wrapped, reseal_pending) VALUES ($1, $2, $3, $2 > 1)"
            " ON CONFLICT DO NOTHING RETURNING true", tenant_id, version, wrapped))

    async def pending_reseal(self) -> list[str]:
        rows = await self.pool.fetch("SELECT DISTINCT tenant_id FROM tenant_keys WHERE reseal_pending ORDER BY 1")
        return [r["tenant_id"] for r in rows]

    async def resealed(self, tenant_id: str, version: int, *, settled_seconds: float) -> None:
        """The tenant's rows are under version or newer: no re-seal pending up to it, once every
        server has taken the new key (servers reuse a key settled_seconds; a write in between may
        still seal under the older one, which the next round then moves)."""
        await self.pool.execute(
            "UPDATE tenant_keys SET reseal_pending = false WHERE tenant_id = $1"
            " AND (SELECT max(created_at) FROM tenant_keys WHERE tenant_id = $1 AND version <= $2)"
            " < now() - make_interval(secs => $3)", tenant_id, version, float(settled_seconds))

    async def tenants_in_clear(self, *, users: bool = False) -> list[str]:
        """Tenants with memories stored before encryption was configured, or (users: users' keys are
        kept) memories about a user under the tenant's key (one scan: run once a start)."""
        rows = await self.pool.fetch(
            "SELECT DISTINCT tenant_id FROM memories WHERE sealed_key IS NULL"
            " OR ($1 AND user_id IS NOT NULL AND get_byte(sealed_key, 0) = 1) ORDER BY 1", users)
        return [r["tenant_id"] for r in rows]

    async def all_keys(self) -> list[tuple[str, int, bytes]]:
        rows = await self.pool.fetch("SELECT tenant_id, version, wrapped FROM tenant_keys ORDER BY tenant_id, version")
        return [(r["tenant_id"], r["version"], r["wrapped"]) for r in rows]

    async def replace_wrapped(self, tenant_id: str, version: int, old: bytes, new: bytes) -> int:
        """One data key re-wrapped: its row in tenant_keys, every memory, history snapshot, session
        digest and reflection decision sealed under it. Returns the memories changed."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("UPDATE tenant_keys SET wrapped = $4 WHERE tenant_id = $1 AND version = $2"
                               " AND wrapped = $3", tenant_id, version, old, new)
            status = await conn.execute("UPDATE memories SET sealed_key = $3 WHERE tenant_id = $1 AND sealed_key = $2",
                                        tenant_id, old, new)
            await conn.execute("UPDATE session_digests SET sealed_key = $3 WHERE tenant_id = $1 AND sealed_key = $2",
                               tenant_id, old, new)
            await conn.execute("UPDATE reflection_decisions SET sealed_key = $3 WHERE tenant_id = $1 AND sealed_key = $2",
                               tenant_id, old, new)
            await conn.execute(
                "UPDATE memory_history SET snapshot = jsonb_set(snapshot, '{sealed_key}', to_jsonb($3::text))"
                " WHERE tenant_id = $1 AND snapshot->>'sealed_key' = ANY ($2::text[])",
                tenant_id, key_forms(old), base64.b64encode(new).decode())
        return int(status.split()[-1])

    async def stale_rows(self, tenant_id: str, current: bytes, limit: int, *, users: bool = False) -> list[SealedRow]:
        """Rows of the tenant not sealed under the key they should be: older tenant keys, or in
        clear, and (users: users' keys are kept) memories about a user under a tenant key."""
        rows = await self.pool.fetch(
            "SELECT tenant_id, id, sealed_key, content, context, value, metadata, user_id FROM memories"
            " WHERE tenant_id = $1 AND coalesce(get_byte(sealed_key, 0), 1) = 1"
            " AND (sealed_key IS DISTINCT FROM $2 OR ($4 AND user_id IS NOT NULL)) ORDER BY id LIMIT $3",
            tenant_id, current, limit, users)
        return [SealedRow(r["tenant_id"], r["id"], r["sealed_key"],
                          Texts(r["content"], r["context"], r["value"], r["metadata"]), r["user_id"]) for r in rows]

    async def reseal(self, rows: Sequence[tuple[SealedRow, bytes, Texts]]) -> int:
        """Stores each row's texts sealed anew under its new key, where the row is still as read."""
        changed = 0
        async with self.pool.acquire() as conn, conn.transaction():
            for row, key, texts in rows:
                status = await conn.execute(
                    "UPDATE memories SET sealed_key = $3, content = $4, context = $5, value = $6, metadata = $7"
                    " WHERE tenant_id = $1 AND id = $2 AND sealed_key IS NOT DISTINCT FROM $8 AND content = $9",
                    row.tenant_id, row.id, key, texts.content, texts.context, texts.value, texts.metadata,
                    row.sealed_key, row.texts.content)
                changed += int(status.split()[-1])
        return changed

    async def stale_snapshots(self, tenant_id: str, current: bytes, limit: int,
                              *, users: bool = False) -> list[tuple[int, dict[str, Any]]]:
        """History snapshots of the tenant not under the key they should be (as stale_rows)."""
        rows = await self.pool.fetch(
            "SELECT seq, snapshot FROM memory_history WHERE tenant_id = $1"
            f" AND NOT {_SNAPSHOT_USER_SEALED} AND (snapshot->>'sealed_key' IS DISTINCT FROM $2"
            " OR ($4 AND coalesce(snapshot->>'user_id', '') <> '')) ORDER BY seq LIMIT $3",
            tenant_id, base64.b64encode(current).decode(), limit, users)
        return [(r["seq"], r["snapshot"]) for r in rows]

    async def replace_snapshots(self, tenant_id: str, snapshots: Sequence[tuple[int, dict[str, Any]]]) -> None:
        await self.pool.executemany("UPDATE memory_history SET snapshot = $3 WHERE tenant_id = $1 AND seq = $2",
                                    [(tenant_id, seq, snapshot) for seq, snapshot in snapshots])

    async def stale_digests(self, tenant_id: str, current: bytes) -> list[tuple[str, str, str, str, bytes | None, str]]:
        """The tenant's session digests not sealed under its current data key: their key and text."""
        rows = await self.pool.fetch(
            "SELECT session_id, scope, domain, agent_id, sealed_key, digest FROM session_digests"
            " WHERE tenant_id = $1 AND sealed_key IS DISTINCT FROM $2", tenant_id, current)
        return [(r["session_id"], r["scope"], r["domain"], r["agent_id"], r["sealed_key"], r["digest"]) for r in rows]

    async def replace_digest(self, tenant_id: str, row: tuple[str, str, str, str, bytes | None, str], key: bytes,
                             digest: str) -> None:
        session_id, scope, domain, agent_id, old_key, old_digest = row
        await self.pool.execute(
            "UPDATE session_digests SET sealed_key = $6, digest = $7 WHERE tenant_id = $1 AND session_id = $2"
            " AND scope = $3 AND domain = $4 AND agent_id = $5 AND sealed_key IS NOT DISTINCT FROM $8 AND digest = $9",
            tenant_id, session_id, scope, domain, agent_id, key, digest, old_key, old_digest)

    async def counts(self) -> list[dict[str, Any]]:
        """Memories per tenant and sealing key (NULL: in clear)."""
        rows = await self.pool.fetch(
            "SELECT tenant_id, sealed_key, count(*) AS n FROM memories GROUP BY tenant_id, sealed_key"
            " ORDER BY tenant_id")
        return [dict(r) for r in rows]
