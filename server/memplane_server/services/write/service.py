"""Write: validate, embed in one batch, store persistent memories in one transaction and
working-layer items in Redis. The Write RPC enters through services/write/intake.py, which runs
extraction and the after-write hooks around this."""
from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np

from ...core.access.caller import Caller, caller_to_json
from ...core.access.requests import RequestKey
from ...core.errors import Code, MemplaneError, invalid, request_id_reused
from ...core.model import KIND_LAYER, Layer, MemoryDraft, MemoryRecord, Scope, Status
from ...core.retrieval.tokens import keyword_tokens
from ...core.validation import (
    check_confidence,
    check_content,
    check_free_id,
    check_identifier,
    check_metadata,
    check_tags,
    check_text,
    check_time,
    check_ttl,
)
from ...core.working import WorkingItem, item_to_record, new_item
from ...core.write.conflicts import ConflictRule
from ...core.write.entities import extract_entities
from ...core.write.outcomes import CREATED, ItemOutcome
from ...stores.postgres.memory_writes import QuotaExceeded, RequestReused, SourceGone, Stored, StoredDraft
from ...stores.redis.working import WorkingSession
from .deps import WriteDeps

# Up to this many texts, their keywords and entities are found in the event loop: it takes less than
# a hop to a thread and back (about 0.35 ms of a single write, bench/README.md), while a batch's
# would hold up the loop.
FEW_TEXTS = 4


def index_terms(texts: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """Each text's keywords (for the lexical index) and entities (for the entity index)."""
    return [(" ".join(keyword_tokens(t)), tuple(extract_entities(t))) for t in texts]


class WriteService:
    def __init__(self, deps: WriteDeps) -> None:
        self.deps = deps

    def prepare(self, caller: Caller, draft: MemoryDraft, index: int) -> MemoryDraft:
        """Resolves defaults and checks one draft; errors name the item."""
        s = self.deps.settings
        try:
            if draft.kind is None:
                raise invalid("KIND_REQUIRED", "kind is required")
            layer = draft.layer or KIND_LAYER[draft.kind]
            if layer is not Layer.WORKING and layer is not KIND_LAYER[draft.kind]:
                raise invalid("LAYER_KIND_MISMATCH", f"kind {draft.kind.value} belongs to layer {KIND_LAYER[draft.kind].value}")
            scope = draft.scope or caller.default_scope()
            if draft.domain:
                check_identifier(draft.domain, "domain")
            caller.check_write_scope(scope, draft.domain)
            check_content(draft.content, s.max_content_bytes)
            if draft.context:
                check_content(draft.context, s.max_content_bytes, "context")
            check_confidence(draft.confidence)
            for name in ("user_id", "session_id", "entity", "attribute", "source_type", "source_id", "state_key"):
                check_free_id(getattr(draft, name), name)
            if draft.value is not None:
                check_text(draft.value, "value", s.max_content_bytes)
            check_tags(draft.tags)
            check_metadata(draft.metadata)
            for name in ("occurred_at", "valid_from", "valid_to"):
                check_time(getattr(draft, name), name)
            if draft.valid_from and draft.valid_to and draft.valid_to < draft.valid_from:
                raise invalid("INVALID_VALIDITY", "valid_to is before valid_from")
            if layer is Layer.WORKING:
                if not draft.session_id:
                    raise invalid("SESSION_REQUIRED", "working memory needs a session_id")
                if draft.ttl_seconds is not None:
                    check_ttl(draft.ttl_seconds)
            elif draft.ttl_seconds is not None or draft.state_key:
                raise invalid("TTL_ONLY_FOR_WORKING", "ttl and state_key apply to the working layer only")
        except MemplaneError as exc:
            exc.metadata["index"] = str(index)  # tells the caller which item of the batch is wrong
            raise
        domain = draft.domain if scope is Scope.DOMAIN else None
        # On non-private scopes the agent is kept as the writer, for filtering and audit.
        return replace(draft, scope=scope, layer=layer, domain=domain, agent_id=caller.agent_id)

    def prepare_all(self, caller: Caller, drafts: list[MemoryDraft]) -> list[MemoryDraft]:
        if not drafts:
            raise invalid("MEMORIES_REQUIRED", "at least one memory is required")
        if len(drafts) > self.deps.settings.max_batch:
            raise invalid("BATCH_TOO_LARGE", f"at most {self.deps.settings.max_batch} memories per call")
        caller.require_writer()
        return [self.prepare(caller, d, i) for i, d in enumerate(drafts)]

    async def write(
        self, caller: Caller, drafts: list[MemoryDraft], request: RequestKey | None = None, *, derived: bool = False
    ) -> list[MemoryRecord]:
        return [record for record, _ in await self.write_items(caller, drafts, request, derived=derived)]

    async def write_items(
        self, caller: Caller, drafts: list[MemoryDraft], request: RequestKey | None = None, *, derived: bool = False
    ) -> list[tuple[MemoryRecord, ItemOutcome]]:
        """Validates and screens everything first (the content policy redacts, tags or refuses what
        its detectors find before anything is embedded), so a bad item leaves nothing of the batch
        written. A request already stored (its response lost with a crashed server) is answered,
        not stored again. derived: the server made the drafts from what it stored (extraction,
        reflection, promotion), so what the policy refuses is redacted instead."""
        ready = await self.deps.content.screen(caller, self.prepare_all(caller, drafts), derived=derived)
        vectors = await self.deps.embedder.embed_passages([d.embedding_text for d in ready])
        now = datetime.now(timezone.utc)
        persistent = [(i, d) for i, d in enumerate(ready) if d.layer is not Layer.WORKING]
        working = [(i, d) for i, d in enumerate(ready) if d.layer is Layer.WORKING]
        out: list[tuple[MemoryRecord, ItemOutcome] | None] = [None] * len(ready)
        if persistent:
            caller.require_tenant()
            texts = [d.embedding_text for _, d in persistent]
            terms = index_terms(texts) if len(texts) <= FEW_TEXTS else await asyncio.to_thread(index_terms, texts)
            stored = await self._insert(
                caller, request,
                [
                    StoredDraft(
                        draft=d,
                        embedding=vectors[i],
                        keywords=keywords,
                        status=Status.PENDING if d.confidence < self.deps.settings.pending_threshold else Status.ACTIVE,
                        occurred_at=d.occurred_at or now,
                        entities=entities,
                    )
                    for (i, d), (keywords, entities) in zip(persistent, terms)
                ],
                embedding_model=self.deps.embedder.model_id,
                sealing=await self.deps.keys.sealing(caller.require_tenant()),
                actor=caller.key_id,
                dedup_threshold=self.deps.settings.dedup_threshold,
                pending_threshold=self.deps.settings.pending_threshold,
                conflicts=ConflictRule(self.deps.settings.conflict_window_seconds,
                                       self.deps.settings.conflict_min_confidence),
            )
            if stored.replayed:
                return list(zip(stored.records, stored.outcomes))
            for (i, _), record, outcome in zip(persistent, stored.records, stored.outcomes):
                out[i] = record, outcome
        if working:
            for (i, _), record in zip(working, await self._write_working(caller, working, vectors, now)):
                out[i] = record, CREATED
        return [r for r in out if r is not None]

    async def forget_old_requests(self) -> int:
        """Recorded write requests older than the idempotency window stop deduplicating."""
        return await self.deps.memories.prune_write_requests(self.deps.settings.idempotency_ttl_seconds)

    async def _insert(self, caller: Caller, request: RequestKey | None, items: list[StoredDraft], **kwargs) -> Stored:
        try:
            return await self.deps.memories.insert(caller, items, request=request, **kwargs)
        except RequestReused:
            raise request_id_reused() from None
        except SourceGone:
            # A rebuild or extraction read a memory that was forgotten meanwhile: it runs again (a
            # job retries) and no longer finds it.
            raise MemplaneError(
                Code.FAILED_PRECONDITION, "SOURCE_FORGOTTEN", "a memory this was derived from was forgotten; retry"
            ) from None
        except QuotaExceeded as exc:
            raise MemplaneError(
                Code.RESOURCE_EXHAUSTED, "MEMORY_QUOTA_EXCEEDED",
                f"the tenant stores {exc.count} memories; its limit is {exc.limit}", limit=str(exc.limit),
            ) from None

    async def _write_working(
        self, caller: Caller, items: list[tuple[int, MemoryDraft]], vectors: np.ndarray, now: datetime
    ) -> list[MemoryRecord]:
        made: list[WorkingItem] = []
        by_session: dict[str, list[tuple[WorkingItem, np.ndarray]]] = {}
        for i, d in items:
            item = new_item(caller, d, now, d.ttl_seconds or self.deps.settings.working_ttl_seconds)
            made.append(item)
            by_session.setdefault(item.session_id, []).append((item, vectors[i]))
        # The answer gives the items as they read back later, times at the precision stored.
        stored: dict[str, WorkingItem] = {}
        for session_id, session_items in by_session.items():
            session = WorkingSession(caller.require_tenant(), caller.agent_id, session_id)
            for item in await self.deps.working.append(session, session_items, caller=caller_to_json(caller),
                                                       sealed_with=await self.deps.keys.current(session.tenant_id)):
                stored[item.id] = item
        return [item_to_record(stored[item.id]) for item in made]
