"""Domain types of memories, filters, search results and counts."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from uuid import UUID


class Scope(str, enum.Enum):
    GLOBAL = "global"
    DOMAIN = "domain"
    PRIVATE = "private"


class Layer(str, enum.Enum):
    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


class Kind(str, enum.Enum):
    TURN = "turn"
    EVENT = "event"
    FACT = "fact"
    PREFERENCE = "preference"
    PROCEDURE = "procedure"
    LESSON = "lesson"
    SUMMARY = "summary"


class Status(str, enum.Enum):
    ACTIVE = "active"
    PENDING = "pending"
    SUPERSEDED = "superseded"
    DELETED = "deleted"
    STALE = "stale"  # a summary one of whose sources changed; rebuilt by a job
    NEEDS_CONFIRMATION = "needs_confirmation"  # contradicts conflicts_with; see core/write/conflicts.py
    ARCHIVED = "archived"  # a finished task's episode, kept out of default search (core/forget/lifecycle.py)


KIND_LAYER: dict[Kind, Layer] = {
    Kind.TURN: Layer.EPISODIC,
    Kind.EVENT: Layer.EPISODIC,
    Kind.SUMMARY: Layer.EPISODIC,
    Kind.FACT: Layer.SEMANTIC,
    Kind.PREFERENCE: Layer.SEMANTIC,
    Kind.PROCEDURE: Layer.PROCEDURAL,
    Kind.LESSON: Layer.PROCEDURAL,
}

# Fields UpdateMemory may change: the protobuf field, the domain field and the column share the name.
UPDATABLE_FIELDS = frozenset(
    {"content", "context", "tags", "metadata", "confidence", "status", "value", "valid_from", "valid_to", "user_id"}
)

# Search walks scopes in this order unless the request says otherwise (DESIGN §1).
DEFAULT_SCOPE_ORDER: tuple[Scope, ...] = (Scope.GLOBAL, Scope.DOMAIN, Scope.PRIVATE)


@dataclass(frozen=True)
class MemoryDraft:
    """A memory about to be stored (persistent or working).

    As built from a request, scope and layer may be None (unspecified); the write use case
    resolves them and checks every field before anything is stored.
    """

    scope: Scope | None
    domain: str | None
    agent_id: str | None
    layer: Layer | None
    kind: Kind | None
    content: str
    context: str = ""
    entity: str | None = None
    attribute: str | None = None
    value: str | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    confidence: float = 1.0
    user_id: str | None = None
    session_id: str | None = None
    source_type: str | None = None
    source_id: str | None = None
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    ttl_seconds: int | None = None
    state_key: str | None = None
    derived_from: tuple[UUID, ...] = ()  # set by the server (summaries), never from a request

    @property
    def embedding_text(self) -> str:
        # Context says when a memory applies; embedding it with the content lets a query
        # about that situation find the memory.
        return f"{self.content}\n{self.context}" if self.context else self.content


@dataclass
class MemoryRecord:
    """A stored memory as read back."""

    id: UUID | str  # text for a working item (core/working.py) and a history snapshot (JSON)
    tenant_id: str
    scope: Scope
    domain: str | None
    agent_id: str | None
    user_id: str | None
    session_id: str | None
    layer: Layer
    kind: Kind
    content: str
    context: str
    entity: str | None
    attribute: str | None
    value: str | None
    tags: list[str]
    metadata: dict[str, Any]
    confidence: float
    status: Status
    supersedes: UUID | None
    source_type: str | None
    source_id: str | None
    occurred_at: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    last_used_at: datetime | None = None
    use_count: int = 0
    embedding_model: str | None = None
    expire_at: datetime | None = None
    sources: list[dict[str, Any]] = field(default_factory=list)
    conflicts_with: UUID | None = None
    consolidated_into: UUID | None = None  # a lesson or procedure a more general one now stands for
    lifecycle_weight: float = 1.0  # below 1: kept at a lower weight by a lifecycle policy
    review_flagged_at: datetime | None = None  # often used, little believed: a lifecycle run asks for review
    # Opaque to the domain: the wrapped data key the store sealed this memory's texts under (None:
    # stored in clear), so that the copies it keeps (history snapshots) are sealed alike.
    sealed_with: bytes | None = None

    @property
    def stored_id(self) -> UUID:
        """The id of a memory read from the memories table, the only kind of record whose id is
        handed back to the store."""
        assert isinstance(self.id, UUID), f"{self.id!r} is not the id of a stored memory"
        return self.id

    @property
    def changed_at(self) -> datetime:
        """When a memory read from the memories table (where created_at is NOT NULL) last changed."""
        changed = self.updated_at or self.created_at
        assert changed is not None, f"{self.id} was not read from the memories table"
        return changed


@dataclass(frozen=True)
class MemoryFilter:
    scopes: tuple[Scope, ...] = ()
    layers: tuple[Layer, ...] = ()
    kinds: tuple[Kind, ...] = ()
    domains: tuple[str, ...] = ()
    agent_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    tags: tuple[str, ...] = ()
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    entity: str | None = None
    attribute: str | None = None
    min_confidence: float | None = None
    include_pending: bool = False
    statuses: tuple[Status, ...] = ()
    flagged_for_review: bool = False  # only memories a lifecycle run flagged for review

    def effective_statuses(self) -> tuple[Status, ...]:
        if self.statuses:
            return self.statuses
        return (Status.ACTIVE, Status.PENDING) if self.include_pending else (Status.ACTIVE,)

    def is_empty(self) -> bool:
        return self == MemoryFilter()

    def narrows(self) -> bool:
        """Whether some condition leaves memories out. include_pending, min_confidence <= 0 and a
        list naming every scope, layer, kind or status select everything, like no condition."""
        every = replace(
            self,
            include_pending=False,
            min_confidence=None if self.min_confidence is not None and self.min_confidence <= 0 else self.min_confidence,
            scopes=() if set(self.scopes) >= set(Scope) else self.scopes,
            layers=() if set(self.layers) >= set(Layer) - {Layer.WORKING} else self.layers,
            kinds=() if set(self.kinds) >= set(Kind) else self.kinds,
            statuses=() if set(self.statuses) >= set(Status) else self.statuses,
        )
        return not every.is_empty()

    def wants_layer(self, layer: Layer) -> bool:
        return not self.layers or layer in self.layers


@dataclass(frozen=True)
class StaleEmbedding:
    """A memory whose vector comes from another embedding model than the one wanted."""

    tenant_id: str
    id: UUID
    session_id: str | None
    kind: Kind
    content: str
    context: str
    # Opaque to the domain: the texts as the store holds them (sealed), which saving the new vector
    # compares to tell that the row changed meanwhile.
    stored: tuple[str, str] | None = None

    @property
    def embedding_text(self) -> str:  # as MemoryDraft.embedding_text embeds it
        return f"{self.content}\n{self.context}" if self.context else self.content


@dataclass(frozen=True)
class Scored:
    """A retrieval channel's candidate and its score in that channel."""

    record: MemoryRecord
    score: float
    whole: bool = False  # the record holds every field, not just what ranking reads


@dataclass(frozen=True)
class ScoreComponent:
    name: str
    value: float
    rank: int = 0
    detail: str = ""


@dataclass
class SearchHit:
    memory: MemoryRecord
    score: float
    explanation: list[ScoreComponent] = field(default_factory=list)


@dataclass(frozen=True)
class MemoryStats:
    """Counts of the memories a caller sees that match a filter."""

    total: int
    by_scope: dict[Scope, int]
    by_layer: dict[Layer, int]
    by_kind: dict[Kind, int]
    by_status: dict[Status, int]
    newest: datetime | None  # the latest occurred_at counted
    awaiting_context: int = 0  # the tenant's sessions whose turn windows are not built yet
    context_backlog_seconds: float = 0.0  # how long the oldest of them has waited since its first unbuilt write
    awaiting_upgrade: int = 0  # the tenant's sessions whose averaged windows await their embedding


@dataclass(frozen=True)
class HistoryEntry:
    memory_id: UUID
    action: str
    snapshot: MemoryRecord | None  # None when the recorded row no longer reads as a memory
    changed_at: datetime
    actor: str
    reason: str



@dataclass(frozen=True)
class Trace:
    """What a forgotten memory (or one derived from it) leaves to find in caches: where it lived and its text."""

    tenant_id: str
    id: UUID
    session_id: str | None
    user_id: str | None
    content: str


@dataclass(frozen=True)
class Forgotten:
    """A forget's outcome: how many it selected, their ids (capped) and the traces of those and of
    everything derived from them, for the caches to drop."""

    count: int
    ids: list[UUID]
    traces: list[Trace] = field(default_factory=list)
    # Memories derived from those that the cascade forgot (soft) or erased (hard) with them.
    cascaded: list[UUID] = field(default_factory=list)
