"""Builds the session digests of a session whose turn windows are being built (services/write/context.py
calls it with the turns it read, under the same lease): keyphrases and entities without a model
(core/write/digests.py), a vector averaged from the turns' own, and, when MEMPLANE_SESSION_DIGEST_LLM is
on and a chat model configured, a model-written digest whose embedding is the vector instead. A
model that fails leaves the digest built without it: the digest is an index, never worth a lost
session."""
from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import datetime

from ...core.access.attribution import reset_work_tenant, set_work_tenant
from ...core.write.digests import Digest, build_digests, digest_text
from ...core.write.windows import SessionTurn
from ...llm.chat import ChatModel, answered_by, went_without
from ...llm.digest import write_digest
from ...logs import OncePerCause, cause_of
from .deps import WriteDeps

log = logging.getLogger(__name__)


class DigestService:
    def __init__(self, deps: WriteDeps) -> None:
        self.deps = deps
        self._failures = OncePerCause(log)

    @property
    def enabled(self) -> bool:
        return self.deps.settings.session_digests

    @property
    def _writer(self) -> ChatModel | None:
        """The model that writes digests, if one does."""
        return self.deps.llm if self.deps.settings.session_digest_llm else None

    async def rebuild(self, tenant_id: str, session_id: str, marked_at: datetime, turns: list[SessionTurn]) -> bool:
        """Replaces the session's digests with ones built from `turns` (its active turns as read
        when the session was leased); False when the session was marked again meanwhile."""
        common = await self.deps.digests.common_terms(tenant_id)
        digests = await asyncio.to_thread(build_digests, session_id, turns, common)
        if (writer := self._writer) is not None:
            token = set_work_tenant(tenant_id)
            try:
                digests = [await self._written(writer, d, [t.content for t in turns if t.group == d.group])
                           for d in digests]
            finally:
                reset_work_tenant(token)
        return await self.deps.digests.save(tenant_id, session_id, marked_at, digests,
                                            sealed_with=await self.deps.keys.current(tenant_id))

    async def _written(self, writer: ChatModel, digest: Digest, turns: list[str]) -> Digest:
        try:
            text = await write_digest(writer, turns)
            vector = (await self.deps.embedder.embed_passages([text], background=True))[0]
        except Exception as exc:  # the model or the embedder failed: the digest built without them serves
            went_without("digest", exc)
            self._failures.log(cause_of(exc), "writing a session digest failed, keeping the keyphrases: %s",
                               type(exc).__name__, level=logging.WARNING, exc_info=False)
            return digest
        combined = f"{text}\n{digest_text(list(digest.entities), list(digest.keyphrases))}"
        return replace(digest, text=combined, vector=vector, written_by=answered_by())
