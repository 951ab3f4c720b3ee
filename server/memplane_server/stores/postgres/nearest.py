"""The nearest-neighbour statement of the vector-family search channels (vector, turn windows,
time, preferences): one query alone, or several at once in one statement."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import numpy as np

from ...core.caller import Caller
from ...core.model import MemoryFilter, MemoryRecord, Scored
from .sql import MEMORY_COLUMNS, Params, filter_clauses, record_from_row, visibility


@dataclass(frozen=True)
class VectorQuery:
    """Nearest memories to `vector` by their own vector, or (windows) by their turn window's."""

    filter: MemoryFilter
    vector: np.ndarray
    limit: int
    as_of: datetime | None = None
    windows: bool = False


def _select(caller: Caller, q: VectorQuery, p: Params, vector: str, extra: str = "") -> str:
    column = "m.context_embedding" if q.windows else "m.embedding"
    where = [visibility(caller, p), *filter_clauses(q.filter, p, as_of=q.as_of), f"{column} IS NOT NULL"]
    return (f"SELECT {MEMORY_COLUMNS}, 1 - ({column} <=> {vector}) AS similarity{extra} FROM memories m"
            f" WHERE {' AND '.join(where)} ORDER BY {column} <=> {vector} LIMIT {p.add(q.limit)}")


def nearest_statement(caller: Caller, queries: Sequence[VectorQuery]) -> tuple[str, Params]:
    """One query is the plain statement (the floor the benchmarks measure Search against is this
    statement). Several are a UNION ALL of the same statements, each keeping its ORDER BY and LIMIT,
    so each still walks its HNSW index (tests/integration/test_search_plans.py); a vector shared by
    several is sent once."""
    p = Params()
    placeholders: dict[int, str] = {}

    def vector(v: np.ndarray) -> str:
        if id(v) not in placeholders:
            placeholders[id(v)] = p.add(v)
        return placeholders[id(v)]

    if len(queries) == 1:
        return _select(caller, queries[0], p, vector(queries[0].vector)), p
    parts = [f"({_select(caller, q, p, vector(q.vector), f', {i} AS query')})" for i, q in enumerate(queries)]
    return " UNION ALL ".join(parts), p


def scored_by_query(rows: Sequence[asyncpg.Record], count: int) -> list[list[Scored]]:
    """Each query's rows in order; a memory found by several queries is built into a record once
    (building records is the costly part of a channel on the event loop)."""
    found: list[list[Scored]] = [[] for _ in range(count)]
    records: dict[object, MemoryRecord] = {}
    for r in rows:
        record = records.get(r["id"])
        if record is None:
            record = records[r["id"]] = record_from_row(r)
        found[r["query"] if count > 1 else 0].append(Scored(record, float(r["similarity"])))
    return found
