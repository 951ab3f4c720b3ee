"""Reading and changing single memories: get, list, update, history, feedback, stats."""
from __future__ import annotations

import builtins
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..core.access.caller import Caller
from ..core.errors import denied, invalid, not_found
from ..core.model import UPDATABLE_FIELDS, HistoryEntry, MemoryDraft, MemoryFilter, MemoryRecord, MemoryStats, Status
from ..core.paging import decode_position, encode_token, record_token
from ..core.retrieval.tokens import keyword_tokens
from ..core.validation import (
    MAX_NOTE_BYTES,
    check_confidence,
    check_content,
    check_free_id,
    check_metadata,
    check_tags,
    check_text,
    check_time,
    clamp_page_size,
)
from ..core.write.entities import extract_entities
from ..llm.embedders import Embedder
from ..stores.postgres.contexts import ContextStore
from ..stores.postgres.memories import MemoryStore
from .changeable import changeable, parse_memory_id
from .content.keys import TenantKeys
from .content.policies import ContentPolicies
from .reflection.outcomes import apply_outcome

FEEDBACK_STEP = 0.1


class MemoriesSettings(Protocol):
    max_batch: int
    max_content_bytes: int
    pending_threshold: float


@dataclass(frozen=True)
class MemoriesDeps:
    """What reading and changing memories draws on, filled by the composition root (services/deps.py)."""

    settings: MemoriesSettings
    memories: MemoryStore
    contexts: ContextStore  # a changed turn's windows are built again
    content: ContentPolicies  # an update is screened as a write is
    keys: TenantKeys  # ... and sealed
    embedder: Embedder

class MemoriesService:
    def __init__(self, deps: MemoriesDeps) -> None:
        self.deps = deps

    async def get(self, caller: Caller, memory_id: str) -> MemoryRecord:
        caller.require_tenant()
        record = await self.deps.memories.get(caller, parse_memory_id(memory_id))
        if record is None:
            raise not_found("memory")
        return record

    async def list(
        self, caller: Caller, f: MemoryFilter, page_size: int, page_token: str
    ) -> tuple[list[MemoryRecord], str]:
        caller.require_tenant()
        size = clamp_page_size(page_size)
        after = decode_position(page_token, "time", "uuid")
        rows = await self.deps.memories.list(caller, f, limit=size + 1, after=after)
        page = rows[:size]
        token = record_token(page[-1]) if len(rows) > size else ""
        return page, token

    async def update(self, caller: Caller, memory_id: str, changes: dict[str, Any], *, reason: str = "") -> MemoryRecord:
        caller.require_writer()
        mid = parse_memory_id(memory_id)
        if not changes:
            raise invalid("UPDATE_MASK_REQUIRED", "update_mask must name at least one field")
        unknown = set(changes) - UPDATABLE_FIELDS
        if unknown:
            raise invalid("FIELD_NOT_UPDATABLE", f"cannot update: {', '.join(sorted(unknown))}")
        limit = self.deps.settings.max_content_bytes
        if "content" in changes:
            check_content(changes["content"], limit)
        if changes.get("context"):
            check_content(changes["context"], limit, "context")
        if "confidence" in changes:
            check_confidence(changes["confidence"])
        if "user_id" in changes:
            changes["user_id"] = check_free_id(changes["user_id"], "user_id")
        if changes.get("value") is not None:
            check_text(changes["value"], "value", limit)
        if "tags" in changes:
            check_tags(changes["tags"])
        if "metadata" in changes:
            check_metadata(changes["metadata"])
        for name in ("valid_from", "valid_to"):
            check_time(changes.get(name), name)
        if "status" in changes:
            if changes["status"] not in (Status.ACTIVE, Status.PENDING, Status.DELETED):
                raise invalid("INVALID_STATUS", "status may be set to active, pending or deleted")
            changes["status"] = changes["status"].value
        current = await self.deps.memories.get(caller, mid)
        if current is None:
            raise not_found("memory")
        if not caller.can_write(current):
            raise denied("MEMORY_READ_ONLY", "this caller may read but not change that memory")
        changes = await self._screened(caller, current, changes)
        embedding = keywords = entities = None
        if "content" in changes or "context" in changes:
            content = changes.get("content", current.content)
            context = changes.get("context", current.context)
            text = f"{content}\n{context}" if context else content
            vector = (await self.deps.embedder.embed_passages([text]))[0]
            embedding = (vector, self.deps.embedder.model_id)
            keywords = " ".join(keyword_tokens(text))
            entities = extract_entities(text)
        action = "updated"
        if changes.get("status") == "deleted":
            action = "deleted"
        elif current.status is Status.DELETED and changes.get("status") in ("active", "pending"):
            action = "restored"
        record = await self.deps.memories.update(
            caller, mid, changes, embedding=embedding, keywords=keywords, action=action, actor=caller.key_id,
            reason=reason, entities=entities,
            sealing=await self.deps.keys.sealing(current.tenant_id) if "user_id" in changes else None,
        )
        if record is None:
            raise not_found("memory")
        return record

    async def _screened(self, caller: Caller, current: MemoryRecord, changes: dict[str, Any]) -> dict[str, Any]:
        """The changed texts as the content policy lets them be stored (the memory's domain's policy
        too); a tag the policy adds joins the memory's tags."""
        texts = [name for name in ("content", "context", "value", "metadata") if changes.get(name)]
        if not texts:
            return changes
        tags = tuple(changes.get("tags", current.tags))
        draft = MemoryDraft(
            scope=current.scope, domain=current.domain, agent_id=None, layer=None, kind=None,
            content=changes.get("content", ""), context=changes.get("context", ""), value=changes.get("value"),
            metadata=changes.get("metadata") or {}, tags=tags)
        [clean] = await self.deps.content.screen(caller, [draft])
        screened = {**changes, **{name: getattr(clean, name) for name in texts}}
        if clean.tags != tags:
            screened["tags"] = list(clean.tags)
        return screened

    async def history(
        self, caller: Caller, *, memory_id: str | None, entity: str | None, attribute: str | None,
        page_size: int, page_token: str,
    ) -> tuple[builtins.list[HistoryEntry], str]:
        caller.require_tenant()
        if (memory_id is None) == (entity is None):
            raise invalid("SUBJECT_REQUIRED", "give exactly one of memory_id or entity")
        if entity is not None and not entity.strip():
            raise invalid("ENTITY_REQUIRED", "entity must not be empty")
        check_free_id(entity, "entity")
        check_free_id(attribute, "attribute")
        size = clamp_page_size(page_size)
        position = decode_position(page_token, "int")
        mid = parse_memory_id(memory_id) if memory_id is not None else None
        if mid is not None and await self.deps.memories.get(caller, mid) is None:
            raise not_found("memory")
        rows = await self.deps.memories.history(
            caller, memory_id=mid, entity=entity, attribute=attribute or None, limit=size + 1,
            before_seq=position[0] if position else None,
        )
        page = rows[:size]
        token = encode_token([page[-1][0]]) if len(rows) > size else ""
        return [entry for _, entry in page], token

    async def feedback(
        self, caller: Caller, memory_ids: builtins.list[str], useful: bool, comment: str, *, task_id: str = "",
        outcome: str | None = None,
    ) -> builtins.list[MemoryRecord]:
        caller.require_writer()
        if not memory_ids:
            raise invalid("IDS_REQUIRED", "memory_ids must not be empty")
        check_text(comment, "comment", MAX_NOTE_BYTES)
        check_free_id(task_id, "task_id")
        if len(memory_ids) > self.deps.settings.max_batch:
            raise invalid("BATCH_TOO_LARGE", f"at most {self.deps.settings.max_batch} ids per call")
        if outcome:
            return await apply_outcome(self.deps.memories, self.deps.settings.pending_threshold, caller, memory_ids, task_id=task_id, outcome=outcome, comment=comment)
        out = []
        for current in await changeable(self.deps.memories, caller, memory_ids):
            mid = current.stored_id
            step = FEEDBACK_STEP if useful else -FEEDBACK_STEP
            confidence = round(min(1.0, max(0.0, current.confidence + step)), 4)
            record = await self.deps.memories.update(
                caller, mid, {"confidence": confidence}, embedding=None, keywords=None, action="feedback",
                actor=caller.key_id, reason=comment[:500],
            )
            if record is None:
                raise not_found("memory")
            out.append(record)
        return out

    async def stats(self, caller: Caller, f: MemoryFilter) -> MemoryStats:
        caller.require_tenant()
        stats = await self.deps.memories.stats(caller, f if f.statuses else replace(f, statuses=tuple(Status)))
        waiting, age, upgrades = await self.deps.contexts.backlog(caller)
        return replace(stats, awaiting_context=waiting, context_backlog_seconds=age, awaiting_upgrade=upgrades)
