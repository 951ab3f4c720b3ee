"""The change stream's domain types: what a Watch filters on and what it streams, and the log's
entries as the process-wide feed holds them (ids and labels only, never content)."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from .access.caller import Caller
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


@dataclass(frozen=True)
class LogEntry:
    """One change-log row: enough to tell which watchers might see it."""

    position: int
    tenant_id: str
    change: ChangeKind
    scope: Scope
    domain: str | None
    agent_id: str | None
    kind: Kind
    session_id: str | None
    entity: str | None


def might_see(caller: Caller, f: ChangeFilter, e: LogEntry) -> bool:
    """Whether the caller's watch with filter f could stream this change. Never False for one it
    would stream (a watcher skips reading the log for changes all False), and the log's reader
    decides in the end; a session or entity the entry lacks (it lives in the history row) is a
    maybe."""
    if e.scope is Scope.GLOBAL:
        visible = e.tenant_id == caller.tenant_id
    elif e.scope is Scope.DOMAIN:
        visible = e.domain in caller.domains
    else:
        visible = e.tenant_id == caller.tenant_id and caller.agent_id is not None and e.agent_id == caller.agent_id
    return (visible and (not f.scopes or e.scope in f.scopes) and (not f.kinds or e.kind in f.kinds)
            and (not f.change_kinds or e.change in f.change_kinds)
            and (f.session_id is None or e.session_id in (None, f.session_id))
            and (f.entity is None or e.entity in (None, f.entity)))
