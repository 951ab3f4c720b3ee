"""SQL of the entity index (migration 0017): the memories linked to a search's first hits and its
query by the entities they share, read under the caller's visibility and filters."""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from ....core.access.caller import Caller
from ....core.model import MemoryFilter, MemoryRecord
from ..session import caller_session
from ..sql import MEMORY_COLUMNS, Params, filter_clauses, record_from_row, visibility


@dataclass
class Linked:
    """A memory and the entities that link it, each with the number of readable rows holding it."""

    record: MemoryRecord
    entities: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Links:
    linked: list[Linked]
    seed_entities: dict[uuid.UUID, set[str]]  # the linking entities each seed holds
    # The rows the caller may read (active or pending), against which an entity's count is its
    # rarity; never the tenant's whole count, which would tell an agent of rows it cannot read (0026).
    tenant_rows: int


class EntityStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def entities_of(self, caller: Caller, memory_id: uuid.UUID) -> list[str] | None:
        """A readable memory's entities; None when the caller cannot read it."""
        p = Params(memory_id)
        async with caller_session(self.pool, caller) as conn:
            row = await conn.fetchrow(
                f"SELECT m.entities FROM memories m WHERE m.id = $1 AND {visibility(caller, p)}", *p.values)
        return list(row["entities"] or []) if row else None

    async def links(
        self, caller: Caller, f: MemoryFilter, seed_ids: Sequence[uuid.UUID], query_entities: Sequence[str], *,
        max_rows: int, as_of: datetime | None,
    ) -> Links:
        """The memories holding an entity of the query or of a seed, that the caller may read and
        the filter lets through; entities held by more than max_rows readable rows link nothing."""
        async with caller_session(self.pool, caller) as conn:
            rows = await conn.fetch(
                "SELECT id, entity, rows_holding, tenant_rows FROM mp_entity_links($1::uuid[], $2::text[], $3)",
                list(seed_ids), list(query_entities), max_rows,
            )
            if not rows:
                return Links([], {}, 0)
            p = Params(list({r["id"] for r in rows}))
            where = ["m.id = ANY($1::uuid[])", visibility(caller, p), *filter_clauses(f, p, as_of=as_of)]
            records = await conn.fetch(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {' AND '.join(where)}", *p.values)
        by_id = {r["id"]: Linked(record_from_row(r)) for r in records}
        seeds = set(seed_ids)
        seed_entities: dict[uuid.UUID, set[str]] = {}
        for r in rows:
            if r["id"] in seeds:
                seed_entities.setdefault(r["id"], set()).add(r["entity"])
            if (linked := by_id.get(r["id"])) is not None:
                linked.entities[r["entity"]] = r["rows_holding"]
        return Links(list(by_id.values()), seed_entities, int(rows[0]["tenant_rows"]))
