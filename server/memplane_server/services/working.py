"""Working memory: items as they sit in Redis, reading a session, and promoting what a closed
or expired session held into episodic (or its kind's) memory."""
from __future__ import annotations

import logging
import uuid
from datetime import datetime, timezone

import numpy as np

from ..core.caller import Caller, caller_from_json
from ..core.model import Kind, Layer, MemoryDraft, MemoryRecord, Scope, Status
from ..core.validation import EARLIEST_TIME, LATEST_TIME, check_free_id
from ..stores.redis.working import SessionContents, WorkingSession
from .deps import Deps

log = logging.getLogger(__name__)


def new_item(caller: Caller, d: MemoryDraft, now: datetime, ttl_seconds: int) -> dict:
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
    }


def vector_bytes(vector: np.ndarray) -> bytes:
    """Stored beside the item so Search can rank working items without re-embedding them."""
    return np.asarray(vector, dtype=np.float32).tobytes()


def _ts(v: float | None) -> datetime | None:
    """Unix time from Redis back to a datetime in the storable range. Total: an item stored before
    TTLs were bounded may expire past year 9999, and a float near either end of the range reads
    back a little outside it (9999-12-30T23:59:59.999999 as 9999-12-31), which promotion would refuse."""
    if v is None:
        return None
    try:
        moment = datetime.fromtimestamp(v, timezone.utc)
    except (ValueError, OverflowError, OSError):
        return LATEST_TIME if v > 0 else EARLIEST_TIME
    return min(max(moment, EARLIEST_TIME), LATEST_TIME)


def item_to_record(item: dict) -> MemoryRecord:
    return MemoryRecord(
        id=item["id"], tenant_id=item["tenant_id"],
        scope=Scope.PRIVATE if item["agent_id"] else Scope.GLOBAL, domain=None,
        agent_id=item["agent_id"], user_id=item["user_id"], session_id=item["session_id"], layer=Layer.WORKING,
        kind=Kind(item["kind"]), content=item["content"], context=item["context"], entity=None, attribute=None,
        value=None, tags=list(item["tags"]), metadata=dict(item["metadata"]), confidence=float(item["confidence"]),
        status=Status.ACTIVE, supersedes=None, source_type=item["source_type"], source_id=item["source_id"],
        occurred_at=_ts(item["occurred_at"]), valid_from=None, valid_to=None, created_at=_ts(item["created_at"]),
        updated_at=_ts(item["created_at"]), expire_at=_ts(item["expire_at"]),
    )


def promotion_drafts(session_id: str, contents: SessionContents, max_bytes: int) -> list[MemoryDraft]:
    """What a session leaves behind: its items (oldest first) in their kind's layer, and its state
    (cut to max_bytes: each state value may be as large as the content limit)."""
    drafts = [
        MemoryDraft(
            scope=None, domain=None, agent_id=None, layer=None, kind=Kind(item["kind"]), content=item["content"],
            context=item["context"], tags=tuple(item["tags"]), metadata=dict(item["metadata"]),
            confidence=float(item["confidence"]), user_id=item["user_id"], session_id=session_id,
            source_type="working", source_id=item["id"], occurred_at=_ts(item["occurred_at"]),
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


class WorkingService:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def _session(self, caller: Caller, session_id: str) -> WorkingSession:
        check_free_id(session_id, "session_id")
        return WorkingSession(caller.require_tenant(), caller.agent_id, session_id)

    async def read(self, caller: Caller, session_id: str) -> tuple[dict[str, str], list[dict], datetime | None]:
        """The caller's own working memory of a session: state, live items newest first, expiry."""
        contents = await self.contents(caller, session_id)
        return contents.state, contents.items, _ts(contents.expires_at)

    async def contents(self, caller: Caller, session_id: str, *, with_vectors: bool = False) -> SessionContents:
        return await self.deps.working.read(self._session(caller, session_id), with_vectors=with_vectors)

    async def close(self, caller: Caller, session_id: str, promote: bool | None) -> list[MemoryRecord]:
        """Ends a session now; promotes its contents unless told not to (default from settings)."""
        caller.require_writer()
        session = self._session(caller, session_id)
        contents = await self.deps.working.read(session)
        promoted: list[MemoryRecord] = []
        if promote if promote is not None else self.deps.settings.working_promote:
            promoted = await self._promote(caller, session_id, contents)
        await self.deps.working.delete(session)
        return promoted

    async def promote_expired(self, limit: int = 20) -> int:
        """Promotes and removes sessions whose time ran out; returns how many were handled."""
        sessions = await self.deps.working.claim_expired(limit)
        for session in sessions:
            contents = await self.deps.working.read(session, include_expired=True)
            try:
                if contents.caller is not None and self.deps.settings.working_promote:
                    await self._promote(caller_from_json(contents.caller), session.session_id, contents)
            except Exception:  # one bad session must not stop the sweep; its data stays until the grace ends
                log.exception("promoting expired working session failed")
                continue
            await self.deps.working.delete(session)
        return len(sessions)

    async def _promote(self, caller: Caller, session_id: str, contents: SessionContents) -> list[MemoryRecord]:
        from .write import WriteService

        drafts = promotion_drafts(session_id, contents, self.deps.settings.max_content_bytes)
        batch = self.deps.settings.max_batch
        writer = WriteService(self.deps)
        return [r for i in range(0, len(drafts), batch) for r in await writer.write(caller, drafts[i:i + batch])]
