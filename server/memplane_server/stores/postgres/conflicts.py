"""Open conflicts (values stored as needs_confirmation beside the value they contradict) and their
resolution, under the caller's row-level security like every memory read and write."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from ...core.access.caller import Caller
from ...core.model import MemoryDraft, MemoryRecord
from ...core.write.observations import write_lock
from .memory_writes import append_history, same_space
from .session import caller_session
from .sql import MEMORY_COLUMNS, Params, record_from_row, visibility, writable


@dataclass(frozen=True)
class OpenConflict:
    current: MemoryRecord
    challenger: MemoryRecord
    reason: str


class ConflictClosed(Exception):
    """The challenger is no longer waiting for confirmation."""


class ConflictStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def list_open(
        self, caller: Caller, *, entity: str | None, limit: int, after: tuple[datetime, uuid.UUID] | None
    ) -> list[OpenConflict]:
        """Open conflicts the caller can see, newest challenger first; the reason is the one its
        creation recorded."""
        p = Params()
        where = [visibility(caller, p), "m.status = 'needs_confirmation'"]
        if entity:
            where.append(f"m.entity = {p.add(entity)}")
        if after is not None:
            where.append(f"(m.created_at, m.id) < ({p.add(after[0])}, {p.add(after[1])})")
        async with caller_session(self.pool, caller) as conn:
            rows = await conn.fetch(
                f"SELECT {MEMORY_COLUMNS},"
                " (SELECT h.reason FROM memory_history h WHERE h.tenant_id = m.tenant_id AND h.memory_id = m.id"
                "   AND h.action = 'created' ORDER BY h.seq LIMIT 1) AS why"
                f" FROM memories m WHERE {' AND '.join(where)} ORDER BY m.created_at DESC, m.id DESC"
                f" LIMIT {p.add(limit)}",
                *p.values,
            )
            challengers = [record_from_row(r) for r in rows]
            currents = await conn.fetch(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ANY($1::uuid[])",
                [c.conflicts_with for c in challengers],
            )
        current_of = {r["id"]: record_from_row(r) for r in currents}
        # The creation's history reason reads "contradicts <id>: <why>".
        return [OpenConflict(current_of[c.conflicts_with], c, (row["why"] or "").split(": ", 1)[-1])
                for c, row in zip(challengers, rows) if c.conflicts_with in current_of]

    async def challengers_of(self, caller: Caller, ids: list[uuid.UUID]) -> dict[uuid.UUID, list[MemoryRecord]]:
        """The open challengers of these memories that the caller can see."""
        if not ids:
            return {}
        p = Params(ids)
        async with caller_session(self.pool, caller) as conn:
            rows = await conn.fetch(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conflicts_with = ANY($1::uuid[])"
                f" AND m.status = 'needs_confirmation' AND {visibility(caller, p)} ORDER BY m.created_at",
                *p.values,
            )
        out: dict[uuid.UUID, list[MemoryRecord]] = {}
        for record in map(record_from_row, rows):
            challenged = record.conflicts_with
            assert challenged is not None, "read by its conflicts_with"
            out.setdefault(challenged, []).append(record)
        return out

    async def resolve(
        self, caller: Caller, challenger_id: uuid.UUID, *, keep_challenger: bool, actor: str, reason: str
    ) -> tuple[MemoryRecord, MemoryRecord] | None:
        """(kept, superseded); None when the caller cannot change the challenger. Raises
        ConflictClosed when it was resolved (or otherwise changed) before."""
        async with caller_session(self.pool, caller) as conn:
            p = Params(challenger_id)
            row = await conn.fetchrow(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1 AND {writable(caller, p)} FOR UPDATE",
                *p.values,
            )
            if row is None:
                return None
            challenger = record_from_row(row)
            if challenger.conflicts_with is None or challenger.status.value != "needs_confirmation":
                raise ConflictClosed()
            space = MemoryDraft(
                scope=challenger.scope, domain=challenger.domain, agent_id=challenger.agent_id, layer=None,
                kind=challenger.kind, content="", entity=challenger.entity, attribute=challenger.attribute,
            )
            # The writers of this fact take the same lock: nobody adds a value while we choose.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", write_lock(caller.tenant_id or "", space))
            if keep_challenger:
                q = Params(challenger.entity, challenger.attribute)
                retired = await conn.fetch(
                    f"UPDATE memories m SET status = 'superseded', valid_to = coalesce(m.valid_to, clock_timestamp()),"
                    f" updated_at = clock_timestamp() WHERE m.entity = $1 AND m.attribute = $2"
                    f" AND {same_space(caller, space, q)} RETURNING {MEMORY_COLUMNS}",
                    *q.values,
                )
                kept = record_from_row(await conn.fetchrow(
                    f"UPDATE memories m SET status = 'active', supersedes = m.conflicts_with,"
                    f" valid_from = coalesce(m.valid_from, clock_timestamp()), updated_at = clock_timestamp()"
                    f" WHERE m.id = $1 RETURNING {MEMORY_COLUMNS}",
                    challenger.id,
                ))
                retired_records = [record_from_row(r) for r in retired]
                await append_history(conn, retired_records, "superseded", actor, f"conflict resolved for {kept.id}: {reason}")
                await append_history(conn, [kept], "confirmed", actor, reason)
                other = next((r for r in retired_records if r.id == challenger.conflicts_with), None)
                if other is None:  # replaced by something else since; shown as it is
                    other = record_from_row(await conn.fetchrow(
                        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1", challenger.conflicts_with))
                return kept, other
            loser = record_from_row(await conn.fetchrow(
                f"UPDATE memories m SET status = 'superseded', updated_at = clock_timestamp()"
                f" WHERE m.id = $1 RETURNING {MEMORY_COLUMNS}",
                challenger.id,
            ))
            current = record_from_row(await conn.fetchrow(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1", challenger.conflicts_with))
            await append_history(conn, [loser], "superseded", actor, f"conflict resolved for {current.id}: {reason}")
            await append_history(conn, [current], "confirmed", actor, reason)
            return current, loser
