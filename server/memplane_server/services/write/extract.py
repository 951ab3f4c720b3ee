"""LLM extraction on Write: the raw turns are stored first, then a model turns them into
operations on structured facts, which are applied like any write (supersede, re-observe)."""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Protocol

from opentelemetry import metrics

from ...core.access.caller import Caller, caller_to_json
from ...core.access.requests import RequestKey
from ...core.errors import Code, MemplaneError, invalid
from ...core.model import Kind, Layer, MemoryDraft, MemoryFilter, MemoryRecord
from ...core.operations import Operation
from ...core.timezones import parse_time_zone, render
from ...core.write.claims import names, ungrounded
from ...llm.chat import went_without
from ...llm.extraction import KnownFact, Turn, extract
from ...llm.extraction import Operation as Claim
from .deps import WriteDeps

log = logging.getLogger(__name__)
_dropped = metrics.get_meter("memplane.server").create_counter(
    "memplane.extraction.claims_dropped", unit="{claim}", description="extracted claims not grounded in their input")

CONTEXT_TURNS = 20
KNOWN_FACTS = 30


@dataclass
class ExtractOutcome:
    memories: list[MemoryRecord] = field(default_factory=list)
    deleted: list[uuid.UUID] = field(default_factory=list)
    dropped: int = 0  # claims not grounded in what the model read (core/write/claims.py)
    degraded: str = ""  # why the model's answer was not used, when it was not


def as_known(claim: Claim, current: dict[tuple[str, str], str]) -> Claim:
    """The known fact an UPDATE or DELETE is about, when its names miss it and its old value points
    at exactly one: a small model renamed "job" "occupation" when the job changed (the old job stayed
    current beside the new one), and deleted "user.dog" for "I no longer have Rex" where Rex was
    "user.pet_name". An UPDATE under known names keeps them (the new value replaces that fact); a
    DELETE goes to the fact holding the old value it names. The names are the store's; the model's
    old value only points at one."""
    if claim.op not in ("UPDATE", "DELETE") or not claim.old_value:
        return claim
    named = current.get((claim.entity, claim.attribute))
    if named is not None and (claim.op == "UPDATE" or named.casefold() == claim.old_value.casefold()):
        return claim
    holding = [key for key, value in current.items() if value.casefold() == claim.old_value.casefold()]
    if len(holding) != 1:
        return claim
    [(entity, attribute)] = holding
    return replace(claim, entity=entity, attribute=attribute)


class FactWriter(Protocol):
    async def write(
        self, caller: Caller, drafts: list[MemoryDraft], request: RequestKey | None = None, *, derived: bool = False,
    ) -> list[MemoryRecord]: ...


class ExtractService:
    def __init__(self, deps: WriteDeps, writes: FactWriter) -> None:
        self.deps = deps
        self.writes = writes

    def check(self, drafts: list[MemoryDraft]) -> None:
        """Refuses an extraction that cannot run before anything is stored."""
        if self.deps.llm is None:
            raise MemplaneError(Code.FAILED_PRECONDITION, "LLM_NOT_CONFIGURED", "set MEMPLANE_LLM_MODEL to use infer")
        if not any(d.kind is Kind.TURN for d in drafts):
            raise invalid("TURNS_REQUIRED", "infer extracts from turns: write at least one memory of kind TURN")
        if any(d.layer is Layer.WORKING for d in drafts):
            raise invalid("INFER_NOT_FOR_WORKING", "infer applies to persistent turns, not working memory")

    async def after_stored(
        self, caller: Caller, records: list[MemoryRecord], infer: str, time_zone: str | None,
    ) -> tuple[ExtractOutcome, Operation | None]:
        """Extracts from turns already stored: "sync" returns the facts (or why the model's answer
        was not used), else (or when the model fails, so that nothing is lost) a job does it and its
        operation is returned."""
        turn_ids = [str(r.id) for r in records if r.kind is Kind.TURN]
        if infer == "sync":
            try:
                return await self.run(caller, turn_ids, time_zone), None
            except Exception as exc:  # the model failed: keep the write, leave a retriable job
                log.warning("synchronous extraction failed, queued for retry: %s", exc)
        return ExtractOutcome(), await self.enqueue(caller, turn_ids, time_zone)

    async def enqueue(self, caller: Caller, turn_ids: list[str], time_zone: str | None = None) -> Operation:
        payload = {"turn_ids": turn_ids, "time_zone": time_zone}
        return await self.deps.jobs.enqueue(caller, "extract", payload, caller_to_json(caller))

    async def run(
        self, caller: Caller, turn_ids: list[str], time_zone: str | None = None, request: RequestKey | None = None
    ) -> ExtractOutcome:
        if self.deps.llm is None:
            raise MemplaneError(Code.FAILED_PRECONDITION, "LLM_NOT_CONFIGURED", "set MEMPLANE_LLM_MODEL to extract")
        turns = [t for t in [await self.deps.memories.get(caller, uuid.UUID(i)) for i in turn_ids] if t is not None]
        if not turns:
            return ExtractOutcome()
        first = turns[0]
        context: list[MemoryRecord] = []
        if first.session_id:
            earlier = await self.deps.memories.list(
                caller, MemoryFilter(session_id=first.session_id, kinds=(Kind.TURN,)), limit=CONTEXT_TURNS + len(turns),
                after=None,
            )
            new_ids = {t.id for t in turns}
            context = [m for m in reversed(earlier) if m.id not in new_ids][-CONTEXT_TURNS:]
        query = await self.deps.embedder.embed_query(" ".join(t.content for t in turns))
        # The known facts are the turns' user's: another user's "user.diet = vegetarian" is no fact
        # about this one, and a model shown it restated it as this user's (bench/hindsight.py).
        candidates = await self.deps.memories.vector_search(
            caller, MemoryFilter(kinds=(Kind.FACT, Kind.PREFERENCE), user_id=first.user_id), query,
            limit=KNOWN_FACTS, as_of=None,
        )
        zone = parse_time_zone(time_zone)
        known = [
            KnownFact(c.record.entity, c.record.attribute, c.record.value or c.record.content,
                      render(c.record.changed_at, zone))
            for c in candidates if c.record.entity and c.record.attribute
        ]
        try:
            proposed = await extract(
                self.deps.llm, known, [Turn(str(t.id), t.content) for t in context],
                [Turn(str(t.id), t.content) for t in turns], render(datetime.now(timezone.utc), zone),
            )
        except MemplaneError as exc:
            if went_without("extraction", exc) is None:
                raise
            return ExtractOutcome(degraded=f"extraction went without the model ({exc.reason}: {exc.message});"
                                           " the turns are stored, no fact was taken from them")
        shown = "\n".join([*(t.content for t in [*context, *turns]), *(f"{k.entity} {k.attribute} {k.value}" for k in known)])
        current = {(k.entity, k.attribute): k.value for k in known}
        claims = [as_known(op, current) for op in proposed]
        operations = [op for op in claims
                      if self._grounded(op, {str(t.id): t.content for t in turns}, shown, current)]
        outcome = await self._apply(caller, first, operations, request, [*context, *turns], turns)
        outcome.dropped = len(proposed) - len(operations)
        return outcome

    @staticmethod
    def _grounded(op: Claim, new_turns: dict[str, str], shown: str, current: dict[tuple[str, str], str]) -> bool:
        why = ungrounded(op.evidence, new_turns.get(op.source_turn, ""), op.value, shown,
                         current.get((op.entity, op.attribute)))
        if why is None and op.op == "DELETE":
            deleted = current.get((op.entity, op.attribute))
            if deleted is None:
                why = "it deletes no known fact of the turns' user"
            elif not names(op.evidence, deleted):
                why = "its evidence does not name the value it deletes"
        if why is not None:
            _dropped.add(1, {"memplane.reason": why})
            log.info("extraction: a %s of %s.%s dropped: %s", op.op, op.entity, op.attribute, why)
        return why is None

    async def _apply(
        self, caller: Caller, first: MemoryRecord, operations: list[Claim], request: RequestKey | None,
        read: list[MemoryRecord], new: list[MemoryRecord],
    ) -> ExtractOutcome:
        outcome = ExtractOutcome()
        read_ids = {str(t.id): t.stored_id for t in read}

        def derived_from(source_turn: str | None) -> tuple[uuid.UUID, ...]:
            # The turn the model names, else every new turn: forgetting it forgets the fact.
            if source_turn and source_turn in read_ids:
                return (read_ids[source_turn],)
            return tuple(t.stored_id for t in new)

        drafts = [
            MemoryDraft(
                scope=first.scope, domain=first.domain, agent_id=None, layer=None, kind=op.kind, content=op.content,
                entity=op.entity, attribute=op.attribute, value=op.value, confidence=op.confidence,
                user_id=first.user_id, session_id=first.session_id, source_type="turn",
                source_id=op.source_turn or str(first.id), derived_from=derived_from(op.source_turn),
            )
            for op in operations if op.op in ("ADD", "UPDATE")
        ]
        if drafts:
            outcome.memories = await self.writes.write(caller, drafts, request, derived=True)
        for op in operations:
            if op.op == "DELETE":
                # The turns' user's fact only: another user's of the same entity and attribute stays.
                holding = await self.deps.memories.list(
                    caller, MemoryFilter(entity=op.entity, attribute=op.attribute, user_id=first.user_id,
                                         kinds=(Kind.FACT, Kind.PREFERENCE)), limit=10, after=None,
                )
                if holding:
                    _, ids = await self.deps.memories.forget(
                        caller, ids=[m.stored_id for m in holding], f=None, hard=False, dry_run=False, actor=caller.key_id,
                        reason=f"extraction: turn {op.source_turn} says it no longer holds",
                    )
                    outcome.deleted.extend(ids)
        return outcome

