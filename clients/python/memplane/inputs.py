"""Request-side values: memories to write, tasks to reflect on, and the memory filter keywords.

Wherever a method takes one of these dataclasses it also accepts a dict with the same keys
(the proto field names), e.g. {"content": "...", "kind": "fact", "scope": "private"}.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping, Sequence, TypedDict, Union

from .enums import KindLike, LayerLike, MemoryStatusLike, ScopeLike, TaskOutcomeLike


@dataclass(frozen=True)
class MemoryInput:
    """One memory to store.

    Times must be timezone-aware. ttl (working layer only) is a timedelta or seconds.
    A dict may give source as {"type": ..., "id": ...} instead of source_type/source_id.
    """

    content: str
    kind: KindLike
    _: KW_ONLY
    scope: ScopeLike | None = None
    domain: str = ""
    layer: LayerLike | None = None
    context: str = ""
    entity: str = ""
    attribute: str = ""
    value: str = ""
    tags: Sequence[str] = ()
    metadata: Mapping[str, Any] | None = None
    confidence: float | None = None
    user_id: str = ""
    session_id: str = ""
    source_type: str = ""
    source_id: str = ""
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    ttl: timedelta | float | None = None
    state_key: str = ""


@dataclass(frozen=True)
class TaskStep:
    """One step of a task trajectory."""

    action: str
    observation: str = ""
    occurred_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class TaskTrajectory:
    """A finished task to reflect on; task_id becomes the source id of derived memories."""

    request: str
    steps: Sequence[TaskStep | Mapping[str, Any]] = ()
    outcome: TaskOutcomeLike | None = None
    feedback: str = ""
    task_id: str = ""
    used_memory_ids: Sequence[str] = ()  # the outcome moves the confidence of their lessons and procedures
    attempts: int = 0  # how many times the agent tried; over 1 means it succeeded after retries (0: once)


MemoryInputLike = Union[MemoryInput, Mapping[str, Any]]
TaskTrajectoryLike = Union[TaskTrajectory, Mapping[str, Any]]


class FilterArgs(TypedDict, total=False):
    """Keyword arguments selecting memories (search, forget, list_memories, get_stats).

    Omitted keywords do not constrain. The list-valued ones also accept a single value.
    """

    scopes: ScopeLike | Iterable[ScopeLike]
    layers: LayerLike | Iterable[LayerLike]
    kinds: KindLike | Iterable[KindLike]
    statuses: MemoryStatusLike | Iterable[MemoryStatusLike]
    domains: str | Iterable[str]
    agent_id: str
    user_id: str
    session_id: str
    tags: str | Iterable[str]
    occurred_after: datetime
    occurred_before: datetime
    entity: str
    attribute: str
    min_confidence: float
    include_pending: bool
    flagged_for_review: bool  # only memories a lifecycle policy flagged for review


class MemoryFields(TypedDict, total=False):
    """Keyword arguments of write_one: the MemoryInput fields besides content and kind."""

    scope: ScopeLike
    domain: str
    layer: LayerLike
    context: str
    entity: str
    attribute: str
    value: str
    tags: Sequence[str]
    metadata: Mapping[str, Any]
    confidence: float
    user_id: str
    session_id: str
    source_type: str
    source_id: str
    occurred_at: datetime
    valid_from: datetime
    valid_to: datetime
    ttl: timedelta | float
    state_key: str


class MemoryChanges(TypedDict, total=False):
    """Keyword arguments of update_memory: the fields to change; omitted ones stay as they are."""

    content: str
    context: str
    tags: Iterable[str]
    metadata: Mapping[str, Any]
    confidence: float
    status: MemoryStatusLike
    value: str
    valid_from: datetime
    valid_to: datetime
    user_id: str
