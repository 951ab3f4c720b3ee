"""Working memory: the items of a session, what reading a session gives, and what a session
leaves behind in persistent memory when it ends."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from .access.caller import Caller
from .model import Kind, Layer, MemoryDraft, MemoryRecord, Scope, Status


@dataclass(frozen=True)
class WorkingItem:
    id: str
    tenant_id: str
    agent_id: str | None
    session_id: str
    user_id: str | None
    kind: Kind
    content: str
    context: str
    state_key: str | None  # set: the item's content is also the session's state under this key
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    confidence: float
    source_type: str | None
    source_id: str | None
    occurred_at: datetime
    created_at: datetime
    expire_at: datetime


@dataclass(frozen=True)
class SessionContents:
    state: dict[str, str]
    items: list[WorkingItem]  # live items, newest first
    expires_at: datetime | None  # None when the session does not exist or has expired
    # The latest writer as stored (core/caller.caller_to_json): an expired session is promoted
    # on its behalf. The sweep parses it, so one that no longer parses fails only its session.
    caller: dict[str, Any] | None
    vectors: dict[str, np.ndarray]  # item id -> embedding, when asked for


def new_item(caller: Caller, d: MemoryDraft, now: datetime, ttl_seconds: int) -> WorkingItem:
    """A checked working-layer draft (services/write/service.py prepare) as the item to store."""
    assert d.kind is not None and d.session_id is not None
    return WorkingItem(
        id=str(uuid.uuid4()), tenant_id=caller.require_tenant(), agent_id=caller.agent_id, session_id=d.session_id,
        user_id=d.user_id, kind=d.kind, content=d.content, context=d.context, state_key=d.state_key,
        tags=tuple(d.tags), metadata=d.metadata, confidence=d.confidence, source_type=d.source_type,
        source_id=d.source_id, occurred_at=d.occurred_at or now, created_at=now,
        expire_at=now + timedelta(seconds=ttl_seconds),
    )


def item_to_record(item: WorkingItem) -> MemoryRecord:
    return MemoryRecord(
        id=item.id, tenant_id=item.tenant_id,
        scope=Scope.PRIVATE if item.agent_id else Scope.GLOBAL, domain=None,
        agent_id=item.agent_id, user_id=item.user_id, session_id=item.session_id, layer=Layer.WORKING,
        kind=item.kind, content=item.content, context=item.context, entity=None, attribute=None,
        value=None, tags=list(item.tags), metadata=dict(item.metadata), confidence=item.confidence,
        status=Status.ACTIVE, supersedes=None, source_type=item.source_type, source_id=item.source_id,
        occurred_at=item.occurred_at, valid_from=None, valid_to=None, created_at=item.created_at,
        updated_at=item.created_at, expire_at=item.expire_at,
    )


def promotion_drafts(session_id: str, contents: SessionContents, max_bytes: int) -> list[MemoryDraft]:
    """What a session leaves behind: its items (oldest first) in their kind's layer, and its state
    (cut to max_bytes: each state value may be as large as the content limit)."""
    drafts = [
        MemoryDraft(
            scope=None, domain=None, agent_id=None, layer=None, kind=item.kind, content=item.content,
            context=item.context, tags=item.tags, metadata=dict(item.metadata),
            confidence=item.confidence, user_id=item.user_id, session_id=session_id,
            source_type="working", source_id=item.id, occurred_at=item.occurred_at,
        )
        for item in reversed(contents.items)
    ]
    if contents.state:
        state = "; ".join(f"{k} = {v}" for k, v in sorted(contents.state.items()))
        content = f"Session {session_id} ended with state: {state}"
        drafts.append(MemoryDraft(
            scope=None, domain=None, agent_id=None, layer=None, kind=Kind.EVENT,
            content=content.encode()[:max_bytes].decode(errors="ignore"), session_id=session_id,
            source_type="working", source_id=session_id,
        ))
    return drafts
