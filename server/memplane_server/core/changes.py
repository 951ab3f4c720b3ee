"""The change stream's domain types: what a Watch filters on and what it streams."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from .model import Kind, MemoryRecord, Scope


class ChangeKind(str, enum.Enum):
    CREATED = "created"
    SUPERSEDED = "superseded"  # a new value of its fact, or merged into a near-duplicate
    UPDATED = "updated"  # update, feedback, re-observation, restore
    FORGOTTEN = "forgotten"  # soft forget
    ERASED = "erased"  # hard forget
    SUMMARY_STALE = "summary_stale"  # a summary turned STALE when one of its sources changed


@dataclass(frozen=True)
class ChangeFilter:
    scopes: tuple[Scope, ...] = ()
    session_id: str | None = None
    entity: str | None = None
    kinds: tuple[Kind, ...] = ()
    change_kinds: tuple[ChangeKind, ...] = ()


@dataclass(frozen=True)
class ChangeEvent:
    position: int
    change: ChangeKind
    action: str  # the history action behind the change
    memory_id: UUID
    scope: Scope
    kind: Kind
    session_id: str | None
    entity: str | None
    changed_at: datetime
    memory: MemoryRecord | None  # the memory after the change; None once erased


@dataclass(frozen=True)
class ChangeBatch:
    """Changes in position order, and the position through which the log has been read for the
    caller: resuming after it misses nothing."""

    events: tuple[ChangeEvent, ...]
    position: int
