"""Working memory items: their shape in Redis and how they read back as memories."""
from __future__ import annotations

import base64
import uuid
from datetime import datetime, timezone

import numpy as np

from ..core.caller import Caller
from ..core.validation import check_free_id
from ..core.model import Kind, Layer, MemoryDraft, MemoryRecord, Scope, Status
from ..stores.redis.working import WorkingSession
from .deps import Deps


def new_item(caller: Caller, d: MemoryDraft, vector: np.ndarray, now: datetime, ttl_seconds: int) -> dict:
    assert d.kind is not None
    return {
        "id": str(uuid.uuid4()),
        "tenant_id": caller.tenant_id,
        "agent_id": caller.agent_id,
        "session_id": d.session_id,
        "user_id": d.user_id,
        "kind": d.kind.value,
        "content": d.content,
        "context": d.context,
        "state_key": d.state_key,
        "tags": list(d.tags),
        "metadata": d.metadata,
        "confidence": d.confidence,
        "source_type": d.source_type,
        "source_id": d.source_id,
        "occurred_at": (d.occurred_at or now).timestamp(),
        "created_at": now.timestamp(),
        "expire_at": now.timestamp() + ttl_seconds,
        # The vector rides along so Search can rank working items without re-embedding them.
        "embedding": base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode(),
    }


def item_vector(item: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(item["embedding"]), dtype=np.float32)


def item_to_record(item: dict) -> MemoryRecord:
    def ts(v: float | None) -> datetime | None:
        return datetime.fromtimestamp(v, timezone.utc) if v else None

    return MemoryRecord(
        id=item["id"], tenant_id=item["tenant_id"],
        scope=Scope.PRIVATE if item["agent_id"] else Scope.GLOBAL, domain=None,
        agent_id=item["agent_id"], user_id=item["user_id"], session_id=item["session_id"], layer=Layer.WORKING,
        kind=Kind(item["kind"]), content=item["content"], context=item["context"], entity=None, attribute=None,
        value=None, tags=list(item["tags"]), metadata=dict(item["metadata"]), confidence=float(item["confidence"]),
        status=Status.ACTIVE, supersedes=None, source_type=item["source_type"], source_id=item["source_id"],
        occurred_at=ts(item["occurred_at"]), valid_from=None, valid_to=None, created_at=ts(item["created_at"]),
        updated_at=ts(item["created_at"]), expire_at=ts(item["expire_at"]),
    )


class WorkingService:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def read(self, caller: Caller, session_id: str) -> tuple[dict[str, str], list[dict], datetime | None]:
        """The caller's own working memory of a session: state, live items newest first, expiry."""
        check_free_id(session_id, "session_id")
        session = WorkingSession(caller.require_tenant(), caller.agent_id, session_id)
        state, items, expires = await self.deps.working.read(session)
        return state, items, datetime.fromtimestamp(expires, timezone.utc) if expires else None
