"""The durable job queue: rows claimed with FOR UPDATE SKIP LOCKED, retried with backoff."""
from __future__ import annotations

import uuid

import asyncpg

from ...core.access.caller import Caller, Role
from ...core.operations import Job, Operation
from .session import caller_session


def _operation(row: asyncpg.Record) -> Operation:
    result = row["result"] or {}
    return Operation(
        id=row["id"], type=row["type"], state=row["state"], attempts=row["attempts"],
        error_reason=row["error_reason"], error_message=row["error_message"], created_at=row["created_at"],
        updated_at=row["updated_at"], result_memory_ids=tuple(result.get("memory_ids", [])),
        result_summary=result.get("summary", ""), result_receipt=result.get("receipt"),
    )


def _owned(sees_all: int, agent: int) -> str:
    """An operation belongs to the agent that started it (or to the tenant when no agent did): the
    parameter numbered `sees_all` says the caller sees all of its tenant's (a tenant admin), the
    one numbered `agent` is the caller's agent."""
    return f"(${sees_all}::boolean OR caller->>'agent_id' IS NOT DISTINCT FROM ${agent}::text)"


_OWNED = _owned(3, 4)


def _sees_all(caller: Caller) -> bool:
    return caller.role in (Role.TENANT_ADMIN, Role.PLATFORM_ADMIN)


def _job(row: asyncpg.Record) -> Job:
    return Job(id=row["id"], type=row["type"], payload=row["payload"], caller=row["caller"], attempts=row["attempts"])


class JobStore:
    """Callers enqueue, read and cancel their tenant's jobs under row-level security; the worker
    (claim, succeed, fail) runs as the owner across tenants."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def enqueue(self, caller: Caller, job_type: str, payload: dict, caller_json: dict) -> Operation:
        async with caller_session(self.pool, caller) as conn:
            return _operation(await conn.fetchrow(
                "INSERT INTO jobs (tenant_id, id, type, state, payload, caller) VALUES ($1, $2, $3, 'pending', $4, $5)"
                " RETURNING *",
                caller.tenant_id, uuid.uuid4(), job_type, payload, caller_json,
            ))

    async def schedule_consolidations(self, every_seconds: float) -> int:
        """Queues a consolidation of each tenant's global lessons and procedures that changed within
        the period, unless one ran or waits within it; schedulers take turns, so once a period.
        Returns how many were queued."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('memplane.consolidation.schedule'))")
            return len(await conn.fetch(
                """
                INSERT INTO jobs (tenant_id, id, type, state, payload, caller)
                SELECT t.id, gen_random_uuid(), 'consolidate', 'pending', '{"scope": "global"}'::jsonb,
                       jsonb_build_object('key_id', 'system:consolidate', 'role', 'writer', 'tenant_id', t.id,
                                          'agent_id', NULL, 'domains', '{}'::jsonb)
                FROM tenants t
                WHERE EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = t.id AND m.kind IN ('lesson', 'procedure')
                                AND m.status = 'active' AND m.scope = 'global'
                                AND m.updated_at > now() - make_interval(secs => $1))
                  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = t.id AND j.type = 'consolidate'
                                    AND (j.state IN ('pending', 'running') OR j.created_at > now() - make_interval(secs => $1)))
                RETURNING id
                """,
                every_seconds,
            ))

    async def schedule_lifecycle(self, every_seconds: float) -> int:
        """Queues a lifecycle run of each tenant whose policy is enabled, unless one ran or waits
        within the period; schedulers take turns, so once a period. Returns how many were queued."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('memplane.lifecycle.schedule'))")
            return len(await conn.fetch(
                """
                INSERT INTO jobs (tenant_id, id, type, state, payload, caller)
                SELECT p.tenant_id, gen_random_uuid(), 'lifecycle', 'pending', '{"dry_run": false}'::jsonb,
                       jsonb_build_object('key_id', 'system:lifecycle', 'role', 'writer', 'tenant_id', p.tenant_id,
                                          'agent_id', NULL, 'domains', '{}'::jsonb)
                FROM lifecycle_policies p
                WHERE p.enabled
                  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = p.tenant_id AND j.type = 'lifecycle'
                                    AND (j.state IN ('pending', 'running') OR j.created_at > now() - make_interval(secs => $1)))
                RETURNING id
                """,
                every_seconds,
            ))

    async def claim(self, lease_seconds: float) -> Job | None:
        """Takes the oldest ready job for lease_seconds (renewed while it runs); a dead worker's job
        becomes ready again when its lease runs out."""
        row = await self.pool.fetchrow(
            """
            UPDATE jobs SET state = 'running', attempts = attempts + 1, updated_at = now(),
                run_after = now() + make_interval(secs => $1)
            WHERE (tenant_id, id) = (
                SELECT tenant_id, id FROM jobs
                WHERE (state = 'pending' OR state = 'running') AND run_after <= now()
                ORDER BY run_after LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING *
            """,
            lease_seconds,
        )
        return _job(row) if row else None

    # Each of these names the attempt it belongs to: a worker whose lease ran out (and whose job
    # another worker took) can neither extend nor finish it.

    async def renew(self, job_id: uuid.UUID, attempt: int, lease_seconds: float) -> bool:
        """Extends a running job's lease; False when this attempt no longer holds it."""
        return bool(await self.pool.fetchval(
            "UPDATE jobs SET run_after = now() + make_interval(secs => $3)"
            " WHERE id = $1 AND attempts = $2 AND state = 'running' RETURNING true",
            job_id, attempt, lease_seconds,
        ))

    async def succeed(
        self, job_id: uuid.UUID, attempt: int, memory_ids: list[str], summary: str, *, receipt: dict | None = None,
        payload: dict | None = None, report: dict | None = None,
    ) -> None:
        """Records the result (a lifecycle run's report with it); payload, when given, replaces the
        job's (an erasure drops the user id)."""
        result = {"memory_ids": memory_ids, "summary": summary, **({"receipt": receipt} if receipt else {}),
                  **({"report": report} if report else {})}
        await self.pool.execute(
            "UPDATE jobs SET state = 'succeeded', result = $3, payload = coalesce($4, payload), updated_at = now(),"
            " error_reason = '', error_message = '' WHERE id = $1 AND attempts = $2 AND state = 'running'",
            job_id, attempt, result, payload,
        )

    async def fail(
        self, job_id: uuid.UUID, attempt: int, reason: str, message: str, *, retry_in_seconds: float | None
    ) -> None:
        """Records a failed attempt: back to pending after a delay, or failed for good."""
        await self.pool.execute(
            "UPDATE jobs SET state = CASE WHEN $5::float8 IS NULL THEN 'failed' ELSE 'pending' END,"
            " run_after = now() + make_interval(secs => coalesce($5::float8, 0)),"
            " error_reason = $3, error_message = $4, updated_at = now()"
            " WHERE id = $1 AND attempts = $2 AND state = 'running'",
            job_id, attempt, reason, message[:2000], retry_in_seconds,
        )

    async def get(self, caller: Caller, job_id: uuid.UUID) -> Operation | None:
        async with caller_session(self.pool, caller) as conn:
            row = await conn.fetchrow(f"SELECT * FROM jobs WHERE tenant_id = $1 AND id = $2 AND {_OWNED}",
                                      caller.tenant_id, job_id, _sees_all(caller), caller.agent_id)
        return _operation(row) if row else None

    async def list(self, caller: Caller, state: str | None, after: tuple | None, limit: int) -> list[Operation]:
        async with caller_session(self.pool, caller) as conn:
            rows = await conn.fetch(
                f"SELECT * FROM jobs WHERE tenant_id = $1 AND {_owned(2, 3)} AND ($4::text IS NULL OR state = $4)"
                " AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6::uuid))"
                " ORDER BY created_at DESC, id DESC LIMIT $7",
                caller.tenant_id, _sees_all(caller), caller.agent_id, state, after[0] if after else None,
                after[1] if after else None, limit,
            )
        return [_operation(r) for r in rows]

    async def cancel(self, caller: Caller, job_id: uuid.UUID) -> tuple[Operation, bool] | None:
        """Cancels an unfinished job the caller sees; returns it either way, with whether this call
        cancelled it (None when the caller sees no such job)."""
        async with caller_session(self.pool, caller) as conn:
            args = (caller.tenant_id, job_id, _sees_all(caller), caller.agent_id)
            row = await conn.fetchrow(
                "UPDATE jobs SET state = 'cancelled', updated_at = now()"
                f" WHERE tenant_id = $1 AND id = $2 AND {_OWNED} AND state IN ('pending', 'running') RETURNING *",
                *args)
            if row is not None:
                return _operation(row), True
            row = await conn.fetchrow(f"SELECT * FROM jobs WHERE tenant_id = $1 AND id = $2 AND {_OWNED}", *args)
        return (_operation(row), False) if row else None

    async def queue_depth(self) -> tuple[int, float]:
        """Jobs waiting to run (not counting those a runner holds), and the age in seconds of the
        oldest of them (0 with none), across tenants."""
        row = await self.pool.fetchrow(
            "SELECT count(*) AS n, coalesce(extract(epoch FROM now() - min(created_at)), 0) AS age"
            " FROM jobs WHERE state = 'pending'"
        )
        return row["n"], float(row["age"])

    async def is_cancelled(self, job_id: uuid.UUID) -> bool:
        return await self.pool.fetchval("SELECT state = 'cancelled' FROM jobs WHERE id = $1", job_id) or False
