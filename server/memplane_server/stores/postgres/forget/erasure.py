"""SQL of an erasure of a user: every PostgreSQL row about a user_id within the caller's reach, in one
transaction (rolled back for a dry run), counted per table.

It runs as the owner with the tenant named in every statement: a tenant admin's reach (every agent's
private memories) is not something row-level security can express. Other keys are held to the one
`writable` predicate, to the jobs they own (the operations they see) and to their agent's decisions,
and never touch the audit log, which only a tenant admin reads. What was derived from the erased
memories, in any scope or tenant, is erased by the delete trigger of migration 0010.

Where users' keys are kept (stores/user_keys.py), the user's key is destroyed before the commit
once nothing sealed under it is left in the tenant (a key that still opens another agent's
memories or search signals stays, and the receipt says so): every backup and export made before
holds the user's memories and signals sealed under a key that no longer exists. An exclusive lock
on the user keeps a write from sealing under the key meanwhile (memory_writes.WriteTransaction and
DecisionStore.record take it shared).
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

import asyncpg

from ....core.access.caller import Caller
from ....core.forget.erasure import word_pattern
from ....core.model import Trace
from ...user_keys import UserKeyFiles
from ..content.user_keys import lock_users
from ..contexts import WINDOW_KINDS, mark_sessions
from ..sql import Params, trace_of, writable

_MAX_LISTED_IDS = 1000
_MENTIONS = "jsonb_path_exists({doc}, '$.** ? (@ == $u)', jsonb_build_object('u', {u}::text))"


class _DryRun(Exception):
    pass


@dataclass
class ErasedRows:
    count: int = 0  # memories about the user within reach
    ids: list[uuid.UUID] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)  # those and the ones derived from them
    counts: dict[str, int] = field(default_factory=dict)


class ErasureStore:
    def __init__(self, pool: asyncpg.Pool, users: UserKeyFiles | None = None) -> None:
        self.pool = pool
        self.users = users

    @staticmethod
    def _reach(caller: Caller, user_id: str, tenant_wide: bool, p: Params) -> str:
        where = [f"m.tenant_id = {p.add(caller.tenant_id)}", f"m.user_id = {p.add(user_id)}"]
        if not tenant_wide:
            where.append(writable(caller, p))
        return " AND ".join(where)

    async def count(self, caller: Caller, user_id: str, *, tenant_wide: bool) -> int:
        """Memories about the user within reach (to decide whether the erasure runs as an operation)."""
        p = Params()
        return await self.pool.fetchval(
            f"SELECT count(*) FROM memories m WHERE {self._reach(caller, user_id, tenant_wide, p)}", *p.values)

    async def erase(
        self, caller: Caller, user_id: str, *, tenant_wide: bool, dry_run: bool,
        keep_job: uuid.UUID | None = None,
    ) -> ErasedRows:
        """Removes (dry run: counts) the rows about the user; keep_job is the erasure's own job."""
        out = ErasedRows()
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                if self.users is not None:
                    await lock_users(conn, caller.tenant_id or "", [user_id], exclusive=True)
                await self._erase(conn, caller, user_id, tenant_wide, keep_job, out)
                if self.users is not None:
                    await self._shred(conn, caller.tenant_id or "", user_id, dry_run, out)
                if dry_run:
                    raise _DryRun()
        except _DryRun:
            pass
        return out

    async def _shred(self, conn: asyncpg.Connection, tenant: str, user_id: str, dry_run: bool, out: ErasedRows) -> None:
        users = self.users
        assert users is not None
        if await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM memories WHERE tenant_id = $1 AND user_id = $2)"
                " OR EXISTS (SELECT 1 FROM reflection_decisions WHERE tenant_id = $1 AND user_id = $2)",
                tenant, user_id):
            # It still opens memories, or other agents' signals, outside the caller's reach.
            out.counts["user_keys.destroyed"] = 0
            return
        ref = await asyncio.to_thread(users.current_ref, tenant, user_id)
        destroyed = ref is not None if dry_run else await asyncio.to_thread(users.destroy, tenant, user_id)
        out.counts["user_keys.destroyed"] = int(destroyed)

    async def _erase(
        self, conn: asyncpg.Connection, caller: Caller, user_id: str, tenant_wide: bool,
        keep_job: uuid.UUID | None, out: ErasedRows,
    ) -> None:
        tenant = caller.tenant_id
        p = Params()
        rows = await conn.fetch(
            f"SELECT m.tenant_id, m.id, m.session_id, m.user_id, m.kind, m.content, m.sealed_key FROM memories m"
            f" WHERE {self._reach(caller, user_id, tenant_wide, p)} ORDER BY m.id FOR UPDATE",
            *p.values,
        )
        ids = [r["id"] for r in rows]
        derived = await conn.fetch("SELECT * FROM mp_derived($1::uuid[])", ids) if ids else []
        out.count, out.ids = len(ids), ids[:_MAX_LISTED_IDS]
        out.traces = [trace_of(r) for r in [*rows, *derived]]
        every = [*ids, *(r["id"] for r in derived)]
        counts = out.counts
        counts["postgres.memories"] = len(ids)
        counts["postgres.derived_memories"] = len(derived)
        counts["postgres.memory_history"] = await conn.fetchval(
            "SELECT count(*) FROM memory_history WHERE memory_id = ANY($1::uuid[])", every)
        counts["postgres.memory_sources"] = await conn.fetchval(
            "SELECT count(*) FROM memory_sources WHERE memory_id = ANY($1::uuid[]) OR source_id = ANY($1::uuid[])", every)
        # Jobs about the user (their payload or result names it) that the caller owns, other than
        # erasures themselves.
        in_payload = _MENTIONS.format(doc="payload", u="$2")
        in_result = _MENTIONS.format(doc="coalesce(result, 'null'::jsonb)", u="$2")
        jobs_about = (
            f"tenant_id = $1 AND type <> 'erase' AND id IS DISTINCT FROM $3 AND ({in_payload} OR {in_result})"
            " AND ($4 OR caller->>'agent_id' IS NOT DISTINCT FROM $5::text)"
        )
        jobs_args = (tenant, user_id, keep_job, tenant_wide, caller.agent_id)
        counts["postgres.jobs"] = await conn.fetchval(
            f"WITH gone AS (DELETE FROM jobs WHERE {jobs_about} RETURNING 1) SELECT count(*) FROM gone", *jobs_args)
        counts["postgres.write_requests"] = await conn.fetchval(
            "WITH cleaned AS (UPDATE write_requests w SET memory_ids = coalesce("
            " (SELECT array_agg(x ORDER BY n) FROM unnest(w.memory_ids) WITH ORDINALITY AS u(x, n)"
            "  WHERE x <> ALL ($2::uuid[])), '{}')"
            " WHERE w.tenant_id = $1 AND w.memory_ids && $2::uuid[] RETURNING 1) SELECT count(*) FROM cleaned",
            tenant, every)
        counts["postgres.reflection_decisions"] = await conn.fetchval(
            "WITH gone AS (DELETE FROM reflection_decisions WHERE tenant_id = $1 AND user_id = $2"
            " AND ($3 OR agent_id IS NOT DISTINCT FROM $4) RETURNING 1) SELECT count(*) FROM gone",
            tenant, user_id, tenant_wide, caller.agent_id)
        if tenant_wide:
            counts["postgres.audit_events"] = await conn.fetchval(
                "WITH redacted AS (UPDATE audit_events"
                " SET details = mp_redact_words(details, $2), target = regexp_replace(target, $2, '[erased]', 'g')"
                " WHERE tenant_id = $1 AND (mp_redact_words(details, $2) <> details OR target ~ $2)"
                " RETURNING 1) SELECT count(*) FROM redacted",
                tenant, word_pattern(user_id))
        # A session digest holds the words of the session's turns: those of sessions with erased
        # turns are dropped by mark_sessions below (the worker builds them again from the turns
        # left). Counted here, not deleted: the drop locks the session's queue row first, as the
        # worker saving a digest does, so the two never wait on each other in a cycle.
        sessions = sorted({r["session_id"] for r in rows if r["kind"] in WINDOW_KINDS and r["session_id"]})
        counts["postgres.session_digests"] = await conn.fetchval(
            "SELECT count(*) FROM session_digests WHERE tenant_id = $1 AND session_id = ANY($2::text[])", tenant, sessions)
        if ids:
            # As a hard forget: the trigger (0024) deletes the rows' history and links, logs their
            # Watch events, erases what was derived and scrubs the ids from the jobs that remain.
            await conn.execute("DELETE FROM memories WHERE tenant_id = $1 AND id = ANY($2::uuid[])", tenant, ids)
            await mark_sessions(
                conn, [(r["tenant_id"], r["session_id"]) for r in rows if r["kind"] in WINDOW_KINDS], clear=True)
        # Rebuilds of summaries about the user, queued by that cascade, have nothing left to do.
        await conn.execute(f"DELETE FROM jobs WHERE {jobs_about}", *jobs_args)
