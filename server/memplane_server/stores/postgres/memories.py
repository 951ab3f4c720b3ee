"""SQL for the memories table and its append-only history."""
from __future__ import annotations

import asyncio
import builtins
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
import numpy as np

from ...core.access.caller import Caller
from ...core.access.requests import RequestKey
from ...core.model import (
    Forgotten,
    HistoryEntry,
    Kind,
    Layer,
    MemoryFilter,
    MemoryRecord,
    MemoryStats,
    Scope,
    Scored,
    Status,
    Trace,
)
from ...core.retrieval.time_expressions import TimeRange
from ...core.write.conflicts import ConflictRule
from ..user_keys import Sealing
from .contexts import WINDOW_KINDS, mark_sessions
from .memory_writes import Stored, StoredDraft, WriteTransaction, append_history, unwindow, update_row
from .replica import ReadPools
from .search.lexical import FactQuery, KeywordQuery, LexicalQuery, lexical
from .search.nearest import VectorQuery, Walks, generic_plan_serves, nearest
from .search.whole_rows import WholeRows, visible_among
from .session import CUSTOM_PLANS, GENERIC_PLANS, SessionAhead, caller_session
from .sql import (
    LEADING,
    MEMORY_COLUMNS,
    WHOLE,
    Params,
    aware,
    filter_clauses,
    record_from_json,
    record_from_row,
    trace_of,
    visibility,
    writable,
)

_MAX_LISTED_IDS = 1000


FETCH_ROWS = 250  # rows decoded per turn of the event loop when a statement reads thousands
E = TypeVar("E", Scope, Layer, Kind, Status)


def _forget_condition(
    caller: Caller, ids: Sequence[uuid.UUID] | None, f: MemoryFilter | None, *, hard: bool, everything: bool
) -> tuple[str, Params]:
    p = Params()
    where = [writable(caller, p)]
    if ids is not None:
        where.append(f"m.id = ANY({p.add(list(ids))}::uuid[])")
    if f is not None:
        # Forget by filter reaches every status that is still there to forget.
        where.extend(filter_clauses(replace(f, statuses=f.statuses or tuple(Status)), p))
    if ids is None and f is None and not everything:
        raise ValueError("forget needs ids, a filter or everything")
    if not hard:
        where.append("m.status <> 'deleted'")
    return " AND ".join(where), p


async def _derived_traces(conn: asyncpg.Connection, ids: Sequence[uuid.UUID]) -> tuple[list[Trace], list[uuid.UUID]]:
    """Memories derived from these, in any tenant (read as the owner: migration 0010), and the ids
    of those now forgotten (before a hard delete: all of them, which its cascade erases)."""
    if not ids:
        return [], []
    rows = await conn.fetch("SELECT * FROM mp_derived($1::uuid[])", list(ids))
    return ([trace_of(r) for r in rows],
            [r["id"] for r in rows if r["status"] == "deleted"])


def _count(counts: dict[E, int], value: E, n: int) -> None:
    counts[value] = counts.get(value, 0) + n


class MemoryStore:
    def __init__(self, pool: asyncpg.Pool, *, default_max_memories: int, walk_min_memories: int = 2000,
                 reads: ReadPools | None = None) -> None:
        self.pool = pool
        self.reads = reads or ReadPools(pool)
        self.default_max_memories = default_max_memories
        self.walks = Walks(walk_min_memories)

    def session(self, caller: Caller, *, plans: str = CUSTOM_PLANS):
        return caller_session(self.pool, caller, plans=plans)

    def read_session(self, caller: Caller, *, plans: str = CUSTOM_PLANS):
        """For statements that only read: on the standby when the current call may read there."""
        return caller_session(self.reads.for_reads(), caller, plans=plans)

    async def insert(
        self, caller: Caller, items: Sequence[StoredDraft], *, embedding_model: str, actor: str,
        dedup_threshold: float, pending_threshold: float, conflicts: ConflictRule | None = None,
        request: RequestKey | None = None, sealing: Sealing | None = None,
    ) -> Stored:
        """Stores all items in one transaction, all or nothing, within quota; an item may come back
        as an existing memory observed again (see memory_writes). With a request key, a request
        stored before is answered with its memories instead of being stored again. sealing: the
        keys new rows are sealed under (none: stored in clear)."""
        async with self.session(caller) as conn:
            tx = WriteTransaction(conn, caller, embedding_model=embedding_model, actor=actor,
                                  dedup_threshold=dedup_threshold, pending_threshold=pending_threshold,
                                  conflicts=conflicts, sealing=sealing)
            return await tx.run(items, self.default_max_memories, request)

    async def prune_write_requests(self, older_than_seconds: float) -> int:
        """Forgets recorded write requests older than the idempotency window (all tenants)."""
        deleted = await self.pool.fetchval(
            "WITH gone AS (DELETE FROM write_requests WHERE created_at < now() - make_interval(secs => $1)"
            " RETURNING 1) SELECT count(*) FROM gone",
            float(older_than_seconds),
        )
        return int(deleted)

    async def get(self, caller: Caller, memory_id: uuid.UUID) -> MemoryRecord | None:
        p = Params(memory_id)
        where = ["m.id = $1", visibility(caller, p)]
        async with self.read_session(caller) as conn:
            row = await conn.fetchrow(f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {' AND '.join(where)}", *p.values)
        return record_from_row(row) if row else None

    async def mark_consolidated(self, caller: Caller, ids: Sequence[uuid.UUID], into: uuid.UUID) -> None:
        """Points writable sources at the consolidated memory that now stands for them."""
        p = Params(list(ids), into)
        async with self.session(caller) as conn:
            await conn.execute(
                f"UPDATE memories m SET consolidated_into = $2 WHERE m.id = ANY($1::uuid[]) AND {writable(caller, p)}",
                *p.values)

    async def sources_of(self, caller: Caller, memory_id: uuid.UUID) -> list[uuid.UUID]:
        """The memories a derived memory (a summary) was built from (migration 0009)."""
        async with self.session(caller) as conn:
            rows = await conn.fetch(
                "SELECT source_id FROM memory_sources WHERE tenant_id = $1 AND memory_id = $2",
                caller.tenant_id, memory_id)
        return [r["source_id"] for r in rows]

    async def get_many(self, caller: Caller, memory_ids: Sequence[uuid.UUID]) -> list[MemoryRecord]:
        """The visible memories among the ids, in no particular order."""
        async with self.read_session(caller) as conn:
            return await visible_among(conn, caller, memory_ids)

    def whole_rows(self, caller: Caller, session: SessionAhead | None = None) -> WholeRows:
        """Whole rows read in more than one step: in `session` (one a search opened for its channels and
        left open), or in a read session opened now."""
        return WholeRows(session or SessionAhead(self.read_session(caller), CUSTOM_PLANS), caller)

    async def list(
        self, caller: Caller, f: MemoryFilter, *, limit: int, after: tuple[datetime, uuid.UUID] | None
    ) -> list[MemoryRecord]:
        p = Params()
        where = [visibility(caller, p), *filter_clauses(f, p)]
        if after is not None:
            where.append(f"(m.created_at, m.id) < ({p.add(after[0])}, {p.add(after[1])})")
        async with self.read_session(caller) as conn:
            rows = await conn.fetch(
                f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {' AND '.join(where)}"
                f" ORDER BY m.created_at DESC, m.id DESC LIMIT {p.add(limit)}",
                *p.values,
            )
        return [record_from_row(r) for r in rows]

    async def vector_search(
        self, caller: Caller, f: MemoryFilter, query: np.ndarray, *, limit: int, as_of: datetime | None,
        windows: bool = False,
    ) -> builtins.list[Scored]:
        """Nearest memories by their own vector, or (windows) by their turn window's."""
        return (await self.vector_searches(caller, [VectorQuery(f, query, limit, as_of, windows)]))[0]

    async def vector_searches(self, caller: Caller, queries: Sequence[VectorQuery], *, candidates: bool = False,
                              ahead: SessionAhead | None = None) -> builtins.list[builtins.list[Scored]]:
        """Several nearest-neighbour searches in one statement and one session (stores/postgres/search/nearest.py),
        `ahead` when one was opened for them (vector_session_ahead); with candidates, each record holds
        only what ranking reads (sql.CANDIDATE_COLUMNS) but those among its query's `lead` nearest, read
        whole."""
        plans = GENERIC_PLANS if generic_plan_serves(queries) else CUSTOM_PLANS

        async def search(conn: asyncpg.Connection) -> list[list[Scored]]:
            if ahead is not None and ahead.plans != plans:  # opened by the filter's likely plan, not this one
                await conn.execute("SELECT set_config('plan_cache_mode', $1, true)", plans)
            return await nearest(conn, caller, queries, await self.walks.big(conn, caller.tenant_id),
                                 LEADING if candidates else WHOLE)
        return await (ahead or SessionAhead(self.read_session(caller, plans=plans), plans)).run(search)

    def vector_session_ahead(self, caller: Caller, f: MemoryFilter) -> SessionAhead:
        """A session for vector_searches under f, opened now."""
        plans = GENERIC_PLANS if f.session_id is not None else CUSTOM_PLANS
        return SessionAhead(self.read_session(caller, plans=plans), plans)

    async def keyword_search(
        self, caller: Caller, f: MemoryFilter, terms: Sequence[str], *, pool: int, as_of: datetime | None,
        limit: int, weights: Mapping[str, float] | None = None, windows: bool = False, common_share: float = 1.0,
    ) -> builtins.list[Scored]:
        """One keyword channel alone (stores/postgres/search/lexical.py)."""
        return (await self.lexical_searches(caller, [KeywordQuery(
            f, terms, pool, as_of, limit, weights, windows=windows, common_share=common_share)]))[0]

    async def fact_lookup(
        self, caller: Caller, f: MemoryFilter, names: Sequence[str], *, limit: int, as_of: datetime | None,
        valid: TimeRange | None = None,
    ) -> builtins.list[Scored]:
        """The exact channel alone (stores/postgres/search/lexical.py)."""
        return (await self.lexical_searches(caller, [FactQuery(f, names, limit, as_of, valid)]))[0]

    async def lexical_searches(self, caller: Caller, queries: Sequence[LexicalQuery], *, candidates: bool = False,
                               ahead: SessionAhead | None = None) -> builtins.list[builtins.list[Scored]]:
        """Several keyword and exact searches in one statement and one session (stores/postgres/search/lexical.py);
        candidates as for vector_searches. In `ahead` (lexical_session_ahead) when given, left open for
        its owner to read more in and close."""
        session = ahead or self.lexical_session_ahead(caller)
        return await session.run(lambda conn: lexical(conn, caller, queries, LEADING if candidates else WHOLE),
                                 last=ahead is None)

    def lexical_session_ahead(self, caller: Caller) -> SessionAhead:
        """A session for lexical_searches, opened now."""
        # Their plans do not depend on the tenant's size (a function's matches, then ids and keys on
        # their indexes): planned once per connection. `auto` kept planning the statement whenever it
        # held the facts' part, whose generic estimate looks dearer (the same plan): 2.2 ms a search.
        return SessionAhead(self.read_session(caller, plans=GENERIC_PLANS), GENERIC_PLANS)

    async def mark_used(
        self, caller: Caller, ids: Sequence[uuid.UUID] | Mapping[uuid.UUID, int], *, at: datetime | None = None,
    ) -> None:
        """Usage counters (ids: each used once, or how often each was used; at: the time of the last
        use, now when None); only rows the caller may change (a read-only domain member's hits stay
        as they are)."""
        uses = ids if isinstance(ids, Mapping) else dict.fromkeys(ids, 1)
        if uses:
            p = Params(list(uses), list(uses.values()), at)
            async with self.session(caller) as conn:
                # Counters are best effort: rows another transaction holds (a forget deleting them,
                # in its own order) are skipped, not waited for, so the two never deadlock.
                await conn.execute(
                    f"UPDATE memories m SET last_used_at = coalesce($3::timestamptz, now()), use_count = use_count + u.n"
                    f" FROM unnest($1::uuid[], $2::int[]) AS u(id, n)"
                    f" WHERE m.id = u.id AND m.id IN (SELECT l.id FROM memories l WHERE l.id = ANY($1::uuid[]) ORDER BY l.id"
                    f" FOR UPDATE SKIP LOCKED) AND {writable(caller, p)}",
                    *p.values,
                )

    async def update(
        self,
        caller: Caller,
        memory_id: uuid.UUID,
        changes: dict[str, Any],
        *,
        embedding: tuple[np.ndarray, str] | None,
        keywords: str | None,
        action: str,
        actor: str,
        reason: str = "",
        entities: builtins.list[str] | None = None, sealing: Sealing | None = None,
    ) -> MemoryRecord | None:
        """Changes one writable memory and records the change; None when not writable. sealing: the
        keys a memory given to another user moves to."""
        async with self.session(caller) as conn:
            return await update_row(conn, caller, memory_id, changes, embedding=embedding, keywords=keywords,
                                 action=action, actor=actor, reason=reason, entities=entities, sealing=sealing)

    async def apply_task_outcome(
        self, caller: Caller, memory_id: uuid.UUID, *, task_id: str, outcome: str, changes: dict[str, Any],
        actor: str, reason: str,
    ) -> MemoryRecord | None:
        """Changes a memory for one task's outcome, once: the same task reported again (a retried
        job, a repeated SubmitFeedback) returns the memory unchanged. None when not writable."""
        async with self.session(caller) as conn:
            first = await conn.fetchval(
                "INSERT INTO task_outcomes (tenant_id, task_id, memory_id, outcome) VALUES ($1, $2, $3, $4)"
                " ON CONFLICT DO NOTHING RETURNING true",
                caller.tenant_id, task_id, memory_id, outcome,
            )
            if not first:
                p = Params(memory_id)
                row = await conn.fetchrow(
                    f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1 AND {writable(caller, p)}", *p.values)
                return record_from_row(row) if row else None
            return await update_row(conn, caller, memory_id, changes, embedding=None, keywords=None, action="feedback",
                                 actor=actor, reason=reason)

    async def supersede(
        self, caller: Caller, old_ids: Sequence[uuid.UUID], *, action: str, actor: str, reason: str
    ) -> builtins.list[MemoryRecord]:
        """Marks writable memories superseded (kept for history)."""
        p = Params(list(old_ids))
        async with self.session(caller) as conn:
            rows = await conn.fetch(
                f"UPDATE memories m SET status = 'superseded', updated_at = clock_timestamp()"
                f" WHERE m.id = ANY($1::uuid[]) AND m.status <> 'superseded' AND {writable(caller, p)}"
                f" RETURNING {MEMORY_COLUMNS}",
                *p.values,
            )
            records = [record_from_row(r) for r in rows]
            await append_history(conn, records, action, actor, reason)
            await unwindow(conn, records)
        return records

    async def forget(
        self,
        caller: Caller,
        *,
        ids: Sequence[uuid.UUID] | None,
        f: MemoryFilter | None,
        hard: bool,
        dry_run: bool,
        actor: str,
        reason: str,
    ) -> tuple[int, builtins.list[uuid.UUID]]:
        """Soft- or hard-deletes writable memories selected by ids or filter."""
        done = await self.forget_traced(caller, ids=ids, f=f, hard=hard, dry_run=dry_run, actor=actor, reason=reason)
        return done.count, done.ids

    async def forget_traced(
        self,
        caller: Caller,
        *,
        ids: Sequence[uuid.UUID] | None,
        f: MemoryFilter | None,
        hard: bool,
        dry_run: bool,
        actor: str,
        reason: str,
        everything: bool = False,
    ) -> Forgotten:
        """As forget, with the traces of what it forgot and of what was derived from that (which the
        database forgets with it: migration 0010), for the caches to drop."""
        cond, p = _forget_condition(caller, ids, f, hard=hard, everything=everything)
        async with self.session(caller) as conn:
            if dry_run:
                rows = await conn.fetch(f"SELECT m.id FROM memories m WHERE {cond} ORDER BY m.created_at", *p.values)
                return Forgotten(len(rows), [r["id"] for r in rows][:_MAX_LISTED_IDS])
            if hard:
                rows = await conn.fetch(
                    f"SELECT m.tenant_id, m.id, m.session_id, m.user_id, m.kind, m.content, m.sealed_key FROM memories m"
                    f" WHERE {cond} ORDER BY m.id FOR UPDATE", *p.values
                )
                ids_ = [r["id"] for r in rows]
                traces = [trace_of(r) for r in rows]
                derived, _ = await _derived_traces(conn, ids_)
                traces += derived
                # Hard delete is erasure. Its trigger (0024) deletes the rows' history and links, logs
                # their Watch events, erases what was derived from them and scrubs the jobs naming them.
                await conn.execute("DELETE FROM memories m WHERE m.id = ANY($1::uuid[])", ids_)
                await mark_sessions(
                    conn, [(r["tenant_id"], r["session_id"]) for r in rows if r["kind"] in WINDOW_KINDS], clear=True
                )
                return Forgotten(len(rows), ids_[:_MAX_LISTED_IDS], traces, [t.id for t in derived])
            # A forgotten turn's own window is emptied here, in its one new row version, rather than
            # by unwindow's UPDATE after it (which then finds only the session's other turns).
            windowed = f"m.kind = ANY({p.add(list(WINDOW_KINDS))}::text[])"
            rows = await conn.fetch(
                f"UPDATE memories m SET status = 'deleted', updated_at = clock_timestamp(),"
                f" context_embedding = CASE WHEN {windowed} THEN NULL ELSE m.context_embedding END,"
                f" context_keywords = CASE WHEN {windowed} THEN ''::tsvector ELSE m.context_keywords END,"
                f" context_of = CASE WHEN {windowed} THEN '' ELSE m.context_of END"
                f" WHERE {cond} RETURNING {MEMORY_COLUMNS}",
                *p.values,
            )
            records = [record_from_row(r) for r in rows]
            await append_history(conn, records, "deleted", actor, reason)
            await unwindow(conn, records)
            traces = [Trace(r.tenant_id, r.stored_id, r.session_id, r.user_id, r.content) for r in records]
            derived, cascaded = await _derived_traces(conn, [r.stored_id for r in records])
            return Forgotten(len(records), [r.stored_id for r in records][:_MAX_LISTED_IDS], traces + derived, cascaded)

    async def forget_targets(
        self, caller: Caller, f: MemoryFilter, *, hard: bool, everything: bool = False
    ) -> builtins.list[tuple[uuid.UUID, tuple[str, str | None]]]:
        """The ids a forget by filter would reach now with their (tenant, session), a session's
        together (services/forget/service.py batches them by session)."""
        cond, p = _forget_condition(caller, None, f, hard=hard, everything=everything)
        async with self.session(caller) as conn:
            return [(r["id"], (r["tenant_id"], r["session_id"])) for r in await conn.fetch(
                f"SELECT m.id, m.tenant_id, m.session_id FROM memories m WHERE {cond}"
                f" ORDER BY m.tenant_id, m.session_id, m.id", *p.values)]

    async def history(
        self,
        caller: Caller,
        *,
        memory_id: uuid.UUID | None,
        entity: str | None,
        attribute: str | None,
        limit: int,
        before_seq: int | None,
    ) -> builtins.list[tuple[int, HistoryEntry]]:
        """History rows of memories the caller can see now, newest first."""
        p = Params()
        where = [visibility(caller, p)]
        if memory_id is not None:
            where.append(f"h.memory_id = {p.add(memory_id)}")
        if entity is not None:
            where.append(f"h.snapshot->>'entity' = {p.add(entity)}")
            where.append(f"m.tenant_id = {p.add(caller.tenant_id)}")
        if attribute:
            where.append(f"h.snapshot->>'attribute' = {p.add(attribute)}")
        if before_seq is not None:
            where.append(f"h.seq < {p.add(before_seq)}")
        async with self.session(caller) as conn:
            rows = await conn.fetch(
                f"SELECT h.seq, h.memory_id, h.action, h.snapshot, h.actor, h.reason, h.changed_at"
                f" FROM memory_history h JOIN memories m ON m.tenant_id = h.tenant_id AND m.id = h.memory_id"
                f" WHERE {' AND '.join(where)} ORDER BY h.seq DESC LIMIT {p.add(limit)}",
                *p.values,
            )
        return [
            (
                r["seq"],
                HistoryEntry(
                    memory_id=r["memory_id"], action=r["action"], snapshot=record_from_json(r["snapshot"]),
                    changed_at=r["changed_at"], actor=r["actor"], reason=r["reason"],
                ),
            )
            for r in rows
        ]

    async def stats(self, caller: Caller, f: MemoryFilter) -> MemoryStats:
        p = Params()
        where = " AND ".join([visibility(caller, p), *filter_clauses(f, p)])
        async with self.session(caller) as conn:
            rows = await conn.fetch(
                f"SELECT m.scope, m.layer, m.kind, m.status, count(*) AS n, max(m.occurred_at) AS newest"
                f" FROM memories m WHERE {where} GROUP BY m.scope, m.layer, m.kind, m.status",
                *p.values,
            )
        by_scope: dict[Scope, int] = {}
        by_layer: dict[Layer, int] = {}
        by_kind: dict[Kind, int] = {}
        by_status: dict[Status, int] = {}
        newest: datetime | None = None
        for r in rows:
            _count(by_scope, Scope(r["scope"]), r["n"])
            _count(by_layer, Layer(r["layer"]), r["n"])
            _count(by_kind, Kind(r["kind"]), r["n"])
            _count(by_status, Status(r["status"]), r["n"])
            group_newest = aware(r["newest"])
            if newest is None or group_newest > newest:
                newest = group_newest
        return MemoryStats(total=sum(r["n"] for r in rows), by_scope=by_scope, by_layer=by_layer, by_kind=by_kind,
                           by_status=by_status, newest=newest)

    async def embeddings_of(
        self, caller: Caller, f: MemoryFilter, *, limit: int, to_consolidate: bool = False,
    ) -> tuple[builtins.list[tuple[MemoryRecord, np.ndarray]], int]:
        """The newest `limit` visible memories matching f with their vectors, oldest first, in one
        statement, and how many matched in all. to_consolidate: only those the caller may change
        that are neither consolidated nor a consolidation, so that the limit counts candidates."""
        p = Params()
        clauses = [visibility(caller, p), *filter_clauses(f, p), "m.embedding IS NOT NULL"]
        if to_consolidate:
            clauses += [writable(caller, p), "m.consolidated_into IS NULL",
                        "m.source_type IS DISTINCT FROM 'consolidation'"]
        rows: list[asyncpg.Record] = []
        async with self.session(caller) as conn:
            cursor = await conn.cursor(
                f"SELECT {MEMORY_COLUMNS}, m.embedding, count(*) OVER () AS matched FROM memories m"
                f" WHERE {' AND '.join(clauses)} ORDER BY m.created_at DESC, m.id DESC LIMIT {p.add(limit)}",
                *p.values,
            )
            # Decoding 5,000 rows at once held the event loop for ~60 ms: a few hundred at a time, other calls between.
            while batch := await cursor.fetch(FETCH_ROWS):
                rows += batch
        # Thousands of records: built in a thread, or the event loop stalls for each call's ~0.1 s.
        built = await asyncio.to_thread(
            lambda: [(record_from_row(r), r["embedding"].to_numpy().astype(np.float32)) for r in reversed(rows)])
        return built, rows[0]["matched"] if rows else 0
