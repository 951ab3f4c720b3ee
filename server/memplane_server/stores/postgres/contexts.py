"""SQL for turn windows: the queue of sessions to rebuild and the window columns of memories."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg
import numpy as np

from ...core.caller import Caller
from ...core.windows import LeasedSession, SessionTurn, Window
from .session import caller_session

WINDOW_KINDS = ("turn",)


async def mark_sessions(conn: asyncpg.Connection, pairs: Sequence[tuple[str, str | None]], *, clear: bool) -> None:
    """Queues (tenant_id, session_id) pairs for rebuilding, inside the caller's transaction."""
    pairs = sorted({(t, s) for t, s in pairs if s})
    if pairs:
        await conn.execute(
            "SELECT mp_mark_context($1::text[], $2::text[], $3)",
            [t for t, _ in pairs], [s for _, s in pairs], clear,
        )


class ContextStore:
    """The worker's side runs as the owner, across tenants, like the job queue's claim."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def lease_next(self, lease_seconds: float, quiet_seconds: float = 0.0) -> LeasedSession | None:
        """The session marked longest ago, and not for quiet_seconds, that no worker holds; a
        crashed worker's lease runs out."""
        row = await self.pool.fetchrow(
            """
            UPDATE context_queue SET leased_until = clock_timestamp() + make_interval(secs => $1)
            WHERE (tenant_id, session_id) = (
                SELECT tenant_id, session_id FROM context_queue WHERE leased_until <= clock_timestamp()
                AND marked_at <= clock_timestamp() - make_interval(secs => $2)
                ORDER BY marked_at LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING tenant_id, session_id, marked_at
            """,
            lease_seconds, quiet_seconds,
        )
        return LeasedSession(row["tenant_id"], row["session_id"], row["marked_at"]) if row else None

    async def session_turns(self, tenant_id: str, session_id: str, *, with_vectors: bool) -> list[SessionTurn]:
        rows = await self.pool.fetch(
            "SELECT id, scope, domain, agent_id, content, context_of,"
            " CASE WHEN $4 THEN embedding END AS embedding FROM memories"
            " WHERE tenant_id = $1 AND session_id = $2 AND kind = ANY($3::text[]) AND status = 'active'"
            " ORDER BY scope, domain NULLS FIRST, agent_id NULLS FIRST, occurred_at, id",
            tenant_id, session_id, list(WINDOW_KINDS), with_vectors,
        )
        return [
            SessionTurn(r["id"], (r["scope"], r["domain"], r["agent_id"]), r["content"], r["context_of"],
                        r["embedding"].to_numpy() if r["embedding"] is not None else None)
            for r in rows
        ]

    async def save(self, tenant_id: str, built: Sequence[tuple[Window, str, np.ndarray | None]]) -> None:
        """Stores (window, keyword tokens, vector); no vector: the turn's own serves. Row by row, so the worker never holds
        one row while waiting for another; a row cleared since it was read keeps its clearing."""
        for window, keywords, vector in built:
            await self.pool.execute(
                "UPDATE memories SET context_of = $3, context_keywords = to_tsvector('simple', $4),"
                " context_embedding = coalesce($5::vector, embedding)"
                " WHERE tenant_id = $1 AND id = $2 AND status = 'active' AND context_of IS NOT DISTINCT FROM $6",
                tenant_id, window.id, window.fingerprint, keywords, vector, window.replaces,
            )

    async def finish(self, tenant_id: str, session_id: str, marked_at: datetime) -> None:
        """Done with the session as marked; marked again meanwhile, it is ready for another round."""
        await self.pool.execute(
            "WITH done AS (DELETE FROM context_queue WHERE tenant_id = $1 AND session_id = $2 AND marked_at = $3"
            " RETURNING 1)"
            " UPDATE context_queue SET leased_until = '-infinity'"
            " WHERE tenant_id = $1 AND session_id = $2 AND NOT EXISTS (SELECT 1 FROM done)",
            tenant_id, session_id, marked_at,
        )

    async def backlog_total(self) -> int:
        """Sessions of every tenant whose windows are not built yet."""
        return await self.pool.fetchval("SELECT count(*) FROM context_queue")

    async def backlog(self, caller: Caller) -> int:
        """Sessions of the caller's tenant whose windows are not built yet."""
        async with caller_session(self.pool, caller) as conn:
            return await conn.fetchval("SELECT count(*) FROM context_queue WHERE tenant_id = $1", caller.tenant_id)
