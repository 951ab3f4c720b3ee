"""Many rows of one tenant in one statement, for tests that need the planner to see a tenant of
realistic size: ~70% session turns with windows, ~20% facts with entity/attribute, ~10% events;
keywords with a speaker name in half the rows each (the common terms a chat has) and rarer
words; random vectors on one row in 20 (each HNSW insert costs ~10-20 ms on a busy machine). Runs as the owner, beside row-level security, like a restore."""
from __future__ import annotations

from datetime import datetime, timezone

import asyncpg

START = datetime(2023, 1, 1, tzinfo=timezone.utc)

_INSERT = """
INSERT INTO memories (tenant_id, id, scope, agent_id, layer, kind, content, confidence, status, occurred_at,
                      entity, attribute, value, session_id, keywords, context_keywords, embedding, context_embedding)
SELECT $1, gen_random_uuid(), 'global', NULL,
       CASE WHEN k = 'fact' THEN 'semantic' ELSE 'episodic' END, k,
       'row ' || g, 0.9, 'active', $3::timestamptz + g * interval '1 hour',
       CASE WHEN k = 'fact' THEN 'Person ' || (g % 300) END, CASE WHEN k = 'fact' THEN 'Attr' || (g % 13) END,
       CASE WHEN k = 'fact' THEN 'value ' || g END,
       CASE WHEN k = 'turn' THEN 'session-' || (g / 20) END,
       to_tsvector('simple', words), CASE WHEN k = 'turn' THEN to_tsvector('simple', words || ' ' || words2) ELSE '' END,
       v, CASE WHEN k = 'turn' THEN v END
FROM generate_series(1, $2) AS g,
     LATERAL (SELECT CASE WHEN g % 10 < 7 THEN 'turn' WHEN g % 10 < 9 THEN 'fact' ELSE 'event' END AS k,
                     CASE WHEN g % 2 = 0 THEN 'ann' ELSE 'bob' END || ' w' || (g * 7 % 997) || ' w' || (g * 13 % 991)
                       || ' x' || (g % 50) AS words,
                     'ann bob w' || (g * 17 % 983) || ' x' || ((g + 1) % 50) AS words2,
                     CASE WHEN g % 20 = 0 THEN (SELECT array_agg(random()::real - 0.5) FROM generate_series(1, 384) WHERE g > 0)::vector END AS v) AS r
"""


async def insert_rows(conn: asyncpg.Connection, tenant_id: str, n: int, *, analyze: bool = True) -> None:
    """n rows of tenant_id (which must exist), then ANALYZE so the planner knows them. A caller
    loading many tenants passes analyze=False and analyses once at the end: each ANALYZE samples
    the whole table again (~1.5 s on a shared 2-core machine at 10,000 rows)."""
    await conn.execute(_INSERT, tenant_id, n, START)
    if analyze:
        await conn.execute("ANALYZE memories")
