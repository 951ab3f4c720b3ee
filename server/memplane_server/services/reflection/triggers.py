"""Session reflections decided by what a write did (core/reflection/triggers.py): every
MEMPLANE_REFLECT_EVERY_TURNS turns of a session, and (MEMPLANE_REFLECT_ON_ENTITY_CHANGE) when a
fact or preference of the session replaces an earlier value. Each one runs as a reflect job and
its decision is kept with the session's turn count at the time."""
from __future__ import annotations

from ...core.access.caller import WRITING_ROLES, Caller, caller_to_json
from ...core.model import Kind, Layer, MemoryRecord
from ...core.reflection.reflection import ReflectInput, input_to_json
from ...core.reflection.triggers import Decision, turns_decision
from .deps import ReflectionDeps


async def after_write(deps: ReflectionDeps, caller: Caller, records: list[MemoryRecord]) -> None:
    s = deps.settings
    if not (s.reflect_every_turns or s.reflect_on_entity_change) or caller.role not in WRITING_ROLES:
        return
    due: dict[str, Decision | None] = {}
    for r in records:
        if not r.session_id or r.layer is Layer.WORKING:
            continue
        if s.reflect_on_entity_change and r.supersedes and r.entity and r.kind in (Kind.FACT, Kind.PREFERENCE):
            due[r.session_id] = Decision(True, f"{r.entity}.{r.attribute or ''} changed".rstrip("."))
        elif r.kind is Kind.TURN:
            due.setdefault(r.session_id, None)
    for session_id, decision in due.items():
        turns, at_last = await deps.decisions.session_turns(caller, session_id)
        decision = decision or turns_decision(turns, at_last, s.reflect_every_turns)
        if decision is None:
            continue
        operation = await deps.jobs.enqueue(
            caller, "reflect", input_to_json(ReflectInput(session_id=session_id)), caller_to_json(caller))
        await deps.decisions.record(caller, subject_type="session", subject_id=session_id, decision="ran",
                                    reason=decision.reason, sealing=await deps.keys.sealing(caller.require_tenant()),
                                    turns=turns, operation_id=operation.id)
