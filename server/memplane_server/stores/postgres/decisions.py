"""Reflection decisions and signals (migrations 0014, 0038), under the caller's row-level security:
an agent's decisions are its own, a tenant key's are every caller's of the tenant, and a signal (a
search that found nothing, which repeats its query) is its own agent's only. A tenant admin reads
every agent's, as the owner with the tenant named in every statement, as an erasure reaches them.

A reason may repeat what a caller sent, so it is sealed as memory content is: under the user's key
when the decision names a user (the shared lock on the user keeps an erasure from destroying that
key meanwhile, as for a memory write), else under the tenant's data key."""
from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from ...core.access.caller import Caller
from ...core.reflection.decisions import DecisionRecord
from ..sealing import OPENERS, open_text
from ..user_keys import Sealing
from .content.user_keys import lock_users
from .session import caller_session

_REASON = "decision_reason"


def _record(row: asyncpg.Record) -> DecisionRecord:
    return DecisionRecord(
        id=row["id"], subject_type=row["subject_type"], subject_id=row["subject_id"], decision=row["decision"],
        reason=open_text(row["sealed_key"], row["tenant_id"], _REASON, row["reason"]), created_at=row["created_at"],
        turns=row["turns"], operation_id=row["operation_id"],
    )


class DecisionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def record(
        self, caller: Caller, *, subject_type: str, subject_id: str, decision: str, reason: str, sealing: Sealing,
        turns: int | None = None, operation_id: uuid.UUID | None = None, user_id: str | None = None,
    ) -> DecisionRecord:
        tenant = caller.require_tenant()
        reason = reason[:1000]
        async with caller_session(self.pool, caller) as conn:
            key = sealing.tenant
            if key is not None and user_id and sealing.users is not None:
                await lock_users(conn, tenant, [user_id], exclusive=False)
                key = (await sealing.for_users(tenant, [user_id]))[user_id]
            row = await conn.fetchrow(
                "INSERT INTO reflection_decisions (tenant_id, id, agent_id, subject_type, subject_id, decision, reason,"
                " turns, operation_id, user_id, sealed_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                " RETURNING *",
                tenant, uuid.uuid4(), caller.agent_id, subject_type, subject_id, decision,
                OPENERS.seal_text(key, tenant, _REASON, reason) if key is not None else reason,
                turns, operation_id, user_id, key,
            )
        return _record(row)

    async def list(
        self, caller: Caller, *, subject_type: str | None, subject_id: str | None, limit: int,
        after: tuple[datetime, uuid.UUID] | None, every_agent: bool,
    ) -> list[DecisionRecord]:
        """every_agent: a tenant admin's listing, every agent's decisions and signals of its tenant."""
        where = ["tenant_id = $1"]
        args: list[object] = [caller.tenant_id]
        if not every_agent:  # as the row-level policy of migration 0038 says
            args.append(caller.agent_id)
            where.append(f"(agent_id IS NOT DISTINCT FROM ${len(args)}::text"
                         " OR (agent_id IS NULL AND subject_type <> 'search'))")
        for column, value in (("subject_type", subject_type), ("subject_id", subject_id)):
            if value:
                args.append(value)
                where.append(f"{column} = ${len(args)}")
        if after is not None:
            args += list(after)
            where.append(f"(created_at, id) < (${len(args) - 1}, ${len(args)})")
        args.append(limit)
        query = (f"SELECT * FROM reflection_decisions WHERE {' AND '.join(where)}"
                 f" ORDER BY created_at DESC, id DESC LIMIT ${len(args)}")
        if every_agent:
            rows = await self.pool.fetch(query, *args)
        else:
            async with caller_session(self.pool, caller) as conn:
                rows = await conn.fetch(query, *args)
        return [_record(r) for r in rows]

    async def forget_signals(self, caller: Caller, user_id: str) -> int:
        """Removes the signals of searches filtered to the user that the caller's agent made, as a
        forget reaches only its own agent's private memories, also a tenant admin's (an erasure
        reaches every agent's); as the owner, since the application role deletes none."""
        return await self.pool.fetchval(
            "WITH gone AS (DELETE FROM reflection_decisions WHERE tenant_id = $1 AND user_id = $2"
            " AND subject_type = 'search' AND agent_id IS NOT DISTINCT FROM $3::text RETURNING 1)"
            " SELECT count(*) FROM gone",
            caller.require_tenant(), user_id, caller.agent_id)

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
