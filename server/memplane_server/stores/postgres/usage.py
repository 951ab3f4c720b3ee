"""SQL of LLM token usage and budgets (migration 0039). Usage rows are written and read in the
tenant's own session (row-level security); a budget is set by a platform admin, as the owner, and
read by the tenant's session."""
from __future__ import annotations

from datetime import date

import asyncpg

from ...core.access.caller import Caller, Role
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
