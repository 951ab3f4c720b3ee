"""Typed, immutable results returned by the SDK.

Sequences are tuples so the frozen dataclasses stay immutable; times are timezone-aware UTC
datetimes, or None when the server left them unset.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from .enums import (
    AdviceKind,
    ChangeKind,
    DecisionOutcome,
    DecisionSubject,
    DomainAccess,
    HistoryAction,
    Kind,
    Layer,
    MemoryStatus,
    OperationState,
    Role,
    Scope,
    WriteOutcome,
)
from .policies import ContentPolicy as ContentPolicy
from .policies import ContentScanReport as ContentScanReport
from .policies import LifecycleKindRule as LifecycleKindRule
from .policies import LifecyclePolicy as LifecyclePolicy
from .policies import LifecycleReport as LifecycleReport
from .token_usage import TokenBudget as TokenBudget
from .token_usage import TokenCount as TokenCount
from .token_usage import TokenUsage as TokenUsage
from .usage import DayUsage as DayUsage
from .usage import StoredUsage as StoredUsage
from .usage import TenantUsage as TenantUsage
from .usage import UsageReport as UsageReport

T = TypeVar("T")

_TERMINAL_STATES = frozenset({OperationState.SUCCEEDED, OperationState.FAILED, OperationState.CANCELLED})


@dataclass(frozen=True)
class Memory:
    """One stored memory."""

    id: str
    tenant_id: str
    scope: Scope
    domain: str
    agent_id: str
    user_id: str
    session_id: str
    layer: Layer
    kind: Kind
    content: str
    context: str
    entity: str
    attribute: str
    value: str
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    confidence: float
    status: MemoryStatus
    supersedes: str
    source_type: str
    source_id: str
    occurred_at: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None
    create_time: datetime | None
    update_time: datetime | None
    last_used_time: datetime | None
    expire_time: datetime | None
    use_count: int
    embedding_model: str
    sources: tuple[tuple[str, str], ...] = ()  # (type, id) of every observation behind the memory
    conflicts_with: str = ""  # NEEDS_CONFIRMATION only: the memory this one contradicts
    consolidated_into: str = ""  # a more general consolidated memory stands for this one
    lifecycle_weight: float = 1.0  # below 1: a lifecycle policy keeps it at a lower weight in Search
    review_flag_time: datetime | None = None  # when a lifecycle policy flagged it for review


@dataclass(frozen=True)
class ScoreComponent:
    """One contribution to a search hit's score."""

    name: str
    value: float
    rank: int
    detail: str


@dataclass(frozen=True)
class SearchHit:
    """One search result; explanation is empty unless the search asked for explain."""

    memory: Memory
    score: float
    explanation: tuple[ScoreComponent, ...]


@dataclass(frozen=True)
class SearchResult:
    """Search hits, best first."""

    hits: tuple[SearchHit, ...]


@dataclass(frozen=True)
class ErasureReceipt:
    """Proof of an erasure of a user, also kept in the server's audit log: rows and entries removed
    per table and store ("postgres.memories", "redis.idempotency", ...), never what they held.
    "user_keys.destroyed" is 1 when the user's key was destroyed, so that no earlier backup or
    export can reveal the user's memories (0: the key still opens memories about the user that the
    erasing key does not reach). subject is the hex sha256 of the tenant id, a NUL and the user id."""

    operation_id: str
    erase_time: datetime | None
    subject: str
    counts: dict[str, int]
    dry_run: bool

    @property
    def total(self) -> int:
        """Everything removed, all tables and stores together."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class Operation:
    """A background job (reflection, extraction, erasure), polled by id."""

    id: str
    type: str
    state: OperationState
    attempts: int
    error_reason: str
    error_message: str
    create_time: datetime | None
    update_time: datetime | None
    result_memory_ids: tuple[str, ...]
    result_summary: str
    erasure_receipt: ErasureReceipt | None = None

    @property
    def done(self) -> bool:
        """Whether the operation reached a final state (succeeded, failed or cancelled)."""
        return self.state in _TERMINAL_STATES


@dataclass(frozen=True)
class ItemResult:
    """What Write did with one item: related_memory_id is the memory it was merged into (MERGED),
    replaced (SUPERSEDED) or contradicts (NEEDS_CONFIRMATION); reason says why in words."""

    outcome: WriteOutcome
    related_memory_id: str = ""
    reason: str = ""


@dataclass(frozen=True)
class WriteResult:
    """Stored memories in request order, each item's outcome beside it (an item merged into a
    stored memory is answered with that memory), plus the extraction operation when it runs in the
    background and the facts it produced when it ran synchronously."""

    memories: tuple[Memory, ...]
    operation: Operation | None
    extracted: tuple[Memory, ...] = ()
    results: tuple[ItemResult, ...] = ()
    # Why a synchronous extraction went without the model (malformed answers, the token budget
    # spent): the turns are stored, no fact was taken from the answer. "" when it did not.
    extraction_degraded: str = ""


@dataclass(frozen=True)
class ReflectResult:
    """What a reflection produced.

    When the server ran it in the background, operation is set and the other fields are
    empty; poll it with wait_operation, whose result carries the memory ids and summary.
    """

    memories: tuple[Memory, ...]
    summary: str
    merged_count: int
    used_llm: bool
    operation: Operation | None
    reason: str = ""  # why it ran ("requested", "the task failed", ...) or why it was skipped
    skipped: bool = False  # reflect(decide=True) found nothing to learn: nothing was stored
    # The model's memories not stored, counted by why ("ungrounded", "narration", ...: docs/reflect.md).
    dropped: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ForgetResult:
    """How many memories were (or, on a dry run, would be) forgotten, and their ids (at most 1000)."""

    forgotten_count: int
    forgotten_ids: tuple[str, ...]


@dataclass(frozen=True)
class ErasureResult:
    """An erasure of a user: its receipt when it ran in the call (or was a dry run), else the
    operation to wait on, whose erasure_receipt is set once it succeeded."""

    forgotten_count: int
    forgotten_ids: tuple[str, ...]
    receipt: ErasureReceipt | None
    operation: Operation | None


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; next_page_token is "" on the last page."""

    items: tuple[T, ...]
    next_page_token: str


@dataclass(frozen=True)
class HistoryEntry:
    """One recorded change of a memory; snapshot is the memory as it was after the change."""

    memory_id: str
    action: HistoryAction
    snapshot: Memory | None
    change_time: datetime | None
    actor: str
    reason: str


@dataclass(frozen=True)
class ChangeEvent:
    """One change of a memory the caller may see, from watch().

    position orders changes across all writers and servers; pass the last one you handled as
    after_position to resume without missing any. memory is the memory as it was after the
    change, or None once it has been erased (hard-forgotten).
    """

    position: int
    change_kind: ChangeKind
    action: HistoryAction
    memory_id: str
    memory: Memory | None
    change_time: datetime | None
    scope: Scope
    kind: Kind
    session_id: str
    entity: str


@dataclass(frozen=True)
class WatchProgress:
    """From watch(progress=True): everything visible up to position has been delivered (sent
    when a stream starts, and now and then while nothing visible changes)."""

    position: int


@dataclass(frozen=True)
class WorkingMemory:
    """A session's working memory: its state map and recent items, newest first."""

    state: dict[str, str]
    items: tuple[Memory, ...]
    expire_time: datetime | None


@dataclass(frozen=True)
class Stats:
    """Counts of the caller's visible memories; the by_* maps are keyed by enum name or domain."""

    total: int
    by_scope: dict[str, int]
    by_layer: dict[str, int]
    by_kind: dict[str, int]
    by_status: dict[str, int]
    newest_time: datetime | None
    # Sessions whose neighbouring-turn windows are still being built; search is complete at 0.
    sessions_awaiting_context: int = 0
    # How long the oldest of them has waited since its first write not in a window (0: none waits).
    context_backlog_seconds: float = 0.0
    # Sessions whose windows are averaged from their turns and still await an embedding of their
    # text (done when the server is idle; search finds a little more once it is 0).
    sessions_awaiting_upgrade: int = 0


@dataclass(frozen=True)
class Tenant:
    """A team: the hard isolation boundary."""

    id: str
    display_name: str
    create_time: datetime | None
    max_memories: int


@dataclass(frozen=True)
class Agent:
    """An identity inside a tenant."""

    tenant_id: str
    id: str
    display_name: str
    create_time: datetime | None


@dataclass(frozen=True)
class ApiKey:
    """An API key, without its secret."""

    id: str
    tenant_id: str
    agent_id: str
    role: Role
    display_name: str
    create_time: datetime | None
    revoke_time: datetime | None


@dataclass(frozen=True)
class CreatedApiKey:
    """A newly created API key and its secret, which the server shows only this once."""

    api_key: ApiKey
    # Kept out of repr so that logging the result does not leak the credential.
    secret: str = field(repr=False)


@dataclass(frozen=True)
class CreatedTenant:
    """A newly created tenant and, when asked for, its tenant admin key."""

    tenant: Tenant
    admin_key: CreatedApiKey | None


@dataclass(frozen=True)
class Domain:
    """A named knowledge area shared across tenants."""

    name: str
    description: str
    create_time: datetime | None


@dataclass(frozen=True)
class DomainGrant:
    """A tenant's membership of a domain."""

    domain: str
    tenant_id: str
    access: DomainAccess
    create_time: datetime | None


@dataclass(frozen=True)
class AuditEvent:
    """One recorded admin action or forget."""

    id: str
    tenant_id: str
    actor_key_id: str
    action: str
    target: str
    details_json: str
    event_time: datetime | None

    @property
    def details(self) -> Any:
        """details_json decoded (None when empty)."""
        return json.loads(self.details_json) if self.details_json else None


@dataclass(frozen=True)
class Conflict:
    """Two values of one entity attribute that disagree: the one served and the one held back
    as NEEDS_CONFIRMATION until resolve_conflict picks a side."""

    current: Memory
    challenger: Memory
    reason: str


@dataclass(frozen=True)
class ConflictResolution:
    """Both sides after resolve_conflict."""

    kept: Memory
    superseded: Memory


@dataclass(frozen=True)
class Advice:
    """One thing to check before a task: a lesson (risk), a procedure (rule) or a preference, and
    why it applies."""

    memory: Memory
    kind: AdviceKind
    why: str
    score: float


@dataclass(frozen=True)
class ReflectionDecision:
    """A reflection that ran or was skipped, with why, or a search that found nothing (a signal)."""

    id: str
    subject: DecisionSubject
    subject_id: str
    outcome: DecisionOutcome
    reason: str
    operation_id: str
    turns: int
    create_time: datetime | None


@dataclass(frozen=True)
class MemoryCluster:
    """Similar lessons or procedures, and the more general memory written for them (None in a dry run)."""

    kind: Kind
    members: tuple[Memory, ...]
    consolidated: Memory | None
