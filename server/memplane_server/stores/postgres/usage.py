"""SQL of what tenants use. LLM token usage and budgets (migration 0039): usage rows are written and
read in the tenant's own session (row-level security); a budget is set by a platform admin, as the
owner, and read by the tenant's session. Calls, texts embedded and what is stored (migration 0040,
MeteringStore): written by the server as the owner, across tenants, off the request path."""
from __future__ import annotations

from collections import Counter, defaultdict
from datetime import date, datetime

import asyncpg

from ...core.access.caller import Caller, Role
from ...core.metering import CALLS, TEXTS_EMBEDDED, DayUsage, StoredCount, TallyKey, TenantUsage
from ...core.usage import TokenBudget, TokenCount
from .session import caller_session
from .tenancy import MissingParentError


def _tenant_session(pool: asyncpg.Pool, tenant_id: str):
    return caller_session(pool, Caller(key_id="token-usage", role=Role.READER, tenant_id=tenant_id, agent_id=None))


def _budget(row: asyncpg.Record) -> TokenBudget:
    return TokenBudget(row["tokens_per_day"], True, row["updated_at"], row["updated_by"])


class TokenUsageStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def add(self, tenant_id: str, day: date, stage: str, model: str, input_tokens: int,
                  output_tokens: int) -> None:
        """One completion's tokens added to its (tenant, day, stage, model) row."""
        async with _tenant_session(self.pool, tenant_id) as conn:
            await conn.execute(
                "INSERT INTO llm_token_usage AS u (tenant_id, day, stage, model, input_tokens, output_tokens, completions)"
                " VALUES ($1, $2, $3, $4, $5, $6, 1) ON CONFLICT (tenant_id, day, stage, model) DO UPDATE SET"
                " input_tokens = u.input_tokens + EXCLUDED.input_tokens,"
                " output_tokens = u.output_tokens + EXCLUDED.output_tokens, completions = u.completions + 1",
                tenant_id, day, stage, model, input_tokens, output_tokens)

    async def spent_and_budget(self, tenant_id: str, day: date) -> tuple[int, TokenBudget | None]:
        """The tenant's tokens on that day, and the budget set for it (None: none set)."""
        async with _tenant_session(self.pool, tenant_id) as conn:
            row = await conn.fetchrow(
                "SELECT (SELECT coalesce(sum(input_tokens + output_tokens), 0) FROM llm_token_usage"
                "        WHERE tenant_id = $1 AND day = $2) AS spent,"
                " b.tokens_per_day, b.updated_at, b.updated_by"
                " FROM (SELECT 1) one LEFT JOIN llm_token_budgets b ON b.tenant_id = $1",
                tenant_id, day)
        return int(row["spent"]), _budget(row) if row["tokens_per_day"] is not None else None

    async def counts(self, tenant_id: str, start: date, end: date) -> list[TokenCount]:
        """The tenant's rows from start to end (both included), newest day first."""
        async with _tenant_session(self.pool, tenant_id) as conn:
            rows = await conn.fetch(
                "SELECT day, stage, model, input_tokens, output_tokens, completions FROM llm_token_usage"
                " WHERE tenant_id = $1 AND day BETWEEN $2 AND $3 ORDER BY day DESC, stage, model",
                tenant_id, start, end)
        return [TokenCount(r["day"], r["stage"], r["model"], r["input_tokens"], r["output_tokens"], r["completions"])
                for r in rows]

    async def set_budget(self, tenant_id: str, tokens_per_day: int, by: str) -> TokenBudget:
        """MissingParentError when no such tenant exists."""
        try:
            row = await self.pool.fetchrow(
                "INSERT INTO llm_token_budgets (tenant_id, tokens_per_day, updated_by) VALUES ($1, $2, $3)"
                " ON CONFLICT (tenant_id) DO UPDATE SET tokens_per_day = EXCLUDED.tokens_per_day, updated_at = now(),"
                " updated_by = EXCLUDED.updated_by RETURNING tokens_per_day, updated_at, updated_by",
                tenant_id, tokens_per_day, by)
        except asyncpg.ForeignKeyViolationError:
            raise MissingParentError(tenant_id) from None
        return _budget(row)

    async def clear_budget(self, tenant_id: str) -> None:
        await self.pool.execute("DELETE FROM llm_token_budgets WHERE tenant_id = $1", tenant_id)


class MeteringStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def add_counts(self, counts: Counter[TallyKey]) -> None:
        """Adds a tally's counts to their rows; those of a tenant deleted since are dropped."""
        if not counts:
            return
        await self.pool.executemany(
            "INSERT INTO usage_counts AS u (tenant_id, day, metric, name, value)"
            " SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM tenants WHERE id = $1)"
            " ON CONFLICT (tenant_id, day, metric, name) DO UPDATE SET value = u.value + EXCLUDED.value",
            [(*key, value) for key, value in counts.items()])

    async def roll_up_stored(self, day: date, at: datetime) -> int:
        """Every tenant's memories and bytes by layer and scope, as the day's figures; a layer and
        scope emptied since the day's earlier pass go to zero. One scan of memories, off the request
        path. Returns the rows written; 0 when another process is rolling up now (an advisory lock)."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval("SELECT pg_try_advisory_xact_lock(hashtext('memplane.usage_rollup'))"):
                return 0
            written = await conn.fetchval(
                "WITH now_stored AS (SELECT tenant_id, layer, scope, count(*) FILTER (WHERE status = 'active') AS n,"
                "                           sum(pg_column_size(m.*)) AS bytes FROM memories m GROUP BY 1, 2, 3),"
                " up AS (INSERT INTO usage_stored AS u (tenant_id, day, layer, scope, memories, bytes, rolled_up_at)"
                "        SELECT tenant_id, $1, layer, scope, n, bytes, $2 FROM now_stored"
                "        ON CONFLICT (tenant_id, day, layer, scope) DO UPDATE SET memories = EXCLUDED.memories,"
                "        bytes = EXCLUDED.bytes, rolled_up_at = EXCLUDED.rolled_up_at RETURNING 1)"
                " SELECT count(*) FROM up", day, at)
            await conn.execute("UPDATE usage_stored SET memories = 0, bytes = 0, rolled_up_at = $2"
                               " WHERE day = $1 AND rolled_up_at < $2", day, at)
        return int(written)

    async def tenants_with_usage(self, start: date, end: date) -> list[str]:
        rows = await self.pool.fetch(
            "SELECT tenant_id FROM usage_counts WHERE day BETWEEN $1 AND $2 UNION"
            " SELECT tenant_id FROM usage_stored WHERE day BETWEEN $1 AND $2 UNION"
            " SELECT tenant_id FROM llm_token_usage WHERE day BETWEEN $1 AND $2 ORDER BY 1", start, end)
        return [r["tenant_id"] for r in rows]

    async def usage(self, tenant_id: str, start: date, end: date) -> TenantUsage:
        """The tenant's days from start to end (both included), newest first."""
        async with _tenant_session(self.pool, tenant_id) as conn:
            counts = await conn.fetch("SELECT day, metric, name, value FROM usage_counts"
                                      " WHERE tenant_id = $1 AND day BETWEEN $2 AND $3", tenant_id, start, end)
            stored = await conn.fetch("SELECT day, layer, scope, memories, bytes, rolled_up_at FROM usage_stored"
                                      " WHERE tenant_id = $1 AND day BETWEEN $2 AND $3 ORDER BY layer, scope",
                                      tenant_id, start, end)
            tokens = await conn.fetch("SELECT day, stage, sum(input_tokens + output_tokens) AS n FROM llm_token_usage"
                                      " WHERE tenant_id = $1 AND day BETWEEN $2 AND $3 GROUP BY day, stage",
                                      tenant_id, start, end)
        days: dict[date, dict] = defaultdict(lambda: {"calls": {}, "texts_embedded": 0, "tokens": {}, "stored": [],
                                                      "stored_at": None})
        for r in counts:
            if r["metric"] == CALLS:
                days[r["day"]]["calls"][r["name"]] = r["value"]
            elif r["metric"] == TEXTS_EMBEDDED:
                days[r["day"]]["texts_embedded"] = r["value"]
        for r in tokens:
            days[r["day"]]["tokens"][r["stage"]] = int(r["n"])
        for r in stored:
            day = days[r["day"]]
            day["stored"].append(StoredCount(r["layer"], r["scope"], r["memories"], r["bytes"]))
            day["stored_at"] = max(filter(None, (day["stored_at"], r["rolled_up_at"])))
        return TenantUsage(tenant_id, [DayUsage(d, **days[d]) for d in sorted(days, reverse=True)])
