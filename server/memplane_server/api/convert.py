"""Protobuf <-> domain translation for memories, filters and search hits."""
from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

from google.protobuf import struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from memplane.v1 import memory_pb2 as pb
from memplane.v1 import memory_service_pb2 as spb

from ..core.changes import ChangeEvent, ChangeFilter, ChangeKind
from ..core.errors import invalid
from ..core.model import HistoryEntry, Kind, Layer, MemoryDraft, MemoryFilter, MemoryRecord, Scope, SearchHit, Status
from ..core.validation import check_filter, check_metadata, check_time, check_ttl
from ..core.write.outcomes import ItemOutcome, Outcome

E = TypeVar("E")
K = TypeVar("K", bound=int)  # the numbers of one protobuf enum, which its stubs type apart from int
D = TypeVar("D", bound=enum.Enum)
log = logging.getLogger(__name__)

SCOPES = {pb.SCOPE_GLOBAL: Scope.GLOBAL, pb.SCOPE_DOMAIN: Scope.DOMAIN, pb.SCOPE_PRIVATE: Scope.PRIVATE}
LAYERS = {pb.LAYER_WORKING: Layer.WORKING, pb.LAYER_EPISODIC: Layer.EPISODIC,
          pb.LAYER_SEMANTIC: Layer.SEMANTIC, pb.LAYER_PROCEDURAL: Layer.PROCEDURAL}
KINDS = {pb.KIND_TURN: Kind.TURN, pb.KIND_EVENT: Kind.EVENT, pb.KIND_FACT: Kind.FACT,
         pb.KIND_PREFERENCE: Kind.PREFERENCE, pb.KIND_PROCEDURE: Kind.PROCEDURE, pb.KIND_LESSON: Kind.LESSON,
         pb.KIND_SUMMARY: Kind.SUMMARY}
STATUSES = {pb.MEMORY_STATUS_ACTIVE: Status.ACTIVE, pb.MEMORY_STATUS_PENDING: Status.PENDING,
            pb.MEMORY_STATUS_SUPERSEDED: Status.SUPERSEDED, pb.MEMORY_STATUS_DELETED: Status.DELETED,
            pb.MEMORY_STATUS_STALE: Status.STALE, pb.MEMORY_STATUS_NEEDS_CONFIRMATION: Status.NEEDS_CONFIRMATION,
            pb.MEMORY_STATUS_ARCHIVED: Status.ARCHIVED}
HISTORY_ACTIONS = {"created": spb.HISTORY_ACTION_CREATED, "updated": spb.HISTORY_ACTION_UPDATED,
                   "superseded": spb.HISTORY_ACTION_SUPERSEDED, "merged": spb.HISTORY_ACTION_MERGED,
                   "deleted": spb.HISTORY_ACTION_DELETED, "restored": spb.HISTORY_ACTION_RESTORED,
                   "feedback": spb.HISTORY_ACTION_FEEDBACK, "reobserved": spb.HISTORY_ACTION_REOBSERVED,
                   "erased": spb.HISTORY_ACTION_ERASED, "stale": spb.HISTORY_ACTION_STALE,
                   "confirmed": spb.HISTORY_ACTION_CONFIRMED}

CHANGE_KINDS = {spb.CHANGE_KIND_CREATED: ChangeKind.CREATED, spb.CHANGE_KIND_SUPERSEDED: ChangeKind.SUPERSEDED,
                spb.CHANGE_KIND_UPDATED: ChangeKind.UPDATED, spb.CHANGE_KIND_FORGOTTEN: ChangeKind.FORGOTTEN,
                spb.CHANGE_KIND_ERASED: ChangeKind.ERASED, spb.CHANGE_KIND_SUMMARY_STALE: ChangeKind.SUMMARY_STALE}


def enum_in(table: Mapping[K, E], value: K, field: str) -> E | None:
    """Unspecified -> None; an unknown number (proto3 keeps them) -> INVALID_ARGUMENT."""
    if value == 0:
        return None
    if value not in table:
        raise invalid("UNKNOWN_ENUM_VALUE", f"{field} has an unknown value {value}", field=field)
    return table[value]


def enums_in(table: Mapping[K, E], values: Iterable[K], field: str) -> tuple[E, ...]:
    out = []
    for v in values:
        e = enum_in(table, v, field)
        if e is None:
            raise invalid("UNKNOWN_ENUM_VALUE", f"{field} must not contain UNSPECIFIED", field=field)
        out.append(e)
    return tuple(out)


def enum_out(table: Mapping[K, E], value: E | None) -> K:
    for number, e in table.items():
        if e == value:
            return number
    return cast(K, 0)  # UNSPECIFIED, in every proto3 enum


def ts_in(msg: Any, field: str) -> datetime | None:
    if not msg.HasField(field):
        return None
    t: Timestamp = getattr(msg, field)
    try:
        value = t.ToDatetime(tzinfo=timezone.utc)
    except (ValueError, OverflowError):
        raise invalid("INVALID_TIMESTAMP", f"{field} is out of range", field=field) from None
    return check_time(value, field)


# What protobuf's Timestamp can hold; a stored time outside it is clamped to the nearer end.
_PROTO_EARLIEST = datetime(1, 1, 1, tzinfo=timezone.utc)
_PROTO_LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)


def ts_out(target: Timestamp, value: datetime | None) -> None:
    """Total: naive times are UTC (asyncpg reads PostgreSQL's infinities as naive
    datetime.min/max), and a time protobuf cannot hold becomes the nearer end of its range."""
    if value is None:
        return
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    try:
        value = value.astimezone(timezone.utc)
    except (ValueError, OverflowError):  # an offset that moves it past year 1 or 9999
        value = _PROTO_EARLIEST if value.year == 1 else _PROTO_LATEST
    target.FromDatetime(value)


def struct_in(msg: Any, field: str) -> dict[str, Any]:
    if not msg.HasField(field):
        return {}
    return check_metadata(_struct_to_dict(getattr(msg, field)), field)


def _struct_to_dict(s: struct_pb2.Struct) -> dict[str, Any]:
    return {key: _value_to_python(value) for key, value in s.fields.items()}


def _value_to_python(v: struct_pb2.Value) -> Any:
    # Protobuf's parser nests messages at most 100 deep, so this recursion is bounded.
    kind = v.WhichOneof("kind")
    if kind == "struct_value":
        return _struct_to_dict(v.struct_value)
    if kind == "list_value":
        return [_value_to_python(item) for item in v.list_value.values]
    if kind in ("number_value", "string_value", "bool_value"):
        return getattr(v, kind)
    return None  # null_value, or no value at all


def write_recorded_whole(request: spb.WriteRequest) -> bool:
    """Whether PostgreSQL records everything a Write answers with, its request key beside its
    memories: nothing for extraction to add later and no working-layer item (those live in Redis)."""
    return (request.infer == spb.INFER_MODE_UNSPECIFIED
            and all(m.layer != pb.LAYER_WORKING for m in request.memories))


def draft_in(m: spb.MemoryInput) -> MemoryDraft:
    return MemoryDraft(
        scope=enum_in(SCOPES, m.scope, "scope"),
        domain=m.domain or None,
        agent_id=None,
        layer=enum_in(LAYERS, m.layer, "layer"),
        kind=enum_in(KINDS, m.kind, "kind"),
        content=m.content,
        context=m.context,
        entity=m.entity or None,
        attribute=m.attribute or None,
        value=m.value or None,
        tags=tuple(m.tags),
        metadata=struct_in(m, "metadata"),
        confidence=m.confidence if m.HasField("confidence") else 1.0,
        user_id=m.user_id or None,
        session_id=m.session_id or None,
        source_type=m.source.type or None,
        source_id=m.source.id or None,
        occurred_at=ts_in(m, "occurred_at"),
        valid_from=ts_in(m, "valid_from"),
        valid_to=ts_in(m, "valid_to"),
        ttl_seconds=_ttl_in(m),
        state_key=m.state_key or None,
    )


def _ttl_in(m: spb.MemoryInput) -> int | None:
    if not m.HasField("ttl"):
        return None
    if not -999_999_999 <= m.ttl.nanos <= 999_999_999:
        raise invalid("INVALID_TTL", "ttl.nanos must be within +-999,999,999", field="ttl")
    return check_ttl(m.ttl.seconds + (1 if m.ttl.nanos > 0 else 0))


def filter_in(f: pb.MemoryFilter) -> MemoryFilter:
    if f.min_confidence != f.min_confidence or not 0 <= f.min_confidence <= 1:
        raise invalid("INVALID_CONFIDENCE", "min_confidence must be between 0 and 1")
    return check_filter(MemoryFilter(
        scopes=enums_in(SCOPES, f.scopes, "scopes"),
        layers=enums_in(LAYERS, f.layers, "layers"),
        kinds=enums_in(KINDS, f.kinds, "kinds"),
        domains=tuple(f.domains),
        agent_id=f.agent_id or None,
        user_id=f.user_id or None,
        session_id=f.session_id or None,
        tags=tuple(f.tags),
        occurred_after=ts_in(f.occurred, "start_time") if f.HasField("occurred") else None,
        occurred_before=ts_in(f.occurred, "end_time") if f.HasField("occurred") else None,
        entity=f.entity or None,
        attribute=f.attribute or None,
        min_confidence=f.min_confidence or None,
        include_pending=f.include_pending,
        statuses=enums_in(STATUSES, f.statuses, "statuses"),
        flagged_for_review=f.flagged_for_review,
    ))


def memory_out(r: MemoryRecord, target: pb.Memory | None = None) -> pb.Memory:
    m = target if target is not None else pb.Memory()
    m.id = str(r.id)
    m.tenant_id = r.tenant_id
    m.scope = enum_out(SCOPES, r.scope)
    m.domain = r.domain or ""
    m.agent_id = r.agent_id or ""
    m.user_id = r.user_id or ""
    m.session_id = r.session_id or ""
    m.layer = enum_out(LAYERS, r.layer)
    m.kind = enum_out(KINDS, r.kind)
    m.content = r.content
    m.context = r.context
    m.entity = r.entity or ""
    m.attribute = r.attribute or ""
    m.value = r.value or ""
    m.tags.extend(r.tags)
    if r.metadata:
        try:
            m.metadata.update(r.metadata)
        except (ValueError, TypeError, OverflowError):  # e.g. a jsonb number no double holds
            m.ClearField("metadata")
            _report_once(str(r.id), "its metadata cannot be represented in protobuf; sent without it")
    m.confidence = r.confidence
    m.status = enum_out(STATUSES, r.status)
    m.supersedes = str(r.supersedes) if r.supersedes else ""
    m.source.type = r.source_type or ""
    m.source.id = r.source_id or ""
    ts_out(m.occurred_at, r.occurred_at)
    ts_out(m.valid_from, r.valid_from)
    ts_out(m.valid_to, r.valid_to)
    ts_out(m.create_time, r.created_at)
    ts_out(m.update_time, r.updated_at)
    ts_out(m.last_used_time, r.last_used_at)
    ts_out(m.expire_time, r.expire_at)
    m.use_count = r.use_count
    m.embedding_model = r.embedding_model or ""
    m.conflicts_with = str(r.conflicts_with) if r.conflicts_with else ""
    m.consolidated_into = str(r.consolidated_into) if r.consolidated_into else ""
    m.lifecycle_weight = r.lifecycle_weight
    ts_out(m.review_flag_time, r.review_flagged_at)
    for source in r.sources:
        m.sources.add(type=source.get("type") or "", id=source.get("id") or "")
    return m


_reported: set[tuple[str, str]] = set()


def _report_once(key: str, problem: str) -> None:
    """Logs a stored row's problem the first time it is met, with the traceback if there is one."""
    if (key, problem) in _reported:
        return
    if len(_reported) > 10_000:
        _reported.clear()
    _reported.add((key, problem))
    log.error("memory %s: %s", key, problem, exc_info=True)


def add_each(container: Any, items: Iterable[Any], fill: Callable[[Any, Any], Any]) -> None:
    """Appends each item to a repeated message field with fill(item, new element). An item that
    cannot be represented (a stored row no rule foresaw) is logged once and left out: one bad
    row must not fail every answer that would include it."""
    for item in items:
        try:
            fill(item, container.add())
        except Exception:  # noqa: BLE001 - whatever the row holds, the rest of the answer stands
            del container[-1]
            key = getattr(item, "id", None) or getattr(getattr(item, "memory", None), "id", None) or item
            _report_once(str(key)[:100], "cannot be represented in protobuf; left out of the response")


WRITE_OUTCOMES = {Outcome.CREATED: spb.WRITE_OUTCOME_CREATED, Outcome.MERGED: spb.WRITE_OUTCOME_MERGED,
                  Outcome.SUPERSEDED: spb.WRITE_OUTCOME_SUPERSEDED,
                  Outcome.NEEDS_CONFIRMATION: spb.WRITE_OUTCOME_NEEDS_CONFIRMATION,
                  Outcome.REPLAYED: spb.WRITE_OUTCOME_REPLAYED}


def written_out(records: list[MemoryRecord], outcomes: list[ItemOutcome], response: spb.WriteResponse) -> None:
    """Each stored memory with what became of its item, the two lists kept aligned when a row
    cannot be represented and add_each leaves it out."""
    for record, outcome in zip(records, outcomes):
        before = len(response.memories)
        add_each(response.memories, [record], memory_out)
        if len(response.memories) > before:
            response.results.add(outcome=WRITE_OUTCOMES[outcome.outcome], reason=outcome.reason,
                                 related_memory_id=outcome.related_id)


def hit_out(h: SearchHit, target: spb.SearchHit) -> None:
    memory_out(h.memory, target.memory)
    target.score = h.score
    for c in h.explanation:
        target.explanation.components.add(name=c.name, value=c.value, rank=c.rank, detail=c.detail)


def history_out(e: HistoryEntry, target: spb.HistoryEntry) -> None:
    target.memory_id = str(e.memory_id)
    target.action = HISTORY_ACTIONS.get(e.action, spb.HISTORY_ACTION_UNSPECIFIED)
    if e.snapshot is not None:  # None: erased, or a snapshot that no longer reads as a memory
        memory_out(e.snapshot, target.snapshot)
    ts_out(target.change_time, e.changed_at)
    target.actor = e.actor
    target.reason = e.reason


def counts_out(counts: Mapping[D, int], target, names: Mapping[D, str]) -> None:
    for key, n in sorted(counts.items(), key=lambda item: item[0].value):
        target.add(key=names[key], count=n)



def change_filter_in(f: spb.WatchFilter) -> ChangeFilter:
    return ChangeFilter(
        scopes=enums_in(SCOPES, f.scopes, "filter.scopes"),
        session_id=f.session_id or None,
        entity=f.entity or None,
        kinds=enums_in(KINDS, f.kinds, "filter.kinds"),
        change_kinds=enums_in(CHANGE_KINDS, f.change_kinds, "filter.change_kinds"),
    )


def change_out(e: ChangeEvent, target: spb.ChangeEvent) -> None:
    target.position = e.position
    target.change_kind = enum_out(CHANGE_KINDS, e.change)
    target.action = HISTORY_ACTIONS.get(e.action, spb.HISTORY_ACTION_UNSPECIFIED)
    target.memory_id = str(e.memory_id)
    if e.memory is not None:
        memory_out(e.memory, target.memory)
    ts_out(target.change_time, e.changed_at)
    target.scope = enum_out(SCOPES, e.scope)
    target.kind = enum_out(KINDS, e.kind)
    target.session_id = e.session_id or ""
    target.entity = e.entity or ""
