"""Reflection decisions and signals (migration 0014), under the caller's row-level security: an
agent's decisions are its own, a tenant's are every caller's of the tenant."""
from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from ...core.access.caller import Caller
from ...core.reflection.decisions import DecisionRecord
from .session import caller_session


def _record(row: asyncpg.Record) -> DecisionRecord:
    return DecisionRecord(
        id=row["id"], subject_type=row["subject_type"], subject_id=row["subject_id"], decision=row["decision"],
        reason=row["reason"], created_at=row["created_at"], turns=row["turns"], operation_id=row["operation_id"],
    )


class DecisionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def record(
        self, caller: Caller, *, subject_type: str, subject_id: str, decision: str, reason: str,
        turns: int | None = None, operation_id: uuid.UUID | None = None, user_id: str | None = None,
    ) -> DecisionRecord:
        async with caller_session(self.pool, caller) as conn:
            row = await conn.fetchrow(
                "INSERT INTO reflection_decisions (tenant_id, id, agent_id, subject_type, subject_id, decision, reason,"
                " turns, operation_id, user_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *",
                caller.tenant_id, uuid.uuid4(), caller.agent_id, subject_type, subject_id, decision, reason[:1000],
                turns, operation_id, user_id,
            )
        return _record(row)

    async def list(
        self, caller: Caller, *, subject_type: str | None, subject_id: str | None, limit: int,
        after: tuple[datetime, uuid.UUID] | None,
    ) -> list[DecisionRecord]:
        where = ["tenant_id = $1"]
        args: list[object] = [caller.tenant_id]
        for column, value in (("subject_type", subject_type), ("subject_id", subject_id)):
            if value:
                args.append(value)
                where.append(f"{column} = ${len(args)}")
        if after is not None:
            args += list(after)
            where.append(f"(created_at, id) < (${len(args) - 1}, ${len(args)})")
        args.append(limit)
        async with caller_session(self.pool, caller) as conn:
            rows = await conn.fetch(
                f"SELECT * FROM reflection_decisions WHERE {' AND '.join(where)}"
                f" ORDER BY created_at DESC, id DESC LIMIT ${len(args)}",
                *args,
            )
        return [_record(r) for r in rows]

    async def session_turns(self, caller: Caller, session_id: str) -> tuple[int, int]:
        """(turns the session holds now, turns it held at its last reflection decision)."""
        async with caller_session(self.pool, caller) as conn:
            row = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM memories m WHERE m.tenant_id = $1 AND m.session_id = $2"
                "          AND m.kind = 'turn' AND m.status IN ('active', 'pending')) AS now,"
                "       (SELECT coalesce(max(turns), 0) FROM reflection_decisions"
                "          WHERE tenant_id = $1 AND subject_type = 'session' AND subject_id = $2) AS last",
                caller.tenant_id, session_id,
            )
        return row["now"], row["last"]
