"""Working memory: reading a session, and promoting what a closed or expired session held into
episodic (or its kind's) memory."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol

from ..core.access.caller import Caller, caller_from_json
from ..core.model import MemoryRecord
from ..core.validation import check_free_id
from ..core.working import SessionContents, WorkingItem, promotion_drafts
from ..stores.redis.working import WorkingSession, WorkingStore
from .write.service import WriteService

log = logging.getLogger(__name__)


class WorkingSettings(Protocol):
    max_batch: int
    max_content_bytes: int
    working_promote: bool


@dataclass(frozen=True)
class WorkingDeps:
    """What working memory draws on, filled by the composition root (services/deps.py)."""

    settings: WorkingSettings
    working: WorkingStore

class WorkingService:
    def __init__(self, deps: WorkingDeps, writes: WriteService) -> None:
        self.deps = deps
        self.writes = writes

    def _session(self, caller: Caller, session_id: str) -> WorkingSession:
        check_free_id(session_id, "session_id")
        return WorkingSession(caller.require_tenant(), caller.agent_id, session_id)

    async def read(self, caller: Caller, session_id: str) -> tuple[dict[str, str], list[WorkingItem], datetime | None]:
        """The caller's own working memory of a session: state, live items newest first, expiry."""
        contents = await self.deps.working.read(self._session(caller, session_id))
        return contents.state, contents.items, contents.expires_at

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
            if contents.expires_at is not None and contents.expires_at > datetime.now(timezone.utc):
                # Written to since its index entry came due (a write between claim and read, or an
                # older release's server extending it in the old index): it lives on, indexed anew.
                await self.deps.working.reindex(session, contents.expires_at.timestamp())
                continue
            try:
                if contents.caller is not None and self.deps.settings.working_promote:
                    await self._promote(caller_from_json(contents.caller), session.session_id, contents)
            except Exception:  # one bad session must not stop the sweep; its data stays until the grace ends
                log.exception("promoting expired working session failed")
                continue
            await self.deps.working.delete(session)
        return len(sessions)

    async def _promote(self, caller: Caller, session_id: str, contents: SessionContents) -> list[MemoryRecord]:
        drafts = promotion_drafts(session_id, contents, self.deps.settings.max_content_bytes)
        batch = self.deps.settings.max_batch
        return [r for i in range(0, len(drafts), batch)
                for r in await self.writes.write(caller, drafts[i:i + batch], derived=True)]
