"""SQL of lifecycle policies (migration 0016): the stored policies, the memories a run examines
and the in-place changes it makes (weights, review flags, archiving). Removals are not here: they
are forgets (MemoryStore.forget_traced).

Policies are read and written in the tenant's own session (row-level security). A run reads and
changes the tenant's global and private memories, every agent's, as the owner with the tenant named
in every statement: a tenant-wide reach that row-level security cannot express (as erasure.py).
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from ....core.access.caller import Caller, Role
from ....core.forget.lifecycle import Candidate
from ....core.model import Kind, MemoryRecord, Scope, Status
from ..memory_writes import append_history
from ..session import caller_session
from ..sql import MEMORY_COLUMNS, aware, record_from_row

_KEPT_STATUSES = ["active", "pending", "archived"]
_EPISODIC_KINDS = ["turn", "event", "summary"]


@dataclass(frozen=True)
class StoredPolicy:
    enabled: bool
    policy: dict
    updated_at: datetime
    updated_by: str


def _tenant_session(pool: asyncpg.Pool, tenant_id: str):
    return caller_session(pool, Caller(key_id="lifecycle", role=Role.READER, tenant_id=tenant_id, agent_id=None))


class LifecycleStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def get_policy(self, tenant_id: str) -> StoredPolicy | None:
        async with _tenant_session(self.pool, tenant_id) as conn:
            row = await conn.fetchrow(
                "SELECT enabled, policy, updated_at, updated_by FROM lifecycle_policies WHERE tenant_id = $1", tenant_id)
        return StoredPolicy(row["enabled"], row["policy"], row["updated_at"], row["updated_by"]) if row else None

    async def set_policy(self, tenant_id: str, enabled: bool, policy: dict, by: str) -> StoredPolicy:
        async with _tenant_session(self.pool, tenant_id) as conn:
            row = await conn.fetchrow(
                "INSERT INTO lifecycle_policies (tenant_id, enabled, policy, updated_by) VALUES ($1, $2, $3, $4)"
                " ON CONFLICT (tenant_id) DO UPDATE SET enabled = EXCLUDED.enabled, policy = EXCLUDED.policy,"
                " updated_at = now(), updated_by = EXCLUDED.updated_by"
                " RETURNING enabled, policy, updated_at, updated_by",
                tenant_id, enabled, policy, by)
        return StoredPolicy(row["enabled"], row["policy"], row["updated_at"], row["updated_by"])

    async def candidates(self, tenant_id: str, after: uuid.UUID | None, limit: int) -> list[Candidate]:
        """The next `limit` of the tenant's global and private memories a policy may act on, by id.
        An episodic memory of a task session knows when the task finished: its task summary's write;
        every memory whether one in service (not a summary, which is rebuilt) was derived from it."""
        rows = await self.pool.fetch(
            """
            SELECT m.id, m.kind, m.status, m.scope, m.agent_id, m.confidence, m.use_count, m.created_at,
                   m.last_used_at, m.lifecycle_weight, m.review_flagged_at IS NOT NULL AS flagged, t.finished_at,
                   EXISTS (SELECT 1 FROM memory_sources s
                           JOIN memories d ON d.tenant_id = s.tenant_id AND d.id = s.memory_id
                           WHERE s.source_id = m.id AND d.kind <> 'summary'
                             AND d.status IN ('active', 'pending', 'needs_confirmation')) AS feeds
            FROM memories m
            LEFT JOIN LATERAL (
                SELECT min(s.created_at) AS finished_at FROM memories s
                WHERE s.tenant_id = m.tenant_id AND s.session_id = m.session_id AND s.source_type = 'task'
                  AND s.source_id = m.session_id AND s.kind = 'summary' AND s.status <> 'deleted'
            ) t ON m.session_id IS NOT NULL AND m.kind = ANY ($4::text[])
            WHERE m.tenant_id = $1 AND m.scope IN ('global', 'private') AND m.status = ANY ($5::text[])
              AND ($2::uuid IS NULL OR m.id > $2)
            ORDER BY m.id LIMIT $3
            """,
            tenant_id, after, limit, _EPISODIC_KINDS, _KEPT_STATUSES,
        )
        return [
            Candidate(id=r["id"], kind=Kind(r["kind"]), status=Status(r["status"]), scope=Scope(r["scope"]),
                      agent_id=r["agent_id"], confidence=float(r["confidence"]), use_count=r["use_count"],
                      created_at=aware(r["created_at"]), last_used_at=aware(r["last_used_at"]),
                      lifecycle_weight=float(r["lifecycle_weight"]), review_flagged=r["flagged"],
                      task_finished_at=aware(r["finished_at"]), feeds=r["feeds"])
            for r in rows
        ]

    async def change(
        self, tenant_id: str, ids: Sequence[uuid.UUID], rule: str, *, now: datetime, weight: float = 1.0,
        actor: str, reason: str,
    ) -> list[MemoryRecord]:
        """Applies an in-place rule (archive, review, unflag, demote, restore) to the tenant's memories
        among ids that are still as the run found them, each change recorded in their history."""
        sets, still = {
            "archive": ("status = 'archived'", "m.status IN ('active', 'pending')"),
            "review": ("review_flagged_at = $3", "m.review_flagged_at IS NULL"),
            "unflag": ("review_flagged_at = NULL", "m.review_flagged_at IS NOT NULL"),
            "demote": ("lifecycle_weight = $4", "m.lifecycle_weight <> $4"),
            "restore": ("lifecycle_weight = 1", "m.lifecycle_weight <> 1"),
        }[rule]
        if not ids:
            return []
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                f"UPDATE memories m SET {sets}, updated_at = clock_timestamp()"
                f" WHERE m.tenant_id = $1 AND m.id = ANY ($2::uuid[]) AND m.scope IN ('global', 'private')"
                f" AND m.status = ANY ($5::text[]) AND {still} AND $3::timestamptz IS NOT NULL AND $4::real > 0"
                f" RETURNING {MEMORY_COLUMNS}",
                tenant_id, list(ids), now, weight, _KEPT_STATUSES,
            )
            records = [record_from_row(r) for r in rows]
            await append_history(conn, records, "updated", actor, reason)
        return records
