"""The write transaction: quota, per-fact and per-kind locks, then for each item one of
re-observe (merged into a memory stating the same thing), supersede (a new value of the same
entity/attribute of the same user), hold back (it contradicts a confident value) or a plain
insert. All in the caller's RLS session. And the
change of one memory's fields (UpdateMemory, a task's outcome), sealed as its row is."""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import asyncpg
import numpy as np

from ...core.access.caller import Caller
from ...core.access.requests import RequestKey
from ...core.model import UPDATABLE_FIELDS, MemoryDraft, MemoryRecord, Scope, Status
from ...core.write.conflicts import ConflictRule, conflict_reason
from ...core.write.observations import DEDUP_KINDS, reobserved_confidence, sameness, statement_key, write_lock
from ...core.write.outcomes import CREATED, REPLAYED, ItemOutcome, Outcome
from ..sealing import Texts, open_texts, seal
from ..user_keys import Sealing
from .content.user_keys import lock_users
from .contexts import WINDOW_KINDS, mark_sessions, marked_sessions
from .sql import MEMORY_COLUMNS, Params, record_from_row, record_to_json, writable

# Near-duplicates by embedding that are checked for stating the same (core/write/observations.statement_key):
# enough that a repeat is found among a few one-word variants of it ("on"/"off" embed closer than "ON").
NEAREST_CHECKED = 16


@dataclass(frozen=True)
class StoredDraft:
    """A draft with what the service computed for it."""

    draft: MemoryDraft
    embedding: np.ndarray
    keywords: str
    status: Status
    occurred_at: datetime
    entities: tuple[str, ...] = ()  # core/write/entities.py, for the entity index (migration 0017)


class RequestReused(Exception):
    """The caller's request_id was recorded with a different request."""


@dataclass(frozen=True)
class Stored:
    records: list[MemoryRecord]
    outcomes: list[ItemOutcome]  # one per record
    replayed: bool  # the request had been stored before: these are its memories as they are now


class SourceGone(Exception):
    """A memory the draft is derived from was forgotten since it was read."""


class QuotaExceeded(Exception):
    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"{count} stored, limit {limit}")
        self.count = count
        self.limit = limit


def _source(d: MemoryDraft) -> list[dict]:
    return [{"type": d.source_type, "id": d.source_id}] if d.source_type or d.source_id else []


def same_space(caller: Caller, d: MemoryDraft, p: Params) -> str:
    """Memories in the same scope and owner as the draft (a domain spans its member tenants)."""
    assert d.scope is not None
    parts = [f"m.scope = {p.add(d.scope.value)}", writable(caller, p), "m.status IN ('active', 'pending')"]
    if d.scope is Scope.DOMAIN:
        parts.append(f"m.domain = {p.add(d.domain)}")
    else:
        parts.append(f"m.tenant_id = {p.add(caller.tenant_id)}")
        if d.scope is Scope.PRIVATE:
            parts.append(f"m.agent_id = {p.add(d.agent_id)}")
    return " AND ".join(parts)


# History rows ($1 tenants, $2 memory ids, $3 actions, $4 snapshots, $6 reasons; $5 the actor) in
# one statement, not one per row: its trigger then logs the changes once (migration 0019).
HISTORY_ROWS = (
    "INSERT INTO memory_history (tenant_id, memory_id, action, snapshot, actor, reason)"
    " SELECT h.tenant_id, h.memory_id, h.action, h.snapshot, $5::text, h.reason"
    " FROM unnest($1::text[], $2::uuid[], $3::text[], $4::jsonb[], $6::text[]) WITH ORDINALITY"
    " AS h(tenant_id, memory_id, action, snapshot, reason, n) ORDER BY h.n"
)


def history_args(entries: Sequence[tuple[MemoryRecord, str, str]], actor: str) -> list[Any]:
    """HISTORY_ROWS's six parameters for (record, action, reason) entries."""
    return [[r.tenant_id for r, _, _ in entries], [r.id for r, _, _ in entries], [a for _, a, _ in entries],
            [record_to_json(r) for r, _, _ in entries], actor, [why for _, _, why in entries]]


async def append_history(
    conn: asyncpg.Connection, records: Sequence[MemoryRecord], action: str, actor: str, reason: str
) -> None:
    if records:
        await conn.execute(HISTORY_ROWS, *history_args([(r, action, reason) for r in records], actor))


def statement(user_id: str | None, content: str, value: str | None) -> tuple[str | None, str, str]:
    """What a memory states and about whom: two memories merge only when these are equal ("likes
    tea" of one user is not another's)."""
    return user_id, statement_key(content), statement_key(value)


class WriteTransaction:
    def __init__(self, conn: asyncpg.Connection, caller: Caller, *, embedding_model: str, actor: str,
                 dedup_threshold: float, pending_threshold: float, conflicts: ConflictRule | None,
                 sealing: Sealing | None = None) -> None:
        self.conn, self.caller, self.model, self.actor = conn, caller, embedding_model, actor
        self.sealing = sealing or Sealing(None)
        self.user_keys: dict[str, bytes] = {}
        self.dedup_threshold, self.pending_threshold = dedup_threshold, pending_threshold
        self.conflicts = conflicts
        self.inserted = 0
        # (record, action, reason) in the order they happened, written with the batch's last statement.
        self.history: list[tuple[MemoryRecord, str, str]] = []

    async def run(self, items: Sequence[StoredDraft], default_cap: int, request: RequestKey | None) -> Stored:
        users = sorted({s.draft.user_id for s in items if s.draft.user_id})
        if users and self.sealing.users is not None:
            # First, so an erasure of one of these users waits for this write or this write for it:
            # never a row sealed under a key the erasure has just destroyed.
            assert self.caller.tenant_id is not None
            await lock_users(self.conn, self.caller.tenant_id, users, exclusive=False)
            self.user_keys = await self.sealing.for_users(self.caller.tenant_id, users)
        if request is not None and not await self._record_request(request):
            recorded = await self._recorded(request)
            return Stored(recorded, [REPLAYED] * len(recorded), replayed=True)
        stored = await self._store(items, default_cap)
        records = [record for record, _ in stored]
        await self._finish(records, request)
        return Stored(records, [outcome for _, outcome in stored], replayed=False)

    async def _finish(self, records: list[MemoryRecord], request: RequestKey | None) -> None:
        """One statement for what the batch leaves besides its rows: their history in the order it
        happened (one row per change, its trigger logging the changes once), their sessions queued
        for windows, and the request's memories. As a statement each, they were three round trips
        of a single write's nine, and a batch of 64 sent 64 history rows one by one (bench/README.md)."""
        sessions = marked_sessions([(r.tenant_id, r.session_id) for r in records if r.kind.value in WINDOW_KINDS])
        await self.conn.execute(
            f"WITH history AS ({HISTORY_ROWS}),"
            " request AS (UPDATE write_requests SET memory_ids = $9 WHERE tenant_id = $10 AND request_key = $11)"
            " SELECT mp_mark_context($7::text[], $8::text[], false) WHERE cardinality($7::text[]) > 0",
            *history_args(self.history, self.actor), [t for t, _ in sessions], [s for _, s in sessions],
            [r.id for r in records], self.caller.tenant_id, request.key if request is not None else None,
        )

    async def _record_request(self, request: RequestKey) -> bool:
        """Records the request in this transaction; False when it was recorded (committed) before.
        A concurrent twin waits here for the first to commit or roll back."""
        inserted = await self.conn.fetchval(
            "INSERT INTO write_requests (tenant_id, request_key, fingerprint) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING RETURNING true",
            self.caller.tenant_id, request.key, request.fingerprint,
        )
        return bool(inserted)

    async def _recorded(self, request: RequestKey) -> list[MemoryRecord]:
        row = await self.conn.fetchrow(
            "SELECT fingerprint, memory_ids FROM write_requests WHERE tenant_id = $1 AND request_key = $2",
            self.caller.tenant_id, request.key,
        )
        if row["fingerprint"] != request.fingerprint:
            raise RequestReused()
        rows = await self.conn.fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.tenant_id = $1 AND m.id = ANY($2::uuid[])",
            self.caller.tenant_id, row["memory_ids"],
        )
        by_id = {r["id"]: record_from_row(r) for r in rows}
        # A memory hard-forgotten since is gone from the answer, as it is from the store.
        return [by_id[i] for i in row["memory_ids"] if i in by_id]

    async def _store(self, items: Sequence[StoredDraft], default_cap: int) -> list[tuple[MemoryRecord, ItemOutcome]]:
        sources = sorted({source for s in items for source in s.draft.derived_from})
        # Locks the sources until commit (before the quota row, which a forget's delete takes after
        # its rows): a forget of one waits, then its cascade reaches what is derived here.
        if sources and not await self.conn.fetchval("SELECT mp_sources_alive($1::uuid[])", sources):
            raise SourceGone()
        usage = await self.conn.fetchrow(
            # The row lock serialises a tenant's concurrent writers on the quota check.
            "SELECT u.memory_count, coalesce(nullif(t.max_memories, 0), $2) AS cap"
            " FROM tenant_usage u JOIN tenants t ON t.id = u.tenant_id WHERE u.tenant_id = $1 FOR UPDATE OF u",
            self.caller.tenant_id, default_cap,
        )
        count, cap = (usage["memory_count"], usage["cap"]) if usage else (0, default_cap)
        locks = sorted({k for s in items if (k := write_lock(self.caller.tenant_id or "", s.draft)) is not None})
        for key in locks:  # sorted, so two batches never wait on each other in a cycle
            await self.conn.execute("SELECT pg_advisory_xact_lock($1)", key)
        records = [await self._one(s) for s in items]
        if cap and count + self.inserted > cap:
            raise QuotaExceeded(count, cap)
        return records

    async def _one(self, s: StoredDraft) -> tuple[MemoryRecord, ItemOutcome]:
        d = s.draft
        says = statement(d.user_id, d.content, d.value)
        if d.entity and d.attribute:
            current = await self._current_fact(d)
            if current is not None and says == statement(current.user_id, current.content, current.value):
                return await self._reobserve(current, s), self._merged(current, d)
            if current is not None and self.conflicts and (
                    why := conflict_reason(current, d, datetime.now(timezone.utc), self.conflicts)):
                if (same := await self._open_challenger(current, says)) is not None:
                    return await self._reobserve(same, s), self._merged(same, d)
                record = await self._insert(s, replaces=None, contradicts=(current, why))
                return record, ItemOutcome(Outcome.NEEDS_CONFIRMATION, str(current.id), why)
            record = await self._insert(s, replaces=current)
            if current is None:
                return record, CREATED
            return record, ItemOutcome(Outcome.SUPERSEDED, str(current.id), f"a new value of {d.entity}.{d.attribute}")
        if d.kind in DEDUP_KINDS:
            # The nearest by embedding are only candidates: texts that differ in one small word
            # ("on"/"off", "to"/"from") embed above the threshold, so a merge needs the same statement.
            for twin in await self._nearest(s):
                if says == statement(twin.user_id, twin.content, twin.value):
                    return await self._reobserve(twin, s), self._merged(twin, d)
        return await self._insert(s, replaces=None), CREATED

    @staticmethod
    def _merged(into: MemoryRecord, d: MemoryDraft) -> ItemOutcome:
        return ItemOutcome(Outcome.MERGED, str(into.id), f"{sameness(into.content, d.content)} as memory {into.id}")

    async def _current_fact(self, d: MemoryDraft) -> MemoryRecord | None:
        p = Params()
        row = await self.conn.fetchrow(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {same_space(self.caller, d, p)}"
            f" AND m.entity = {p.add(d.entity)} AND m.attribute = {p.add(d.attribute)}"
            # One user's city is not another's: a value for u2 neither supersedes nor re-observes u1's.
            f" AND m.user_id IS NOT DISTINCT FROM {p.add(d.user_id)}"
            " AND m.status <> 'needs_confirmation' ORDER BY m.created_at DESC LIMIT 1",
            *p.values,
        )
        return record_from_row(row) if row else None

    async def _open_challenger(self, current: MemoryRecord, says: tuple[str | None, str, str]) -> MemoryRecord | None:
        """A value already waiting for confirmation against current that states what `says` does."""
        rows = await self.conn.fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.conflicts_with = $1 AND m.status = 'needs_confirmation'",
            current.id,
        )
        return next((r for r in map(record_from_row, rows) if statement(r.user_id, r.content, r.value) == says), None)

    async def _nearest(self, s: StoredDraft) -> list[MemoryRecord]:
        """The closest memories of the draft's kind and space above the near-duplicate threshold, closest first."""
        assert s.draft.kind is not None, "set by the write service's prepare"
        # A memory derived from others (a consolidation of them) never merges into one of them.
        p = Params(s.embedding, list(s.draft.derived_from))
        rows = await self.conn.fetch(
            f"SELECT {MEMORY_COLUMNS}, 1 - (m.embedding <=> $1) AS similarity FROM memories m"
            f" WHERE {same_space(self.caller, s.draft, p)} AND m.kind = {p.add(s.draft.kind.value)}"
            f" AND m.entity IS NULL AND m.id <> ALL($2::uuid[]) ORDER BY m.embedding <=> $1 LIMIT {p.add(NEAREST_CHECKED)}",
            *p.values,
        )
        return [record_from_row(row) for row in rows if row["similarity"] >= self.dedup_threshold]

    async def _reobserve(self, existing: MemoryRecord, s: StoredDraft) -> MemoryRecord:
        confidence = reobserved_confidence(existing.confidence, s.draft.confidence)
        status = existing.status
        if status is Status.PENDING and confidence >= self.pending_threshold:
            status = Status.ACTIVE
        row = await self.conn.fetchrow(
            f"UPDATE memories m SET confidence = $2, status = $3, sources = m.sources || $4::jsonb,"
            f" updated_at = clock_timestamp() WHERE m.id = $1 RETURNING {MEMORY_COLUMNS}",
            existing.id, confidence, status.value, _source(s.draft),
        )
        record = record_from_row(row)
        # Not linked to the draft's sources: the memory stands on its own observation already, and
        # forgetting the new source must not take it away.
        self.history.append((record, "reobserved", "observed again"))
        return record

    async def _link_sources(self, record: MemoryRecord, sources: Sequence[uuid.UUID]) -> None:
        """Records what the memory was derived from (forgetting one of them reaches it)."""
        if sources:
            await self.conn.executemany(
                "INSERT INTO memory_sources (tenant_id, memory_id, source_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                [(record.tenant_id, record.id, source) for source in dict.fromkeys(sources)],
            )

    async def _insert(self, s: StoredDraft, *, replaces: MemoryRecord | None,
                      contradicts: tuple[MemoryRecord, str] | None = None) -> MemoryRecord:
        d = s.draft
        assert d.scope is not None and d.layer is not None and d.kind is not None, "set by the write service's prepare"
        valid_from = d.valid_from
        if d.entity and d.attribute and valid_from is None:
            valid_from = s.occurred_at  # a fact holds from when it was observed until replaced
        sources = _source(d)
        assert self.caller.tenant_id is not None
        key = self.user_keys.get(d.user_id or "", self.sealing.tenant)
        texts = seal(key, self.caller.tenant_id, Texts(d.content, d.context, d.value, d.metadata))
        columns = {
            "tenant_id": self.caller.tenant_id, "id": uuid.uuid4(), "scope": d.scope.value, "domain": d.domain,
            "agent_id": d.agent_id, "user_id": d.user_id, "session_id": d.session_id, "layer": d.layer.value,
            "kind": d.kind.value, "content": texts.content, "context": texts.context, "entity": d.entity,
            "attribute": d.attribute, "value": texts.value, "tags": list(d.tags), "metadata": texts.metadata,
            "sealed_key": key,
            "confidence": d.confidence, "status": s.status.value, "supersedes": replaces.id if replaces else None,
            "source_type": d.source_type, "source_id": d.source_id, "occurred_at": s.occurred_at,
            "valid_from": valid_from, "valid_to": d.valid_to, "embedding": s.embedding,
            "embedding_model": self.model, "sources": sources,
            "conflicts_with": contradicts[0].id if contradicts else None, "entities": list(s.entities),
        }
        if contradicts:
            columns["status"] = Status.NEEDS_CONFIRMATION.value
        p = Params()
        values = [p.add(v) for v in columns.values()]
        row = await self.conn.fetchrow(
            f"INSERT INTO memories AS m ({', '.join(columns)}, keywords)"
            f" VALUES ({', '.join(values)}, to_tsvector('simple', {p.add(s.keywords)})) RETURNING {MEMORY_COLUMNS}",
            *p.values,
        )
        record = record_from_row(row)
        self.inserted += 1
        self.history.append((record, "created", f"contradicts {contradicts[0].id}: {contradicts[1]}" if contradicts else ""))
        await self._link_sources(record, d.derived_from)
        if replaces is not None:
            retired = await self.conn.fetchrow(
                f"UPDATE memories m SET status = 'superseded', valid_to = coalesce(m.valid_to, $2),"
                f" updated_at = clock_timestamp() WHERE m.id = $1 RETURNING {MEMORY_COLUMNS}",
                replaces.id, valid_from or s.occurred_at,
            )
            self.history.append((record_from_row(retired), "superseded", f"replaced by {record.id}"))
        return record


def _opened(row: asyncpg.Record) -> dict[str, Any]:
    texts = open_texts(row["sealed_key"], row["tenant_id"],
                       Texts(row["content"], row["context"], row["value"], row["metadata"]))
    return {"content": texts.content, "context": texts.context, "value": texts.value, "metadata": texts.metadata}


async def unwindow(conn: asyncpg.Connection, changed: Sequence[MemoryRecord]) -> None:
    """Windows holding a changed or forgotten turn's text are emptied and queued for rebuilding."""
    await mark_sessions(conn, [(r.tenant_id, r.session_id) for r in changed if r.kind.value in WINDOW_KINDS], clear=True)


_TEXT_FIELDS = ("content", "context", "value", "metadata")


async def update_row(
    conn: asyncpg.Connection, caller: Caller, memory_id: uuid.UUID, changes: dict[str, Any], *,
    embedding: tuple[np.ndarray, str] | None, keywords: str | None, action: str, actor: str, reason: str,
    entities: list[str] | None = None, sealing: Sealing | None = None,
) -> MemoryRecord | None:
    p = Params(memory_id)
    sets = ["updated_at = clock_timestamp()"]
    texts = [name for name in _TEXT_FIELDS if name in changes]
    if texts or "user_id" in changes:
        # Sealed under the key the row's other texts are sealed under, which the row keeps: locked,
        # so that a re-seal cannot move the row to another key in between. A memory given to
        # another user moves to that user's key whole: erasing the user it was about before must
        # not reach it, erasing its new user must.
        current = await conn.fetchrow(
            "SELECT tenant_id, sealed_key, user_id, content, context, value, metadata FROM memories"
            " WHERE id = $1 FOR UPDATE", memory_id)
        if current is None:
            return None
        key = current["sealed_key"]
        if sealing is not None and sealing.users is not None and changes.get("user_id", current["user_id"]) != current["user_id"]:
            texts = list(_TEXT_FIELDS)
            changes = {**_opened(current), **changes}
            key = sealing.tenant
            if user := changes["user_id"]:
                await lock_users(conn, current["tenant_id"], [user], exclusive=False)
                key = (await sealing.for_users(current["tenant_id"], [user]))[user]
            sets.append(f"sealed_key = {p.add(key)}")
        if texts:
            sealed = seal(key, current["tenant_id"], Texts(
                changes.get("content", ""), changes.get("context", ""), changes.get("value"),
                changes.get("metadata") or {}))
            changes = {**changes, **{name: getattr(sealed, name) for name in texts}}
    for column, value in changes.items():
        if column not in UPDATABLE_FIELDS:
            raise ValueError(f"not updatable: {column}")
        sets.append(f"{column} = {p.add(value)}")
    if embedding is not None:
        sets.append(f"embedding = {p.add(embedding[0])}, embedding_model = {p.add(embedding[1])}")
    if keywords is not None:
        sets.append(f"keywords = to_tsvector('simple', {p.add(keywords)})")
    if entities is not None:
        sets.append(f"entities = {p.add(list(entities))}::text[]")
    row = await conn.fetchrow(
        f"UPDATE memories m SET {', '.join(sets)} WHERE m.id = $1 AND {writable(caller, p)}"
        f" RETURNING {MEMORY_COLUMNS}",
        *p.values,
    )
    if row is None:
        return None
    record = record_from_row(row)
    await append_history(conn, [record], action, actor, reason)
    await unwindow(conn, [record])
    return record
