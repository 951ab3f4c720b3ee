"""The planner's statistics of the memories table, counted again as soon as enough of it changed.

Right after a bulk load into a table the planner had not counted since (a new database: one that
was never counted is planned as if empty), the planner expects a row where there are hundreds, and
the search statements fetch their rows through the wrong index: LoCoMo searches took 70-110 ms
instead of 38-45 until autovacuum came round two minutes later (bench/README.md, peers.py, "the
planner's statistics after a bulk load"). Autovacuum also waits for 10% of a table to change.
Runs as the owner, like the keyword statistics; any number of processes may call it, and one counts.
"""
from __future__ import annotations

import asyncpg

# Counted again once the table's rows grew or shrank by this many plus this share since the last
# count (autovacuum's own rule is 50 rows plus 10% of any change). Rows, not changes: every search
# updates its hits' usage counters, which move nothing the plans depend on, and would have a big
# table counted every few seconds under load.
ANALYZE_AFTER_ROWS = 200
ANALYZE_AFTER_SHARE = 0.02

_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext('memplane.planner_stats'))"
# reltuples is -1 until the first count; pg_has_role: a deployment whose pool is not the table's
# owner leaves it to autovacuum.
_STALE = (
    "SELECT abs(s.n_live_tup - greatest(c.reltuples, 0)) > $1 + $2 * greatest(c.reltuples, 0)"
    " AND pg_has_role(c.relowner, 'MEMBER')"
    " FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relid = 'memories'::regclass"
)


class PlannerStatsStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def refresh_if_stale(self) -> bool:
        """Counts the memories table again (ANALYZE) when enough of it changed; True when it did."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(_LOCK) or not await conn.fetchval(_STALE, ANALYZE_AFTER_ROWS, ANALYZE_AFTER_SHARE):
                return False
            await conn.execute("ANALYZE memories")
        return True
