"""Task outcomes move the confidence of the lessons and procedures the task used (core/reflection/confidence.py):
the guard against a stale lesson polluting every later task. Reached through SubmitFeedback with an
outcome and through Reflect on a task that lists the memories it used."""
from __future__ import annotations

from ...core.access.caller import Caller
from ...core.errors import not_found
from ...core.model import MemoryRecord
from ...core.reflection.confidence import OUTCOME_KINDS, after_outcome, served_status
from ...stores.postgres.memories import MemoryStore
from ..changeable import changeable


async def apply_outcome(
    memories: MemoryStore, pending_threshold: float, caller: Caller, memory_ids: list[str], *, task_id: str,
    outcome: str, comment: str = "",
) -> list[MemoryRecord]:
    """The memories, in order, after the outcome; other kinds come back unchanged. A task's outcome
    counts once per memory: reported again under the same task id it changes nothing."""
    out = []
    for current in await changeable(memories, caller, memory_ids):
        confidence = after_outcome(current.confidence, outcome)
        if current.kind not in OUTCOME_KINDS or confidence == current.confidence:
            out.append(current)
            continue
        changes: dict = {"confidence": confidence}
        status = served_status(current.status, confidence, pending_threshold)
        if status is not current.status:
            changes["status"] = status.value
        note = f"; {comment[:400]}" if comment else ""
        reason = (f"used in task {task_id or '(no id)'}, {outcome}: confidence {current.confidence:.3f}"
                  f" -> {confidence:.3f}{note}")
        if task_id:
            record = await memories.apply_task_outcome(
                caller, current.stored_id, task_id=task_id, outcome=outcome, changes=changes, actor=caller.key_id,
                reason=reason)
        else:  # nothing names the task: each report counts
            record = await memories.update(
                caller, current.stored_id, changes, embedding=None, keywords=None, action="feedback", actor=caller.key_id,
                reason=reason)
        if record is None:
            raise not_found("memory")
        out.append(record)
    return out
