"""Per-tenant keyword statistics (migration 0013): the share of a tenant's rows holding each common
term, for its own keywords and its turn windows', counted from a sample of its rows. Runs as the
owner across tenants, like the window builder: background work keeps every tenant's counts."""
from __future__ import annotations

import asyncpg

SAMPLE_ROWS = 5000  # a share near the cut-off (5%) is then known to about +-0.6%
FLOOR_SHARE = 0.01  # rarer terms are not stored: every term not listed counts as rare
STALE_CHANGE = 0.1  # counted again once the tenant's stored memories moved by more than this share,
STALE_SECONDS = 3600  # or moved at all and the counts are this old,
# or once the windows that were pending at the last count are built (they change context_keywords
# without changing the number of memories).

# Two callers counting one tenant at once would waste the work: the second skips it.
_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext('memplane.keyword_stats'), hashtext($1))"

_REFRESH = """
WITH sample AS MATERIALIZED (
    SELECT keywords, context_keywords FROM memories WHERE tenant_id = $1 AND random() < $2),
fields AS (
    SELECT 'keywords' AS field, keywords AS k FROM sample
    UNION ALL SELECT 'context_keywords', context_keywords FROM sample WHERE context_keywords <> ''::tsvector),
docs AS (SELECT field, count(*) AS n FROM fields GROUP BY field),
terms AS (SELECT field, term, count(*) AS df FROM fields, unnest(tsvector_to_array(k)) AS term GROUP BY field, term)
INSERT INTO keyword_stats AS s (tenant_id, field, docs, common, memory_count, windows_pending)
SELECT $1, f.field, coalesce(d.n, 0),
       coalesce((SELECT jsonb_object_agg(t.term, round(t.df::numeric / d.n, 4)) FROM terms t
                 WHERE t.field = f.field AND t.df >= $3::float8 * d.n), '{}'::jsonb),
       $4, $5
FROM (VALUES ('keywords'), ('context_keywords')) AS f(field) LEFT JOIN docs d ON d.field = f.field
ON CONFLICT (tenant_id, field) DO UPDATE SET docs = EXCLUDED.docs, common = EXCLUDED.common,
    memory_count = EXCLUDED.memory_count, windows_pending = EXCLUDED.windows_pending, refreshed_at = now()
"""


class KeywordStatsStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def stale_tenants(self, limit: int) -> list[str]:
        """Tenants with memories whose counts are missing or out of date, the oldest first."""
        rows = await self.pool.fetch(
            "SELECT u.tenant_id FROM tenant_usage u"
            " LEFT JOIN keyword_stats s ON s.tenant_id = u.tenant_id AND s.field = 'keywords'"
            " WHERE u.memory_count > 0 AND (s.tenant_id IS NULL"
            "  OR abs(u.memory_count - s.memory_count) > $1 * s.memory_count"
            "  OR (u.memory_count <> s.memory_count AND s.refreshed_at < now() - make_interval(secs => $2))"
            "  OR (s.windows_pending AND NOT EXISTS (SELECT 1 FROM context_queue q WHERE q.tenant_id = u.tenant_id)))"
            " ORDER BY s.refreshed_at NULLS FIRST LIMIT $3",
            STALE_CHANGE, float(STALE_SECONDS), limit,
        )
        return [r["tenant_id"] for r in rows]

    async def refresh(self, tenant_id: str) -> bool:
        """Counts the tenant's terms again; False when another process is counting it."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(_LOCK, tenant_id):
                return False
            count = await conn.fetchval("SELECT memory_count FROM tenant_usage WHERE tenant_id = $1", tenant_id) or 0
            pending = await conn.fetchval("SELECT EXISTS (SELECT 1 FROM context_queue WHERE tenant_id = $1)", tenant_id)
            await conn.execute(_REFRESH, tenant_id, min(1.0, SAMPLE_ROWS / max(count, 1)), FLOOR_SHARE, count, pending)
        return True
