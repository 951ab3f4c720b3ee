"""The nearest-neighbour statements of the vector-family search channels (vector, turn windows,
time, preferences): one query alone, or several at once in one statement; and which of them walk
the HNSW graph rather than sort the tenant's rows."""
from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import asyncpg
import numpy as np

from ....core.access.caller import Caller
from ....core.model import MemoryFilter, MemoryRecord, Scored
from ..sql import WHOLE, Params, RowShape, filter_clauses, ranked_select, visibility
from .plans import search_rows

# pgvector's iterative scan stops after hnsw.max_scan_tuples index tuples (20,000 by default): a
# tenant below this share of the table would need about that many to fill a channel of 50 when a
# quarter of its rows pass the rest of the filter (windows exist for turns only), so it stays exact.
WALK_MIN_SHARE = 0.01
# A tenant's size is read again after this long; it only chooses between two correct plans.
SIZE_SECONDS = 60.0
# Tenants whose size is remembered (the least recently searched forget it): a platform of a
# million tenants must not grow every server by an entry each.
SIZES_KEPT = 10_000


@dataclass(frozen=True)
class VectorQuery:
    """Nearest memories to `vector` by their own vector, or (windows) by their turn window's."""

    filter: MemoryFilter
    vector: np.ndarray
    limit: int
    as_of: datetime | None = None
    windows: bool = False
    lead: int = 0  # in a leading shape, the nearest rows read whole (sql.RowShape)


def _select(caller: Caller, q: VectorQuery, p: Params, vector: str, extra: str = "", shape: RowShape = WHOLE) -> str:
    column = "m.context_embedding" if q.windows else "m.embedding"
    where = [visibility(caller, p), *filter_clauses(q.filter, p, as_of=q.as_of), f"{column} IS NOT NULL"]
    rest = f"FROM memories m WHERE {' AND '.join(where)} ORDER BY {column} <=> {vector} LIMIT {p.add(q.limit)}"
    return ranked_select(shape, p, lead=q.lead, limit=q.limit, score=f"1 - ({column} <=> {vector})",
                         name="similarity", rest=rest, extra=extra)


def _narrows(base: MemoryFilter, f: MemoryFilter) -> bool:
    """Whether f keeps base's rows of some kinds or times only (the preferences and time channels
    beside the vector ones): base's rows narrowed by f's kinds and range are exactly f's."""
    if replace(f, kinds=base.kinds, occurred_after=base.occurred_after, occurred_before=base.occurred_before) != base:
        return False
    if base.kinds and not set(f.kinds or base.kinds) <= set(base.kinds):
        return False
    return not ((base.occurred_after and (f.occurred_after is None or f.occurred_after < base.occurred_after)) or (
        base.occurred_before and (f.occurred_before is None or f.occurred_before > base.occurred_before)))


def _narrowed(scan: str, base: MemoryFilter, f: MemoryFilter, p: Params) -> list[str]:
    """The conditions on a shared scan's rows (of base) that leave those of f, which narrows it."""
    where = []
    if f.kinds != base.kinds:
        where.append(f"{scan}.kind = ANY({p.add([k.value for k in f.kinds])}::text[])")
    if f.occurred_after != base.occurred_after:
        where.append(f"{scan}.occurred_at >= {p.add(f.occurred_after)}")
    if f.occurred_before != base.occurred_before:
        where.append(f"{scan}.occurred_at < {p.add(f.occurred_before)}")
    return where


def _shared_scan(caller: Caller, group: Sequence[tuple[int, VectorQuery]], p: Params, vector, name: str,
                 shape: RowShape) -> list[str]:
    """Queries with the same filter and as_of (the vector, turn-window and last-turn channels of one
    search), or that filter narrowed by kind or time (the preferences and time channels), read its
    rows once: each row's id and its distance to each query, by its own vector and by its window's,
    in one pass (with the kind and time where a query narrows by them); each query takes its nearest
    ids from that and reads the memory columns of just those rows back by id. Alone, each sorted
    the same rows, reading their vectors (TOAST) twice. The scan holds ids and distances only, so a
    filter keeping thousands of rows holds tens of bytes each, where whole rows would hold their
    text too. Every part is an exact sort of the rows the filter keeps: no plan can change its
    answer."""
    base = group[0][1]
    seen = visibility(caller, p)
    columns = sorted({"m.context_embedding" if q.windows else "m.embedding" for _, q in group})
    where = [seen, *filter_clauses(base.filter, p, as_of=base.as_of),
             "(" + " OR ".join(f"{c} IS NOT NULL" for c in columns) + ")"]
    by_kind = any(q.filter.kinds != base.filter.kinds for _, q in group)
    by_time = any((q.filter.occurred_after, q.filter.occurred_before)
                  != (base.filter.occurred_after, base.filter.occurred_before) for _, q in group)
    kept = (", m.kind" if by_kind else "") + (", m.occurred_at" if by_time else "")
    distances = ", ".join(
        f"{'m.context_embedding' if q.windows else 'm.embedding'} <=> {vector(q.vector)} AS d{i}" for i, q in group)
    scan = f"{name} AS MATERIALIZED (SELECT m.id{kept}, {distances} FROM memories m WHERE {' AND '.join(where)})"
    # Read back in the same statement, so under the same snapshot: the rows the scan found, under
    # the same visibility (and row-level security) again, nearest first (numbered, so that rows at
    # the same distance keep the order their sort gave them).
    def lead(q: VectorQuery) -> str:  # a parameter only where the shape reads it
        return f"s.n <= {p.add(q.lead)}" if shape.leads else ""

    def nearest(i: int, q: VectorQuery) -> str:
        conditions = " AND ".join([f"d{i} IS NOT NULL", *_narrowed(name, base.filter, q.filter, p)])
        return f"SELECT id, d{i} AS d FROM {name} WHERE {conditions} ORDER BY d{i} LIMIT {p.add(q.limit)}"

    return [scan, *(f"(SELECT {shape.select(lead(q))}, 1 - s.d AS similarity, {i} AS query"
                    f" FROM (SELECT id, d,"
                    f" row_number() OVER () AS n FROM ({nearest(i, q)}) nearest) s JOIN memories m ON m.id = s.id"
                    f" WHERE {seen} ORDER BY s.n)" for i, q in group)]


def _groups(queries: Sequence[VectorQuery], walk: bool) -> list[list[tuple[int, VectorQuery]]]:
    """The queries that share a scan: the same filter (or it narrowed by kind or time, see
    `_narrows`) and as_of; in a walked tenant only a session's, since its broad queries walk the
    graph instead."""
    groups: list[list[tuple[int, VectorQuery]]] = []
    for i in sorted(range(len(queries)), key=lambda n: _breadth(queries[n].filter)):
        q = queries[i]
        same = next((g for g in groups if (not walk or q.filter.session_id is not None)
                     and g[0][1].as_of == q.as_of and _narrows(g[0][1].filter, q.filter)), None)
        if same is None:
            groups.append([(i, q)])
        else:
            same.append((i, q))
    return groups


def _breadth(f: MemoryFilter) -> int:
    """Fewer kind and time conditions first (the sort is stable), so that a group is led by the
    filter the others narrow."""
    return bool(f.kinds) + bool(f.occurred_after) + bool(f.occurred_before)


def generic_plan_serves(queries: Sequence[VectorQuery]) -> bool:
    """Whether one plan made for any values serves these queries as well as one made for theirs:
    several queries of one session (the conversation an agent searches) sharing one scan. Each part
    is an exact sort of the scan's rows (no plan can change the answer), and the scan finds the
    session's rows by its index whatever the tenant and session. Planning that statement anew cost
    1.4 ms of a search's 5 ms of SQL on LoCoMo (bench/README.md); other statements are planned for
    their values, since a generic plan may walk the HNSW graph where an exact sort was needed."""
    return (len(queries) > 1 and all(q.filter.session_id is not None for q in queries)
            and len(_groups(queries, walk=True)) == 1)


def nearest_statement(caller: Caller, queries: Sequence[VectorQuery], *, walk: bool = False,
                      shape: RowShape = WHOLE) -> tuple[str, Params]:
    """One query is the plain statement (the floor the benchmarks measure Search against is this
    statement). Several are a UNION ALL of the same statements, each keeping its ORDER BY and LIMIT,
    so each still walks its HNSW index (tests/integration/test_search_plans.py); a vector shared by
    several is sent once. Queries with the same filter (or it narrowed by kind or time) and as_of
    share one scan of its rows (`_shared_scan`) in a tenant sorted exactly; in a walked one (walk) only a session's do: its
    broad queries walk the graph instead, and another narrow filter (a user's, a kind's) may keep
    most of a big tenant, which each query's own plan may serve better than a scan of all of it."""
    p = Params()
    placeholders: dict[int, str] = {}

    def vector(v: np.ndarray) -> str:
        if id(v) not in placeholders:
            placeholders[id(v)] = p.add(v)
        return placeholders[id(v)]

    if len(queries) == 1:
        return _select(caller, queries[0], p, vector(queries[0].vector), shape=shape), p
    groups = _groups(queries, walk)
    scans: list[str] = []
    parts: list[str] = []
    for group in groups:
        if len(group) == 1:
            i, q = group[0]
            parts.append(f"({_select(caller, q, p, vector(q.vector), f', {i} AS query', shape)})")
        else:
            scan, *selects = _shared_scan(caller, group, p, vector, f"shared{len(scans)}", shape)
            scans.append(scan)
            parts.extend(selects)
    return ("WITH " + ", ".join(scans) + " " if scans else "") + " UNION ALL ".join(parts), p


def scored_by_query(rows: Sequence[asyncpg.Record], count: int, shape: RowShape = WHOLE) -> list[list[Scored]]:
    """Each query's rows in order; a memory found by several queries is built into a record once
    (building records is the costly part of a channel on the event loop)."""
    found: list[list[Scored]] = [[] for _ in range(count)]
    records: dict[object, tuple[MemoryRecord, bool]] = {}
    for r in rows:
        record, whole = records.get(r["id"]) or (None, False)
        if record is None or (not whole and shape.whole(r)):
            record, whole = records[r["id"]] = shape.build(r), shape.whole(r)
        found[r["query"] if count > 1 else 0].append(Scored(record, float(r["similarity"]), whole))
    return found


def broad(f: MemoryFilter) -> bool:
    """Whether the filter keeps most of the tenant's rows (statuses, scopes and confidence aside),
    so that a walk of the graph filtered by it soon finds enough: the vector channels' usual
    filter, never the time or preferences channels'."""
    return not (f.layers or f.kinds or f.domains or f.agent_id or f.user_id or f.session_id or f.tags
                or f.occurred_after or f.occurred_before or f.entity or f.attribute or f.flagged_for_review)


class Walks:
    """Whether a caller's tenant is big enough for its vector channels to walk the HNSW graph.

    Row-level security repeats the tenant predicate (the policy's `tenant_id = mp_tenant()` and the
    statement's own), and the planner multiplies the two: among many tenants it expects a tenth
    of a big tenant's rows, so it sorts the whole tenant by distance (about 1 s at 65,000 rows)
    instead of walking the graph (a few ms). A tenant of at least `min_memories` stored memories
    (tenant_usage, kept by triggers) and WALK_MIN_SHARE of the table (pg_class.reltuples) has its
    broad queries planned with sorting off, which leaves HNSW as the only way to their order;
    smaller tenants keep the exact plan, which a graph filtered to a few hundred rows of a big
    table could not fill."""

    def __init__(self, min_memories: int) -> None:
        self.min_memories = min_memories
        self._sizes: OrderedDict[str, tuple[bool, float]] = OrderedDict()

    def known_big(self, tenant_id: str | None) -> bool:
        """Whether the tenant was big when its size was last read (False when not read yet): for
        choices that cannot wait for a round trip."""
        known = self._sizes.get(tenant_id) if tenant_id is not None else None
        return known is not None and known[0]

    async def big(self, conn: asyncpg.Connection, tenant_id: str | None) -> bool:
        if tenant_id is None:
            return False
        known = self._sizes.get(tenant_id)
        if known is not None and time.monotonic() - known[1] < SIZE_SECONDS:
            self._sizes.move_to_end(tenant_id)
            return known[0]
        row = await conn.fetchrow(
            "SELECT (SELECT memory_count FROM tenant_usage WHERE tenant_id = $1) AS memories,"
            " (SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass) AS rows", tenant_id)
        memories = row["memories"] or 0
        big = memories >= self.min_memories and memories >= WALK_MIN_SHARE * max(row["rows"], 0)
        self._sizes[tenant_id] = (big, time.monotonic())
        self._sizes.move_to_end(tenant_id)
        while len(self._sizes) > SIZES_KEPT:
            self._sizes.popitem(last=False)
        return big


async def nearest(conn: asyncpg.Connection, caller: Caller, queries: Sequence[VectorQuery], walk: bool,
                  shape: RowShape = WHOLE) -> list[list[Scored]]:
    """Each query's nearest memories. With walk (a big tenant), the broad queries run as one
    statement planned with sorting off, after the others' (the time and preferences channels,
    which their btree indexes serve best, planned as usual); otherwise all run as one."""
    groups = [list(range(len(queries)))]
    if walk:
        walking = [i for i, q in enumerate(queries) if broad(q.filter)]
        groups = [[i for i in range(len(queries)) if i not in walking], walking]
    found: list[list[Scored]] = [[] for _ in queries]
    for n, group in enumerate(groups):
        if not group:
            continue
        if n == 1:  # transaction-local: gone at the session's commit
            await conn.execute("SET LOCAL enable_sort = off")
        sql, p = nearest_statement(caller, [queries[i] for i in group], walk=walk, shape=shape)
        for i, scored in zip(group, scored_by_query(await search_rows(conn, sql, *p.values), len(group), shape)):
            found[i] = scored
    return found
