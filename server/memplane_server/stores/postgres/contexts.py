"""SQL for turn windows: the queue of sessions to rebuild and the window columns of memories."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg
import numpy as np

from ...core.access.caller import Caller
from ...core.write.windows import LeasedSession, SessionTurn, Window, WindowBacklog
from ..sealing import open_text
from .session import caller_session

WINDOW_KINDS = ("turn",)


def marked_sessions(pairs: Sequence[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """The distinct (tenant_id, session_id) pairs that name a session, in the order they are locked."""
    return sorted({(t, s) for t, s in pairs if s})


async def mark_sessions(conn: asyncpg.Connection, pairs: Sequence[tuple[str, str | None]], *, clear: bool) -> None:
    """Queues (tenant_id, session_id) pairs for rebuilding, inside the caller's transaction."""
    if marked := marked_sessions(pairs):
        await conn.execute(
            "SELECT mp_mark_context($1::text[], $2::text[], $3)",
            [t for t, _ in marked], [s for _, s in marked], clear,
        )


class ContextStore:
    """The worker's side runs as the owner, across tenants, like the job queue's claim."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def lease_next(self, lease_seconds: float, quiet_seconds: float = 0.0,
                         within_seconds: float = float("inf")) -> LeasedSession | None:
        """The session marked longest ago, and not for quiet_seconds (or first marked within_seconds
        ago: a session written without pause is built as it goes), that no worker holds; a crashed
        worker's lease runs out."""
        row = await self.pool.fetchrow(
            """
            UPDATE context_queue SET leased_until = clock_timestamp() + make_interval(secs => $1)
            WHERE (tenant_id, session_id) = (
                SELECT tenant_id, session_id FROM context_queue WHERE leased_until <= clock_timestamp()
                AND (marked_at <= clock_timestamp() - make_interval(secs => $2)
                     OR first_marked_at <= clock_timestamp() - make_interval(secs => $3))
                ORDER BY marked_at LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING tenant_id, session_id, marked_at
            """,
            lease_seconds, quiet_seconds, min(within_seconds, 1e9),
        )
        return LeasedSession(row["tenant_id"], row["session_id"], row["marked_at"]) if row else None

    async def lease_upgrade(self, lease_seconds: float) -> LeasedSession | None:
        """The session queued longest ago whose averaged windows await their embedding."""
        row = await self.pool.fetchrow(
            """
            UPDATE context_upgrades SET leased_until = clock_timestamp() + make_interval(secs => $1)
            WHERE (tenant_id, session_id) = (
                SELECT tenant_id, session_id FROM context_upgrades WHERE leased_until <= clock_timestamp()
                ORDER BY queued_at LIMIT 1 FOR UPDATE SKIP LOCKED)
            RETURNING tenant_id, session_id, queued_at
            """,
            lease_seconds,
        )
        return LeasedSession(row["tenant_id"], row["session_id"], row["queued_at"]) if row else None

    async def session_turns(self, tenant_id: str, session_id: str, *, with_vectors: bool) -> list[SessionTurn]:
        rows = await self.pool.fetch(
            "SELECT id, scope, domain, agent_id, content, sealed_key, context_of, occurred_at,"
            " CASE WHEN $4 THEN embedding END AS embedding FROM memories"
            " WHERE tenant_id = $1 AND session_id = $2 AND kind = ANY($3::text[]) AND status = 'active'"
            " ORDER BY scope, domain NULLS FIRST, agent_id NULLS FIRST, occurred_at, id",
            tenant_id, session_id, list(WINDOW_KINDS), with_vectors,
        )
        return [
            SessionTurn(r["id"], (r["scope"], r["domain"], r["agent_id"]),
                        open_text(r["sealed_key"], tenant_id, "content", r["content"]), r["context_of"],
                        r["embedding"].to_numpy() if r["embedding"] is not None else None, r["occurred_at"])
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

    async def upgrade(self, tenant_id: str, window: Window, vector: np.ndarray | None) -> None:
        """Stores an averaged window's embedding (its text and keywords are unchanged), unless the
        window changed since it was read."""
        await self.pool.execute(
            "UPDATE memories SET context_of = $3, context_embedding = coalesce($4::vector, embedding)"
            " WHERE tenant_id = $1 AND id = $2 AND status = 'active' AND context_of = $5",
            tenant_id, window.id, window.fingerprint, vector, window.replaces,
        )

    async def finish(self, tenant_id: str, session_id: str, marked_at: datetime, *, upgrade: bool = False) -> None:
        """Done with the session as marked; marked again meanwhile, it is ready for another round,
        counted as waiting since the last mark this round saw (a little early). With upgrade, its averaged windows are queued for embedding."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "WITH done AS (DELETE FROM context_queue WHERE tenant_id = $1 AND session_id = $2 AND marked_at = $3"
                " RETURNING 1)"
                " UPDATE context_queue SET first_marked_at = $3, leased_until = '-infinity'"
                " WHERE tenant_id = $1 AND session_id = $2 AND NOT EXISTS (SELECT 1 FROM done)",
                tenant_id, session_id, marked_at,
            )
            if upgrade:
                await conn.execute(
                    "INSERT INTO context_upgrades (tenant_id, session_id) VALUES ($1, $2)"
                    " ON CONFLICT (tenant_id, session_id) DO UPDATE SET queued_at = clock_timestamp()",
                    tenant_id, session_id,
                )

    async def finish_upgrade(self, tenant_id: str, session_id: str, queued_at: datetime, *, done: bool) -> None:
        """Done upgrading the session as queued (queued again meanwhile, or not done: it comes back)."""
        if done:
            done = await self.pool.fetchval(
                "WITH gone AS (DELETE FROM context_upgrades WHERE tenant_id = $1 AND session_id = $2 AND queued_at = $3"
                " RETURNING 1) SELECT count(*) > 0 FROM gone",
                tenant_id, session_id, queued_at,
            )
        if not done:
            await self.pool.execute(
                "UPDATE context_upgrades SET leased_until = '-infinity' WHERE tenant_id = $1 AND session_id = $2",
                tenant_id, session_id,
            )

    async def backlog_total(self) -> WindowBacklog:
        """The turn-window queues of every tenant."""
        row = await self.pool.fetchrow(
            "SELECT count(*) AS n, coalesce(extract(epoch FROM clock_timestamp() - min(first_marked_at)), 0)::float8"
            " AS age, (SELECT count(*) FROM context_upgrades) AS upgrades FROM context_queue"
        )
        return WindowBacklog(row["n"], row["age"], row["upgrades"])

    async def backlog(self, caller: Caller) -> WindowBacklog:
        """The turn-window queues of the caller's tenant."""
        async with caller_session(self.pool, caller) as conn:
            row = await conn.fetchrow(
                "SELECT count(*) AS n, coalesce(extract(epoch FROM clock_timestamp() - min(first_marked_at)), 0)::float8"
                " AS age, (SELECT count(*) FROM context_upgrades WHERE tenant_id = $1) AS upgrades"
                " FROM context_queue WHERE tenant_id = $1",
                caller.tenant_id,
            )
        return WindowBacklog(row["n"], row["age"], row["upgrades"])
