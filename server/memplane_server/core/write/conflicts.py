"""When a new value of an entity attribute is held back as a conflict instead of replacing the
current one.

Replacing is right for the ordinary update ("I moved to Shenzhen"), so the rule is narrow: the
current value must be confident (MEMPLANE_CONFLICT_MIN_CONFIDENCE), and either another agent
wrote it (two agents disagreeing about the same shared fact), or it was written within
MEMPLANE_CONFLICT_WINDOW_SECONDS (off by default: a value changed moments after it was set is
more often a correction than a contradiction, so an operator chooses to hold those back).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..model import MemoryDraft, MemoryRecord, Status
from .observations import same_statement


@dataclass(frozen=True)
class ConflictRule:
    window_seconds: float
    min_confidence: float


def conflict_reason(current: MemoryRecord, new: MemoryDraft, now: datetime, rule: ConflictRule) -> str | None:
    """Why the new value must wait for confirmation, or None when it simply replaces the current one."""
    if current.status is not Status.ACTIVE or current.confidence < rule.min_confidence:
        return None
    if same_statement(current.value or current.content, new.value or new.content):
        return None
    if current.agent_id and new.agent_id and current.agent_id != new.agent_id:
        return f"agents {current.agent_id} and {new.agent_id} disagree"
    if rule.window_seconds and current.created_at and (now - current.created_at).total_seconds() <= rule.window_seconds:
        return f"contradicts a value set {int((now - current.created_at).total_seconds())} s before"
    return None
