"""The one SQL builder for visibility and filters, and the row <-> domain mapping.

Every value goes in as a numbered parameter; only fixed SQL fragments are concatenated.
"""
from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, overload

from ...core.access.caller import WRITING_ROLES, Caller, Role
from ...core.model import Kind, Layer, MemoryFilter, MemoryRecord, Scope, Status, Trace
from ..sealing import SealError, Texts, key_from_json, open_text, open_texts, seal

log = logging.getLogger(__name__)

MEMORY_COLUMNS = (
    "m.tenant_id, m.id, m.scope, m.domain, m.agent_id, m.user_id, m.session_id, m.layer, m.kind,"
    " m.content, m.context, m.entity, m.attribute, m.value, m.tags, m.metadata, m.confidence, m.status,"
    " m.supersedes, m.source_type, m.source_id, m.occurred_at, m.valid_from, m.valid_to, m.created_at,"
    " m.updated_at, m.last_used_at, m.use_count, m.embedding_model, m.sources, m.conflicts_with,"
    " m.consolidated_into, m.lifecycle_weight, m.review_flagged_at, m.sealed_key"
)


class Params:
    """Collects query parameters and hands out their $n placeholders."""

    def __init__(self, *initial: Any) -> None:
        self.values: list[Any] = list(initial)

    def add(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


def visibility(caller: Caller, p: Params) -> str:
    """DESIGN §1: global of my tenant, domains I am granted, private of my agent."""
    tenant = p.add(caller.tenant_id)
    parts = [f"(m.scope = 'global' AND m.tenant_id = {tenant})"]
    if caller.domains:
        parts.append(f"(m.scope = 'domain' AND m.domain = ANY({p.add(caller.readable_domains)}::text[]))")
    if caller.agent_id is not None:
        parts.append(f"(m.scope = 'private' AND m.tenant_id = {tenant} AND m.agent_id = {p.add(caller.agent_id)})")
    return "(" + " OR ".join(parts) + ")"


def writable(caller: Caller, p: Params) -> str:
    """What the caller may change: its tenant's global (not as an agent key), domains granted
    read-write, its agent's private. Mirrors Caller.can_write."""
    if caller.role not in WRITING_ROLES:
        return "FALSE"  # a read-only key changes nothing, whichever use case asks
    tenant = p.add(caller.tenant_id)
    parts = ["FALSE"] if caller.role is Role.AGENT else [f"(m.scope = 'global' AND m.tenant_id = {tenant})"]
    write_domains = sorted(d for d, can_write in caller.domains.items() if can_write)
    if write_domains:
        parts.append(f"(m.scope = 'domain' AND m.domain = ANY({p.add(write_domains)}::text[]))")
    if caller.agent_id is not None:
        parts.append(f"(m.scope = 'private' AND m.tenant_id = {tenant} AND m.agent_id = {p.add(caller.agent_id)})")
    return "(" + " OR ".join(parts) + ")"


def filter_clauses(f: MemoryFilter, p: Params, *, as_of: datetime | None = None) -> list[str]:
    where: list[str] = []
    if f.scopes:
        where.append(f"m.scope = ANY({p.add([s.value for s in f.scopes])}::text[])")
    persistent_layers = [layer.value for layer in f.layers if layer is not Layer.WORKING]
    if f.layers:
        where.append(f"m.layer = ANY({p.add(persistent_layers)}::text[])")
    if f.kinds:
        where.append(f"m.kind = ANY({p.add([k.value for k in f.kinds])}::text[])")
    if f.domains:
        where.append(f"m.domain = ANY({p.add(list(f.domains))}::text[])")
    for column, value in (
        ("agent_id", f.agent_id),
        ("user_id", f.user_id),
        ("session_id", f.session_id),
        ("entity", f.entity),
        ("attribute", f.attribute),
    ):
        if value:
            where.append(f"m.{column} = {p.add(value)}")
    if f.tags:
        where.append(f"m.tags @> {p.add(list(f.tags))}::text[]")
    if f.occurred_after:
        where.append(f"m.occurred_at >= {p.add(f.occurred_after)}")
    if f.occurred_before:
        where.append(f"m.occurred_at < {p.add(f.occurred_before)}")
    if f.min_confidence:
        where.append(f"m.confidence >= {p.add(f.min_confidence)}")
    if f.flagged_for_review:
        where.append("m.review_flagged_at IS NOT NULL")
    statuses = p.add([s.value for s in f.effective_statuses()])
    if as_of is None:
        where.append(f"m.status = ANY({statuses}::text[])")
    else:
        # As of a past time: what existed then, including what has since been replaced or
        # deleted, but not what was already replaced or deleted by then.
        at = p.add(as_of)
        where.append(
            f"m.created_at <= {at} AND (m.status = ANY({statuses}::text[])"
            f" OR (m.status IN ('superseded', 'deleted', 'stale') AND m.updated_at > {at}))"
        )
    return where


@overload
def aware(value: datetime) -> datetime: ...


@overload
def aware(value: None) -> None: ...


def aware(value: datetime | None) -> datetime | None:
    """asyncpg reads PostgreSQL's -infinity/infinity as naive datetime.min/max (rows stored before
    times were range-checked may hold them); every other time comes back aware, in UTC."""
    return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


def _uuid_or_none(value: Any) -> uuid.UUID | None:
    """A uuid from a row, or from a snapshot where it is text."""
    return uuid.UUID(value) if isinstance(value, str) else value


# Enum members by value: a dict lookup costs a tenth of the Enum call, and a search builds a few
# hundred records.
_SCOPES, _LAYERS = {m.value: m for m in Scope}, {m.value: m for m in Layer}
_KINDS, _STATUSES = {m.value: m for m in Kind}, {m.value: m for m in Status}


def _time(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    return aware(datetime.fromisoformat(value) if isinstance(value, str) else value)


def _sealed_key(values: Mapping[str, Any]) -> bytes | None:
    return key_from_json(values.get("sealed_key"))  # bytes in a row, text in a snapshot


def record_from_row(values: Mapping[str, Any]) -> MemoryRecord:
    """A memory from a row or from a history snapshot: both use the column names; a snapshot has
    times as ISO text and lacks the usage counters. Sealed texts are opened (stores/sealing.py)."""
    get = values.get
    key = _sealed_key(values)
    texts = open_texts(key, values["tenant_id"],
                       Texts(values["content"], values["context"], values["value"], values["metadata"]))
    return MemoryRecord(
        id=values["id"], tenant_id=values["tenant_id"], scope=_SCOPES[values["scope"]], domain=values["domain"],
        agent_id=values["agent_id"], user_id=values["user_id"], session_id=values["session_id"],
        layer=_LAYERS[values["layer"]], kind=_KINDS[values["kind"]], content=texts.content,
        context=texts.context, entity=values["entity"], attribute=values["attribute"], value=texts.value,
        tags=list(values["tags"]), metadata=dict(texts.metadata), confidence=float(values["confidence"]),
        status=_STATUSES[values["status"]], supersedes=values["supersedes"], source_type=values["source_type"],
        source_id=values["source_id"], occurred_at=_time(get("occurred_at")), valid_from=_time(get("valid_from")),
        valid_to=_time(get("valid_to")), created_at=_time(get("created_at")), updated_at=_time(get("updated_at")),
        last_used_at=_time(get("last_used_at")), use_count=get("use_count") or 0,
        embedding_model=get("embedding_model"), sources=list(get("sources") or []),
        conflicts_with=_uuid_or_none(get("conflicts_with")),
        consolidated_into=_uuid_or_none(get("consolidated_into")),
        lifecycle_weight=float(get("lifecycle_weight") or 1.0), review_flagged_at=_time(get("review_flagged_at")),
        sealed_with=key,
    )


def trace_of(values: Mapping[str, Any]) -> Trace:
    """What a forgotten memory leaves to find in caches, its content opened (withheld: empty)."""
    return Trace(values["tenant_id"], values["id"], values["session_id"], values["user_id"],
                 open_text(values["sealed_key"], values["tenant_id"], "content", values["content"] or ""))


# What ranking a search's candidates needs of each (fusion, the adjustments, duplicates, the
# graph and time rules): a channel reads 50 rows and a search several channels, of which 10 are
# answered; building whole records (two JSON documents each, thirty fields) was the most CPU of a
# search after its embedding (bench/README.md). The answered hits are read whole after ranking.
CANDIDATE_COLUMNS = (
    "m.tenant_id, m.id, m.scope, m.domain, m.agent_id, m.user_id, m.session_id, m.layer, m.kind,"
    " m.content, m.entity, m.attribute, m.value, m.confidence, m.status, m.occurred_at, m.valid_from,"
    " m.valid_to, m.created_at, m.consolidated_into, m.lifecycle_weight, m.sealed_key"
)


def candidate_from_row(values: Mapping[str, Any]) -> MemoryRecord:
    """A candidate of a search: the fields ranking reads; the rest empty until it is read whole."""
    key, tenant = values["sealed_key"], values["tenant_id"]
    return MemoryRecord(
        id=values["id"], tenant_id=values["tenant_id"], scope=_SCOPES[values["scope"]], domain=values["domain"],
        agent_id=values["agent_id"], user_id=values["user_id"], session_id=values["session_id"],
        layer=_LAYERS[values["layer"]], kind=_KINDS[values["kind"]],
        content=open_text(key, tenant, "content", values["content"]), context="", entity=values["entity"],
        attribute=values["attribute"], value=open_text(key, tenant, "value", values["value"]), tags=[], metadata={},
        confidence=float(values["confidence"]), status=_STATUSES[values["status"]], supersedes=None,
        source_type=None, source_id=None, occurred_at=aware(values["occurred_at"]),
        valid_from=aware(values["valid_from"]), valid_to=aware(values["valid_to"]),
        created_at=aware(values["created_at"]), updated_at=None, consolidated_into=values["consolidated_into"],
        lifecycle_weight=float(values["lifecycle_weight"] or 1.0), sealed_with=key,
    )


# The columns a candidate lacks: a search's channels read them for the rows it will most likely
# answer (each channel's leading top_k), so that those need no second round trip after ranking.
WHOLE_ONLY = ("context", "tags", "metadata", "supersedes", "source_type", "source_id", "updated_at",
              "last_used_at", "use_count", "embedding_model", "sources", "conflicts_with", "review_flagged_at")


def _leading_columns(condition: str) -> str:
    return (CANDIDATE_COLUMNS + "".join(f", CASE WHEN {condition} THEN m.{c} END AS {c}" for c in WHOLE_ONLY)
            + f", ({condition}) AS whole")


def _leading_from_row(values: Mapping[str, Any]) -> MemoryRecord:
    return record_from_row(values) if values["whole"] else candidate_from_row(values)


@dataclass(frozen=True)
class RowShape:
    """The columns a statement reads of each memory and how a row of them becomes a record. A leading
    shape reads candidates, and whole the rows a condition picks (each query's leading rows); all
    parts of one statement then have the same columns, whatever their conditions."""

    columns: str
    build: Callable[[Mapping[str, Any]], MemoryRecord]
    leads: bool = False

    def select(self, lead: str = "FALSE") -> str:
        """The column list, with `lead` (an SQL condition) choosing the rows read whole."""
        return _leading_columns(lead) if self.leads else self.columns

    def whole(self, row: Mapping[str, Any]) -> bool:
        return bool(row["whole"]) if self.leads else self is WHOLE


WHOLE = RowShape(MEMORY_COLUMNS, record_from_row)
LEADING = RowShape(CANDIDATE_COLUMNS, _leading_from_row, leads=True)


def ranked_select(shape: RowShape, p: Params, *, lead: int, limit: int, score: str, name: str, rest: str,
                  extra: str = "") -> str:
    """SELECT of ranked memories: rest is `FROM memories m WHERE ... ORDER BY ... LIMIT limit`, score
    the expression answered as `name`. In a leading shape the first `lead` are read whole, numbered
    over the ranking in a wrap that leaves the ranking's plan (a sort or an index walk) as it was."""
    if not shape.leads or lead <= 0 or lead >= limit:
        return f"SELECT {shape.select(str(lead > 0))}, {score} AS {name}{extra} {rest}"
    return (f"SELECT {shape.select(f'm.n <= {p.add(lead)}')}, m.{name}{extra} FROM (SELECT x.*, row_number() OVER ()"
            f" AS n FROM (SELECT m.*, {score} AS {name} {rest}) x) m ORDER BY m.n")


def record_to_json(r: MemoryRecord) -> dict[str, Any]:
    """The history snapshot of a memory (no vector), its texts sealed as the memory's are."""

    def ts(v: datetime | None) -> str | None:
        return v.isoformat() if v else None

    texts = seal(r.sealed_with, r.tenant_id, Texts(r.content, r.context, r.value, r.metadata))
    return {
        "id": str(r.id), "tenant_id": r.tenant_id, "scope": r.scope.value, "domain": r.domain,
        "agent_id": r.agent_id, "user_id": r.user_id, "session_id": r.session_id, "layer": r.layer.value,
        "kind": r.kind.value, "content": texts.content, "context": texts.context, "entity": r.entity,
        "attribute": r.attribute, "value": texts.value, "tags": r.tags, "metadata": texts.metadata,
        "confidence": r.confidence, "status": r.status.value,
        "supersedes": str(r.supersedes) if r.supersedes else None, "source_type": r.source_type,
        "source_id": r.source_id, "occurred_at": ts(r.occurred_at), "valid_from": ts(r.valid_from),
        "valid_to": ts(r.valid_to), "created_at": ts(r.created_at), "updated_at": ts(r.updated_at),
        "embedding_model": r.embedding_model, "sources": r.sources,
        "conflicts_with": str(r.conflicts_with) if r.conflicts_with else None,
        "consolidated_into": str(r.consolidated_into) if r.consolidated_into else None,
        "lifecycle_weight": r.lifecycle_weight, "review_flagged_at": ts(r.review_flagged_at),
        "sealed_key": base64.b64encode(r.sealed_with).decode() if r.sealed_with else None,
    }


_unreadable: set[str] = set()  # memories whose snapshots were reported, so each is logged once


def record_from_json(d: dict[str, Any]) -> MemoryRecord | None:
    """A history snapshot back as a memory; None (logged) when it does not read as one, so a
    snapshot of an older shape never fails the history around it."""

    try:
        return record_from_row(d)
    except (KeyError, ValueError, TypeError, AttributeError, SealError):
        key = str(d.get("id") if isinstance(d, dict) else d)[:100]
        if key not in _unreadable:
            if len(_unreadable) > 10_000:
                _unreadable.clear()
            _unreadable.add(key)
            log.warning("history snapshots of memory %s do not read as a memory; they are shown empty", key)
        return None
